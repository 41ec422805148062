"""The op set's element-wise ops (``ops/elementwise.py``) on every backend, against Python's math module applied
element by element."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.magmadnn.backend._conformance import arrays, elementwise_reference, get, put, tol

BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@given(data=st.data())
def test_binary_elementwise_with_broadcasting(xp, op, data):
    a = data.draw(arrays(max_dims=3))
    dtype = a.dtype
    # b broadcasts against a: some axes of a replaced by 1, maybe fewer leading axes
    b_shape = tuple(data.draw(st.sampled_from([1, n])) for n in a.shape)[data.draw(st.integers(0, a.ndim - 1)) :]
    b = data.draw(arrays(shape=b_shape, dtype=dtype))
    got = getattr(xp, op)(*put(xp, a, b))
    assert got.dtype == dtype
    np.testing.assert_allclose(get(xp, got), elementwise_reference(BINARY[op], a, b), **tol(dtype))
    swapped = getattr(xp, op)(*put(xp, b, a))
    np.testing.assert_allclose(get(xp, swapped), elementwise_reference(BINARY[op], b, a), **tol(dtype))


@pytest.mark.parametrize("op", sorted(BINARY) + ["divide"])
@given(a=arrays(low=0.5, high=3.0), scalar=st.sampled_from([2.0, -0.5, 3]))
def test_python_scalar_operands_take_the_array_dtype(xp, op, a, scalar):
    ref = {**BINARY, "divide": lambda u, v: u / v}[op]
    left, right = getattr(xp, op)(put(xp, a), scalar), getattr(xp, op)(scalar, put(xp, a))
    assert left.dtype == a.dtype and right.dtype == a.dtype
    np.testing.assert_allclose(get(xp, left), elementwise_reference(lambda v: ref(v, scalar), a), **tol(a.dtype))
    np.testing.assert_allclose(get(xp, right), elementwise_reference(lambda v: ref(scalar, v), a), **tol(a.dtype))


@given(a=arrays(), data=st.data())
def test_divide(xp, a, data):
    b = data.draw(arrays(shape=a.shape, low=0.5, high=3.0, dtype=a.dtype))
    got = get(xp, xp.divide(*put(xp, a, b)))
    np.testing.assert_allclose(got, elementwise_reference(lambda u, v: u / v, a, b), **tol(a.dtype))


@given(a=arrays(low=0.1, high=5.0), p=st.sampled_from([0.5, 2.0, 3.0, -1.0]))
def test_negative_sqrt_power(xp, a, p):
    d = put(xp, a)
    for got, ref in ((xp.negative(d), lambda v: -v), (xp.sqrt(d), math.sqrt), (xp.power(d, p), lambda v: v**p)):
        assert got.dtype == a.dtype and got.shape == a.shape
        np.testing.assert_allclose(get(xp, got), elementwise_reference(ref, a), **tol(a.dtype))


@given(a=arrays(low=-2.0, high=5.0), lo=st.floats(-1.0, 1.0), width=st.floats(0.0, 3.0))
def test_log_clip(xp, a, lo, width):
    d = put(xp, a)
    hi = lo + width
    clipped = xp.clip(d, lo, hi)
    assert clipped.dtype == a.dtype and clipped.shape == a.shape
    np.testing.assert_allclose(get(xp, clipped), elementwise_reference(lambda v: min(max(v, lo), hi), a),
                               **tol(a.dtype))
    positive = np.abs(a) + np.asarray(0.1, a.dtype)
    np.testing.assert_allclose(get(xp, xp.log(put(xp, positive))), elementwise_reference(math.log, positive),
                               **tol(a.dtype))


def test_isfinite_all(xp):
    assert xp.isfinite_all(xp.ones((3,), np.float32)) is True
    assert xp.isfinite_all(put(xp, np.array([1.0, np.nan]))) is False
    assert xp.isfinite_all(put(xp, np.array([[1.0], [-np.inf]], np.float32))) is False
