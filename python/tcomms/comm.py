# SPDX-License-Identifier: BSD-3-Clause
"""Communicators, work handles and hints: the Pythonic face of include/tcomms/tcomms.h."""
import atexit
import ctypes
import threading
import weakref

from . import _lib
from .buffers import DTYPE_INDEX, as_buf
from .errors import InvalidArgument, check, from_status
from .store import StoreAdapter

L = _lib.lib
_DEVICE_TYPES = {"cpu": _lib.DEVICE_CPU, "cuda": _lib.DEVICE_CUDA}
_DEVICE_NAMES = {v: k for k, v in _DEVICE_TYPES.items()}
_OP_INDEX = {name: i for i, name in enumerate(_lib.OPS)}
_OP_INDEX.update({"product": 1, "avg": 4, "average": 4})


def _enc(text):
    return None if text is None else str(text).encode()


def _device_type(name, what="device"):
    if isinstance(name, int) and name in _DEVICE_NAMES:
        return name
    t = _DEVICE_TYPES.get(str(name).split(":")[0])
    if t is None:
        raise InvalidArgument("%s %r: tcomms knows cpu and cuda" % (what, name))
    return t


def _op(op):
    i = _OP_INDEX.get(str(getattr(op, "name", op)).lower())
    if i is None:
        raise InvalidArgument("reduction %r: tcomms has %s" % (op, ", ".join(_lib.OPS)))
    return i


def _stream_handle(stream):
    if stream is None or isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "handle", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise InvalidArgument("stream %r: pass an int cudaStream_t or an object with .cuda_stream" % (stream,))


class Hints:
    """A tcomms_hints_t built from a dict or a "k=v,k=v" string; validated by the C library when set."""

    def __init__(self, hints=None):
        self.handle = ctypes.c_void_p()
        check(L.tcomms_hints_create(ctypes.byref(self.handle)), "hints")
        try:
            items = hints.items() if isinstance(hints, dict) else (
                (kv.split("=", 1) + [""])[:2] for kv in (hints or "").split(",") if kv)
            for k, v in items:
                if isinstance(v, bool):
                    v = "1" if v else "0"
                check(L.tcomms_hints_set(self.handle, _enc(k), _enc(v)), "hint %s" % k)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.handle:
            L.tcomms_hints_free(self.handle)
            self.handle = ctypes.c_void_p()

    def items(self):
        n = ctypes.c_size_t()
        check(L.tcomms_hints_count(self.handle, ctypes.byref(n)))
        out = []
        for i in range(n.value):
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            check(L.tcomms_hints_entry(self.handle, i, ctypes.byref(k), ctypes.byref(v)))
            out.append((k.value.decode(), v.value.decode()))
        return out


def _with_hints(hints, fn):
    if hints is None or isinstance(hints, Hints):
        return fn(hints.handle if hints is not None else None)
    h = Hints(hints)
    try:
        return fn(h.handle)
    finally:
        h.close()


# Buffers of blocking calls made inside `with group():` on this thread: such a call returns once queued, so its
# memory (a temporary, say) must stay referenced until the outermost group has ended and completed it.
_group = threading.local()

# Operations whose Work was dropped while still running: their buffers stay referenced here until they end.
_orphans = []
_orphans_lock = threading.Lock()


def _reap_orphans():
    if getattr(_group, "depth", 0) > 0:
        return
    with _orphans_lock:
        keep = []
        for handle, bufs in _orphans:
            if L.tcomms_work_test(handle) == _lib.IN_PROGRESS:
                keep.append((handle, bufs))
            else:
                L.tcomms_work_free(handle)
        _orphans[:] = keep


class Work:
    """An operation posted with async_op=True. wait() raises the operation's error; the buffers it uses stay
    referenced until it has completed."""
    __slots__ = ("handle", "bufs", "what", "status")

    def __init__(self, handle, bufs, what):
        self.handle, self.bufs, self.what, self.status = handle, bufs, what, None

    def _final(self, status):
        self.status = status
        self.bufs = None
        if status < 0:
            raise from_status(status, self.what)
        return True

    def wait(self, timeout=None):
        """Wait for completion (on CUDA: order the posting stream after it, without blocking the host). `timeout`
        in seconds; default the operation's own. Raises tcomms.Timeout when it passes (the operation goes on)."""
        if self.status is not None:
            return self._final(self.status)
        ms = 0 if timeout is None else max(1, int(timeout * 1000))
        st = L.tcomms_work_wait(self.handle, ms)
        if st == -4 and timeout is not None:
            raise from_status(st, self.what)
        return self._final(st)

    def synchronize(self, timeout=None):
        """Block the host until the operation has completed on its device."""
        ms = 0 if timeout is None else max(1, int(timeout * 1000))
        st = L.tcomms_work_synchronize(self.handle, ms)
        if st == -4 and timeout is not None:
            raise from_status(st, self.what)
        return self._final(st)

    def test(self):
        """True when complete, False while running; raises the operation's error."""
        if self.status is not None:
            return self._final(self.status)
        st = L.tcomms_work_test(self.handle)
        if st == _lib.IN_PROGRESS:
            return False
        return self._final(st)

    def is_completed(self):
        return self.status is not None or L.tcomms_work_test(self.handle) != _lib.IN_PROGRESS

    def __del__(self):
        handle = getattr(self, "handle", None)
        if not handle:
            return
        self.handle = None
        # inside an open group the operation is not issued yet: the group holds on to it until its end
        if getattr(_group, "depth", 0) > 0 or (self.bufs is not None and
                                               L.tcomms_work_test(handle) == _lib.IN_PROGRESS):
            with _orphans_lock:
                _orphans.append((handle, self.bufs))
            return
        L.tcomms_work_free(handle)


# Communicators still alive when the interpreter exits are destroyed first, while every library is still in place:
# their backends' threads (Gloo's worker, UCX's progress thread) end before the process tears down.
_live = weakref.WeakSet()


@atexit.register
def _destroy_live():
    for comm in list(_live):
        try:
            comm.destroy()
        except Exception:  # noqa: BLE001 - at exit, a failure to destroy changes nothing
            pass


class Comm:
    """A tcomms communicator. Comm() with no argument is the world from the environment (TCOMMS_*, torchrun,
    Open MPI or Slurm variables); every parameter of tcomms_comm_params_t may be given instead. `store` is any
    object with torch.distributed.Store's methods, used instead of the built-in TCP store. Collective."""

    def __init__(self, backend=None, device=None, name=None, rank=None, size=None, local_rank=None,
                 master_addr=None, master_port=None, timeout=None, hints=None, store=None, _handle=None,
                 _keep=None):
        self._keep = _keep or []
        self.handle = ctypes.c_void_p()
        if _handle is not None:
            self.handle = _handle
            self._cache()
            return
        p = _lib.CommParams()
        if backend is not None:
            p.field_mask |= _lib.PARAM_BACKEND
            p.backend = _enc(backend)
        if device is not None:
            dev = str(device)
            d = _lib.Device()
            check(_parse_device(dev, d), "device")
            p.field_mask |= _lib.PARAM_DEVICE
            p.device = d
        if name is not None:
            p.field_mask |= _lib.PARAM_NAME
            p.name = _enc(name)
        if rank is not None or size is not None:
            if rank is None or size is None:
                raise InvalidArgument("rank and size are given together")
            p.field_mask |= _lib.PARAM_RANK
            p.rank, p.size = int(rank), int(size)
            p.local_rank = int(local_rank) if local_rank is not None else -1  # the rendezvous finds it
        if master_addr is not None or master_port is not None:
            if master_addr is None or master_port is None:
                raise InvalidArgument("master_addr and master_port are given together")
            p.field_mask |= _lib.PARAM_MASTER
            p.master_addr, p.master_port = _enc(master_addr), int(master_port)
        if timeout is not None:
            p.field_mask |= _lib.PARAM_TIMEOUT
            p.timeout_ms = _timeout_ms(timeout)
        if store is not None:
            adapter = StoreAdapter(store)
            self._keep.append(adapter)
            p.field_mask |= _lib.PARAM_STORE
            p.store_ops = ctypes.pointer(adapter.ops)

        def create(h):
            if h is not None:
                p.field_mask |= _lib.PARAM_HINTS
                p.hints = h
            return L.tcomms_comm_create(ctypes.byref(p), ctypes.byref(self.handle))
        check(_with_hints(hints, create), "tcomms_comm_create")
        self._cache()

    def _cache(self):
        _live.add(self)
        r, s = ctypes.c_int(), ctypes.c_int()
        check(L.tcomms_comm_rank(self.handle, ctypes.byref(r)))
        check(L.tcomms_comm_size(self.handle, ctypes.byref(s)))
        d = _lib.Device()
        check(L.tcomms_comm_device(self.handle, ctypes.byref(d)))
        self.rank, self.size = r.value, s.value
        check(L.tcomms_comm_local_rank(self.handle, ctypes.byref(r)))
        check(L.tcomms_comm_local_size(self.handle, ctypes.byref(s)))
        self.local_rank, self.local_size = r.value, s.value  # ranks on this host, as the rendezvous found them
        self.device_type = d.type
        self.device = _DEVICE_NAMES[d.type] + (":%d" % d.index if d.type == _lib.DEVICE_CUDA else "")

    # ---- lifetime --------------------------------------------------------------------------------------------
    def _h(self):
        if not self.handle:
            raise InvalidArgument("this communicator was destroyed")
        return self.handle

    def destroy(self):
        """Destroy after pending operations complete. A second call does nothing."""
        if self.handle:
            h, self.handle = self.handle, ctypes.c_void_p()
            check(L.tcomms_comm_destroy(h), "tcomms_comm_destroy")

    def abort(self):
        """End every pending operation with tcomms.Aborted and refuse every later one (tcomms_comm_abort). Safe
        from any thread, also while another waits on this communicator; local to this rank; neither its splits nor
        its parent are affected. destroy() still follows."""
        check(L.tcomms_comm_abort(self._h()), "tcomms_comm_abort")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __repr__(self):
        if not self.handle:
            return "<tcomms.Comm destroyed>"
        return "<tcomms.Comm %r rank %d of %d on %s (%s)>" % (self.name, self.rank, self.size, self.device,
                                                               self.backend())

    # ---- queries --------------------------------------------------------------------------------------------
    @property
    def name(self):
        n = ctypes.c_char_p()
        check(L.tcomms_comm_name(self._h(), ctypes.byref(n)))
        return n.value.decode()

    def backend(self, device_type=None):
        """The module serving `device_type` ("cpu"/"cuda"; default the bound device)."""
        t = self.device_type if device_type is None else _device_type(device_type)
        n = ctypes.c_char_p()
        check(L.tcomms_comm_backend(self._h(), t, ctypes.byref(n)), "backend")
        return n.value.decode()

    def hint(self, key, device_type=None):
        """The effective value of hint `key` on the module serving `device_type` (tcomms_comm_hint)."""
        t = self.device_type if device_type is None else _device_type(device_type)
        buf = ctypes.create_string_buffer(256)
        check(L.tcomms_comm_hint(self._h(), t, _enc(key), buf, len(buf)), "hint %s" % key)
        return buf.value.decode()

    def setting(self, key, device_type=None):
        """(value, source, origin, overridden) of setting `key` (tcomms_comm_setting): source is "hint",
        "environment", "default" or "backend"; origin the hint key or variable; overridden a hint's value that an
        environment variable replaced ("" if none)."""
        t = self.device_type if device_type is None else _device_type(device_type)
        s = _lib.Setting()
        check(L.tcomms_comm_setting(self._h(), t, _enc(key), ctypes.byref(s)), "setting %s" % key)
        return (s.value.decode(), L.tcomms_setting_source_name(s.source).decode(), s.origin.decode(),
                s.overridden.decode())

    # ---- splits ---------------------------------------------------------------------------------------------
    def _child(self, out):
        return Comm(_handle=out, _keep=self._keep) if out else None

    def split(self, ranks, name=None, hints=None):
        """A child of the listed parent ranks, collective over this communicator. Every rank may pass the same
        list (as torch's new_group): a rank not in it takes part with an empty list and gets None."""
        ranks = sorted(int(r) for r in ranks)
        if self.rank not in ranks:
            ranks = []
        arr = (ctypes.c_int * max(1, len(ranks)))(*ranks)
        out = ctypes.c_void_p()
        check(_with_hints(hints, lambda h: L.tcomms_comm_split(self._h(), arr, len(ranks), _enc(name), h,
                                                               ctypes.byref(out))), "tcomms_comm_split")
        return self._child(out)

    def split_color(self, color, key=0, name=None, hints=None):
        """MPI-style split; color None (or -1) gives None."""
        color = _lib.SPLIT_NOCOLOR if color is None else int(color)
        out = ctypes.c_void_p()
        check(_with_hints(hints, lambda h: L.tcomms_comm_split_color(self._h(), color, int(key), _enc(name), h,
                                                                     ctypes.byref(out))),
              "tcomms_comm_split_color")
        return self._child(out)

    def shrink(self, exclude, name=None, hints=None):
        """The survivors without the parent ranks in `exclude`, after they died or to leave them out: called by
        every survivor with the same list, never by an excluded rank; works on a failed communicator."""
        exclude = [int(r) for r in exclude]
        arr = (ctypes.c_int * max(1, len(exclude)))(*exclude)
        out = ctypes.c_void_p()
        check(_with_hints(hints, lambda h: L.tcomms_comm_shrink(self._h(), arr, len(exclude), _enc(name), h,
                                                                ctypes.byref(out))), "tcomms_comm_shrink")
        return self._child(out)

    # ---- operations -----------------------------------------------------------------------------------------
    def _opts(self, device, timeout, stream):
        o = _lib.OpOpts()
        o.field_mask = _lib.OPT_DEVICE_TYPE
        o.device_type = device
        if timeout is not None:
            o.field_mask |= _lib.OPT_TIMEOUT
            o.timeout_ms = _timeout_ms(timeout)
        if stream is not None:
            o.field_mask |= _lib.OPT_STREAM
            o.stream = _stream_handle(stream)
        return o

    def _post(self, what, bufs, call, async_op, timeout, stream):
        if _orphans:
            _reap_orphans()
        dev = bufs[0].device
        for b in bufs[1:]:
            if b.device != dev:
                raise InvalidArgument("%s: buffers on %s and %s" % (what, _DEVICE_NAMES[dev],
                                                                    _DEVICE_NAMES[b.device]))
        opts = self._opts(dev, timeout, stream)
        if not async_op:
            check(call(ctypes.byref(opts), None), what)
            if getattr(_group, "bufs", None) is not None:
                _group.bufs.append(bufs)
            return None
        w = ctypes.c_void_p()
        check(call(ctypes.byref(opts), ctypes.byref(w)), what)
        return Work(w, bufs, what)

    def _pair(self, what, send, recv, dtype, same_size=None):
        s = as_buf(send, what + " send buffer", dtype)
        r = s if recv is None or recv is send else as_buf(recv, what + " receive buffer", dtype, writable=True)
        if r is s and s.readonly:
            raise InvalidArgument("%s: the buffer is read-only, and this call writes into it" % what)
        if r.dtype != s.dtype:
            raise InvalidArgument("%s: send buffer is %s, receive buffer %s" % (what, s.dtype, r.dtype))
        return s, r

    def _need(self, what, buf, count, label):
        if buf.count < count:
            raise InvalidArgument("%s: %s holds %d elements; this call needs %d" % (what, label, buf.count, count))

    def all_reduce(self, send, recv=None, op="sum", *, dtype=None, async_op=False, timeout=None, stream=None):
        """recv = op over ranks of send (recv None: in place, into send)."""
        s, r = self._pair("all_reduce", send, recv, dtype)
        self._need("all_reduce", r, s.count, "the receive buffer")
        o = _op(op)
        return self._post("all_reduce", [s, r], lambda opts, w: L.tcomms_all_reduce(
            self._h(), s.ptr, r.ptr, s.count, DTYPE_INDEX[s.dtype], o, opts, w), async_op, timeout, stream)

    def broadcast(self, buf, root=0, *, dtype=None, async_op=False, timeout=None, stream=None):
        b = as_buf(buf, "broadcast buffer", dtype, writable=self.rank != root)
        return self._post("broadcast", [b], lambda opts, w: L.tcomms_broadcast(
            self._h(), b.ptr, b.count, DTYPE_INDEX[b.dtype], int(root), opts, w), async_op, timeout, stream)

    def reduce(self, send, recv=None, op="sum", root=0, *, dtype=None, async_op=False, timeout=None,
               stream=None):
        """recv on root = op over ranks of send; recv is ignored elsewhere (None on root: in place)."""
        s = as_buf(send, "reduce send buffer", dtype)
        r = s
        if self.rank == root and recv is not None and recv is not send:
            s, r = self._pair("reduce", send, recv, dtype)
            self._need("reduce", r, s.count, "the receive buffer")
        elif self.rank == root and s.readonly:
            raise InvalidArgument("reduce: the buffer is read-only, and this call writes into it")
        o = _op(op)
        return self._post("reduce", [s, r], lambda opts, w: L.tcomms_reduce(
            self._h(), s.ptr, r.ptr, s.count, DTYPE_INDEX[s.dtype], o, int(root), opts, w), async_op, timeout,
            stream)

    def all_gather(self, send, recv, *, dtype=None, async_op=False, timeout=None, stream=None):
        """recv (size x len(send)) = every rank's send in rank order."""
        s, r = self._pair("all_gather", send, recv, dtype)
        self._need("all_gather", r, s.count * self.size, "the receive buffer")
        return self._post("all_gather", [s, r], lambda opts, w: L.tcomms_all_gather(
            self._h(), s.ptr, r.ptr, s.count, DTYPE_INDEX[s.dtype], opts, w), async_op, timeout, stream)

    def all_gather_v(self, send, recv, counts, displs=None, *, dtype=None, async_op=False, timeout=None,
                     stream=None):
        """Rank i contributes counts[i] elements, placed at recv[displs[i]] (packed when displs is None)."""
        s, r = self._pair("all_gather_v", send, recv, dtype)
        counts = self._counts("all_gather_v", counts, "counts")
        displs = self._counts("all_gather_v", displs, "displs") if displs is not None else None
        if s.count < counts[self.rank]:
            raise InvalidArgument("all_gather_v: send buffer holds %d elements; counts[%d] is %d"
                                  % (s.count, self.rank, counts[self.rank]))
        end = max((d + c for d, c in zip(displs, counts)), default=0) if displs else sum(counts)
        self._need("all_gather_v", r, end, "the receive buffer")
        cc, dd = _lib.sizes(counts), _lib.sizes(displs)
        return self._post("all_gather_v", [s, r], lambda opts, w: L.tcomms_all_gather_v(
            self._h(), s.ptr, r.ptr, cc, dd, DTYPE_INDEX[s.dtype], opts, w), async_op, timeout, stream)

    def reduce_scatter(self, send, recv, op="sum", *, dtype=None, async_op=False, timeout=None, stream=None):
        """send holds size blocks of len(recv); rank r gets op over ranks of block r."""
        s, r = self._pair("reduce_scatter", send, recv, dtype)
        self._need("reduce_scatter", s, r.count * self.size, "the send buffer")
        o = _op(op)
        return self._post("reduce_scatter", [s, r], lambda opts, w: L.tcomms_reduce_scatter(
            self._h(), s.ptr, r.ptr, r.count, DTYPE_INDEX[s.dtype], o, opts, w), async_op, timeout, stream)

    def reduce_scatter_v(self, send, recv, counts, op="sum", *, dtype=None, async_op=False, timeout=None,
                         stream=None):
        s, r = self._pair("reduce_scatter_v", send, recv, dtype)
        counts = self._counts("reduce_scatter_v", counts, "counts")
        self._need("reduce_scatter_v", s, sum(counts), "the send buffer")
        self._need("reduce_scatter_v", r, counts[self.rank], "the receive buffer")
        cc, o = _lib.sizes(counts), _op(op)
        return self._post("reduce_scatter_v", [s, r], lambda opts, w: L.tcomms_reduce_scatter_v(
            self._h(), s.ptr, r.ptr, cc, DTYPE_INDEX[s.dtype], o, opts, w), async_op, timeout, stream)

    def all_to_all(self, send, recv=None, *, dtype=None, async_op=False, timeout=None, stream=None):
        """Block j of send goes to rank j (blocks of len(send) / size elements)."""
        s, r = self._pair("all_to_all", send, recv, dtype)
        if s.count % self.size:
            raise InvalidArgument("all_to_all: %d elements do not split into %d blocks" % (s.count, self.size))
        self._need("all_to_all", r, s.count, "the receive buffer")
        n = s.count // self.size
        return self._post("all_to_all", [s, r], lambda opts, w: L.tcomms_all_to_all(
            self._h(), s.ptr, r.ptr, n, DTYPE_INDEX[s.dtype], opts, w), async_op, timeout, stream)

    def all_to_all_v(self, send, send_counts, recv, recv_counts, send_displs=None, recv_displs=None, *,
                     dtype=None, async_op=False, timeout=None, stream=None):
        s, r = self._pair("all_to_all_v", send, recv, dtype)
        if r is s:
            raise InvalidArgument("all_to_all_v has no in-place form: give distinct buffers")
        sc = self._counts("all_to_all_v", send_counts, "send_counts")
        rc = self._counts("all_to_all_v", recv_counts, "recv_counts")
        sd = self._counts("all_to_all_v", send_displs, "send_displs") if send_displs is not None else None
        rd = self._counts("all_to_all_v", recv_displs, "recv_displs") if recv_displs is not None else None
        for buf, c, d, label in ((s, sc, sd, "the send buffer"), (r, rc, rd, "the receive buffer")):
            end = max((x + y for x, y in zip(d, c)), default=0) if d else sum(c)
            self._need("all_to_all_v", buf, end, label)
        a, b, c2, d2 = _lib.sizes(sc), _lib.sizes(sd), _lib.sizes(rc), _lib.sizes(rd)
        return self._post("all_to_all_v", [s, r], lambda opts, w: L.tcomms_all_to_all_v(
            self._h(), s.ptr, a, b, r.ptr, c2, d2, DTYPE_INDEX[s.dtype], opts, w), async_op, timeout, stream)

    def gather(self, send, recv=None, root=0, *, dtype=None, async_op=False, timeout=None, stream=None):
        """recv on root (size x len(send)) = every rank's send; recv ignored elsewhere."""
        s = as_buf(send, "gather send buffer", dtype)
        r = s
        if self.rank == root:
            s, r = self._pair("gather", send, recv, dtype)
            self._need("gather", r, s.count * self.size, "the receive buffer")
        return self._post("gather", [s, r], lambda opts, w: L.tcomms_gather(
            self._h(), s.ptr, r.ptr if r is not s else None, s.count, DTYPE_INDEX[s.dtype], int(root), opts, w),
            async_op, timeout, stream)

    def scatter(self, send, recv, root=0, *, dtype=None, async_op=False, timeout=None, stream=None):
        """Block r of send on root lands in rank r's recv; send ignored elsewhere (may be None)."""
        r = as_buf(recv, "scatter receive buffer", dtype, writable=True)
        s = r
        if self.rank == root:
            s = as_buf(send, "scatter send buffer", dtype)
            if s.dtype != r.dtype:
                raise InvalidArgument("scatter: send buffer is %s, receive buffer %s" % (s.dtype, r.dtype))
            self._need("scatter", s, r.count * self.size, "the send buffer")
        return self._post("scatter", [s, r], lambda opts, w: L.tcomms_scatter(
            self._h(), s.ptr if s is not r else None, r.ptr, r.count, DTYPE_INDEX[r.dtype], int(root), opts, w),
            async_op, timeout, stream)

    def barrier(self, *, async_op=False, timeout=None, stream=None):
        dev = self.device_type
        opts = self._opts(dev, timeout, stream)
        if not async_op:
            check(L.tcomms_barrier(self._h(), ctypes.byref(opts), None), "barrier")
            return None
        w = ctypes.c_void_p()
        check(L.tcomms_barrier(self._h(), ctypes.byref(opts), ctypes.byref(w)), "barrier")
        return Work(w, [], "barrier")

    def send(self, buf, peer, *, dtype=None, async_op=False, timeout=None, stream=None):
        b = as_buf(buf, "send buffer", dtype)
        return self._post("send", [b], lambda opts, w: L.tcomms_send(
            self._h(), b.ptr, b.count, DTYPE_INDEX[b.dtype], int(peer), opts, w), async_op, timeout, stream)

    def recv(self, buf, peer, *, dtype=None, async_op=False, timeout=None, stream=None):
        b = as_buf(buf, "receive buffer", dtype, writable=True)
        return self._post("recv", [b], lambda opts, w: L.tcomms_recv(
            self._h(), b.ptr, b.count, DTYPE_INDEX[b.dtype], int(peer), opts, w), async_op, timeout, stream)

    def _counts(self, what, values, label):
        values = [int(v) for v in values]
        if len(values) != self.size:
            raise InvalidArgument("%s: %s has %d entries for %d ranks" % (what, label, len(values), self.size))
        if any(v < 0 for v in values):
            raise InvalidArgument("%s: %s has a negative entry" % (what, label))
        return values


def _parse_device(text, out):
    L.tcomms_device_parse.restype = ctypes.c_int
    L.tcomms_device_parse.argtypes = [ctypes.c_char_p, ctypes.POINTER(_lib.Device)]
    return L.tcomms_device_parse(_enc(text), ctypes.byref(out))


def _timeout_ms(seconds):
    if hasattr(seconds, "total_seconds"):
        seconds = seconds.total_seconds()
    ms = int(float(seconds) * 1000)
    if ms <= 0 or ms >= 1 << 32:
        raise InvalidArgument("timeout %r s is out of range (1 ms to 49 days)" % (seconds,))
    return ms


class group:
    """`with tcomms.group():` starts the operations issued inside together (tcomms_group_start/end)."""

    def __enter__(self):
        check(L.tcomms_group_start(), "tcomms_group_start")
        _group.depth = getattr(_group, "depth", 0) + 1
        if _group.depth == 1:
            _group.bufs = []
        return self

    def __exit__(self, exc_type, *_):
        st = L.tcomms_group_end()
        _group.depth -= 1
        if _group.depth == 0:
            _group.bufs = None
        if exc_type is None:
            check(st, "tcomms_group_end")
