"""Backends: one op set, one module per backend.

``get("host")`` is the NumPy implementation (:mod:`magmadnn.backend.host`); ``get("device")`` will be the GPU
implementation built on pymagma. The default comes from the ``MAGMADNN_BACKEND`` environment variable, else "host".
"""

from __future__ import annotations

import os
from types import ModuleType

from . import host

__all__ = ["get", "host", "available", "default_name"]

_KNOWN = ("host", "device")


def default_name() -> str:
    """The backend name used when none is given: ``$MAGMADNN_BACKEND`` or "host"."""
    return os.environ.get("MAGMADNN_BACKEND", "host").strip().lower() or "host"


def available() -> list[str]:
    """Names of the backends that can be used in this process."""
    names = ["host"]
    try:
        get("device")
    except (NotImplementedError, RuntimeError, ImportError):
        pass
    else:
        names.append("device")
    return names


def get(name: str | ModuleType | None = None) -> ModuleType:
    """Return the backend module called ``name`` ("host" or "device"); a backend module passes through."""
    if isinstance(name, ModuleType):
        if not hasattr(name, "name"):
            raise TypeError(f"backend.get: module {name.__name__!r} is not a magmadnn backend (no 'name' attribute)")
        return name
    if name is None:
        name = default_name()
    if not isinstance(name, str):
        raise TypeError(f"backend.get: expected a backend name ('host' or 'device'), got {type(name).__name__}")
    key = name.strip().lower()
    if key in ("host", "cpu", "numpy"):
        return host
    if key in ("device", "gpu", "cuda"):
        try:
            from . import device  # noqa: PLC0415  (the GPU backend is a later piece of work)
        except ImportError as exc:
            raise NotImplementedError(
                "backend.get: the 'device' (GPU) backend is not available yet; use 'host'"
            ) from exc
        return device
    raise ValueError(f"backend.get: unknown backend {name!r}; expected one of {_KNOWN}")
