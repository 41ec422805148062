"""Weight constraints as Keras 3 names them: ``MaxNorm``, ``NonNeg``, ``UnitNorm``, ``MinMaxNorm`` (``max_norm``,
``non_neg``, ``unit_norm``, ``min_max_norm``).

Layers take them as ``kernel_constraint=`` / ``bias_constraint=`` (``embeddings_constraint=``,
``recurrent_constraint=`` where Keras has them); the optimizer applies a weight's constraint right after each update
of that weight, as Keras does, with backend ops (nothing is read back: a replayed step applies it too).

``axis`` counts the axes of the weight as magmadnn lays it out: a Dense kernel is ``(in, units)`` as in Keras (the
default ``axis=0`` constrains each unit's incoming weights), but a Conv2D kernel is ``(filters, channels, rows,
cols)`` where Keras' is ``(rows, cols, channels, filters)``: Keras' ``MaxNorm(axis=[0, 1, 2])`` for each filter is
``MaxNorm(axis=[1, 2, 3])`` here.
"""

from __future__ import annotations

import numbers

from . import backend as _backend
from ._configurable import Configurable
from ._keras_objects import Family
from .autograd import Tensor, no_grad

__all__ = ["Constraint", "MaxNorm", "NonNeg", "UnitNorm", "MinMaxNorm", "max_norm", "non_neg", "unit_norm",
           "min_max_norm", "get", "serialize", "deserialize", "apply"]

EPSILON = 1e-7  # Keras' backend.epsilon()


def _number(value, name: str, who: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= minimum:
        raise ValueError(f"{who}: {name} must be a real number >= {minimum}, got {value!r}")
    return value


def _axis(axis, who: str):
    if isinstance(axis, (list, tuple)):
        if not axis or not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axis):
            raise TypeError(f"{who}: axis must be an integer or a non-empty list of integers, got {axis!r}")
        return [int(a) for a in axis]
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{who}: axis must be an integer or a list of integers, got {axis!r}")
    return int(axis)


class Constraint(Configurable):
    """Base class: ``__call__(w)`` returns the constrained weight (a Tensor for a Tensor, a backend array for a
    backend array); subclasses implement ``constrain(xp, w)`` on backend arrays."""

    def constrain(self, xp, w):
        return w

    def __call__(self, w):
        if isinstance(w, Tensor):
            return Tensor._of(self.constrain(w.xp, w.data), w.xp)
        return self.constrain(_backend.get(), w)

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"

    def _axis_for(self, w):
        """The axis checked against the weight's rank (an IndexError-like ValueError naming both)."""
        rank = len(w.shape)
        for a in self.axis if isinstance(self.axis, list) else [self.axis]:
            if not -rank <= a < rank:
                raise ValueError(f"{type(self).__name__}(axis={self.axis!r}): axis {a} is out of range for a weight "
                                 f"of shape {tuple(w.shape)} (see magmadnn.constraints for the layouts)")
        return tuple(self.axis) if isinstance(self.axis, list) else self.axis


def _norms(xp, w, axis):
    return xp.sqrt(xp.sum(xp.multiply(w, w), axis=axis, keepdims=True))


class MaxNorm(Constraint):
    """Rescale each slice along ``axis`` whose L2 norm exceeds ``max_value`` down to it."""

    def __init__(self, max_value=2, axis=0):
        self.max_value = _number(max_value, "max_value", "MaxNorm")
        self.axis = _axis(axis, "MaxNorm")

    def constrain(self, xp, w):
        norms = _norms(xp, w, self._axis_for(w))
        desired = xp.clip(norms, 0.0, float(self.max_value))
        return xp.multiply(w, xp.divide(desired, xp.add(norms, EPSILON)))

    def get_config(self) -> dict:
        return {"max_value": self.max_value, "axis": self.axis}


class NonNeg(Constraint):
    """Negative weights become 0."""

    def constrain(self, xp, w):
        return xp.activation_forward(w, "relu")


class UnitNorm(Constraint):
    """Each slice along ``axis`` divided by its L2 norm (plus Keras' epsilon)."""

    def __init__(self, axis=0):
        self.axis = _axis(axis, "UnitNorm")

    def constrain(self, xp, w):
        return xp.divide(w, xp.add(_norms(xp, w, self._axis_for(w)), EPSILON))

    def get_config(self) -> dict:
        return {"axis": self.axis}


class MinMaxNorm(Constraint):
    """Each slice's norm moved to ``rate * clip(norm, min_value, max_value) + (1 - rate) * norm``."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value = _number(min_value, "min_value", "MinMaxNorm")
        self.max_value = _number(max_value, "max_value", "MinMaxNorm")
        if self.max_value < self.min_value:
            raise ValueError(f"MinMaxNorm: max_value ({max_value}) must be >= min_value ({min_value})")
        self.rate = _number(rate, "rate", "MinMaxNorm")
        self.axis = _axis(axis, "MinMaxNorm")

    def constrain(self, xp, w):
        norms = _norms(xp, w, self._axis_for(w))
        desired = xp.multiply(xp.clip(norms, float(self.min_value), float(self.max_value)), float(self.rate))
        if self.rate != 1:
            desired = xp.add(desired, xp.multiply(norms, float(1 - self.rate)))
        return xp.multiply(w, xp.divide(desired, xp.add(norms, EPSILON)))

    def get_config(self) -> dict:
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate, "axis": self.axis}


max_norm, non_neg, unit_norm, min_max_norm = MaxNorm, NonNeg, UnitNorm, MinMaxNorm
_CLASSES = [Constraint, MaxNorm, NonNeg, UnitNorm, MinMaxNorm]
_BY_NAME = {**{cls.__name__: cls for cls in _CLASSES}, "constraint": Constraint, "max_norm": MaxNorm,
            "non_neg": NonNeg, "unit_norm": UnitNorm, "min_max_norm": MinMaxNorm}


_FAMILY = Family("constraint", Constraint, _BY_NAME, "a weight")
get, serialize, deserialize = _FAMILY.get, _FAMILY.serialize, _FAMILY.deserialize


def apply(params, grads) -> None:
    """After an optimizer step: each parameter of ``params`` that has a gradient in ``grads`` (None: not updated)
    and a ``constraint`` gets its constrained value (backend ops; a plain callable sees the Parameter, as Keras)."""
    for param, grad in zip(params, grads):
        constraint = getattr(param, "constraint", None)  # a plain Tensor given to an optimizer has none
        if constraint is None or grad is None:
            continue
        if isinstance(constraint, Constraint):
            param.data = constraint.constrain(param.xp, param.data)
            continue
        with no_grad():
            out = constraint(param)
        out = out.data if isinstance(out, Tensor) else out
        if tuple(out.shape) != tuple(param.shape) or out.dtype != param.dtype:
            raise ValueError(f"the constraint of {param.name!r} returned shape {tuple(out.shape)} {out.dtype}, "
                             f"expected the weight's {tuple(param.shape)} {param.dtype}")
        param.data = out
