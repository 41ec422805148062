"""Matrix products and the bias of dense and convolution layers (with its activation: the epilogue)."""

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


@op
def bias_activation(x, b, kind, alpha=0.0):
    """``(y, z)``: ``z = bias_add(x, b)``, ``y = activation_forward(z, kind, alpha)`` (one pass on the device). ``z``
    is returned only where the gradient of ``kind`` reads the input (``geometry.INPUT_GRAD_ACTIVATIONS``), else
    None; ``x`` is given up: a backend may compute ``z`` in its memory."""


@op
def bias_activation_backward(dy, z, y, kind, alpha=0.0, bias=True):
    """``(dx, db)`` of ``bias_activation``: ``dx = activation_backward(dy, z, y, kind, alpha)``, ``db =
    bias_grad(dx)`` (None unless ``bias``); ``z`` may be None where ``bias_activation`` gave None (one pass on the
    device)."""
