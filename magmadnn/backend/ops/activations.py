"""Activations (the kinds of :data:`..geometry.ACTIVATIONS`) and softmax / log-softmax."""

from __future__ import annotations

from ._spec import op


@op
def activation_forward(x, kind, alpha=0.0):
    """``act(x)`` for ``kind`` in :data:`.geometry.ACTIVATIONS`."""


@op
def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx of ``activation_forward``; ``y`` is its output (``x`` may be None for relu/sigmoid/tanh, ``y`` may be None
    for the others)."""


@op
def softmax(x, axis=-1):
    """Softmax along ``axis`` (stable for any input)."""


@op
def log_softmax(x, axis=-1):
    """Log-softmax along ``axis``."""


@op
def softmax_backward(dy, y, axis=-1):
    """dx of ``softmax`` given its output ``y``."""


@op
def log_softmax_backward(dy, y, axis=-1):
    """dx of ``log_softmax`` given its output ``y``."""
