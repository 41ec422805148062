"""The op set's linear ops (``ops/linear.py``: matmul with transposes and stacks, bias add and its gradient) on
every backend, against loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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
