"""The op set's convolutions (``ops/conv.py``) on every backend, against the loops of ``tests/reference.py``."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import get, put, tol
from tests.strategies import FLOATS, conv_cases

#: The op set's convolutions: asymmetric padding, groups 1 twice as often as 2, sizes from 3.
CONV_CASES = conv_cases(groups=(1, 1, 2), dtypes=FLOATS, asymmetric=True, side=(3, 7))


@given(case=CONV_CASES, with_bias=st.booleans(), fused=st.sampled_from([None, "relu", "sigmoid", "tanh"]))
def test_conv2d_forward_against_loops(xp, case, with_bias, fused):
    x, w, _, stride, padding, dilation, groups = case
    bias = np.linspace(-1, 1, w.shape[0]).astype(x.dtype) if with_bias else None
    y = xp.conv2d_forward(*put(xp, x, w), stride, padding, dilation, groups, bias=put(xp, bias), activation=fused)
    ref = reference.conv2d_ref(x, w, stride, padding, dilation, groups)
    if with_bias:
        ref = ref + bias.reshape(1, -1, 1, 1)
    if fused is not None:
        ref = reference.activation_ref(fused, ref)
    assert y.dtype == x.dtype and y.shape == ref.shape
    np.testing.assert_allclose(get(xp, y), ref, **tol(x.dtype))


@given(case=CONV_CASES, seed=st.integers(0, 99), reuse=st.booleans())
def test_conv2d_backward_against_loops(xp, case, seed, reuse):
    x, w, _, stride, padding, dilation, groups = case
    saved = {}
    dx_, dw_ = put(xp, x, w)
    y = xp.conv2d_forward(dx_, dw_, stride, padding, dilation, groups, saved=saved if reuse else None)
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, stride, padding, dilation, groups)
    ddy = put(xp, dy)
    dx = xp.conv2d_backward_data(ddy, dw_, x.shape, stride, padding, dilation, groups)
    dw = xp.conv2d_backward_filter(ddy, dx_, w.shape, stride, padding, dilation, groups,
                                   saved=saved if reuse else None)
    assert dx.shape == x.shape and dw.shape == w.shape and dx.dtype == x.dtype
    np.testing.assert_allclose(get(xp, dx), dx_ref, **tol(x.dtype))
    np.testing.assert_allclose(get(xp, dw), dw_ref, **tol(x.dtype))
    db = get(xp, xp.conv2d_backward_bias(ddy))
    np.testing.assert_allclose(db, dy.astype(np.float64).sum(axis=(0, 2, 3)), **tol(x.dtype))
