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


def test_conv2d_geometry_changed_in_place_is_honoured(xp):
    """A geometry the caller keeps and changes between calls (a list; a tuple holding one) gives the new geometry's
    result: no backend keeps what it decided for such arguments by their identity."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 2, 6, 7)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    dx_, dw_ = put(xp, x, w)
    listed, holding = [1, 1], ((1, 1), [0, 0])  # a list; a tuple holding one
    cases = [(listed, ((1, 1), (0, 0)), (1, 1)), (listed, ((1, 1), (0, 0)), (2, 1)),  # the list changed
             ((2, 1), holding, (0, 0)), ((2, 1), holding, (1, 2))]  # the tuple's list changed
    for stride, padding, change in cases:
        (listed if stride is listed else holding[1])[:] = change
        s, p = tuple(stride), tuple(map(tuple, padding))
        y = xp.conv2d_forward(dx_, dw_, stride, padding)
        np.testing.assert_allclose(get(xp, y), reference.conv2d_ref(x, w, s, p, (1, 1), 1), **tol(x.dtype))
        dy = rng.standard_normal(y.shape).astype(np.float32)
        dx = xp.conv2d_backward_data(put(xp, dy), dw_, x.shape, stride, padding)
        np.testing.assert_allclose(get(xp, dx), reference.conv2d_backward_ref(x, w, dy, s, p, (1, 1), 1)[0],
                                   **tol(x.dtype))


def test_conv2d_equal_geometries_of_other_objects_agree(xp):
    """The same call with equal geometry tuples made afresh, and with other geometries between, computes the same."""
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 2, 5, 5)).astype(np.float32), rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    dx_, dw_ = put(xp, x, w)
    outs = []
    for k in range(4):
        stride = tuple([1 + k % 2, 1])  # a new tuple object each call
        padding = ((k % 2, 1), tuple([1, k % 2]))
        outs.append(get(xp, xp.conv2d_forward(dx_, dw_, stride, padding)))
        np.testing.assert_allclose(outs[-1], reference.conv2d_ref(x, w, stride, padding, (1, 1), 1), **tol(x.dtype))
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
