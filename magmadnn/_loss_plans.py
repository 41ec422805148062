"""A training batch's softmax cross entropy planned (``Model``'s loss of a batch, ``of_batch``): what the loss's
``prepare`` and ``checked`` decide for class indices (N,) against logits (N, C), without label smoothing or
``ignore_index`` (no sample weights, the labels' conversion to int64, every check of the logits and labels, the fused
op), kept per (class, reduction, smoothing, ignore_index, the logits' and targets' signature), so that a repeated
batch converts its labels, uploads them and runs the op. Any other batch runs ``checked(prepare(...))`` in full;
errors are never planned, so bad targets are refused with the same message every time."""

from __future__ import annotations

import numpy as np

from . import autograd as _autograd
from ._checks import Plans
from .autograd import Tensor
from .functional.losses import planned_softmax_cross_entropy

__all__ = ["PlannedCrossEntropy"]

#: What a plan stands for: a subclass of the planned class that overrides one of them is never planned.
_PLANNED_METHODS = ("prepare", "checked", "_plain", "_packed", "of_batch")


class PlannedCrossEntropy:
    """Mixin of a softmax cross entropy on logits with ``reduction``, ``label_smoothing``, ``ignore_index``,
    ``_plain()``, ``prepare`` and ``checked``; the class that names it among its bases is the planned one."""

    _volatile = frozenset({"_plans"})  # (what the loss keeps as it runs: no configuration)
    _plans: Plans | None = None  # made on the first planned batch
    _planned: type

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if PlannedCrossEntropy in cls.__bases__:
            cls._planned = cls

    def of_batch(self, outputs, targets, host, dtype):
        """``checked(outputs, prepare(targets, host, dtype))`` of host ``targets`` that ``validate`` accepted."""
        key = None
        if targets.__class__ is np.ndarray and outputs.__class__ is Tensor:  # (no weights ride on the targets)
            data = outputs.data
            key = (self.__class__, self.reduction, self.label_smoothing, self.ignore_index, data.__class__,
                   data.shape, data.dtype, targets.shape, targets.dtype)
            if (plans := self._plans) is not None and (run := plans.get(key)) is not None:
                xp = outputs.xp
                labels = xp.asarray(targets.astype(np.int64, copy=False))
                if getattr(run, "__func__", None) is not _APPLY:
                    return run(outputs, labels=labels)
                fn = run.__self__()  # Function.apply(outputs, labels=labels) of the plan's Function, inline
                fn.xp = xp
                data = fn.forward(data, labels=labels)
                last = _autograd._LAST_OWN
                if last[1] is not data.__class__ or last[0] is not xp:
                    data = _own_array(xp, data)
                loss = _new(Tensor)
                loss.xp, loss.data, loss.grad = xp, data, None
                if outputs.requires_grad and _state.enabled:
                    fn.inputs, fn.needs_input_grad = (outputs,), (outputs.requires_grad,)
                    loss.requires_grad, loss._fn = True, fn
                else:
                    loss.requires_grad, loss._fn = False, None
                return loss
        loss = self.checked(outputs, self.prepare(targets, host, dtype))
        if key is not None and targets.ndim == 1 and targets.dtype.kind in "ium" and len(data.shape) == 2 and \
                self._plain() and all(getattr(type(self), m) is getattr(self._planned, m) for m in _PLANNED_METHODS):
            if self._plans is None:
                self._plans = Plans(64)
            self._plans.keep(key, planned_softmax_cross_entropy(self.reduction))
        return loss


_APPLY = _autograd.Function.apply.__func__  # (a plan that is a Function class's own apply: run inline)
_own_array, _state, _new = _autograd._own_array, _autograd._state, object.__new__
