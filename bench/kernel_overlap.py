#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""kernel_overlap.py: summarise bench/kernel_trace.c files (one per rank). Every activity is one of:
  comm     NCCL kernels, and copies or memsets on streams that run no other kernel (NCCL's own streams, where its
           copy-engine collectives copy)
  runtime  tcomms' own kernels (tc_fsdp_k_*), and copies or memsets on streams that also run compute
  compute  every other kernel (GEMMs and the model's element-wise kernels)
Per rank it prints each kind's busy time (the union of its intervals), how much of the communication lies under
compute (the share of communication time hidden, counted on the kernels themselves), the runtime's busy time under
compute, and the costliest activities. Only the span from the first to the last end of a kernel matching --span
(default: cuBLAS's GEMMs) counts, so that setup and teardown (control-plane collectives waiting for every rank)
stay out; a trace without such kernels counts whole."""
import argparse
import collections
import re
import sys


def union(intervals):
    merged = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def total(u):
    return sum(e - s for s, e in u)


def common(a, b):
    i = j = t = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        t += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def read(path):
    recs = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split(" ", 6)
            if len(p) == 7:
                recs.append({"t": p[0], "s": int(p[1]), "e": int(p[2]), "stream": int(p[4]), "what": p[6]})
    return recs


def classify(recs):
    other_kernels = {r["stream"] for r in recs if r["t"] == "K" and "nccl" not in r["what"]}
    for r in recs:
        if r["t"] == "K":
            w = r["what"]  # NCCL's kernel names are mangled C++: match anywhere
            r["kind"] = "comm" if "nccl" in w else "runtime" if w.startswith("tc_fsdp_k_") else "compute"
        else:
            r["kind"] = "runtime" if r["stream"] in other_kernels else "comm"


def label(r):
    if r["t"] != "K":
        return r["what"].rstrip("0123456789>-") if r["t"] == "P" else r["what"]
    w = r["what"]
    if "nccl" in w:
        return w[w.find("nccl"):][:48]
    return w[:48] if w.startswith("tc_fsdp_k_") else "other kernels"


def report(path, span):
    recs = read(path)
    if not recs:
        print(f"{path}: no activity recorded")
        return 1
    classify(recs)
    marks = [r for r in recs if r["t"] == "K" and span.search(r["what"])]
    if marks:
        lo, hi = min(r["s"] for r in marks), max(r["e"] for r in marks)
        recs = [dict(r, s=max(r["s"], lo), e=min(r["e"], hi)) for r in recs if r["e"] > lo and r["s"] < hi]
    u = {k: union([(r["s"], r["e"]) for r in recs if r["kind"] == k]) for k in ("compute", "comm", "runtime")}
    comm, rt = total(u["comm"]), total(u["runtime"])
    hidden, rt_hidden = common(u["comm"], u["compute"]), common(u["runtime"], u["compute"])
    print(f"== {path}: {len(recs)} activities" + (f" in {(hi - lo) / 1e6:.3f} ms" if marks else " (whole trace)"))
    print(f"   busy ms: compute {total(u['compute']) / 1e6:.3f}, comm {comm / 1e6:.3f}, runtime {rt / 1e6:.3f}")
    print(f"   comm under compute: {hidden / 1e6:.3f} of {comm / 1e6:.3f} ms = {hidden / comm if comm else 1:.3f}")
    print(f"   runtime under compute: {rt_hidden / 1e6:.3f} of {rt / 1e6:.3f} ms")
    agg = collections.defaultdict(lambda: [0, 0])
    for r in recs:
        if r["kind"] != "compute":
            a = agg[(r["kind"], label(r))]
            a[0] += 1
            a[1] += r["e"] - r["s"]
    for (kind, what), (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:10]:
        print(f"   {kind:7s} {what:48s} n={n:5d} total {t / 1e6:8.3f} ms mean {t / n / 1e3:8.1f} us")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--span", default="gemm|nvjet|cutlass", help="regular expression on kernel names")
    a = ap.parse_args()
    return max(report(f, re.compile(a.span)) for f in a.files)


if __name__ == "__main__":
    sys.exit(main())
