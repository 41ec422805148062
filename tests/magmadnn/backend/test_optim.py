"""The op set's in-place optimizer steps and gradient clipping (``ops/optim.py``) on every backend, against the
update rules written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import reference
from tests.conftest import examples
from tests.magmadnn.backend._conformance import get, put, state_arrays, tol
from tests.strategies import FLOATS


@given(seed=st.integers(0, 999), momentum=st.sampled_from([0.0, 0.9]), nesterov=st.booleans(),
       wd=st.sampled_from([0.0, 0.01]), dtype=st.sampled_from(FLOATS))  # fmt: skip
def test_sgd_update_one_step(xp, seed, momentum, nesterov, wd, dtype):
    p0, g0, v0, _ = state_arrays(seed, dtype=dtype)
    p, g, v = put(xp, p0, g0, v0)
    lr = 0.1
    xp.sgd_update(p, g, v, lr, momentum=momentum, nesterov=nesterov, weight_decay=wd)
    p, v, g = get(xp, p, v, g)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        if momentum:
            vi = momentum * float(v0[i]) + gi
            step = gi + momentum * vi if nesterov else vi
            assert v[i] == pytest.approx(vi, rel=1e-5, abs=1e-6)
        else:
            step = gi
        assert p[i] == pytest.approx(float(p0[i]) - lr * step, rel=1e-5, abs=1e-6)
    np.testing.assert_array_equal(g, g0)  # the gradient is not modified


@given(seed=st.integers(0, 999), step=st.integers(1, 5), wd=st.sampled_from([0.0, 0.1]), decoupled=st.booleans(),
       dtype=st.sampled_from(FLOATS))  # fmt: skip
def test_adam_update_one_step(xp, seed, step, wd, decoupled, dtype):
    p0, g0, m0, v0 = state_arrays(seed, dtype=dtype)
    p, g, m, v = put(xp, p0, g0, m0, v0)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    xp.adam_update(p, g, m, v, step, lr, b1, b2, eps, weight_decay=wd, decoupled=decoupled)
    p, m, v = get(xp, p, m, v)
    for i in range(len(p)):
        pi, gi = float(p0[i]), float(g0[i])
        if wd and decoupled:
            pi = pi * (1 - lr * wd)
        elif wd:
            gi = gi + wd * pi
        mi = b1 * float(m0[i]) + (1 - b1) * gi
        vi = b2 * float(v0[i]) + (1 - b2) * gi * gi
        expected = pi - lr * (mi / (1 - b1**step)) / (math.sqrt(vi / (1 - b2**step)) + eps)
        assert m[i] == pytest.approx(mi, rel=1e-5, abs=1e-6) and v[i] == pytest.approx(vi, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(expected, rel=1e-5, abs=1e-6)


@given(seed=st.integers(0, 999), wd=st.sampled_from([0.0, 0.1]), dtype=st.sampled_from(FLOATS))
def test_rmsprop_and_adagrad_one_step(xp, seed, wd, dtype):
    p0, g0, s0, _ = state_arrays(seed, dtype=dtype)
    p, g, s = put(xp, p0, g0, s0)
    lr, rho, eps = 0.01, 0.9, 1e-7
    xp.rmsprop_update(p, g, s, lr, rho, eps, weight_decay=wd)
    p, s = get(xp, p, s)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        si = rho * float(s0[i]) + (1 - rho) * gi * gi
        assert s[i] == pytest.approx(si, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(float(p0[i]) - lr * gi / (math.sqrt(si) + eps), rel=1e-5, abs=1e-6)
    p, g, s = put(xp, p0, g0, s0)
    xp.adagrad_update(p, g, s, lr, eps, weight_decay=wd)
    p, s = get(xp, p, s)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        si = float(s0[i]) + gi * gi
        assert s[i] == pytest.approx(si, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(float(p0[i]) - lr * gi / (math.sqrt(si) + eps), rel=1e-5, abs=1e-6)


@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), scale=st.sampled_from([1e-3, 0.3, 1.0, 50.0]), count=st.integers(1, 3),
       max_norm=st.sampled_from([0.5, 1.0, 4.0]), seed=st.integers(0, 2**31 - 1))
def test_clip_norm_scale(xp, dtype, scale, count, max_norm, seed):
    rng = np.random.default_rng(seed)
    arrays = [(rng.normal(size=rng.integers(1, 6, rng.integers(1, 3))) * scale).astype(dtype) for _ in range(count)]
    got = xp.clip_norm_scale([put(xp, a) for a in arrays], max_norm)
    assert got.shape == () and got.dtype == dtype
    np.testing.assert_allclose(get(xp, got), reference.clip_scale_ref(arrays, max_norm), **tol(dtype))


def test_clip_norm_scale_of_zeros_is_one_and_of_nan_is_nan(xp):
    assert get(xp, xp.clip_norm_scale([xp.zeros((3,), np.float32)], 1.0)) == 1.0
    assert np.isnan(get(xp, xp.clip_norm_scale([put(xp, np.array([1.0, np.nan]))], 1.0)))


@pytest.mark.parametrize("keras", [False, True])
def test_adam_update_reads_its_values_vector(xp, keras):
    """``lr`` given as the float64 vector {lr, 1 - beta1^t, 1 - beta2^t} is the same step as ``step=t``."""
    rng = np.random.default_rng(3)
    p0, g, m0, v0 = (rng.normal(size=5).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)
    out = []
    for step, lr in ((3, 0.01), (1, np.array([0.01, 1 - 0.9**3, 1 - 0.999**3]))):
        p, m, v = put(xp, p0, m0, v0)
        lr = xp.asarray(lr) if isinstance(lr, np.ndarray) else lr
        xp.adam_update(p, put(xp, g), m, v, step, lr, weight_decay=0.1, decoupled=True, keras=keras)
        out.append(get(xp, p, m, v))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
