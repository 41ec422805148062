"""PositionEmbedding: a learned vector per position added to a sequence (GPT's position embeddings)."""

from __future__ import annotations

from .. import functional as F
from .. import initializers
from . import plans as _plans
from .base import Layer, register

__all__ = ["PositionEmbedding"]


@register
class PositionEmbedding(Layer):
    """``x + embeddings`` for x (batch, time, features), weight ``embeddings`` (time, features) learned per position
    (the time is the input's, fixed when the layer is built)."""

    def __init__(self, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.initializer = initializers.get(initializer)

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (2,), "a per-sample input (time, features), i.e. batches (N, time, features)")

    def create_weights(self, input_shape):
        self.add_weight("embeddings", input_shape, self.initializer)

    def call(self, x, training=False):
        return F.add(x, self._params["embeddings"])

    def _plan_call(self, x, training):
        lead = F.trailing_lead(x.shape, self._params["embeddings"].shape)  # the table's gradient: a sum over lead
        if lead is False:
            return _plans.op_plan(self, training, F.AddFunction.apply, ("embeddings",))
        return _plans.op_plan(self, training, F.TrailingAddFunction.apply, ("embeddings",), {"lead": lead})

    def get_config(self):
        return {"initializer": self.initializer.to_config(), **super().get_config()}
