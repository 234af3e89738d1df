#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# torch_bench: the torch.distributed side of bench/compare-nccl (ProcessGroupNCCL; tcomms with --backend tcomms). It
# runs tcomms-perf's collectives through torch's own calls on CUDA tensors and prints tcomms-perf's table and JSON
# with backend "torch-nccl" (or "torch-tcomms"). Under
# torchrun it uses torchrun's ranks; otherwise it spawns -g N ranks (default: every GPU) on this host.
"""usage: torch_bench.py COLL [options]   (COLL, all, or a comma-separated list; options as tcomms-perf:
-b -e -f -i -n -w -c -d -o -r -a -z --json -L, plus -g N ranks to spawn when not under torchrun; -J FILE is
--json FILE: tcomms' JSON, not nccl-tests' as tcomms-perf -J writes; -z 1 is tcomms-perf -z 2). torch's natural call of each collective is timed and
reported in the out-of-place columns (all_reduce, broadcast and reduce are in place in torch); the in-place
columns print N/A."""

import argparse
import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "gather", "scatter",
         "sendrecv", "all_gather_v", "reduce_scatter_v", "alltoall_v"]
REDUCING = {"all_reduce", "reduce_scatter", "reduce", "reduce_scatter_v"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
WHOLE = {"all_reduce", "broadcast", "reduce", "sendrecv"}
# name -> (torch dtype, table name, tcomms name)
DTYPES = {"int8": (torch.int8, "int8", "int8"), "uint8": (torch.uint8, "uint8", "uint8"),
          "int32": (torch.int32, "int32", "int32"), "int64": (torch.int64, "int64", "int64"),
          "half": (torch.float16, "half", "float16"), "float16": (torch.float16, "half", "float16"),
          "bfloat16": (torch.bfloat16, "bfloat16", "bfloat16"), "float": (torch.float32, "float", "float32"),
          "float32": (torch.float32, "float", "float32"), "double": (torch.float64, "double", "float64"),
          "float64": (torch.float64, "double", "float64")}
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "avg": dist.ReduceOp.AVG}
TOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}


def size_arg(s):
    units = {"k": 10, "m": 20, "g": 30}
    shift = units.get(s[-1:].lower(), 0)
    digits = s[:-1] if shift else s
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"needs a size like 8, 64K or 1G, not '{s}'")
    return int(digits) << shift


def coll_list(s):
    words = s.split(",")
    bad = [w for w in words if w not in COLLS + ["all"]]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown collective '{bad[0]}' ({' '.join(COLLS)}, all, or a list)")
    return [c for c in COLLS if c in words or "all" in words]  # tcomms-perf's order


def parse(argv):
    ap = argparse.ArgumentParser(prog="torch_bench.py", description=__doc__)
    ap.add_argument("coll", type=coll_list)
    ap.add_argument("-b", "--minbytes", type=size_arg, default=32 << 20)
    ap.add_argument("-e", "--maxbytes", type=size_arg, default=32 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=1)
    ap.add_argument("-i", "--stepbytes", type=size_arg, default=1 << 20)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=1)
    ap.add_argument("-c", "--check", type=int, choices=[0, 1], default=1)
    ap.add_argument("-d", "--datatype", choices=sorted(DTYPES), default="float")
    ap.add_argument("-o", "--op", choices=sorted(OPS), default="sum")
    ap.add_argument("-r", "--root", type=int, default=0)
    ap.add_argument("-a", "--average", type=int, choices=[0, 1, 2, 3], default=1)
    ap.add_argument("-z", "--blocking", type=int, choices=[0, 1], default=0)
    ap.add_argument("--json", "-J", metavar="FILE",
                    help="write tcomms' JSON (tcomms-perf --json's; -J is the same, not nccl-tests' JSON)")
    ap.add_argument("-L", "--label")
    ap.add_argument("-g", "--ngpus", type=int, default=0)
    ap.add_argument("--backend", choices=["nccl", "tcomms"], default="nccl",
                    help="torch.distributed backend: torch's own nccl, or tcomms (the tcomms Python package)")
    a = ap.parse_args(argv)
    if a.minbytes > a.maxbytes:
        ap.error(f"-b ({a.minbytes}) is larger than -e ({a.maxbytes})")
    if a.iters < 1 or a.warmup_iters < 0 or a.stepfactor < 1 or a.stepbytes < 1:
        ap.error("-n, -f and -i need 1 or more, -w 0 or more")
    return a


def sizes(a):
    b = a.minbytes
    while b <= a.maxbytes:
        yield b
        b = (b * a.stepfactor if b else 1) if a.stepfactor > 1 else b + a.stepbytes


class Bench:
    def __init__(self, a, rank, n):
        self.a, self.rank, self.n = a, rank, n
        self.dtype, self.tname, self.jname = DTYPES[a.datatype]
        self.es = torch.tensor([], dtype=self.dtype).element_size()
        self.dev = torch.device("cuda", torch.cuda.current_device())
        cap = a.maxbytes // self.es + 1
        self.sbuf = torch.zeros(cap, dtype=self.dtype, device=self.dev)
        self.rbuf = torch.zeros(cap, dtype=self.dtype, device=self.dev)

    # ---- layout: as bench_common.c (count, the v-variants' ramp) ----
    def layout(self, coll, nbytes):
        n, me = self.n, self.rank
        elems = nbytes // self.es
        b = elems // n
        blk, at = [], 0
        for k in range(n):
            blk.append(2 * b * (k + 1) // (n + 1) if k + 1 < n else n * b - at)
            at += blk[-1]
        a2a = [blk[(me + j) % n] for j in range(n)]
        src = [sum(blk[(j + t) % n] for t in range(me)) for j in range(n)]
        count = elems if coll in WHOLE else b
        return dict(count=count, bytes=(elems if coll in WHOLE else n * b) * self.es, b=b, blk=blk, a2a=a2a,
                    src=src, displ=[sum(blk[:k]) for k in range(n)])

    # ---- values: as bench_common.c ----
    def red_input(self, rank, i):
        if self.a.op == "prod":
            return torch.where(i % self.n == rank, 2.0, 1.0).double()
        return (1 + (rank * 3 + i) % 5).double()

    def input(self, coll, rank, i):
        return self.red_input(rank, i) if coll in REDUCING else (1 + (i * 5 + rank * 11) % 97).double()

    def reduced(self, i):
        acc = self.red_input(0, i)
        for r in range(1, self.n):
            v = self.red_input(r, i)
            acc = {"prod": acc * v, "min": torch.minimum(acc, v), "max": torch.maximum(acc, v)}.get(self.a.op, acc + v)
        if not self.dtype.is_floating_point:
            acc = acc.to(torch.int64).to(self.dtype).to(torch.int64)  # integers wrap to their width
            return torch.div(acc, self.n, rounding_mode="trunc").double() if self.a.op == "avg" else acc.double()
        return acc / self.n if self.a.op == "avg" else acc

    def expected(self, coll, L, nrecv):
        i = torch.arange(nrecv, device=self.dev, dtype=torch.int64)
        me, n, b, root = self.rank, self.n, L["b"], self.a.root
        if coll in ("all_reduce", "reduce"):
            return self.reduced(i)
        if coll == "reduce_scatter":
            return self.reduced(me * b + i)
        if coll == "reduce_scatter_v":
            return self.reduced(L["displ"][me] + i)
        if coll == "broadcast":
            return self.input(coll, root, i)
        if coll == "scatter":
            return self.input(coll, root, me * b + i)
        if coll == "sendrecv":
            return self.input(coll, (me + n - 1) % n, i)
        if coll in ("all_gather", "gather"):
            return self.input(coll, i // max(b, 1), i % max(b, 1))
        if coll == "alltoall":
            return self.input(coll, i // max(b, 1), me * b + i % max(b, 1))
        counts, displ = (L["blk"], L["displ"]) if coll == "all_gather_v" else (L["a2a"], None)
        out = torch.empty(nrecv, dtype=torch.float64, device=self.dev)
        at = 0
        for j, c in enumerate(counts):
            start = 0 if coll == "all_gather_v" else L["src"][j]
            out[at:at + c] = self.input(coll, j, start + torch.arange(c, device=self.dev))
            at += c
        return out

    # ---- the calls ----
    def io(self, coll, L):
        """(send tensor, receive tensor, send element count, checked receive count) for this rank."""
        n, me, c = self.n, self.rank, L["count"]
        nsend = {"all_gather": c, "gather": c, "all_gather_v": L["blk"][me]}.get(coll, c if coll in WHOLE else n * c)
        nr = {"reduce_scatter": c, "scatter": c, "reduce_scatter_v": L["blk"][me]}.get(
            coll, c if coll in WHOLE else n * c)
        nrecv = 0 if coll in ("reduce", "gather") and me != self.a.root else nr
        if coll in ("all_reduce", "broadcast", "reduce"):  # torch's calls are in place
            return self.rbuf[:nsend], self.rbuf[:nr], nsend, nrecv
        return self.sbuf[:nsend], self.rbuf[:nr], nsend, nrecv

    def run(self, coll, L, s, r):
        n, me, root, op, c = self.n, self.rank, self.a.root, OPS[self.a.op], L["count"]
        if coll == "all_reduce":
            dist.all_reduce(r, op=op)
        elif coll == "all_gather":
            dist.all_gather_into_tensor(r, s)
        elif coll == "reduce_scatter":
            dist.reduce_scatter_tensor(r, s, op=op)
        elif coll == "broadcast":
            dist.broadcast(r, src=root)
        elif coll == "reduce":
            dist.reduce(r, dst=root, op=op)
        elif coll == "alltoall":
            dist.all_to_all_single(r, s)
        elif coll == "gather":
            dist.gather(s, [r[j * c:(j + 1) * c] for j in range(n)] if me == root else None, dst=root)
        elif coll == "scatter":
            dist.scatter(r, [s[j * c:(j + 1) * c] for j in range(n)] if me == root else None, src=root)
        elif coll == "sendrecv":
            ops = [dist.P2POp(dist.isend, s, (me + 1) % n), dist.P2POp(dist.irecv, r, (me + n - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        elif coll == "all_gather_v":
            dist.all_gather(list(r.split(L["blk"])), s)
        elif coll == "reduce_scatter_v":
            dist.reduce_scatter(r, list(s.split(L["blk"])), op=op)
        elif coll == "alltoall_v":
            dist.all_to_all_single(r, s, output_split_sizes=L["a2a"], input_split_sizes=L["a2a"])

    def fill(self, coll, s, nsend):
        s.copy_(self.input(coll, self.rank, torch.arange(nsend, device=self.dev)).to(self.dtype))

    def measure(self, coll, L):
        a = self.a
        s, r, nsend, nrecv = self.io(coll, L)
        if coll == "broadcast" and self.rank != a.root:
            nsend = 0
        self.fill(coll, s[:nsend], nsend)
        for _ in range(a.warmup_iters):
            self.run(coll, L, s, r)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            self.run(coll, L, s, r)
            if a.blocking:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        us = torch.tensor([(time.perf_counter() - t0) * 1e6 / a.iters if a.average or self.rank == 0 else 0.0],
                          dtype=torch.float64, device=self.dev)
        dist.all_reduce(us, op=[dist.ReduceOp.SUM, dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX][a.average])
        t = us.item() / (self.n if a.average == 1 else 1)
        if not a.check:
            return t, None
        self.rbuf.fill_(float("nan") if self.dtype.is_floating_point else 255 if self.dtype == torch.uint8 else -1)
        self.fill(coll, s[:nsend], nsend)
        self.run(coll, L, s, r)
        torch.cuda.synchronize()
        got = r[:nrecv].double()
        want = self.expected(coll, L, nrecv)
        tol = TOL.get(self.dtype, 0.0)
        bad = ~((got - want).abs() <= tol * want.abs().clamp(min=1.0))
        wrong = torch.tensor([int(bad.sum().item())], dtype=torch.int64, device=self.dev)
        dist.all_reduce(wrong)
        return t, int(wrong.item())


def fmt(v, width):
    for f in ("%.2f", "%.1f", "%.0f"):
        if len(f % v) <= width:
            return f % v
    return ("%.1e" if width >= 7 else "%.0e") % v


def factor(coll, n):
    return 2 * (n - 1) / n if coll == "all_reduce" else 1.0 if coll in ("broadcast", "reduce", "sendrecv") \
        else (n - 1) / n


def worker(rank, n, a):
    if "LOCAL_RANK" in os.environ:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    else:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", torch.cuda.current_device())
    if a.backend == "tcomms":
        import tcomms.torch  # noqa: F401 - registers the backend
    dist.init_process_group(a.backend, rank=rank, world_size=n, device_id=device)
    bench = Bench(a, rank, n)
    out = rank == 0
    lib = f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"
    if out:
        print(f"# torch_bench 0.1.0 backend torch-{a.backend} device cuda nranks {n}\n# {lib}")
        print("# torch: the out-of-place columns time torch's own call (in place for all_reduce, broadcast, reduce)")
    rows, total_wrong, all_bw = [], 0, []
    for coll in a.coll:
        if out:
            step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.stepbytes}(bytes)"
            print(f"# Collective test starting: {coll}_perf\n# minBytes {a.minbytes} maxBytes {a.maxbytes} "
                  f"step: {step} warmup iters: {a.warmup_iters} iters: {a.iters} agg iters: 1 "
                  f"validation: {a.check} graph: 0\n#")
            print("#                                                              out-of-place                       in-place\n"
                  "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
                  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)")
        block_bw, block_wrong = [], 0
        for nbytes in sizes(a):
            L = bench.layout(coll, nbytes)
            valid = not (coll == "sendrecv" and n == 1)
            t, wrong = bench.measure(coll, L) if valid else (0.0, None)
            alg = L["bytes"] / t / 1e3 if t > 0 else 0.0
            bus = alg * factor(coll, n)
            if out:
                redop = a.op if coll in REDUCING else "none"
                root = a.root if coll in ROOTED else -1
                oop = (f"  {fmt(t, 7):>7}  {fmt(alg, 6):>6}  {fmt(bus, 6):>6}  {'N/A' if wrong is None else wrong:>6}"
                       if valid else "  %7s  %6s  %6s  %6s" % (("N/A",) * 4))
                print(f"{L['bytes']:12d}  {L['count']:12d}  {bench.tname:>8}  {redop:>6}  {root:6d}{oop}"
                      + "  %7s  %6s  %6s  %6s" % (("N/A",) * 4), flush=True)
                rows.append({"collective": coll, "size": L["bytes"], "count": L["count"], "type": bench.tname,
                             "redop": redop, "root": root, "ip": None,
                             "oop": {"time_us": t, "algbw": alg, "busbw": bus, "wrong": wrong} if valid else None})
            if valid:
                block_bw.append(bus)
                block_wrong += wrong or 0
        total_wrong += block_wrong
        all_bw += block_bw
        if out:
            avg = sum(block_bw) / len(block_bw) if block_bw else 0.0
            print(f"# Out of bounds values : {block_wrong} {'FAILED' if block_wrong else 'OK'}\n"
                  f"# Avg bus bandwidth    : {avg:g}\n#\n# Collective test concluded: {coll}_perf", flush=True)
    if out and a.json:
        doc = {"tool": "torch_bench", "version": "0.1.0",
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "host": socket.gethostname(), "backend": "torch-" + a.backend, "device": "cuda", "nranks": n,
               "label": a.label or "torch-" + a.backend, "library": lib, "dtype": bench.jname, "op": a.op,
               "root": a.root,
               "iters": a.iters, "warmup": a.warmup_iters, "check": a.check, "blocking": a.blocking,
               "average": a.average, "results": rows, "avg_busbw": sum(all_bw) / len(all_bw) if all_bw else 0.0,
               "wrong": total_wrong if a.check else None}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(1)


def main():
    a = parse(sys.argv[1:])
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        sys.exit("torch_bench.py: no CUDA device is visible")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under torchrun
        n = int(os.environ["WORLD_SIZE"])
        if a.root >= n:
            sys.exit("torch_bench.py: -r names a rank past the last one")
        worker(int(os.environ["RANK"]), n, a)
        return
    n = a.ngpus or torch.cuda.device_count()
    if n > torch.cuda.device_count() or a.root >= n:
        sys.exit("torch_bench.py: -g asks for more ranks than GPUs, or -r names a rank past the last one")
    with socket.socket() as s:  # a free port for the rendezvous on loopback
        s.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
    mp.spawn(worker, args=(n, a), nprocs=n, join=True)


if __name__ == "__main__":
    main()
