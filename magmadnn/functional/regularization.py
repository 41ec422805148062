"""Dropout (inverted), the one random op."""

from __future__ import annotations

from ..autograd import Function, Tensor
from ._base import _as_tensor

__all__ = ["dropout"]


class DropoutFunction(Function):
    def forward(self, x, rate, rng):
        y, self.mask = self.xp.dropout_forward(x, rate, rng)
        return y

    def backward(self, g):
        return (self.xp.dropout_backward(g, self.mask),)


def dropout(x, rate, training, rng) -> Tensor:
    """Inverted dropout when training (mask 0 or 1/(1-rate)); identity otherwise."""
    x = _as_tensor(x)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    if not training or rate == 0.0:
        return x
    return DropoutFunction.apply(x, rate=float(rate), rng=rng)
