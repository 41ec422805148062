"""pymagma: MAGMA and cuDNN from Python through ctypes and cuda-python."""

from . import errors
from .errors import (
    CudaError,
    CudnnError,
    DeviceMemoryError,
    KernelCompileError,
    LibraryNotFoundError,
    LinAlgError,
    MagmaError,
    MissingSymbolError,
    NoDeviceError,
    PymagmaError,
)

__version__ = "0.1.0"

__all__ = [
    "errors", "PymagmaError", "LibraryNotFoundError", "MissingSymbolError", "NoDeviceError", "CudaError",
    "CudnnError", "MagmaError", "DeviceMemoryError", "LinAlgError", "KernelCompileError",
]
