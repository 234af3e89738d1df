# SPDX-License-Identifier: BSD-3-Clause
# The tcomms torch.distributed backend (python/tcomms/torch) on CPU tensors: every call a framework makes, over every
# dtype torch reduces, in place and out of place, blocking and async, with odd sizes. Rank r contributes values every
# rank can compute (torch_util.values(r, i)), so each rank checks its results against references computed by plain
# loops in float64, never by another collective.
# ranks: 1 2 3 4
# backends: ucx gloo
# needs: numpy torch
# timeout: 180
import torch
import torch.distributed as dist

import harness
from harness import case
import tcomms.torch
from torch_util import (DTYPES, HAS_AG_TENSOR, HAS_AVG, HAS_PREMUL, HAS_RS_TENSOR, RANK, SIZE, check, init, raises,
                        reduce_ref, tensor, values)

init("tcomms")
OPS = [("sum", dist.ReduceOp.SUM), ("prod", dist.ReduceOp.PRODUCT), ("min", dist.ReduceOp.MIN),
       ("max", dist.ReduceOp.MAX)]
SIZES = (1, 7, 1000)
BIG = 1000003  # for all_reduce, broadcast, reduce, send/recv
MID = 100003  # for the calls whose buffers hold SIZE times as much
NEXT, PREV = (RANK + 1) % SIZE, (RANK - 1) % SIZE


def kind_of(op):
    return "prod" if op == "prod" else "sum"


def all_ranks():
    return range(SIZE)


@case
def world_is_tcomms():
    assert dist.get_backend() == "tcomms", dist.get_backend()
    assert isinstance(dist.group.WORLD, tcomms.torch.ProcessGroupTcomms), type(dist.group.WORLD)
    assert dist.get_rank() == RANK and dist.get_world_size() == SIZE
    comm = tcomms.torch.comm_of()
    assert comm.rank == RANK and comm.size == SIZE
    assert comm.backend("cpu") == harness.BACKEND or not harness.BACKEND, (comm.backend("cpu"), harness.BACKEND)


@case
def all_reduce_ops():
    for dtype in DTYPES:
        for name, op in OPS:
            for n in SIZES:
                t = tensor(RANK, n, dtype, kind_of(name))
                dist.all_reduce(t, op=op)
                check(t, reduce_ref(name, n, dtype, all_ranks(), kind_of(name)), dtype,
                      "all_reduce %s of %d" % (name, n))


@case
def all_reduce_avg():
    # integers: the exact sum divided, truncated toward zero (as NCCL's ncclAvg)
    for dtype in DTYPES:
        for n in SIZES:
            t = tensor(RANK, n, dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            check(t, reduce_ref("avg", n, dtype, all_ranks()), dtype, "all_reduce avg of %d" % n)
    # int64 values whose sum needs more than 32 bits, against an int64 reference
    def big(r):
        return tensor(r, 1000, torch.int64) * (1 << 40) + r * 12345
    t = big(RANK)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    ref = torch.div(sum(big(r) for r in range(SIZE)), SIZE, rounding_mode="trunc")
    check(t, ref.to(torch.float64), torch.int64, "all_reduce avg of int64 beyond 32 bits")  # exact below 2^53


@case
def all_reduce_bool():
    # torch reduces bool as logical or (SUM, MAX) and logical and (PRODUCT, MIN)
    for name, op, ref in (("sum", dist.ReduceOp.SUM, "max"), ("max", dist.ReduceOp.MAX, "max"),
                          ("prod", dist.ReduceOp.PRODUCT, "min"), ("min", dist.ReduceOp.MIN, "min")):
        for n in (1, 7, 1000):
            t = tensor(RANK, n, torch.bool, "bool")
            dist.all_reduce(t, op=op)
            assert t.dtype == torch.bool
            check(t, reduce_ref(ref, n, torch.bool, all_ranks(), "bool"), torch.bool, "all_reduce bool %s" % name)


@case
def all_reduce_big():
    for dtype, name, op, n in ((torch.float32, "sum", dist.ReduceOp.SUM, BIG),
                               (torch.bfloat16, "max", dist.ReduceOp.MAX, MID),
                               (torch.int64, "min", dist.ReduceOp.MIN, MID)):
        t = tensor(RANK, n, dtype)
        dist.all_reduce(t, op=op)
        check(t, reduce_ref(name, n, dtype, all_ranks()), dtype, "all_reduce %s of %d" % (name, n))


@case
def all_reduce_2d_and_view():
    # a 2-D tensor, and a contiguous slice of a larger one (the rest must stay untouched)
    t = tensor(RANK, 6 * 5, torch.float32).reshape(6, 5)
    dist.all_reduce(t)
    check(t, reduce_ref("sum", 30, torch.float32, all_ranks()), torch.float32, "all_reduce 6x5")
    big = torch.full((20,), 100.0)
    part = big[5:12]
    part.copy_(tensor(RANK, 7, torch.float32))
    dist.all_reduce(part, op=dist.ReduceOp.MAX)
    check(big[5:12], reduce_ref("max", 7, torch.float32, all_ranks()), torch.float32, "all_reduce of a view")
    assert bool((big[:5] == 100).all()) and bool((big[12:] == 100).all()), "all_reduce wrote outside its view"


@case
def all_reduce_unsupported_ops():
    t = tensor(RANK, 7, torch.int32)
    for label in ("BAND", "BOR", "BXOR"):
        raises(lambda: dist.all_reduce(t, op=getattr(dist.ReduceOp, label)), label)
    if HAS_PREMUL:
        f = tensor(RANK, 7, torch.float32)
        raises(lambda: dist.all_reduce(f, op=dist._make_nccl_premul_sum(2.0)), "PREMUL_SUM")
    # the group still works, on every rank alike
    t = tensor(RANK, 7, torch.int32)
    dist.all_reduce(t)
    check(t, reduce_ref("sum", 7, torch.int32, all_ranks()), torch.int32, "all_reduce after refused ops")


@case
def all_reduce_async():
    ts = [tensor(RANK, n, torch.float64) for n in (1, 7, 1000)]
    works = [dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True) for t in ts]
    for w in works:
        w.wait()
        assert w.is_completed(), "is_completed() is False after wait()"
    for t, n in zip(ts, (1, 7, 1000)):
        check(t, reduce_ref("sum", n, torch.float64, all_ranks()), torch.float64, "async all_reduce of %d" % n)
    # is_completed() turns True without wait()
    t = tensor(RANK, 7, torch.float32)
    w = dist.all_reduce(t, async_op=True)
    while not w.is_completed():
        pass
    w.wait()
    check(t, reduce_ref("sum", 7, torch.float32, all_ranks()), torch.float32, "all_reduce polled")


@case
def all_gather_list():
    for dtype in DTYPES:
        for n in (1, 7):
            outs = [torch.full((n,), -99, dtype=dtype) for _ in range(SIZE)]
            dist.all_gather(outs, tensor(RANK, n, dtype))
            for r in range(SIZE):
                check(outs[r], values(r, n, dtype), dtype, "all_gather from rank %d" % r)
            # in place: the input is this rank's own output tensor
            outs = [torch.zeros(n, dtype=dtype) for _ in range(SIZE)]
            outs[RANK].copy_(tensor(RANK, n, dtype))
            dist.all_gather(outs, outs[RANK])
            for r in range(SIZE):
                check(outs[r], values(r, n, dtype), dtype, "in-place all_gather from rank %d" % r)


@case
def all_gather_list_uneven():
    # each rank contributes a different number of elements (rank 0 none); every rank sizes its outputs to match
    def count(r):
        return (r * 3) % 4
    for dtype in DTYPES:
        outs = [torch.full((count(r),), -99, dtype=dtype) for r in range(SIZE)]
        dist.all_gather(outs, tensor(RANK, count(RANK), dtype))
        for r in range(SIZE):
            check(outs[r], values(r, count(r), dtype), dtype, "uneven all_gather from rank %d" % r)


@case
def all_gather_into_tensor():
    for dtype in DTYPES:
        for n in (1, 7):
            out = torch.full((SIZE * n,), -99, dtype=dtype)
            dist.all_gather_into_tensor(out, tensor(RANK, n, dtype))
            check(out, torch.cat([values(r, n, dtype) for r in range(SIZE)]), dtype, "all_gather_into_tensor")
            # stacked output: SIZE x n
            out = torch.zeros((SIZE, n), dtype=dtype)
            dist.all_gather_into_tensor(out, tensor(RANK, n, dtype))
            check(out, torch.cat([values(r, n, dtype) for r in range(SIZE)]), dtype, "all_gather_into_tensor 2-D")
            # in place: the input is this rank's block of the output
            out = torch.zeros(SIZE * n, dtype=dtype)
            mine = out[RANK * n:(RANK + 1) * n]
            mine.copy_(tensor(RANK, n, dtype))
            dist.all_gather_into_tensor(out, mine)
            check(out, torch.cat([values(r, n, dtype) for r in range(SIZE)]), dtype, "in-place all_gather_into")
    out = torch.empty(SIZE * MID, dtype=torch.float32)
    dist.all_gather_into_tensor(out, tensor(RANK, MID, torch.float32))
    check(out, torch.cat([values(r, MID, torch.float32) for r in range(SIZE)]), torch.float32,
          "all_gather_into_tensor of %d" % MID)


@case
def reduce_scatter_list():
    for dtype in DTYPES:
        for name, op in OPS:
            n = 7
            k = kind_of(name)
            ins = [tensor(RANK, SIZE * n, dtype, k)[j * n:(j + 1) * n].clone() for j in range(SIZE)]
            out = torch.full((n,), -99, dtype=dtype)
            dist.reduce_scatter(out, ins, op=op)
            ref = reduce_ref(name, SIZE * n, dtype, all_ranks(), k)[RANK * n:(RANK + 1) * n]
            check(out, ref, dtype, "reduce_scatter %s" % name)


@case
def reduce_scatter_tensor():
    ops = OPS + ([("avg", dist.ReduceOp.AVG)] if HAS_AVG else [])
    for dtype in DTYPES:
        for name, op in ops:
            k = kind_of(name)
            for n in (1, 7):
                ref = reduce_ref(name, SIZE * n, dtype, all_ranks(), k)[RANK * n:(RANK + 1) * n]
                out = torch.full((n,), -99, dtype=dtype)
                dist.reduce_scatter_tensor(out, tensor(RANK, SIZE * n, dtype, k), op=op)
                check(out, ref, dtype, "reduce_scatter_tensor %s of %d" % (name, n))
                # 2-D input (SIZE x n)
                out = torch.full((n,), -99, dtype=dtype)
                dist.reduce_scatter_tensor(out, tensor(RANK, SIZE * n, dtype, k).reshape(SIZE, n), op=op)
                check(out, ref, dtype, "reduce_scatter_tensor 2-D %s" % name)
                # in place: the output is this rank's block of the input
                inp = tensor(RANK, SIZE * n, dtype, k)
                mine = inp[RANK * n:(RANK + 1) * n]
                dist.reduce_scatter_tensor(mine, inp, op=op)
                check(mine, ref, dtype, "in-place reduce_scatter_tensor %s" % name)
    n = MID
    out = torch.empty(n, dtype=torch.float32)
    dist.reduce_scatter_tensor(out, tensor(RANK, SIZE * n, torch.float32))
    check(out, reduce_ref("sum", SIZE * n, torch.float32, all_ranks())[RANK * n:(RANK + 1) * n], torch.float32,
          "reduce_scatter_tensor of %d" % n)


@case
def broadcast():
    for root in range(SIZE):
        for dtype in DTYPES:
            for n in (1, 7):
                t = tensor(RANK, n, dtype) if RANK == root else torch.full((n,), -99, dtype=dtype)
                dist.broadcast(t, src=root)
                check(t, values(root, n, dtype), dtype, "broadcast from %d" % root)
    for root in sorted({0, SIZE - 1}):
        t = tensor(RANK, BIG, torch.float32) if RANK == root else torch.zeros(BIG)
        dist.broadcast(t, src=root)
        check(t, values(root, BIG, torch.float32), torch.float32, "broadcast of %d from %d" % (BIG, root))


@case
def reduce():
    for root in range(SIZE):
        for dtype in DTYPES:
            for name, op in OPS:
                k = kind_of(name)
                t = tensor(RANK, 7, dtype, k)
                dist.reduce(t, dst=root, op=op)
                if RANK == root:
                    check(t, reduce_ref(name, 7, dtype, all_ranks(), k), dtype, "reduce %s to %d" % (name, root))
    t = tensor(RANK, BIG, torch.float32)
    dist.reduce(t, dst=SIZE - 1)
    if RANK == SIZE - 1:
        check(t, reduce_ref("sum", BIG, torch.float32, all_ranks()), torch.float32, "reduce of %d" % BIG)


def a2a_count(src, dst):
    """Elements rank src sends rank dst in the uneven forms: 0 for some pairs, different per rank."""
    return (src + 2 * dst + 1) % 4


def a2a_values(src, dst, n, dtype):
    """The piece src sends dst: exact small integers telling both apart."""
    return (src * 16 + dst * 4 + torch.arange(n, dtype=torch.float64) % 4).to(dtype)


@case
def all_to_all_list():
    for dtype in DTYPES:
        ins = [a2a_values(RANK, j, a2a_count(RANK, j), dtype) for j in range(SIZE)]
        outs = [torch.full((a2a_count(j, RANK),), -99, dtype=dtype) for j in range(SIZE)]
        dist.all_to_all(outs, ins)
        for j in range(SIZE):
            check(outs[j], a2a_values(j, RANK, a2a_count(j, RANK), dtype).to(torch.float64), dtype,
                  "all_to_all from rank %d" % j)


@case
def all_to_all_single_even():
    for dtype in DTYPES:
        for n in (1, 7):
            inp = torch.cat([a2a_values(RANK, j, n, dtype) for j in range(SIZE)])
            out = torch.full((SIZE * n,), -99, dtype=dtype)
            dist.all_to_all_single(out, inp)
            ref = torch.cat([a2a_values(j, RANK, n, torch.float64) for j in range(SIZE)])
            check(out, ref, dtype, "all_to_all_single of %d per rank" % n)
    # rows of a 2-D tensor: SIZE * 2 rows of 3
    inp = torch.cat([a2a_values(RANK, j, 6, torch.float32) for j in range(SIZE)]).reshape(SIZE * 2, 3)
    out = torch.zeros(SIZE * 2, 3)
    dist.all_to_all_single(out, inp)
    check(out, torch.cat([a2a_values(j, RANK, 6, torch.float64) for j in range(SIZE)]), torch.float32,
          "all_to_all_single 2-D")


@case
def all_to_all_single_uneven():
    for dtype in DTYPES:
        sc = [a2a_count(RANK, j) for j in range(SIZE)]
        rc = [a2a_count(j, RANK) for j in range(SIZE)]
        inp = torch.cat([a2a_values(RANK, j, sc[j], dtype) for j in range(SIZE)])
        out = torch.full((sum(rc),), -99, dtype=dtype)
        dist.all_to_all_single(out, inp, output_split_sizes=rc, input_split_sizes=sc)
        ref = torch.cat([a2a_values(j, RANK, rc[j], torch.float64) for j in range(SIZE)])
        check(out, ref, dtype, "all_to_all_single with splits %s / %s" % (sc, rc))
    # rows of 5: split sizes count rows
    sc = [a2a_count(RANK, j) for j in range(SIZE)]
    rc = [a2a_count(j, RANK) for j in range(SIZE)]
    inp = torch.cat([a2a_values(RANK, j, 5 * sc[j], torch.float64) for j in range(SIZE)]).reshape(-1, 5)
    out = torch.zeros(sum(rc), 5, dtype=torch.float64)
    dist.all_to_all_single(out, inp, output_split_sizes=rc, input_split_sizes=sc)
    check(out, torch.cat([a2a_values(j, RANK, 5 * rc[j], torch.float64) for j in range(SIZE)]), torch.float64,
          "all_to_all_single 2-D with splits")


@case
def gather():
    for root in range(SIZE):
        for dtype in DTYPES:
            for n in (1, 7):
                outs = [torch.full((n,), -99, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
                dist.gather(tensor(RANK, n, dtype), gather_list=outs, dst=root)
                if RANK == root:
                    for r in range(SIZE):
                        check(outs[r], values(r, n, dtype), dtype, "gather to %d from %d" % (root, r))


@case
def scatter():
    for root in range(SIZE):
        for dtype in DTYPES:
            for n in (1, 7):
                ins = [tensor(100 + r, n, dtype) for r in range(SIZE)] if RANK == root else None
                out = torch.full((n,), -99, dtype=dtype)
                dist.scatter(out, scatter_list=ins, src=root)
                check(out, values(100 + RANK, n, dtype), dtype, "scatter from %d" % root)


@case
def barrier():
    for _ in range(3):
        dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()
    assert w.is_completed()


def _self_send_refused():
    # one rank: a message to oneself is refused (tcomms matches messages between two ranks)
    raises(lambda: dist.send(torch.zeros(3), dst=0))
    t = tensor(RANK, 3, torch.float32)
    dist.all_reduce(t)
    check(t, values(RANK, 3, torch.float32), torch.float32, "all_reduce after a refused send")


@case
def send_recv():
    if SIZE == 1:
        return _self_send_refused()
    for dtype in DTYPES:
        for n in (1, 7, 1000):
            got = torch.full((n,), -99, dtype=dtype)
            # blocking: even ranks send first, odd ranks receive first (the last odd rank of an odd ring waits)
            if RANK % 2 == 0:
                dist.send(tensor(RANK, n, dtype), dst=NEXT)
                dist.recv(got, src=PREV)
            else:
                dist.recv(got, src=PREV)
                dist.send(tensor(RANK, n, dtype), dst=NEXT)
            check(got, values(PREV, n, dtype), dtype, "recv of %d from %d" % (n, PREV))
    if RANK == 0:
        t = tensor(RANK, BIG, torch.float32)
        for peer in range(1, SIZE):
            dist.send(t, dst=peer)
    else:
        t = torch.zeros(BIG)
        dist.recv(t, src=0)
        check(t, values(0, BIG, torch.float32), torch.float32, "recv of %d" % BIG)


@case
def isend_irecv():
    if SIZE == 1:
        return _self_send_refused()
    for dtype in DTYPES:
        fwd, bwd = torch.full((7,), -99, dtype=dtype), torch.full((7,), -99, dtype=dtype)
        works = [dist.irecv(fwd, src=PREV), dist.irecv(bwd, src=NEXT),
                 dist.isend(tensor(RANK, 7, dtype), dst=NEXT), dist.isend(tensor(RANK + 50, 7, dtype), dst=PREV)]
        for w in works:
            w.wait()
            assert w.is_completed()
        check(fwd, values(PREV, 7, dtype), dtype, "irecv from %d" % PREV)
        check(bwd, values(NEXT + 50, 7, dtype), dtype, "irecv from %d" % NEXT)


@case
def batch_isend_irecv():
    if SIZE == 1:
        return _self_send_refused()
    for dtype in DTYPES:
        for n in (1, 7, 1000):
            fwd, bwd = torch.full((n,), -99, dtype=dtype), torch.full((n,), -99, dtype=dtype)
            # with 2 ranks NEXT == PREV: messages of a pair match in order, forward before backward on both
            ops = [dist.P2POp(dist.isend, tensor(RANK, n, dtype), NEXT),
                   dist.P2POp(dist.irecv, fwd, PREV),
                   dist.P2POp(dist.isend, tensor(RANK + 50, n, dtype), PREV),
                   dist.P2POp(dist.irecv, bwd, NEXT)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            check(fwd, values(PREV, n, dtype), dtype, "batch ring forward, from %d" % PREV)
            check(bwd, values(NEXT + 50, n, dtype), dtype, "batch ring backward, from %d" % NEXT)


@case
def async_collectives():
    n = 7
    b = tensor(RANK, n, torch.float32) if RANK == 0 else torch.zeros(n)
    ag = torch.zeros(SIZE * n)
    rs_in, rs = tensor(RANK, SIZE * n, torch.float64), torch.zeros(n, dtype=torch.float64)
    a2a = torch.zeros(SIZE * n, dtype=torch.int64)
    works = [dist.broadcast(b, src=0, async_op=True),
             dist.all_gather_into_tensor(ag, tensor(RANK, n, torch.float32), async_op=True),
             dist.reduce_scatter_tensor(rs, rs_in, async_op=True),
             dist.all_to_all_single(a2a, torch.cat([a2a_values(RANK, j, n, torch.int64) for j in range(SIZE)]),
                                    async_op=True),
             dist.barrier(async_op=True)]
    for w in works:
        w.wait()
        assert w.is_completed()
    check(b, values(0, n, torch.float32), torch.float32, "async broadcast")
    check(ag, torch.cat([values(r, n, torch.float32) for r in range(SIZE)]), torch.float32, "async all_gather")
    check(rs, reduce_ref("sum", SIZE * n, torch.float64, all_ranks())[RANK * n:(RANK + 1) * n], torch.float64,
          "async reduce_scatter")
    check(a2a, torch.cat([a2a_values(j, RANK, n, torch.float64) for j in range(SIZE)]), torch.int64,
          "async all_to_all_single")


# Cases whose torch API this torch lacks are not run, nor reported (torch 1.13 has them all).
for _fn, _has in ((all_reduce_avg, HAS_AVG), (all_gather_into_tensor, HAS_AG_TENSOR),
                  (reduce_scatter_tensor, HAS_RS_TENSOR), (async_collectives, HAS_AG_TENSOR and HAS_RS_TENSOR)):
    if not _has:
        harness.CASES.remove(_fn)
harness.main()
