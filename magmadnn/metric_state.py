"""Keras 3's custom metrics: a ``metrics.Metric`` subclass with ``update_state(y_true, y_pred, sample_weight=None)``,
``result()`` and state made with ``add_variable`` / ``add_weight``, usable in ``compile(metrics=[...])``.

In ``fit`` / ``evaluate`` each batch runs ``update_state`` from zeroed state variables, and the tally sums the
variables' values over the batches on the backend (nothing is read per batch); at a progress read the variables are
set to those sums and ``result()`` gives the figure. This is Keras' result for state that accumulates
(``assign_add``: counts, totals, confusion counts), which is what Keras' own metrics keep; state that is not a sum
over batches (a running maximum) is not supported in ``fit``. Outside ``fit`` the variables accumulate as in Keras.
"""

from __future__ import annotations

import re

import numpy as np

from . import initializers, metrics
from .autograd import Tensor, no_grad
from .backend import host

__all__ = ["MetricVariable", "KerasStyle"]


class MetricVariable:
    """A metric's state variable (Keras' ``Variable`` as metrics use it): ``assign``, ``assign_add``,
    ``assign_sub``, ``value`` (a Tensor), ``numpy()``, and Tensor arithmetic (``self.tp / (self.tp + self.fp)``)."""

    def __init__(self, shape, initializer, dtype, name: str):
        self.shape, self.name = tuple(int(s) for s in shape), name
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.initializer = initializers.get(initializer)
        self.xp = host
        self.data = self._initial(host, self.dtype or np.float32)

    def _initial(self, xp, dtype):
        return self.initializer(self.shape, dtype, xp, xp.rng(0))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def place(self, xp, dtype) -> None:
        """Keep the data on backend ``xp`` (as ``dtype`` unless the variable has its own)."""
        if xp is not self.xp:
            self.data, self.xp = xp.asarray(np.asarray(self.xp.to_numpy(self.data)), self.dtype or dtype), xp

    def _array(self, value):
        data = value.data if isinstance(value, Tensor) else value
        if isinstance(value, MetricVariable):
            data = value.data
        if isinstance(data, (int, float, np.number)) and not isinstance(data, bool) and self.data.dtype.kind == "f":
            return self.xp.full(self.shape, float(data), self.data.dtype)  # filled on the device: no upload
        if isinstance(data, np.ndarray) or np.isscalar(data) or isinstance(data, (list, tuple)):
            data = self.xp.asarray(np.asarray(data, dtype=self.data.dtype))
        if tuple(data.shape) != self.shape:
            if int(np.prod(data.shape, dtype=np.int64)) != self.size:
                raise ValueError(f"metric variable {self.name!r}: a value of shape {tuple(data.shape)} cannot be "
                                 f"assigned to shape {self.shape}")
            data = self.xp.reshape(data, self.shape)
        return data

    def assign(self, value) -> None:
        self.data = self._array(value)

    def assign_add(self, value) -> None:
        self.data = self.xp.add(self.data, self._array(value))

    def assign_sub(self, value) -> None:
        self.data = self.xp.subtract(self.data, self._array(value))

    @property
    def value(self) -> Tensor:
        return Tensor(self.data, backend=self.xp)

    def numpy(self) -> np.ndarray:
        return np.asarray(self.xp.to_numpy(self.data))

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def __float__(self) -> float:
        return float(self.numpy())

    def __repr__(self) -> str:
        return f"MetricVariable({self.name!r}, shape={self.shape})"


def _delegate(op: str):
    def method(self, *args):
        return getattr(self.value, op)(*(a.value if isinstance(a, MetricVariable) else a for a in args))
    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__neg__", "__pow__"):
    setattr(MetricVariable, _op, _delegate(_op))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class KerasStyle:
    """The first base of a ``metrics.Metric`` subclass that defines ``update_state`` (module docstring)."""

    def __init__(self, name=None, dtype=None):
        self.name = _snake(type(self).__name__) if name is None else metrics._name(name, type(self).__name__)
        self._variables: list[MetricVariable] = []
        self._dtype = dtype
        self._hits, self._xp = None, None

    def add_variable(self, shape=(), initializer="zeros", dtype=None, aggregation="sum", name=None):
        """A state variable (Keras' ``Metric.add_variable``); ``aggregation`` must be Keras' "sum" here."""
        if aggregation not in ("sum", None):
            raise ValueError(f"{type(self).__name__}.add_variable: aggregation {aggregation!r} is not supported; "
                             "state variables are sums over batches here (aggregation='sum')")
        shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
        variable = MetricVariable(shape, initializer, dtype or self._dtype, name or f"variable_{len(self._variables)}")
        self._variables.append(variable)
        self.size = sum(v.size for v in self._variables)
        return variable

    def add_weight(self, name=None, shape=(), initializer="zeros", dtype=None, aggregation="sum"):
        """Keras' older name of :meth:`add_variable`."""
        return self.add_variable(shape, initializer, dtype, aggregation, name)

    @property
    def variables(self) -> list:
        return list(self._variables)

    def reset_state(self) -> None:
        """Every variable to zeros (Keras' ``Metric.reset_state``)."""
        for v in self._variables:
            v.data = v.xp.zeros(v.shape, v.data.dtype)

    # -- the fit/evaluate tally (metrics.Metric's protocol); its own attributes (a "count" variable) are left alone
    def reset(self) -> None:
        self._hits, self._xp = None, None
        self.reset_state()

    def _check(self, outputs) -> None:
        pass

    def stage(self, labels, shape, dtype) -> np.ndarray:
        return np.asarray(labels).astype(dtype, copy=False)

    def hits_of(self, outputs, staged, xp):
        if not self._variables:
            raise TypeError(f"metric {self.name!r} ({type(self).__name__}) has no state variables: make them with "
                            "self.add_variable(...) in __init__ and update them in update_state")
        for v in self._variables:
            v.place(xp, outputs.dtype)
            v.data = xp.zeros(v.shape, v.data.dtype)
        with no_grad():
            self.update_state(Tensor(staged, backend=xp), Tensor(outputs, backend=xp))
        parts = [xp.reshape(v.data if v.data.dtype == outputs.dtype else xp.asarray(
            np.asarray(xp.to_numpy(v.data)), outputs.dtype), (v.size,)) for v in self._variables]
        self._xp = xp
        values = parts[0] if len(parts) == 1 else xp.concatenate(parts, 0)
        return xp.reshape(values, ()) if self.size == 1 else values

    def result_of(self, total, count: int) -> float:
        total = np.atleast_1d(np.asarray(total, dtype=np.float64))
        xp, start = self._xp or host, 0
        for v in self._variables:
            v.place(xp, np.float32)
            v.data = xp.asarray(total[start:start + v.size].reshape(v.shape).astype(v.data.dtype), v.data.dtype)
            start += v.size
        with no_grad():
            value = self.result()
        if isinstance(value, (Tensor, MetricVariable)):
            value = value.numpy() if isinstance(value, MetricVariable) else np.asarray(value.xp.to_numpy(value.data))
        return float(np.asarray(value, dtype=np.float64))


metrics.Metric._subclass_bases = {"update_state": KerasStyle}
