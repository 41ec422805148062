"""Weight and activity penalties as Keras 3 names them: ``L1``, ``L2``, ``L1L2`` (``l1``, ``l2``, ``l1_l2``).

A regularizer is called on a Tensor (a weight, or a layer's output) and returns a scalar Tensor, computed with the
differentiable functions of :mod:`magmadnn.functional` on the backend (nothing is read back, so a step using them can
be replayed as a graph). Layers take them as ``kernel_regularizer=`` / ``bias_regularizer=`` /
``activity_regularizer=`` (``embeddings_regularizer=``, ``recurrent_regularizer=`` where Keras has them); the
penalties are the layer's ``losses`` and are added to the training loss, as Keras' ``compute_loss`` does: a weight's
penalty as is (a frozen layer's weights add none), an activity penalty divided by the batch size.

Names as Keras 3.15 takes them: ``"l1"`` (``L1(0.01)``), ``"l2"`` (``L2(0.01)``), ``"l1l2"`` (``L1L2()``, whose
factors are 0), the class names; ``"l1_l2"``, which Keras' docstring shows but Keras 3.15 refuses, is refused
naming ``L1L2(l1=0.01, l2=0.01)``. Also a ``{"class_name", "config"}`` dict, an instance, or any callable taking a
Tensor and returning a scalar Tensor (not saved with the model).
"""

from __future__ import annotations

import math
import numbers

from . import functional as F
from ._configurable import Configurable
from ._keras_objects import Family

__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize"]


def _factor(value, name: str, who: str) -> float:
    """A non-negative finite factor (Keras' ``validate_float_arg``); None means 0."""
    value = 0.0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{who}: {name} must be a non-negative finite number, got {value!r}")
    return float(value)


class Regularizer(Configurable):
    """Base class: ``__call__(x)`` returns a scalar Tensor; ``get_config`` the constructor arguments (a subclass
    defined outside magmadnn is found again by its class name when a model is loaded)."""

    def __call__(self, x):
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(x) returning a scalar Tensor")

    def get_config(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_config()")

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.get_config() == self.get_config()

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _l1(x, factor: float):
    return F.scale(F.sum(F.abs(x)), factor, 0.0)


def _l2(x, factor: float):
    return F.scale(F.sum(x * x), factor, 0.0)


class L1L2(Regularizer):
    """``l1 * sum(|x|) + l2 * sum(x**2)`` (a term whose factor is 0 is left out, as in Keras)."""

    def __init__(self, l1: float = 0.0, l2: float = 0.0):
        self.l1, self.l2 = _factor(l1, "l1", "L1L2"), _factor(l2, "l2", "L1L2")

    def __call__(self, x):
        terms = ([_l1(x, self.l1)] if self.l1 else []) + ([_l2(x, self.l2)] if self.l2 else [])
        if not terms:
            return F.scale(F.sum(x), 0.0, 0.0)  # a zero of the weight's dtype, on its backend
        return terms[0] if len(terms) == 1 else terms[0] + terms[1]

    def get_config(self) -> dict:
        return {"l1": self.l1, "l2": self.l2}


class L1(Regularizer):
    """``l1 * sum(|x|)``."""

    def __init__(self, l1: float = 0.01):
        self.l1 = _factor(0.01 if l1 is None else l1, "l1", "L1")

    def __call__(self, x):
        return _l1(x, self.l1)

    def get_config(self) -> dict:
        return {"l1": self.l1}


class L2(Regularizer):
    """``l2 * sum(x**2)`` (no factor 1/2, as Keras)."""

    def __init__(self, l2: float = 0.01):
        self.l2 = _factor(0.01 if l2 is None else l2, "l2", "L2")

    def __call__(self, x):
        return _l2(x, self.l2)

    def get_config(self) -> dict:
        return {"l2": self.l2}


l1, l2, l1_l2 = L1, L2, L1L2  # Keras' lower-case aliases are the classes themselves


_BY_NAME = {"l1": L1, "l2": L2, "l1l2": L1L2, "L1": L1, "L2": L2, "L1L2": L1L2}
_REFUSED = {"l1_l2": "Keras 3.15 does not take the name 'l1_l2' either: write regularizers.L1L2(l1=0.01, l2=0.01)",
            "orthogonal_regularizer": "OrthogonalRegularizer is not available: write it as a Regularizer subclass",
            "OrthogonalRegularizer": "OrthogonalRegularizer is not available: write it as a Regularizer subclass"}


_FAMILY = Family("regularizer", Regularizer, _BY_NAME, "a Tensor", refused=_REFUSED,
                 hint=", an instance (regularizers.L2(1e-4)) or a callable")
get, serialize, deserialize = _FAMILY.get, _FAMILY.serialize, _FAMILY.deserialize
