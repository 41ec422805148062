"""DLPack for :class:`pymagma.array.DeviceArray`, through ctypes: versioned (DLPack 1.x ``dltensor_versioned``)
capsules for consumers that pass ``max_version``, unversioned ``dltensor`` capsules for the others.

``to_capsule`` exports an array (the capsule keeps it alive until the consumer calls the deleter);
``from_capsule`` imports either kind (the producer's deleter runs when the last view of the imported array dies).

No Python code runs in a capsule's destructor: a consumer that refuses a capsule (``np.from_dlpack`` of device
memory) drops it while its own exception is pending, and a Python (ctypes) callback run then loses that exception
(the consumer ends in ``SystemError: returned NULL without setting an exception``). The DLPack reference destructor
saves and restores the error state around its work (``PyErr_Fetch``/``PyErr_Restore``), which a ctypes callback
cannot do after it returns. So our capsules have no destructor: this module holds each capsule it made, and
:func:`sweep` (run at each export and after each garbage collection) releases the exports whose capsule nobody else
holds any more, unconsumed. A consumed capsule's export is released by its ``deleter`` (:func:`_release`).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import weakref

import numpy as np

from . import dtypes

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6
_KIND_TO_CODE = {"i": kDLInt, "u": kDLUInt, "f": kDLFloat, "c": kDLComplex, "b": kDLBool}
_CODE_TO_KIND = {v: k for k, v in _KIND_TO_CODE.items()}
#: the DLPack ABI version of our versioned capsules; DLPACK_FLAG_BITMASK_READ_ONLY
VERSION, FLAG_READ_ONLY = (1, 0), 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(DLManagedTensor[Versioned]*)


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


#: capsule name -> (its name once consumed, the struct it points to)
_KINDS = {b"dltensor": (b"used_dltensor", DLManagedTensor),
          b"dltensor_versioned": (b"used_dltensor_versioned", DLManagedTensorVersioned)}
_NAMES = {name: ctypes.create_string_buffer(name) for pair in _KINDS.items() for name in (pair[0], pair[1][0])}
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]

#: exports not released yet: address -> (struct, shape, strides, array, capsule)
_EXPORTED: dict[int, tuple] = {}


def _references(entry: tuple) -> int:
    """``sys.getrefcount`` of an entry's capsule, measured the same way for the calibration below and in sweep."""
    return sys.getrefcount(entry[4])


#: what _references gives for a capsule held by nothing but its _EXPORTED entry (calibrated: the interpreter's
#: own temporary references differ between Python versions)
_ONLY_OURS = _references((None, None, None, None, object()))


@_DELETER
def _release(managed) -> None:
    _EXPORTED.pop(managed, None)


def sweep() -> int:
    """Release the exports whose capsule is held by nobody but this module and was never consumed (its name is
    still "dltensor"/"dltensor_versioned"); returns how many were released."""
    released = 0
    for address, entry in list(_EXPORTED.items()):
        if _references(entry) <= _ONLY_OURS and any(_api.PyCapsule_IsValid(entry[4], n) for n in _KINDS):
            _EXPORTED.pop(address, None)
            released += 1
    return released


def _after_collection(phase, info) -> None:
    if phase == "stop" and _EXPORTED:
        sweep()


gc.callbacks.append(_after_collection)


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


def export_arguments(stream, max_version, dl_device, copy, own_device: tuple) -> tuple:
    """The 2023.12 ``__dlpack__`` keywords checked as the standard says: ``stream`` None, -1 (no synchronisation),
    1 (legacy default), 2 (per-thread default) or a stream handle (> 2; 0 is ambiguous for CUDA and refused);
    ``max_version`` None or (major, minor); ``dl_device`` None or (device_type, device_id); ``copy`` None or a
    bool.  Returns (stream, max_version, dl_device) normalised; TypeError / ValueError naming a bad value,
    BufferError for a device this array cannot be exported to."""
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
        raise TypeError(f"__dlpack__: stream must be None or an int (a CUDA stream handle), got {stream!r}")
    if stream == 0 or (stream is not None and stream < -1):
        raise ValueError(f"__dlpack__: stream {stream} is not valid for CUDA (None, -1, 1, 2 or a stream handle; "
                         "0 is ambiguous and disallowed by the standard)")
    if max_version is not None:
        if not (isinstance(max_version, tuple) and len(max_version) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in max_version)):
            raise TypeError(f"__dlpack__: max_version must be None or a (major, minor) tuple of non-negative ints, "
                            f"got {max_version!r}")
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"__dlpack__: copy must be None, True or False, got {copy!r}")
    if dl_device is not None:
        if not (isinstance(dl_device, tuple) and len(dl_device) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in dl_device)):
            raise TypeError(f"__dlpack__: dl_device must be None or a (device_type, device_id) tuple of ints, got "
                            f"{dl_device!r}")
        dl_device = (int(dl_device[0]), int(dl_device[1]))
        if dl_device != own_device and dl_device[0] != kDLCPU:
            raise BufferError(f"__dlpack__: cannot export to device {dl_device}; the array is on {own_device} and "
                              "goes elsewhere only as a host copy (dl_device=(1, 0))")
    return stream, max_version, dl_device


def host_readable(ptr: int) -> bool:
    """Whether the host may read the memory at ``ptr`` in place: pinned host or managed memory (CUDA's pointer
    attributes); device memory is not."""
    if not ptr:
        return True
    from . import runtime

    attrs = runtime.check(runtime._rt().cudaPointerGetAttributes(ptr), "cudaPointerGetAttributes")
    return int(attrs.type) in (1, 3)  # cudaMemoryTypeHost, cudaMemoryTypeManaged


def to_capsule(arr, device_type: int = kDLCUDA, versioned: bool = False):
    """A capsule viewing ``arr`` (needs ``ptr``, ``shape``, ``strides`` (bytes), ``dtype``, ``device``):
    ``dltensor_versioned`` (DLPack :data:`VERSION`, writable) when ``versioned``, else ``dltensor``."""
    itemsize = arr.dtype.itemsize
    if any(s % itemsize for s in arr.strides):
        raise BufferError(f"strides {arr.strides} are not multiples of the item size {itemsize}")
    ndim = len(arr.shape)
    shape = (ctypes.c_int64 * max(ndim, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in arr.strides))
    name = b"dltensor_versioned" if versioned else b"dltensor"
    managed = _KINDS[name][1]()
    if versioned:
        managed.version = DLPackVersion(*VERSION)
    t = managed.dl_tensor
    t.data, t.ndim, t.byte_offset = arr.ptr or None, ndim, 0
    t.device = DLDevice(device_type, arr.device if device_type != kDLCPU else 0)
    t.dtype = dl_dtype(arr.dtype)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    managed.deleter = _release
    address = ctypes.addressof(managed)
    sweep()
    capsule = _api.PyCapsule_New(address, ctypes.addressof(_NAMES[name]), None)  # no destructor: see the docstring
    _EXPORTED[address] = (managed, shape, strides, arr, capsule)
    return capsule


class _Imported:
    """Keeps an imported DLPack tensor alive; calls the producer's deleter when collected."""

    def __init__(self, address: int, managed, capsule):
        self.capsule = capsule
        if managed.deleter:
            weakref.finalize(self, managed.deleter, address)


def from_capsule(capsule, array_type):
    """Build ``array_type(shape, dtype, ptr, strides, owner, device)`` over the tensor in a ``dltensor`` or
    ``dltensor_versioned`` capsule (DLPack 1.x; a read-only export is refused: DeviceArrays are writable)."""
    name = next((n for n in _KINDS if _api.PyCapsule_IsValid(capsule, n)), None)
    if name is None:
        raise BufferError("not an unconsumed DLPack capsule ('dltensor' or 'dltensor_versioned')")
    used, struct = _KINDS[name]
    address = _api.PyCapsule_GetPointer(capsule, name)
    managed = struct.from_address(address)
    if struct is DLManagedTensorVersioned:
        if managed.version.major != VERSION[0]:
            raise BufferError(f"DLPack version {managed.version.major}.{managed.version.minor} is not supported "
                              f"(pymagma reads {VERSION[0]}.x)")
        if managed.flags & FLAG_READ_ONLY:
            raise BufferError("the DLPack export is read-only; pymagma arrays are writable (export a writable "
                              "tensor, or copy it)")
    t = managed.dl_tensor
    dtype = np_dtype(t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None if not t.strides else tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    ptr = (t.data or 0) + t.byte_offset
    _api.PyCapsule_SetName(capsule, ctypes.addressof(_NAMES[used]))
    owner = _Imported(address, managed, capsule)
    return array_type(shape, dtype, ptr, strides, owner=owner, device=t.device.device_id)


def import_tensor(obj, array_cls):
    """:func:`pymagma.array.from_dlpack`: ``obj``'s CUDA tensor as an ``array_cls`` (a DeviceArray), no copy, the
    producer's work ordered before the device's default queue."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not implement the DLPack protocol (__dlpack__)")
    device_type, device_id = obj.__dlpack_device__()
    if device_type not in (kDLCUDA, kDLCUDAManaged):
        raise ValueError(f"from_dlpack needs a CUDA tensor; got DLPack device type {device_type} (use asarray for "
                         "host data)")
    from .queue import default_queue

    stream = default_queue(device_id).stream or 1
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=VERSION)
    except TypeError:  # a producer older than DLPack 1.0 takes no max_version
        capsule = obj.__dlpack__(stream=stream)
    return from_capsule(capsule, array_cls)
