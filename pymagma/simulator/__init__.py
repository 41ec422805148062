"""pymagma's CPU simulator of the device, opt-in (like Numba's ``NUMBA_ENABLE_CUDASIM=1``).

It stands in for pymagma's native seam (:mod:`pymagma._native`) as a whole: one simulated object per native library,
nothing else replaced. Device memory is host memory and the CUDA runtime calls are memmove/memset (:mod:`.runtime`),
MAGMA routines are NumPy models of their documented semantics checked against pymagma's prototype tables
(:mod:`.magma`), cuBLAS's GemmEx and math mode are NumPy models on the queues' handles (:mod:`.cublas`), cuFFT's plans
and transforms are models of its documented layouts (:mod:`.cufft`), the cuDNN calls
that touch the device are NumPy models (:mod:`.cudnn`), and pymagma's kernels are their real ``.cu`` sources compiled by
the host C++ compiler (:mod:`.kernels`). A native function pymagma declares but the simulator does not model raises
:class:`~pymagma.errors.NotSimulatedError`. It proves plumbing and conventions; only a GPU proves speed, concurrency and
NVRTC code.

Turn it on with ``PYMAGMA_SIMULATOR=1`` (or ``partial``; ``full``; ``null``) before ``import pymagma``, or in code::

    import pymagma.simulator as sim
    with sim.simulated("full"):
        ...            # pymagma runs on the simulated device here

Modes: ``"partial"`` exports exactly the MAGMA routines the provider pymagma finds exports (so a partial MAGMA
such as PyTorch's exercises pymagma's fallbacks; with no provider it is ``"full"``); ``"full"`` exports every
modelled routine; ``"null"`` is ``"full"`` with a device that does nothing: every native call is checked exactly as
in the other modes and then returns without computing (copies, memsets, MAGMA routines, the device work of cuDNN
calls and kernel launches are dropped; results are undefined).  It measures the host's cost of driving the device
(``scripts/bench.py --overhead``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .. import _native
from . import cublas, cudnn, cufft, kernels, magma, runtime

ENV_VAR = "PYMAGMA_SIMULATOR"
MODES = ("partial", "full", "null")
_ENV_VALUES = {"": None, "0": None, "1": "partial", "partial": "partial", "full": "full", "null": "null"}

__all__ = ["ENV_VAR", "MODES", "Simulation", "enable", "disable", "is_enabled", "mode", "simulated", "current",
           "mode_from_environment"]


@dataclass
class Simulation:
    """What :func:`enable` put in place: the mode, the simulated libraries (``libraries``, a
    :class:`pymagma._native.Libraries`: runtime, MAGMA, kernel launcher, cuDNN, cuBLAS, cuFFT), the real MAGMA library
    object, and the libraries that were in use before."""

    mode: str
    libraries: _native.Libraries
    real_magma: object
    previous: _native.Libraries

    @property
    def runtime(self) -> runtime.SimulatedCudart:
        return self.libraries.cudart

    @property
    def magma(self) -> magma.SimulatedMagma:
        return self.libraries.magma

    @property
    def cublas(self) -> cublas.SimulatedCublas:
        return self.libraries.cublas

    @property
    def cufft(self) -> cufft.SimulatedCufft:
        return self.libraries.cufft

    @property
    def kernels(self) -> kernels.Launcher:
        return self.libraries.launcher

    @property
    def cudnn(self) -> cudnn.SimulatedCudnn:
        return self.libraries.cudnn


_ACTIVE: Simulation | None = None


def _check_mode(value: str) -> str:
    if value not in MODES:
        raise ValueError(f"simulator mode must be one of {MODES}, got {value!r}")
    return value


def mode_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """The mode ``PYMAGMA_SIMULATOR`` asks for: None (unset, empty or 0), "partial" (1 or partial) or "full"."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "")
    try:
        return _ENV_VALUES[raw.strip().lower()]
    except KeyError:
        raise ValueError(f"{ENV_VAR}={raw!r} is not a simulator setting; use 1 or partial (the MAGMA routines the "
                         "provider exports), full (every modelled routine), null (a device that does nothing: host "
                         "cost only), or 0 / empty (off)") from None


def _exports(mode_: str, real_magma) -> tuple[frozenset[str] | None, str]:
    if mode_ != "partial":
        return None, "every modelled routine"
    exports, source = magma.provider_exports(real_magma)
    return exports, (source if exports is not None else f"every modelled routine ({source})")


def libraries(mode: str = "partial") -> _native.Libraries:
    """A fresh set of simulated native libraries in ``mode`` (not in use until :func:`pymagma._native.use`)."""
    _check_mode(mode)
    null = mode == "null"
    cudart = runtime.SimulatedCudart(null=null)
    exports, source = _exports(mode, _native.real().magma)
    simulated_magma = magma.SimulatedMagma(exports, source, streams=cudart)
    return _native.Libraries("simulator", cudart=cudart, magma=simulated_magma,
                             cudnn=cudnn.SimulatedCudnn(streams=cudart),
                             cublas=cublas.SimulatedCublas(simulated_magma, streams=cudart),
                             cufft=cufft.SimulatedCufft(streams=cudart),
                             launcher=kernels.Launcher(streams=cudart, seed=seed_from_environment(), null=null))


SEED_VAR = "PYMAGMA_SIMULATOR_SEED"


def seed_from_environment() -> int:
    """The seed of the simulated kernels' block orders: ``PYMAGMA_SIMULATOR_SEED`` (an integer), default 0."""
    raw = os.environ.get(SEED_VAR, "").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_VAR}={raw!r} is not an integer seed") from None


def enable(mode: str = "partial") -> Simulation:
    """Turn the simulator on in ``mode`` ("partial", "full" or "null").  When it is already on, only the MAGMA export
    policy changes (memory and compiled kernels are kept), except into or out of "null", which starts a fresh
    simulated device (arrays made before must not be used)."""
    global _ACTIVE
    _check_mode(mode)
    if _ACTIVE is not None and (_ACTIVE.mode == "null") != (mode == "null"):
        disable()
    if _ACTIVE is not None:
        if _ACTIVE.mode != mode:
            _ACTIVE.magma.exports, _ACTIVE.magma.source = _exports(mode, _ACTIVE.real_magma)
            _ACTIVE.mode = mode
        return _ACTIVE
    simulated_libraries = libraries(mode)
    _ACTIVE = Simulation(mode, simulated_libraries, _native.real().magma, _native.use(simulated_libraries))
    return _ACTIVE


def disable() -> None:
    """Turn the simulator off: every replaced function is the original again and the simulated memory is freed
    (DeviceArrays made on the simulator must not be used afterwards).  Nothing happens when it is off."""
    global _ACTIVE
    if _ACTIVE is not None:
        _native.use(_ACTIVE.previous)
        _ACTIVE = None


def is_enabled() -> bool:
    return _ACTIVE is not None


def mode() -> str | None:
    """The active mode ("partial", "full" or "null"), or None when the simulator is off."""
    return None if _ACTIVE is None else _ACTIVE.mode


def current() -> Simulation | None:
    """The active :class:`Simulation` (None when off)."""
    return _ACTIVE


@contextlib.contextmanager
def simulated(mode: str = "partial"):
    """Run the block on the simulator in ``mode``; afterwards the previous state (off, or on in its mode) is back.
    Yields the :class:`Simulation`."""
    previous = _ACTIVE.mode if _ACTIVE is not None else None
    simulation = enable(mode)
    try:
        yield simulation
    finally:
        if previous is None:
            disable()
        else:
            enable(previous)


def _enable_from_environment() -> None:
    """Called once by ``import pymagma``: honour ``PYMAGMA_SIMULATOR``."""
    chosen = mode_from_environment()
    if chosen is not None:
        enable(chosen)
