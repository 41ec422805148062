"""Exception hierarchy of pymagma: every failure is a typed error that says what was wrong and what to do."""

from __future__ import annotations

import numpy as np


class PymagmaError(Exception):
    """Base class of every pymagma error."""


class LibraryNotFoundError(PymagmaError, ImportError):
    """A native library (MAGMA, cuDNN, NVRTC, cudart) could not be found; the message says how to install it."""


class MissingSymbolError(PymagmaError, AttributeError):
    """The loaded library does not export a symbol we need (e.g. a partial MAGMA provider)."""

    def __init__(self, symbol: str, library: str, remedy: str = ""):
        self.symbol, self.library, self.remedy = symbol, library, remedy
        msg = f"symbol {symbol!r} is not exported by {library}"
        super().__init__(f"{msg}; {remedy}" if remedy else msg)


class NoDeviceError(PymagmaError, RuntimeError):
    """No usable CUDA device: no driver, or a driver with no device."""


class CudaError(PymagmaError, RuntimeError):
    """A CUDA runtime/driver call failed."""

    def __init__(self, code: int, name: str, text: str = "", call: str = ""):
        self.code, self.name, self.text, self.call = int(code), name, text, call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} ({self.code}): {text}" if text else f"{where}{name} ({self.code})")


class CudnnError(PymagmaError, RuntimeError):
    """A cuDNN call returned a status other than CUDNN_STATUS_SUCCESS."""

    def __init__(self, status: int, name: str, message: str = "", call: str = ""):
        self.status, self.name, self.message, self.call = int(status), name, message, call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} ({self.status})" + (f": {message}" if message else ""))


class MagmaError(PymagmaError, RuntimeError):
    """A MAGMA call returned an error code that is neither an argument error nor a numerical failure."""

    def __init__(self, info: int, text: str = "", call: str = ""):
        self.info, self.text, self.call = int(info), text, call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}MAGMA error {self.info}" + (f": {text}" if text else ""))


class DeviceMemoryError(PymagmaError, MemoryError):
    """Device (or pinned host) memory could not be allocated."""


class LinAlgError(PymagmaError, np.linalg.LinAlgError):
    """A numerical failure (singular matrix, matrix not positive definite, no convergence)."""


class CufftError(PymagmaError, RuntimeError):
    """A cuFFT call returned a status other than CUFFT_SUCCESS."""

    def __init__(self, status: int, name: str, call: str = ""):
        self.status, self.name, self.call = int(status), name, call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} ({self.status})")


class KernelCompileError(PymagmaError, RuntimeError):
    """NVRTC failed to compile a kernel; ``log`` holds the compiler output."""

    def __init__(self, name: str, log: str, options: tuple = ()):
        self.kernel, self.log, self.options = name, log, tuple(options)
        super().__init__(f"NVRTC could not compile {name!r} (options {list(self.options)}):\n{log}")


class NotSimulatedError(PymagmaError, NotImplementedError):
    """A native call the simulator does not model (pymagma reached a native function outside its declared seam)."""


class GraphCaptureError(CudaError):
    """An operation that cannot be part of a CUDA graph ran while one was being captured (a synchronize, a host read,
    a pageable copy, an allocation outside the graph's memory pool): the capture is invalid from then on."""


class CublasError(PymagmaError, RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""

    def __init__(self, status: int, name: str, call: str = ""):
        self.status, self.name, self.call = int(status), name, call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} ({self.status})")
