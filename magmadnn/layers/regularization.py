"""Regularization layers: Dropout."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from .base import Layer, register
from .registry import derive_seed

__all__ = ["Dropout"]


@register
class Dropout(Layer):
    """Inverted dropout while training (drop with probability ``rate``), identity at inference."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras

    def __init__(self, rate: float, **kwargs):
        super().__init__(**kwargs)
        self.rate = _checks.real(rate, "rate", f"Dropout {self.name!r}", 0.0, 1.0, open_high=True)
        self.rng = None

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def create_weights(self, input_shape):
        self.rng = self.xp.rng(derive_seed(self._build_seed, 1))

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        return F.dropout(x, self.rate, True, self.rng)

    def get_config(self):
        return {"rate": self.rate, **super().get_config()}
