# SPDX-License-Identifier: BSD-3-Clause
"""An unchanged PyTorch script (it never names tcomms) for TCOMMS_TORCH=1 on a GPU machine: a device-bound
"cpu:gloo,cuda:nccl" world, new_group and split_group with NCCL options, collectives on CUDA and CPU tensors
checked against references. It prints one line, "ROUTED rank=R world=<class> backend=<name> checks=ok|...":
tests/gpu/torch.sh runs it with and without TCOMMS_TORCH=1 (through python/tcomms-torch.pth)."""
import os

import torch
import torch.distributed as dist

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
dist.init_process_group("cpu:gloo,cuda:nccl", device_id=dev)
rank, n = dist.get_rank(), dist.get_world_size()
problems = []


def expect(ok, what):
    if not ok:
        problems.append(what)


x = torch.full((1000,), float(rank + 1), device=dev)
dist.all_reduce(x)
expect(torch.all(x == n * (n + 1) / 2).item(), "cuda all_reduce")
c = torch.full((3,), float(rank))
dist.all_reduce(c)
expect(c.tolist() == [float(sum(range(n)))] * 3, "cpu all_reduce")
opts = dist.ProcessGroupNCCL.Options()
opts.config.max_ctas = 4
evens = [r for r in range(n) if r % 2 == 0]
g = dist.new_group(evens, pg_options=opts)
if rank in evens:
    y = torch.ones(5, device=dev)
    dist.all_reduce(y, group=g)
    expect(torch.all(y == len(evens)).item(), "new_group all_reduce")
routed = type(dist.group.WORLD).__name__ == "ProcessGroupTcomms"
s, note = None, ""
if routed or n <= 2:
    halves = [list(range(n // 2)), list(range(n // 2, n))] if n > 1 else [[0]]
    s = dist.split_group(split_ranks=halves, pg_options=opts)
    mine = next(h for h in halves if rank in h)
    z = torch.full((7,), float(rank), device=dev)
    dist.all_reduce(z, group=s)
    expect(torch.all(z == float(sum(mine))).item(), "split_group all_reduce")
    expect(dist.get_world_size(s) == len(mine), "split_group size")
else:  # torch 2.11's own split_group never returned here on 4 GPUs (2026-11-26); routed, it runs
    note = " (split_group left out: torch's own hangs at %d ranks)" % n
if routed:  # the options reached the children as hints
    for grp in ([g] if rank in evens else []) + [s]:
        got = grp.comm.hint("max_ctas", "cuda")
        expect(got == "4", "max_ctas of a child: %s" % got)
checks = "ok" if not problems else ",".join(problems).replace(" ", "_")
print("ROUTED rank=%d world=%s backend=%s checks=%s%s" % (rank, type(dist.group.WORLD).__name__, dist.get_backend(),
                                                           checks, note), flush=True)
dist.destroy_process_group()
