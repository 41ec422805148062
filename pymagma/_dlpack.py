"""DLPack (unversioned ``DLManagedTensor`` capsules) for :class:`pymagma.array.DeviceArray`, through ctypes.

``to_capsule`` exports an array (the capsule keeps it alive until the consumer calls the deleter);
``from_capsule`` imports one (the producer's deleter runs when the last view of the imported array dies).
"""

from __future__ import annotations

import ctypes
import weakref

import numpy as np

from . import dtypes

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6
_KIND_TO_CODE = {"i": kDLInt, "u": kDLUInt, "f": kDLFloat, "c": kDLComplex, "b": kDLBool}
_CODE_TO_KIND = {v: k for k, v in _KIND_TO_CODE.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_NAME = ctypes.create_string_buffer(b"dltensor")
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor")
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_void_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]

#: exported tensors still owned by a consumer: address -> (struct, shape, strides, array)
_EXPORTED: dict[int, tuple] = {}


@_DELETER
def _release(managed) -> None:
    _EXPORTED.pop(ctypes.cast(managed, ctypes.c_void_p).value, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule) -> None:
    # A capsule still named "dltensor" was never consumed: release the export ourselves.
    if _api.PyCapsule_IsValid(capsule, ctypes.addressof(_NAME)):
        pointer = _api.PyCapsule_GetPointer(ctypes.cast(capsule, ctypes.py_object), ctypes.addressof(_NAME))
        _EXPORTED.pop(pointer, None)


def dl_dtype(dtype) -> DLDataType:
    if dtypes.is_bfloat16(dtype):
        return DLDataType(kDLBfloat, 16, 1)
    dtype = np.dtype(dtype)
    if dtype.kind not in _KIND_TO_CODE:
        raise BufferError(f"dtype {dtype} has no DLPack equivalent")
    return DLDataType(_KIND_TO_CODE[dtype.kind], dtype.itemsize * 8, 1)


def np_dtype(dt: DLDataType) -> np.dtype:
    if (dt.code, dt.bits, dt.lanes) == (kDLBfloat, 16, 1):
        return dtypes.bfloat16()
    if dt.lanes != 1 or dt.code not in _CODE_TO_KIND:
        raise BufferError(f"unsupported DLPack dtype (code={dt.code}, bits={dt.bits}, lanes={dt.lanes})")
    kind = _CODE_TO_KIND[dt.code]
    return np.dtype("bool") if kind == "b" else np.dtype(f"{kind}{dt.bits // 8}")


def to_capsule(arr, device_type: int = kDLCUDA):
    """A ``dltensor`` capsule viewing ``arr`` (needs ``ptr``, ``shape``, ``strides`` (bytes), ``dtype``, ``device``)."""
    itemsize = arr.dtype.itemsize
    if any(s % itemsize for s in arr.strides):
        raise BufferError(f"strides {arr.strides} are not multiples of the item size {itemsize}")
    ndim = len(arr.shape)
    shape = (ctypes.c_int64 * max(ndim, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in arr.strides))
    managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data, t.ndim, t.byte_offset = arr.ptr or None, ndim, 0
    t.device = DLDevice(device_type, arr.device if device_type != kDLCPU else 0)
    t.dtype = dl_dtype(arr.dtype)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    managed.deleter = _release
    address = ctypes.addressof(managed)
    _EXPORTED[address] = (managed, shape, strides, arr)
    return _api.PyCapsule_New(address, ctypes.addressof(_NAME), ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class _Imported:
    """Keeps an imported DLPack tensor alive; calls the producer's deleter when collected."""

    def __init__(self, address: int, managed: DLManagedTensor, capsule):
        self.capsule = capsule
        if managed.deleter:
            weakref.finalize(self, managed.deleter, ctypes.cast(address, ctypes.POINTER(DLManagedTensor)))


def from_capsule(capsule, array_type):
    """Build ``array_type(shape, dtype, ptr, strides, owner, device)`` over the tensor in a ``dltensor`` capsule."""
    address = _api.PyCapsule_GetPointer(capsule, ctypes.addressof(_NAME))
    managed = DLManagedTensor.from_address(address)
    t = managed.dl_tensor
    dtype = np_dtype(t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    ptr = (t.data or 0) + t.byte_offset
    _api.PyCapsule_SetName(capsule, ctypes.addressof(_USED_NAME))
    owner = _Imported(address, managed, capsule)
    return array_type(shape, dtype, ptr, strides, owner=owner, device=t.device.device_id)
