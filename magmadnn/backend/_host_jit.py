"""Optional numba kernels for the host backend (``pip install magmadnn[jit]``).

The host backend is complete without them: each kernel replaces a NumPy sequence of its ops that works in short strided
runs or several passes, where NumPy's per-run overhead dominates: the GEMM output's move to NCHW (with bias and ReLU),
col2im, 2x2 stride-2 max pooling, SGD's update, the softmax cross-entropy of integer labels; and one that fuses the
dozen small products of an LSTM step's backward; the direct training convolution of few input taps
(``_host_jit_direct``) replaces an im2col GEMM pair. Results equal the NumPy path's, NaN and infinities included (the
row kernels' and the cross-entropy's float64 sums and the direct convolution's GEMM-like sums aside, see their
builders). ``kernels`` is None when numba is not
installed or ``MAGMADNN_JIT=0`` is set; the host then takes its NumPy path. Kernels compile on first use (cached on
disk by numba) for float32 and float64 arrays.

They are single-threaded on purpose: OpenBLAS's worker threads keep spinning for a while after each GEMM, and a
parallel kernel right after one waits for cores those threads hold (measured: 3 ms instead of 0.05 ms per call).
"""

from __future__ import annotations

import importlib
import math
import os

import numpy as np

from . import _host_jit_conv, _host_jit_direct

__all__ = ["kernels", "enabled"]


def enabled() -> bool:
    """True unless ``MAGMADNN_JIT`` is set to 0/false/no/off (whether numba is installed is checked on import)."""
    return os.environ.get("MAGMADNN_JIT", "1").strip().lower() not in ("0", "false", "no", "off")


def _load():
    """The compiled-on-demand kernels, or None when switched off or when numba is not installed."""
    if not enabled():
        return None
    try:
        numba = importlib.import_module("numba")
    except ImportError:  # the extra is not installed: the host uses NumPy only
        return None
    return _Kernels(_build(numba))


def _build(numba):
    njit = numba.njit

    @njit(cache=True)
    def store_nchw(y, out, h0, bias, relu):
        """out[:, :, h0:h0+h] = y (K, h, Wo, N) moved to NCHW order, plus bias (K,), then max(., 0) when relu."""
        k_, h_, wo_, n_ = y.shape
        for row in range(k_ * h_):
            k = row // h_
            i = row - k * h_
            b = bias[k]
            for j in range(wo_):
                for n in range(n_):
                    v = y[k, i, j, n] + b
                    if relu and v < 0:
                        v = 0.0
                    out[n, k, h0 + i, j] = v

    @njit(cache=True)
    def max_pool2x2_forward(x, y, idx):
        """2x2 windows, stride 2, no padding: y = window max, idx = row-major offset (0..3) of its first maximum.

        A window with a NaN gives NaN and offset 3, exactly as the host's NumPy path (np.maximum propagates NaN and
        no element compares equal to it); the strict comparisons alone would drop a NaN.
        """
        n_, c_, ho, wo = y.shape
        for n in range(n_):
            for c in range(c_):
                for oi in range(ho):
                    r0, r1 = x[n, c, 2 * oi], x[n, c, 2 * oi + 1]
                    yr, kr = y[n, c, oi], idx[n, c, oi]
                    for oj in range(wo):
                        a, b, d, e = r0[2 * oj], r0[2 * oj + 1], r1[2 * oj], r1[2 * oj + 1]
                        right = b > a  # strict comparisons: ties keep the earlier offset
                        top = b if right else a
                        k_top = 1 if right else 0
                        right = e > d
                        bottom = e if right else d
                        k_bottom = 3 if right else 2
                        lower = bottom > top
                        yr[oj] = bottom if lower else top
                        kr[oj] = k_bottom if lower else k_top
                        if a != a or b != b or d != d or e != e:  # a NaN: the max is NaN, as np.maximum gives,
                            yr[oj] = a + b + d + e  # and the offset is the NumPy path's (no element equals NaN)
                            kr[oj] = 3

    @njit(cache=True)
    def max_pool2x2_backward(dy, idx, dx, onehot):
        """dx of ``max_pool2x2_forward``: every element of dx is written (rows/columns outside all windows get 0).

        Each window's four gradients are dy times a row of ``onehot`` (the 4x4 identity in dx's dtype) picked by
        the saved offset: a load instead of a data-dependent branch (the branches mispredicted on ReLU outputs,
        costing 6x), and dy * 0 keeps the NumPy path's signed zeros and NaN from an infinite dy.
        """
        n_, c_, ho, wo = dy.shape
        h_, w_ = dx.shape[2], dx.shape[3]
        for n in range(n_):
            for c in range(c_):
                for oi in range(ho):
                    g, kr = dy[n, c, oi], idx[n, c, oi]
                    r0, r1 = dx[n, c, 2 * oi], dx[n, c, 2 * oi + 1]
                    for oj in range(wo):
                        v, m = g[oj], onehot[kr[oj]]
                        r0[2 * oj] = v * m[0]
                        r0[2 * oj + 1] = v * m[1]
                        r1[2 * oj] = v * m[2]
                        r1[2 * oj + 1] = v * m[3]
                    for j in range(2 * wo, w_):
                        r0[j] = 0
                        r1[j] = 0
                for i in range(2 * ho, h_):
                    dx[n, c, i, :] = 0

    @njit(cache=True)
    def col2im(d6, dx, sh, sw, dh, dw, pt, pl):
        """dx (N, C, H, W) = sum of the columns d6 (C, R, S, Ho, Wo, N) that read each input pixel (padding pt, pl).

        A gather: each pixel adds its (at most R*S) contributing column runs over N, then is written once; no
        zero-filled scratch array and no separate transpose pass.
        """
        c_, r_, s_, ho_, wo_, n_ = d6.shape
        h_, w_ = dx.shape[2], dx.shape[3]
        acc = np.empty(n_, d6.dtype)
        for c in range(c_):
            for hi in range(h_):
                for wi in range(w_):
                    acc[:] = 0
                    for r in range(r_):
                        t = hi + pt - r * dh
                        if t < 0 or t % sh or t // sh >= ho_:
                            continue
                        for s in range(s_):
                            u = wi + pl - s * dw
                            if u < 0 or u % sw or u // sw >= wo_:
                                continue
                            src = d6[c, r, s, t // sh, u // sw]
                            for n in range(n_):
                                acc[n] += src[n]
                    for n in range(n_):
                        dx[n, c, hi, wi] = acc[n]

    # -- recurrent layers
    @njit(cache=True)
    def lstm_backward_step(dh, dc, gates, tanh_c, c_prev, dgates):
        """One LSTM step backward, in one pass: from dh (N, u), the carried dc (N, u, updated in place), the gates
        (i, f, g, o) (N, 4u), tanh of the step's cell and the previous cell, the pre-activation gradients
        (N, 4u). Plain products, no transcendental function: the NumPy path's result in one loop."""
        n_, u_ = dh.shape
        for b in range(n_):
            gb, db = gates[b], dgates[b]
            for j in range(u_):
                i, f, g, o = gb[j], gb[u_ + j], gb[2 * u_ + j], gb[3 * u_ + j]
                tc, h = tanh_c[b, j], dh[b, j]
                c = dc[b, j] + h * (o * (1 - tc * tc))
                db[j] = c * g * (i * (1 - i))
                db[u_ + j] = c * c_prev[b, j] * (f * (1 - f))
                db[2 * u_ + j] = c * i * (1 - g * g)
                db[3 * u_ + j] = h * tc * (o * (1 - o))
                dc[b, j] = c * f

    table = {"store_nchw": store_nchw, "col2im": col2im, "max_pool2x2_forward": max_pool2x2_forward,
             "max_pool2x2_backward": max_pool2x2_backward, "lstm_backward_step": lstm_backward_step}
    table.update(_build_rows(numba))
    table.update(_build_updates(numba))
    table.update(_host_jit_conv.build(numba))
    table.update(_build_losses(numba))
    table.update(_host_jit_direct.build(numba))
    return table


def _build_updates(numba):
    """ReLU's gradient, a dense layer's bias + ReLU (forward, and backward with the bias gradient) and SGD's update,
    each in one pass where NumPy makes two to four (and a scratch array): the
    same float operations in the same order, each rounded to the arrays' dtype (no fused multiply-add: numba
    contracts nothing without fastmath), so the results equal the NumPy path's bit for bit."""
    njit = numba.njit(cache=True)

    @njit
    def sgd_momentum(p, g, v, lr, momentum):
        """1-D p, g, v in place: v = momentum v + g; p -= lr v (``lr``, ``momentum`` of p's dtype)."""
        for i in range(p.shape[0]):
            vi = v[i] * momentum + g[i]
            v[i] = vi
            p[i] = p[i] - vi * lr

    @njit
    def sgd_plain(p, g, lr):
        """1-D p, g: p -= lr g."""
        for i in range(p.shape[0]):
            p[i] = p[i] - g[i] * lr

    @njit
    def relu_backward(dy, ref, dx):
        """1-D: dx = dy * (ref > 0) in one pass (NumPy makes a mask array first): dy times 1 or 0 of its dtype, so
        signed zeros and NaN from an infinite dy are NumPy's."""
        one, zero = dy.dtype.type(1), dy.dtype.type(0)
        for i in range(dy.shape[0]):
            dx[i] = dy[i] * (one if ref[i] > 0 else zero)

    @njit
    def bias_relu(x, b, y):
        """Rows x (N, C), b (C,): y = max(x + b, 0) in one pass (NumPy adds, then takes the maximum in a second
        pass): NaN stays NaN and -0 gives +0, as np.maximum(., 0)."""
        zero = x.dtype.type(0)
        rows, cols = x.shape
        for i in range(rows):
            for j in range(cols):
                v = x[i, j] + b[j]
                y[i, j] = v if (v > zero or v != v) else zero

    @njit
    def bias_relu_backward(dy, y, dx, db):
        """dx = dy * (y > 0) and, when db has C elements, db (C,) = the column sums of dx, rows added in order from
        0 (NumPy's order for a sum over axis 0, so bit for bit the same); rows (N, C)."""
        one, zero = dy.dtype.type(1), dy.dtype.type(0)
        rows, cols = dy.shape
        if db.shape[0] != cols:
            for i in range(rows):
                for j in range(cols):
                    dx[i, j] = dy[i, j] * (one if y[i, j] > zero else zero)
            return
        db[:] = zero
        for i in range(rows):
            for j in range(cols):
                d = dy[i, j] * (one if y[i, j] > zero else zero)
                dx[i, j] = d
                db[j] += d

    return {"sgd_momentum": sgd_momentum, "sgd_plain": sgd_plain, "relu_backward": relu_backward,
            "bias_relu": bias_relu, "bias_relu_backward": bias_relu_backward}


def _build_rows(numba):
    """Fused row kernels of a transformer step (LayerNorm forward and backward, the masked softmax's backward): one
    pass over the data where NumPy makes several. The arithmetic is float64 for float32 arrays too, so the last
    bits can differ from NumPy's float32 path. Serial like the kernels above: on 2 shared cores numba's thread
    pool (prange) cost more than it saved, and its per-element tanh/exp/sqrt lost to NumPy's SIMD ones (GELU,
    softmax, Adam)."""
    njit = numba.njit(cache=True)

    @njit
    def layer_norm_forward(x, gamma, beta, eps, rms, y, mu, rstd):
        """Rows of x (R, C): mu, rstd (R,) and y = (x - mu) rstd gamma + beta (``rms``: mu = 0)."""
        rows, cols = x.shape
        for r in range(rows):
            xr = x[r]
            m = 0.0
            if not rms:
                for j in range(cols):
                    m += xr[j]
                m /= cols
            var = 0.0
            for j in range(cols):
                d = xr[j] - m
                var += d * d
            s = 1.0 / math.sqrt(var / cols + eps)
            mu[r], rstd[r] = m, s
            for j in range(cols):
                y[r, j] = (xr[j] - m) * s * gamma[j] + beta[j]

    @njit
    def layer_norm_backward(dy, x, gamma, mu, rstd, rms, dx, dgamma, dbeta):
        """dx (R, C) = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma; adds the column sums of dy xhat and dy
        to dgamma, dbeta (C,)."""
        rows, cols = x.shape
        for r in range(rows):
            m, s = mu[r], rstd[r]
            sg = 0.0
            sgx = 0.0
            for j in range(cols):
                xh = (x[r, j] - m) * s
                g = dy[r, j] * gamma[j]
                sg += g
                sgx += g * xh
                dgamma[j] += dy[r, j] * xh
                dbeta[j] += dy[r, j]
            sg = 0.0 if rms else sg / cols
            sgx /= cols
            for j in range(cols):
                xh = (x[r, j] - m) * s
                dx[r, j] = s * (dy[r, j] * gamma[j] - sg - xh * sgx)

    @njit
    def masked_softmax_backward(dy, y, scale, dx):
        """dx = scale y (dy - sum(dy y)) along the last axis; arrays viewed as rows (R, T)."""
        rows, cols = y.shape
        for r in range(rows):
            s = 0.0
            for j in range(cols):
                s += dy[r, j] * y[r, j]
            for j in range(cols):
                dx[r, j] = (dy[r, j] - s) * y[r, j] * scale

    return {"layer_norm_forward": layer_norm_forward, "layer_norm_backward": layer_norm_backward,
            "masked_softmax_backward": masked_softmax_backward}


def _build_losses(numba):
    """The softmax cross-entropy of integer labels, forward (per-row loss, probabilities, their sum) and the mean's
    backward, each one pass over the logits where NumPy makes about ten small calls. The per-element float ops are
    NumPy's (shift by the row max, exp, one division); the row total and the sum of the losses are accumulated in
    float64, so their last bits can differ from NumPy's float32 pairwise sums."""
    njit = numba.njit(cache=True)

    @njit
    def softmax_xent_rows(logits, labels, probs, loss):
        """Rows of logits (R, C), labels (R,) in [0, C): probs = softmax, loss = log(sum exp(x - max)) - (x[label] -
        max). Returns (True, the sum of the losses), or (False, 0.0) without writing when a label is out of range."""
        rows, cols = logits.shape
        for r in range(rows):
            if labels[r] < 0 or labels[r] >= cols:
                return False, 0.0
        total_loss = 0.0
        for r in range(rows):
            x, p = logits[r], probs[r]
            m = x[0]
            for j in range(1, cols):
                if x[j] > m or x[j] != x[j]:  # NaN wins, as np.max
                    m = x[j]
            total = 0.0
            for j in range(cols):
                e = np.exp(x[j] - m)
                p[j] = e
                total += e
            t = p.dtype.type(total)
            for j in range(cols):
                p[j] = p[j] / t
            value = np.log(t) - (x[labels[r]] - m)
            loss[r] = value
            total_loss += value
        return True, total_loss

    @njit
    def softmax_xent_mean_backward(probs, labels, share, d):
        """d = (probs - onehot(labels)) * share, rows (R, C), ``share`` of probs' dtype (labels checked by the
        forward)."""
        rows, cols = probs.shape
        one = probs.dtype.type(1)
        for r in range(rows):
            lab = labels[r]
            for j in range(cols):
                v = probs[r, j]
                if j == lab:
                    v = v - one
                d[r, j] = v * share

    return {"softmax_xent_rows": softmax_xent_rows, "softmax_xent_mean_backward": softmax_xent_mean_backward}


class _Kernels:
    """Namespace of the compiled kernels."""

    def __init__(self, table):
        self.__dict__.update(table)


kernels = _load()
