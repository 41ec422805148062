"""The host's training fast paths: the multi-tensor SGD update, the one-pass softmax cross-entropy kernels, the bias
gradients and fit's data check. Each against an independent reference (float64 formulas, loops, the
per-parameter update), with numba on and off where a kernel is involved."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import backend
from magmadnn.backend import _host_jit
from tests.strategies import FLOATS

xp = backend.get("host")
HAVE_NUMBA = _host_jit.kernels is not None


@pytest.fixture(params=["numpy", pytest.param("jit", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="no numba"))])
def jit(request):
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "numpy":
            mp.setattr(_host_jit, "kernels", None)
        yield request.param


def tol(dtype):
    return {"rtol": 2e-6, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


# ------------------------------------------------------------------------------------------ multi-tensor SGD


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from(FLOATS), momentum=st.sampled_from([0.0, 0.9]), lr=st.floats(1e-3, 0.5),
       seed=st.integers(0, 999), strided=st.booleans())
def test_sgd_update_many_equals_one_update_per_parameter_bit_for_bit(dtype, momentum, lr, seed, strided):
    """Every parameter (a strided one included, which takes the NumPy path) ends as ``sgd_update`` leaves it."""
    rng = np.random.default_rng(seed)
    shapes = [(4, 3), (3,), (2, 2, 5)]
    ps = [rng.standard_normal(s).astype(dtype) for s in shapes]
    if strided:
        ps[0] = np.ascontiguousarray(rng.standard_normal((4, 6)).astype(dtype))[:, ::2]
    gs = [rng.standard_normal(p.shape).astype(dtype) for p in ps]
    vs = [rng.standard_normal(p.shape).astype(dtype) for p in ps] if momentum else None
    one_p, one_v = [p.copy() for p in ps], None if vs is None else [v.copy() for v in vs]
    for _ in range(2):
        xp.sgd_update_many(ps, gs, vs, lr, momentum=momentum, keras=True)
        for i in range(len(one_p)):
            xp.sgd_update(one_p[i], gs[i], None if one_v is None else one_v[i], lr, momentum=momentum, keras=True)
    for i in range(len(ps)):
        np.testing.assert_array_equal(ps[i], one_p[i])
        if momentum:
            np.testing.assert_array_equal(vs[i], one_v[i])


def test_sgd_update_many_with_weight_decay_and_nesterov_matches_the_rule(jit):
    """The rates the kernel does not take go parameter by parameter through ``sgd_update`` (Keras' decoupled
    decay, then Nesterov's momentum), written out here with float64 scalars."""
    rng = np.random.default_rng(0)
    p, g, v = (rng.standard_normal((3, 4)) for _ in range(3))
    ps, vs = [p.copy()], [v.copy()]
    xp.sgd_update_many(ps, [g], vs, 0.1, momentum=0.9, nesterov=True, weight_decay=0.01, keras=True)
    p_ref = p - 0.1 * 0.01 * p
    v_ref = 0.9 * v + g
    p_ref = p_ref - 0.1 * (0.9 * v_ref + g)
    np.testing.assert_allclose(ps[0], p_ref, rtol=1e-12)
    np.testing.assert_allclose(vs[0], v_ref, rtol=1e-12)


def test_sgd_update_many_rejects_lists_of_different_lengths():
    p = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="2 parameters, 1 gradients"):
        xp.sgd_update_many([p, p.copy()], [p], None, 0.1)
    with pytest.raises(ValueError, match="1 velocities"):
        xp.sgd_update_many([p, p.copy()], [p, p], [p], 0.1, momentum=0.9)


# ------------------------------------------------------------------------------------------ softmax cross-entropy


def _softmax_xent_ref(logits, labels):
    """Mean loss, probabilities and the mean's gradient in float64."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    probs = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = np.log(e.sum(axis=1)) - z[rows, labels]
    grad = probs.copy()
    grad[rows, labels] -= 1
    return loss.mean(), probs, grad / len(labels)


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(FLOATS), rows=st.integers(1, 70), cols=st.integers(1, 12), scale=st.floats(0.1, 30),
       label_dtype=st.sampled_from([np.int64, np.int32, np.uint8]), seed=st.integers(0, 999))
def test_softmax_cross_entropy_mean_and_its_gradient_match_float64(dtype, rows, cols, scale, label_dtype, seed):
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, cols)) * scale).astype(dtype)
    labels = rng.integers(0, cols, rows).astype(label_dtype)
    ref_loss, ref_probs, ref_grad = _softmax_xent_ref(logits, labels)
    for kernels in (_host_jit.kernels, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_host_jit, "kernels", kernels)
            loss, probs = xp.softmax_cross_entropy_mean(logits, labels)
            grad = xp.softmax_cross_entropy_mean_backward(probs, labels, None)
            grad2 = xp.softmax_cross_entropy_mean_backward(probs, labels, np.asarray(2.5, dtype))
        assert loss.shape == () and loss.dtype == dtype and probs.dtype == dtype and grad.dtype == dtype
        np.testing.assert_allclose(loss, ref_loss, **tol(dtype))
        np.testing.assert_allclose(probs, ref_probs, **tol(dtype))
        np.testing.assert_allclose(grad, ref_grad, **tol(dtype))
        np.testing.assert_allclose(grad2, 2.5 * ref_grad, **tol(dtype))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_softmax_cross_entropy_kernel_keeps_numpy_semantics_at_the_edges(jit):
    """A label past the last class raises IndexError, a negative label counts from the end (NumPy indexing), and a
    NaN or +inf logit makes its row's loss and probabilities NaN, on both paths."""
    logits = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    with pytest.raises(IndexError):
        xp.softmax_cross_entropy_mean(logits, np.array([0, 4, 1]))
    wrapped, _ = xp.softmax_cross_entropy_mean(logits, np.array([-1, -1, -1]))
    ref, _, _ = _softmax_xent_ref(logits, np.array([3, 3, 3]))
    np.testing.assert_allclose(wrapped, ref, rtol=1e-6)
    bad = logits.copy()
    bad[0, 2], bad[2, 0] = np.nan, np.inf
    loss, probs = xp.softmax_cross_entropy_mean(bad, np.array([0, 1, 2]))
    assert np.isnan(loss)
    assert np.isnan(probs[0]).all() and np.isnan(probs[2]).all() and np.isfinite(probs[1]).all()


# ------------------------------------------------------------------------------------------ bias gradients


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (6, 2, 5, 4), (2, 3, 2, 2, 3), (0, 3, 4, 4)])
def test_channel_sum_sums_every_axis_but_the_channels(shape):
    a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    got = xp.channel_sum(a)
    ref = a.astype(np.float64).sum(axis=tuple(i for i in range(a.ndim) if i != 1))
    assert got.shape == (shape[1],) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    strided = np.repeat(a, 2, axis=-1)[..., ::2]  # not contiguous
    np.testing.assert_allclose(xp.channel_sum(strided), ref, rtol=1e-5, atol=1e-5)


def _edges(a, rng):
    """``a`` with NaN, infinities and signed zeros at random places."""
    flat = a.reshape(-1)
    if not flat.size:
        return a
    for value in (np.nan, np.inf, -np.inf, -0.0, 0.0):
        flat[rng.integers(0, flat.size, max(1, flat.size // 20))] = value
    return a


def _same_bits(got, ref):
    np.testing.assert_array_equal(got, ref)
    number = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(ref[number]))  # signed zeros too


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(FLOATS), st.integers(0, 9), st.integers(1, 40), st.booleans(), st.integers(0, 2**32 - 1))
def test_dense_relu_epilogue_equals_relu_of_the_biased_product(dtype, rows, cols, edges, seed):
    """bias_activation(x, b, 'relu') (the one-pass kernel, or NumPy's add then maximum without numba) equals
    np.maximum(x + b, 0) bit for bit, NaN and signed zeros included, leaves x untouched and returns no
    pre-activation (ReLU's gradient reads the output)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    b = rng.standard_normal(cols).astype(dtype)
    if edges:
        x, b = _edges(x, rng), _edges(b, rng)
    before = x.copy()
    for kernels in (_host_jit.kernels, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_host_jit, "kernels", kernels)
            with np.errstate(invalid="ignore"):
                y, z = xp.bias_activation(x, b, "relu")
                ref = np.maximum(x + b, dtype(0))
        _same_bits(y, ref)
        assert z is None and y.dtype == dtype and y.shape == x.shape
        np.testing.assert_array_equal(x, before)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(FLOATS), st.integers(0, 9), st.integers(1, 40), st.booleans(), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_dense_relu_backward_equals_the_masked_gradient_and_its_column_sums(dtype, rows, cols, edges, bias, seed):
    """bias_activation_backward(dy, None, y, 'relu') gives dx = dy * (y > 0) and db = dx summed over the rows, bit
    for bit as NumPy computes them (the kernel adds the rows in NumPy's order), infinite dy times a zero mask giving
    NaN as NumPy does; db None without ``bias``."""
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal((rows, cols)).astype(dtype)
    y = np.maximum(rng.standard_normal((rows, cols)), 0).astype(dtype)
    if edges:
        dy, y = _edges(dy, rng), _edges(y, rng)
    with np.errstate(invalid="ignore"):
        ref_dx = np.multiply(dy, y > 0)
        ref_db = ref_dx.sum(axis=0)
    for kernels in (_host_jit.kernels, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_host_jit, "kernels", kernels)
            with np.errstate(invalid="ignore"):
                dx, db = xp.bias_activation_backward(dy, None, y, "relu", bias=bias)
        _same_bits(dx, ref_dx)
        if bias:
            _same_bits(db, ref_db)
            assert db.dtype == dtype
        else:
            assert db is None


def test_dense_relu_kernels_run_only_where_they_fit(monkeypatch):
    """The one-pass kernels take C-contiguous arrays of one float dtype (a bias of the columns' length; a 4-D
    convolution gradient's samples as rows); a strided input or mixed dtypes take the NumPy path, with the same
    results."""
    if not HAVE_NUMBA:
        pytest.skip("no numba")
    kernels, calls = _host_jit.kernels, []
    monkeypatch.setattr(_host_jit, "kernels", type("K", (), {
        "bias_relu": staticmethod(lambda *a: calls.append("forward") or kernels.bias_relu(*a)),
        "bias_relu_backward": staticmethod(lambda *a: calls.append("backward") or kernels.bias_relu_backward(*a)),
        "relu_backward": staticmethod(kernels.relu_backward)})())
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    xp.bias_activation(x, b, "relu")
    y, _ = xp.bias_activation(x, b, "relu")
    xp.bias_activation_backward(x, None, y, "relu")
    assert calls == ["forward", "forward", "backward"]
    calls.clear()
    strided = np.repeat(x, 2, axis=1)[:, ::2]
    np.testing.assert_array_equal(xp.bias_activation(strided, b, "relu")[0], np.maximum(x + b, 0))
    np.testing.assert_array_equal(xp.bias_activation(x, b.astype(np.float64), "relu")[0],
                                  np.maximum(x + b.astype(np.float64), 0))
    dx, db = xp.bias_activation_backward(strided, None, y, "relu")
    np.testing.assert_array_equal(dx, x * (y > 0))
    assert calls == []
    dx4, db4 = xp.bias_activation_backward(x.reshape(2, 4, 3, 2), None, y.reshape(2, 4, 3, 2), "relu")
    assert calls == ["backward"]  # a convolution's gradient: its samples as rows (see test_host_plans)
    np.testing.assert_array_equal(dx4, (x * (y > 0)).reshape(2, 4, 3, 2))
    np.testing.assert_array_equal(db4, (x * (y > 0)).reshape(2, 4, 6).sum(axis=0).sum(axis=1))


# ------------------------------------------------------------------------------------------ the data check of fit


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
@pytest.mark.filterwarnings("error")
def test_the_data_check_names_the_first_non_finite_entry_and_passes_large_finite_data(dtype):
    """One summing pass finds NaN/inf (in the array's own type for 4-byte and wider floats); a sum that overflows
    is no error when every entry is finite."""
    from magmadnn._checks import finite_array

    big = np.full((3, 4), np.finfo(dtype).max / 2, dtype=dtype)
    finite_array(big, "inputs", "fit")  # the sum overflows; every entry is finite
    for bad in (np.nan, np.inf, -np.inf):
        x = np.ones((3, 4), dtype=dtype)
        x[1, 2] = bad
        x[2, 0] = bad
        with pytest.raises(ValueError, match=r"fit: inputs hold non-finite values \(2 of 12; .* at index \(1, 2\)\)"):
            finite_array(x, "inputs", "fit")


def test_fit_rejects_non_finite_inputs_before_any_batch():
    from magmadnn import zoo

    model = zoo.mlp((4,), 2, hidden=(3,)).compile("sgd", "cross_entropy", seed=0)
    x = np.ones((8, 4), np.float32)
    x[5, 1] = np.inf
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(ValueError, match="non-finite"):
        model.fit(x, np.zeros(8, np.int64), batch_size=4, verbose=0)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.data, b)
