"""Raw cuFFT binding: the prototype table pymagma calls, its enums, and the plan cache (a native resource).

Prototypes and values as cuFFT's ``cufft.h`` declares them (cuFFT 12, CUDA 13).  A plan is made once per layout
(rank, sizes, ``inembed``/``istride``/``idist``, ``onembed``/``ostride``/``odist``, type, batch, device) with
``cufftCreate`` + ``cufftMakePlanMany64`` (cuFFT allocates its work area then, so plans are made outside a CUDA graph
capture), kept in the ``fft_plans`` resource of the libraries in use, and destroyed by the cuFFT that made it.  Each
execution runs on the stream of the caller's MAGMA queue (``cufftSetStream`` when the plan's stream changes), so it
is ordered with MAGMA's work and recorded by a capture of that stream.  Nothing here knows about arrays: callers pass
device pointers as ints and layouts in elements of the plan's input and output types.
"""

from __future__ import annotations

import ctypes
import enum
import weakref
from ctypes import POINTER, c_int, c_longlong, c_size_t, c_void_p

from . import _native
from ._ffi import NativeLibrary
from ._libs import NVIDIA_REMEDIES, load_nvidia
from .errors import CufftError


class Result(enum.IntEnum):
    """cufftResult."""

    SUCCESS = 0
    INVALID_PLAN = 1
    ALLOC_FAILED = 2
    INVALID_TYPE = 3
    INVALID_VALUE = 4
    INTERNAL_ERROR = 5
    EXEC_FAILED = 6
    SETUP_FAILED = 7
    INVALID_SIZE = 8
    UNALIGNED_DATA = 9
    INCOMPLETE_PARAMETER_LIST = 10
    INVALID_DEVICE = 11
    PARSE_ERROR = 12
    NO_WORKSPACE = 13
    NOT_IMPLEMENTED = 14
    LICENSE_ERROR = 15
    NOT_SUPPORTED = 16


class Type(enum.IntEnum):
    """cufftType: input and output element types of a plan."""

    R2C = 0x2A
    C2R = 0x2C
    C2C = 0x29
    D2Z = 0x6A
    Z2D = 0x6C
    Z2Z = 0x69


FORWARD, INVERSE = -1, 1  #: CUFFT_FORWARD (exp(-2 pi i ...)), CUFFT_INVERSE (exp(+2 pi i ...)); both unnormalised
MAX_RANK = 3  #: cufftPlanMany's ranks: 1, 2, 3

#: type -> (its execution function, whether it takes a direction, input dtype name, output dtype name)
EXEC = {Type.C2C: ("cufftExecC2C", True, "complex64", "complex64"),
        Type.Z2Z: ("cufftExecZ2Z", True, "complex128", "complex128"),
        Type.R2C: ("cufftExecR2C", False, "float32", "complex64"),
        Type.D2Z: ("cufftExecD2Z", False, "float64", "complex128"),
        Type.C2R: ("cufftExecC2R", False, "complex64", "float32"),
        Type.Z2D: ("cufftExecZ2D", False, "complex128", "float64")}

_st, _h, _p, _ll = c_int, c_int, c_void_p, c_longlong
_LLP = POINTER(c_longlong)
PROTOTYPES = {
    "cufftGetVersion": (_st, (POINTER(c_int),)),
    "cufftCreate": (_st, (POINTER(c_int),)),
    # plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, workSize
    "cufftMakePlanMany64": (_st, (_h, c_int, _LLP, _LLP, _ll, _ll, _LLP, _ll, _ll, c_int, _ll, POINTER(c_size_t))),
    "cufftSetStream": (_st, (_h, _p)),
    "cufftExecC2C": (_st, (_h, _p, _p, c_int)),
    "cufftExecZ2Z": (_st, (_h, _p, _p, c_int)),
    "cufftExecR2C": (_st, (_h, _p, _p)),
    "cufftExecD2Z": (_st, (_h, _p, _p)),
    "cufftExecC2R": (_st, (_h, _p, _p)),
    "cufftExecZ2D": (_st, (_h, _p, _p)),
    "cufftDestroy": (_st, (_h,)),
}

lib = NativeLibrary("cuFFT", lambda: load_nvidia("cufft"), PROTOTYPES,
                    remedy=f"cuFFT is required: {NVIDIA_REMEDIES['cufft']}")  #: the real libcufft
_native.register("cufft", lambda: lib, lambda: tuple(PROTOTYPES))


def library():
    """The cuFFT in use (the simulator's when it is on)."""
    return _native.current.cufft


def status_name(status: int) -> str:
    try:
        return f"CUFFT_{Result(int(status)).name}"
    except ValueError:
        return f"CUFFT_RESULT({int(status)})"


def check(status: int, call: str) -> None:
    """Raise :class:`CufftError` unless ``status`` is CUFFT_SUCCESS."""
    if status != 0:
        raise CufftError(status, status_name(status), call)


def version(cufft=None) -> int:
    """``cufftGetVersion`` (e.g. 12000 for cuFFT 12.0)."""
    out = c_int()
    check((cufft or library()).bind("cufftGetVersion")(ctypes.byref(out)), "cufftGetVersion")
    return out.value


class Layout(tuple):
    """A plan's layout in cuFFT's terms: ``(type, n, inembed, istride, idist, onembed, ostride, odist, batch)``,
    sizes in elements of the input (``i*``) and output (``o*``) types.  Hashable: the plan cache's key."""

    __slots__ = ()

    def __new__(cls, type_, n, inembed, istride, idist, onembed, ostride, odist, batch):
        return super().__new__(cls, (Type(type_), tuple(n), tuple(inembed), int(istride), int(idist),
                                     tuple(onembed), int(ostride), int(odist), int(batch)))

    type = property(lambda self: self[0])
    n = property(lambda self: self[1])


def _destroy(cufft, handle: int) -> None:
    try:
        cufft.bind("cufftDestroy")(handle)
    except Exception:  # pragma: no cover - interpreter shutdown
        pass


class Plan:
    """A cuFFT plan for one :class:`Layout` on one device (destroyed by the cuFFT that made it when it dies)."""

    __slots__ = ("layout", "handle", "stream", "_run", "_direction", "_set_stream", "__weakref__")

    def __init__(self, layout: Layout):
        cufft = library()
        handle = c_int()
        check(cufft.bind("cufftCreate")(ctypes.byref(handle)), "cufftCreate")
        self.layout, self.handle, self.stream = layout, handle.value, None
        weakref.finalize(self, _destroy, cufft, handle.value)
        t, n, inembed, istride, idist, onembed, ostride, odist, batch = layout
        rank = len(n)
        arrays = [(c_longlong * rank)(*v) for v in (n, inembed, onembed)]
        work = c_size_t()
        check(cufft.bind("cufftMakePlanMany64")(self.handle, rank, arrays[0], arrays[1], istride, idist, arrays[2],
                                                ostride, odist, int(t), batch, ctypes.byref(work)),
              "cufftMakePlanMany64")
        name, self._direction, _, _ = EXEC[t]
        self._run = cufft.bind(name)
        self._set_stream = cufft.bind("cufftSetStream")

    def execute(self, idata: int, odata: int, stream: int, direction: int = FORWARD) -> None:
        """Run the plan on ``stream`` from ``idata`` into ``odata`` (device pointers; equal for in place)."""
        if stream != self.stream:
            check(self._set_stream(self.handle, stream or None), "cufftSetStream")
            self.stream = stream
        if self._direction:
            check(self._run(self.handle, idata, odata, direction), EXEC[self.layout.type][0])
        else:
            check(self._run(self.handle, idata, odata), EXEC[self.layout.type][0])


@_native.resource("fft_plans")
def _plans(libraries) -> dict:
    """(device, :class:`Layout`) -> :class:`Plan`, for the libraries in use."""
    return {}


def plan(layout: Layout, device: int) -> Plan:
    """The cached plan of ``layout`` on ``device`` (made on first use, on that device)."""
    plans = _native.current.fft_plans
    key = (device, layout)
    found = plans.get(key)
    if found is None:
        from . import runtime

        with runtime.on_device(device):
            found = plans[key] = Plan(layout)
    return found
