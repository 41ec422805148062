"""Backends: one op set, one module per backend, and the device names users pass (``device=`` / ``--device``).

Names: ``"host"`` (alias ``"cpu"``, ``"numpy"``) is the NumPy implementation (:mod:`magmadnn.backend.host`);
``"gpu"`` (alias ``"device"``, ``"cuda"``) is the pymagma backend (:mod:`magmadnn.backend.device`) on the current
GPU (GPU 0 unless changed); ``"gpu:N"`` is the same backend bound to GPU N (``device.for_index(N)``); ``"auto"`` is
the GPU when pymagma finds one or its CPU simulator is on (``PYMAGMA_SIMULATOR=1``), else the host.
The default comes from the ``MAGMADNN_BACKEND`` environment variable, else "host".

pymagma is imported only when a GPU name is resolved, never when magmadnn is imported.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from . import host

__all__ = ["get", "host", "available", "default_name", "resolve_device", "device_label", "probe", "GpuProbe",
           "DeviceUnavailableError", "NAMES"]

NAMES = ("host", "cpu", "gpu", "gpu:N", "auto")
_HOST_NAMES = ("host", "cpu", "numpy")
_GPU_NAMES = ("gpu", "device", "cuda")
_INDEXED = re.compile(r"^(?:gpu|cuda|device):(\d+)$")
_SIMULATOR_HINT = ("use device='host' (--device host), or run the GPU code path on the CPU with pymagma's "
                   "simulator: PYMAGMA_SIMULATOR=1")


class DeviceUnavailableError(RuntimeError):
    """A GPU name was asked for but no GPU backend can run here; the message says what was checked."""


class _BackendMissing(DeviceUnavailableError, NotImplementedError):
    """The GPU backend module itself is not part of this build."""


class GpuProbe(NamedTuple):
    """What :func:`probe` found: whether a GPU backend can run, on how many devices, and why not."""

    usable: bool
    simulator: bool
    count: int
    reason: str | None


def default_name() -> str:
    """The backend name used when none is given: ``$MAGMADNN_BACKEND`` or "host"."""
    return os.environ.get("MAGMADNN_BACKEND", "host").strip().lower() or "host"


def _simulator_enabled() -> bool:
    try:
        from pymagma import simulator  # noqa: PLC0415  (lazy: pymagma only when a GPU is asked for)
    except ImportError:
        return False
    is_enabled = getattr(simulator, "is_enabled", None)
    return bool(is_enabled()) if callable(is_enabled) else False


def probe() -> GpuProbe:
    """Check for a GPU without creating a backend: pymagma's simulator switch, then the CUDA device count."""
    try:
        import pymagma  # noqa: PLC0415, F401
    except ImportError as exc:
        return GpuProbe(False, False, 0, f"pymagma cannot be imported ({exc})")
    if _simulator_enabled():
        return GpuProbe(True, True, 1, None)
    from pymagma import runtime  # noqa: PLC0415

    count = runtime.device_count()
    if count:
        return GpuProbe(True, False, count, None)
    reason = runtime.no_device_reason() or "no CUDA device"
    return GpuProbe(False, False, 0, f"pymagma found no CUDA device ({reason}) and the pymagma simulator is off "
                                     "(PYMAGMA_SIMULATOR is not 1)")


def _load_device(index: int | None):
    """The GPU backend: the ``device`` module for ``index=None`` (current GPU), ``device.for_index(index)`` else.

    This is the one place a GPU name becomes a backend (tests replace it with a stand-in)."""
    try:
        from . import device  # noqa: PLC0415  (imports pymagma)
    except ImportError as exc:
        raise _BackendMissing(f"backend.get: the 'device' (GPU) backend is not available yet: magmadnn.backend.device "
                              f"cannot be imported ({exc}); use 'host'") from exc
    found = probe()
    if not found.usable:
        raise DeviceUnavailableError(f"backend.get: no GPU to run on: {found.reason}; {_SIMULATOR_HINT}")
    if index is None:
        return device
    if index >= found.count:
        raise DeviceUnavailableError(f"backend.get: 'gpu:{index}' does not exist: pymagma sees {found.count} "
                                     f"device(s), gpu:0 .. gpu:{found.count - 1}")
    return device.for_index(index)


def resolve_device(name: str | None = "auto") -> str:
    """The canonical device name for ``name``: "host", "gpu" or "gpu:N"; "auto" becomes "gpu" when :func:`probe`
    finds a GPU (or the simulator), else "host". Unknown names raise ValueError listing the valid ones."""
    if name is None:
        name = default_name()
    if not isinstance(name, str):
        raise TypeError(f"backend: expected a device name {NAMES}, got {type(name).__name__}")
    key = name.strip().lower()
    if key == "auto":
        return "gpu" if probe().usable else "host"
    if key in _HOST_NAMES:
        return "host"
    if key in _GPU_NAMES:
        return "gpu"
    match = _INDEXED.match(key)
    if match:
        return f"gpu:{int(match.group(1))}"
    raise ValueError(f"backend.get: unknown backend {name!r}; expected one of {', '.join(NAMES)} "
                     "(N a GPU number, e.g. 'gpu:1')")


def _is_backend(obj) -> bool:
    return all(hasattr(obj, attr) for attr in ("name", "asarray", "to_numpy"))


_SEEN: dict[int, object] = {id(host): host}  # backends that passed _is_backend (held, so that no id is reused)


def get(name=None):
    """The backend for a device name (see the module docstring); a backend (module or object) passes through."""
    if name is not None and not isinstance(name, str):
        if _SEEN.get(id(name)) is name:
            return name
        if _is_backend(name):
            _SEEN[id(name)] = name
            return name
        what = getattr(name, "__name__", type(name).__name__)
        raise TypeError(f"backend.get: expected a backend name {NAMES} or a backend, got {what!r} (not a magmadnn "
                        "backend: no 'name'/'asarray'/'to_numpy')")
    canonical = resolve_device(name)
    if canonical == "host":
        return host
    return _load_device(None if canonical == "gpu" else int(canonical.split(":")[1]))


def device_label(xp) -> str:
    """How a backend is named to users: "host" or "gpu:N"."""
    label = getattr(xp, "name", "?")
    if label == "device":  # the module: ops on the current GPU
        index = getattr(xp, "device_index", None)
        if index is None:
            try:
                from pymagma import runtime  # noqa: PLC0415

                index = runtime.get_device()
            except Exception:  # noqa: BLE001  (a label must never fail)
                index = 0
        return f"gpu:{index}"
    return label


def describe(xp) -> str:
    """``device_label`` plus what runs it: "host (NumPy)", "gpu:0 (pymagma simulator)", "gpu:0"."""
    label = device_label(xp)
    if xp is host:
        return f"{label} (NumPy)"
    return f"{label} (pymagma simulator)" if _simulator_enabled() else label


def available() -> list[str]:
    """Device names usable in this process: "host", plus "gpu", "gpu:0" .. when a GPU backend can run."""
    names = ["host"]
    try:
        get("gpu")
    except (RuntimeError, ImportError):  # DeviceUnavailableError, pymagma.NoDeviceError
        return names
    return [*names, "gpu", *(f"gpu:{i}" for i in range(max(probe().count, 1)))]
