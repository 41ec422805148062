"""Recurrent layers (LSTM, GRU). One Function per layer call over the whole sequence: the input projection of every
step is one matrix product, the recurrence and its backpropagation through time are one op each
(``lstm_forward``/``lstm_backward``, ...)."""

from __future__ import annotations

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype
from .activations import sigmoid, tanh
from .linear import dense
from .operators import add, multiply, reshape, subtract
from .shapes import concatenate, reverse, slice_axis

__all__ = ["lstm", "gru", "lstm_steps", "gru_steps", "simple_rnn_steps"]


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


# -- step by step, as compositions of differentiable functions: the final states as outputs (``return_state``)
# and masked steps (``Embedding(mask_zero=True)``), which the fused ops above do not have


def _step_inputs(fn, x, kernel, bias, mask, go_backwards):
    """The input projection of every step (N, T, G u) and the mask (N, T) as floats, reversed for go_backwards."""
    if mask is not None:
        mask = _as_tensor(mask, x)
        if mask.shape != x.shape[:2]:
            raise ValueError(f"{fn}: mask has shape {mask.shape}, expected (batch, time) = {x.shape[:2]}")
    proj = dense(x, kernel, bias)
    if go_backwards:
        proj = reverse(proj, 1)
        mask = None if mask is None else reverse(mask, 1)
    return proj, mask


def _gates(z, count):
    units = z.shape[1] // count
    return [slice_axis(z, 1, k * units, (k + 1) * units) for k in range(count)]


def _keep(mask, t, new, old):
    """``new`` where step t is unmasked, ``old`` where it is masked (mask (N, T) of 1.0/0.0)."""
    if mask is None:
        return new
    m = reshape(slice_axis(mask, 1, t, t + 1), (mask.shape[0], 1))
    return add(old, multiply(m, subtract(new, old)))


def _outputs(steps_out, mask, return_sequences, zero_output_for_mask, last):
    if not return_sequences:
        return last
    if zero_output_for_mask and mask is not None:
        steps_out = [multiply(o, reshape(slice_axis(mask, 1, t, t + 1), (mask.shape[0], 1)))
                     for t, o in enumerate(steps_out)]
    n, u = last.shape
    return concatenate([reshape(o, (n, 1, u)) for o in steps_out], axis=1)


def _initial(fn, initial_state, count, x, units):
    """The initial states: zeros, or the given Tensors, each (N, units)."""
    if initial_state is None:
        return [Tensor(x.xp.zeros((x.shape[0], units), x.dtype), backend=x.xp)] * count
    states = [_as_tensor(s, x) for s in initial_state]
    if len(states) != count or any(s.shape != (x.shape[0], units) for s in states):
        raise ValueError(f"{fn}: initial_state must be {count} tensor(s) of shape {(x.shape[0], units)}, got "
                         f"{[s.shape for s in states]}")
    _same_dtype(fn, x=x, **{f"initial_state[{i}]": s for i, s in enumerate(states)})
    return states


def lstm_steps(x, kernel, recurrent_kernel, bias, mask=None, return_sequences=False, go_backwards=False,
               zero_output_for_mask=False, initial_state=None):
    """:func:`lstm` step by step, returning ``(output, h, c)`` (the final states, differentiable) and honouring a
    ``mask`` (N, T) of 1/0: at a masked step the states and the output carry over from the step before (Keras),
    or the output is zero with ``zero_output_for_mask``. ``go_backwards``: the steps in reverse order (the output
    sequence too, as Keras); ``initial_state``: [h, c] (N, units) each instead of zeros."""
    x, kernel, recurrent_kernel, bias = _recurrent_args(
        "lstm_steps", 4, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias})
    proj, mask = _step_inputs("lstm_steps", x, kernel, bias, mask, go_backwards)
    n, steps, width = proj.shape
    h, c = _initial("lstm_steps", initial_state, 2, x, width // 4)
    outs = []
    for t in range(steps):
        z = add(reshape(slice_axis(proj, 1, t, t + 1), (n, width)), dense(h, recurrent_kernel))
        i, f, g, o = _gates(z, 4)
        c_new = add(multiply(sigmoid(f), c), multiply(sigmoid(i), tanh(g)))
        h_new = multiply(sigmoid(o), tanh(c_new))
        h, c = _keep(mask, t, h_new, h), _keep(mask, t, c_new, c)
        outs.append(h)
    return _outputs(outs, mask, return_sequences, zero_output_for_mask, h), h, c


def gru_steps(x, kernel, recurrent_kernel, bias, recurrent_bias, mask=None, return_sequences=False,
              go_backwards=False, zero_output_for_mask=False, initial_state=None):
    """:func:`gru` step by step, returning ``(output, h)``; ``mask``, ``go_backwards``, ``zero_output_for_mask``
    as in :func:`lstm_steps`, ``initial_state`` [h]."""
    x, kernel, recurrent_kernel, bias, recurrent_bias = _recurrent_args(
        "gru_steps", 3, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias,
                            "recurrent_bias": recurrent_bias})
    proj, mask = _step_inputs("gru_steps", x, kernel, bias, mask, go_backwards)
    n, steps, width = proj.shape
    (h,) = _initial("gru_steps", initial_state, 1, x, width // 3)
    outs = []
    for t in range(steps):
        xr, xz, xn = _gates(reshape(slice_axis(proj, 1, t, t + 1), (n, width)), 3)
        qr, qz, qn = _gates(dense(h, recurrent_kernel, recurrent_bias), 3)
        r, z = sigmoid(add(xr, qr)), sigmoid(add(xz, qz))
        cand = tanh(add(xn, multiply(r, qn)))
        h = _keep(mask, t, add(cand, multiply(z, subtract(h, cand))), h)
        outs.append(h)
    return _outputs(outs, mask, return_sequences, zero_output_for_mask, h), h


def simple_rnn_steps(x, kernel, recurrent_kernel, bias=None, activation=tanh, mask=None, return_sequences=False,
                     go_backwards=False, zero_output_for_mask=False, initial_state=None):
    """Keras' SimpleRNN step by step, returning ``(output, h)``: h = activation(x W + b + h U), ``activation`` a
    function of a Tensor (tanh); ``bias`` may be None; ``mask``, ``go_backwards``, ``zero_output_for_mask`` as in
    :func:`lstm_steps`, ``initial_state`` [h]."""
    weights = {"kernel": kernel, "recurrent_kernel": recurrent_kernel}
    if bias is not None:
        weights["bias"] = bias
    x, kernel, recurrent_kernel, *rest = _recurrent_args("simple_rnn_steps", 1, x, weights)
    proj, mask = _step_inputs("simple_rnn_steps", x, kernel, rest[0] if rest else None, mask, go_backwards)
    n, steps, units = proj.shape
    (h,) = _initial("simple_rnn_steps", initial_state, 1, x, units)
    outs = []
    for t in range(steps):
        z = add(reshape(slice_axis(proj, 1, t, t + 1), (n, units)), dense(h, recurrent_kernel))
        h = _keep(mask, t, activation(z), h)
        outs.append(h)
    return _outputs(outs, mask, return_sequences, zero_output_for_mask, h), h
