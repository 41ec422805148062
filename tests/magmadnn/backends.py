"""The backends the conformance suite runs on, and the strict backend.

The strict backend wraps every host op, but its arrays are not NumPy arrays: they expose ``shape``, ``dtype``,
``ndim`` and ``size`` only, and refuse Python operators, indexing, truth values, iteration and every NumPy call
(``np.asarray``, ufuncs, array functions), as array-api-strict does. Code that works on it touches backend data only
through the op set.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from magmadnn import backend
from magmadnn.backend import ops

HOST = backend.get("host")
MISUSE = "a backend array was used outside the backend op set"


class StrictArray:
    """A host array reachable only through the strict backend's ops."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # every ufunc on it raises TypeError

    def __init__(self, a: np.ndarray):
        self._a = a

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)

    def _refuse(self, *args, **kwargs):
        raise TypeError(f"{MISUSE} (Python operator, indexing, conversion or NumPy call)")

    __array__ = __array_function__ = __bool__ = __iter__ = __len__ = __float__ = __int__ = __index__ = _refuse
    __add__ = __radd__ = __iadd__ = __sub__ = __rsub__ = __isub__ = _refuse
    __mul__ = __rmul__ = __imul__ = __truediv__ = __rtruediv__ = __itruediv__ = _refuse
    __matmul__ = __rmatmul__ = __neg__ = __pow__ = __getitem__ = __setitem__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __repr__(self) -> str:
        return f"StrictArray(shape={self.shape}, dtype={self.dtype})"


def _plain(value):
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    return value


def _strict(value):
    if isinstance(value, np.ndarray):
        return StrictArray(value)
    if isinstance(value, np.generic):
        return StrictArray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_strict(v) for v in value)
    return value


def _wrapped(name, op):
    def call(*args, **kwargs):
        out = op(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})
        return out if name in ("to_numpy", "isfinite_all") else _strict(out)

    call.__name__ = call.__qualname__ = name
    call.__signature__ = ops.signature(name)
    return call


STRICT = types.ModuleType("strict_backend")
STRICT.name = "strict"
STRICT.FUSED_ACTIVATIONS = HOST.FUSED_ACTIVATIONS
for _name in ops.OPS:
    setattr(STRICT, _name, _wrapped(_name, getattr(HOST, _name)))


#: Backend ids of the conformance suite: the simulated device runs the real cuDNN descriptors (native), the GPU one
#: needs a device.
PARAMS = ["host", "strict", pytest.param("device", marks=pytest.mark.native),
          pytest.param("gpu", marks=pytest.mark.gpu)]


def open_backend(kind: str):
    """A generator for a module-scoped fixture: yields the backend ``kind`` and tears it down."""
    if kind == "host":
        yield HOST
    elif kind == "strict":
        yield STRICT
    elif kind == "device":
        from pymagma import simulator  # noqa: PLC0415

        with simulator.simulated():
            yield backend.get("gpu")
    else:
        yield backend.get("gpu")


def model_device(kind: str):
    """A generator for a fixture: the device name a model compiles for, "host", "gpu" on the simulator (``kind``
    "simulator", every MAGMA routine modelled) or "gpu" on a real device."""
    if kind == "simulator":
        from pymagma import simulator  # noqa: PLC0415

        with simulator.simulated("full"):
            yield "gpu"
    else:
        yield kind


#: Backend ids of a test run on the host, pymagma's simulator (every MAGMA routine modelled) and a real device
HOST_SIMULATOR_GPU = ["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)]


def backend_of(kind: str):
    """A generator for a fixture over :data:`HOST_SIMULATOR_GPU`: the backend ``kind`` names, the device one on the
    simulator for "simulator"."""
    if kind == "simulator":
        from pymagma import simulator  # noqa: PLC0415

        with simulator.simulated("full"):
            yield backend.get("gpu")
    else:
        yield backend.get(kind)
