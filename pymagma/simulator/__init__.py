"""pymagma's CPU simulator of the device, opt-in (like Numba's ``NUMBA_ENABLE_CUDASIM=1``).

Device memory is host memory, the CUDA runtime calls are memmove/memset, MAGMA routines are NumPy models of their
documented semantics checked against pymagma's prototype tables, pymagma's kernels are their real ``.cu`` sources
compiled by the host C++ compiler, and (when :mod:`pymagma.simulator.cudnn` is present) the cuDNN calls pymagma
makes are NumPy models.  It proves plumbing and conventions; only a GPU proves speed, concurrency and NVRTC code.

Turn it on with ``PYMAGMA_SIMULATOR=1`` (or ``partial``; ``full``) before ``import pymagma``, or in code::

    import pymagma.simulator as sim
    with sim.simulated("full"):
        ...            # pymagma runs on the simulated device here

Modes: ``"partial"`` exports exactly the MAGMA routines the provider pymagma finds exports (so a partial MAGMA
such as PyTorch's exercises pymagma's fallbacks; with no provider it is ``"full"``); ``"full"`` exports every
modelled routine.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ._patch import Patches

ENV_VAR = "PYMAGMA_SIMULATOR"
MODES = ("partial", "full")
_ENV_VALUES = {"": None, "0": None, "1": "partial", "partial": "partial", "full": "full"}

__all__ = ["ENV_VAR", "MODES", "Simulation", "enable", "disable", "is_enabled", "mode", "simulated", "current",
           "install", "mode_from_environment"]


@dataclass
class Simulation:
    """What :func:`enable` installed: the mode, the simulated runtime, MAGMA, kernel launcher and cuDNN (None when
    :mod:`pymagma.simulator.cudnn` is absent), the real MAGMA library object, and the patches that undo it all."""

    mode: str
    runtime: object
    magma: object
    kernels: object
    cudnn: object
    real_magma: object
    patches: object


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
                         "provider exports), full (every modelled routine), or 0 / empty (off)") from None


def _magma_for(mode_: str, real_magma):
    from . import magma

    exports, source = magma.provider_exports(real_magma) if mode_ == "partial" else (None, "every modelled routine")
    return magma.SimulatedMagma(exports, source if exports is not None else f"every modelled routine ({source})")


def install(patches, mode: str = "partial") -> Simulation:
    """Install the simulator with ``patches`` (a :class:`Patches`, or anything with the same ``setattr``, such as
    pytest's ``monkeypatch``): undoing the patches uninstalls it.  Prefer :func:`enable` / :func:`simulated`."""
    from .. import _magma, queue
    from . import kernels, magma, runtime

    _check_mode(mode)
    real_magma = _magma.library()
    sim_runtime, sim_magma = runtime.SimulatedRuntime(), _magma_for(mode, real_magma)
    launcher = kernels.Launcher(streams=sim_runtime)  # launches are queued on their stream
    sim_runtime.install(patches)
    patches.setattr(magma, "STREAMS", sim_runtime)
    patches.setattr(_magma, "library", lambda: sim_magma)
    patches.setattr(_magma, "initialized", lambda: sim_magma)
    patches.setattr(queue, "_destroy", magma.destroy_queue)  # captured by the finalizers of simulated queues
    kernels.install(patches, launcher)
    try:
        cudnn = importlib.import_module(f"{__name__}.cudnn")
    except ModuleNotFoundError as exc:  # not written yet: the simulator runs without cuDNN models
        if exc.name != f"{__name__}.cudnn":
            raise
        cudnn = None
    sim_cudnn = cudnn.install(patches, sim_runtime) if hasattr(cudnn, "install") else None
    simulation = Simulation(mode, sim_runtime, sim_magma, launcher, sim_cudnn, real_magma, patches)
    patches.setattr(sys.modules[__name__], "_ACTIVE", simulation)
    return simulation


def enable(mode: str = "partial") -> Simulation:
    """Turn the simulator on in ``mode`` ("partial" or "full").  When it is already on, only the MAGMA export
    policy changes (memory and compiled kernels are kept)."""
    _check_mode(mode)
    if _ACTIVE is not None:
        if _ACTIVE.mode != mode:
            magma = _magma_for(mode, _ACTIVE.real_magma)
            _ACTIVE.magma.exports, _ACTIVE.magma.source, _ACTIVE.mode = magma.exports, magma.source, mode
        return _ACTIVE
    patches = Patches()
    try:
        return install(patches, mode)
    except BaseException:
        patches.undo()
        raise


def disable() -> None:
    """Turn the simulator off: every replaced function is the original again and the simulated memory is freed
    (DeviceArrays made on the simulator must not be used afterwards).  Nothing happens when it is off."""
    if _ACTIVE is not None:
        _ACTIVE.patches.undo()


def is_enabled() -> bool:
    return _ACTIVE is not None


def mode() -> str | None:
    """The active mode ("partial" or "full"), or None when the simulator is off."""
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
