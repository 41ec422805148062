"""The op set's normalization ops (``ops/normalization.py``: batch norm, the running-statistics update, layer
and RMS norm) on every backend, against ``tests/reference.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import reference
from tests.conftest import examples
from tests.magmadnn.backend._conformance import arrays, get, put, state_arrays, tol
from tests.strategies import FLOATS


@given(data=st.data(), momentum=st.sampled_from([0.0, 0.9, 0.99]), seed=st.integers(0, 99), unbiased=st.booleans())
def test_batch_norm_train_2d(xp, data, momentum, seed, unbiased):
    x = data.draw(arrays(shape=(data.draw(st.integers(2, 6)), data.draw(st.integers(1, 4)))))
    _check_batch_norm(xp, x, momentum, seed, unbiased)


@given(data=st.data(), momentum=st.sampled_from([0.0, 0.9, 0.99]), seed=st.integers(0, 99), unbiased=st.booleans())
def test_batch_norm_train_4d(xp, data, momentum, seed, unbiased):
    x = data.draw(arrays(shape=(data.draw(st.integers(2, 3)), data.draw(st.integers(1, 3)), 2, 3)))
    _check_batch_norm(xp, x, momentum, seed, unbiased)


def _check_batch_norm(xp, x, momentum, seed, unbiased=True):
    rng = np.random.default_rng(seed)
    c = x.shape[1]
    gamma, beta = rng.uniform(0.5, 2, c).astype(x.dtype), rng.standard_normal(c).astype(x.dtype)
    rm0, rv0 = rng.standard_normal(c).astype(x.dtype), rng.uniform(0.5, 2, c).astype(x.dtype)
    d_x, d_gamma, d_beta, d_rm, d_rv = put(xp, x, gamma, beta, rm0, rv0)
    eps = 1e-5
    y, ctx = xp.batch_norm_train(d_x, d_gamma, d_beta, d_rm, d_rv, momentum, eps, unbiased)
    y, rm, rv = get(xp, y, d_rm, d_rv)
    axes, shape = (0, *range(2, x.ndim)), (1, c) + (1,) * (x.ndim - 2)  # per channel
    g64, b64 = gamma.astype(np.float64).reshape(shape), beta.astype(np.float64).reshape(shape)
    y_ref, mean, _, unbiased_var = reference.batch_norm_ref(x, g64, b64, eps, axes)
    batch_var = unbiased_var if unbiased else x.astype(np.float64).var(axis=axes)
    np.testing.assert_allclose(y, y_ref, rtol=1e-3, atol=1e-3)
    for ch in range(c):
        assert rm[ch] == pytest.approx(momentum * rm0[ch] + (1 - momentum) * mean.ravel()[ch], rel=1e-4, abs=1e-5)
        assert rv[ch] == pytest.approx(momentum * rv0[ch] + (1 - momentum) * batch_var.ravel()[ch], rel=1e-4, abs=1e-5)
    # inference with the updated running statistics
    yi = get(xp, xp.batch_norm_infer(d_x, d_gamma, d_beta, d_rm, d_rv, eps))
    rm64, rv64 = rm.astype(np.float64).reshape(shape), rv.astype(np.float64).reshape(shape)
    np.testing.assert_allclose(yi, (x.astype(np.float64) - rm64) / np.sqrt(rv64 + eps) * g64 + b64, rtol=1e-4,
                               atol=1e-4)
    # backward
    dy = rng.standard_normal(x.shape)
    dx, dgamma, dbeta = get(xp, *xp.batch_norm_backward(put(xp, dy.astype(x.dtype)), d_x, d_gamma, ctx))
    dx_ref, dgamma_ref, dbeta_ref = reference.batch_norm_backward_ref(x, dy, g64, eps, axes)
    np.testing.assert_allclose(dx, dx_ref, rtol=2e-3, atol=2e-3)
    for ch in range(c):
        assert dgamma[ch] == pytest.approx(dgamma_ref.ravel()[ch], rel=1e-3, abs=1e-3)
        assert dbeta[ch] == pytest.approx(dbeta_ref.ravel()[ch], rel=1e-4, abs=1e-4)


def test_batch_norm_rejects_3d(xp):
    z, one = xp.zeros((3,)), xp.ones((3,))
    with pytest.raises(ValueError, match="2-D .* or 4-D"):
        xp.batch_norm_train(xp.zeros((2, 3, 4)), one, z, xp.zeros((3,)), xp.ones((3,)), 0.9, 1e-5)


@given(seed=st.integers(0, 999), momentum=st.sampled_from([0.0, 0.1, 0.9, 0.99]), dtype=st.sampled_from(FLOATS))
def test_running_stat_update_is_the_batch_norm_rule_in_place(xp, seed, momentum, dtype):
    r0, b0, _, _ = state_arrays(seed, dtype=dtype)
    running, batch = put(xp, r0, b0)
    assert xp.running_stat_update(running, batch, momentum) is None
    running, batch = get(xp, running, batch)
    expected = [momentum * float(r) + (1 - momentum) * float(b) for r, b in zip(r0, b0)]
    np.testing.assert_allclose(running, expected, **tol(dtype))
    np.testing.assert_array_equal(batch, b0)  # the batch statistics are not modified


@st.composite
def norm_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))) + (draw(st.integers(2, 9)),)
    return shape, draw(st.sampled_from(FLOATS)), draw(st.booleans()), draw(st.sampled_from(["both", "gamma", None]))


@settings(max_examples=examples(12))
@given(case=norm_cases(), seed=st.integers(0, 2**31 - 1))
def test_layer_norm_forward_backward(xp, case, seed):
    shape, dtype, rms, params = case
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=shape) * 3 + rng.normal()).astype(dtype)
    dy = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(dtype) if params else None
    beta = rng.normal(size=shape[-1]).astype(dtype) if params == "both" else None
    y, ctx = xp.layer_norm_forward(put(xp, x), put(xp, gamma), put(xp, beta), 1e-3, rms)
    assert y.shape == shape and y.dtype == dtype
    np.testing.assert_allclose(get(xp, y), reference.layer_norm_ref(x, gamma, beta, 1e-3, rms), **tol(dtype))
    dx, dgamma, dbeta = xp.layer_norm_backward(put(xp, dy), put(xp, x), put(xp, gamma), ctx, rms)
    want_dx, want_dgamma, want_dbeta = reference.layer_norm_backward_ref(x, dy, gamma, 1e-3, rms)
    loose = {"rtol": 1e-3, "atol": 1e-4} if dtype == np.float32 else tol(dtype)
    np.testing.assert_allclose(get(xp, dx), want_dx, **loose)
    if gamma is None:
        assert dgamma is None and dbeta is None
    else:
        np.testing.assert_allclose(get(xp, dgamma), want_dgamma, **loose)
        np.testing.assert_allclose(get(xp, dbeta), want_dbeta, **loose)
