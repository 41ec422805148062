"""Device recurrent layers.

Per time step one gemm (the recurrent product, into a reused buffer) and one fused gate kernel
(kernels.lstm_gates_forward, ...); backpropagation through time runs the backward kernels in reverse with
one gemm per step for the state gradient, and the recurrent kernel's gradient is one gemm over all steps.
ctx: the time-major states (T + 1, N, u), state 0 zero, and the saved gates."""

from __future__ import annotations

from pymagma import array as _array
from pymagma import blas as _blas
from pymagma import kernels as _k

from . import kernels as _dk
from ._common import (
    _contiguous,
    _same_dtype,
)


def _filled_zeros(shape, dtype, device):
    """Zeros written by a kernel on the queue's stream (ordered with the steps' work, capturable in a graph)."""
    return _k.fill(_array.empty(shape, dtype, device=device), 0.0)


def _recurrent_buffers(x_proj, gates: int, return_sequences):
    n, steps, width = x_proj.shape
    u, dt, dev = width // gates, x_proj.dtype, x_proj.device
    hs = _filled_zeros((steps + 1, n, u), dt, dev)
    y = _array.empty((n, steps, u), dt, device=dev) if return_sequences else None
    return n, steps, u, hs, _array.empty((steps, n, width), dt, device=dev), _array.empty((n, width), dt, device=dev), y


def lstm_forward(x_proj, recurrent_kernel, return_sequences=True):
    _same_dtype("lstm_forward", x_proj, recurrent_kernel)
    x_proj, w = _contiguous(x_proj), _contiguous(recurrent_kernel)
    n, steps, u, hs, gates, rec, y = _recurrent_buffers(x_proj, 4, return_sequences)
    cs = _filled_zeros(hs.shape, hs.dtype, hs.device)
    for t in range(steps):
        _blas.gemm(hs[t], w, out=rec)
        _dk.lstm_gates_forward(x_proj, rec, cs, hs, gates, y, t)
    return (y if y is not None else _k.copy(hs[steps])), (hs, cs, gates, bool(return_sequences))


def lstm_backward(dy, recurrent_kernel, ctx):
    hs, cs, gates, _ = ctx
    _same_dtype("lstm_backward", dy, recurrent_kernel, gates)
    dy, w = _contiguous(dy), _contiguous(recurrent_kernel)
    steps, n, four = gates.shape
    dh, dc = (_filled_zeros((n, four // 4), gates.dtype, gates.device) for _ in range(2))
    dgates, dx = _array.empty(gates.shape, gates.dtype, device=gates.device), _array.empty(
        (n, steps, four), gates.dtype, device=gates.device)
    for t in range(steps - 1, -1, -1):
        _dk.lstm_gates_backward(dy, dh, dc, gates, cs, dgates, dx, t)
        if t:
            _blas.gemm(dgates[t], w, out=dh, trans_b=True)
    dw = _blas.gemm(hs[0:steps].reshape(steps * n, four // 4), dgates.reshape(steps * n, four), trans_a=True)
    return dx, dw


def gru_forward(x_proj, recurrent_kernel, recurrent_bias, return_sequences=True):
    _same_dtype("gru_forward", x_proj, recurrent_kernel, recurrent_bias)
    x_proj, w, b = _contiguous(x_proj), _contiguous(recurrent_kernel), _contiguous(recurrent_bias)
    n, steps, u, hs, gates, rec, y = _recurrent_buffers(x_proj, 3, return_sequences)
    qn = _array.empty((steps, n, u), hs.dtype, device=hs.device)
    for t in range(steps):
        _blas.gemm(hs[t], w, out=rec)
        _dk.gru_gates_forward(x_proj, rec, b, hs, gates, qn, y, t)
    return (y if y is not None else _k.copy(hs[steps])), (hs, gates, qn, bool(return_sequences))


def gru_backward(dy, recurrent_kernel, ctx):
    hs, gates, qn, _ = ctx
    _same_dtype("gru_backward", dy, recurrent_kernel, gates)
    dy, w = _contiguous(dy), _contiguous(recurrent_kernel)
    steps, n, three = gates.shape
    dh = _filled_zeros((n, three // 3), gates.dtype, gates.device)
    dq, dx = _array.empty(gates.shape, gates.dtype, device=gates.device), _array.empty(
        (n, steps, three), gates.dtype, device=gates.device)
    for t in range(steps - 1, -1, -1):
        _dk.gru_gates_backward(dy, dh, gates, qn, hs, dq, dx, t)
        if t:
            _blas.gemm(dq[t], w, out=dh, beta=1.0, trans_b=True)
    flat = dq.reshape(steps * n, three)
    dw = _blas.gemm(hs[0:steps].reshape(steps * n, three // 3), flat, trans_a=True)
    return dx, dw, _k.reduce("sum", flat, axis=0)
