"""The op set's losses (``ops/losses.py``: softmax cross-entropy with hard and soft labels) on every backend,
against ``tests/reference.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import arrays, get, put, tol


@given(x=arrays(min_dims=2, max_dims=2, low=-30, high=30), seed=st.integers(0, 999), soft=st.booleans())
def test_softmax_cross_entropy(xp, x, seed, soft):
    n, c = x.shape
    rng = np.random.default_rng(seed)
    if soft:
        labels = rng.uniform(0, 1, (n, c)).astype(x.dtype)
        labels /= labels.sum(axis=1, keepdims=True)
        target = labels.astype(np.float64)
    else:
        labels = rng.integers(0, c, n)
        target = np.zeros((n, c))
        target[np.arange(n), labels] = 1
    d_labels = put(xp, labels)
    loss, probs = xp.softmax_cross_entropy(put(xp, x), d_labels)
    assert loss.shape == (n,) and loss.dtype == x.dtype and probs.shape == (n, c)
    p = reference.softmax_ref(x, (1,))
    expected = [math.fsum(-target[i, j] * (float(x[i, j]) - max(x[i]) - math.log(math.fsum(
        math.exp(float(v) - max(x[i])) for v in x[i]))) for j in range(c)) for i in range(n)]  # fmt: skip
    np.testing.assert_allclose(get(xp, loss), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(get(xp, probs), p, **tol(x.dtype))
    dloss = rng.uniform(0.5, 2.0, n).astype(x.dtype)
    d = get(xp, xp.softmax_cross_entropy_backward(probs, d_labels, put(xp, dloss)))
    np.testing.assert_allclose(d, (p - target) * dloss[:, None], rtol=1e-4, atol=1e-5)


def test_softmax_cross_entropy_is_stable_for_huge_logits(xp):
    logits = put(xp, np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]], np.float32))
    loss, probs = xp.softmax_cross_entropy(logits, put(xp, np.array([0, 0])))
    assert xp.isfinite_all(loss) and xp.isfinite_all(probs)
    loss = get(xp, loss)
    assert loss[0] == pytest.approx(0.0, abs=1e-6) and loss[1] == pytest.approx(2e4, rel=1e-6)
