# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed on tcomms with CUDA tensors, one process per GPU under torchrun:
    python3 -m torch.distributed.run --nproc-per-node N tests/gpu/torch_cuda.py
Seed 003's scenario (a device-bound "cpu:gloo,cuda:tcomms" world, a barrier, new_group with NCCL options whose
hints the child reports), every collective on CUDA tensors against references computed here, torch's stream
semantics and CUDA graph capture, Megatron-style group creation (seed 000), and DDP and FSDP2 (fully_shard)
training over tcomms beside the same over torch's own nccl (losses compared bit for bit). Each rank prints
"RESULT <case> ok|FAIL <reason>" (tests/python/harness.py)."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import harness  # noqa: E402
from harness import case  # noqa: E402

import tcomms  # noqa: E402
import tcomms.torch  # noqa: E402

LOCAL = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(LOCAL)
DEV = torch.device("cuda", LOCAL)
dist.init_process_group("cpu:gloo,cuda:tcomms", device_id=DEV)
RANK, N = dist.get_rank(), dist.get_world_size()
dist.barrier(device_ids=[LOCAL])
NCCL = dist.new_group(list(range(N)), backend="nccl")  # torch's own, for the comparisons


def vals(rank, n, dtype):
    i = torch.arange(n, device=DEV, dtype=torch.float64)
    return ((rank * 7 + i * 3) % 11 + 1).to(dtype)


def close(got, want, dtype, what):
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    assert err <= tol * max(1.0, want.double().abs().max().item() if want.numel() else 1.0), \
        "%s: max error %g" % (what, err)


@case
def seed003_world_and_options():
    assert dist.get_backend() == "cpu:gloo,cuda:tcomms", dist.get_backend()
    assert isinstance(dist.group.WORLD, tcomms.torch.ProcessGroupTcomms)
    opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=True)
    opts.config.cga_cluster_size, opts.config.min_ctas, opts.config.max_ctas = 2, 4, 16
    g = dist.new_group(list(range(N)), pg_options=opts)
    comm = tcomms.torch.comm_of(g)
    want = {"high_priority_stream": "1", "cga_cluster_size": "2", "min_ctas": "4", "max_ctas": "16"}
    got = {k: comm.hint(k, "cuda") for k in want}
    assert got == want, "child hints %s, asked %s" % (got, want)
    x = vals(RANK, 5, torch.float32)
    dist.all_reduce(x, group=g)
    close(x, sum(vals(r, 5, torch.float32) for r in range(N)), torch.float32, "all_reduce on the child")
    c = torch.full((3,), float(RANK))
    dist.all_reduce(c)  # cpu tensor: torch's gloo, held by the tcomms group
    assert c.tolist() == [float(sum(range(N)))] * 3


@case
def collectives_every_dtype():
    ops = [(dist.ReduceOp.SUM, lambda a, b: a + b), (dist.ReduceOp.MAX, torch.maximum),
           (dist.ReduceOp.MIN, torch.minimum), (dist.ReduceOp.PRODUCT, lambda a, b: a * b)]
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64):
        for n in (1, 7, 1000003):
            for op, fn in ops:
                x = vals(RANK, n, dtype)
                dist.all_reduce(x, op=op)
                ref = vals(0, n, torch.float64)
                for r in range(1, N):
                    ref = fn(ref, vals(r, n, torch.float64))
                close(x, ref.to(dtype), dtype, "all_reduce %s %s %d" % (op, dtype, n))
            out = torch.empty(n * N, device=DEV, dtype=dtype)
            dist.all_gather_into_tensor(out, vals(RANK, n, dtype))
            close(out, torch.cat([vals(r, n, dtype) for r in range(N)]), dtype, "all_gather %s" % dtype)
            rs = torch.empty(n, device=DEV, dtype=dtype)
            dist.reduce_scatter_tensor(rs, vals(RANK, n * N, dtype))
            ref = sum(vals(r, n * N, torch.float64) for r in range(N))[RANK * n:(RANK + 1) * n]
            close(rs, ref, dtype, "reduce_scatter %s" % dtype)
    if hasattr(dist.ReduceOp, "AVG"):
        x = vals(RANK, 33, torch.bfloat16)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        close(x, sum(vals(r, 33, torch.float64) for r in range(N)) / N, torch.bfloat16, "avg")


@case
def rooted_lists_and_p2p():
    n = 1001
    x = vals(RANK, n, torch.float32)
    dist.broadcast(x, src=N - 1)
    close(x, vals(N - 1, n, torch.float32), torch.float32, "broadcast")
    x = vals(RANK, n, torch.float32)
    dist.reduce(x, dst=0)
    if RANK == 0:
        close(x, sum(vals(r, n, torch.float64) for r in range(N)), torch.float32, "reduce")
    lst = [torch.empty(n, device=DEV) for _ in range(N)]
    dist.all_gather(lst, vals(RANK, n, torch.float32))
    for r in range(N):
        close(lst[r], vals(r, n, torch.float32), torch.float32, "all_gather list")
    out = torch.empty(n, device=DEV)
    dist.reduce_scatter(out, [vals(RANK, n, torch.float32) * (j + 1) for j in range(N)])
    close(out, sum(vals(r, n, torch.float64) for r in range(N)) * (RANK + 1), torch.float32, "reduce_scatter list")
    gl = [torch.empty(n, device=DEV) for _ in range(N)] if RANK == 0 else None
    dist.gather(vals(RANK, n, torch.float32), gl, dst=0)
    if RANK == 0:
        for r in range(N):
            close(gl[r], vals(r, n, torch.float32), torch.float32, "gather")
    sc = torch.empty(n, device=DEV)
    dist.scatter(sc, [vals(j, n, torch.float32) for j in range(N)] if RANK == 0 else None, src=0)
    close(sc, vals(RANK, n, torch.float32), torch.float32, "scatter")
    # uneven all_to_all_single: rank r sends (r + j + 1) rows to rank j
    send_sizes = [RANK + j + 1 for j in range(N)]
    recv_sizes = [j + RANK + 1 for j in range(N)]
    inp = torch.cat([torch.full((s, 3), float(RANK * 100 + j), device=DEV) for j, s in enumerate(send_sizes)])
    out = torch.empty(sum(recv_sizes), 3, device=DEV)
    dist.all_to_all_single(out, inp, recv_sizes, send_sizes)
    want = torch.cat([torch.full((s, 3), float(j * 100 + RANK), device=DEV) for j, s in enumerate(recv_sizes)])
    assert torch.equal(out, want), "uneven all_to_all_single"
    if N > 1:
        recv = torch.empty(n, device=DEV)
        ops = [dist.P2POp(dist.isend, vals(RANK, n, torch.float32), (RANK + 1) % N),
               dist.P2POp(dist.irecv, recv, (RANK - 1) % N)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        close(recv, vals((RANK - 1) % N, n, torch.float32), torch.float32, "batch_isend_irecv ring")


@case
def stream_semantics():
    side = torch.cuda.Stream()
    x = torch.zeros(1 << 20, device=DEV)
    torch.cuda._sleep(50_000_000)  # ~tens of ms of work queued before the fill and the collective
    x.fill_(RANK + 1.0)
    w = dist.all_reduce(x, async_op=True)  # ordered after the sleep and the fill on the current stream
    with torch.cuda.stream(side):
        w.wait()  # the side stream waits, the host does not
        y = x * 2
    torch.cuda.current_stream().wait_stream(side)
    want = 2.0 * sum(r + 1.0 for r in range(N))
    assert torch.all(y == want).item(), "value after wait on another stream: %g, want %g" % (y[0].item(), want)


@case
def cuda_graph_capture():
    x = torch.zeros(4096, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(x)
    for k in range(3):
        x.fill_(RANK + k)
        g.replay()
        torch.cuda.synchronize()
        want = float(sum(r + k for r in range(N)))
        assert torch.all(x == want).item(), "replay %d: %g, want %g" % (k, x[0].item(), want)


@case
def coalescing_manager():
    from torch.distributed.distributed_c10d import _coalescing_manager
    xs = [vals(RANK, n, torch.float32) for n in (3, 1000, 70000)]
    with _coalescing_manager(device=DEV, async_ops=True) as cm:
        for x in xs:
            dist.all_reduce(x)
    cm.wait()
    for x in xs:
        close(x, sum(vals(r, x.numel(), torch.float64) for r in range(N)), torch.float32, "coalesced all_reduce")
    outs = [torch.empty(n * N, device=DEV) for n in (5, 4097)]
    with _coalescing_manager(device=DEV):
        for o in outs:
            dist.all_gather_into_tensor(o, vals(RANK, o.numel() // N, torch.float32))
    for o in outs:
        n = o.numel() // N
        close(o, torch.cat([vals(r, n, torch.float32) for r in range(N)]), torch.float32, "coalesced all_gather")


@case
def split_group_mixed_world():
    """split_group of the "cpu:gloo,cuda:tcomms" world: a tcomms split for cuda, torch's gloo for cpu. min_ctas
    alone: NCCL 2.28's ncclCommSplit refuses it unless tcomms fills in max_ctas (backends/nccl/config.c)."""
    halves = [list(range(N // 2)), list(range(N // 2, N))] if N > 1 else [[0]]
    opts = dist.ProcessGroupNCCL.Options()
    opts.config.min_ctas = 2
    g = dist.split_group(split_ranks=halves, pg_options=opts)
    mine = next(h for h in halves if RANK in h)
    x = torch.full((9,), float(RANK), device=DEV)
    dist.all_reduce(x, group=g)
    assert torch.all(x == float(sum(mine))).item(), "cuda all_reduce on the split: %g" % x[0].item()
    c = torch.full((4,), float(RANK))
    dist.all_reduce(c, group=g)
    assert c.tolist() == [float(sum(mine))] * 4, "cpu all_reduce on the split: %s" % c.tolist()
    assert tcomms.torch.comm_of(g).hint("min_ctas", "cuda") == "2"
    assert dist.get_world_size(g) == len(mine) and dist.get_rank(g) == mine.index(RANK)


def megatron_groups(world, sizes, order, token, offset=0):
    """Megatron's RankGenerator: dims of `order` vary fastest first; the groups of `token` hold the ranks that
    differ only along token's dims."""
    dims = order.split("-")
    strides, s = {}, 1
    for d in dims:
        strides[d] = s
        s *= sizes[d]
    assert s == world
    groups = {}
    for r in range(world):
        coords = {d: (r // strides[d]) % sizes[d] for d in dims}
        key = tuple(coords[d] for d in dims if d not in token.split("-"))
        groups.setdefault(key, []).append(r + offset)
    return list(groups.values())


@case
def megatron_style_groups():
    tp = 2 if N >= 4 else 1
    made = []
    for order in ("tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp"):
        sizes = {"tp": tp, "cp": 1, "ep": 1, "dp": N // tp, "pp": 1}
        for token in ("dp-cp", "dp-cp", "tp", "dp"):  # dp-cp twice: the second all-gather group of the same ranks
            for ranks in megatron_groups(N, sizes, order, token):
                opts = dist.ProcessGroupNCCL.Options()
                opts.config.max_ctas = 8
                g = dist.new_group(ranks, pg_options=opts)
                if RANK in ranks:
                    made.append((g, ranks))
    if N >= 4:  # a generator over the upper half, with a rank offset
        half = N // 2
        for ranks in megatron_groups(half, {"tp": 1, "cp": 1, "ep": 1, "dp": half, "pp": 1}, "tp-cp-ep-dp-pp",
                                     "dp", offset=half):
            g = dist.new_group(ranks)
            if RANK in ranks:
                made.append((g, ranks))
    for g, ranks in made:
        x = torch.full((5,), float(RANK), device=DEV)
        dist.all_reduce(x, group=g)
        assert torch.all(x == float(sum(ranks))).item(), "group %s: %g" % (ranks, x[0].item())
        assert dist.get_world_size(g) == len(ranks) and dist.get_rank(g) == ranks.index(RANK)


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
                                 for _ in range(4)]).to(DEV)


def batches(steps):
    g = torch.Generator(device="cpu").manual_seed(1234 + RANK)
    return [torch.randn(32, 256, generator=g).to(DEV) for _ in range(steps)]


def train(m, group, steps=4):
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    losses = []
    for x in batches(steps):
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().clone())
    return torch.stack(losses)


@case
def ddp_same_losses_as_nccl():
    from torch.nn.parallel import DistributedDataParallel as DDP
    ours = train(DDP(model(7), device_ids=[LOCAL], process_group=dist.group.WORLD), dist.group.WORLD)
    ref = train(DDP(model(7), device_ids=[LOCAL], process_group=NCCL), NCCL)
    assert torch.equal(ours, ref), "DDP losses: tcomms %s, nccl %s" % (ours.tolist(), ref.tolist())


@case
def fsdp2_same_losses_as_nccl():
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    torch.use_deterministic_algorithms(True, warn_only=True)
    out = []
    for group in (dist.group.WORLD, NCCL):
        mesh = DeviceMesh.from_group(group, "cuda")
        m = model(11)
        for layer in m:
            fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        out.append(train(m, group, steps=5))
    assert torch.equal(out[0], out[1]), "FSDP2 losses: tcomms %s, nccl %s" % (out[0].tolist(), out[1].tolist())


@case
def errors_raise():
    try:
        dist.all_gather_into_tensor(torch.empty(3, device=DEV), torch.empty(2, device=DEV))
    except ValueError:
        pass
    else:
        raise AssertionError("a wrong output size did not raise")
    x = torch.ones(3, device=DEV)
    dist.all_reduce(x)  # the group still works
    assert torch.all(x == N).item()


@case
def failed_split_leaves_process_alive():
    """A split NCCL cannot make (an unknown network module: NCCL's init job fails) raises on every rank; its parent
    fails (later calls raise) and the world goes on. NCCL 2.28 keeps a pointer to the child's abort flag in the
    parent, and aborting the child first once corrupted the heap here."""
    g = dist.new_group(list(range(N)))  # a tcomms split of the world: the parent whose split fails
    try:
        g.comm.split(list(range(N)), name="bad-net", hints={"nccl.net_name": "NoSuchNet"})
    except tcomms.Error:
        pass
    else:
        raise AssertionError("a split over an unknown NCCL network did not raise")
    x = torch.ones(4, device=DEV)
    try:
        dist.all_reduce(x, group=g)
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any error: the parent is documented unusable after a failed split
        pass
    else:
        raise AssertionError("the failed split's parent still ran a collective")
    y = torch.ones(4, device=DEV)
    dist.all_reduce(y)
    assert torch.all(y == N).item(), y
    junk = [bytearray(64 + i) for i in range(20000)]  # allocate and free: a corrupted heap shows here
    del junk


if __name__ == "__main__":
    try:
        harness.main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
