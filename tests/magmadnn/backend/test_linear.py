"""The op set's linear ops (``ops/linear.py``: matmul with transposes and stacks, bias add and its gradient) on
every backend, against loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import arrays, get, put, tol
from tests.strategies import FLOATS


def matmul_reference(a, b):
    m, k = a.shape
    n = b.shape[1]
    return np.array(
        [[math.fsum(float(a[i, p]) * float(b[p, j]) for p in range(k)) for j in range(n)] for i in range(m)]
    )


@given(m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([(), (2,), (1, 2)]), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 999))  # fmt: skip
def test_matmul_with_transposes_and_stacks(xp, m, k, n, ta, tb, batch, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(dtype)
    b = rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(dtype)
    got = xp.matmul(*put(xp, a, b), transpose_a=ta, transpose_b=tb)
    assert got.shape == batch + (m, n) and got.dtype == dtype
    got = get(xp, got)
    for idx in np.ndindex(batch):
        aa = a[idx].T if ta else a[idx]
        bb = b[idx].T if tb else b[idx]
        np.testing.assert_allclose(got[idx], matmul_reference(aa, bb), **tol(dtype))


@given(x=arrays(min_dims=2, max_dims=4))
def test_bias_add_and_grad(xp, x):
    c = x.shape[1]
    bias = np.arange(c, dtype=x.dtype) - 1.5
    got = get(xp, xp.bias_add(*put(xp, x, bias)))
    expected_grad = np.zeros(c)
    for pos in np.ndindex(x.shape):
        assert got[pos] == pytest.approx(x[pos] + bias[pos[1]], rel=1e-6, abs=1e-6)
        expected_grad[pos[1]] += float(x[pos])
    np.testing.assert_allclose(get(xp, xp.bias_grad(put(xp, x))), expected_grad, **tol(x.dtype))


#: the op set's activations (as test_activations' list)
ACTIVATIONS = ("elu", "gelu", "leaky_relu", "relu", "sigmoid", "tanh", "gelu_tanh", "silu", "softplus", "softsign",
               "selu", "hard_sigmoid", "exponential")


@pytest.mark.parametrize("kind", ACTIVATIONS)
@given(x=arrays(min_dims=2, max_dims=4, low=-4, high=4), alpha=st.sampled_from([0.01, 0.2, 1.0]),
       seed=st.integers(0, 99))
def test_bias_activation_is_the_activation_of_bias_add_and_its_backward(xp, kind, x, alpha, seed):
    """The epilogue op against the reference activation of x + b, its backward against central differences and
    the bias gradient against the sum of dx over every axis but 1; z is kept exactly where the gradient reads it."""
    from magmadnn.backend import geometry

    rng = np.random.default_rng(seed)
    bias = rng.uniform(-1, 1, x.shape[1]).astype(x.dtype)
    z = x + bias.reshape((1, -1) + (1,) * (x.ndim - 2))
    z = np.where(np.abs(z) < 1e-3, 0.5, z)  # keep clear of the kink at 0 (and hard_sigmoid's at +-3)
    z = np.where(np.abs(np.abs(z) - 3) < 1e-3, 2.5, z).astype(x.dtype)
    x = (z - bias.reshape((1, -1) + (1,) * (x.ndim - 2))).astype(x.dtype)
    y, kept = xp.bias_activation(*put(xp, x, bias), kind, alpha)
    assert (kept is not None) == (kind in geometry.INPUT_GRAD_ACTIVATIONS)
    z64 = x.astype(np.float64) + bias.reshape((1, -1) + (1,) * (x.ndim - 2))
    np.testing.assert_allclose(get(xp, y), reference.activation_ref(kind, z64, alpha), **tol(x.dtype))
    if kept is not None:
        np.testing.assert_allclose(get(xp, kept), z64, **tol(x.dtype))
    dy = rng.standard_normal(x.shape).astype(x.dtype)
    dx, db = xp.bias_activation_backward(put(xp, dy), kept, y, kind, alpha)
    expected = dy * (reference.activation_ref(kind, z64 + 1e-6, alpha)
                     - reference.activation_ref(kind, z64 - 1e-6, alpha)) / 2e-6
    np.testing.assert_allclose(get(xp, dx), expected, rtol=1e-4, atol=1e-4)
    axes = (0, *range(2, x.ndim))
    np.testing.assert_allclose(get(xp, db), expected.sum(axis=axes), rtol=1e-4, atol=1e-4 * x.size)
    assert xp.bias_activation_backward(put(xp, dy), kept, y, kind, alpha, bias=False)[1] is None


def test_bias_activation_rejects_an_unknown_kind(xp):
    x, b = put(xp, np.ones((2, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="softmax"):
        xp.bias_activation(x, b, "softmax")
