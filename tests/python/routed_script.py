# SPDX-License-Identifier: BSD-3-Clause
# An unchanged PyTorch script, as a user would write it for torch's gloo backend: it never imports tcomms.
# test_torch_route.py runs it per rank with and without TCOMMS_TORCH=1 (torchrun's RANK, WORLD_SIZE, MASTER_ADDR
# and MASTER_PORT set) and reads its last line: "ROUTED world=<type> backend=<name> group=<type> ...".
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    bad = []

    x = torch.arange(5, dtype=torch.float32) + rank
    dist.all_reduce(x)
    if not torch.equal(x, size * torch.arange(5, dtype=torch.float32) + sum(range(size))):
        bad.append("all_reduce %s" % x.tolist())

    y = torch.full((3,), float(rank))
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    if not torch.equal(y, torch.full((3,), float(size - 1))):
        bad.append("all_reduce max %s" % y.tolist())

    b = torch.arange(4, dtype=torch.int64) * 7 if rank == size - 1 else torch.zeros(4, dtype=torch.int64)
    dist.broadcast(b, src=size - 1)
    if not torch.equal(b, torch.arange(4, dtype=torch.int64) * 7):
        bad.append("broadcast %s" % b.tolist())

    outs = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(outs, torch.tensor([rank, rank * 10], dtype=torch.float32))
    for r, o in enumerate(outs):
        if o.tolist() != [r, r * 10]:
            bad.append("all_gather from %d: %s" % (r, o.tolist()))

    members = list(range(0, size, 2))
    group = dist.new_group(members)
    group_type = "none"
    if rank in members:
        group_type = type(group).__name__
        z = torch.ones(6) * (rank + 1)
        dist.all_reduce(z, group=group)
        if not torch.equal(z, torch.ones(6) * sum(r + 1 for r in members)):
            bad.append("group all_reduce %s" % z.tolist())
    dist.barrier()

    print("ROUTED world=%s backend=%s group=%s group_backend=%s tcomms_loaded=%s checks=%s"
          % (type(dist.group.WORLD).__name__, dist.get_backend(), group_type,
             dist.get_backend(group) if rank in members else "none", "tcomms" in sys.modules,
             "ok" if not bad else "|".join(bad).replace(" ", "_")), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
