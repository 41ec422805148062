"""Matrix products and the bias of dense and convolution layers."""

from __future__ import annotations

from ._spec import op


@op
def matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` for 2-D or stacked (..., m, k) operands; transposes of the last two axes as flags."""


@op
def bias_add(x, b):
    """``x + b`` with ``b`` (C,) along axis 1 (dense rows or NCHW channels)."""


@op
def bias_grad(dy):
    """The gradient of ``bias_add`` with respect to ``b``: ``channel_sum(dy)``."""
