# SPDX-License-Identifier: BSD-3-Clause
"""ProcessGroupTcomms: a torch.distributed process group whose collectives run on a tcomms communicator.

torch's own entry points (dist.all_reduce, DDP's reducer, FSDP2) call the methods below with torch's argument
shapes (lists of tensors, *Options objects); each becomes one tcomms call, or a tcomms group of calls for the
coalesced and list forms. Device types the backend string gives to another torch backend
("cpu:gloo,cuda:tcomms") are served by that backend, which this group holds.
"""
import ctypes
import datetime

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from .. import _lib
from ..buffers import DTYPE_INDEX, Buf
from ..comm import Work as TcWork, group as _tc_group
from ..errors import Error, InvalidArgument, NotSupported, check, from_status
from ._select import NAME, device_map, hints_from_options
from ._work import Work, finished, raw_stream, torch_error

_C = _lib.lib
_CUDA_MASK = _lib.OPT_DEVICE_TYPE | _lib.OPT_STREAM
_OP_INDEX = {name: i for i, name in enumerate(_lib.OPS)}

_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
           torch.bfloat16: "bfloat16", torch.int32: "int32", torch.int64: "int64", torch.int8: "int8",
           torch.uint8: "uint8", torch.bool: "uint8"}
_OPS = [(dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.PRODUCT, "prod"), (dist.ReduceOp.MIN, "min"),
        (dist.ReduceOp.MAX, "max")]
if hasattr(dist.ReduceOp, "AVG"):
    _OPS.append((dist.ReduceOp.AVG, "avg"))
_DT_INDEX = {t: DTYPE_INDEX[name] for t, name in _DTYPES.items()}
# torch reduces bool as NCCL does: any (sum, max) and all (product, min)
_BOOL_OPS = {"sum": "max", "max": "max", "prod": "min", "min": "min"}


def _op_name(op, dtype):
    for ref, name in _OPS:
        if op == ref:
            if dtype == torch.bool:
                if name not in _BOOL_OPS:
                    raise InvalidArgument("reduction %s is not defined on bool tensors" % name)
                return _BOOL_OPS[name]
            return name
    kind = getattr(op, "op", op)  # torch >= 1.13 passes a ReduceOp object around its RedOpType, printed bare
    label = getattr(kind, "name", None) or str(op).split(".")[-1].split(" ")[0]
    raise NotSupported("ReduceOp %s: tcomms reduces with SUM, PRODUCT, MIN, MAX and AVG" % label)


def _op_hashes():
    """{hash(ReduceOp): tcomms op index}, or {} where torch's hash of a ReduceOp is not its kind: comparing a ReduceOp
    with each reference in turn is the slowest step of a small call, and torch hashes one by its kind."""
    table = {}
    try:
        for ref, name in _OPS:
            a, b = dist.AllreduceOptions(), dist.ReduceScatterOptions()
            a.reduceOp, b.reduceOp = ref, ref
            h = hash(a.reduceOp)
            if h != hash(b.reduceOp) or h in table:
                return {}
            table[h] = _OP_INDEX[name]
    except Exception:  # noqa: BLE001 - any torch without such hashes takes _op_name's way
        return {}
    return table


_OP_BY_HASH = _op_hashes()


def _op_index(op, dtype):
    """The tcomms op index of torch's `op` on `dtype` (errors as _op_name)."""
    if dtype is not torch.bool:
        try:
            i = _OP_BY_HASH.get(hash(op))
        except TypeError:
            i = None
        if i is not None:
            return i
    return _OP_INDEX[_op_name(op, dtype)]


def _check(t, what, like=None):
    """Refuse what the C call cannot take: a dtype tcomms lacks, memory that is not contiguous, another dtype or
    device than `like`'s."""
    if t.dtype not in _DT_INDEX:
        raise InvalidArgument("%s has dtype %s, which tcomms does not take (it takes %s)"
                              % (what, t.dtype, ", ".join(str(d) for d in _DTYPES)))
    if not t.is_contiguous():
        raise InvalidArgument("%s is not contiguous" % what)
    if like is not None and (like.dtype != t.dtype or like.get_device() != t.get_device()):
        raise InvalidArgument("%s is %s on %s, the other tensor %s on %s" % (what, t.dtype, t.device, like.dtype,
                                                                           like.device))


def _check_pair(out, inp, what):
    """_check of a call's output and input tensors, in one pass where both are fine (a small call's common case)."""
    if not (out.dtype is inp.dtype and inp.dtype in _DT_INDEX and out.is_contiguous() and inp.is_contiguous()
            and out.get_device() == inp.get_device()):
        _check(out, "%s output tensor" % what, inp)
        _check(inp, "%s input tensor" % what)


def _buf(t, what):
    """`t` as a tcomms Buf (for the tcomms.Comm layer), checked as _check does."""
    _check(t, what)
    return Buf(t, t.data_ptr(), t.numel(), _DTYPES[t.dtype], _lib.DEVICE_CUDA if t.is_cuda else _lib.DEVICE_CPU,
               False)


def _timeout(opts):
    t = getattr(opts, "timeout", None)
    if t is None or not hasattr(t, "total_seconds"):
        return None
    s = t.total_seconds()
    return s if 0 < s < 86400 * 30 else None


def _is_async(opts):
    # torch >= 2.6 says whether the caller waits; older torch always gets a handle
    return bool(getattr(opts, "asyncOp", True)) if opts is not None else True


_DONE = finished([])  # what a blocking call returns: it has completed (stream-ordered on CUDA)


class _BackendView:
    """What torch asks of a process group's backend for one device (split support, eager connection, sequence
    numbers), answered for tcomms."""

    supports_coalescing = False

    def __init__(self, pg):
        self._pg = pg

    @property
    def supports_splitting(self):
        return ProcessGroupTcomms._split_gate()

    @property
    def options(self):
        return None

    def perform_nocolor_split(self, device):
        if ProcessGroupTcomms._split_gate():
            self._pg._nocolor_split()

    def eager_connect_single_device(self, device):
        pass  # created eagerly already

    def _set_sequence_number_for_group(self):
        pass

    def comm_split_count(self):
        return self._pg._splits

    def name(self):
        return "tcomms"


class ProcessGroupTcomms(dist.ProcessGroup):
    """A torch process group over `comm` (a tcomms.Comm) for the device types in `devices`; `others` maps the
    remaining device types of the backend string to torch backends."""

    # Whether torch may treat this group as a split source now: set by _backend.install (a group helper call for
    # another backend must neither split this communicator nor hand it to torch's NCCL as split_from).
    _split_gate = staticmethod(lambda: True)

    def __init__(self, comm, store, devices, others=None, spec="tcomms"):
        try:
            super().__init__(store, comm.rank, comm.size)
        except TypeError:  # torch < 2.0
            super().__init__(comm.rank, comm.size)
        self._comm, self._store, self._devices, self._others = comm, store, list(devices), dict(others or {})
        self._spec, self._splits, self._coalescing, self._view = spec, 0, None, _BackendView(self)
        self._names = {}
        self._size = comm.size  # size() is a call into torch; the hot paths read this
        self._timeout_ms = 0  # the group's own timeout, where it differs from its communicator's (new_group)

    # ---- identity ----------------------------------------------------------------------------------------------
    def getBackendName(self):
        return "tcomms"

    # torch keeps a group's name and description in its backends, and this group has none of torch's: keep them
    # here (the C++ trampoline calls these by their C++ names)
    def getGroupName(self):
        return self._names.get("name", "")

    def setGroupName(self, name):
        self._names["name"] = name

    def getGroupDesc(self):
        return self._names.get("desc", "")

    def setGroupDesc(self, desc):
        self._names["desc"] = desc

    def name(self):
        return "tcomms"

    @property
    def _device_types(self):
        return [torch.device(d) for d in ("cpu", "cuda") if d in self._devices or d in self._others]

    def _get_backend(self, device):
        kind = torch.device(device).type
        if kind in self._others:
            return self._others[kind]
        return self._view

    def _set_sequence_number_for_group(self):
        pass  # tcomms numbers each communicator's operations itself

    def _get_sequence_number_for_group(self):
        return 0

    @property
    def comm(self):
        """The tcomms.Comm behind this group (hints, backend names)."""
        return self._comm

    def hint(self, key, device="cuda"):
        """The effective value of tcomms hint `key` on this group's module for `device`."""
        return self._comm.hint(key, torch.device(device).type)

    def shutdown(self):
        for other in self._others.values():
            if hasattr(other, "shutdown"):
                other.shutdown()
        self._comm.destroy()

    def abort(self):
        self.shutdown()

    # ---- splits ------------------------------------------------------------------------------------------------
    def _nocolor_split(self):
        self._splits += 1
        self._comm.split([])

    def _child(self, comm, name, others=None):
        pg = ProcessGroupTcomms(comm, self._store, self._devices, others, self._spec)
        if name is not None and hasattr(pg, "_set_group_name"):
            pg._set_group_name(name)
        return pg

    def split_group(self, ranks, timeout=None, opts=None, group_name=None, group_desc=None):
        """torch's split_group: every rank of this group calls it; members of `ranks` (ranks of this group) get
        the child, the others None. opts' settings become the child's hints."""
        hints = hints_from_options(opts)
        self._splits += 1
        try:
            child = self._comm.split(ranks, name=group_name, hints=hints)
        except Error as e:
            raise torch_error(e) from None
        if child is None:
            return None
        others = {}
        if self._others:  # the child's share of torch's own backends, rendezvousing under the child's name
            wait = timeout if hasattr(timeout, "total_seconds") else datetime.timedelta(minutes=30)
            others = torch_backends(self._spec, self._devices, c10d.PrefixStore("%s/" % group_name, self._store),
                                    child.rank, child.size, wait, opts)
        pg = self._child(child, group_name, others)
        if group_desc is not None and hasattr(pg, "_set_group_desc"):
            pg._set_group_desc(group_desc)
        if hasattr(timeout, "total_seconds") and timeout.total_seconds() > 0:
            pg._timeout_ms = min(int(timeout.total_seconds() * 1000), 2 ** 32 - 1)
        return pg

    # ---- posting -----------------------------------------------------------------------------------------------
    def _route(self, tensors):
        t = tensors[0]
        kind = "cuda" if t.is_cuda else "cpu" if t.is_cpu else t.device.type  # .device builds an object
        if kind in self._devices:
            return None
        if kind in self._others:
            return self._others[kind]
        raise InvalidArgument("this tcomms process group serves %s, not %s tensors"
                              % (", ".join(self._devices), kind))

    def _direct(self, what, cfn, args, tensors, opts):
        """The hot path: call the C function `cfn(comm, *args, opts, work)` for `tensors` (validated by the
        caller) without the tcomms.Comm layer: what torch's small messages cost is mostly this path. torch sets no
        per-call timeout on these calls: the group's applies."""
        index = tensors[0].get_device()
        o = _lib.OpOpts()
        if index >= 0:
            o.field_mask, o.device_type, o.stream = _CUDA_MASK, _lib.DEVICE_CUDA, raw_stream(index)
        else:
            o.field_mask, o.device_type = _lib.OPT_DEVICE_TYPE, _lib.DEVICE_CPU
        if self._timeout_ms:
            o.field_mask |= _lib.OPT_TIMEOUT
            o.timeout_ms = self._timeout_ms
        h = self._comm.handle
        if not h:
            raise InvalidArgument("%s: this process group was shut down" % what)
        if not (_is_async(opts) or self._coalescing is not None):
            st = cfn(h, *args, ctypes.byref(o), None)
            if st < 0:
                raise torch_error(from_status(st, what))
            return _DONE
        w = ctypes.c_void_p()
        st = cfn(h, *args, ctypes.byref(o), ctypes.byref(w))
        if st < 0:
            raise torch_error(from_status(st, what))
        tw = TcWork(w, tensors, what)
        if self._coalescing is not None:
            self._coalescing.append(tw)
        return Work([tw], tensors, torch.cuda.current_stream(index) if index >= 0 else None)

    def _run(self, what, tensors, post, opts, after=None, sync_host=False):
        """Post `post(async_op, stream)` for `tensors`, which returns a tcomms.Work (async) or None; wrap it."""
        t0 = tensors[0]
        stream = torch.cuda.current_stream(t0.device.index) if t0.is_cuda else None
        handle = stream.cuda_stream if stream is not None else None
        as_async = _is_async(opts) or self._coalescing is not None or sync_host
        try:
            w = post(as_async, handle)
        except Error as e:
            raise torch_error(e) from None
        if self._coalescing is not None:
            self._coalescing.append(w)
        if w is None:
            if after is not None:
                after()
            return finished(tensors, stream)
        return Work([w], tensors, stream, after, sync_host)

    def _kw(self, opts, stream, as_async):
        return {"async_op": as_async, "timeout": self._op_timeout(opts), "stream": stream}

    def _op_timeout(self, opts):
        seconds = _timeout(opts)
        if seconds is None and self._timeout_ms:
            seconds = self._timeout_ms / 1000.0
        return seconds

    # ---- collectives -------------------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        other = self._route(tensors)
        if other is not None:
            return other.allreduce(tensors, opts) if opts is not None else other.allreduce(tensors)
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if len(tensors) != 1:
            return self.allreduce_coalesced(tensors, opts)
        t = tensors[0]
        _check(t, "all_reduce tensor")
        p = t.data_ptr()
        return self._direct("all_reduce", _C.tcomms_all_reduce,
                            (p, p, t.numel(), _DT_INDEX[t.dtype], _op_index(op, t.dtype)), tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        other = self._route(tensors)
        if other is not None:
            return other.allreduce_coalesced(tensors, opts)
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        bufs = [(_buf(t, "all_reduce tensor %d" % i), _op_name(op, t.dtype)) for i, t in enumerate(tensors)]
        return self._grouped(tensors, opts, [lambda a, s, b=b, n=n: self._comm.all_reduce(
            b, b, n, **self._kw(opts, s, a)) for b, n in bufs])

    def _grouped(self, tensors, opts, posts):
        t0 = tensors[0]
        stream = torch.cuda.current_stream(t0.device.index) if t0.is_cuda else None
        handle = stream.cuda_stream if stream is not None else None
        works = []
        try:
            with _tc_group():
                for post in posts:
                    works.append(post(True, handle))
        except Error as e:
            raise torch_error(e) from None
        if self._coalescing is not None:
            self._coalescing.extend(works)
        return Work(works, tensors, stream)

    def broadcast(self, tensors, opts=None):
        other = self._route(tensors)
        if other is not None:
            return other.broadcast(tensors, opts)
        root = opts.rootRank if opts is not None else 0
        t = tensors[opts.rootTensor if opts is not None else 0]
        _check(t, "broadcast tensor")
        return self._direct("broadcast", _C.tcomms_broadcast, (t.data_ptr(), t.numel(), _DT_INDEX[t.dtype], root),
                            tensors, opts)

    def reduce(self, tensors, opts=None):
        other = self._route(tensors)
        if other is not None:
            return other.reduce(tensors, opts)
        t = tensors[0]
        name, b = _op_name(opts.reduceOp, t.dtype), _buf(t, "reduce tensor")
        return self._run("reduce", tensors, lambda a, s: self._comm.reduce(
            b, b, name, opts.rootRank, **self._kw(opts, s, a)), opts)

    def _allgather_base(self, output, input, opts=None):
        other = self._route([input])
        if other is not None:
            return other._allgather_base(output, input, opts) if opts is not None else \
                other._allgather_base(output, input)
        _check_pair(output, input, "all_gather")
        if output.numel() != input.numel() * self._size:
            raise InvalidArgument("all_gather_into_tensor: output holds %d elements, input %d, group size %d"
                                  % (output.numel(), input.numel(), self.size()))
        return self._direct("all_gather", _C.tcomms_all_gather, (input.data_ptr(), output.data_ptr(), input.numel(),
                                                                  _DT_INDEX[input.dtype]), [output, input], opts)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        other = self._route(inputs)
        if other is not None:
            return other.allgather_into_tensor_coalesced(outputs, inputs, opts)
        pairs = [(_buf(o, "all_gather output tensor"), _buf(i, "all_gather input tensor"))
                 for o, i in zip(outputs, inputs)]
        return self._grouped(outputs, opts, [lambda a, s, o=o, i=i: self._comm.all_gather(
            i, o, **self._kw(opts, s, a)) for o, i in pairs])

    def allgather(self, output_lists, inputs, opts=None):
        other = self._route(inputs)
        if other is not None:
            return other.allgather(output_lists, inputs, opts)
        outs, t = output_lists[0], inputs[0]
        if len(outs) != self.size():
            raise InvalidArgument("all_gather: %d output tensors for a group of %d" % (len(outs), self.size()))
        for k, o in enumerate(outs):
            if o.dtype != t.dtype:
                raise InvalidArgument("all_gather: output %d is %s, the input %s" % (k, o.dtype, t.dtype))
        counts = [o.numel() for o in outs]
        if counts[self.rank()] != t.numel():
            raise InvalidArgument("all_gather: output %d (this rank's) holds %d elements, the input %d"
                                  % (self.rank(), counts[self.rank()], t.numel()))
        flat = torch.empty(sum(counts), dtype=t.dtype, device=t.device)
        i, f = _buf(t.contiguous(), "all_gather input tensor"), _buf(flat, "all_gather staging")

        def after():
            for o, part in zip(outs, torch.split(flat, counts)):
                o.copy_(part.view(o.shape))
        if len(set(counts)) == 1:
            return self._run("all_gather", outs, lambda a, s: self._comm.all_gather(
                i, f, **self._kw(opts, s, a)), opts, after)
        return self._run("all_gather_v", outs, lambda a, s: self._comm.all_gather_v(
            i, f, counts, **self._kw(opts, s, a)), opts, after)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        works = [self.allgather([outs], [t], opts) for outs, t in zip(output_lists, inputs)]
        return _Several(works, [t for outs in output_lists for t in outs])

    def _reduce_scatter_base(self, output, input, opts=None):
        other = self._route([input])
        if other is not None:
            return other._reduce_scatter_base(output, input, opts)
        _check_pair(output, input, "reduce_scatter")
        if input.numel() != output.numel() * self._size:
            raise InvalidArgument("reduce_scatter_tensor: input holds %d elements, output %d, group size %d"
                                  % (input.numel(), output.numel(), self.size()))
        op = _op_index(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, output.dtype)
        return self._direct("reduce_scatter", _C.tcomms_reduce_scatter,
                            (input.data_ptr(), output.data_ptr(), output.numel(), _DT_INDEX[output.dtype], op),
                            [output, input], opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        other = self._route(inputs)
        if other is not None:
            return other.reduce_scatter_tensor_coalesced(outputs, inputs, opts)
        name = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, outputs[0].dtype)
        pairs = [(_buf(o, "reduce_scatter output tensor"), _buf(i, "reduce_scatter input tensor"))
                 for o, i in zip(outputs, inputs)]
        return self._grouped(outputs, opts, [lambda a, s, o=o, i=i: self._comm.reduce_scatter(
            i, o, name, **self._kw(opts, s, a)) for o, i in pairs])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        other = self._route(outputs)
        if other is not None:
            return other.reduce_scatter(outputs, input_lists, opts)
        out, ins = outputs[0], input_lists[0]
        if len(ins) != self.size():
            raise InvalidArgument("reduce_scatter: %d input tensors for a group of %d" % (len(ins), self.size()))
        for k, t in enumerate(ins):
            if t.dtype != out.dtype:
                raise InvalidArgument("reduce_scatter: input %d is %s, the output %s" % (k, t.dtype, out.dtype))
        counts = [t.numel() for t in ins]
        if counts[self.rank()] != out.numel():
            raise InvalidArgument("reduce_scatter: input %d (this rank's block) holds %d elements, the output %d"
                                  % (self.rank(), counts[self.rank()], out.numel()))
        flat = torch.cat([t.reshape(-1) for t in ins])
        name = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, out.dtype)
        i, o = _buf(flat, "reduce_scatter staging"), _buf(out, "reduce_scatter output tensor")
        if len(set(counts)) == 1:
            return self._run("reduce_scatter", outputs, lambda a, s: self._comm.reduce_scatter(
                i, o, name, **self._kw(opts, s, a)), opts)
        return self._run("reduce_scatter_v", outputs, lambda a, s: self._comm.reduce_scatter_v(
            i, o, counts, name, **self._kw(opts, s, a)), opts)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        other = self._route([input])
        if other is not None:
            return other.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)
        n = self._size
        if not output_split_sizes and not input_split_sizes:
            _check_pair(output, input, "all_to_all")
            count = input.numel()
            if count % n or output.numel() != count:
                raise InvalidArgument("all_to_all_single: input of %d and output of %d elements do not split "
                                      "evenly over %d ranks" % (count, output.numel(), n))
            return self._direct("all_to_all", _C.tcomms_all_to_all, (input.data_ptr(), output.data_ptr(),
                                                                      count // n, _DT_INDEX[input.dtype]),
                                [output, input], opts)
        o, i = _buf(output, "all_to_all output tensor"), _buf(input, "all_to_all input tensor")
        sc = _counts(input, input_split_sizes, n, "input")
        rc = _counts(output, output_split_sizes, n, "output")
        return self._run("all_to_all_v", [output], lambda a, s: self._comm.all_to_all_v(
            i, sc, o, rc, **self._kw(opts, s, a)), opts)

    def alltoall(self, outputs, inputs, opts=None):
        other = self._route(inputs)
        if other is not None:
            return other.alltoall(outputs, inputs, opts)
        if len(outputs) != self.size() or len(inputs) != self.size():
            raise InvalidArgument("all_to_all: %d output and %d input tensors for a group of %d"
                                  % (len(outputs), len(inputs), self.size()))
        send = torch.cat([t.reshape(-1) for t in inputs])
        recv = torch.empty(sum(t.numel() for t in outputs), dtype=outputs[0].dtype, device=outputs[0].device)
        sc, rc = [t.numel() for t in inputs], [t.numel() for t in outputs]
        i, o = _buf(send, "all_to_all staging"), _buf(recv, "all_to_all staging")

        def after():
            for t, part in zip(outputs, torch.split(recv, rc)):
                t.copy_(part.view(t.shape))
        return self._run("all_to_all_v", outputs, lambda a, s: self._comm.all_to_all_v(
            i, sc, o, rc, **self._kw(opts, s, a)), opts, after)

    def gather(self, output_lists, inputs, opts=None):
        other = self._route(inputs)
        if other is not None:
            return other.gather(output_lists, inputs, opts)
        t, root = inputs[0], opts.rootRank
        i = _buf(t.contiguous(), "gather input tensor")
        if self.rank() != root:
            return self._run("gather", inputs, lambda a, s: self._comm.gather(
                i, None, root, **self._kw(opts, s, a)), opts)
        outs = output_lists[0]
        if len(outs) != self.size():
            raise InvalidArgument("gather: %d output tensors for a group of %d" % (len(outs), self.size()))
        flat = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype, device=t.device)
        f = _buf(flat, "gather staging")

        def after():
            for k, o in enumerate(outs):
                o.copy_(flat[k])
        return self._run("gather", outs, lambda a, s: self._comm.gather(
            i, f, root, **self._kw(opts, s, a)), opts, after)

    def scatter(self, outputs, input_lists, opts=None):
        other = self._route(outputs)
        if other is not None:
            return other.scatter(outputs, input_lists, opts)
        out, root = outputs[0], opts.rootRank
        o = _buf(out, "scatter output tensor")
        send = None
        if self.rank() == root:
            ins = input_lists[0]
            if len(ins) != self.size():
                raise InvalidArgument("scatter: %d input tensors for a group of %d" % (len(ins), self.size()))
            send = _buf(torch.cat([x.reshape(-1) for x in ins]), "scatter staging")
        return self._run("scatter", outputs, lambda a, s: self._comm.scatter(
            send, o, root, **self._kw(opts, s, a)), opts)

    def barrier(self, opts=None):
        kind = "cpu" if "cpu" in self._devices else self._devices[0]
        if kind not in self._devices and "cpu" in self._others:
            return self._others["cpu"].barrier(opts)
        dev = torch.device("cuda", torch.cuda.current_device()) if kind == "cuda" else torch.device("cpu")
        probe = torch.empty(0, device=dev)
        opt_type = _lib.DEVICE_CUDA if kind == "cuda" else _lib.DEVICE_CPU

        def post(a, s):
            o = self._comm._opts(opt_type, self._op_timeout(opts), s)
            w = ctypes.c_void_p()
            check(_lib.lib.tcomms_barrier(self._comm._h(), ctypes.byref(o), ctypes.byref(w)), "barrier")
            return TcWork(w, [], "barrier")
        return self._run("barrier", [probe], post, opts, sync_host=True)

    # ---- point to point ----------------------------------------------------------------------------------------
    def send(self, tensors, dst, tag=0):
        return self._p2p("send", tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._p2p("recv", tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        raise NotSupported("recv from any source: tcomms matches messages per pair of ranks; name the source")

    def _p2p(self, what, tensors, peer, tag):
        other = self._route(tensors)
        if other is not None:
            return getattr(other, what)(tensors, peer, tag)
        if tag:
            raise NotSupported("%s with tag %d: tcomms matches messages between two ranks in order, without tags"
                               % (what, tag))
        b = _buf(tensors[0], what + " tensor")
        fn = self._comm.send if what == "send" else self._comm.recv
        return self._run(what, tensors, lambda a, s: fn(b, peer, async_op=True, stream=s), None)

    # ---- coalescing --------------------------------------------------------------------------------------------
    def _start_coalescing(self, device=None):
        if self._coalescing is not None:
            raise InvalidArgument("coalescing already started on this group")
        self._coalescing = []
        try:
            self._tc_group = _tc_group().__enter__()
        except Error as e:
            self._coalescing = None
            raise torch_error(e) from None

    def _end_coalescing(self, device=None):
        """Issue the batch. torch 2.x passes the device and waits on the Work returned; torch 1.13 passes the list
        of requests it already holds (each completes no earlier than the batch) and takes nothing back."""
        works, self._coalescing = self._coalescing or [], None
        try:
            self._tc_group.__exit__(None, None, None)
        except Error as e:
            raise torch_error(e) from None
        if isinstance(device, list):
            return None
        stream = None
        if device is not None and torch.device(device).type == "cuda":
            index = torch.device(device).index
            stream = torch.cuda.current_stream(torch.cuda.current_device() if index is None else index)
        return Work([w for w in works if w is not None], [], stream)


def torch_backends(spec, devices, store, rank, size, timeout, options):
    """torch's own backends for the device types of `spec` that tcomms does not serve ("cpu:gloo,cuda:tcomms")."""
    out = {}
    for dev, name in device_map(spec).items():
        if dev in devices or name == NAME or dev not in ("cpu", "cuda"):
            continue
        sub = c10d.PrefixStore("torch-%s/" % dev, store)
        if name == "gloo":
            out[dev] = c10d.ProcessGroupGloo(sub, rank, size, timeout)
        elif name == "nccl":
            opts = options if isinstance(options, c10d.ProcessGroupNCCL.Options) else c10d.ProcessGroupNCCL.Options()
            opts._timeout = timeout
            out[dev] = c10d.ProcessGroupNCCL(sub, rank, size, opts)
        else:
            raise InvalidArgument("backend string %r: tcomms can share a group with gloo or nccl, not %r"
                                  % (spec, name))
    return out


class _Several(Work):
    """One Work over several torch Works (the list forms torch coalesces)."""

    def __init__(self, works, result):
        super().__init__((), result)
        self._parts = works

    def wait(self, timeout=None):
        for w in self._parts:
            w.wait(timeout) if timeout is not None else w.wait()
        return True


def _counts(t, splits, n, what):
    if len(splits) != n:
        raise InvalidArgument("all_to_all_single: %d %s split sizes for a group of %d" % (len(splits), what, n))
    row = 1
    for d in t.shape[1:]:
        row *= d
    if t.dim() > 0 and sum(splits) != t.shape[0]:
        raise InvalidArgument("all_to_all_single: %s split sizes sum to %d, the tensor has %d rows"
                              % (what, sum(splits), t.shape[0]))
    return [int(s) * row for s in splits]
