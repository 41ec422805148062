"""What a user may change on a layer, optimizer, loss or metric between steps, and one counter that says it changed.

A captured step (``compile(graph=True)``, :mod:`magmadnn.models.replay`) holds the configuration it was captured
with as constants of its graph: a Dropout rate, a BatchNorm momentum, an optimizer's betas or ``clipnorm``, a loss's
``label_smoothing``, ``trainable``. Classes deriving from :class:`Configurable` make every change of such a value
visible at the cost of one integer compare per replayed step:

* setting a public attribute (a name without a leading underscore, outside the class's ``_volatile`` names) adds
  one to the global :data:`generation`;
* :meth:`Configurable._capture_key` is a hashable snapshot of the object's configuration: every attribute of a
  plain value (numbers, strings, None, bools, dtypes, NumPy scalars, small arrays, tuples/lists/dicts of those, a
  function by identity, a nested Configurable by its own key) except the ``_volatile`` ones. Other objects (arrays
  of weights, random streams, backends) are left out: what a step does with them is followed elsewhere.

A replayed step compares :data:`generation` with the one it saw last; only when it moved does it compute the keys
again, and it is captured anew when a key differs. A subclass whose step reads something the default key misses
(a value kept in a private mutable container, say) overrides ``_capture_key`` and extends ``super()``'s. Names
that change as the object runs (an optimizer's step count, a metric's sample count) go in ``_volatile``.
"""

from __future__ import annotations

import types

import numpy as np

__all__ = ["Configurable", "generation", "capture_key"]

generation = 0  #: how many times a public configuration attribute was set (read by graph replay)

_PLAIN = (bool, int, float, complex, str, bytes, type(None), np.generic, np.dtype)
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
_SMALL = 4096  # array elements kept by value in a key (larger arrays by identity)
_SKIP = object()


def _frozen(value):
    """A hashable stand-in for ``value`` in a key, or ``_SKIP`` for what a key leaves out."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, Configurable):
        return value._capture_key()
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *sorted(((repr(k), _frozen(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, np.ndarray):
        if value.size <= _SMALL:
            return ("array", value.dtype.str, value.shape, value.tobytes())
        return ("array", id(value))
    if isinstance(value, _FUNCTIONS) or isinstance(value, types.ModuleType):
        return ("object", id(value))
    return _SKIP


def capture_key(obj) -> tuple:
    """``obj._capture_key()`` when it has one, else its class (for objects outside this scheme)."""
    key = getattr(obj, "_capture_key", None)
    return key() if key is not None else (type(obj).__qualname__, id(obj))


class Configurable:
    """Mixin: public attribute writes move :data:`generation`; :meth:`_capture_key` snapshots the configuration."""

    #: attribute names that change as the object runs: neither counted nor part of the key
    _volatile: frozenset = frozenset()
    #: {method: base}: a subclass defining ``method`` gets ``base`` as its first base (Keras' custom metrics and
    #: losses: ``metric_state`` and ``custom_loss`` set it on ``metrics.Metric`` and ``losses.Loss``)
    _subclass_bases: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for method, base in cls._subclass_bases.items():
            if method in cls.__dict__ and "__call__" not in cls.__dict__ and not issubclass(cls, base):
                cls.__bases__ = (base, *cls.__bases__)

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name[0] != "_" and name not in self._volatile:
            global generation
            generation += 1

    def _capture_key(self) -> tuple:
        """A hashable snapshot of everything a captured step may have read from this object (see the module)."""
        volatile = self._volatile
        items = []
        for name, value in vars(self).items():
            if name in volatile:
                continue
            frozen = _frozen(value)
            if frozen is not _SKIP:
                items.append((name, frozen))
        items.sort(key=lambda kv: kv[0])
        return (type(self).__qualname__, *items)
