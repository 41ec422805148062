"""Host convolution: im2col + BLAS.

The input is copied once into a zero-padded batch-last (C, Hp, Wp, N) array, the column matrix (C*R*S, Ho*Wo*N) is
gathered from a strided view of it in one copy of long contiguous runs, and forward, backward-filter and
backward-data are GEMMs against it; col2im scatters back with a loop over the R*S kernel offsets only. A training
convolution of few input taps runs without a column matrix where the ``jit`` extra is present (``_conv_direct``,
forward and filter gradient). Skinny GEMMs
are split (see ``linear._SPLIT_WORK``); the forward moves each partial output into NCHW order (with bias and a fused
activation) while it is in cache. With the optional ``jit`` extra (numba, see ``_host_jit``) the layout moves run as
compiled single-threaded kernels; results are the same either way."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _host_jit, geometry
from . import _conv_direct, _conv_infer
from . import linear as _linear
from ._common import same_objects
from ._conv_infer import _activate_inplace
from .linear import _matmul_nt, bias_grad

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


#: the :class:`_ConvPlan` of a convolution's shapes (by value) and geometry (stride, padding, dilation: by identity),
#: worked out once (a plan is only read after its ``__init__``)
_plan = same_objects(_ConvPlan, by_value=2)


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
    plan = _plan(x.shape, w.shape, stride, padding, dilation)
    if saved is None and groups == 1:  # inference: no backward will read the column matrix
        return _forward_by_samples(plan, x, w, bias, activation)
    if _conv_direct.usable(plan, groups, x, w):
        out = _conv_direct.forward(plan, x, w, bias, activation == "relu", saved)
        if activation is not None and activation != "relu":
            _activate_inplace(out, activation)
        return out
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
        band = _linear._SPLIT_WORK // (k * plan.crs * run) if run else plan.ho  # output rows per partial GEMM
        if band < 1 or band * run < _linear._SPLIT_MIN:
            band = plan.ho
        for h0 in range(0, plan.ho, band):
            h1 = h0 + band if h0 + band < plan.ho else plan.ho
            y = np.matmul(w2, cols[:, h0 * run : h1 * run])
            store(y.reshape(k, h1 - h0, plan.wo, plan.n), h0)
    if activation is not None and not store.relu:  # the JIT store applies a ReLU itself
        _activate_inplace(out, activation)
    return out


def _forward_by_samples(plan, x, w, bias, activation):
    """The forward when nothing is kept for a backward: see ``_conv_infer``."""
    return _conv_infer.forward_by_samples(plan, x, w, bias, activation)


def conv2d_forward_residual(x, w, residual, stride=(1, 1), padding=(0, 0), dilation=(1, 1), bias=None,
                            activation=None):
    """Inference only (host, one group): ``activation(conv2d_forward(x, w, bias=bias) + residual)`` in one call, the
    same float operations in the same order; ``residual`` has the output's shape, ``activation`` is None or one of
    ``FUSED_ACTIVATIONS``. Not an op of the op set: the ONNX op graph's fused Conv -> Add -> Relu calls it."""
    if activation is not None and activation not in FUSED_ACTIVATIONS:
        raise ValueError(f"conv2d_forward_residual: activation {activation!r} cannot be fused; expected one of "
                         f"{FUSED_ACTIVATIONS} or None")
    if x.ndim != 4 or w.ndim != 4 or w.shape[1] != x.shape[1]:
        raise ValueError(f"conv2d_forward_residual: x {x.shape} and w {w.shape}: expected (N, C, H, W) and "
                         "(K, C, R, S) with the same channels C (one group)")
    plan = _plan(x.shape, w.shape, stride, padding, dilation)
    if tuple(residual.shape) != (plan.n, plan.k, plan.ho, plan.wo):
        raise ValueError(f"conv2d_forward_residual: residual has shape {tuple(residual.shape)}; expected the "
                         f"output's {(plan.n, plan.k, plan.ho, plan.wo)}")
    return _conv_infer.forward_by_samples(plan, x, w, bias, activation, residual)


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


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dx (N,C,H,W) of ``conv2d_forward``."""
    plan = _plan(tuple(x_shape), w.shape, stride, padding, dilation)
    rows = plan.dy_rows(dy, groups)
    if groups == 1:
        dcols = np.matmul(w.reshape(plan.k, -1).T, rows)
    else:
        wg = w.reshape(groups, plan.k // groups, -1)
        dcols = np.matmul(wg.transpose(0, 2, 1), rows)
    return plan.col2im(dcols)


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    """dw (K,C/groups,R,S) of ``conv2d_forward``; ``saved`` is the dict the forward filled (optional)."""
    plan = _plan(x.shape, tuple(w_shape), stride, padding, dilation)
    if _conv_direct.usable(plan, groups, x, dy):
        return _conv_direct.filter_grad(plan, dy, x, saved)
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
