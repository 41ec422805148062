"""The op set's masked softmax (``ops/attention.py``) on every backend, against a plain reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.magmadnn.backend._conformance import arrays, get, put, tol


def masked_softmax_reference(x, mask, scale, causal):
    """Row by row with the math module: keys kept by the causal rule and the mask, exp over their sum."""
    out = np.zeros(x.shape)
    for b, h, i in np.ndindex(x.shape[:3]):
        keys = [j for j in range(x.shape[3]) if not (causal and j > i) and (mask is None or mask[b, j] != 0)]
        if keys:
            top = max(scale * float(x[b, h, i, j]) for j in keys)
            e = {j: math.exp(scale * float(x[b, h, i, j]) - top) for j in keys}
            total = math.fsum(e.values())
            for j in keys:
                out[b, h, i, j] = e[j] / total
    return out


@given(x=arrays(min_dims=4, max_dims=4, max_side=5, low=-6, high=6), causal=st.booleans(), masked=st.booleans(),
       scale=st.sampled_from([1.0, 0.5, 0.125]), seed=st.integers(0, 999))
def test_masked_softmax_and_backward(xp, x, causal, masked, scale, seed):
    rng = np.random.default_rng(seed)
    mask = (rng.uniform(size=(x.shape[0], x.shape[3])) < 0.6).astype(x.dtype) if masked else None
    p = masked_softmax_reference(x, mask, scale, causal)
    y = xp.masked_softmax(put(xp, x), put(xp, mask), scale, causal)
    np.testing.assert_allclose(get(xp, y), p, **tol(x.dtype))
    dy = rng.standard_normal(x.shape).astype(x.dtype)
    dx = np.zeros(x.shape)
    for row in np.ndindex(x.shape[:3]):
        dot = math.fsum(float(dy[row][j]) * p[row][j] for j in range(x.shape[3]))
        dx[row] = [scale * p[row][j] * (float(dy[row][j]) - dot) for j in range(x.shape[3])]
    got = get(xp, xp.masked_softmax_backward(put(xp, dy), put(xp, p.astype(x.dtype)), scale))
    np.testing.assert_allclose(got, dx, **tol(x.dtype))
