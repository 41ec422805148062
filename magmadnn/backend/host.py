"""Host backend: the magmadnn op set on NumPy arrays.

Layout is NCHW, float32 by default, float64 works everywhere (gradient checks use it). Every op is a pure function
returning new arrays, except the ``*_update`` optimizer ops and ``batch_norm_train``'s running statistics, which
update their arguments in place.

Convolution is im2col + BLAS: the input is copied once into a zero-padded batch-last (C, Hp, Wp, N) array, the
column matrix (C*R*S, Ho*Wo*N) is gathered from a strided view of it in one copy of long contiguous runs, and
forward, backward-filter and backward-data are GEMMs against it; col2im scatters back with a loop over the R*S kernel
offsets only. Skinny GEMMs (few output rows and columns, a long shared axis, as in a first conv layer) are split into
partial GEMMs of about a million multiply-adds (see ``_SPLIT_WORK``); the forward moves each partial output into NCHW
order (with bias and a fused activation) while it is in cache. Pooling loops over the window offsets only. No loop
runs over the batch, channels or pixels.

With the optional ``jit`` extra (numba, see ``_host_jit``), the layout moves that NumPy can only do in short strided
runs (GEMM output to NCHW, col2im) and 2x2 stride-2 max pooling run as compiled single-threaded kernels; results are
the same either way. The kernels are serial on purpose: BLAS threads spin for a while after each call, and a second
thread pool would fight them for the cores.

GELU uses the tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import _erf, _host_jit, geometry
from .random import Stream, normal_doubles, uniform_doubles

name = "host"


# ----------------------------------------------------------------------------------------------- creation/transfer


def asarray(x, dtype=None) -> np.ndarray:
    """``x`` as a NumPy array; Python floats and lists of floats become float32, NumPy arrays keep their dtype."""
    if dtype is not None:
        return np.asarray(x, dtype=dtype)
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    a = np.asarray(x)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    return a


def to_numpy(a) -> np.ndarray:
    return np.asarray(a)


def zeros(shape, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def ones(shape, dtype=np.float32) -> np.ndarray:
    return np.ones(shape, dtype=dtype)


def full(shape, value, dtype=np.float32) -> np.ndarray:
    return np.full(shape, value, dtype=dtype)


def zeros_like(a) -> np.ndarray:
    return np.zeros_like(a)


def copy(a) -> np.ndarray:
    return np.array(a, copy=True)


# ---------------------------------------------------------------------------------------------------- elementwise

def add(a, b):
    return np.add(a, b)


def subtract(a, b):
    return np.subtract(a, b)


def multiply(a, b):
    return np.multiply(a, b)


def divide(a, b):
    return np.divide(a, b)


def negative(a):
    return np.negative(a)


def power(a, p):
    return np.power(a, p)


def sqrt(a):
    return np.sqrt(a)


def log(a):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(a)


def clip(a, low, high):
    return np.clip(a, low, high)


def isfinite_all(a) -> bool:
    """True when every element of ``a`` is finite."""
    return bool(np.isfinite(a).all())


# ------------------------------------------------------------------------------------------- reductions and shape


def sum(a, axis=None, keepdims=False):  # noqa: A001
    return np.sum(a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False):
    return np.mean(a, axis=axis, keepdims=keepdims)


def argmax(a, axis=None):
    return np.argmax(a, axis=axis)


def reshape(a, shape):
    return np.reshape(a, shape)


def transpose(a, axes=None):
    return np.transpose(a, axes)


def sum_to_shape(a, shape):
    """Sum ``a`` down to ``shape``: undoes NumPy broadcasting (leading axes and axes of size 1)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    lead = a.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"sum_to_shape: cannot reduce shape {a.shape} to larger rank shape {shape}")
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and a.shape[i + lead] != 1)
    out = np.sum(a, axis=axes, keepdims=True) if axes else a
    return out.reshape(shape)


def matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` for 2-D or stacked (..., m, k) arrays; transposes are views handed to BLAS as flags."""
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


# Skinny GEMMs (a few rows, a long axis) run as a loop of partial GEMMs of at most _SPLIT_WORK multiply-adds, with
# at least _SPLIT_MIN elements of the long axis each: their operands stay in cache, BLAS can take its small-matrix path
# (OpenBLAS's SkylakeX kernels are several times faster on them) and, in conv2d_forward, each partial output is moved
# into NCHW order while it is still in cache.
_SPLIT_WORK = 1_000_000
_SPLIT_MIN = 2048


def _matmul_nt(a, b):
    """``a @ b.T`` for 2-D a (M, L), b (N, L) sharing a long axis L, as the conv backward-filter GEMM needs.

    The operand with more rows goes first (BLAS threads split that side). When M*N is small and L long (a skinny
    GEMM that BLAS cannot parallelise), L is split into chunks of about ``_SPLIT_WORK / (M*N)`` and the partial
    products are summed: each chunk's operands stay in cache and BLAS can take its small-matrix path.
    """
    if a.shape[0] < b.shape[0]:
        return _matmul_nt(b, a).T
    m, n, length = a.shape[0], b.shape[0], a.shape[1]
    chunk = _SPLIT_WORK // (m * n or 1)
    if chunk < _SPLIT_MIN or length < 2 * chunk:
        return a @ b.T
    parts = -(-length // chunk)
    chunk = -(-length // parts)
    out = a[:, :chunk] @ b[:, :chunk].T
    for s in range(chunk, length, chunk):
        out += a[:, s : s + chunk] @ b[:, s : s + chunk].T
    return out


def _channel_shape(ndim: int, c: int) -> tuple[int, ...]:
    return (1, c) + (1,) * (ndim - 2)


def bias_add(x, b):
    """``x + b`` with ``b`` of shape (C,) broadcast along axis 1."""
    return x + b.reshape(_channel_shape(x.ndim, b.shape[0]))


def channel_sum(a):
    """Sum of ``a`` over every axis but 1."""
    if a.ndim == 2:
        return a.sum(axis=0)
    n, c = a.shape[:2]
    return a.reshape(n, c, -1).sum(axis=2).sum(axis=0)


def bias_grad(dy):
    """The gradient of ``bias_add`` with respect to ``b``."""
    return channel_sum(dy)


# ----------------------------------------------------------------------------------------------------- activation

_GELU_C = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _fused_rows(x, *same, small=()) -> bool:
    """True when ``_host_jit``'s fused row kernels take these arrays: numba there, ``same`` of x's shape, all of
    one float dtype and C-contiguous (``small``: any shape). Serial kernels: a numba thread pool (prange) measured
    slower on 2 shared cores, its waking threads contending with OpenBLAS's spinning ones after each GEMM."""
    if _host_jit.kernels is None or x.dtype not in (np.float32, np.float64):
        return False
    arrays = (x, *same, *small)
    return (all(b.shape == x.shape for b in same)
            and all(isinstance(b, np.ndarray) and b.dtype == x.dtype and b.flags.c_contiguous for b in arrays))


def _sigmoid(x):
    y = np.multiply(x, 0.5)  # sigmoid(x) = (1 + tanh(x/2)) / 2: stable for any x, one transcendental
    np.tanh(y, out=y)
    y += 1
    y *= 0.5
    return y


def activation_forward(x, kind, alpha=0.0):
    """y = act(x) for a kind of ``geometry.ACTIVATIONS`` (gelu exact, gelu_tanh the tanh approximation)."""
    geometry.check_activation(kind, "activation_forward")
    one = x.dtype.type
    if kind == "relu":
        return np.maximum(x, 0)
    if kind == "sigmoid":
        return _sigmoid(x)
    if kind == "tanh":
        return np.tanh(x)
    if kind == "leaky_relu":
        return np.where(x > 0, x, x * alpha)
    if kind == "elu":
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * alpha)
    if kind == "gelu":  # x Phi(x) = x (1 + erf(x / sqrt 2)) / 2
        y = _erf.erf(x * one(_SQRT_HALF))
        y += 1
        y *= x
        y *= one(0.5)
        return y
    if kind == "silu":
        y = _sigmoid(x)
        y *= x
        return y
    if kind == "softplus":  # max(x, 0) + log1p(exp(-|x|)): no overflow
        y = np.exp(-np.abs(x))
        np.log1p(y, out=y)
        y += np.maximum(x, 0)
        return y
    if kind == "softsign":
        return x / (np.abs(x) + one(1))
    if kind == "selu":
        return np.where(x > 0, x * one(geometry.SELU_SCALE),
                        np.expm1(np.minimum(x, 0)) * one(geometry.SELU_SCALE * geometry.SELU_ALPHA))
    if kind == "hard_sigmoid":  # relu6(x + 3) / 6
        y = np.add(x, one(3))
        np.clip(y, 0, 6, out=y)
        y /= one(6)
        return y
    if kind == "exponential":
        return np.exp(x)
    y = np.multiply(x, x)  # gelu_tanh: 0.5 x (1 + tanh(c x (1 + k x^2))), in place on one temporary
    y *= one(0.044715)
    y += 1
    y *= x
    y *= one(_GELU_C)
    np.tanh(y, out=y)
    y += 1
    y *= x
    y *= one(0.5)
    return y


#: Kinds whose gradient reads the forward output y (recomputed when y is None).
_BACKWARD_READS_Y = ("sigmoid", "tanh", "elu", "selu", "exponential")


def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx for ``activation_forward``; ``y`` is the forward output (recomputed when None)."""
    geometry.check_activation(kind, "activation_backward")
    if y is None and kind in _BACKWARD_READS_Y:
        y = activation_forward(x, kind, alpha)
    one = dy.dtype.type
    if kind == "relu":
        return np.multiply(dy, (y if y is not None else x) > 0)
    if kind == "sigmoid":
        return dy * (y * (1 - y))
    if kind == "tanh":
        return dy * (1 - y * y)
    if kind == "leaky_relu":
        return np.where(x > 0, dy, dy * alpha)
    if kind == "elu":
        return np.where(x > 0, dy, dy * (y + alpha))
    if kind == "gelu":  # Phi(x) + x phi(x)
        d = _erf.erf(x * one(_SQRT_HALF))
        d += 1
        d *= one(0.5)
        d += x * np.exp(np.square(x) * one(-0.5)) * one(_INV_SQRT_2PI)
        d *= dy
        return d
    if kind == "silu":  # s (1 + x (1 - s))
        s = _sigmoid(x)
        d = np.subtract(1, s)
        d *= x
        d += 1
        d *= s
        d *= dy
        return d
    if kind == "softplus":
        return dy * _sigmoid(x)
    if kind == "softsign":
        d = np.abs(x) + one(1)
        np.square(d, out=d)
        return dy / d
    if kind == "selu":
        return np.where(x > 0, dy * one(geometry.SELU_SCALE),
                        dy * (y + one(geometry.SELU_SCALE * geometry.SELU_ALPHA)))
    if kind == "hard_sigmoid":
        return np.where((x > -3) & (x < 3), dy / one(6), one(0))
    if kind == "exponential":
        return dy * y
    return _gelu_backward(dy, x)


def _gelu_backward(dy, x):
    """dy * GELU_tanh'(x) = dy (1 + t + x (1 - t^2) c (1 + 3k x^2)) / 2 with t = tanh(c x (1 + k x^2)), in place on
    three temporaries (the textbook expression's dozen temporaries cost 15x more on large arrays)."""
    one = x.dtype.type
    x2 = x * x
    du = x2 * one(3 * 0.044715 * _GELU_C)
    du += one(_GELU_C)
    t = x2 * one(0.044715)
    t += 1
    t *= x
    t *= one(_GELU_C)
    np.tanh(t, out=t)
    d = np.multiply(t, t, out=x2)
    np.subtract(1, d, out=d)
    d *= x
    d *= du
    d += t
    d += 1
    d *= dy
    d *= one(0.5)
    return d


# -------------------------------------------------------------------------------------------------------- softmax


def softmax(x, axis=-1):
    e = x - np.max(x, axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def log_softmax(x, axis=-1):
    s = x - np.max(x, axis=axis, keepdims=True)
    s -= np.log(np.sum(np.exp(s), axis=axis, keepdims=True))
    return s


def softmax_backward(dy, y, axis=-1):
    """dx for y = softmax(x)."""
    return y * (dy - np.sum(dy * y, axis=axis, keepdims=True))


def log_softmax_backward(dy, y, axis=-1):
    """dx for y = log_softmax(x)."""
    return dy - np.exp(y) * np.sum(dy, axis=axis, keepdims=True)


def softmax_cross_entropy(logits, labels):
    """Per-sample cross entropy of softmax(logits) with int labels (N,) or one-hot/soft labels (N, C).

    Returns ``(loss (N,), probs (N, C))``; stable for any logits (shift by the row max, one exp).
    """
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    probs = np.exp(shifted)
    total = probs.sum(axis=1)
    probs /= total[:, None]
    log_total = np.log(total)
    if labels.ndim == 1:
        loss = log_total - shifted[np.arange(logits.shape[0]), labels]
    else:
        labels = labels.astype(logits.dtype, copy=False)
        loss = log_total * labels.sum(axis=1) - np.einsum("nc,nc->n", labels, shifted)
    return loss.astype(logits.dtype, copy=False), probs


def softmax_cross_entropy_backward(probs, labels, dloss):
    """dlogits for ``softmax_cross_entropy`` given dloss of shape (N,)."""
    if labels.ndim == 1:
        d = probs.copy()
        d[np.arange(probs.shape[0]), labels] -= 1
    else:
        labels = labels.astype(probs.dtype, copy=False)
        d = probs * labels.sum(axis=1, keepdims=True)
        d -= labels
    d *= np.asarray(dloss, dtype=probs.dtype).reshape(-1, 1)
    return d


# ---------------------------------------------------------------------------------------------------- convolution



_pads = geometry.pads4


def _pad_input(x, pads, fill=0.0):
    t, b, l, r = pads
    if not (t or b or l or r):
        return x
    n, c, h, w = x.shape
    xp = np.full((n, c, h + t + b, w + l + r), fill, dtype=x.dtype)
    xp[:, :, t : t + h, l : l + w] = x
    return xp


class _ConvPlan:
    """Geometry of one convolution, and the batch-last working layout its gathers and scatters use.

    The input is copied once, zero-padded, into (C, Hp, Wp, N) order. A kernel offset (r, s) then selects, for every
    (c, output row), one block of Wo*N values that are contiguous in memory when the horizontal stride is 1 (runs of
    N otherwise), so im2col and col2im move long runs instead of Wo-sized snippets. The column matrix is
    (C*R*S, Ho*Wo*N): forward, backward-filter and backward-data are each one GEMM against it.
    """

    def __init__(self, x_shape, w_shape, stride, padding, dilation):
        self.n, self.c, self.h, self.w = x_shape
        self.k, self.cg, self.kh, self.kw = w_shape
        (self.sh, self.sw), (self.dh, self.dw) = geometry.pair(stride), geometry.pair(dilation)
        self.pads = _pads(padding)
        t, b, l, r = self.pads
        self.hp, self.wp = self.h + t + b, self.w + l + r
        self.ho, self.wo = geometry.output_hw((self.h, self.w), (self.kh, self.kw), (self.sh, self.sw),
                                              ((t, b), (l, r)), (self.dh, self.dw))
        self.crs = self.cg * self.kh * self.kw  # rows of the column matrix per group

    def offset(self, i, j):
        """Index of the (C, Ho, Wo, N) block of the padded batch-last input under kernel offset (i, j)."""
        hs = slice(i * self.dh, i * self.dh + self.sh * (self.ho - 1) + 1, self.sh)
        ws = slice(j * self.dw, j * self.dw + self.sw * (self.wo - 1) + 1, self.sw)
        return slice(None), hs, ws, slice(None)

    def padded_chwn(self, x):
        """x (N, C, H, W) copied into a zero-padded (C, Hp, Wp, N) array."""
        t, _, l, _ = self.pads
        make = np.zeros if any(self.pads) else np.empty
        xt = make((self.c, self.hp, self.wp, self.n), dtype=x.dtype)
        xt[:, t : t + self.h, l : l + self.w, :] = x.transpose(1, 2, 3, 0)
        return xt

    def im2col(self, x):
        """Column matrix (C*R*S, Ho*Wo*N) of x."""
        xt = self.padded_chwn(x)
        sc, sh, sw, sn = xt.strides
        view = as_strided(
            xt,
            shape=(self.c, self.kh, self.kw, self.ho, self.wo, self.n),
            strides=(sc, sh * self.dh, sw * self.dw, sh * self.sh, sw * self.sw, sn),
            writeable=False,
        )
        cols = np.empty(view.shape, dtype=x.dtype)
        np.copyto(cols, view)
        return cols.reshape(self.c * self.kh * self.kw, -1)

    def col2im(self, dcols):
        """Scatter-add columns (C*R*S, Ho*Wo*N) into dx (N, C, H, W): a loop over the R*S kernel offsets only."""
        d6 = dcols.reshape(self.c, self.kh, self.kw, self.ho, self.wo, self.n)
        jit = _host_jit.kernels
        if jit is not None:
            dx = np.empty((self.n, self.c, self.h, self.w), dtype=dcols.dtype)
            jit.col2im(d6, dx, self.sh, self.sw, self.dh, self.dw, self.pads[0], self.pads[2])
            return dx
        dxt = np.zeros((self.c, self.hp, self.wp, self.n), dtype=dcols.dtype)
        for i in range(self.kh):
            for j in range(self.kw):
                dxt[self.offset(i, j)] += d6[:, i, j]
        t, _, l, _ = self.pads
        dx = np.empty((self.n, self.c, self.h, self.w), dtype=dcols.dtype)
        np.copyto(dx, dxt[:, t : t + self.h, l : l + self.w, :].transpose(3, 0, 1, 2))
        return dx

    def dy_rows(self, dy, groups):
        """dy (N, K, Ho, Wo) as (K, Ho*Wo*N), or (G, K/G, Ho*Wo*N) when grouped."""
        rows = np.empty((self.k, self.ho, self.wo, self.n), dtype=dy.dtype)
        np.copyto(rows, dy.transpose(1, 2, 3, 0))
        rows = rows.reshape(self.k, -1)
        return rows if groups == 1 else rows.reshape(groups, self.k // groups, -1)


# Activations that conv2d_forward can apply in place on its output: their backward needs only the output y.
FUSED_ACTIVATIONS = geometry.FUSED_ACTIVATIONS


def conv2d_forward(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=None, saved=None,
                   activation=None):
    """Cross-correlation of x (N,C,H,W) with w (K,C/groups,R,S) -> (N,K,Ho,Wo).

    Extensions: ``bias`` (K,) is fused into the output copy; ``activation`` (one of ``FUSED_ACTIVATIONS``) is applied
    to the output in place, so its backward is ``activation_backward(dy, None, y, kind)``; when ``saved`` is a dict
    the column matrix is kept in it so that ``conv2d_backward_filter(..., saved=saved)`` skips a second im2col.
    """
    if activation is not None and activation not in FUSED_ACTIVATIONS:
        raise ValueError(f"conv2d_forward: activation {activation!r} cannot be fused; expected one of "
                         f"{FUSED_ACTIVATIONS} or None")
    plan = _ConvPlan(x.shape, w.shape, stride, padding, dilation)
    cols = plan.im2col(x)
    if saved is not None:
        saved["cols"] = cols
    k = plan.k
    out = np.empty((plan.n, k, plan.ho, plan.wo), dtype=np.result_type(x, w))
    store = _OutputStore(out, bias, activation)
    if groups > 1:
        y = np.matmul(w.reshape(groups, k // groups, -1), cols.reshape(groups, plan.crs, -1))
        store(y.reshape(k, plan.ho, plan.wo, plan.n), 0)
    else:
        w2 = w.reshape(k, -1)
        run = plan.wo * plan.n  # columns per output row
        band = _SPLIT_WORK // (k * plan.crs * run) if run else plan.ho  # output rows per partial GEMM
        if band < 1 or band * run < _SPLIT_MIN:
            band = plan.ho
        for h0 in range(0, plan.ho, band):
            h1 = h0 + band if h0 + band < plan.ho else plan.ho
            y = np.matmul(w2, cols[:, h0 * run : h1 * run])
            store(y.reshape(k, h1 - h0, plan.wo, plan.n), h0)
    if activation is not None and not store.relu:  # the JIT store applies a ReLU itself
        _activate_inplace(out, activation)
    return out


class _OutputStore:
    """Writes GEMM output bands (K, h, Wo, N) into rows h0:h0+h of the NCHW output, adding the bias.

    The JIT kernel also applies a ReLU in the same pass; the NumPy path leaves activations to one in-place pass over
    the whole output afterwards (cheaper than one per band on strided slices).
    """

    def __init__(self, out, bias, activation):
        self.out = out
        self.jit = _host_jit.kernels
        self.relu = self.jit is not None and activation == "relu"
        k = out.shape[1]
        if self.jit is not None:
            self.bias = np.zeros(k, out.dtype) if bias is None else np.ascontiguousarray(bias, dtype=out.dtype)
        else:
            self.bias = None if bias is None else bias.reshape(1, k, 1, 1)

    def __call__(self, y, h0):
        if self.jit is not None:
            self.jit.store_nchw(y, self.out, h0, self.bias, self.relu)
            return
        o = self.out[:, :, h0 : h0 + y.shape[1]]
        if self.bias is None:
            np.copyto(o, y.transpose(3, 0, 1, 2))
        else:
            np.add(y.transpose(3, 0, 1, 2), self.bias, out=o)


def _activate_inplace(a, kind):
    """One of ``FUSED_ACTIVATIONS`` applied to ``a`` in place (the same formulas as ``activation_forward``)."""
    if kind == "relu":
        np.maximum(a, 0, out=a)
    elif kind == "tanh":
        np.tanh(a, out=a)
    else:  # sigmoid(x) = (1 + tanh(x/2)) / 2
        a *= 0.5
        np.tanh(a, out=a)
        a += 1
        a *= 0.5


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dx (N,C,H,W) of ``conv2d_forward``."""
    plan = _ConvPlan(tuple(x_shape), w.shape, stride, padding, dilation)
    rows = plan.dy_rows(dy, groups)
    if groups == 1:
        dcols = np.matmul(w.reshape(plan.k, -1).T, rows)
    else:
        wg = w.reshape(groups, plan.k // groups, -1)
        dcols = np.matmul(wg.transpose(0, 2, 1), rows)
    return plan.col2im(dcols)


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    """dw (K,C/groups,R,S) of ``conv2d_forward``; ``saved`` is the dict the forward filled (optional)."""
    plan = _ConvPlan(x.shape, tuple(w_shape), stride, padding, dilation)
    cols = saved.get("cols") if saved else None
    if cols is None:
        cols = plan.im2col(x)
    rows = plan.dy_rows(dy, groups)
    if groups == 1:
        dw = _matmul_nt(rows, cols)
    else:
        colg = cols.reshape(groups, plan.crs, -1)
        dw = np.stack([_matmul_nt(rows[g], colg[g]) for g in range(groups)])
    return np.ascontiguousarray(dw).reshape(w_shape)


def conv2d_backward_bias(dy):
    return bias_grad(dy)


# -------------------------------------------------------------------------------------------------------- pooling


def _pool_geometry(x_shape, window, stride, padding):
    (wh, ww), (sh, sw), pads = geometry.pair(window), geometry.pair(stride), _pads(padding)
    t, b, l, r = pads
    ho, wo = geometry.output_hw(x_shape[2:], (wh, ww), (sh, sw), ((t, b), (l, r)))
    return (wh, ww), (sh, sw), pads, ho, wo


def _offset_slices(i, j, ho, wo, stride):
    sh, sw = stride
    return (slice(None), slice(None), slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))


def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max or average pooling over (H, W) -> ``(y, ctx)``.

    Max ignores padding (padded with -inf); the gradient goes to the first maximum of each window (row-major), and
    ``ctx`` is that window offset. Average divides by the number of real (unpadded) elements in each window, and
    ``ctx`` is that count. Both loop over the window offsets only, each step one vectorised op on (N, C, Ho, Wo).
    """
    if mode not in ("max", "avg"):
        raise ValueError(f"pool2d_forward: unknown mode {mode!r}; expected 'max' or 'avg'")
    (wh, ww), st, pads, ho, wo = _pool_geometry(x.shape, window, stride, padding)
    jit = _host_jit.kernels
    if jit is not None and _is_max_2x2(mode, (wh, ww), st, pads):
        y = np.empty((x.shape[0], x.shape[1], ho, wo), dtype=x.dtype)
        idx = np.empty(y.shape, dtype=np.uint8)
        jit.max_pool2x2_forward(np.ascontiguousarray(x), y, idx)
        return y, idx
    if st == (wh, ww) and not any(pads):
        views = _window_planes(x, wh, ww, ho, wo)
    else:
        xp = _pad_input(x, pads, fill=-np.inf if mode == "max" else 0.0)
        views = [xp[_offset_slices(k // ww, k % ww, ho, wo, st)] for k in range(wh * ww)]
    if mode == "avg":
        y = np.array(views[0])
        for v in views[1:]:
            y += v
        counts = _avg_counts(x.shape, (wh, ww), st, pads, ho, wo, x.dtype)
        y /= counts
        return y, counts
    y = np.array(views[0]) if len(views) == 1 else np.maximum(views[0], views[1])
    for v in views[2:]:
        np.maximum(y, v, out=y)
    # offset of the first maximum = number of leading offsets whose value differs from the max
    not_yet = np.not_equal(views[0], y)
    idx = not_yet.astype(np.uint8 if len(views) < 256 else np.int32)
    for v in views[1:-1]:
        not_yet &= np.not_equal(v, y)
        idx += not_yet
    return y, idx


def _window_planes(x, wh, ww, ho, wo):
    """Non-overlapping windows: the wh*ww window offsets of x as contiguous (N, C, Ho, Wo) planes, made by one
    strided copy, so that the reductions after it run on contiguous arrays instead of short strided runs."""
    n, c = x.shape[:2]
    sn, sc, sh, sw = x.strides
    view = as_strided(x, shape=(wh, ww, n, c, ho, wo), strides=(sh, sw, sn, sc, sh * wh, sw * ww), writeable=False)
    planes = np.empty(view.shape, dtype=x.dtype)
    np.copyto(planes, view)
    return list(planes.reshape(wh * ww, n, c, ho, wo))


def _is_max_2x2(mode, window, stride, pads) -> bool:
    """The common max pooling that the optional JIT kernels cover: 2x2 windows, stride 2, no padding."""
    return mode == "max" and tuple(window) == (2, 2) and tuple(stride) == (2, 2) and not any(pads)


def _avg_counts(x_shape, window, stride, pads, ho, wo, dtype):
    if not any(pads):
        return np.asarray(window[0] * window[1], dtype=dtype)
    ones_p = _pad_input(np.ones((1, 1) + tuple(x_shape[2:]), dtype=dtype), pads)
    counts = np.zeros((1, 1, ho, wo), dtype=dtype)
    for k in range(window[0] * window[1]):
        counts += ones_p[_offset_slices(k // window[1], k % window[1], ho, wo, stride)]
    return counts


def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    """dx of ``pool2d_forward``; ``ctx`` is what the forward returned."""
    if mode not in ("max", "avg"):
        raise ValueError(f"pool2d_backward: unknown mode {mode!r}; expected 'max' or 'avg'")
    (wh, ww), st, pads, ho, wo = _pool_geometry(x.shape, window, stride, padding)
    jit = _host_jit.kernels
    if jit is not None and _is_max_2x2(mode, (wh, ww), st, pads):
        dx = np.empty(x.shape, dtype=dy.dtype)
        jit.max_pool2x2_backward(np.ascontiguousarray(dy), np.ascontiguousarray(ctx), dx)
        return dx
    t, b, l, r = pads
    n, c, h, w = x.shape
    dxp = np.zeros((n, c, h + t + b, w + l + r), dtype=dy.dtype)
    overlapping = st[0] < wh or st[1] < ww
    g = dy / ctx if mode == "avg" else dy
    for k in range(wh * ww):
        target = dxp[_offset_slices(k // ww, k % ww, ho, wo, st)]
        if mode == "avg":
            part = g
        elif overlapping:
            part = np.multiply(g, ctx == k)
        else:  # each input pixel is in at most one window: write in place, no temporary
            np.multiply(g, ctx == k, out=target)
            continue
        if overlapping:
            target += part
        else:
            target[...] = part
    if any(pads):
        return np.ascontiguousarray(dxp[:, :, t : t + h, l : l + w])
    return dxp


# ----------------------------------------------------------------------------------------------------- batch norm


def _bn_axes(x):
    if x.ndim == 4:
        return (0, 2, 3)
    if x.ndim == 2:
        return (0,)
    raise ValueError(f"batch_norm: expected a 2-D (N, F) or 4-D (N, C, H, W) input, got shape {x.shape}")


def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise with batch statistics; update running stats in place (running var: the unbiased variance, or the
    biased one when not ``unbiased``)."""
    axes = _bn_axes(x)
    shape = _channel_shape(x.ndim, x.shape[1])
    mu = x.mean(axis=axes)
    xc = x - mu.reshape(shape)
    var = np.mean(np.square(xc), axis=axes)
    inv_std = 1.0 / np.sqrt(var + eps)
    xhat = xc * inv_std.reshape(shape).astype(x.dtype, copy=False)
    y = xhat * gamma.reshape(shape) + beta.reshape(shape)
    m = x.size // x.shape[1]
    batch_var = var * (m / (m - 1)) if unbiased and m > 1 else var
    running_mean *= momentum
    running_mean += (1 - momentum) * mu
    running_var *= momentum
    running_var += (1 - momentum) * batch_var
    return y, (xhat, inv_std)


def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    shape = _channel_shape(x.ndim, x.shape[1])
    _bn_axes(x)
    scale = gamma / np.sqrt(running_var + eps)
    shift = beta - running_mean * scale
    return x * scale.reshape(shape).astype(x.dtype, copy=False) + shift.reshape(shape).astype(x.dtype, copy=False)


def batch_norm_backward(dy, x, gamma, ctx):
    """(dx, dgamma, dbeta) of ``batch_norm_train``."""
    xhat, inv_std = ctx
    axes = _bn_axes(x)
    shape = _channel_shape(x.ndim, x.shape[1])
    m = x.size // x.shape[1]
    dbeta = dy.sum(axis=axes)
    dgamma = (dy * xhat).sum(axis=axes)
    dx = dy * m
    dx -= dbeta.reshape(shape)
    dx -= xhat * dgamma.reshape(shape)
    dx *= (gamma * inv_std / m).reshape(shape).astype(dy.dtype, copy=False)
    return dx, dgamma, dbeta


# -------------------------------------------------------------------------------------------------------- dropout


def dropout_forward(x, rate, rng):
    """Inverted dropout: ``(x * mask, mask)``; mask is 1/(1-rate) where the draw's uniform (x's dtype) >= rate."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_forward: rate must be in [0, 1), got {rate}")
    u = uniform(rng, x.shape, 0.0, 1.0, x.dtype)
    mask = np.greater_equal(u, x.dtype.type(rate)).astype(x.dtype)
    mask *= x.dtype.type(1.0 / (1.0 - rate))
    return x * mask, mask


def dropout_backward(dy, mask):
    return dy * mask


# -------------------------------------------------------------------------------------- in-place optimizer updates


def _decayed(g, p, weight_decay):
    return g + weight_decay * p if weight_decay else g


_scratch = threading.local()


def _workspace(shape, dtype) -> np.ndarray:
    """A reusable per-thread scratch array (contents undefined) for the temporaries of the update ops."""
    cache = getattr(_scratch, "arrays", None)
    if cache is None:
        cache = _scratch.arrays = {}
    key = (tuple(shape), np.dtype(dtype).str)
    buf = cache.get(key)
    if buf is None:
        buf = cache[key] = np.empty(shape, dtype=dtype)
    return buf


def _keras_decay(p, lr, weight_decay):
    """Keras 3's decoupled weight decay, in place: p -= lr wd p."""
    if weight_decay:
        p -= (lr * weight_decay) * p


def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p (``keras``: p -= lr wd p first); v = momentum v + g'; p -= lr (g' + momentum v if
    nesterov else v)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    tmp = _workspace(p.shape, p.dtype)
    if momentum:
        v *= momentum
        v += g
        if nesterov:
            np.multiply(v, momentum, out=tmp)
            tmp += g
            tmp *= lr
        else:
            np.multiply(v, lr, out=tmp)
    else:
        np.multiply(g, lr, out=tmp)
    p -= tmp


def running_stat_update(running, batch, momentum):
    """In place: running -= (1 - momentum) (running - batch)."""
    running -= (running - batch) * (1.0 - momentum)


def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled=True``: AdamW, p *= 1 - lr wd); ``step`` counts from 1; ``keras``: Keras'
    epsilon placement. ``lr`` may be the float64 vector {lr, bc1, bc2} (the bias corrections given, ``step``
    unused)."""
    if isinstance(lr, np.ndarray):
        lr, bc1, bc2 = (float(value) for value in lr[:3])
    else:
        bc1, bc2 = 1.0 - beta1**step, 1.0 - beta2**step
    if weight_decay and decoupled:
        p *= 1.0 - lr * weight_decay
    elif weight_decay:
        g = g + weight_decay * p
    m *= beta1
    m += (1.0 - beta1) * g
    v *= beta2
    v += (1.0 - beta2) * np.square(g)
    if keras:
        denom = np.sqrt(v)
        denom += eps
        p -= (lr * math.sqrt(bc2) / bc1) * m / denom
        return
    denom = np.sqrt(v / bc2)
    denom += eps
    p -= (lr / bc1) * m / denom


def _root(s, eps, keras):
    """sqrt(s + eps) (Keras) or sqrt(s) + eps."""
    if keras:
        return np.sqrt(s + eps)
    denom = np.sqrt(s)
    denom += eps
    return denom


def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s = rho s + (1-rho) g^2; p -= lr g / (sqrt(s) + eps) (``keras``: / sqrt(s + eps), decoupled decay)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    s *= rho
    s += (1.0 - rho) * np.square(g)
    p -= lr * g / _root(s, eps, keras)


def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s += g^2; p -= lr g / (sqrt(s) + eps) (``keras``: / sqrt(s + eps), decoupled decay)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    s += np.square(g)
    p -= lr * g / _root(s, eps, keras)


# ------------------------------------------------------------------------------------------ attention


_CAUSAL_BIAS: dict = {}


def _causal_bias(tq: int, tk: int, dtype) -> np.ndarray:
    """(tq, tk): 0 where key j <= query i, -inf elsewhere (added to the scores; made once per shape and dtype)."""
    key = (tq, tk, dtype)
    bias = _CAUSAL_BIAS.get(key)
    if bias is None:
        bias = _CAUSAL_BIAS[key] = np.where(np.tri(tq, tk, dtype=bool), 0.0, -np.inf).astype(dtype)
    return bias


def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Softmax over the last axis of ``scale * x`` (B, H, Tq, Tk) with causal and key masks (added as 0 / -inf);
    rows with no key left are 0."""
    s = np.multiply(x, x.dtype.type(scale))
    if causal:
        s += _causal_bias(x.shape[2], x.shape[3], x.dtype)
    if mask is not None:
        s += np.where(mask != 0, 0.0, -np.inf).astype(x.dtype)[:, None, None, :]
    top = np.max(s, axis=-1, keepdims=True)
    if causal or mask is not None:
        top[~np.isfinite(top)] = 0  # a row with no key left: exp(-inf) = 0 everywhere
    s -= top
    np.exp(s, out=s)
    total = np.sum(s, axis=-1, keepdims=True)
    if causal or mask is not None:
        return np.divide(s, total, out=s, where=total > 0)
    s /= total
    return s


def masked_softmax_backward(dy, y, scale=1.0):
    """dx of ``masked_softmax``: ``scale * y * (dy - sum(dy * y))`` along the last axis."""
    if _fused_rows(y, dy):
        dx = np.empty_like(y)
        rows = (-1, y.shape[-1])
        _host_jit.kernels.masked_softmax_backward(dy.reshape(rows), y.reshape(rows), y.dtype.type(scale),
                                                  dx.reshape(rows))
        return dx
    dx = dy - np.sum(dy * y, axis=-1, keepdims=True)
    dx *= y
    dx *= y.dtype.type(scale)
    return dx



# ------------------------------------------------------------- normalization, embeddings, gradient clipping


def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """Rows over the last axis: y = (x - mean) * rstd * gamma + beta (``rms``: mean 0, var = mean(x^2))."""
    if gamma is not None and beta is not None and _fused_rows(x, small=(gamma, beta)):
        rows = (-1, x.shape[-1])
        y, mu, rstd = np.empty_like(x), np.empty(x.shape[:-1] + (1,), x.dtype), np.empty(x.shape[:-1] + (1,), x.dtype)
        _host_jit.kernels.layer_norm_forward(x.reshape(rows), gamma, beta, float(eps), bool(rms), y.reshape(rows),
                                             mu.reshape(-1), rstd.reshape(-1))
        return y, (mu, rstd)
    mu = np.zeros(x.shape[:-1] + (1,), x.dtype) if rms else x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + x.dtype.type(eps))
    y = xc * rstd
    if gamma is not None:
        y *= gamma
    if beta is not None:
        y += beta
    return y, (mu, rstd)


def layer_norm_backward(dy, x, gamma, ctx, rms=False):
    """(dx, dgamma, dbeta) of ``layer_norm_forward``; dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma."""
    mu, rstd = ctx
    if gamma is not None and _fused_rows(x, dy, small=(gamma, mu, rstd)):
        cols = x.shape[-1]
        dx, sums = np.empty_like(x), np.zeros((2, cols), np.float64)
        _host_jit.kernels.layer_norm_backward(dy.reshape(-1, cols), x.reshape(-1, cols), gamma, mu.reshape(-1),
                                              rstd.reshape(-1), bool(rms), dx.reshape(-1, cols), sums[0], sums[1])
        return dx, sums[0].astype(x.dtype), sums[1].astype(x.dtype)
    xhat = (x - mu) * rstd
    g = dy * gamma if gamma is not None else dy
    dx = g - xhat * np.mean(g * xhat, axis=-1, keepdims=True)
    if not rms:
        dx -= np.mean(g, axis=-1, keepdims=True)
    dx *= rstd
    if gamma is None:
        return dx, None, None
    cols = x.shape[-1]
    return dx, (dy * xhat).reshape(-1, cols).sum(axis=0), dy.reshape(-1, cols).sum(axis=0)


def _check_indices(indices, rows, fn):
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{fn}: indices must be an integer array, got dtype {indices.dtype}")
    if indices.size and (indices.min() < 0 or indices.max() >= rows):
        bad = indices[(indices < 0) | (indices >= rows)].flat[0]
        raise ValueError(f"{fn}: index {bad} is out of range for a table of {rows} rows; expected indices in "
                         f"[0, {rows})")


def embedding_forward(table, indices):
    """``table[indices]``: an index outside [0, V) is a ValueError."""
    _check_indices(indices, table.shape[0], "embedding_forward")
    return np.take(table, indices, axis=0)


def embedding_backward(dy, indices, num_rows):
    """Rows of dy summed per index: a stable sort of the indices, then one ``np.add.reduceat`` over the runs of equal
    indices (a fixed order, so the same bits every run; about 3x faster than ``np.add.at``)."""
    dim = dy.shape[-1]
    flat, rows = indices.reshape(-1), dy.reshape(-1, dim)
    keep = (flat >= 0) & (flat < num_rows)
    if not keep.all():
        flat, rows = flat[keep], rows[keep]
    out = np.zeros((num_rows, dim), dtype=dy.dtype)
    if flat.size:
        order = np.argsort(flat, kind="stable")
        ids = flat[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        out[ids[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return out


def clip_norm_scale(arrays, max_norm):
    """0-d ``max_norm / max(norm, max_norm)`` for the global L2 norm of ``arrays``."""
    dtype = arrays[0].dtype
    total = np.zeros((), dtype)
    for a in arrays:
        total += np.vdot(a, a)
    with np.errstate(divide="ignore"):
        scale = dtype.type(max_norm) / np.sqrt(total)  # a zero norm gives inf, clipped to 1; NaN stays NaN
    return np.asarray(np.minimum(scale, dtype.type(1)), dtype=dtype)


def finite_flag(arrays):
    """0-d 1 when every element of ``arrays`` is finite, else 0 (the arrays' dtype)."""
    _need_arrays("finite_flag", arrays)
    ok = all(bool(np.isfinite(a).all()) for a in arrays)
    return np.asarray(1 if ok else 0, dtype=arrays[0].dtype)


def revert_update(a, saved, keep) -> None:
    """In place: ``a = saved`` unless ``keep`` is 1."""
    _same_update("revert_update", a, saved, keep)
    if not keep:
        np.copyto(a, saved)


def loss_scale_update(scale, counter, finite, growth_steps) -> None:
    """In place: Keras' rule (ops.loss_scale_update), read plainly."""
    _same_update("loss_scale_update", scale, counter, finite)
    if finite:
        counter[...] = counter + 1
        if counter == growth_steps:
            counter[...] = 0
            scale[...] = scale * 2
    else:
        counter[...] = 0
        scale[...] = scale * 0.5


def _need_arrays(who: str, arrays) -> None:
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"{who}: expected a non-empty list of arrays, got {arrays!r}")
    if len({a.dtype for a in arrays}) > 1:
        raise TypeError(f"{who}: the arrays have dtypes {sorted({str(a.dtype) for a in arrays})}; expected one")


def _same_update(who: str, a, *others) -> None:
    """The first operand's dtype for all, and 0-d flags/scales where the op reads them as scalars."""
    for o in others:
        if o.dtype != a.dtype:
            raise TypeError(f"{who}: operands have dtypes {a.dtype} and {o.dtype}; expected one dtype")
    if who == "revert_update":
        if a.shape != others[0].shape or others[1].shape != ():
            raise ValueError(f"{who}: a {a.shape} and saved {others[0].shape} must match and keep be 0-d, got "
                             f"keep {others[1].shape}")
    elif any(o.shape != () for o in (a, *others)):
        raise ValueError(f"{who}: scale, counter and finite must be 0-d arrays")


# --------------------------------------------------------------------------------------------------------- random


def rng(seed=None) -> Stream:
    """A counter-based random stream (the op set's RNG protocol, :mod:`magmadnn.backend.random`)."""
    return Stream(np.random.SeedSequence().generate_state(1, np.uint64)[0] if seed is None else seed)


def uniform(rng, shape, low=0.0, high=1.0, dtype=np.float32):
    """Draw ``rng.take()``: ``low + (high - low) * u`` for the stream's doubles u in (0, 1], rounded to ``dtype``."""
    n = math.prod(shape)
    u = uniform_doubles(n, rng.seed, rng.take())
    return (low + (high - low) * u).astype(dtype).reshape(shape)


def normal(rng, shape, mean=0.0, std=1.0, dtype=np.float32):
    """Draw ``rng.take()``: ``mean + std * z`` for the stream's Box-Muller normals z, rounded to ``dtype``."""
    n = math.prod(shape)
    z = normal_doubles(n, rng.seed, rng.take())
    return (mean + std * z).astype(dtype).reshape(shape)


# ----------------------------------------------------------------------------- shape and routing


def concatenate(arrays, axis):
    """The arrays joined along ``axis``."""
    arrays = [np.asarray(a) for a in arrays]
    first = arrays[0]
    if any(a.dtype != first.dtype for a in arrays):
        raise TypeError(f"concatenate: arrays have dtypes {sorted({str(a.dtype) for a in arrays})}; the op set does "
                        "not promote")
    return np.concatenate(arrays, axis=geometry.concat_axis([a.shape for a in arrays], axis))


def split(a, sizes, axis):
    """Contiguous pieces of ``a``, ``sizes[i]`` long along ``axis``."""
    sizes, axis = geometry.split_sizes(a.shape, sizes, axis)
    bounds = np.cumsum(sizes)[:-1]
    return tuple(p.copy() for p in np.split(a, bounds, axis=axis))  # copies: never views of ``a``


def upsample_nearest2d(x, size):
    """(N, C, H, W) -> (N, C, H sh, W sw), each pixel repeated over an sh x sw block."""
    sh, sw = geometry.pair(size)
    n, c, h, w = x.shape
    out = np.empty((n, c, h, sh, w, sw), x.dtype)
    out[...] = x[:, :, :, None, :, None]
    return out.reshape(n, c, h * sh, w * sw)


def upsample_nearest2d_backward(dy, size):
    """The sum of each sh x sw block of ``dy``."""
    sh, sw = geometry.pair(size)
    n, c, h, w = dy.shape
    return dy.reshape(n, c, h // sh, sh, w // sw, sw).sum(axis=(3, 5))

# ------------------------------------------------------------------------------------ recurrent layers
# The recurrence runs in time-major buffers of T + 1 states (state 0 is the zero initial state), so that the
# recurrent kernel's gradient is one product over all steps: h[0:T]^T @ dgates.


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


# ---------------------------------------------------------------------------------------- half precision operands
# float16 / bfloat16 (ml_dtypes) arrays: an op reads its half operands as float32, computes in float32 and rounds
# each float result once to the half type -- the device's float32-accumulate-then-round semantics (cuBLAS GemmEx,
# cuDNN's float compute type), and what NumPy alone could not do at any useful speed (ml_dtypes' bfloat16 matmul
# runs elementwise in Python-level loops).

try:
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # bfloat16 arrays need ml_dtypes (the native extra); float16 is NumPy's own
    _bfloat16 = np.float16
_HALF = frozenset({np.dtype(np.float16), np.dtype(_bfloat16)})
#: ops that take half arrays as they are: creation, transfer, layout, random numbers, and the in-place updates of
#: float32 weights and statistics
_AS_STORED = frozenset({"asarray", "to_numpy", "zeros", "ones", "full", "zeros_like", "copy", "reshape", "transpose",
                        "rng", "uniform", "normal", "sgd_update", "adam_update", "rmsprop_update", "adagrad_update",
                        "running_stat_update"})


def _half_of(values):
    for a in values:
        if type(a) is np.ndarray:
            if a.dtype in _HALF:
                return a.dtype
        elif type(a) in (list, tuple) and a and type(a[0]) is np.ndarray and a[0].dtype in _HALF:
            return a[0].dtype
    return None


def _up(a):
    if type(a) is np.ndarray:
        return a.astype(np.float32) if a.dtype in _HALF else a
    if type(a) in (list, tuple):
        return type(a)(_up(b) for b in a)
    return a


def _down(a, half):
    if type(a) is np.ndarray:
        return a.astype(half) if a.dtype == np.float32 else a
    if type(a) in (list, tuple):
        return type(a)(_down(b, half) for b in a)
    return a


def _half_operands(op):
    @functools.wraps(op)
    def call(*args, **kwargs):
        first = args[0] if args else None
        if type(first) is np.ndarray:  # the op set's operands share a dtype: the first one tells
            if first.dtype not in _HALF:
                return op(*args, **kwargs)
            half = first.dtype
        else:
            half = _half_of(args) or (_half_of(kwargs.values()) if kwargs else None)
            if half is None:
                return op(*args, **kwargs)
        return _down(op(*[_up(a) for a in args], **{k: _up(v) for k, v in kwargs.items()}), half)

    return call


def _take_half_operands() -> None:
    from .ops import OPS  # noqa: PLC0415

    space = globals()
    for op in OPS:
        if op not in _AS_STORED and callable(space.get(op)):
            space[op] = _half_operands(space[op])


_take_half_operands()
