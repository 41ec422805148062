"""Independent NumPy references for the dnn tests (magmadnn's op set, pymagma.dnn, the simulated cuDNN).

Written from the definitions (loops over output positions, textbook formulas), computed in float64 and never with
the code under test; ``tests/pymagma/test_dnn_reference.py`` checks them against PyTorch. Tensors are NCHW. A
``padding`` is ``(ph, pw)`` (both sides) or ``((top, bottom), (left, right))``.
"""

from __future__ import annotations

import math

import numpy as np


# ------------------------------------------------------------------------------------------------- geometry
def pads2d(padding) -> tuple[tuple[int, int], tuple[int, int]]:
    """``padding`` as ((top, bottom), (left, right))."""
    rows, cols = padding
    return tuple(np.broadcast_to(rows, 2).tolist()), tuple(np.broadcast_to(cols, 2).tolist())


def conv_out_size(size, k, s, p, d=1):
    """Output length of a window ``k`` (dilation ``d``, stride ``s``) over ``size`` padded by ``p`` on each side."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def same_pads(n, k, s, d=1):
    """TensorFlow-style 'same' padding (before, after) of one axis: output ceil(n / s), the odd pixel at the end."""
    total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
    return (total // 2, total - total // 2)


def _pad(x, padding, value=0.0):
    (t, b), (l, r) = pads2d(padding)
    return np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def _crop(xp, padding, shape):
    (t, _), (l, _) = pads2d(padding)
    return xp[:, :, t:t + shape[2], l:l + shape[3]]


def _windows(h_out, w_out, k, s, d):
    """For each output position, the row and column slices of the (padded) input it reads."""
    for oh in range(h_out):
        for ow in range(w_out):
            rows = slice(oh * s[0], oh * s[0] + d[0] * (k[0] - 1) + 1, d[0])
            cols = slice(ow * s[1], ow * s[1] + d[1] * (k[1] - 1) + 1, d[1])
            yield oh, ow, rows, cols


# ---------------------------------------------------------------------------------------------- convolution
def conv2d_ref(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """Cross-correlation with zero padding: y[n, k, oh, ow] = sum over c, i, j of x_pad[n, c, oh*s + i*d, ...] *
    w[k, c, i, j], the channels split into ``groups``."""
    w = np.asarray(w, np.float64)
    xp = _pad(x, padding)
    kf, cg, kh, kw = w.shape
    ho = conv_out_size(xp.shape[2], kh, stride[0], 0, dilation[0])
    wo = conv_out_size(xp.shape[3], kw, stride[1], 0, dilation[1])
    y = np.zeros((xp.shape[0], kf, ho, wo))
    kg = kf // groups
    for oh, ow, rows, cols in _windows(ho, wo, (kh, kw), stride, dilation):
        for g in range(groups):
            patch = xp[:, g * cg:(g + 1) * cg, rows, cols]
            y[:, g * kg:(g + 1) * kg, oh, ow] = np.einsum("ncij,kcij->nk", patch, w[g * kg:(g + 1) * kg])
    return y


def conv2d_backward_ref(x, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """(dx, dw, db) of :func:`conv2d_ref` for the output gradient ``dy``, accumulated window by window."""
    w, dy = np.asarray(w, np.float64), np.asarray(dy, np.float64)
    kf, cg, kh, kw = w.shape
    xp = _pad(x, padding)
    dxp, dw = np.zeros_like(xp), np.zeros(w.shape)
    kg = kf // groups
    for oh, ow, rows, cols in _windows(dy.shape[2], dy.shape[3], (kh, kw), stride, dilation):
        for g in range(groups):
            ks, cs = slice(g * kg, (g + 1) * kg), slice(g * cg, (g + 1) * cg)
            dxp[:, cs, rows, cols] += np.einsum("nk,kcij->ncij", dy[:, ks, oh, ow], w[ks])
            dw[ks] += np.einsum("nk,ncij->kcij", dy[:, ks, oh, ow], xp[:, cs, rows, cols])
    return _crop(dxp, padding, np.shape(x)), dw, dy.sum(axis=(0, 2, 3))


# -------------------------------------------------------------------------------------------------- pooling
#: Pooling modes (cuDNN's): "max" (padding never wins), "avg" (the padded zeros count), "avg_exclude_pad" (the
#: mean of the real elements of each window; magmadnn's op set calls this one "avg").
POOL_MODES = ("max", "avg", "avg_exclude_pad")


def _pool_windows(x, window, stride, padding, mode):
    """The padded input, the real-element mask and the output size of a pooling."""
    if mode not in POOL_MODES:
        raise ValueError(f"unknown pooling mode {mode!r}")
    xp = _pad(x, padding, -np.inf if mode == "max" else 0.0)
    real = _pad(np.ones(np.shape(x)), padding)
    ho = (xp.shape[2] - window[0]) // stride[0] + 1
    wo = (xp.shape[3] - window[1]) // stride[1] + 1
    return xp, real, ho, wo


def pool2d_ref(x, window, stride, padding, mode):
    """Max or average pooling (``mode`` one of :data:`POOL_MODES`)."""
    xp, real, ho, wo = _pool_windows(x, window, stride, padding, mode)
    y = np.zeros((xp.shape[0], xp.shape[1], ho, wo))
    for oh, ow, rows, cols in _windows(ho, wo, window, stride, (1, 1)):
        patch = xp[:, :, rows, cols]
        if mode == "max":
            y[:, :, oh, ow] = patch.max(axis=(2, 3))
        else:
            count = real[:, :, rows, cols].sum(axis=(2, 3)) if mode == "avg_exclude_pad" else window[0] * window[1]
            y[:, :, oh, ow] = patch.sum(axis=(2, 3)) / count
    return y


def pool2d_backward_ref(x, dy, window, stride, padding, mode):
    """dx of :func:`pool2d_ref`: max routes dy to the first maximum of each window (row-major order, as cuDNN and
    the op set break ties); average spreads it evenly over the window (its real elements for avg_exclude_pad)."""
    dy = np.asarray(dy, np.float64)
    xp, real, _, _ = _pool_windows(x, window, stride, padding, mode)
    dxp = np.zeros_like(xp)
    for oh, ow, rows, cols in _windows(dy.shape[2], dy.shape[3], window, stride, (1, 1)):
        patch = xp[:, :, rows, cols]
        if mode == "max":
            flat = patch.reshape(patch.shape[0], patch.shape[1], -1)
            first = np.arange(flat.shape[2]) == flat.argmax(axis=2)[..., None]
            dxp[:, :, rows, cols] += (first * dy[:, :, oh, ow][..., None]).reshape(patch.shape)
        else:
            cells = real[:, :, rows, cols]
            count = cells.sum(axis=(2, 3)) if mode == "avg_exclude_pad" else window[0] * window[1]
            dxp[:, :, rows, cols] += cells * (dy[:, :, oh, ow] / count)[..., None, None]
    return _crop(dxp, padding, np.shape(x))


# ---------------------------------------------------------------------------------------------- activations
def _sigmoid(x):
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_ACTIVATIONS = {
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: np.tanh(x),
    "relu": lambda x, a: np.where(x > 0, x, 0.0),
    "leaky_relu": lambda x, a: np.where(x > 0, x, a * x),
    "elu": lambda x, a: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0))),
    "gelu": lambda x, a: 0.5 * x * (1 + _erf(x / np.sqrt(2))),  # exact
    "gelu_tanh": lambda x, a: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x, a: x * _sigmoid(x),
    "softplus": lambda x, a: np.logaddexp(0.0, x),
    "softsign": lambda x, a: x / (1 + np.abs(x)),
    "selu": lambda x, a: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))),
    "hard_sigmoid": lambda x, a: np.minimum(np.maximum(x + 3, 0), 6) / 6,
    "exponential": lambda x, a: np.exp(x),
    "clipped_relu": lambda x, a: np.clip(x, 0, a),
    "swish": lambda x, a: x * _sigmoid(a * x),
}
#: Every activation :func:`activation_ref` knows (the op set's and cuDNN's names).
ACTIVATION_KINDS = tuple(sorted(_ACTIVATIONS))


def activation_ref(kind, x, alpha=0.0):
    """An elementwise activation; ``alpha`` is leaky_relu's slope, elu's scale, clipped_relu's ceiling and swish's
    beta (cuDNN's ``coef``)."""
    return _ACTIVATIONS[kind](np.asarray(x, np.float64), alpha)


# ---------------------------------------------------------------------------------- softmax and batch norm
def softmax_ref(x, axes, log=False):
    """Softmax (or log-softmax) over the axes in ``axes`` (a tuple)."""
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=axes, keepdims=True)
    logs = shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True))
    return logs if log else np.exp(logs)


def batch_norm_ref(x, scale, bias, eps, axes):
    """Training-mode batch norm over ``axes``: (y, mean, inv_std, unbiased var)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    count = np.prod([x.shape[a] for a in axes])
    y = scale * (x - mean) * inv + bias
    return y, mean, inv, var * count / max(count - 1, 1)


def batch_norm_backward_ref(x, dy, scale, eps, axes):
    """(dx, dscale, dbias) of training-mode batch norm, from the textbook formula."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    count = np.prod([x.shape[a] for a in axes])
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * inv
    dbias = dy.sum(axis=axes, keepdims=True)
    dscale = (dy * xhat).sum(axis=axes, keepdims=True)
    dx = scale * inv / count * (count * dy - dbias - xhat * dscale)
    return dx, dscale, dbias


# ------------------------------------------------------------------------------------------ attention
def attention_ref(q, k, v, key_mask=None, causal=False, scale=None):
    """softmax(scale q.k) v query by query: q (B, H, Tq, dk), k (B, H, Tk, dk), v (B, H, Tk, dv); key j is dropped when
    ``causal`` and j > i or ``key_mask[b, j] == 0``; a query with no key left gives zeros."""
    b_, h_, tq, dk = q.shape
    tk = k.shape[2]
    scale = 1.0 / np.sqrt(dk) if scale is None else scale
    out = np.zeros((b_, h_, tq, v.shape[3]))
    for b in range(b_):
        for h in range(h_):
            for i in range(tq):
                keys = [j for j in range(tk) if not (causal and j > i) and (key_mask is None or key_mask[b, j] != 0)]
                if not keys:
                    continue
                s = np.array([scale * float(np.dot(q[b, h, i], k[b, h, j])) for j in keys])
                w = np.exp(s - s.max())
                w /= w.sum()
                out[b, h, i] = sum(wj * v[b, h, j] for wj, j in zip(w, keys))
    return out


def multi_head_attention_ref(query, key, value, weights, heads, key_mask=None, causal=False):
    """Keras/PyTorch multi-head attention with ``weights`` {query,key,value,output}_{kernel,bias} (biases optional):
    project, split the heads, ``attention_ref``, join the heads, project out."""

    def project(x, name):
        y = np.einsum("btd,de->bte", x, weights[f"{name}_kernel"])
        return y + weights[f"{name}_bias"] if f"{name}_bias" in weights else y

    def split(y):
        b, t, e = y.shape
        return y.reshape(b, t, heads, e // heads).transpose(0, 2, 1, 3)

    o = attention_ref(split(project(query, "query")), split(project(key, "key")), split(project(value, "value")),
                      key_mask, causal)
    b, h, t, dv = o.shape
    return project(o.transpose(0, 2, 1, 3).reshape(b, t, h * dv), "output")



# ------------------------------------------------------------------ transposed convolution, shape
def conv_transpose2d_ref(x, w, stride=(1, 1), pads=((0, 0), (0, 0)), dilation=(1, 1), out_hw=None):
    """Transposed convolution by its definition: every input pixel x[n, c, i, j] scatters x * w[c, :, a, b] to
    position (i s + a d, j s + b d) of a full output, which is then cropped by ``pads`` (top/left) to ``out_hw``
    (rows and columns past the full output are zeros). w is (C_in, C_out, R, S)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, _, h, wd = x.shape
    _, co, kh, kw = w.shape
    (t, _), (l, _) = pads2d(pads)
    full_h, full_w = (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1, (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1
    out_h, out_w = out_hw
    y = np.zeros((n, co, max(full_h, t + out_h), max(full_w, l + out_w)))
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for b in range(kw):
                    y[:, :, i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]] += \
                        x[:, :, i, j] @ w[:, :, a, b]
    return y[:, :, t:t + out_h, l:l + out_w]


def upsample_nearest2d_ref(x, size):
    """y[n, c, i, j] = x[n, c, i // sh, j // sw], position by position."""
    x = np.asarray(x)
    sh, sw = size
    n, c, h, w = x.shape
    y = np.zeros((n, c, h * sh, w * sw), x.dtype)
    for i in range(h * sh):
        for j in range(w * sw):
            y[:, :, i, j] = x[:, :, i // sh, j // sw]
    return y


def concatenate_ref(arrays, axis):
    """The arrays placed one after the other along ``axis`` by slice assignment."""
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    out, start = np.zeros(shape, arrays[0].dtype), 0
    for a in arrays:
        index = [slice(None)] * len(shape)
        index[axis] = slice(start, start + a.shape[axis])
        out[tuple(index)] = a
        start += a.shape[axis]
    return out

# ------------------------------------------------------------------ normalization, embeddings, clipping
def layer_norm_ref(x, gamma=None, beta=None, eps=1e-5, rms=False):
    """Each row over its last axis, in float64: (x - mean) / sqrt(var + eps) * gamma + beta (rms: no mean)."""
    x = np.asarray(x, np.float64)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        mu = 0.0 if rms else sum(row) / len(row)
        var = sum((v - mu) ** 2 for v in row) / len(row)
        out[r] = (row - mu) / np.sqrt(var + eps)
    out = out.reshape(x.shape)
    if gamma is not None:
        out = out * np.asarray(gamma, np.float64)
    if beta is not None:
        out = out + np.asarray(beta, np.float64)
    return out


def layer_norm_backward_ref(x, dy, gamma=None, eps=1e-5, rms=False):
    """(dx, dgamma, dbeta) of :func:`layer_norm_ref` through each row's explicit Jacobian
    d xhat_i / d x_j = rstd (delta_ij - 1/n - xhat_i xhat_j / n) (rms: without the 1/n)."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    n = x.shape[-1]
    g = dy * (1.0 if gamma is None else np.asarray(gamma, np.float64))
    rows, grows = x.reshape(-1, n), g.reshape(-1, n)
    dx, xhat = np.empty_like(rows), np.empty_like(rows)
    for r, (row, gr) in enumerate(zip(rows, grows)):
        mu = 0.0 if rms else row.mean()
        rstd = 1.0 / np.sqrt(((row - mu) ** 2).mean() + eps)
        xhat[r] = (row - mu) * rstd
        jac = rstd * (np.eye(n) - (0.0 if rms else 1.0 / n) - np.outer(xhat[r], xhat[r]) / n)
        dx[r] = jac.T @ gr
    flat_dy = dy.reshape(-1, n)
    return dx.reshape(x.shape), (flat_dy * xhat).sum(axis=0), flat_dy.sum(axis=0)


def group_norm_ref(x, groups, gamma, beta, eps=1e-5):
    """x (N, C, ...): each sample's channel group normalised over its channels and positions, then per channel
    ``* gamma + beta``."""
    x = np.asarray(x, np.float64)
    n, c = x.shape[:2]
    out = np.empty_like(x)
    size = c // groups
    for i in range(n):
        for k in range(groups):
            block = x[i, k * size:(k + 1) * size]
            out[i, k * size:(k + 1) * size] = (block - block.mean()) / np.sqrt(block.var() + eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return out * np.reshape(gamma, shape) + np.reshape(beta, shape)


def embedding_ref(table, ids):
    """out[pos] = table[ids[pos]] position by position."""
    table = np.asarray(table, np.float64)
    out = np.empty(np.shape(ids) + (table.shape[1],))
    for pos in np.ndindex(np.shape(ids)):
        out[pos] = table[ids[pos]]
    return out


def embedding_backward_ref(dy, ids, rows):
    """d table: dy[pos] added to row ids[pos], position by position."""
    dy = np.asarray(dy, np.float64)
    out = np.zeros((rows, dy.shape[-1]))
    for pos in np.ndindex(np.shape(ids)):
        out[ids[pos]] += dy[pos]
    return out


def clip_scale_ref(arrays, max_norm):
    """Keras' clip_by_global_norm factor ``max_norm / max(global L2 norm, max_norm)``."""
    norm = np.sqrt(sum(float(np.sum(np.square(np.asarray(a, np.float64)))) for a in arrays))
    return max_norm / max(norm, max_norm)

# ---------------------------------------------------------------------------------- recurrent layers
def lstm_ref(x_proj, recurrent_kernel):
    """Every step's hidden state (N, T, u) of an LSTM from a zero state, step by step from the textbook gates
    i, f, g, o (input, forget, cell, output) in float64; ``x_proj`` (N, T, 4u) is the input projection."""
    x_proj, w = np.asarray(x_proj, np.float64), np.asarray(recurrent_kernel, np.float64)
    n, steps, four = x_proj.shape
    u = four // 4
    h, c, out = np.zeros((n, u)), np.zeros((n, u)), []
    for t in range(steps):
        z = x_proj[:, t] + h @ w
        i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)


def gru_ref(x_proj, recurrent_kernel, recurrent_bias):
    """Every step's hidden state (N, T, u) of a GRU from a zero state (gates r, z, n; the reset gate scales the
    recurrent product plus its bias, as cuDNN and PyTorch do), in float64."""
    x_proj, w = np.asarray(x_proj, np.float64), np.asarray(recurrent_kernel, np.float64)
    b = np.asarray(recurrent_bias, np.float64)
    n, steps, three = x_proj.shape
    u = three // 3
    h, out = np.zeros((n, u)), []
    for t in range(steps):
        x, q = x_proj[:, t], h @ w + b
        r = _sigmoid(x[:, :u] + q[:, :u])
        z = _sigmoid(x[:, u:2 * u] + q[:, u:2 * u])
        cand = np.tanh(x[:, 2 * u:] + r * q[:, 2 * u:])
        h = (1 - z) * cand + z * h
        out.append(h)
    return np.stack(out, axis=1)
