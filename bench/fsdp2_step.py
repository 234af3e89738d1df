#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# fsdp2_step.py: bench/fsdp_bench's model and step under PyTorch FSDP2 (fully_shard), the reference of
# bench/compare-fsdp: L x (nn.Linear(d, d, bias=False) + ReLU), each layer and the root fully_shard'ed, loss
# mean(y^2), SGD, timed as fsdp_bench times (CUDA events around each step, the device drained before and after,
# the slowest rank per step, median), printed in its line format with impl=fsdp2.
#   python3 -m torch.distributed.run --nproc-per-node 2 bench/fsdp2_step.py --layers 8 --dim 4096 --tokens 4096
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description="fsdp_bench's model under PyTorch FSDP2 (one process per GPU)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=4096, help="tokens per microbatch")
    p.add_argument("--micro", type=int, default=1, help="microbatches per step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                   help="compute dtype (bf16: MixedPrecisionPolicy(bfloat16, reduce float32); params are fp32)")
    p.add_argument("--reduce-dtype", choices=["bf16", "fp32"], default="fp32",
                   help="MixedPrecisionPolicy's reduce_dtype under --dtype bf16 (fsdp_bench's --reduce-dtype)")
    p.add_argument("--strategy", choices=["zero3", "zero2"], default="zero3",
                   help="zero3: reshard_after_forward=True; zero2: False")
    p.add_argument("--prefetch", type=int, default=1,
                   help="explicit prefetch depth (set_modules_to_forward/backward_prefetch), as fsdp_bench's; "
                        "0: FSDP2's default implicit prefetch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--backend", choices=["nccl", "tcomms"], default="nccl",
                   help="torch.distributed backend: torch's own nccl, or tcomms (the tcomms Python package)")
    a = p.parse_args()
    for name in ("layers", "dim", "tokens", "micro", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    if a.warmup < 0 or a.prefetch < 0:
        p.error("--warmup and --prefetch must be at least 0")
    return a


class Stack(nn.Module):
    def __init__(self, layers, dim):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim, bias=False), nn.ReLU())
                                    for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def shard(model, a):
    """fully_shard every layer, then the root; returns how prefetch is set ("explicitN" or "implicit")."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:  # before PyTorch 2.6
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard

    kw = {"reshard_after_forward": a.strategy == "zero3"}
    if a.dtype == "bf16":
        rd = torch.bfloat16 if a.reduce_dtype == "bf16" else torch.float32
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=rd)
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    layers = list(model.layers)
    if a.prefetch == 0 or not hasattr(layers[0], "set_modules_to_forward_prefetch"):
        return "implicit"
    for i, layer in enumerate(layers):
        fwd = layers[i + 1:i + 1 + a.prefetch]
        bwd = layers[max(0, i - a.prefetch):i][::-1]
        if fwd:
            layer.set_modules_to_forward_prefetch(fwd)
        if bwd:
            layer.set_modules_to_backward_prefetch(bwd)
    return f"explicit{a.prefetch}"


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    a = parse_args()
    if not torch.cuda.is_available():
        print("fsdp2_step: no CUDA device: skipped")
        return 77
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if a.backend == "tcomms":
        import tcomms.torch  # noqa: F401 - registers the backend
    dist.init_process_group(a.backend, device_id=dev)
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1000)  # the same initial weights on every rank, as fsdp_bench loads them
    with dev:
        model = Stack(a.layers, a.dim)  # fp32 params: FSDP2 keeps them as the sharded main params
    prefetch = shard(model, a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    cdt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    gen = torch.Generator(device=dev)
    gen.manual_seed(7 + rank)  # each rank its own input, as data parallelism gives it
    x = (torch.rand(a.tokens, a.dim, device=dev, dtype=torch.float32, generator=gen) * 2 - 1).to(cdt)

    def step():
        for _ in range(a.micro):
            y = model(x)
            loss = y.square().mean()  # fsdp_bench's loss: dy = 2y / numel
            loss.backward()
        opt.step()
        opt.zero_grad()

    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    gpu_ms, host_ms = [], []
    for s in range(-a.warmup, a.steps):
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        ev[0].record()
        step()
        ev[1].record()
        torch.cuda.synchronize()
        h1 = time.perf_counter()
        if s >= 0:
            gpu_ms.append(ev[0].elapsed_time(ev[1]))
            host_ms.append((h1 - h0) * 1e3)
    # the slowest rank per step, as fsdp_bench reports
    t = torch.tensor(gpu_ms + host_ms, dtype=torch.float32, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    t = t.tolist()
    gpu_ms, host_ms = t[:a.steps], t[a.steps:]
    if rank == 0:
        med = median(gpu_ms)
        flops = 2.0 * a.micro * a.tokens * a.dim * a.dim * (3 * a.layers - 1)
        v = torch.cuda.nccl.version()
        nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        print(f"# torch {torch.__version__} nccl {nccl} gpu {torch.cuda.get_device_name(dev)}")
        print(f"fsdp_bench impl=fsdp2 backend={a.backend} mode=full layers={a.layers} dim={a.dim} "
              f"tokens={a.tokens} micro={a.micro} "
              f"dtype={a.dtype} reduce={a.reduce_dtype} strategy={a.strategy} prefetch={prefetch} ranks={size} "
              f"steps={a.steps} "
              f"step_ms_median={med:.3f} min={min(gpu_ms):.3f} max={max(gpu_ms):.3f} "
              f"host_ms_median={median(host_ms):.3f} tflops={flops / (med * 1e-3) / 1e12:.1f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
