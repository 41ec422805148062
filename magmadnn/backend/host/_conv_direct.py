"""Host training convolution without a column matrix, for convolutions of few input taps (a first layer on grey or
RGB images: LeNet-5's 1x5x5 against 6 filters).

Their im2col + GEMM pair is skinny (6 x 25 against 50,176 columns for LeNet-5 at batch 64): BLAS runs it at a
fraction of its peak, the column matrix (25 copies of the input) is written and read again by the filter gradient,
and the GEMM's output still needs a move into NCHW order. The ``jit`` extra's direct kernels (``_host_jit_direct``)
read the zero-padded NCHW input instead: forward with bias and ReLU in the same pass, and the filter gradient from
the same padded input, which the forward keeps in place of the column matrix. Without numba, or for other
convolutions, ``conv`` takes its im2col path; results match it to float rounding.

Measured (one thread, LeNet-5's first convolution at batch 64, process CPU time): forward 0.97 -> 0.80 ms, filter
gradient 1.07 -> 0.75 ms.
"""

from __future__ import annotations

import numpy as np

from .. import _host_jit

__all__ = ["usable", "forward", "filter_grad"]

#: at most this many input taps C*R*S per output (LeNet-5's first convolution has 25, an RGB 3x3 stem 27); beyond,
#: the im2col GEMM has a long enough inner dimension to run well
MAX_TAPS = 32
#: at most this many filters K (the GEMM's rows; one thread, batch 64: 6 or 8 filters ran 1.3-1.9x faster direct,
#: 16 filters of 1x5x5 1.1x slower, where OpenBLAS's GEMM of 16 rows does well)
MAX_FILTERS = 8
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def usable(plan, groups, a, b) -> bool:
    """Whether the direct kernels take this convolution of ``a`` and ``b`` (input and kernel, or input and output
    gradient): the ``jit`` extra present, one group, stride and dilation 1, at most ``MAX_TAPS`` taps and
    ``MAX_FILTERS`` filters, NumPy arrays of one float dtype."""
    return (_host_jit.kernels is not None and groups == 1 and plan.sh == plan.sw == plan.dh == plan.dw == 1
            and plan.crs <= MAX_TAPS and plan.k <= MAX_FILTERS and plan.n > 0 and plan.ho > 0 and plan.wo > 0
            and type(a) is np.ndarray and type(b) is np.ndarray and a.dtype in _DTYPES and b.dtype == a.dtype)


def padded(plan, x):
    """x (N, C, H, W) zero-padded into a contiguous (N, C, Hp, Wp) array."""
    t, _, l, _ = plan.pads
    if not any(plan.pads):
        return np.ascontiguousarray(x)
    xp = np.zeros((plan.n, plan.c, plan.hp, plan.wp), dtype=x.dtype)
    xp[:, :, t:t + plan.h, l:l + plan.w] = x
    return xp


def forward(plan, x, w, bias, relu, saved):
    """The convolution's output (N, K, Ho, Wo) plus bias, ReLU'd when ``relu``; keeps the padded input in
    ``saved['padded']`` for :func:`filter_grad`."""
    xp = padded(plan, x)
    if saved is not None:
        saved["padded"] = xp
    out = np.empty((plan.n, plan.k, plan.ho, plan.wo), dtype=x.dtype)
    b = np.zeros(plan.k, x.dtype) if bias is None else np.ascontiguousarray(bias, dtype=x.dtype)
    acc = np.empty((plan.k, plan.ho * plan.wp), dtype=x.dtype)
    _host_jit.kernels.direct_conv_forward(xp, np.ascontiguousarray(w), b, bool(relu), out, acc)
    return out


def filter_grad(plan, dy, x, saved):
    """dw (K, C, R, S) for the output gradient dy (N, K, Ho, Wo)."""
    xp = saved.get("padded") if saved else None
    if xp is None:
        xp = padded(plan, x)
    dy = np.ascontiguousarray(dy, dtype=xp.dtype)
    wide = np.zeros((plan.k, plan.ho * plan.wp), dtype=xp.dtype)
    dw = np.empty((plan.k, plan.c, plan.kh, plan.kw), dtype=xp.dtype)
    _host_jit.kernels.direct_conv_filter(xp, dy, dw, wide)
    return dw
