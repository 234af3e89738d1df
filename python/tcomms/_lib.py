# SPDX-License-Identifier: BSD-3-Clause
"""ctypes bindings of libtcomms: the library, its C types and every prototype, in one place.

Nothing here is public. The library is found, in order, at $TCOMMS_LIBRARY, in the libdir recorded when the
package was installed (tcomms/_config.py), then by the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
"""
import ctypes
import os

c_int, c_size_t, c_void_p, c_char_p, c_uint32, c_uint64, c_int64 = (
    ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64,
    ctypes.c_int64)
P = ctypes.POINTER

# Enumerations, as include/tcomms/tcomms.h numbers them (dtype and op names come from the library: see below).
DEVICE_CPU, DEVICE_CUDA = 0, 1
SUCCESS, IN_PROGRESS = 0, 1

PARAM_BACKEND, PARAM_DEVICE, PARAM_NAME, PARAM_RANK = 1 << 0, 1 << 1, 1 << 2, 1 << 3
PARAM_MASTER, PARAM_TIMEOUT, PARAM_HINTS, PARAM_STORE = 1 << 4, 1 << 5, 1 << 6, 1 << 7
OPT_TIMEOUT, OPT_STREAM, OPT_DEVICE_TYPE = 1 << 0, 1 << 1, 1 << 2
SPLIT_NOCOLOR = -1


class Device(ctypes.Structure):
    _fields_ = [("type", c_int), ("index", c_int)]


STORE_SET = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_void_p, c_size_t)
STORE_GET = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_void_p, c_size_t, P(c_size_t))
STORE_WAIT = ctypes.CFUNCTYPE(c_int, c_void_p, P(c_char_p), c_size_t, c_uint32)
STORE_ADD = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_int64, P(c_int64))
STORE_DEL = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)


class StoreOps(ctypes.Structure):
    _fields_ = [("set", STORE_SET), ("get", STORE_GET), ("wait", STORE_WAIT), ("add", STORE_ADD),
                ("del_", STORE_DEL)]


class CommParams(ctypes.Structure):
    _fields_ = [("field_mask", c_uint64), ("backend", c_char_p), ("device", Device), ("name", c_char_p),
                ("rank", c_int), ("size", c_int), ("local_rank", c_int), ("master_addr", c_char_p),
                ("master_port", c_int), ("timeout_ms", c_uint32), ("hints", c_void_p),
                ("store_ops", P(StoreOps)), ("store_ctx", c_void_p)]


class Setting(ctypes.Structure):
    """tcomms_setting_t: a setting in force and where it came from."""
    _fields_ = [("value", ctypes.c_char * 128), ("source", c_int), ("origin", ctypes.c_char * 64),
                ("overridden", ctypes.c_char * 128)]


class OpOpts(ctypes.Structure):
    _fields_ = [("field_mask", c_uint64), ("timeout_ms", c_uint32), ("stream", c_void_p), ("device_type", c_int)]


def _load():
    names = []
    if os.environ.get("TCOMMS_LIBRARY"):
        names.append(os.environ["TCOMMS_LIBRARY"])
    try:
        from . import _config
        names.append(os.path.join(_config.LIBDIR, "libtcomms.so.0"))
    except ImportError:
        pass
    names.append("libtcomms.so.0")
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("tcomms: cannot load libtcomms (set TCOMMS_LIBRARY to its path): " + "; ".join(errors))


lib = _load()

_COMM, _WORK, _HINTS = c_void_p, c_void_p, c_void_p
_OPTS = P(OpOpts)
_PROTOS = {
    "tcomms_strerror": (c_char_p, [c_int]),
    "tcomms_last_error": (c_char_p, []),
    "tcomms_version": (c_char_p, []),
    "tcomms_dtype_name": (c_char_p, [c_int]),
    "tcomms_dtype_size": (c_size_t, [c_int]),
    "tcomms_op_name": (c_char_p, [c_int]),
    "tcomms_hints_create": (c_int, [P(_HINTS)]),
    "tcomms_hints_free": (c_int, [_HINTS]),
    "tcomms_hints_set": (c_int, [_HINTS, c_char_p, c_char_p]),
    "tcomms_hints_count": (c_int, [_HINTS, P(c_size_t)]),
    "tcomms_hints_entry": (c_int, [_HINTS, c_size_t, P(c_char_p), P(c_char_p)]),
    "tcomms_comm_create": (c_int, [P(CommParams), P(_COMM)]),
    "tcomms_comm_destroy": (c_int, [_COMM]),
    "tcomms_comm_abort": (c_int, [_COMM]),
    "tcomms_comm_split": (c_int, [_COMM, P(c_int), c_int, c_char_p, _HINTS, P(_COMM)]),
    "tcomms_comm_split_color": (c_int, [_COMM, c_int, c_int, c_char_p, _HINTS, P(_COMM)]),
    "tcomms_comm_shrink": (c_int, [_COMM, P(c_int), c_int, c_char_p, _HINTS, P(_COMM)]),
    "tcomms_comm_rank": (c_int, [_COMM, P(c_int)]),
    "tcomms_comm_size": (c_int, [_COMM, P(c_int)]),
    "tcomms_comm_local_rank": (c_int, [_COMM, P(c_int)]),
    "tcomms_comm_local_size": (c_int, [_COMM, P(c_int)]),
    "tcomms_comm_name": (c_int, [_COMM, P(c_char_p)]),
    "tcomms_comm_device": (c_int, [_COMM, P(Device)]),
    "tcomms_comm_backend": (c_int, [_COMM, c_int, P(c_char_p)]),
    "tcomms_comm_hint": (c_int, [_COMM, c_int, c_char_p, c_char_p, c_size_t]),
    "tcomms_comm_setting": (c_int, [_COMM, c_int, c_char_p, P(Setting)]),
    "tcomms_setting_source_name": (c_char_p, [c_int]),
    "tcomms_all_reduce": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_broadcast": (c_int, [_COMM, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_reduce": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_all_gather": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, _OPTS, P(_WORK)]),
    "tcomms_all_gather_v": (c_int, [_COMM, c_void_p, c_void_p, P(c_size_t), P(c_size_t), c_int, _OPTS,
                                    P(_WORK)]),
    "tcomms_reduce_scatter": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_reduce_scatter_v": (c_int, [_COMM, c_void_p, c_void_p, P(c_size_t), c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_all_to_all": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, _OPTS, P(_WORK)]),
    "tcomms_all_to_all_v": (c_int, [_COMM, c_void_p, P(c_size_t), P(c_size_t), c_void_p, P(c_size_t),
                                    P(c_size_t), c_int, _OPTS, P(_WORK)]),
    "tcomms_gather": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_scatter": (c_int, [_COMM, c_void_p, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_barrier": (c_int, [_COMM, _OPTS, P(_WORK)]),
    "tcomms_send": (c_int, [_COMM, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_recv": (c_int, [_COMM, c_void_p, c_size_t, c_int, c_int, _OPTS, P(_WORK)]),
    "tcomms_work_wait": (c_int, [_WORK, c_uint32]),
    "tcomms_work_synchronize": (c_int, [_WORK, c_uint32]),
    "tcomms_work_test": (c_int, [_WORK]),
    "tcomms_work_free": (c_int, [_WORK]),
    "tcomms_group_start": (c_int, []),
    "tcomms_group_end": (c_int, []),
    "tcomms_backend_default": (c_int, [c_int, P(ctypes.c_char_p)]),
    "tcomms_backend_device_types": (c_int, [ctypes.c_char_p, P(ctypes.c_uint32)]),
}
for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args


def _names(fn):
    out = []
    while fn(len(out)):
        out.append(fn(len(out)).decode())
    return tuple(out)


# The library's own tables: names in enum order ("bfloat16", "sum"), element sizes in bytes.
DTYPES = _names(lib.tcomms_dtype_name)
OPS = _names(lib.tcomms_op_name)
ITEMSIZE = {name: lib.tcomms_dtype_size(i) for i, name in enumerate(DTYPES)}


def sizes(values):
    """A C array of size_t from a sequence of ints (None for None)."""
    if values is None:
        return None
    return (c_size_t * len(values))(*values)
