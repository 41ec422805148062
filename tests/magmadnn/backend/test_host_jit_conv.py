"""The inference convolution's numba gathers and sums (``backend/_host_jit_conv.py``) against NumPy written here:
the gathers are copies, so they must match bit for bit, on every geometry (the whole-plane fast paths and the
row-by-row ones, strides, dilations, paddings larger than the kernel reach, samples stacked sharing their padding
rows)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn.backend import _host_jit

pytestmark = pytest.mark.skipif(_host_jit.kernels is None, reason="no numba")
jit = _host_jit.kernels


def _padded(x, top, bottom, left, right):
    return np.pad(x, ((0, 0), (0, 0), (top, max(bottom, 0)), (left, max(right, 0))))


@st.composite
def geometries(draw):
    """x (N, C, H, W), a group n0..n0+nb, kernel (R, S), stride, dilation, pads (top, bottom, left, right) with Ho,
    Wo >= 1."""
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.sampled_from([1, 1, 2, 3])), draw(st.sampled_from([1, 1, 2, 3]))
    dh, dw = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    pads = [draw(st.integers(0, 4)) for _ in range(4)]
    ho = (h + pads[0] + pads[1] - (r - 1) * dh - 1) // sh + 1
    wo = (w + pads[2] + pads[3] - (s - 1) * dw - 1) // sw + 1
    if ho < 1 or wo < 1:
        pads = [pads[0] + (r - 1) * dh, pads[1], pads[2] + (s - 1) * dw, pads[3]]
        ho = (h + pads[0] + pads[1] - (r - 1) * dh - 1) // sh + 1
        wo = (w + pads[2] + pads[3] - (s - 1) * dw - 1) // sw + 1
    n, c = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    n0 = draw(st.integers(0, n - 1))
    nb = draw(st.integers(1, n - n0))
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).standard_normal((n, c, h, w)).astype(draw(st.sampled_from([np.float32,
                                                                                             np.float64])))
    return x, n0, nb, (r, s), (sh, sw), (dh, dw), pads, (ho, wo)


@settings(max_examples=150, deadline=None)
@given(g=geometries())
def test_im2col_is_the_padded_inputs_strided_views(g):
    x, n0, nb, (r, s), (sh, sw), (dh, dw), pads, (ho, wo) = g
    cols = np.full((nb, x.shape[1], r, s, ho, wo), 7, x.dtype)  # stale values must all be overwritten
    jit.im2col_nchw(x, n0, cols, sh, sw, dh, dw, pads[0], pads[2])
    xp = _padded(x[n0:n0 + nb], pads[0], ho * sh + r * dh, pads[2], wo * sw + s * dw)
    for i in range(r):
        for j in range(s):
            want = xp[:, :, i * dh:i * dh + (ho - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw]
            np.testing.assert_array_equal(cols[:, :, i, j], want)


@settings(max_examples=150, deadline=None)
@given(g=geometries())
def test_shifted_columns_stack_the_samples_sharing_their_padding_rows(g):
    """z (C, S, T, Wo): sample b's input rows from z row b*hs + top on (hs = H + max(top, bottom)), each kernel
    column's shift of them, zeros everywhere else (the shifted form has vertical stride 1)."""
    x, n0, nb, (_, s), (_, sw), (_, dw), pads, (_, wo) = g
    top, bottom, left = pads[0], pads[1], pads[2]
    h = x.shape[2]
    hs = h + max(top, bottom)
    rows = (nb - 1) * hs + top + h + bottom
    z = np.full((x.shape[1], s, rows, wo), 7, x.dtype)
    jit.shift_columns(x, n0, nb, z, hs, sw, dw, top, left)
    want = np.zeros_like(z)
    xp = _padded(x[n0:n0 + nb], 0, 0, left, wo * sw + s * dw)
    for b in range(nb):
        for j in range(s):
            start = b * hs + top
            want[:, j, start:start + h] = xp[b, :, :, j * dw:j * dw + (wo - 1) * sw + 1:sw]
    np.testing.assert_array_equal(z, want)


@settings(max_examples=100, deadline=None)
@given(g=geometries(), relu=st.booleans(), with_bias=st.booleans(), with_residual=st.booleans())
def test_shift_sum_adds_the_kernel_rows_partial_products(g, relu, with_bias, with_residual):
    """out[n0 + b, k, i] = sum over r of t[r, k, b*hs + i + r*dh] (+ bias, + residual, ReLU), in that order."""
    x, n0, nb, (r, _), _, (dh, _), pads, (_, wo) = g
    top, bottom, h = pads[0], pads[1], x.shape[2]
    ho = h + top + bottom - (r - 1) * dh
    if ho < 1:
        return
    hs = h + max(top, bottom)
    rows = (nb - 1) * hs + top + h + bottom
    rng = np.random.default_rng(ho)
    k, n = 3, n0 + nb
    t = rng.standard_normal((r, k, rows, wo)).astype(x.dtype)
    bias = rng.standard_normal(k).astype(x.dtype) if with_bias else np.zeros(0, x.dtype)
    residual = rng.standard_normal((n, k, ho, wo)).astype(x.dtype) if with_residual else np.zeros((0, k, ho, wo),
                                                                                                  x.dtype)
    out = np.full((n, k, ho, wo), 7, x.dtype)
    jit.shift_sum(t, out, n0, nb, hs, dh, bias, residual, relu)
    for b in range(nb):
        want = t[0, :, b * hs:b * hs + ho].copy()
        for i in range(1, r):
            want = want + t[i, :, b * hs + i * dh:b * hs + i * dh + ho]
        if with_bias:
            want = want + bias[:, None, None]
        if with_residual:
            want = want + residual[n0 + b]
        if relu:
            want = np.maximum(want, 0)
        np.testing.assert_array_equal(out[n0 + b], want)
    assert (out[:n0] == 7).all()


@settings(max_examples=30, deadline=None)
@given(shape=st.tuples(*[st.integers(1, 5)] * 4), dtype=st.sampled_from([np.float32, np.float64]))
def test_kernel_rows_puts_the_kernel_rows_first(shape, dtype):
    w = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    out = np.full((shape[2], shape[0], shape[1], shape[3]), 7, dtype)
    jit.kernel_rows(w, out)
    np.testing.assert_array_equal(out, w.transpose(2, 0, 1, 3))
