# SPDX-License-Identifier: BSD-3-Clause
# Tests of the plain `import tcomms` API (python/tcomms) on NumPy arrays and buffer-protocol objects: every
# collective of tcomms.Comm in place and out of place, blocking and async, over every dtype; splits, shrink, hints,
# errors, the communicator's lifetime, and ranks that disagree. Rank r contributes values every rank can compute
# (f(r, i)), so each rank checks its result against a reference of its own, in float64 or by plain loops.
# ranks: 1 2 3 4
# backends: ucx gloo
# needs: numpy
# timeout: 240
import array
import gc
import time

import numpy as np

import harness
from harness import case
import tcomms

RANK, SIZE = harness.RANK, harness.SIZE
DTYPES = ("float32", "float64", "int32", "int64", "float16", "bfloat16")
INTS = ("int8", "uint8", "int32", "int64")
NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "float16": np.float16,
      "bfloat16": np.uint16, "int8": np.int8, "uint8": np.uint8}
TOL = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}
ODD = (1, 7, 1000003)
_world = []


def world():
    """The job's communicator, created by the first case; its timeout bounds a case whose peer went wrong."""
    if not _world:
        _world.append(tcomms.Comm(timeout=60))
    return _world[0]


# ---- values and references --------------------------------------------------------------------------------------
def f(r, i):
    """What rank r holds at index i (small integers, exact in every dtype, sums of 4 ranks too)."""
    return ((r + 1) * 5 + np.asarray(i, np.int64) * 3) % 17 - 6


def g(r, i):
    """Factors for PROD: magnitude 1..4 with some signs, so that 4 ranks' product (<= 256) is exact in bfloat16."""
    i = np.asarray(i, np.int64)
    return (((r + 2 * i) % 4) + 1) * np.where((r + i) % 5 == 0, -1, 1)


def to_bf16(values):
    """float64 -> bfloat16 bits (round to nearest even), as uint16."""
    u = np.asarray(values, np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def make(dtype, values):
    """A NumPy array of `dtype` holding `values` (bfloat16: its bits in a uint16 array)."""
    if dtype == "bfloat16":
        return to_bf16(values)
    return np.asarray(values).astype(NP[dtype])


def read(dtype, arr):
    """The elements of `arr` as float64 (int64 for integer dtypes)."""
    if dtype == "bfloat16":
        return from_bf16(arr)
    return np.asarray(arr).astype(np.int64 if dtype in INTS else np.float64)


def kw(dtype):
    """NumPy arrays carry their dtype; only bfloat16 is named."""
    return {"dtype": "bfloat16"} if dtype == "bfloat16" else {}


def reference(op, stack, dtype):
    """op over axis 0 of `stack` (ranks x elements), computed in float64 or exact int64."""
    if op == "sum":
        return stack.sum(0)
    if op == "prod":
        return stack.prod(0)
    if op == "min":
        return stack.min(0)
    if op == "max":
        return stack.max(0)
    s = stack.sum(0)
    if dtype in INTS:  # exact mean rounded toward zero
        s = s.astype(np.int64)
        return np.sign(s) * (np.abs(s) // stack.shape[0])
    return s / stack.shape[0]


def expect(what, dtype, got, want):
    """Raise AssertionError naming the first element of `got` (an array of `dtype`) that differs from `want`."""
    got = read(dtype, got)
    want = read(dtype, make(dtype, want))  # the reference rounded to the dtype
    if got.shape != want.shape:
        raise AssertionError("%s (%s): %d elements, expected %d" % (what, dtype, got.size, want.size))
    if dtype in INTS:
        bad = got != want
    else:
        bad = ~np.isclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError("%s (%s, %d elements): element %d is %r, expected %r (%d wrong)"
                             % (what, dtype, got.size, i, got[i], want[i], int(bad.sum())))


def raises(cls, fn, *words):
    """fn() must raise `cls` (a tcomms.Error) whose message names every one of `words`."""
    try:
        fn()
    except tcomms.Error as e:
        if not isinstance(e, cls):
            raise AssertionError("expected %s, got %s: %s" % (cls.__name__, type(e).__name__, e)) from e
        if e.status != cls.status or not e.message or not str(e).startswith(cls.name):
            raise AssertionError("%s has status %r, message %r" % (cls.__name__, e.status, e.message)) from e
        for w in words:
            if w not in str(e):
                raise AssertionError("%s does not name %r: %s" % (cls.__name__, w, e)) from e
        return e
    raise AssertionError("expected %s, nothing raised" % cls.__name__)


def stack_of(fn, n, ranks=None):
    i = np.arange(n)
    return np.stack([fn(r, i) for r in (range(SIZE) if ranks is None else ranks)]).astype(np.float64)


# ---- reductions ---------------------------------------------------------------------------------------------------
@case
def all_reduce_every_op_and_dtype():
    comm = world()
    for n in ODD:
        i = np.arange(n)
        for op in tcomms.OPS:
            fn = g if op == "prod" else f
            stack = stack_of(fn, n)
            for dtype in DTYPES:
                want = reference(op, stack, dtype)
                send = make(dtype, fn(RANK, i))
                before = send.copy()
                recv = np.full_like(send, 99)
                comm.all_reduce(send, recv, op, **kw(dtype))
                expect("all_reduce %s, %d elements" % (op, n), dtype, recv, want)
                assert np.array_equal(send, before), "all_reduce %s (%s) wrote its send buffer" % (op, dtype)


@case
def all_reduce_in_place_and_async():
    comm = world()
    n = 1000003
    i = np.arange(n)
    for dtype in DTYPES:
        x = make(dtype, f(RANK, i))
        comm.all_reduce(x, op="max", **kw(dtype))  # recv None: in place
        expect("all_reduce max in place", dtype, x, reference("max", stack_of(f, n), dtype))
    # Several operations outstanding at once, waited for in reverse order; one in place, one out of place.
    posted = []
    for dtype in DTYPES:
        send = make(dtype, f(RANK, i[:1001]))
        recv = np.zeros_like(send)
        posted.append((dtype, recv, comm.all_reduce(send, recv, "sum", async_op=True, **kw(dtype))))
        x = make(dtype, f(RANK, i[:7]))
        posted.append((dtype, x, comm.all_reduce(x, op="min", async_op=True, **kw(dtype))))
    for dtype, buf, work in reversed(posted):
        assert isinstance(work, tcomms.Work)
        assert work.wait() is True
        assert work.test() is True and work.is_completed() and work.wait(timeout=5) is True
        op = "sum" if buf.size == 1001 else "min"
        expect("async all_reduce %s" % op, dtype, buf, reference(op, stack_of(f, buf.size), dtype))


@case
def all_reduce_integer_avg_polled():
    """Integer AVG is the exact mean rounded toward zero even where the sum leaves the type; its result is written
    when test() first sees the operation complete. The reference is computed in Python integers."""
    comm = world()
    i = np.arange(1000)
    for dtype, base in (("int32", 0), ("int32", 2000000000), ("int64", -4000000000000000000)):
        cols = [[base + int(v) for v in f(r, i) * 1000003 % (1 << 20)] for r in range(SIZE)]
        x = np.array(cols[RANK], NP[dtype])
        w = comm.all_reduce(x, op="avg", async_op=True)
        deadline = time.monotonic() + 30
        while not w.test():
            assert time.monotonic() < deadline, "all_reduce avg not complete after 30 s"
            time.sleep(0.001)
        sums = [sum(c[k] for c in cols) for k in range(len(i))]
        want = [abs(s) // SIZE * (1 if s >= 0 else -1) for s in sums]
        expect("all_reduce avg polled, values near %d" % base, dtype, x, want)


@case
def all_reduce_buffer_protocol():
    comm = world()
    n = 13
    for code, dtype in (("d", "float64"), ("f", "float32"), ("i", "int32"), ("q", "int64")):
        a = array.array(code, [int(v) for v in f(RANK, range(n))])
        out = array.array(code, [0] * n)
        comm.all_reduce(a, out)
        expect("all_reduce of array.array(%r)" % code, dtype, np.array(out), stack_of(f, n).sum(0))
        comm.all_reduce(a, op="max")
        expect("all_reduce max in place, array.array(%r)" % code, dtype, np.array(a), stack_of(f, n).max(0))
    b = bytearray((RANK + k) % 7 for k in range(n))
    w = comm.all_reduce(b, async_op=True)
    w.wait()
    want = [sum((r + k) % 7 for r in range(SIZE)) for k in range(n)]
    assert list(b) == want, "bytearray all_reduce: %r, expected %r" % (list(b), want)
    m = memoryview(bytearray(8 * n)).cast("d")
    for k in range(n):
        m[k] = float(f(RANK, k))
    comm.all_reduce(m)
    expect("all_reduce of a memoryview", "float64", np.array(m), stack_of(f, n).sum(0))


@case
def reduce_to_every_root():
    comm = world()
    for n in (1, 7, 1000003):
        i = np.arange(n)
        for root in range(SIZE):
            for dtype, op in (("float32", "sum"), ("int64", "max"), ("bfloat16", "min"), ("float16", "avg")):
                send = make(dtype, f(RANK, i))
                before = send.copy()
                recv = np.full_like(send, 7) if RANK == root else None
                comm.reduce(send, recv, op, root=root, **kw(dtype))
                assert np.array_equal(send, before), "reduce wrote its send buffer"
                if RANK == root:
                    expect("reduce %s to %d" % (op, root), dtype, recv, reference(op, stack_of(f, n), dtype))
            # in place on the root (recv None), async
            x = make("float64", g(RANK, i))
            comm.reduce(x, op="prod", root=root, async_op=True).wait()
            if RANK == root:
                expect("reduce prod in place to %d" % root, "float64", x, stack_of(g, n).prod(0))
            else:
                expect("reduce: a non-root's buffer", "float64", x, g(RANK, i))


@case
def reduce_scatter_and_v():
    comm = world()
    for n in (1, 7, 100003):
        for dtype, op in (("float32", "sum"), ("int32", "max"), ("bfloat16", "sum"), ("float64", "avg")):
            send = make(dtype, f(RANK, np.arange(n * SIZE)))
            recv = np.zeros(n, NP[dtype])
            comm.reduce_scatter(send, recv, op, **kw(dtype))
            want = reference(op, stack_of(f, n * SIZE), dtype)[RANK * n:(RANK + 1) * n]
            expect("reduce_scatter %s, %d a rank" % (op, n), dtype, recv, want)
            # in place: recv is this rank's block of send
            send = make(dtype, f(RANK, np.arange(n * SIZE)))
            comm.reduce_scatter(send, send[RANK * n:(RANK + 1) * n], op, async_op=True, **kw(dtype)).wait()
            expect("reduce_scatter %s in place" % op, dtype, send[RANK * n:(RANK + 1) * n], want)
    counts = [r % 3 + 2 for r in range(SIZE)]
    total, off = sum(counts), sum(counts[:RANK])
    for dtype in ("float64", "int64", "float16"):
        send = make(dtype, f(RANK, np.arange(total)))
        recv = np.zeros(counts[RANK], NP[dtype])
        comm.reduce_scatter_v(send, recv, counts, "sum")
        expect("reduce_scatter_v", dtype, recv, stack_of(f, total).sum(0)[off:off + counts[RANK]])
        comm.reduce_scatter_v(send, send[off:off + counts[RANK]], counts, "min")
        expect("reduce_scatter_v in place", dtype, send[off:off + counts[RANK]],
               stack_of(f, total).min(0)[off:off + counts[RANK]])


# ---- data movement ------------------------------------------------------------------------------------------------
@case
def broadcast_from_every_root():
    comm = world()
    for n in ODD:
        i = np.arange(n)
        for root in range(SIZE):
            for dtype in DTYPES:
                buf = make(dtype, f(root, i)) if RANK == root else np.full(n, 3, NP[dtype])
                if RANK == root:
                    buf.flags.writeable = False  # the root only reads
                comm.broadcast(buf, root=root, **kw(dtype))
                expect("broadcast from %d" % root, dtype, buf, f(root, i))
    for root in range(SIZE):
        b = bytearray(range(root, root + 11)) if RANK == root else bytearray(11)
        w = comm.broadcast(b, root, async_op=True)
        w.wait()
        assert list(b) == list(range(root, root + 11)), "bytearray broadcast from %d: %r" % (root, list(b))


@case
def all_gather_and_v():
    comm = world()
    for n in ODD:
        i = np.arange(n)
        want = np.concatenate([f(r, i) for r in range(SIZE)])
        for dtype in DTYPES:
            send = make(dtype, f(RANK, i))
            recv = np.zeros(n * SIZE, NP[dtype])
            comm.all_gather(send, recv, **kw(dtype))
            expect("all_gather, %d a rank" % n, dtype, recv, want)
        # in place: the send buffer is this rank's block of recv
        recv = np.zeros(n * SIZE, np.float32)
        recv[RANK * n:(RANK + 1) * n] = f(RANK, i)
        comm.all_gather(recv[RANK * n:(RANK + 1) * n], recv, async_op=True).wait()
        expect("all_gather in place", "float32", recv, want)
    a = array.array("i", [int(v) for v in f(RANK, range(5))])
    out = array.array("i", [0] * (5 * SIZE))
    comm.all_gather(a, out)
    expect("all_gather of array.array", "int32", np.array(out), np.concatenate([f(r, np.arange(5))
                                                                               for r in range(SIZE)]))
    counts = [r + 1 for r in range(SIZE)]
    for dtype in ("float64", "int32", "bfloat16"):
        packed = np.concatenate([f(r, np.arange(counts[r])) for r in range(SIZE)])
        recv = make(dtype, np.full(sum(counts), -9))
        comm.all_gather_v(make(dtype, f(RANK, np.arange(counts[RANK]))), recv, counts, **kw(dtype))
        expect("all_gather_v packed", dtype, recv, packed)
        # rank r's block at displs[r]: reverse order with a one-element gap before each block
        displs, end = [0] * SIZE, 0
        for r in reversed(range(SIZE)):
            displs[r] = end + 1
            end += counts[r] + 1
        recv = make(dtype, np.full(end, -9))
        w = comm.all_gather_v(make(dtype, f(RANK, np.arange(counts[RANK]))), recv, counts, displs,
                              async_op=True, **kw(dtype))
        w.wait()
        want = np.full(end, -9)
        for r in range(SIZE):
            want[displs[r]:displs[r] + counts[r]] = f(r, np.arange(counts[r]))
        expect("all_gather_v with displs", dtype, recv, want)


@case
def gather_and_scatter_every_root():
    comm = world()
    for n in (1, 7, 100003):
        i = np.arange(n)
        allv = np.concatenate([f(r, i) for r in range(SIZE)])
        for root in range(SIZE):
            for dtype in ("float32", "int64", "bfloat16"):
                recv = np.zeros(n * SIZE, NP[dtype]) if RANK == root else None
                comm.gather(make(dtype, f(RANK, i)), recv, root=root, **kw(dtype))
                if RANK == root:
                    expect("gather to %d" % root, dtype, recv, allv)
                send = make(dtype, allv) if RANK == root else None
                recv = np.zeros(n, NP[dtype])
                comm.scatter(send, recv, root=root, **kw(dtype))
                expect("scatter from %d" % root, dtype, recv, f(RANK, i))
            # in place on the root: its own block is already where it belongs
            if RANK == root:
                buf = np.zeros(n * SIZE, np.float64)
                buf[root * n:(root + 1) * n] = f(root, i)
                comm.gather(buf[root * n:(root + 1) * n], buf, root=root, async_op=True).wait()
                expect("gather in place to %d" % root, "float64", buf, allv)
                buf = allv.astype(np.float64)
                comm.scatter(buf, buf[root * n:(root + 1) * n], root=root)
                expect("scatter in place from %d" % root, "float64", buf[root * n:(root + 1) * n], f(root, i))
            else:
                comm.gather(make("float64", f(RANK, i)), root=root, async_op=True).wait()
                recv = np.zeros(n, np.float64)
                comm.scatter(None, recv, root=root)
                expect("scatter from %d" % root, "float64", recv, f(RANK, i))


def a2a_value(src, dst, k):
    return src * 1000 + dst * 100 + np.asarray(k)


@case
def all_to_all_and_v():
    comm = world()
    for n in (1, 7, 10007):
        k = np.arange(n)
        for dtype in ("float64", "int32", "float16", "bfloat16"):
            vals = (lambda s, d: a2a_value(s, d, k) % 2000) if dtype in ("float16", "bfloat16") else \
                (lambda s, d: a2a_value(s, d, k))
            send = make(dtype, np.concatenate([vals(RANK, d) for d in range(SIZE)]))
            want = np.concatenate([vals(s, RANK) for s in range(SIZE)])
            recv = np.zeros(n * SIZE, NP[dtype])
            comm.all_to_all(send, recv, **kw(dtype))
            expect("all_to_all, %d a block" % n, dtype, recv, want)
            comm.all_to_all(send, async_op=True, **kw(dtype)).wait()  # in place
            expect("all_to_all in place", dtype, send, want)
    # rank s sends s + 2d + 1 elements to rank d
    sc = [RANK + 2 * d + 1 for d in range(SIZE)]
    rc = [s + 2 * RANK + 1 for s in range(SIZE)]
    send = np.concatenate([a2a_value(RANK, d, np.arange(sc[d])) for d in range(SIZE)]).astype(np.int64)
    recv = np.full(sum(rc), -1, np.int64)
    comm.all_to_all_v(send, sc, recv, rc)
    want = np.concatenate([a2a_value(s, RANK, np.arange(rc[s])) for s in range(SIZE)])
    expect("all_to_all_v packed", "int64", recv, want)
    # with displacements: blocks in reverse order, two-element gaps in the receive buffer
    sd, rd, end = [0] * SIZE, [0] * SIZE, 0
    off = 0
    for d in reversed(range(SIZE)):
        sd[d] = off
        off += sc[d]
    sbuf = np.zeros(off, np.float32)
    for d in range(SIZE):
        sbuf[sd[d]:sd[d] + sc[d]] = a2a_value(RANK, d, np.arange(sc[d]))
    for s in range(SIZE):
        rd[s] = end + 2
        end += rc[s] + 2
    rbuf = np.full(end, -1, np.float32)
    comm.all_to_all_v(sbuf, sc, rbuf, rc, sd, rd, async_op=True).wait()
    want = np.full(end, -1.0)
    for s in range(SIZE):
        want[rd[s]:rd[s] + rc[s]] = a2a_value(s, RANK, np.arange(rc[s]))
    expect("all_to_all_v with displs", "float32", rbuf, want)


@case
def barrier_waits_for_the_last_rank():
    comm = world()
    comm.barrier()
    if RANK == 0:
        time.sleep(0.5)
    t0 = time.monotonic()
    comm.barrier()
    took = time.monotonic() - t0
    if RANK != 0:
        assert took > 0.3, "barrier returned after %.3f s while rank 0 slept 0.5 s" % took
    w = comm.barrier(async_op=True)
    assert w.wait(timeout=30) is True and w.test() is True


@case
def send_recv():
    comm = world()
    x = np.arange(7, dtype=np.float32)
    if SIZE == 1:
        raises(tcomms.InvalidArgument, lambda: comm.send(x, 0))
        return
    nxt, prev = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    for n in ODD:
        for dtype in ("float64", "int32", "bfloat16"):
            recv = np.zeros(n, NP[dtype])
            rw = comm.recv(recv, prev, async_op=True, **kw(dtype))
            sw = comm.send(make(dtype, f(RANK, np.arange(n))), nxt, async_op=True, **kw(dtype))
            rw.wait()
            sw.wait()
            expect("ring recv from %d" % prev, dtype, recv, f(prev, np.arange(n)))
    # blocking, two messages between ranks 0 and 1 match in order
    if RANK == 0:
        comm.send(np.full(5, 1.0), 1)
        comm.send(bytearray(b"second"), 1)
    elif RANK == 1:
        a, b = np.zeros(5), bytearray(6)
        comm.recv(a, 0)
        comm.recv(b, 0)
        assert list(a) == [1.0] * 5 and bytes(b) == b"second", "in-order messages: %r %r" % (a, bytes(b))
    # Inside a group a blocking call returns once queued, and the end completes it: the exchange cannot deadlock,
    # and a temporary send buffer must live until the end (arrays made meanwhile would reuse its memory).
    recv = np.zeros(1 << 20)
    with tcomms.group():
        comm.send(np.full(1 << 20, RANK + 1.0), nxt)
        junk = [np.full(1 << 20, -5.0) for _ in range(3)]
        comm.recv(recv, prev)
    del junk
    expect("group exchange of a temporary", "float64", recv, np.full(1 << 20, prev + 1.0))
    # A wait that times out leaves the operation running: rank 1 sends only once rank 0's wait has timed out, told
    # so on a communicator of their own (gloo runs a communicator's operations in posting order, so the word cannot
    # travel on `comm` behind the pending receive), which no load on the machine can reorder.
    side = comm.split([0, 1], name="side")
    if RANK == 0:
        buf = np.zeros(3)
        w = comm.recv(buf, 1, async_op=True)
        raises(tcomms.Timeout, lambda: w.wait(timeout=0.1))
        assert w.test() is False and not w.is_completed()
        side.send(np.ones(1), 1)
        assert w.wait() is True and list(buf) == [1.0, 2.0, 3.0], buf
    elif RANK == 1:
        side.recv(np.zeros(1), 0)
        comm.send(np.array([1.0, 2.0, 3.0]), 0)
    if side is not None:
        side.destroy()


# ---- communicators ------------------------------------------------------------------------------------------------
def parent_ranks_on(child):
    got = np.zeros(child.size, np.int64)
    child.all_gather(np.array([RANK], np.int64), got)
    return list(got)


@case
def split_and_split_color():
    comm = world()
    evens = [r for r in range(SIZE) if r % 2 == 0]
    odds = [r for r in range(SIZE) if r % 2 == 1]
    child = comm.split(evens, name="evens")  # every rank passes the same list
    if RANK % 2:
        assert child is None, "rank %d is not in %r but got %r" % (RANK, evens, child)
    else:
        assert (child.size, child.rank, child.name) == (len(evens), evens.index(RANK), "evens"), repr(child)
        x = np.array([RANK], np.float64)
        child.all_reduce(x)
        assert x[0] == sum(evens), "all_reduce on the evens: %r" % x
        assert parent_ranks_on(child) == evens
        child.destroy()
    # disjoint lists in one call: each rank passes its own
    mine = evens if RANK % 2 == 0 else odds
    child = comm.split(mine)
    assert child.size == len(mine) and parent_ranks_on(child) == mine
    # a grandchild of the child's first two ranks (ranks of the child: parent ranks mine[:2])
    grand = child.split([0, 1][:child.size], name="grand")
    if RANK in mine[:2]:
        assert parent_ranks_on(grand) == mine[:2]
        grand.destroy()
    else:
        assert grand is None
    child.destroy()
    # split_color: key = -rank orders each color's ranks by descending parent rank
    child = comm.split_color(RANK % 2, key=-RANK, name="color")
    want = sorted(mine, reverse=True)
    assert child.rank == want.index(RANK) and child.size == len(mine) and child.name == "color", repr(child)
    assert parent_ranks_on(child) == want, "split_color order %r, expected %r" % (parent_ranks_on(child), want)
    child.destroy()
    # no color for rank 0
    child = comm.split_color(None if RANK == 0 else 1)
    if RANK == 0:
        assert child is None
    else:
        assert parent_ranks_on(child) == list(range(1, SIZE))
        child.destroy()


@case
def shrink_leaves_the_last_rank_out():
    comm = world()
    last = SIZE - 1
    if RANK != last:  # the excluded rank calls nothing
        child = comm.shrink([last], name="survivors")
        assert (child.size, child.rank, child.name) == (SIZE - 1, RANK, "survivors"), repr(child)
        assert parent_ranks_on(child) == list(range(SIZE - 1))
        x = np.array([RANK + 1.0])
        child.all_reduce(x)
        assert x[0] == sum(r + 1.0 for r in range(SIZE - 1)), "all_reduce on the survivors: %r" % x
        child.destroy()
        try:
            comm.shrink([RANK])
            raise AssertionError("shrinking the caller out succeeded")
        except tcomms.InvalidArgument as e:
            assert "the caller" in str(e), str(e)


@case
def hints_given_and_read_back():
    comm = world()
    h = tcomms.Hints({"minCTAs": 4, "blocking": True})
    assert dict(h.items()).get("min_ctas") == "4", h.items()  # stored under the canonical key
    h.close()
    assert dict(tcomms.Hints("min_ctas=2,max_ctas=8").items()) == {"min_ctas": "2", "max_ctas": "8"}
    child = comm.split(range(SIZE), name="hinted", hints={"min_ctas": 4, "max_ctas": 8, "blocking": False})
    for key in ("min_ctas", "minCTAs", "max_ctas", "blocking", "high_priority_stream"):
        assert child.hint(key) == "not applicable", "%s reads %r on %s" % (key, child.hint(key), child.backend())
        assert child.hint(key, "cpu") == "not applicable"
        assert child.setting(key) == ("not applicable", "default", "", ""), child.setting(key)
    assert child.backend() == harness.BACKEND and comm.backend("cpu") == harness.BACKEND
    x = np.ones(3, np.float32)
    child.all_reduce(x)
    assert (x == SIZE).all()
    child.destroy()
    child = comm.split_color(0, hints="split_share=1")
    assert child.hint("split_share") == "not applicable"
    child.destroy()
    # a backend's own key: gloo reports the address it bound (a child: its parent's), ucx honours none
    if harness.BACKEND == "gloo":
        host = comm.hint("gloo.hostname")
        assert host not in ("", "not applicable"), host
        child = comm.split(range(SIZE))
        assert child.hint("gloo.hostname") == host, (child.hint("gloo.hostname"), host)
        assert child.setting("gloo.hostname")[:2] == (host, "default"), child.setting("gloo.hostname")
        child.destroy()
    else:
        assert comm.hint("ucx.tls") == "not applicable", comm.hint("ucx.tls")
    # refused at once on every rank, before any collective: the key is named
    raises(tcomms.InvalidArgument, lambda: comm.split(range(SIZE), hints={"min_ctas": 100}), "min_ctas")
    raises(tcomms.InvalidArgument, lambda: comm.split(range(SIZE), hints={"no_such_hint": 1}), "no_such_hint")
    raises(tcomms.InvalidArgument, lambda: comm.split_color(0, hints="blocking=maybe"), "blocking")
    raises(tcomms.InvalidArgument, lambda: comm.hint("no_such_hint"), "no_such_hint")
    raises(tcomms.InvalidArgument, lambda: comm.hint("min_ctas", "tpu"), "tpu")
    # the parent still splits after refused ones
    child = comm.split(range(SIZE))
    assert parent_ranks_on(child) == list(range(SIZE))
    child.destroy()


@case
def errors_are_raised_never_crashes():
    comm = world()
    IA = tcomms.InvalidArgument
    x = np.zeros(16, np.float32)
    assert issubclass(IA, tcomms.Error) and issubclass(IA, ValueError)
    # wrong sizes
    raises(IA, lambda: comm.all_reduce(x, np.zeros(8, np.float32)), "receive buffer", "16")
    raises(IA, lambda: comm.all_gather(x, np.zeros(16 * SIZE - 1, np.float32)), "receive buffer")
    raises(IA, lambda: comm.reduce_scatter(np.zeros(4 * SIZE - 1, np.float32), np.zeros(4, np.float32)),
           "send buffer")
    raises(IA, lambda: comm.all_gather_v(x, np.zeros(99, np.float32), [1] * (SIZE + 1)), "counts")
    raises(IA, lambda: comm.reduce_scatter_v(x, np.zeros(4, np.float32), [-1] * SIZE), "negative")
    # every rank its own root, so that the root's check runs on every rank
    raises(IA, lambda: comm.scatter(x, np.zeros(16 // SIZE + 1, np.float32), root=RANK), "send buffer")
    if SIZE > 1:
        raises(IA, lambda: comm.all_to_all(np.zeros(SIZE * 3 + 1, np.float32)), "blocks")
    # read-only receive buffers
    ro = np.zeros(16, np.float32)
    ro.flags.writeable = False
    raises(IA, lambda: comm.all_reduce(x, ro), "read-only")
    raises(IA, lambda: comm.all_reduce(ro), "read-only")
    raises(IA, lambda: comm.all_gather(x[:1], ro[:SIZE]), "read-only")
    raises(IA, lambda: comm.recv(bytes(8), 0), "read-only")
    raises(IA, lambda: comm.reduce(ro, op="max", root=RANK), "read-only")
    # non-contiguous
    raises(IA, lambda: comm.all_reduce(np.zeros(32, np.float32)[::2]), "not contiguous")
    raises(IA, lambda: comm.all_reduce(x, np.zeros((4, 8), np.float32, order="F")[:, :4]), "not contiguous")
    raises(IA, lambda: comm.broadcast(memoryview(bytearray(16))[::2]), "not contiguous")
    # unsupported dtypes
    raises(IA, lambda: comm.all_reduce(np.zeros(4, np.complex64)), "<c8")
    raises(IA, lambda: comm.all_reduce(np.zeros(4, np.bool_)), "|b1")
    raises(IA, lambda: comm.all_reduce(np.zeros(4, np.uint16)), "<u2")
    raises(IA, lambda: comm.all_reduce(np.zeros(4, np.float32), dtype="float128"), "float128")
    raises(IA, lambda: comm.all_reduce(array.array("u", "abcd")), "format")
    raises(IA, lambda: comm.all_reduce(x, np.zeros(16, np.float64)), "float32", "float64")
    raises(IA, lambda: comm.all_reduce(object()), "exposes no memory")
    # unsupported ops
    raises(IA, lambda: comm.all_reduce(x, op="bxor"), "bxor")
    raises(IA, lambda: comm.reduce_scatter(x, x[:16 // SIZE], op="premul_sum"), "premul_sum")
    # arguments the C library refuses (every rank alike, before any message)
    raises(IA, lambda: comm.broadcast(x, root=SIZE), "root")
    raises(IA, lambda: comm.send(x, SIZE), "peer")
    raises(IA, lambda: comm.all_reduce(x[0:8], x[2:10]), "overlap")
    raises(IA, lambda: comm.all_to_all_v(x, [1] * SIZE, None, [1] * SIZE), "in-place")
    raises(IA, lambda: comm.all_reduce(x, timeout=0), "timeout")
    raises(IA, lambda: comm.barrier(timeout=-1), "timeout")
    # the communicator is unharmed
    y = np.full(5, RANK + 1.0)
    comm.all_reduce(y)
    expect("all_reduce after refused calls", "float64", y, np.full(5, SIZE * (SIZE + 1) / 2))


@case
def context_manager_and_destroy():
    comm = world()
    x = np.ones(4, np.float32)
    with comm.split(range(SIZE), name="ctx") as c:
        assert repr(c).startswith("<tcomms.Comm 'ctx' rank %d of %d" % (RANK, SIZE)), repr(c)
        c.all_reduce(x)
    assert (x == SIZE).all()
    assert repr(c) == "<tcomms.Comm destroyed>"
    raises(tcomms.InvalidArgument, lambda: c.all_reduce(x), "destroyed")
    raises(tcomms.InvalidArgument, lambda: c.barrier(), "destroyed")
    raises(tcomms.InvalidArgument, lambda: c.broadcast(x, async_op=True), "destroyed")
    raises(tcomms.InvalidArgument, lambda: c.split(range(SIZE)), "destroyed")
    raises(tcomms.InvalidArgument, lambda: c.name, "destroyed")
    raises(tcomms.InvalidArgument, lambda: c.hint("min_ctas"), "destroyed")
    c.destroy()  # a second destroy does nothing
    # an exception inside the block still destroys, and propagates
    try:
        with comm.split(range(SIZE)) as c:
            raise KeyError("inside")
    except KeyError:
        pass
    else:
        raise AssertionError("the KeyError did not propagate")
    raises(tcomms.InvalidArgument, lambda: c.all_reduce(x), "destroyed")
    # an async operation's Work outlives its communicator's destroy
    c = comm.split(range(SIZE))
    w = c.all_reduce(x, async_op=True)
    c.destroy()
    w.wait()
    assert (x == SIZE * SIZE).all(), x
    # a Work dropped while running is kept until it ends; later calls are unaffected
    comm.all_reduce(np.ones(100003, np.float64), async_op=True)
    gc.collect()
    y = np.ones(3)
    comm.all_reduce(y)
    assert (y == SIZE).all()


@case
def abort_refuses_later_calls():
    """Comm.abort on an idle child: every later operation raises Aborted naming the abort (at once, no peer
    needed), a second abort does nothing, destroy works, and the parent still reduces right."""
    comm = world()
    c = comm.split(range(SIZE), name="doomed")
    x = np.ones(4, np.float32)
    c.abort()
    c.abort()
    t0 = time.monotonic()
    raises(tcomms.Aborted, lambda: c.all_reduce(x), "tcomms_comm_abort", "doomed")
    raises(tcomms.Aborted, lambda: c.barrier(async_op=True), "tcomms_comm_abort")
    raises(tcomms.Aborted, lambda: c.split(range(SIZE)), "tcomms_comm_abort")
    assert time.monotonic() - t0 < 1.0, "refusing took %.2f s" % (time.monotonic() - t0)
    assert (x == 1).all(), x
    c.destroy()
    y = np.ones(3)
    comm.all_reduce(y)
    assert (y == SIZE).all(), y


@case
def ranks_that_disagree_get_errors():
    """Rank 0 calls all_reduce on float32 while the others use int32 (same message lengths: on ucx a Mismatch
    naming both calls), then with twice the others' count (on ucx the receiver's InvalidArgument); every rank gets a
    tcomms.Error within the operation's timeout, never success, and the parent stays usable."""
    if SIZE == 1:
        return  # nobody to disagree with
    comm = world()
    op_timeout, slack = 2.0, 4.0
    tries = (("dtype", 1000, np.float32 if RANK == 0 else np.int32,
              (tcomms.Mismatch, tcomms.Timeout)),
             ("count", 2000 if RANK == 0 else 1000, np.float32, (tcomms.InvalidArgument, tcomms.Timeout)))
    for what, n, t, on_ucx in tries:
        child = comm.split(range(SIZE), name="disagree-" + what)
        x = np.zeros(n, t)
        t0 = time.monotonic()
        try:
            child.all_reduce(x, timeout=op_timeout)
        except tcomms.Error as e:
            took = time.monotonic() - t0
            assert e.message, "%s: an error without a message" % what
            assert took < op_timeout + slack, "%s: the error came after %.1f s" % (what, took)
            if harness.BACKEND == "ucx":
                assert isinstance(e, on_ucx), "%s on ucx: %s" % (what, e)
                if SIZE == 2:  # both ranks receive the other's message: each sees the disagreement itself
                    assert isinstance(e, on_ucx[0]), "%s on ucx, 2 ranks: %s" % (what, e)
        else:
            raise AssertionError("%s: all_reduce succeeded although rank 0 disagreed" % what)
        try:
            child.destroy()
        except tcomms.Error:
            pass  # its status after a failed call is not what this case is about
    y = np.ones(3)
    comm.all_reduce(y)
    assert (y == SIZE).all(), "the parent after its children failed: %r" % y


if __name__ == "__main__":
    try:
        harness.main()
    finally:
        if _world:
            _world[0].destroy()
