# SPDX-License-Identifier: BSD-3-Clause
"""The "tcomms" torch.distributed backend: its creator function and the places it follows torch's calls.

- The world group (init_process_group) becomes a tcomms root communicator rendezvousing through torch's store,
  bound to `device_id` (or the current CUDA device where tcomms serves cuda), created eagerly.
- Every later group of the world (new_group, split_group) is a tcomms split of the world communicator. A split is
  collective over the world, while torch creates a backend only on the group's members: so
  torch.distributed's group helper is wrapped, and a rank outside the new group takes part with an empty list (the
  role torch gives to perform_nocolor_split, which torch >= 2.3 calls itself when the world is device-bound).
- new_group(use_local_synchronization=True) is called by the members alone: such a group rendezvouses through
  its own store as a new root instead of splitting the world.
- batch_isend_irecv on a tcomms group posts its operations as one tcomms group (ncclGroupStart/End on NCCL).
"""
import functools
import inspect
import threading

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ..comm import Comm, Hints
from ..errors import Error
from ._pg import ProcessGroupTcomms, torch_backends
from ._select import NAME, device_map, hints_from_options, selection, tcomms_devices
from ._work import torch_error

_state = threading.local()  # the arguments of the group helper call in progress on this thread
_world = {"pg": None}
_routing = {"on": False}  # TCOMMS_TORCH=1: torch's own gloo and nccl groups run on tcomms (see _route.py)


def routed(spec):
    """The backend string a routed group gets: every device torch's gloo or nccl (or the default) would serve goes
    to tcomms, the rest stays."""
    text = str(spec or "").lower()
    if text in ("", "undefined", "none"):
        text = "cpu:gloo,cuda:nccl"
    m = device_map(text) if ":" in text else {_PLAIN.get(text, "cpu"): text}
    out = {d: (NAME if n in ("gloo", "nccl", NAME) else n) for d, n in m.items()}
    if all(n == NAME for n in out.values()) and not _DEVICE_QUALIFIED:
        return NAME
    return ",".join("%s:%s" % (d, n) for d, n in out.items())


_PLAIN = {"gloo": "cpu", "nccl": "cuda", NAME: "cpu"}
_DEVICE_QUALIFIED = hasattr(c10d, "BackendConfig")  # torch >= 2.0 takes "cpu:gloo,cuda:nccl"


def _record_backend(pg, name):
    """Keep the user's backend name in torch's records (get_backend says "nccl" for a routed "nccl" group)."""
    world = getattr(c10d, "_world", None)
    table = world.pg_map if world is not None and hasattr(world, "pg_map") else getattr(c10d, "_pg_map", None)
    if table is not None and pg in table:
        table[pg] = (name,) + tuple(table[pg][1:])


def _call_args():
    return getattr(_state, "call", None) or {}


def _bound_device(devices, device_id):
    if device_id is not None:
        return "cuda:%d" % torch.device(device_id).index
    if "cuda" in devices and torch.cuda.is_available():
        return "cuda:%d" % torch.cuda.current_device()
    return "cpu"


def create(backend_opts, pg_options=None):
    """The creator registered with torch (extended API)."""
    call = _call_args()
    spec = call.get("backend") or NAME
    devices = tcomms_devices(spec) or ["cpu", "cuda"]
    if not torch.cuda.is_available():
        devices = [d for d in devices if d != "cuda"] or ["cpu"]
    store, rank, size = backend_opts.store, backend_opts.group_rank, backend_opts.group_size
    timeout = backend_opts.timeout
    global_ranks = list(getattr(backend_opts, "global_ranks_in_group", []) or [])
    name = str(getattr(backend_opts, "group_id", "") or "world")
    hints = hints_from_options(pg_options)
    others = torch_backends(spec, devices, store, rank, size, timeout, pg_options)
    world = _world["pg"]
    try:
        if global_ranks and world is not None and not call.get("local_sync"):
            child = world._comm.split(global_ranks, name=name, hints=hints)
            world._splits += 1
            pg = ProcessGroupTcomms(child, store, [d for d in devices if d in world._devices], others, spec)
            if hasattr(timeout, "total_seconds") and timeout.total_seconds() > 0:
                pg._timeout_ms = min(int(timeout.total_seconds() * 1000), 2 ** 32 - 1)  # a split keeps the world's
        else:
            bound = _bound_device(devices, call.get("device_id"))
            spec_tc, devices = selection(devices, bound.split(":")[0])
            comm = Comm(backend=spec_tc or None, device=bound, name=name, rank=rank, size=size, timeout=timeout,
                        hints=hints, store=store)
            pg = ProcessGroupTcomms(comm, store, devices, others, spec)
            if not global_ranks:
                _world["pg"] = pg
    except Error as e:
        raise torch_error(e) from None
    if call.get("device_id") is not None and hasattr(pg, "bound_device_id"):
        pg.bound_device_id = torch.device(call["device_id"])  # torch set it on the group ours replaces
    return pg


def _check_options(options):
    """Refuse bad pg_options on every rank before torch creates anything: torch calls the creator on the members
    only, so a refusal there would leave the other ranks alone in the members' split."""
    try:
        Hints(hints_from_options(options)).close()
    except Error as e:
        raise torch_error(e) from None


def _wrap_helper(original):
    sig = inspect.signature(original)

    @functools.wraps(original)
    def helper(*args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs)
        a = bound.arguments
        user_spec = a.get("backend", "")
        if _routing["on"]:
            bound.arguments["backend"] = routed(user_spec)
            args, kwargs = bound.args, bound.kwargs
        spec = str(bound.arguments.get("backend", ""))
        uses_tcomms = bool(tcomms_devices(spec))
        options = a.get("pg_options", a.get("backend_options"))  # torch >= 2.1 names it backend_options
        if uses_tcomms and options is not None:
            _check_options(options)
        ranks = list(a.get("global_ranks_in_group") or [])
        world = _world["pg"]
        prev = getattr(_state, "call", None)
        local_sync = getattr(_state, "local_sync", False)
        _state.call = {"backend": spec, "device_id": a.get("device_id"), "local_sync": local_sync}
        member = True
        splits_before = world._splits if world is not None else 0
        try:
            if ranks and world is not None and uses_tcomms and not local_sync:
                member = dist.get_rank() in ranks
            result = original(*args, **kwargs)
            if _routing["on"] and spec != str(user_spec):
                pg = result[0] if isinstance(result, tuple) else result
                _record_backend(pg, user_spec)
            if not member and world is not None and world._splits == splits_before:
                world._nocolor_split()  # torch created nothing here: take part in the members' split
            return result
        finally:
            _state.call = prev
    helper._tcomms_wrapped = True
    return helper


def _wrap_new_group(original):
    """new_group(use_local_synchronization=True) is called by the members alone: such a group cannot be a split of
    the world (a split is collective over it), so it rendezvouses through its own store instead."""
    @functools.wraps(original)
    def new_group(*args, **kwargs):
        prev = getattr(_state, "local_sync", False)
        _state.local_sync = bool(kwargs.get("use_local_synchronization", False))
        try:
            return original(*args, **kwargs)
        finally:
            _state.local_sync = prev
    new_group._tcomms_wrapped = True
    return new_group


def _wrap_batch(original):
    @functools.wraps(original)
    def batch_isend_irecv(p2p_op_list):
        if not p2p_op_list or not isinstance(p2p_op_list[0].group or dist.group.WORLD, ProcessGroupTcomms):
            return original(p2p_op_list)
        group = p2p_op_list[0].group or dist.group.WORLD
        device = p2p_op_list[0].tensor.device
        group._start_coalescing(device)
        works = []
        try:
            for op in p2p_op_list:
                works.append(op.op(op.tensor, op.peer, op.group, op.tag))
        finally:
            end = group._end_coalescing(device)
        return [w for w in works if w is not None] or [end]
    batch_isend_irecv._tcomms_wrapped = True
    return batch_isend_irecv


def _split_gate():
    call = getattr(_state, "call", None)
    return call is None or bool(tcomms_devices(call.get("backend", "")))


def install():
    """Register the backend and wrap torch's helpers (once)."""
    ProcessGroupTcomms._split_gate = staticmethod(_split_gate)
    if NAME.upper() not in dist.Backend._plugins:
        params = inspect.signature(dist.Backend.register_backend).parameters
        if "devices" in params:
            dist.Backend.register_backend(NAME, create, extended_api=True, devices=["cpu", "cuda"])
        else:
            dist.Backend.register_backend(NAME, create, extended_api=True)
    if not getattr(c10d._new_process_group_helper, "_tcomms_wrapped", False):
        c10d._new_process_group_helper = _wrap_helper(c10d._new_process_group_helper)
    if not getattr(c10d.new_group, "_tcomms_wrapped", False):
        wrapped = _wrap_new_group(c10d.new_group)
        c10d.new_group = wrapped
        dist.new_group = wrapped
    if not getattr(c10d.batch_isend_irecv, "_tcomms_wrapped", False):
        wrapped = _wrap_batch(c10d.batch_isend_irecv)
        c10d.batch_isend_irecv = wrapped
        dist.batch_isend_irecv = wrapped

