# SPDX-License-Identifier: BSD-3-Clause
"""Turn objects exposing memory into what the C API takes: an address, an element count, a dtype and a device.

Accepted, in this order: __cuda_array_interface__ (CUDA memory: CuPy, Numba, PyTorch), __array_interface__
(NumPy), DLPack (__dlpack__ / __dlpack_device__: PyTorch, JAX, NumPy >= 1.22) and the buffer protocol (bytearray,
array.array, memoryview). Memory must be contiguous; a dtype tcomms lacks is InvalidArgument naming it.
"""
import ctypes

from . import _lib
from .errors import InvalidArgument

_TYPESTR = {"i1": "int8", "u1": "uint8", "i4": "int32", "i8": "int64", "f2": "float16", "f4": "float32",
            "f8": "float64"}
_FORMAT = {"b": "int8", "B": "uint8", "i": "int32", "l": "int64", "q": "int64", "e": "float16", "f": "float32",
           "d": "float64"}
# DLPack type codes: (code, bits) -> name; code 0 int, 1 uint, 2 float, 4 bfloat.
_DLPACK = {(0, 8): "int8", (1, 8): "uint8", (0, 32): "int32", (0, 64): "int64", (2, 16): "float16",
           (4, 16): "bfloat16", (2, 32): "float32", (2, 64): "float64"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
DTYPE_INDEX = {name: i for i, name in enumerate(_lib.DTYPES)}
ITEMSIZE = _lib.ITEMSIZE


class Buf:
    """One buffer: `ptr` (int), `count` elements of `dtype`, on `device` (_lib.DEVICE_CPU or _lib.DEVICE_CUDA);
    `obj` keeps the exporter alive while an operation uses the memory."""
    __slots__ = ("obj", "ptr", "count", "dtype", "device", "readonly", "_view")

    def __init__(self, obj, ptr, count, dtype, device, readonly, view=None):
        self.obj, self.ptr, self.count, self.dtype, self.device, self.readonly = obj, ptr, count, dtype, device, \
            readonly
        self._view = view

    @property
    def nbytes(self):
        return self.count * ITEMSIZE[self.dtype]


def _contiguous(shape, strides, itemsize, what):
    if strides is None:
        return
    expect = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expect:
            raise InvalidArgument("%s is not contiguous (shape %s, strides %s)" % (what, tuple(shape),
                                                                                  tuple(strides)))
        expect *= dim


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _raw(want, itemsize):
    """`want` for integer storage of its element size that tcomms has no dtype for (bfloat16 in a uint16 array)."""
    return want if want in ITEMSIZE and ITEMSIZE[want] == itemsize else None


def _from_interface(obj, iface, device, what, want=None):
    typestr = iface["typestr"]
    dtype = _TYPESTR.get(typestr[1:])
    if dtype is None and typestr[1] in "iu" and typestr[2:].isdigit():
        dtype = _raw(want, int(typestr[2:]))
    if dtype is None or (typestr[0] == ">" and typestr[2] != "1"):
        raise InvalidArgument("%s has element type %r, which tcomms does not reduce or move (it takes %s)"
                              % (what, typestr, ", ".join(_lib.DTYPES)))
    shape = tuple(iface["shape"])
    _contiguous(shape, iface.get("strides"), ITEMSIZE[dtype], what)
    ptr, readonly = iface["data"]
    return Buf(obj, ptr or 0, _numel(shape), dtype, device, bool(readonly))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj, what):
    capsule = obj.__dlpack__()
    # The capsule keeps its name "dltensor": its own destructor frees the managed tensor, while `obj` keeps the
    # memory alive for as long as the operation holds this Buf.
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    dtype = _DLPACK.get((t.dtype.code, t.dtype.bits))
    if dtype is None or t.dtype.lanes != 1:
        raise InvalidArgument("%s has a DLPack element type (code %d, %d bits, %d lanes) tcomms does not take"
                              % (what, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] * ITEMSIZE[dtype] for i in range(t.ndim)] if t.strides else None
    _contiguous(shape, strides, ITEMSIZE[dtype], what)
    if t.device.device_type in (_DL_CPU, _DL_CUDA_HOST):
        device = _lib.DEVICE_CPU
    elif t.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        device = _lib.DEVICE_CUDA
    else:
        raise InvalidArgument("%s lives on DLPack device type %d; tcomms takes host and CUDA memory"
                              % (what, t.device.device_type))
    return Buf(obj, (t.data or 0) + t.byte_offset, _numel(shape), dtype, device, False)


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


def _from_buffer(obj, what, want=None):
    try:
        view = memoryview(obj)
    except TypeError:
        raise InvalidArgument("%s (a %s) exposes no memory: pass a NumPy array, a tensor, or an object with the "
                              "buffer protocol, __array_interface__, __cuda_array_interface__ or DLPack"
                              % (what, type(obj).__name__)) from None
    if not view.c_contiguous:
        raise InvalidArgument("%s is not contiguous" % what)
    fmt = view.format.lstrip("@=<")
    dtype = _FORMAT.get(fmt)
    if dtype is None and fmt in ("h", "H", "i", "I", "l", "L", "q", "Q"):
        dtype = _raw(want, view.itemsize)
    if dtype is None or ITEMSIZE[dtype] != view.itemsize:
        raise InvalidArgument("%s has buffer format %r, which tcomms does not take" % (what, view.format))
    pb = _PyBuffer()
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
    get(view, ctypes.byref(pb), 0)
    ptr = pb.buf or 0
    ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
    ctypes.pythonapi.PyBuffer_Release(ctypes.byref(pb))
    # the memoryview stays with the Buf: it pins the exporter (a bytearray cannot be resized meanwhile)
    return Buf(obj, ptr, view.nbytes // view.itemsize, dtype, _lib.DEVICE_CPU, view.readonly, view)


def as_buf(obj, what="buffer", dtype=None, writable=False):
    """The Buf of `obj`. `dtype` reinterprets memory of the same element size (bfloat16 held in a uint16 array);
    `writable` refuses read-only memory."""
    if isinstance(obj, Buf):
        buf = obj
    elif hasattr(obj, "__cuda_array_interface__"):
        buf = _from_interface(obj, obj.__cuda_array_interface__, _lib.DEVICE_CUDA, what, dtype)
    elif hasattr(obj, "__array_interface__"):
        buf = _from_interface(obj, obj.__array_interface__, _lib.DEVICE_CPU, what, dtype)
    elif hasattr(obj, "__dlpack__"):
        buf = _from_dlpack(obj, what)
    else:
        buf = _from_buffer(obj, what, dtype)
    if dtype is not None and dtype != buf.dtype:
        if dtype not in ITEMSIZE:
            raise InvalidArgument("unknown dtype %r (tcomms takes %s)" % (dtype, ", ".join(_lib.DTYPES)))
        if buf.nbytes % ITEMSIZE[dtype]:
            raise InvalidArgument("%s holds %d bytes, not a whole number of %s elements" % (what, buf.nbytes,
                                                                                        dtype))
        buf = Buf(buf.obj, buf.ptr, buf.nbytes // ITEMSIZE[dtype], dtype, buf.device, buf.readonly, buf._view)
    if writable and buf.readonly:
        raise InvalidArgument("%s is read-only, and this call writes into it" % what)
    return buf
