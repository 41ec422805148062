"""Host recurrent layers: LSTM and GRU recurrences and backpropagation through time.

The recurrence runs in time-major buffers of T + 1 states (state 0 is the zero initial state), so that the recurrent
kernel's gradient is one product over all steps: h[0:T]^T @ dgates."""

from __future__ import annotations

import contextlib

import numpy as np

from .. import _host_jit

_BLAS = []  # [threadpoolctl's BLAS controller or None], found on first use


def _serial_blas():
    """A context in which BLAS uses one thread (threadpoolctl's limit when it is installed, else no change).

    A recurrence alternates a small GEMM with a few small NumPy ops, step after step: BLAS's worker threads spin
    after each GEMM and hold the cores the next ops need (measured on 2 cores: the LSTM step loop runs 1.5-2.5x
    slower with two BLAS threads than with one)."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController  # noqa: PLC0415 (optional, found once)

            _BLAS.append(ThreadpoolController().select(user_api="blas"))
        except ImportError:
            _BLAS.append(None)
    return _BLAS[0].limit(limits=1) if _BLAS[0] is not None else contextlib.nullcontext()


def _sigmoid_inplace(a):
    """sigmoid(a) = (1 + tanh(a / 2)) / 2 in place: stable for any a."""
    a *= 0.5
    np.tanh(a, out=a)
    a += 1.0
    a *= 0.5
    return a


def _sequence_output(hs, return_sequences):
    """Every step's state (N, T, u) or the last one (N, u), as a new array."""
    return np.ascontiguousarray(hs[1:].transpose(1, 0, 2)) if return_sequences else hs[-1].copy()


def _dy_at(dy, step, steps, return_sequences):
    """The output gradient that reaches step ``step`` directly (None when none does)."""
    if return_sequences:
        return dy[:, step]
    return dy if step == steps - 1 else None


def _lstm_scale(u, dtype):
    """Per column of the gates (i, f, g, o): 1/2 for the sigmoid blocks, 1 for the tanh block, since
    sigmoid(z) = tanh(z / 2) / 2 + 1/2: one tanh over all four blocks, then ``scale * t + shift``."""
    scale = np.full(4 * u, 0.5, dtype)
    scale[2 * u:3 * u] = 1.0
    return scale, 1.0 - scale  # shift: 1/2 for the sigmoid blocks, 0 for the tanh block


def lstm_forward(x_proj, recurrent_kernel, return_sequences=True):
    n, steps, four = x_proj.shape
    u, dt = four // 4, x_proj.dtype
    scale, shift = _lstm_scale(u, dt)
    xs = np.empty((steps, n, four), dt)  # time-major, scaled: each step reads one contiguous block
    np.multiply(x_proj.transpose(1, 0, 2), scale, out=xs)
    w = recurrent_kernel * scale
    hs, cs = np.zeros((steps + 1, n, u), dt), np.zeros((steps + 1, n, u), dt)
    tcs, gates, ig = np.empty((steps, n, u), dt), np.empty((steps, n, four), dt), np.empty((n, u), dt)
    with _serial_blas():
        _lstm_steps(xs, w, scale, shift, hs, cs, tcs, gates, ig)
    return _sequence_output(hs, return_sequences), (hs, cs, tcs, gates, bool(return_sequences))


def _lstm_steps(xs, w, scale, shift, hs, cs, tcs, gates, ig):
    u = ig.shape[1]
    for t in range(len(xs)):
        g = gates[t]
        np.matmul(hs[t], w, out=g)
        g += xs[t]
        np.tanh(g, out=g)
        g *= scale
        g += shift
        np.multiply(g[:, u:2 * u], cs[t], out=cs[t + 1])
        np.multiply(g[:, :u], g[:, 2 * u:3 * u], out=ig)
        cs[t + 1] += ig
        np.tanh(cs[t + 1], out=tcs[t])
        np.multiply(g[:, 3 * u:], tcs[t], out=hs[t + 1])


def lstm_backward(dy, recurrent_kernel, ctx):
    hs, cs, tcs, gates, return_sequences = ctx
    steps, n, four = gates.shape
    u = four // 4
    step = _lstm_backward_step(gates, tcs)
    dgates = np.empty_like(gates)
    dh, dc = np.zeros((n, u), gates.dtype), np.zeros((n, u), gates.dtype)
    with _serial_blas():
        for t in range(steps - 1, -1, -1):
            direct = _dy_at(dy, t, steps, return_sequences)
            if direct is not None:
                dh += direct
            step(t, dh, dc, gates[t], tcs[t], cs[t], dgates[t])
            if t:
                np.matmul(dgates[t], recurrent_kernel.T, out=dh)
        dw = np.matmul(hs[:-1].reshape(steps * n, u).T, dgates.reshape(steps * n, four))
    return np.ascontiguousarray(dgates.transpose(1, 0, 2)), dw


def _lstm_backward_step(gates, tcs):
    """``step(t, dh, dc, gates[t], tanh_c[t], c_prev, dgates[t])``: one step of the LSTM backward, in place on dc
    and dgates[t]; ``_host_jit``'s fused loop when numba is there, else NumPy with the gates' derivatives and the
    cell path's factor o (1 - tanh(c)^2) computed for the whole sequence up front, in a few large ops."""
    jit = _host_jit.kernels
    if jit is not None:
        def fused(t, *arrays):
            jit.lstm_backward_step(*arrays)

        return fused
    u = gates.shape[2] // 4
    deriv = np.subtract(1.0, gates)
    deriv *= gates  # sigmoid: s (1 - s)
    np.multiply(gates[..., 2 * u:3 * u], gates[..., 2 * u:3 * u], out=deriv[..., 2 * u:3 * u])
    np.subtract(1.0, deriv[..., 2 * u:3 * u], out=deriv[..., 2 * u:3 * u])  # tanh: 1 - g^2
    dc_dh = np.multiply(tcs, tcs)
    np.subtract(1.0, dc_dh, out=dc_dh)
    dc_dh *= gates[..., 3 * u:]
    tmp = np.empty(tcs.shape[1:], tcs.dtype)

    def step(t, dh, dc, g, tanh_c, c_prev, dg):
        np.multiply(dh, dc_dh[t], out=tmp)
        dc += tmp
        np.multiply(dh, tanh_c, out=dg[:, 3 * u:])
        np.multiply(dc, g[:, 2 * u:3 * u], out=dg[:, :u])
        np.multiply(dc, c_prev, out=dg[:, u:2 * u])
        np.multiply(dc, g[:, :u], out=dg[:, 2 * u:3 * u])
        dg *= deriv[t]
        dc *= g[:, u:2 * u]

    return step


def gru_forward(x_proj, recurrent_kernel, recurrent_bias, return_sequences=True):
    n, steps, three = x_proj.shape
    u = three // 3
    hs = np.zeros((steps + 1, n, u), x_proj.dtype)
    gates, qn = np.empty((steps, n, three), x_proj.dtype), np.empty((steps, n, u), x_proj.dtype)
    with _serial_blas():
        for t in range(steps):
            q = np.matmul(hs[t], recurrent_kernel)
            q += recurrent_bias
            x, g = x_proj[:, t], gates[t]
            np.add(x[:, :2 * u], q[:, :2 * u], out=g[:, :2 * u])
            _sigmoid_inplace(g[:, :2 * u])
            qn[t] = q[:, 2 * u:]
            nn = g[:, 2 * u:]
            np.multiply(g[:, :u], qn[t], out=nn)
            nn += x[:, 2 * u:]
            np.tanh(nn, out=nn)
            h = hs[t + 1]
            np.subtract(hs[t], nn, out=h)
            h *= g[:, u:2 * u]
            h += nn
    return _sequence_output(hs, return_sequences), (hs, gates, qn, bool(return_sequences))


def gru_backward(dy, recurrent_kernel, ctx):
    hs, gates, qn, return_sequences = ctx
    steps, n, three = gates.shape
    u = three // 3
    dx, dq = np.empty_like(gates), np.empty_like(gates)
    dh = np.zeros((n, u), gates.dtype)
    with _serial_blas():
        for t in range(steps - 1, -1, -1):
            direct = _dy_at(dy, t, steps, return_sequences)
            if direct is not None:
                dh += direct
            r, z, nn = gates[t, :, :u], gates[t, :, u:2 * u], gates[t, :, 2 * u:]
            dn = dh * (1.0 - z) * (1.0 - nn * nn)
            dx[t, :, 2 * u:] = dn
            np.multiply(dn * qn[t], r * (1.0 - r), out=dx[t, :, :u])
            np.multiply(dh * (hs[t] - nn), z * (1.0 - z), out=dx[t, :, u:2 * u])
            dq[t, :, :2 * u] = dx[t, :, :2 * u]
            np.multiply(dn, r, out=dq[t, :, 2 * u:])
            dh = dh * z
            dh += np.matmul(dq[t], recurrent_kernel.T)
        flat = dq.reshape(steps * n, three)
        dw = np.matmul(hs[:-1].reshape(steps * n, u).T, flat)
    return np.ascontiguousarray(dx.transpose(1, 0, 2)), dw, flat.sum(axis=0)
