/* SPDX-License-Identifier: BSD-3-Clause */
/* The operations, on the worker thread, through Gloo's options API. What Gloo lacks is composed here:
 * reduce_scatter(_v) as an allreduce into scratch, displaced v-layouts packed through scratch, in-place gathers,
 * scatters and all_to_all through a copy. Non-reducing operations move bytes; reducing ones pass the core's kernel. */
#include "gloo.h"

#include <cstring>
#include <initializer_list>
#include <numeric>

#pragma GCC visibility push(default)
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>
#pragma GCC visibility pop

namespace tcg {
namespace {

/* Point-to-point slots live above every collective prefix Gloo uses (0x01-0x08 in the top byte). Bit 55 tells the
 * two directions of a pair apart; bits 39-54 hold the message's shape (below); the low bits count messages in that
 * direction, so they match in order. */
constexpr uint64_t kP2PSlotBase = 0xF0ull << 56;
constexpr int kP2PShapeShift = 39;
constexpr uint64_t kP2PSeqMask = (1ull << kP2PShapeShift) - 1;

/* Gloo ends the process (an exception on its device thread) when a message is longer than the buffer posted for
 * it, which is what ranks disagreeing about a call's counts produce. It moves data only between a send and a receive
 * posted on the same slot, so a hash of what must agree across ranks, put into every slot, turns such a call into a
 * timeout on every rank instead. 16 bits: a disagreement goes unnoticed with odds of 1 in 65536. */
uint32_t shape_hash(std::initializer_list<uint64_t> fields)
{
    uint32_t h = 2166136261u;
    for (uint64_t v : fields)
        for (int i = 0; i < 8; i++)
            h = (h ^ static_cast<uint8_t>(v >> (8 * i))) * 16777619u;
    return (h >> 16) ^ (h & 0xFFFFu);
}

/* What every rank of a collective passes alike: the type; bytes per rank, or for reductions the count, dtype and
 * op; the root; the full count list of the v-forms where every rank passes the same (all_to_all_v's differ). */
uint32_t collective_shape(const Comm &c, const tcomms_coll_args_t &a)
{
    uint64_t type = static_cast<uint64_t>(a.type), dtype = static_cast<uint64_t>(a.dtype);
    uint64_t op = static_cast<uint64_t>(a.op), root = static_cast<uint64_t>(a.peer);
    uint64_t bytes = a.count * c.core->dtype_size(a.dtype);
    switch (a.type) {
    case TCOMMS_COLL_ALL_REDUCE:
    case TCOMMS_COLL_REDUCE_SCATTER:
        return shape_hash({type, a.count, dtype, op});
    case TCOMMS_COLL_REDUCE:
        return shape_hash({type, a.count, dtype, op, root});
    case TCOMMS_COLL_BROADCAST:
    case TCOMMS_COLL_GATHER:
    case TCOMMS_COLL_SCATTER:
        return shape_hash({type, bytes, root});
    case TCOMMS_COLL_ALL_GATHER:
    case TCOMMS_COLL_ALL_TO_ALL:
        return shape_hash({type, bytes});
    case TCOMMS_COLL_ALL_GATHER_V:
    case TCOMMS_COLL_REDUCE_SCATTER_V: {
        uint32_t h = shape_hash({type, dtype, op});
        for (int r = 0; r < c.size; r++)
            h = shape_hash({h, a.recvcounts[r]});
        return h;
    }
    case TCOMMS_COLL_ALL_TO_ALL_V:
        return shape_hash({type, dtype});
    default:
        return shape_hash({type});
    }
}

/* Gloo may not be given a null pointer for an empty transfer it still has to take part in. */
uint8_t empty_byte;

using Scratch = std::unique_ptr<uint8_t[]>;

Scratch scratch(size_t bytes)
{
    return Scratch(new uint8_t[bytes ? bytes : 1]);
}

uint8_t *u8(const void *p)
{
    return static_cast<uint8_t *>(const_cast<void *>(p));
}

/* One running operation: the communicator, the arguments and what every Gloo call shares. */
struct Op {
    Comm &c;
    const tcomms_coll_args_t &a;
    size_t esz;
    uint32_t tag;
    std::chrono::milliseconds timeout;

    size_t bytes(size_t n) const { return n * esz; }
    template <typename O> void tune(O &o) const
    {
        o.setTag(tag);
        o.setTimeout(timeout);
    }
    void finish_avg(void *buf, size_t n) const
    {
        if (a.op == TCOMMS_AVG && n)
            c.core->avg_finish(buf, n, a.dtype, c.size);
    }
};

/* Reductions need an element type of the right width (Gloo hands the kernel whole elements); the core's kernel
 * does the arithmetic, so an unsigned integer of that width stands in for every dtype. */
template <typename F> void with_width(size_t esz, F &&f)
{
    switch (esz) {
    case 1: f(uint8_t()); break;
    case 2: f(uint16_t()); break;
    case 4: f(uint32_t()); break;
    case 8: f(uint64_t()); break;
    default: throw Error(TCOMMS_ERR_INTERNAL, strf("no element type of %zu bytes", esz));
    }
}

/* out = op over ranks of in (n elements; in == out is in place). */
void allreduce_into(const Op &op, const void *in, void *out, size_t n)
{
    tcomms_reduce_fn_t fn = op.c.core->reduce_fn(op.a.dtype, op.a.op);
    with_width(op.esz, [&](auto width) {
        using T = decltype(width);
        gloo::AllreduceOptions o(op.c.ctx);
        if (in != out)
            o.setInput(static_cast<T *>(const_cast<void *>(in)), n);
        o.setOutput(static_cast<T *>(out), n);
        o.setReduceFunction(fn);
        op.tune(o);
        gloo::allreduce(o);
    });
}

void all_reduce(const Op &op)
{
    if (!op.a.count)
        return;
    allreduce_into(op, op.a.sendbuf, op.a.recvbuf, op.a.count);
    op.finish_avg(op.a.recvbuf, op.a.count);
}

void reduce(const Op &op)
{
    size_t n = op.a.count;
    if (!n)
        return;
    bool root = op.c.rank == op.a.peer;
    Scratch tmp;
    void *out = op.a.recvbuf;
    if (!root) { /* Gloo's ring uses the output as working space on every rank */
        tmp = scratch(op.bytes(n));
        out = tmp.get();
    }
    tcomms_reduce_fn_t fn = op.c.core->reduce_fn(op.a.dtype, op.a.op);
    with_width(op.esz, [&](auto width) {
        using T = decltype(width);
        gloo::ReduceOptions o(op.c.ctx);
        if (op.a.sendbuf != out)
            o.setInput(static_cast<T *>(const_cast<void *>(op.a.sendbuf)), n);
        o.setOutput(static_cast<T *>(out), n);
        o.setRoot(op.a.peer);
        o.setReduceFunction(fn);
        op.tune(o);
        gloo::reduce(o);
    });
    if (root)
        op.finish_avg(out, n);
}

/* block r of the reduction (counts[r] elements, packed in rank order) lands on rank r. */
void reduce_scatter(const Op &op, const size_t *counts)
{
    std::vector<size_t> off(static_cast<size_t>(op.c.size) + 1, 0);
    for (int r = 0; r < op.c.size; r++)
        off[r + 1] = off[r] + counts[r];
    size_t total = off.back();
    if (!total)
        return;
    Scratch tmp = scratch(op.bytes(total));
    allreduce_into(op, op.a.sendbuf, tmp.get(), total);
    size_t mine = counts[op.c.rank];
    if (mine)
        memcpy(op.a.recvbuf, tmp.get() + op.bytes(off[op.c.rank]), op.bytes(mine));
    op.finish_avg(op.a.recvbuf, mine);
}

void broadcast(const Op &op)
{
    size_t nb = op.bytes(op.a.count);
    if (!nb)
        return;
    gloo::BroadcastOptions o(op.c.ctx);
    o.setOutput(u8(op.a.recvbuf ? op.a.recvbuf : op.a.sendbuf), nb);
    o.setRoot(op.a.peer);
    op.tune(o);
    gloo::broadcast(o);
}

void all_gather(const Op &op)
{
    size_t nb = op.bytes(op.a.count);
    if (!nb)
        return;
    uint8_t *out = u8(op.a.recvbuf);
    gloo::AllgatherOptions o(op.c.ctx);
    if (op.a.sendbuf != out + op.c.rank * nb) /* in place: Gloo then reads our block from the output */
        o.setInput(u8(op.a.sendbuf), nb);
    o.setOutput(out, nb * op.c.size);
    op.tune(o);
    gloo::allgather(o);
}

/* Per-rank byte counts and packed byte offsets of `counts`; true when `displs` (elements) is the packed layout. */
bool layout(const Op &op, const size_t *counts, const size_t *displs, std::vector<size_t> &nbytes,
            std::vector<size_t> &offsets)
{
    bool packed = true;
    size_t at = 0;
    nbytes.resize(static_cast<size_t>(op.c.size));
    offsets.resize(static_cast<size_t>(op.c.size));
    for (int r = 0; r < op.c.size; r++) {
        nbytes[r] = op.bytes(counts[r]);
        offsets[r] = at;
        if (displs && op.bytes(displs[r]) != at)
            packed = false;
        at += nbytes[r];
    }
    return packed;
}

void all_gather_v(const Op &op)
{
    const size_t *displs = op.a.rdispls;
    std::vector<size_t> nb, off;
    bool packed = layout(op, op.a.recvcounts, displs, nb, off);
    size_t total = off.back() + nb.back();
    if (!total) /* recvcounts agree across ranks: everyone skips */
        return;
    Scratch tmp;
    uint8_t *target = u8(op.a.recvbuf);
    if (!packed) {
        tmp = scratch(total);
        target = tmp.get();
    }
    uint8_t *own = target + off[op.c.rank];
    if (nb[op.c.rank] && own != op.a.sendbuf)
        memcpy(own, op.a.sendbuf, nb[op.c.rank]);
    gloo::AllgathervOptions o(op.c.ctx);
    o.setOutput(target, nb);
    op.tune(o);
    gloo::allgatherv(o);
    if (!packed)
        for (int r = 0; r < op.c.size; r++)
            if (nb[r])
                memcpy(u8(op.a.recvbuf) + op.bytes(displs[r]), target + off[r], nb[r]);
}

void all_to_all(const Op &op)
{
    size_t nb = op.bytes(op.a.count) * op.c.size;
    if (!nb)
        return;
    const void *in = op.a.sendbuf;
    Scratch tmp;
    if (in == op.a.recvbuf) {
        tmp = scratch(nb);
        memcpy(tmp.get(), in, nb);
        in = tmp.get();
    }
    gloo::AlltoallOptions o(op.c.ctx);
    o.setInput(u8(in), nb);
    o.setOutput(u8(op.a.recvbuf), nb);
    op.tune(o);
    gloo::alltoall(o);
}

/* Every rank takes part even with nothing to move: its peers wait for its (empty) messages. */
void all_to_all_v(const Op &op)
{
    std::vector<size_t> snb, soff, rnb, roff;
    bool spacked = layout(op, op.a.sendcounts, op.a.sdispls, snb, soff);
    bool rpacked = layout(op, op.a.recvcounts, op.a.rdispls, rnb, roff);
    size_t stotal = soff.back() + snb.back(), rtotal = roff.back() + rnb.back();
    Scratch stmp, rtmp;
    uint8_t *src = stotal ? u8(op.a.sendbuf) : &empty_byte;
    uint8_t *dst = rtotal ? u8(op.a.recvbuf) : &empty_byte;
    if (!spacked && stotal) {
        stmp = scratch(stotal);
        for (int r = 0; r < op.c.size; r++)
            if (snb[r])
                memcpy(stmp.get() + soff[r], src + op.bytes(op.a.sdispls[r]), snb[r]);
        src = stmp.get();
    }
    if (!rpacked && rtotal) {
        rtmp = scratch(rtotal);
        dst = rtmp.get();
    }
    std::vector<int64_t> sper(snb.begin(), snb.end()), rper(rnb.begin(), rnb.end());
    gloo::AlltoallvOptions o(op.c.ctx);
    o.setInput(src, sper);
    o.setOutput(dst, rper);
    op.tune(o);
    gloo::alltoallv(o);
    if (!rpacked && rtotal)
        for (int r = 0; r < op.c.size; r++)
            if (rnb[r])
                memcpy(u8(op.a.recvbuf) + op.bytes(op.a.rdispls[r]), dst + roff[r], rnb[r]);
}

void gather(const Op &op)
{
    size_t nb = op.bytes(op.a.count);
    if (!nb)
        return;
    bool root = op.c.rank == op.a.peer;
    const void *in = op.a.sendbuf;
    Scratch tmp;
    if (root && in == u8(op.a.recvbuf) + op.c.rank * nb) { /* Gloo would copy the block onto itself */
        tmp = scratch(nb);
        memcpy(tmp.get(), in, nb);
        in = tmp.get();
    }
    gloo::GatherOptions o(op.c.ctx);
    o.setInput(u8(in), nb);
    if (root)
        o.setOutput(u8(op.a.recvbuf), nb * op.c.size);
    o.setRoot(op.a.peer);
    op.tune(o);
    gloo::gather(o);
}

void scatter(const Op &op)
{
    size_t nb = op.bytes(op.a.count);
    if (!nb)
        return;
    gloo::ScatterOptions o(op.c.ctx);
    Scratch tmp;
    uint8_t *out = u8(op.a.recvbuf);
    if (op.c.rank == op.a.peer) {
        std::vector<uint8_t *> blocks(static_cast<size_t>(op.c.size));
        for (int r = 0; r < op.c.size; r++)
            blocks[r] = u8(op.a.sendbuf) + r * nb;
        o.setInputs(blocks, nb);
        if (out == blocks[op.c.rank]) { /* in place: our block is already there */
            tmp = scratch(nb);
            out = tmp.get();
        }
    }
    o.setOutput(out, nb);
    o.setRoot(op.a.peer);
    op.tune(o);
    gloo::scatter(o);
}

void barrier(const Op &op)
{
    gloo::BarrierOptions o(op.c.ctx);
    op.tune(o);
    gloo::barrier(o);
}

void wait_p2p(const Op &op, Work &w)
{
    bool ok = op.a.type == TCOMMS_COLL_SEND ? w.p2p->waitSend(op.timeout) : w.p2p->waitRecv(op.timeout);
    if (!ok)
        throw Error(TCOMMS_ERR_INTERNAL, "transfer aborted");
}

/* A communicator of one has no Gloo pairs (and Gloo's ring algorithms insist on them): every collective is a
 * local copy from the caller's send block to its receive block. */
void run_alone(const Op &op)
{
    const tcomms_coll_args_t &a = op.a;
    const uint8_t *src = u8(a.sendbuf);
    uint8_t *dst = u8(a.recvbuf);
    size_t n = a.count;
    switch (a.type) {
    case TCOMMS_COLL_BROADCAST:
    case TCOMMS_COLL_BARRIER:
        return;
    case TCOMMS_COLL_ALL_GATHER_V:
        n = a.recvcounts[0];
        dst += op.bytes(a.rdispls ? a.rdispls[0] : 0);
        break;
    case TCOMMS_COLL_REDUCE_SCATTER_V:
        n = a.recvcounts[0];
        break;
    case TCOMMS_COLL_ALL_TO_ALL_V:
        n = a.sendcounts[0];
        src += op.bytes(a.sdispls ? a.sdispls[0] : 0);
        dst += op.bytes(a.rdispls ? a.rdispls[0] : 0);
        break;
    default: /* send/recv never get here: their only possible peer is this rank, refused at post */
        break;
    }
    if (n && src != dst)
        memmove(dst, src, op.bytes(n));
}

} // namespace

void start_p2p(Comm &c, Work &w)
{
    const tcomms_coll_args_t &a = w.args;
    bool send = a.type == TCOMMS_COLL_SEND;
    size_t nb = a.count * c.core->dtype_size(a.dtype);
    /* tcomms_send/recv take one buffer; accept it in either field. */
    const void *mine = send ? a.sendbuf : a.recvbuf;
    void *buf = u8(mine ? mine : (send ? a.recvbuf : a.sendbuf));
    if (!nb || !buf)
        buf = &empty_byte;
    uint64_t seq = send ? c.send_seq[a.peer]++ : c.recv_seq[a.peer]++;
    int from = send ? c.rank : a.peer, to = send ? a.peer : c.rank;
    uint64_t shape = shape_hash({nb});
    uint64_t slot = kP2PSlotBase | (static_cast<uint64_t>(from < to) << 55) | (shape << kP2PShapeShift) |
                    (seq & kP2PSeqMask);
    w.p2p = c.ctx->createUnboundBuffer(buf, nb);
    if (send)
        w.p2p->send(a.peer, slot);
    else
        w.p2p->recv(a.peer, slot);
}

uint32_t collective_tag(Comm &c, const tcomms_coll_args_t &a)
{
    return collective_shape(c, a) << 16 | (c.next_tag++ & 0xFFFFu);
}

void run_op(Comm &c, Work &w)
{
    Op op{c, w.args, c.core->dtype_size(w.args.dtype), w.tag, std::chrono::milliseconds(w.args.timeout_ms)};
    if (c.size == 1)
        return run_alone(op);
    switch (w.args.type) {
    case TCOMMS_COLL_ALL_REDUCE: return all_reduce(op);
    case TCOMMS_COLL_BROADCAST: return broadcast(op);
    case TCOMMS_COLL_REDUCE: return reduce(op);
    case TCOMMS_COLL_ALL_GATHER: return all_gather(op);
    case TCOMMS_COLL_ALL_GATHER_V: return all_gather_v(op);
    case TCOMMS_COLL_REDUCE_SCATTER: {
        std::vector<size_t> counts(static_cast<size_t>(c.size), w.args.count);
        return reduce_scatter(op, counts.data());
    }
    case TCOMMS_COLL_REDUCE_SCATTER_V: return reduce_scatter(op, w.args.recvcounts);
    case TCOMMS_COLL_ALL_TO_ALL: return all_to_all(op);
    case TCOMMS_COLL_ALL_TO_ALL_V: return all_to_all_v(op);
    case TCOMMS_COLL_GATHER: return gather(op);
    case TCOMMS_COLL_SCATTER: return scatter(op);
    case TCOMMS_COLL_BARRIER: return barrier(op);
    case TCOMMS_COLL_SEND:
    case TCOMMS_COLL_RECV: return wait_p2p(op, w);
    default: throw Error(TCOMMS_ERR_NOT_SUPPORTED, strf("operation type %d", static_cast<int>(w.args.type)));
    }
}

} // namespace tcg
