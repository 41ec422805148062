"""The host backend's fused numba row kernels (LayerNorm, the masked softmax's backward) against its NumPy path.

Each op runs on the same data with the kernels and with ``_host_jit.kernels`` set to None (the NumPy path, as without
numba), and against the float64 references of ``tests/reference.py`` where there is one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magmadnn.backend import _host_jit
from magmadnn.backend import host as xp
from tests.reference import layer_norm_backward_ref, layer_norm_ref, softmax_ref

numba = pytest.importorskip("numba", reason="the parallel kernels need the jit extra (numba)")
pytestmark = pytest.mark.skipif(_host_jit.kernels is None, reason="numba kernels switched off (MAGMADNN_JIT=0)")
fixture_state = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
DTYPES = st.sampled_from([np.float32, np.float64])


def tol(dtype):
    return {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def both_paths(op):
    """op() with the numba kernels, then with the NumPy path."""
    with_jit = op()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_host_jit, "kernels", None)
        return with_jit, op()


def assert_same(a, e, dtype, name=""):
    np.testing.assert_allclose(a, e, equal_nan=True, err_msg=name, **tol(dtype))
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=name)


def data(seed, shape, dtype, special=0.0):
    """Normal data; ``special`` is the fraction set to NaN, +inf or -inf."""
    rng = np.random.default_rng(seed)
    x = (2 * rng.standard_normal(shape)).astype(dtype)
    hit = rng.random(shape) < special
    x[hit] = rng.choice(np.array([np.nan, np.inf, -np.inf], dtype), hit.sum())
    return x


@fixture_state
@given(seed=st.integers(0, 999), dtype=DTYPES, rows=st.integers(1, 12), cols=st.integers(1, 9), rms=st.booleans())
def test_layer_norm_forward_and_backward(seed, dtype, rows, cols, rms):
    x, dy = data(seed, (2, rows, cols), dtype), data(seed + 1, (2, rows, cols), dtype)
    gamma, beta = data(seed + 2, (cols,), dtype), data(seed + 3, (cols,), dtype)
    (y, ctx), (y_np, ctx_np) = both_paths(lambda: xp.layer_norm_forward(x, gamma, beta, 1e-5, rms))
    np.testing.assert_allclose(y, layer_norm_ref(x, gamma, beta, 1e-5, rms), **tol(dtype))
    for name, a, e in zip(("y", "mean", "rstd"), (y, *ctx), (y_np, *ctx_np)):
        assert a.shape == e.shape and a.dtype == e.dtype, name
        assert_same(a, e, dtype, name)
    grads, grads_np = both_paths(lambda: xp.layer_norm_backward(dy, x, gamma, ctx, rms))
    refs = layer_norm_backward_ref(x, dy, gamma, 1e-5, rms)
    for name, a, e, r in zip(("dx", "dgamma", "dbeta"), grads, grads_np, refs):
        assert_same(a, e, dtype, name)
        np.testing.assert_allclose(a, r, err_msg=name, **{k: 10 * v for k, v in tol(dtype).items()})


def softmax_expected(x, mask, scale, causal):
    """float64: scale x plus -inf at the masked keys, softmax over the keys, rows with no key left at 0."""
    keep = np.ones(x.shape, bool)
    if causal:
        keep &= np.tri(x.shape[2], x.shape[3], dtype=bool)
    if mask is not None:
        keep &= (mask != 0)[:, None, None, :]
    s = np.where(keep, scale * x.astype(np.float64), -np.inf)
    empty = ~keep.any(axis=-1, keepdims=True)
    return np.where(empty, 0.0, softmax_ref(np.where(empty, 0.0, s), (3,)))


@fixture_state
@given(seed=st.integers(0, 999), dtype=DTYPES, shape=st.tuples(*(st.integers(1, 5),) * 4), causal=st.booleans(),
       masked=st.booleans())
def test_masked_softmax_backward(seed, dtype, shape, causal, masked):
    x, dy = data(seed, shape, dtype), data(seed + 1, shape, dtype)
    mask = (np.random.default_rng(seed).random((shape[0], shape[3])) > 0.4).astype(np.int64) if masked else None
    y = xp.masked_softmax(x, mask, 0.5, causal)
    np.testing.assert_allclose(y, softmax_expected(x, mask, 0.5, causal), **tol(dtype))
    assert_same(*both_paths(lambda: xp.masked_softmax_backward(dy, y, 0.5)), dtype)


def test_non_contiguous_arrays_take_the_numpy_path():
    x = data(0, (3, 6, 8), np.float64)[:, :, ::2]  # a strided view: the kernels read rows in place, so NumPy does it
    gamma, beta = data(1, (4,), np.float64), data(2, (4,), np.float64)
    assert not xp._fused_rows(x, small=(gamma, beta))
    np.testing.assert_allclose(xp.layer_norm_forward(x, gamma, beta, 1e-5)[0], layer_norm_ref(x, gamma, beta),
                               rtol=1e-10)
