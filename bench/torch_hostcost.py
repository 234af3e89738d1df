#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Where a small torch.distributed call spends its host time, on tcomms and on torch's own nccl: each call posted
N times with async_op=False, then one synchronize (so the figure is the host's cost a call while the device keeps
up), median of R repetitions. Rows: torch's call on each backend, ProcessGroupTcomms' method called directly, its
C call alone through ctypes, and the torch objects the method reads. One process per GPU, under torchrun:
    python3 -m torch.distributed.run --nproc-per-node 2 bench/torch_hostcost.py [--bytes 8,4096] [-n 2000] [-r 5]
Needs CUDA, tcomms.torch importable and libtcomms found (TCOMMS_LIBRARY). Rank 0 prints the table."""
import argparse
import ctypes
import os
import time
import timeit

import torch
import torch.distributed as dist

import tcomms.torch  # noqa: F401 - registers the backend
from tcomms import _lib
from tcomms.torch import _pg


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bytes", default="8,4096", help="per-rank output sizes in bytes (float32)")
    p.add_argument("-n", "--iters", type=int, default=2000)
    p.add_argument("-r", "--reps", type=int, default=5)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("tcomms", device_id=torch.device("cuda", local))
    tc = dist.group.WORLD
    nccl = dist.new_group(list(range(dist.get_world_size())), backend="nccl")
    n = dist.get_world_size()

    def per_call(f):
        v = []
        for _ in range(a.reps):
            for _ in range(50):
                f()
            torch.cuda.synchronize()
            dist.barrier(group=nccl)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                f()
            torch.cuda.synchronize()
            v.append((time.perf_counter() - t0) / a.iters * 1e6)
        return sorted(v)[len(v) // 2]

    rows = []
    for size in (int(b) for b in a.bytes.split(",")):
        cnt = max(1, size // 4)
        out = torch.zeros(cnt, device="cuda")
        inp = torch.ones(cnt * n, device="cuda")
        opts = dist.ReduceScatterOptions()
        if hasattr(opts, "asyncOp"):
            opts.asyncOp = False
        oo = _lib.OpOpts()
        oo.field_mask, oo.device_type = _lib.OPT_DEVICE_TYPE | _lib.OPT_STREAM, _lib.DEVICE_CUDA
        oo.stream = torch.cuda.current_stream().cuda_stream
        h, ip, op = tc.comm.handle, inp.data_ptr(), out.data_ptr()
        for what, f in (
                ("dist.reduce_scatter_tensor, torch nccl", lambda: dist.reduce_scatter_tensor(out, inp, group=nccl)),
                ("dist.reduce_scatter_tensor, tcomms", lambda: dist.reduce_scatter_tensor(out, inp)),
                ("ProcessGroupTcomms._reduce_scatter_base", lambda: tc._reduce_scatter_base(out, inp, opts)),
                ("tcomms_reduce_scatter through ctypes", lambda: _lib.lib.tcomms_reduce_scatter(
                    h, ip, op, cnt, 0, 0, ctypes.byref(oo), None))):
            rows.append(("%d B" % (cnt * 4), what, per_call(f)))
    scope = {"opts": opts, "tc": tc, "out": out, "inp": inp, "_pg": _pg}
    for stmt in ("opts.reduceOp", "tc.size()", "_pg._check_pair(out, inp, 'x')"):
        rows.append(("-", stmt, timeit.timeit(stmt, number=20000, globals=scope) / 20000 * 1e6))
    if dist.get_rank() == 0:
        print("# %s, torch %s, %d ranks" % (torch.cuda.get_device_name(), torch.__version__, n))
        print("%-6s %-45s %9s" % ("size", "call", "us"))
        for size, what, us in rows:
            print("%-6s %-45s %9.2f" % (size, what, us))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
