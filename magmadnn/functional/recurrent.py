"""Recurrent layers (LSTM, GRU). One Function per layer call over the whole sequence: the input projection of every
step is one matrix product, the recurrence and its backpropagation through time are one op each
(``lstm_forward``/``lstm_backward``, ...)."""

from __future__ import annotations

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype

__all__ = ["lstm", "gru"]


class _RecurrentFunction(Function):
    """x (N, T, F) @ kernel (F, G u) + bias, then the backend's recurrence ``forward_op``/``backward_op``."""

    forward_op = backward_op = ""

    def forward(self, x, kernel, recurrent_kernel, bias, *extra, return_sequences=False):
        xp = self.xp
        n, steps, features = x.shape
        self.flat_x, self.kernel, self.recurrent_kernel = xp.reshape(x, (n * steps, features)), kernel, recurrent_kernel
        proj = xp.bias_add(xp.matmul(self.flat_x, kernel), bias)
        y, self.ctx = getattr(xp, self.forward_op)(xp.reshape(proj, (n, steps, kernel.shape[1])), recurrent_kernel,
                                                   *extra, return_sequences)
        self.x_shape = x.shape
        return y

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        dproj, drec, *dextra = getattr(xp, self.backward_op)(g, self.recurrent_kernel, self.ctx)
        n, steps, features = self.x_shape
        flat = xp.reshape(dproj, (n * steps, dproj.shape[2]))
        dx = xp.reshape(xp.matmul(flat, self.kernel, transpose_b=True), self.x_shape) if need[0] else None
        dk = xp.matmul(self.flat_x, flat, transpose_a=True) if need[1] else None
        return (dx, dk, drec, xp.bias_grad(flat) if need[3] else None, *dextra)


class LSTMFunction(_RecurrentFunction):
    forward_op, backward_op = "lstm_forward", "lstm_backward"


class GRUFunction(_RecurrentFunction):
    forward_op, backward_op = "gru_forward", "gru_backward"


def _recurrent_args(fn: str, gates: int, x, weights: dict) -> list:
    """The Tensors of a recurrent call, checked: x (N, T, F), kernel (F, gates u), the others (u, gates u) or
    (gates u,)."""
    x = _as_tensor(x)
    _need_ndim(x, 3, fn, "x", "(batch, time, features)")
    tensors = {name: _as_tensor(w) for name, w in weights.items()}
    kernel = tensors["kernel"]
    _need_ndim(kernel, 2, fn, "kernel", f"(features, {gates} * units)")
    width = kernel.shape[1]
    if width % gates or width == 0:
        raise ValueError(f"{fn}: kernel has shape {kernel.shape}; its columns must be {gates} * units")
    units = width // gates
    expected = {"kernel": (x.shape[2], width), "recurrent_kernel": (units, width), "bias": (width,),
                "recurrent_bias": (width,)}
    for name, t in tensors.items():
        if t.shape != expected[name]:
            raise ValueError(f"{fn}: {name} has shape {t.shape}, expected {expected[name]} for x of shape "
                             f"{x.shape} and {units} units")
    if x.shape[1] < 1:
        raise ValueError(f"{fn}: x must hold at least one time step, got shape {x.shape}")
    _same_dtype(fn, x=x, **tensors)
    return [x, *tensors.values()]


def lstm(x, kernel, recurrent_kernel, bias, return_sequences=False) -> Tensor:
    """LSTM over x (N, T, F) from a zero state: kernel (F, 4u), recurrent_kernel (u, 4u), bias (4u,), gates in the
    order i, f, g, o; every step's hidden state (N, T, u) or the last one (N, u)."""
    args = _recurrent_args("lstm", 4, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias})
    return LSTMFunction.apply(*args, return_sequences=bool(return_sequences))


def gru(x, kernel, recurrent_kernel, bias, recurrent_bias, return_sequences=False) -> Tensor:
    """GRU over x (N, T, F) from a zero state: kernel (F, 3u), recurrent_kernel (u, 3u), bias and recurrent_bias
    (3u,), gates r, z, n with the reset gate on the recurrent product plus its bias (cuDNN, PyTorch)."""
    args = _recurrent_args("gru", 3, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias,
                                         "recurrent_bias": recurrent_bias})
    return GRUFunction.apply(*args, return_sequences=bool(return_sequences))
