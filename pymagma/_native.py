"""The one seam between pymagma and native code.

pymagma reaches every native library through one object per library, held by :data:`current`, a
:class:`Libraries`:

- ``cudart``: the CUDA runtime, shaped like ``cuda.bindings.runtime`` (``cudaMalloc(n) -> (err, ptr)``, ...), limited
  to :data:`CUDART_ENTRY_POINTS` and :data:`CUDART_DATA`;
- ``magma``: MAGMA, a :class:`~pymagma._ffi.NativeLibrary` over ``pymagma._magma.SIGNATURES``;
- ``cudnn``: cuDNN, a :class:`~pymagma._ffi.NativeLibrary` over ``pymagma._cudnn.PROTOTYPES``;
- ``cublas``: cuBLAS, a :class:`~pymagma._ffi.NativeLibrary` over ``pymagma._cublas.PROTOTYPES``;
- ``cufft``: cuFFT, a :class:`~pymagma._ffi.NativeLibrary` over ``pymagma._cufft.PROTOTYPES``;
- ``launcher``: the kernel launcher (``launch(program, expression, device, stream, grid, block, args)``).

Each library module registers its real object's factory and its entry points with :func:`register`; the objects
are made on first use, so importing pymagma loads nothing.  The resources pymagma makes with a set of libraries
(default queues, the memory pool, cuDNN handles, algorithm choices) are attributes of the same :class:`Libraries`,
made on first use by the factories given to :func:`resource`: :func:`use` swaps libraries and resources together.
That is how :mod:`pymagma.simulator` stands in for the device: it builds its own :class:`Libraries` and calls
:func:`use`; nothing else is replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["CUDART_ENTRY_POINTS", "CUDART_DATA", "Libraries", "current", "real", "use", "register", "resource",
           "entry_points"]

#: The CUDA runtime functions pymagma calls (``cuda.bindings.runtime`` names): the whole surface a stand-in models.
CUDART_ENTRY_POINTS = (
    "cudaGetDeviceCount", "cudaGetDevice", "cudaSetDevice", "cudaDeviceSynchronize", "cudaGetDeviceProperties",
    "cudaMemGetInfo", "cudaRuntimeGetVersion", "cudaDriverGetVersion", "cudaGetErrorString",
    "cudaStreamCreateWithFlags", "cudaStreamDestroy", "cudaStreamSynchronize", "cudaStreamWaitEvent",
    "cudaEventCreateWithFlags", "cudaEventDestroy", "cudaEventRecord", "cudaEventSynchronize", "cudaEventElapsedTime",
    "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaPointerGetAttributes",
    "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaMemset", "cudaMemsetAsync",
    "cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaStreamIsCapturing", "cudaThreadExchangeStreamCaptureMode",
    "cudaGraphInstantiate", "cudaGraphLaunch", "cudaGraphExecDestroy", "cudaGraphDestroy",
)
#: The data (enums and flags, no native call) of ``cuda.bindings.runtime`` that pymagma reads.
CUDART_DATA = ("cudaError_t", "cudaMemcpyKind", "cudaMemoryType", "cudaStreamDefault", "cudaStreamNonBlocking",
               "cudaEventDefault", "cudaEventDisableTiming", "cudaStreamCaptureMode", "cudaStreamCaptureStatus")

_FACTORIES: dict[str, Callable[[], object]] = {}  # library name -> the real object's factory
_ENTRY_POINTS: dict[str, Callable[[], tuple[str, ...]]] = {}
_RESOURCES: dict[str, Callable[[Libraries], object]] = {}


class Libraries:
    """One set of native libraries (``cudart``, ``magma``, ``cudnn``, ``cublas``, ``cufft``, ``launcher``) and the
    resources pymagma made with them.  A library given to the constructor is used as is; one not given comes from its
    registered factory on first use.  Any other attribute is a resource registered with :func:`resource`, made on
    first use and kept."""

    def __init__(self, name: str = "native", **libraries):
        self.name = name
        self.lock = threading.RLock()  # taken while a resource is made (resources of resources are allowed)
        for key, value in libraries.items():
            if key not in _FACTORIES:
                raise TypeError(f"Libraries: unknown library {key!r}; expected one of {sorted(_FACTORIES)}")
            setattr(self, key, value)

    def __getattr__(self, key: str):
        if key.startswith("__"):
            raise AttributeError(key)
        factory = _FACTORIES.get(key)
        if factory is None:
            made = _RESOURCES.get(key)
            if made is None:
                raise AttributeError(f"pymagma has no native library or resource named {key!r}")
            factory = lambda: made(self)  # noqa: E731
        with self.lock:
            value = self.__dict__.get(key)
            if value is None:
                value = factory()
                setattr(self, key, value)
        return value

    def __repr__(self) -> str:
        return f"Libraries({self.name!r})"


def register(library: str, factory: Callable[[], object], entry_points: Callable[[], tuple[str, ...]]) -> None:
    """Declare a native library: ``factory()`` makes the real object, ``entry_points()`` names what pymagma calls."""
    _FACTORIES[library] = factory
    _ENTRY_POINTS[library] = entry_points


def resource(name: str):
    """Decorator: ``factory(libraries)`` makes the resource ``name`` of a :class:`Libraries` on its first use."""
    def decorate(factory):
        _RESOURCES[name] = factory
        return factory

    return decorate


def entry_points() -> dict[str, tuple[str, ...]]:
    """Library name -> every native function pymagma may call in it."""
    return {library: tuple(names()) for library, names in _ENTRY_POINTS.items()}


_REAL = Libraries("native")
current: Libraries = _REAL  #: the libraries every pymagma call goes through


def real() -> Libraries:
    """The real native libraries (whatever :data:`current` is)."""
    return _REAL


def use(libraries: Libraries) -> Libraries:
    """Make ``libraries`` :data:`current` (libraries and resources swap as a whole); return the previous ones."""
    global current
    if not isinstance(libraries, Libraries):
        raise TypeError(f"use() needs a Libraries, got {type(libraries).__name__}")
    previous, current = current, libraries
    return previous
