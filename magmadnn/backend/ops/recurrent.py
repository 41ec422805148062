"""Recurrent layers.

Sequences are batch-major (N, T, F). ``x_proj`` is the input projection of every step, ``x @ kernel + bias`` (one
matrix product for the whole sequence, made by the caller); the ops run the recurrence from a zero state."""

from __future__ import annotations

from ._spec import op


@op
def lstm_forward(x_proj, recurrent_kernel, return_sequences=True):
    """LSTM over x_proj (N, T, 4u) with recurrent_kernel (u, 4u), gates in the order i, f, g, o:
    z = x_proj[:, t] + h @ recurrent_kernel; i, f, o = sigmoid, g = tanh of their quarters of z;
    c = f c + i g; h = o tanh(c) -> ``(y, ctx)``, y every step's h (N, T, u) or the last one (N, u)."""


@op
def lstm_backward(dy, recurrent_kernel, ctx):
    """``(dx_proj (N, T, 4u), drecurrent_kernel (u, 4u))`` of ``lstm_forward`` for dy of y's shape
    (backpropagation through time)."""


@op
def gru_forward(x_proj, recurrent_kernel, recurrent_bias, return_sequences=True):
    """GRU over x_proj (N, T, 3u) with recurrent_kernel (u, 3u) and recurrent_bias (3u,), gates r, z, n (cuDNN's
    and PyTorch's formulation): q = h @ recurrent_kernel + recurrent_bias; r, z = sigmoid of x_proj's first two
    thirds + q's; n = tanh(x_proj's last third + r q's last third); h = (1 - z) n + z h -> ``(y, ctx)`` as
    ``lstm_forward``'s."""


@op
def gru_backward(dy, recurrent_kernel, ctx):
    """``(dx_proj (N, T, 3u), drecurrent_kernel (u, 3u), drecurrent_bias (3u,))`` of ``gru_forward``."""
