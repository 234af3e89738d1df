/* SPDX-License-Identifier: BSD-3-Clause */
/* The algorithms with nothing to choose: a point-to-point send or receive (one message under its per-peer tag),
 * every collective on a communicator of one, where the result is the caller's own data copied into place, and the
 * transport warm-up a new context runs once. */
#include <string.h>

#include "ucx.h"

static int p2p_step(tcu_task_t *t)
{
    if (t->round > 0)
        return TCU_DONE;
    size_t bytes = t->a.count * t->esize;
    if (t->a.type == TCOMMS_COLL_SEND)
        tcu_send(t, t->a.peer, 0, t->a.sendbuf, bytes);
    else
        tcu_recv(t, t->a.peer, 0, t->a.recvbuf, bytes);
    return TCU_MORE;
}

const tcu_algo_t tcu_algo_p2p = {"direct", p2p_step};

/* Rank 0 of 1: copy block 0 of the input to block 0 of the output, if they are not the same memory. */
static int alone_step(tcu_task_t *t)
{
    const tcomms_coll_args_t *a = &t->a;
    const unsigned char *src = a->sendbuf;
    unsigned char *dst = a->recvbuf;
    size_t n = a->count;
    switch (a->type) {
    case TCOMMS_COLL_BROADCAST:
    case TCOMMS_COLL_BARRIER:
        return TCU_DONE;
    case TCOMMS_COLL_ALL_GATHER_V:
        dst = tcu_at(dst, a->rdispls[0], t->esize);
        break;
    case TCOMMS_COLL_ALL_TO_ALL_V:
        n = a->sendcounts[0];
        src = tcu_at(src, a->sdispls[0], t->esize);
        dst = tcu_at(dst, a->rdispls[0], t->esize);
        break;
    default: /* every other block 0 starts at the buffer (a.count is this rank's count, v-variants included) */
        break;
    }
    if (n && src != dst)
        memmove(dst, src, n * t->esize);
    return TCU_DONE;
}

const tcu_algo_t tcu_algo_alone = {"alone", alone_step};

/* UCX's shared-memory transports fault in their receive descriptors on first use, and each sender its mapping of
 * a peer's FIFO and descriptors, which costs the first hundred or so mid-sized messages between a pair a few
 * microseconds each. a.count rounds of WARMUP_BYTES (the largest eager size) to each of the next WARMUP_PEERS ranks
 * in turn take that cost at creation instead of in the first timed operations: warming only the ring's right
 * neighbour left all_gather and all_to_all, which send to every peer at once, several times slower for their
 * first few hundred mid-sized calls (docs/ucx.md, "Transport warm-up"). Three peers: every peer of the
 * communicators where those send to all at once (select.c), at a cost that stays bounded on larger ones. */
#define WARMUP_BYTES 8192
#define WARMUP_PEERS 3

static int warmup_step(tcu_task_t *t)
{
    int peers = t->size - 1 < WARMUP_PEERS ? t->size - 1 : WARMUP_PEERS, d = 1 + t->round % peers;
    if ((size_t)t->round >= t->a.count * (size_t)peers)
        return TCU_DONE;
    unsigned char *buf = t->round == 0 ? tcu_scratch(t, 2 * WARMUP_BYTES) : t->scratch;
    if (buf == NULL)
        return TCOMMS_ERR_NO_MEMORY;
    if (t->round == 0)
        memset(buf, 0, WARMUP_BYTES);
    tcu_send(t, (t->rank + d) % t->size, (unsigned)t->round, buf, WARMUP_BYTES);
    tcu_recv(t, tcu_mod(t->rank - d, t->size), (unsigned)t->round, buf + WARMUP_BYTES, WARMUP_BYTES);
    return TCU_MORE;
}

const tcu_algo_t tcu_algo_warmup = {"warmup", warmup_step};
