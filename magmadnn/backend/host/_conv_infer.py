"""Host convolution forward when nothing is kept for a backward (inference), a group of samples at a time.

Two forms with the optional numba kernels (``_host_jit``), each gathering from the unpadded NCHW input (zeros where
the padding is) into scratch buffers reused call after call:

* **shifted** (vertical stride 1, at least ``_SHIFT_MIN_ROWS`` rows C*S): the input shifted once per kernel column,
  z (C*S, B*Hz*Wo) (S copies of the input, not im2col's R*S), times the kernel rows stacked, (R*K, C*S), in one GEMM
  of R*K rows (OpenBLAS runs 48-96 rows near its peak, 16-32 at about half); output row i sums the R kernel rows'
  partial products, rows i + r*dh, adding the bias, a residual and the ReLU in the same pass;
* **columns** (any other): the group's column matrix (B, C*R*S, Ho*Wo) times the kernel (K, C*R*S) straight into its
  NCHW output rows, then bias, residual and ReLU in one pass; a 1x1 convolution with stride 1 and no padding
  multiplies the input's (C, H*W) planes, no copy.

Without numba the columns form runs in NumPy: a zero-padded copy of the input, a strided view copied per group.
Results are the same on every path to float rounding (the shifted form sums its partial products in another order);
the bias, residual and activation are added in the same order as separate ops would.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _host_jit

__all__ = ["forward_by_samples"]

#: elements of the column matrix of one group of samples (JIT path: 512 KiB of float32, the size of a core's L2)
_SAMPLE_COLUMNS = 1 << 17
#: the NumPy path's groups (its strided gather costs the same per call whatever the size: fewer, larger groups)
_NUMPY_SAMPLE_COLUMNS = 1 << 20

_scratch = threading.local()
#: scratch arrays up to this many bytes are kept for the next call
_SCRATCH_LIMIT = 16 << 20


def _buffer(size: int, dtype, slot: int) -> np.ndarray:
    """Scratch array ``slot`` of ``size`` elements of ``dtype``, reused by later calls of this thread."""
    if size * np.dtype(dtype).itemsize > _SCRATCH_LIMIT:  # a huge image's: not kept after the call
        return np.empty(size, dtype)
    key = (np.dtype(dtype).str, slot)
    pool = getattr(_scratch, "pool", None)
    if pool is None:
        pool = _scratch.pool = {}
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(size, dtype)
    return buf[:size]


def forward_by_samples(plan, x, w, bias, activation, residual=None):
    """y = activation(conv(x, w) + bias + residual) for a ``conv._ConvPlan`` with one group; ``activation`` is None
    or one of the fused kinds; ``residual`` (N, K, Ho, Wo) or None."""
    k, howo = plan.k, plan.ho * plan.wo
    dtype = np.result_type(x, w)
    out = np.empty((plan.n, k, plan.ho, plan.wo), dtype=dtype)
    flat = out.reshape(plan.n, k, howo)
    jit = _host_jit.kernels
    if jit is not None and x.dtype == dtype and plan.n:
        _jit_forward(jit, plan, x, np.ascontiguousarray(w, dtype=dtype), flat, bias, activation, residual)
        return out
    w2 = w.reshape(k, -1)
    direct = plan.kh == plan.kw == plan.sh == plan.sw == 1 and not any(plan.pads)
    xp = _padded(plan, x)
    step = plan.n if direct else max(1, _NUMPY_SAMPLE_COLUMNS // max(1, plan.crs * howo))
    sn, sc, sh, sw = xp.strides
    res = None if residual is None else residual.reshape(plan.n, k, howo)
    b3 = None if bias is None else bias.reshape(1, k, 1)
    for n0 in range(0, plan.n, step):
        part = xp[n0:n0 + step]
        if direct:
            cols = part.reshape(part.shape[0], plan.crs, howo)
        else:
            view = as_strided(part, shape=(part.shape[0], plan.c, plan.kh, plan.kw, plan.ho, plan.wo),
                              strides=(sn, sc, sh * plan.dh, sw * plan.dw, sh * plan.sh, sw * plan.sw),
                              writeable=False)
            cols = np.empty(view.shape, dtype=x.dtype)
            np.copyto(cols, view)
            cols = cols.reshape(part.shape[0], plan.crs, howo)
        y = flat[n0:n0 + step]
        np.matmul(w2, cols, out=y)
        if b3 is not None:
            y += b3
        if res is not None:
            y += res[n0:n0 + step]
        if activation is not None:
            _activate_inplace(y, activation)
    return out


def _jit_forward(jit, plan, x, w, flat, bias, activation, residual):
    x = np.ascontiguousarray(x)
    relu = activation == "relu"
    fused = relu or activation is None
    bias = _EMPTY_BIAS.get(flat.dtype.str) if bias is None else np.ascontiguousarray(bias, dtype=flat.dtype)
    if bias is None:
        bias = _EMPTY_BIAS[flat.dtype.str] = np.zeros(0, flat.dtype)
    if plan.sh == 1 and plan.kh > 1 and plan.c * plan.kw >= _SHIFT_MIN_ROWS:
        _shifted(jit, plan, x, w, flat, bias, relu and fused, residual)
    else:
        _columns(jit, plan, x, w, flat, bias, relu and fused, residual)
    if not fused:
        _activate_inplace(flat, activation)


_EMPTY_BIAS: dict = {}
#: the shifted form needs a GEMM inner dimension C*S at least this long (few input channels, as an RGB stem: the
#: column matrix is small and one GEMM of inner dimension C*R*S does better)
_SHIFT_MIN_ROWS = 16


def _residual(residual, plan, dtype, shape):
    if residual is None:
        return np.zeros((0, *shape), dtype)
    return np.ascontiguousarray(residual, dtype=dtype).reshape(plan.n, *shape)


def _shifted(jit, plan, x, w, flat, bias, relu, residual):
    """Vertical stride 1: the input rows of a group of samples stacked (sharing their zero padding rows: a sample
    takes H + max(top, bottom pad) rows, not Ho + (R-1)*dh), shifted by each kernel column, z (C*S, T*Wo) (S copies
    of the input, not R*S), times the kernel rows stacked, (R*K, C*S): t (R*K, T*Wo), one GEMM; output row i of
    sample b sums the R kernel rows' partial products t[r, :, b*hs + i + r*dh] (with bias, residual and ReLU) in one
    pass."""
    k, r_, s_ = plan.k, plan.kh, plan.kw
    pt, pb = plan.pads[0], plan.pads[1]
    hs = plan.h + max(pt, pb)
    per = plan.c * s_ * hs * plan.wo
    step = max(1, _SAMPLE_COLUMNS // max(1, per))
    w3 = np.empty((r_, k, plan.c, s_), w.dtype)
    jit.kernel_rows(w.reshape(k, plan.c, r_, s_), w3)
    w3 = w3.reshape(r_ * k, plan.c * s_)
    out = flat.reshape(plan.n, k, plan.ho, plan.wo)
    res = _residual(residual, plan, flat.dtype, (k, plan.ho, plan.wo))
    for n0 in range(0, plan.n, step):
        nb = min(step, plan.n - n0)
        rows = (nb - 1) * hs + pt + plan.h + pb
        z = _buffer(plan.c * s_ * rows * plan.wo, x.dtype, 0).reshape(plan.c, s_, rows, plan.wo)
        jit.shift_columns(x, n0, nb, z, hs, plan.sw, plan.dw, pt, plan.pads[2])
        t = _buffer(r_ * k * rows * plan.wo, x.dtype, 1).reshape(r_ * k, rows * plan.wo)
        np.matmul(w3, z.reshape(plan.c * s_, -1), out=t)
        jit.shift_sum(t.reshape(r_, k, rows, plan.wo), out, n0, nb, hs, plan.dh, bias, res, relu)


def _columns(jit, plan, x, w, flat, bias, relu, residual):
    """Any stride: each group's column matrix (B, C*R*S, Ho*Wo) (none for a 1x1 convolution with stride 1 and no
    padding: the input is it) times the kernel (K, C*R*S) into the output rows, then bias, residual and ReLU."""
    k, howo = plan.k, plan.ho * plan.wo
    direct = plan.kh == plan.kw == plan.sh == plan.sw == 1 and not any(plan.pads)
    step = plan.n if direct else max(1, _SAMPLE_COLUMNS // max(1, plan.crs * howo))
    w2 = w.reshape(k, -1)
    res = _residual(residual, plan, flat.dtype, (k, howo))
    for n0 in range(0, plan.n, step):
        nb = min(step, plan.n - n0)
        if direct:
            cols = x[n0:n0 + nb].reshape(nb, plan.crs, howo)
        else:
            cols6 = _buffer(nb * plan.crs * howo, x.dtype, 0).reshape(nb, plan.c, plan.kh, plan.kw, plan.ho,
                                                                         plan.wo)
            jit.im2col_nchw(x, n0, cols6, plan.sh, plan.sw, plan.dh, plan.dw, plan.pads[0], plan.pads[2])
            cols = cols6.reshape(nb, plan.crs, howo)
        y = flat[n0:n0 + nb]
        np.matmul(w2, cols, out=y)
        if bias.size or res.shape[0] or relu:
            jit.conv_epilogue(y, bias, res, n0, relu)


def _padded(plan, x):
    t, b, l, r = plan.pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r))) if any(plan.pads) else x


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
