"""The op set's activations and softmax (``ops/activations.py``) on every backend, against the math module,
central differences and ``tests/reference.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import arrays, get, put, tol

#: The op set's activations (tests/reference.py knows cuDNN's too).
ACTIVATIONS = ("elu", "gelu", "leaky_relu", "relu", "sigmoid", "tanh", "gelu_tanh", "silu", "softplus", "softsign",
               "selu", "hard_sigmoid", "exponential")


def derivative(f, v, h=1e-6):
    return (f(v + h) - f(v - h)) / (2 * h)


@pytest.mark.parametrize("kind", ACTIVATIONS)
@given(x=arrays(low=-4, high=4), alpha=st.sampled_from([0.01, 0.2, 1.0]), seed=st.integers(0, 99))
def test_activation_forward_backward(xp, kind, x, alpha, seed):
    x = np.where(np.abs(x) < 1e-3, 0.5, x).astype(x.dtype)  # keep clear of the kink at 0
    x = np.where(np.abs(np.abs(x) - 3) < 1e-3, 2.5, x).astype(x.dtype)  # and of hard_sigmoid's at +-3
    y = xp.activation_forward(put(xp, x), kind, alpha)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_allclose(get(xp, y), reference.activation_ref(kind, x, alpha), **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    dx = get(xp, xp.activation_backward(*put(xp, dy, x), y, kind, alpha))
    expected = dy * derivative(lambda u: reference.activation_ref(kind, u, alpha), x.astype(np.float64))
    np.testing.assert_allclose(dx, expected, rtol=1e-4, atol=1e-4)
    if kind in xp.FUSED_ACTIVATIONS:  # these need only the output
        np.testing.assert_allclose(get(xp, xp.activation_backward(put(xp, dy), None, y, kind)), expected,
                                   rtol=1e-4, atol=1e-4)


def test_activation_extremes_are_finite_and_unknown_kind_rejected(xp):
    x = put(xp, np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32))
    for kind in ACTIVATIONS:
        if kind != "exponential":  # exp(1000) is inf everywhere
            assert xp.isfinite_all(xp.activation_forward(x, kind, 0.1)), kind
    with pytest.raises(ValueError, match="unknown activation kind 'swish'"):
        xp.activation_forward(x, "swish")


@given(x=arrays(min_dims=2, max_dims=2, low=-20, high=20), seed=st.integers(0, 99))
def test_softmax_log_softmax_and_backward(xp, x, seed):
    p = reference.softmax_ref(x, (1,))
    d = put(xp, x)
    np.testing.assert_allclose(get(xp, xp.softmax(d, axis=1)), p, **tol(x.dtype))
    np.testing.assert_allclose(get(xp, xp.log_softmax(d, axis=-1)), np.log(p), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(get(xp, xp.softmax(put(xp, np.ascontiguousarray(x.T)), axis=0)), p.T, **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(x.shape)
    n, c = x.shape
    jac_dx = np.array([[math.fsum(dy[r, j] * p[r, j] * ((i == j) - p[r, i]) for j in range(c)) for i in range(c)]
                       for r in range(n)])  # fmt: skip
    np.testing.assert_allclose(get(xp, xp.softmax_backward(*put(xp, dy, p), axis=-1)), jac_dx, atol=1e-9)
    log_dx = np.array([[dy[r, i] - p[r, i] * math.fsum(dy[r]) for i in range(c)] for r in range(n)])
    np.testing.assert_allclose(get(xp, xp.log_softmax_backward(*put(xp, dy, np.log(p)), axis=-1)), log_dx, atol=1e-9)
