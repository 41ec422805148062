"""Optional numba kernels of the host's direct training convolution (see ``host/_conv_direct``): forward and filter
gradient of a stride-1 convolution of few input taps, computed from the zero-padded NCHW input without a column
matrix.

Both work on the padded input image's rows laid end to end: output row i, column j reads padded row i + r, column
j + s, i.e. flat position (i * Wp + j) + (r * Wp + s). A "wide" output of Ho * Wp positions (the last S - 1 of each
row unused) is then one long product-and-add per kernel tap, which vectorises. The sums may be reordered and fused
(``reassoc``, ``contract``): results match the column-matrix GEMM to float rounding, as BLAS's own order does;
NaN and infinities propagate (no finite-math flags).
"""

from __future__ import annotations

__all__ = ["build"]

_FASTMATH = {"reassoc", "contract"}


def build(numba):
    njit = numba.njit(cache=True, fastmath=_FASTMATH)

    @njit
    def direct_conv_forward(xp, w, bias, relu, out, acc):
        """out (N, K, Ho, Wo) = conv(xp, w) + bias (K,), then max(., 0) when relu; xp (N, C, Hp, Wp) the padded
        input, w (K, C, R, S), stride 1, dilation 1; acc (K, >= (Ho - 1) * Wp + Wo) scratch."""
        n_, k_, ho, wo = out.shape
        c_, kh, kw = w.shape[1], w.shape[2], w.shape[3]
        wp = xp.shape[3]
        span = (ho - 1) * wp + wo
        zero = out.dtype.type(0)
        for n in range(n_):
            acc[:, :span] = 0
            for c in range(c_):
                xf = xp[n, c].ravel()
                for r in range(kh):
                    for s in range(kw):
                        xs = xf[r * wp + s:r * wp + s + span]
                        for k in range(k_):
                            wv = w[k, c, r, s]
                            a = acc[k]
                            for p in range(span):
                                a[p] += wv * xs[p]
            for k in range(k_):
                b = bias[k]
                a = acc[k]
                for i in range(ho):
                    row = out[n, k, i]
                    for j in range(wo):
                        v = a[i * wp + j] + b
                        if relu and v < zero:
                            v = zero
                        row[j] = v

    @njit
    def direct_conv_filter(xp, dy, dw, wide):
        """dw (K, C, R, S) of the forward above for dy (N, K, Ho, Wo); ``wide`` (K, Ho * Wp) scratch, zero: each
        sample's dy rows are copied into its first Wo columns of each row, the rest stays zero."""
        n_, k_, ho, wo = dy.shape
        _, c_, kh, kw = dw.shape
        wp = xp.shape[3]
        span = ho * wp - (kw - 1)  # the last row's unused tail reaches past the padded image
        zero = dw.dtype.type(0)
        dw[:] = zero
        for n in range(n_):
            for k in range(k_):
                for i in range(ho):
                    wide[k, i * wp:i * wp + wo] = dy[n, k, i]
            for c in range(c_):
                xf = xp[n, c].ravel()
                for k in range(k_):
                    d = wide[k]
                    for r in range(kh):
                        for s in range(kw):
                            xs = xf[r * wp + s:r * wp + s + span]
                            t = zero
                            for p in range(span):
                                t += d[p] * xs[p]
                            dw[k, c, r, s] += t

    return {"direct_conv_forward": direct_conv_forward, "direct_conv_filter": direct_conv_filter}
