# SPDX-License-Identifier: BSD-3-Clause
"""What the torch.distributed tests (tests/python/test_torch_*.py) share: joining the job's process group, the values
rank r contributes at index i for each dtype, and comparison against float64 references with a tolerance per dtype.

Values are small integers (products of a few ranks too), exact in every dtype, so a reference computed in float64
from them is exact; the tolerance covers AVG's division and the reduced-precision floats.
"""
import atexit
import datetime
import os

import torch
import torch.distributed as dist

import harness

RANK, SIZE = harness.RANK, harness.SIZE
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64)
DTYPES = FLOATS + INTS
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12}

# torch API that a given version may lack: a case using one is defined only where it exists.
HAS_AVG = hasattr(dist.ReduceOp, "AVG")
HAS_AG_TENSOR = hasattr(dist, "all_gather_into_tensor")
HAS_RS_TENSOR = hasattr(dist, "reduce_scatter_tensor")
HAS_PREMUL = hasattr(dist, "_make_nccl_premul_sum")


_JOIN = datetime.timedelta(seconds=120)  # how long a rank waits for the others to join


def init(backend="tcomms", **kw):
    """init_process_group for this rank: env:// where torchrun's variables are set (tcomms-run sets them), else
    tcp:// on tcomms-run's TCOMMS_MASTER_PORT (the tcomms backend rendezvouses through torch's store, so that port is
    free for torch's TCPStore)."""
    if "tcomms" in str(backend):
        import tcomms.torch  # noqa: F401 - registers the backend
    kw.setdefault("timeout", datetime.timedelta(seconds=120))
    if kw["timeout"] < _JOIN:
        # A short group timeout must not bound the rendezvous too: on a loaded machine rank 0's server may start
        # seconds after the others try to reach it. Join through a store of our own, with the long timeout.
        host = os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = int(os.environ.get("MASTER_PORT") or os.environ["TCOMMS_MASTER_PORT"])
        store = dist.TCPStore(host, port, SIZE, RANK == 0, _JOIN)
        dist.init_process_group(backend, store=store, rank=RANK, world_size=SIZE, **kw)
    elif os.environ.get("MASTER_PORT"):
        dist.init_process_group(backend, init_method="env://", **kw)
    else:
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:%s" % os.environ["TCOMMS_MASTER_PORT"],
                                rank=RANK, world_size=SIZE, **kw)
    atexit.register(_destroy)


def _destroy():
    """As a well-behaved program ends: every group destroyed before the interpreter tears down (torch's own gloo
    groups included, whose threads must not outlive the libraries they use)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _index(n):
    return torch.arange(n, dtype=torch.int64)


def values(r, n, dtype, kind="sum"):
    """What rank r contributes at indices 0..n-1, as float64 (cast with .to(dtype) for the tensor).
    kind "sum": integers in [-8, 8] (sums of 4 ranks stay exact in bfloat16); "prod": factors +-1, +-2, and 0.5
    for floats, 3 for integers (products of 4 ranks stay exact); "bool": 0/1."""
    i = _index(n)
    if kind == "bool":
        return ((i * (r + 1) + r) % 3 != 0).to(torch.float64)
    if kind == "prod":
        last = 3.0 if dtype in INTS else 0.5
        table = torch.tensor([1.0, -1.0, 2.0, -2.0, last], dtype=torch.float64)
        return table[(i * 3 + r) % 5]
    return ((i * 7 + r * 13) % 17 - 8).to(torch.float64)


def tensor(r, n, dtype, kind="sum"):
    """values(r, n, dtype, kind) as a tensor of `dtype`."""
    v = values(r, n, dtype, kind)
    return v.bool() if dtype == torch.bool else v.to(dtype)


def reduce_ref(op, n, dtype, ranks, kind="sum"):
    """The float64 reference of reducing the ranks' values with `op` ("sum", "prod", "min", "max", "avg"), by a
    loop over the contributions."""
    acc = None
    for r in ranks:
        v = values(r, n, dtype, kind)
        if acc is None:
            acc = v.clone()
        elif op in ("sum", "avg"):
            acc += v
        elif op == "prod":
            acc *= v
        elif op == "min":
            acc = torch.minimum(acc, v)
        elif op == "max":
            acc = torch.maximum(acc, v)
        else:
            raise ValueError(op)
    if op == "avg":
        acc /= len(ranks)
        if dtype in INTS:  # the exact sum divided, truncated toward zero
            acc = torch.trunc(acc)
    return acc


def check(actual, expected, dtype, what):
    """actual (a tensor of dtype) against expected (float64), within dtype's tolerance; names the first bad index."""
    got = actual.detach().reshape(-1).to(torch.float64)
    want = expected.reshape(-1).to(torch.float64)
    assert got.numel() == want.numel(), "%s: %d elements, expected %d" % (what, got.numel(), want.numel())
    if got.numel() == 0:
        return
    tol = TOL.get(dtype, 0.0)
    bad = (got - want).abs() > tol * torch.clamp(want.abs(), min=1.0)
    if bool(bad.any()):
        k = int(bad.nonzero()[0])
        raise AssertionError("%s (%s, %d elements): index %d is %r, expected %r (%d wrong)"
                             % (what, dtype, got.numel(), k, got[k].item(), want[k].item(), int(bad.sum())))


def raises(fn, *words):
    """Call fn; it must raise an exception whose text holds every one of `words` (case-insensitive). Returns it."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any exception type, checked by its text
        text = "%s: %s" % (type(e).__name__, e)
        for w in words:
            assert w.lower() in text.lower(), "expected %r in the exception, got %s" % (w, text)
        return e
    raise AssertionError("no exception raised (expected one naming %s)" % ", ".join(words))
