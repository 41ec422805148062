"""Keras 3's custom losses: a ``losses.Loss`` subclass that defines ``call(y_true, y_pred)`` (and not
``__call__``) is made a :class:`KerasCustomLoss` (its first base), so it has Keras' ``__init__(name=None,
reduction="sum_over_batch_size", dtype=None)``, reductions and sample weights in ``compile``/``fit``/``evaluate``."""

from __future__ import annotations

import re

from . import losses
from .autograd import Tensor

__all__ = ["KerasCustomLoss"]


class KerasCustomLoss(losses.KerasLoss):
    """Keras 3's ``keras.losses.Loss`` subclassed: ``__init__(name=None, reduction="sum_over_batch_size",
    dtype=None)`` and ``call(y_true, y_pred)`` returning per-sample (or per-element) losses as a Tensor (computed with
    magmadnn.functional / Tensor operators); ``y_true`` is shaped like ``y_pred`` (Keras' rank rule, as for a loss
    function). Subclass ``magmadnn.losses.Loss`` and define ``call``: the class becomes one of these."""

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        if name is None:
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        super().__init__(reduction, name, dtype)

    def per_sample(self, t, y_pred):
        value = self.call(Tensor(t, backend=y_pred.xp), y_pred)
        if not isinstance(value, Tensor):
            raise TypeError(f"loss {self.name!r} ({type(self).__name__}.call) returned {type(value).__name__}; it "
                            "must return a Tensor computed from y_pred with magmadnn.functional / Tensor operators")
        return value

    def get_config(self) -> dict:
        return {"name": self.name, "reduction": self.reduction}


losses.Loss._subclass_bases = {"call": KerasCustomLoss}
