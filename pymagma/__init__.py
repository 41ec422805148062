"""pymagma: MAGMA and cuDNN from Python through ctypes and cuda-python."""

from . import (
    array,
    array_api,  # noqa: F401 (fills the table DeviceArray's operators run: array.UPPER)
    blas,
    dnn,
    dtypes,
    errors,
    fft,
    graphs,
    kernels,
    linalg,
    memory,
    queue,
    runtime,
)
from ._version import __version__
from .array import DeviceArray, asarray, empty, from_dlpack, ones, to_numpy, zeros
from .errors import (
    CudaError,
    CudnnError,
    CufftError,
    DeviceMemoryError,
    GraphCaptureError,
    KernelCompileError,
    LibraryNotFoundError,
    LinAlgError,
    MagmaError,
    MissingSymbolError,
    NoDeviceError,
    NotSimulatedError,
    PymagmaError,
)
from .info import info
from .queue import Queue, default_queue
from .runtime import device_count, require_device

__all__ = [
    "errors", "PymagmaError", "LibraryNotFoundError", "MissingSymbolError", "NoDeviceError", "CudaError",
    "CudnnError", "MagmaError", "DeviceMemoryError", "LinAlgError", "KernelCompileError",
    "array", "memory", "queue", "runtime", "DeviceArray", "asarray", "empty", "zeros", "ones", "from_dlpack",
    "to_numpy", "Queue", "default_queue", "device_count", "require_device", "blas", "linalg", "info", "dnn",
    "kernels", "dtypes", "NotSimulatedError", "__version__", "graphs", "GraphCaptureError", "fft", "CufftError",
]

from . import simulator as _simulator  # noqa: E402  (last: it stands in for the native seam of the modules above)

_simulator._enable_from_environment()  # PYMAGMA_SIMULATOR=1|partial|full: once, at import
