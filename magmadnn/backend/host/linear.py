"""Host matrix products and the bias of dense and convolution layers.

Skinny GEMMs (a few rows, a long shared axis) are split into partial GEMMs of about half a million multiply-adds
(``_SPLIT_WORK``): their operands stay in cache, BLAS can take its small-matrix path, and each runs on the calling
thread."""

from __future__ import annotations

import numpy as np

from .. import _host_jit, geometry
from ._common import _channel_shape, _fused_rows
from .activations import activation_backward, activation_forward
from .reductions import _add_reduce, channel_sum


def matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` for 2-D or stacked (..., m, k) arrays; transposes are views handed to BLAS as flags."""
    if transpose_a:
        a = a.swapaxes(-1, -2) if type(a) is np.ndarray else np.swapaxes(a, -1, -2)  # (the method: no dispatch)
    if transpose_b:
        b = b.swapaxes(-1, -2) if type(b) is np.ndarray else np.swapaxes(b, -1, -2)
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous:  # stacked rows times one matrix: one GEMM, not a loop
        return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
    return np.matmul(a, b)


# Skinny GEMMs (a few rows, a long axis) run as a loop of partial GEMMs of at most _SPLIT_WORK multiply-adds, with
# at least _SPLIT_MIN elements of the long axis each: their operands stay in cache, BLAS can take its small-matrix path
# (OpenBLAS's SkylakeX kernels are several times faster on them) and, in conv2d_forward, each partial output is moved
# into NCHW order while it is still in cache. _SPLIT_WORK stays under the size from which OpenBLAS hands a GEMM to a
# second thread (2 x 65536 x 4 multiply-adds): a partial GEMM runs on the calling thread, with no hand-off to wait
# for. Timed on 2 cores, a second thread did not speed up these partial GEMMs (6x25x5376, 25x6272x6), and where
# the cores were shared a hand-off cost milliseconds: the other thread waits for a core.
_SPLIT_WORK = 500_000
_SPLIT_MIN = 1024


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


def bias_add(x, b):
    """``x + b`` with ``b`` of shape (C,) broadcast along axis 1."""
    if x.ndim == 2:  # axis 1 is the last: NumPy broadcasts (C,) there as it is
        return x + b
    return x + b.reshape(_channel_shape(x.ndim, b.shape[0]))


def bias_grad(dy):
    """The gradient of ``bias_add`` with respect to ``b``."""
    return channel_sum(dy)


def bias_activation(x, b, kind, alpha=0.0):
    """``(activation(x + b), x + b)``; the second None where the gradient of ``kind`` does not read it."""
    if kind == "relu":  # its gradient reads the output alone
        if x.ndim == 2 and _fused_rows(x, small=(b,)) and b.shape == (x.shape[1],):
            y = np.empty(x.shape, x.dtype)  # (x C-contiguous: empty_like's layout, without its dispatch)
            _host_jit.kernels.bias_relu(x, b, y)  # one pass, NumPy's two below
            return y, None
        z = bias_add(x, b)  # the new array z takes the maximum in place
        return np.maximum(z, 0, out=z), None
    z = bias_add(x, b)
    return activation_forward(z, geometry.check_activation(kind, "bias_activation"), alpha), (
        z if kind in geometry.INPUT_GRAD_ACTIVATIONS else None)


def bias_activation_backward(dy, z, y, kind, alpha=0.0, bias=True):
    """``(dx, db)`` of :func:`bias_activation`."""
    if kind == "relu" and dy.ndim == 2 and y is not None and _fused_rows(dy, y):
        dx = np.empty(dy.shape, dy.dtype)
        db = np.empty(dy.shape[1] if bias else 0, dy.dtype)
        _host_jit.kernels.bias_relu_backward(dy, y, dx, db)  # the mask and the column sums in one pass
        return dx, (db if bias else None)
    if kind == "relu" and dy.ndim > 2 and dy.size and y is not None and _fused_rows(dy, y):
        # channels and pixels of a sample as one row: the kernel's column sums are channel_sum's first reduction
        # (over the samples, in their order), its second (over each channel's pixels) is NumPy's as before
        n, c = dy.shape[:2]
        dx = np.empty(dy.shape, dy.dtype)
        cols = np.empty(dy.size // n if bias else 0, dy.dtype)
        _host_jit.kernels.bias_relu_backward(dy.reshape(n, -1), y.reshape(n, -1), dx.reshape(n, -1), cols)
        return dx, (_add_reduce(cols.reshape(c, -1), 1) if bias else None)
    dx = activation_backward(dy, z, y, geometry.check_activation(kind, "bias_activation_backward"), alpha)
    return dx, (channel_sum(dx) if bias else None)
