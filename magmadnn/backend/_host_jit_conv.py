"""The host inference convolution's numba kernels (see ``host/_conv_infer``), built by ``_host_jit``: the gathers
of the input into GEMM operands and the epilogues after the GEMM.

Loops that should vectorise index 1-D views from 0: an offset inside the index (``d[o + p]``) keeps numba's negative
index check in the loop and runs it several times slower, and so does a slice assignment of short rows (its per-call
work)."""

from __future__ import annotations

import numpy as np

#: the kernels' helpers, compiled by :func:`build`; module globals, not closure cells, so that numba's disk cache
#: keeps the kernels that call them (a kernel calling a dispatcher held in a closure cell compiles again in every
#: process: about 20 s on a loaded machine)
_zero = _plane = None


def _zero_rows(d):
    for p in range(d.shape[0]):
        d[p] = 0


def _shifted_plane(d, xp, shift, w_):
    """d (h*w,) = the rows of xp (h*w,) each shifted by ``shift`` columns (d[i, j] = xp[i, j + shift], zero where
    j + shift leaves the row): one contiguous copy, then the columns that wrapped into the next or previous row
    zeroed."""
    m = xp.shape[0]
    lo, hi = max(0, -shift), m - max(0, shift)
    if hi <= lo:
        _zero(d)
        return
    dd, xs = d[lo:hi], xp[lo + shift:hi + shift]
    for p in range(dd.shape[0]):
        dd[p] = xs[p]
    first, last = (max(0, w_ - shift), w_) if shift > 0 else (0, min(w_, -shift))
    for j in range(first, last):
        col = d[j:]
        for i in range(0, m, w_):
            col[i] = 0


def build(numba):
    """The inference convolution's gathers and epilogues (see ``host/_conv_infer``): plain copies from the unpadded
    NCHW input (zeros where the padding is), and one pass that sums the partial products of the kernel rows and
    adds the bias, a residual and a ReLU (NaN stays NaN, as np.maximum)."""
    global _zero, _plane
    njit = numba.njit(cache=True)
    _zero = njit(_zero_rows)
    _plane = njit(_shifted_plane)

    @njit
    def im2col_nchw(x, n0, cols, sh, sw, dh, dw, pt, pl):
        """cols (B, C, R, S, Ho, Wo) = samples n0..n0+B of x (N, C, H, W) under each kernel offset (zero padded)."""
        nb, c_, r_, s_, ho_, wo_ = cols.shape
        h_, w_ = x.shape[2], x.shape[3]
        if sh == 1 and sw == 1 and wo_ == w_:  # each (b, c, r, s) plane: input rows shifted, by whole rows
            for b in range(nb):
                for c in range(c_):
                    for r in range(r_):
                        top = r * dh - pt
                        i0 = 0 if top >= 0 else min(ho_, -top)
                        i1 = max(i0, min(ho_, h_ - top))
                        for s in range(s_):
                            d = cols[b, c, r, s].reshape(ho_ * wo_)
                            _zero(d[:i0 * wo_])
                            _zero(d[i1 * wo_:])
                            if i1 > i0:
                                _plane(d[i0 * wo_:i1 * wo_], x[n0 + b, c, i0 + top:i1 + top].reshape((i1 - i0) * w_),
                                      s * dw - pl, w_)
            return
        for b in range(nb):
            for c in range(c_):
                for r in range(r_):
                    top = r * dh - pt  # input row of output row i: i * sh + top
                    i0 = 0 if top >= 0 else min(ho_, (sh - 1 - top) // sh)
                    i1 = 0 if top >= h_ else max(i0, min(ho_, (h_ - 1 - top) // sh + 1))
                    for s in range(s_):
                        left = s * dw - pl
                        j0 = 0 if left >= 0 else min(wo_, (sw - 1 - left) // sw)
                        j1 = 0 if left >= w_ else max(j0, min(wo_, (w_ - 1 - left) // sw + 1))
                        d = cols[b, c, r, s]
                        d[:i0] = 0
                        d[i1:] = 0
                        d[i0:i1, :j0] = 0
                        d[i0:i1, j1:] = 0
                        if i1 > i0 and j1 > j0:
                            d[i0:i1, j0:j1] = x[n0 + b, c, i0 * sh + top:(i1 - 1) * sh + top + 1:sh,
                                                j0 * sw + left:(j1 - 1) * sw + left + 1:sw]

    @njit
    def kernel_rows(w, out):
        """out (R, K, C, S) = w (K, C, R, S) with its kernel rows first (NumPy's copy of that transpose moves runs
        of S values: 24 us for a 32x32x3x3 kernel, this 2 us)."""
        k_, c_, r_, s_ = w.shape
        for r in range(r_):
            for k in range(k_):
                for c in range(c_):
                    src, dst = w[k, c, r], out[r, k, c]
                    for j in range(s_):
                        dst[j] = src[j]

    @njit
    def shift_columns(x, n0, nb, z, hs, sw, dw, pt, pl):
        """z (C, S, T, Wo): the input rows of samples n0..n0+nb stacked, sample b's from z row b * hs + pt on, zero rows
        around and between them (``hs`` at least H + either vertical pad, so the samples share their padding rows),
        each shifted by kernel column s: z[c, s, b * hs + pt + h, j] = x[n0 + b, c, h, j * sw + s * dw - pl], zero
        outside x."""
        c_, s_, rows, wo_ = z.shape
        h_, w_ = x.shape[2], x.shape[3]
        whole = sw == 1 and wo_ == w_  # each sample's rows: one plane, shifted
        for c in range(c_):
            for s in range(s_):
                left = s * dw - pl
                j0 = 0 if left >= 0 else min(wo_, (sw - 1 - left) // sw)
                j1 = 0 if left >= w_ else max(j0, min(wo_, (w_ - 1 - left) // sw + 1))
                zs = z[c, s]
                flat = zs.reshape(rows * wo_)
                done = 0
                for b in range(nb):
                    start = b * hs + pt
                    _zero(flat[done * wo_:start * wo_])
                    done = start + h_
                    if whole:
                        _plane(flat[start * wo_:done * wo_], x[n0 + b, c].reshape(h_ * w_), left, w_)
                        continue
                    d = zs[start:done]
                    d[:, :j0] = 0
                    d[:, j1:] = 0
                    if j1 > j0:
                        d[:, j0:j1] = x[n0 + b, c, :, j0 * sw + left:(j1 - 1) * sw + left + 1:sw]
                _zero(flat[done * wo_:])

    @njit
    def shift_sum(t, out, n0, nb, hs, dh, bias, residual, relu):
        """out[n0 + b, k, i] (b < nb) = sum over r of t[r, k, b * hs + i + r * dh] (t: (R, K, T, Wo), the rows of
        ``shift_columns``' z times the kernel rows), + bias[k] (when bias has K entries), + residual[n0 + b, k, i]
        (when it has rows), then max(., 0) when relu. Each output plane is one run of Ho*Wo values (kernel row r
        reads t's rows from b * hs + r*dh on), summed into a scratch row that aliases nothing (so the loops
        vectorise), then stored once."""
        r_, k_, rows, wo_ = t.shape
        ho_ = out.shape[2]
        m = ho_ * wo_
        has_bias, has_res = bias.shape[0] == k_, residual.shape[0] > 0
        tf = t.reshape(r_, k_, rows * wo_)
        acc = np.empty(m, t.dtype)
        for b in range(nb):
            ob = out[n0 + b].reshape(k_, m)
            base = b * hs * wo_
            for k in range(k_):
                o = ob[k]
                if r_ == 3:
                    t0, t1, t2 = tf[0, k, base:], tf[1, k, base + dh * wo_:], tf[2, k, base + 2 * dh * wo_:]
                    for p in range(m):
                        acc[p] = t0[p] + t1[p] + t2[p]
                else:
                    t0 = tf[0, k, base:]
                    for p in range(m):
                        acc[p] = t0[p]
                    for r in range(1, r_):
                        tr = tf[r, k, base + r * dh * wo_:]
                        for p in range(m):
                            acc[p] = acc[p] + tr[p]
                if has_bias:
                    bk = bias[k]
                    for p in range(m):
                        acc[p] = acc[p] + bk
                if has_res:
                    e = residual[n0 + b, k].reshape(m)
                    for p in range(m):
                        acc[p] = acc[p] + e[p]
                if relu:
                    for p in range(m):
                        v = acc[p]
                        o[p] = 0 if v < 0 else v
                else:
                    for p in range(m):
                        o[p] = acc[p]

    @njit
    def conv_epilogue(y, bias, residual, n0, relu):
        """y (B, K, P) in place: + bias[k] (when bias has K entries), + residual[n0 + b] (when it has rows), then
        max(., 0) when relu; one pass (the conditions are the same for the whole loop: it is unswitched)."""
        nb, k_, p_ = y.shape
        has_bias, has_res = bias.shape[0] == k_, residual.shape[0] > 0
        bk = y.dtype.type(0)
        for b in range(nb):
            for k in range(k_):
                row = y[b, k]
                e = residual[n0 + b, k] if has_res else row
                if has_bias:
                    bk = bias[k]
                for p in range(p_):
                    v = row[p]
                    if has_bias:
                        v = v + bk
                    if has_res:
                        v = v + e[p]
                    if relu and v < 0:
                        v = 0
                    row[p] = v

    return {"im2col_nchw": im2col_nchw, "shift_columns": shift_columns, "shift_sum": shift_sum,
            "conv_epilogue": conv_epilogue, "kernel_rows": kernel_rows}
