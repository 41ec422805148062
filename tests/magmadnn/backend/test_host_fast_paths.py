"""The host backend's fast paths: split GEMMs, banded convolution output, fused activations and the optional numba
kernels. Each path is checked against the references of ``tests/reference.py`` (or plain loops written here), with the
JIT kernels both on and off (``jit`` fixture), and the fallback when numba is missing is simulated.
"""

from __future__ import annotations

import importlib
import itertools
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from magmadnn import backend
from magmadnn import functional as F
from magmadnn.autograd import Tensor
from magmadnn.backend import _host_jit
from tests.reference import activation_ref, conv2d_backward_ref, conv2d_ref, pool2d_backward_ref, pool2d_ref
from tests.strategies import FLOATS, conv_cases

xp = backend.get("host")
HAVE_NUMBA = _host_jit.kernels is not None
# The fixtures below set module state for a whole test, the same for every generated example.
fixture_state = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(params=["numpy", pytest.param("jit", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="no numba"))])
def jit(request):
    """Run the test once on the NumPy path and once with the numba kernels (when numba is installed)."""
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "numpy":
            mp.setattr(_host_jit, "kernels", None)
        yield request.param


@pytest.fixture
def tiny_split():
    """Thresholds so small that the split/banded GEMM paths run on test-sized shapes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(xp.linear, "_SPLIT_WORK", 60)  # the GEMM split's home, read by conv2d_forward too
        mp.setattr(xp.linear, "_SPLIT_MIN", 2)
        yield


def conv_with_bias(x, w, b, padding):
    """The convolution reference (stride 1) plus the bias."""
    return conv2d_ref(x, w, padding=padding) + b.astype(np.float64)[None, :, None, None]


FUSED = ["relu", "tanh", "sigmoid", None]


def conv_problems():
    """Stride 1, no dilation, one group, symmetric zero padding up to 1: what the banded and split paths take."""
    return conv_cases(dtypes=FLOATS, groups=(1,), filters=3, stride=1, dilation=1, padding=1, batch=3, side=(3, 7))


@pytest.fixture(params=["shifted", "columns"])
def form(request):
    """The inference convolution's two forms: "shifted" (taken whenever the vertical stride is 1) and "columns"."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(xp._conv_infer, "_SHIFT_MIN_ROWS", 0 if request.param == "shifted" else 1 << 30)
        yield request.param


@pytest.mark.parametrize("activation", FUSED)
@fixture_state
@given(data=st.data(), dtype=st.sampled_from(FLOATS), group=st.integers(1, 200))
def test_inference_conv_forward_by_groups_of_samples(jit, form, activation, data, dtype, group):
    """Nothing kept for a backward (``saved=None``): samples in groups (sized by the column budget, here tiny), each
    multiplied straight into its NCHW rows; strides, dilation, asymmetric padding, bias, fused activation; with
    ``conv2d_forward_residual`` a residual added before the activation."""
    x, w, b, stride, padding, dilation, _ = data.draw(conv_cases(dtypes=(dtype,), groups=(1,), batch=4,
                                                                 asymmetric=True))
    b = b if data.draw(st.booleans()) else None
    ref = conv2d_ref(x, w, stride=stride, padding=padding, dilation=dilation)
    residual = np.random.default_rng(0).standard_normal(ref.shape).astype(dtype) if data.draw(st.booleans()) else None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(xp._conv_infer, "_SAMPLE_COLUMNS", group)
        mp.setattr(xp._conv_infer, "_NUMPY_SAMPLE_COLUMNS", group)
        if residual is None:
            y = xp.conv2d_forward(x, w, stride=stride, padding=padding, dilation=dilation, bias=b,
                                  activation=activation)
        else:
            y = xp.conv.conv2d_forward_residual(x, w, residual, stride=stride, padding=padding, dilation=dilation,
                                                bias=b, activation=activation)
    if b is not None:
        ref = ref + b.astype(np.float64)[None, :, None, None]
    if residual is not None:
        ref = ref + residual
    if activation is not None:
        ref = activation_ref(activation, ref)
    assert y.dtype == x.dtype and y.flags["C_CONTIGUOUS"] and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, **tol(x.dtype))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@fixture_state
@given(problem=conv_problems(), seed=st.integers(0, 999))
def test_residual_convolution_is_the_ops_one_by_one_bit_for_bit(jit, form, problem, seed):
    """``conv2d_forward_residual`` computes conv + bias, + residual, then ReLU as the separate ops would (what the
    ONNX fusion pass relies on), NaN and infinities included."""
    x, w, b, _, padding, _, _ = problem
    y = xp.conv2d_forward(x, w, padding=padding, bias=b)
    residual = sprinkle(np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype), seed, 0.1)
    fused = xp.conv.conv2d_forward_residual(sprinkle(x, seed, 0.05), w, residual, padding=padding, bias=b,
                                            activation="relu")
    apart = np.maximum(xp.conv2d_forward(sprinkle(x, seed, 0.05), w, padding=padding, bias=b) + residual, 0)
    np.testing.assert_array_equal(fused, apart)


def test_residual_convolution_refuses_what_it_cannot_do():
    x, w = np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match="residual has shape"):
        xp.conv.conv2d_forward_residual(x, w, np.ones((2, 4, 5, 5), np.float32))
    with pytest.raises(ValueError, match="cannot be fused"):
        xp.conv.conv2d_forward_residual(x, w, np.ones((2, 4, 3, 3), np.float32), activation="gelu")
    with pytest.raises(ValueError, match="channels"):
        xp.conv.conv2d_forward_residual(x, np.ones((4, 2, 3, 3), np.float32), np.ones((2, 4, 3, 3), np.float32))


@pytest.mark.parametrize("activation", FUSED)
@fixture_state
@given(problem=conv_problems())
def test_banded_conv_forward_with_fused_activation(jit, tiny_split, activation, problem):
    x, w, b, _, padding, _, _ = problem
    y = xp.conv2d_forward(x, w, padding=padding, bias=b, activation=activation, saved={})  # kept for a backward
    ref = conv_with_bias(x, w, b, padding)
    if activation is not None:
        ref = activation_ref(activation, ref)
    assert y.dtype == x.dtype and y.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(y, ref, **tol(x.dtype))


def test_empty_batch_goes_through_every_path(jit, tiny_split):
    x, w = np.zeros((0, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    y = xp.conv2d_forward(x, w, padding=(1, 1), bias=np.ones(3, np.float32), activation="relu")
    assert y.shape == (0, 3, 5, 5)
    assert xp.conv2d_backward_data(y, w, x.shape, padding=(1, 1)).shape == x.shape
    assert xp.conv2d_backward_filter(y, x, w.shape, padding=(1, 1)).shape == w.shape
    p, ctx = xp.pool2d_forward(y[:, :, :4, :4], "max", (2, 2), (2, 2))
    assert p.shape == (0, 3, 2, 2)
    assert xp.pool2d_backward(p, y[:, :, :4, :4], p, ctx, "max", (2, 2), (2, 2)).shape == (0, 3, 4, 4)


def test_conv_forward_rejects_an_activation_it_cannot_fuse():
    with pytest.raises(ValueError, match="activation 'gelu' cannot be fused"):
        xp.conv2d_forward(np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), activation="gelu")


@fixture_state
@given(problem=conv_problems(), seed=st.integers(0, 99))
def test_split_backward_filter_matches_loops(tiny_split, problem, seed):
    x, w, _, _, padding, _, _ = problem
    y = xp.conv2d_forward(x, w, padding=padding)
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    _, ref, _ = conv2d_backward_ref(x, w, dy, padding=padding)
    dw = xp.conv2d_backward_filter(dy, x, w.shape, padding=padding)
    assert dw.shape == w.shape and dw.dtype == x.dtype
    np.testing.assert_allclose(dw, ref, **tol(x.dtype))


@fixture_state
@given(data=st.data(), dtype=st.sampled_from(FLOATS))
def test_backward_data_matches_loops(jit, data, dtype):
    """col2im (JIT gather or NumPy scatter) with strides, dilation and asymmetric padding."""
    x, wt, _, stride, padding, dilation, _ = data.draw(conv_cases(dtypes=(dtype,), groups=(1,), batch=3,
                                                                  asymmetric=True))
    geom = {"stride": stride, "padding": padding, "dilation": dilation}
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    dy = rng.standard_normal(xp.conv2d_forward(x, wt, **geom).shape).astype(dtype)
    ref, _, _ = conv2d_backward_ref(x, wt, dy, **geom)
    dx = xp.conv2d_backward_data(dy, wt, x.shape, **geom)
    assert dx.shape == x.shape and dx.dtype == dtype
    np.testing.assert_allclose(dx, ref, **tol(dtype))


@fixture_state
@given(m=st.integers(1, 5), n=st.integers(1, 5), length=st.integers(1, 200), dtype=st.sampled_from(FLOATS),
       seed=st.integers(0, 99))
def test_split_matmul_nt_equals_plain_product(tiny_split, m, n, length, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, length)).astype(dtype), rng.standard_normal((n, length)).astype(dtype)
    ref = [[sum(float(a[i, t]) * float(b[j, t]) for t in range(length)) for j in range(n)] for i in range(m)]
    out = xp._matmul_nt(a, b)
    assert out.shape == (m, n) and out.dtype == dtype
    np.testing.assert_allclose(out, ref, **tol(dtype))


# ------------------------------------------------------------------------------------------ 2x2 max pooling


@st.composite
def pool_inputs(draw):
    dtype = draw(st.sampled_from(FLOATS))
    rng = np.random.default_rng(draw(st.integers(0, 9999)))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(2, 7)), draw(st.integers(2, 7)))
    x = rng.standard_normal(shape)
    if draw(st.booleans()):
        x = np.maximum(np.round(x), 0)  # ReLU-like inputs: many tied windows
    return x.astype(dtype)


@fixture_state
@given(x=pool_inputs(), seed=st.integers(0, 99))
def test_max_pool_2x2_matches_loops(jit, x, seed):
    y, ctx = xp.pool2d_forward(x, "max", (2, 2), (2, 2))
    y_ref = pool2d_ref(x, (2, 2), (2, 2), (0, 0), "max")
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, y_ref.astype(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    dx_ref = pool2d_backward_ref(x, dy, (2, 2), (2, 2), (0, 0), "max").astype(x.dtype)  # to the first maximum
    np.testing.assert_array_equal(xp.pool2d_backward(dy, x, y, ctx, "max", (2, 2), (2, 2)), dx_ref)


@pytest.mark.parametrize("mode", ["max", "avg"])
@given(x=pool_inputs(), window=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 99))
def test_non_overlapping_pooling_matches_loops(mode, x, window, seed):
    """stride == window, no padding: the NumPy path reduces over contiguous window planes."""
    wh, ww = window
    assume(x.shape[2] >= wh and x.shape[3] >= ww)
    y, ctx = xp.pool2d_forward(x, mode, window, window)
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    y_ref = pool2d_ref(x, window, window, (0, 0), mode)
    dx_ref = pool2d_backward_ref(x, dy, window, window, (0, 0), mode)
    np.testing.assert_allclose(y, y_ref, **tol(x.dtype))
    np.testing.assert_allclose(xp.pool2d_backward(dy, x, y, ctx, mode, window, window), dx_ref, **tol(x.dtype))


@pytest.mark.skipif(not HAVE_NUMBA, reason="no numba")
@given(x=pool_inputs())
def test_jit_and_numpy_pooling_contexts_are_interchangeable(x):
    """A forward on one path and the backward on the other give the same gradient (the contexts agree)."""
    y, ctx_jit = xp.pool2d_forward(x, "max", (2, 2), (2, 2))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_host_jit, "kernels", None)
        y_np, ctx_np = xp.pool2d_forward(x, "max", (2, 2), (2, 2))
        dy = np.ones(y.shape, dtype=x.dtype)
        dx_np = xp.pool2d_backward(dy, x, y, ctx_jit, "max", (2, 2), (2, 2))
    np.testing.assert_array_equal(y, y_np)
    np.testing.assert_array_equal(ctx_jit, ctx_np)
    np.testing.assert_array_equal(xp.pool2d_backward(dy, x, y, ctx_np, "max", (2, 2), (2, 2)), dx_np)


@pytest.mark.skipif(not HAVE_NUMBA, reason="no numba")
@given(k=st.integers(1, 3), h=st.integers(1, 4), wo=st.integers(1, 4), n=st.integers(1, 5), extra=st.integers(0, 2),
       relu=st.booleans(), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 99))
def test_jit_store_nchw_matches_a_loop(k, h, wo, n, extra, relu, dtype, seed):
    rng = np.random.default_rng(seed)
    y, bias = rng.standard_normal((k, h, wo, n)).astype(dtype), rng.standard_normal(k).astype(dtype)
    out = np.full((n, k, h + extra, wo), 7.0, dtype=dtype)
    _host_jit.kernels.store_nchw(y, out, extra, bias, relu)
    ref = np.full(out.shape, 7.0, dtype=dtype)
    for ki, i, j, ni in itertools.product(range(k), range(h), range(wo), range(n)):
        v = float(y[ki, i, j, ni]) + float(bias[ki])
        ref[ni, ki, extra + i, j] = max(v, 0.0) if relu else v
    np.testing.assert_allclose(out, ref, **tol(dtype))


# ------------------------------------------------------------------------------------------ NaN and infinities


def sprinkle(x, seed, fraction=0.3):
    """A copy of ``x`` with about ``fraction`` of its elements replaced by NaN, +inf or -inf."""
    rng = np.random.default_rng(seed)
    out = x.copy()
    hit = rng.random(x.shape) < fraction
    out[hit] = rng.choice(np.array([np.nan, np.inf, -np.inf]), size=int(hit.sum()))
    return out


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@fixture_state
@given(x=pool_inputs(), seed=st.integers(0, 999))
def test_max_pool_2x2_propagates_nan_and_inf(jit, x, seed):
    """NaN in a window gives NaN (np.max semantics, as PyTorch), infinities are ordinary maxima; the gradient of a
    NaN window goes to offset 3 (the host convention: no element compares equal to NaN); NaN/inf in dy propagate."""
    x = sprinkle(x, seed)
    n, c, h, w = x.shape
    y, ctx = xp.pool2d_forward(x, "max", (2, 2), (2, 2))
    windows = x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    windows = windows.reshape(n, c, h // 2, w // 2, 4)
    y_ref = windows.max(axis=-1)  # NumPy's max propagates NaN
    np.testing.assert_array_equal(y, y_ref)
    first = np.argmax(windows == y_ref[..., None], axis=-1)
    np.testing.assert_array_equal(ctx, np.where(np.isnan(y_ref), 3, first))
    dy = sprinkle(np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype), seed + 1, 0.2)
    dx_ref = np.zeros(x.shape, x.dtype)
    for ni, ci, oi, oj in itertools.product(*(range(s) for s in y.shape)):
        for k in range(4):  # dy times "this offset is the maximum", so NaN * 0 is NaN as in any product
            dx_ref[ni, ci, 2 * oi + k // 2, 2 * oj + k % 2] = dy[ni, ci, oi, oj] * (ctx[ni, ci, oi, oj] == k)
    np.testing.assert_array_equal(xp.pool2d_backward(dy, x, y, ctx, "max", (2, 2), (2, 2)), dx_ref)


def _host_pipeline(x, w, b, dy_seed):
    """Conv (bias + fused ReLU) -> 2x2 max pool, then both backward passes: every JIT-covered host kernel."""
    y = xp.conv2d_forward(x, w, padding=(1, 1), bias=b, activation="relu")
    p, ctx = xp.pool2d_forward(y, "max", (2, 2), (2, 2))
    dp = sprinkle(np.random.default_rng(dy_seed).standard_normal(p.shape).astype(x.dtype), dy_seed, 0.1)
    dy = xp.pool2d_backward(dp, y, p, ctx, "max", (2, 2), (2, 2))
    dx = xp.conv2d_backward_data(dy, w, x.shape, padding=(1, 1))
    return y, p, ctx, dy, dx


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.skipif(not HAVE_NUMBA, reason="no numba")
@given(problem=conv_problems(), seed=st.integers(0, 999))
def test_jit_and_numpy_paths_agree_on_nan_and_inf(problem, seed):
    """The same results with and without the optional numba kernels, forward and backward, on non-finite data."""
    x, w, b = problem[:3]
    x = sprinkle(x, seed, 0.15)
    with_jit = _host_pipeline(x, w, b, seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_host_jit, "kernels", None)
        without = _host_pipeline(x, w, b, seed)
    assert np.isnan(with_jit[0]).any() or not np.isnan(x).any()  # the data did reach the kernels as NaN
    for name, a, e in zip(("conv", "pool", "pool offsets", "pool grad", "conv grad"), with_jit, without):
        np.testing.assert_allclose(a, e, equal_nan=True, err_msg=name, **tol(x.dtype))
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=name)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@given(shape=st.sampled_from([(1,), (5, 3), (2, 3, 4, 5)]), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 999),
       from_output=st.booleans())
def test_relu_backward_on_both_paths_is_dy_times_the_mask(shape, dtype, seed, from_output):
    """The one-pass JIT gradient and NumPy's equal dy * (ref > 0) bit for bit: signed zeros, NaN from inf * 0, NaN in
    the forward value masking its gradient."""
    rng = np.random.default_rng(seed)
    dy = sprinkle(rng.standard_normal(shape).astype(dtype), seed, 0.2)
    ref = sprinkle(rng.standard_normal(shape).astype(dtype), seed + 1, 0.2)
    mask_of = np.maximum(ref, 0) if from_output else ref  # the forward output y, or its input x
    args = (None, mask_of) if from_output else (ref, None)
    expected = np.array([float(d) * (1.0 if r > 0 else 0.0) for d, r in zip(dy.ravel(), mask_of.ravel())],
                        dtype=dtype).reshape(shape)
    fast = xp.activation_backward(dy, *args, "relu")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_host_jit, "kernels", None)
        slow = xp.activation_backward(dy, *args, "relu")
    for got in (fast, slow):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


# ------------------------------------------------------------------------------------------ optimizer update


def _sgd_steps(p, g, v, lr, momentum, steps=3):
    p, v = p.copy(), None if v is None else v.copy()
    for _ in range(steps):
        xp.sgd_update(p, g, v, lr, momentum=momentum, keras=True)
    return p, v


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning")
@given(shape=st.sampled_from([(1,), (7,), (5, 3), (2, 3, 4)]), dtype=st.sampled_from(FLOATS),
       lr=st.floats(1e-4, 1.0), momentum=st.sampled_from([0.0, 0.5, 0.9, 0.99]), seed=st.integers(0, 999),
       nonfinite=st.booleans())
def test_fused_sgd_update_equals_the_numpy_path_bit_for_bit(shape, dtype, lr, momentum, seed, nonfinite):
    """The one-pass JIT update rounds as NumPy's in-place ops do (no fused multiply-add), NaN and inf included,
    and both equal the rule written out with scalars of the arrays' dtype."""
    rng = np.random.default_rng(seed)
    p, g, v = (rng.standard_normal(shape).astype(dtype) * 3 for _ in range(3))
    if nonfinite:
        g = sprinkle(g, seed, 0.2)
    v = v if momentum else None
    fast = _sgd_steps(p, g, v, lr, momentum)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_host_jit, "kernels", None)
        slow = _sgd_steps(p, g, v, lr, momentum)
    one = np.dtype(dtype).type
    ref_p, ref_v = p.copy(), None if v is None else v.copy()
    for _ in range(3):
        if momentum:
            ref_v = (ref_v * one(momentum)).astype(dtype) + g
            ref_p = ref_p - (ref_v * one(lr)).astype(dtype)
        else:
            ref_p = ref_p - (g * one(lr)).astype(dtype)
    for got in (fast, slow):
        np.testing.assert_array_equal(got[0], ref_p)
        assert np.array_equal(np.signbit(got[0]), np.signbit(ref_p))
        if momentum:
            np.testing.assert_array_equal(got[1], ref_v)


@pytest.mark.skipif(not HAVE_NUMBA, reason="no numba")
def test_fused_sgd_update_runs_only_where_it_rounds_as_numpy(monkeypatch):
    """The kernel takes contiguous arrays of p's dtype and Python rates; a NumPy float64 rate (which NumPy's ops
    would not round to float32 first), a strided parameter or Nesterov take the NumPy path."""
    calls = []
    kernels = _host_jit.kernels
    monkeypatch.setattr(_host_jit, "kernels", type("K", (), {
        "sgd_momentum": staticmethod(lambda *a: calls.append("momentum") or kernels.sgd_momentum(*a)),
        "sgd_plain": staticmethod(lambda *a: calls.append("plain") or kernels.sgd_plain(*a))})())
    p, g, v = (np.ones((4, 3), np.float32) for _ in range(3))
    xp.sgd_update(p, g, v, 0.1, momentum=0.9, keras=True)
    xp.sgd_update(p, g, None, 0.1, keras=True)
    assert calls == ["momentum", "plain"]
    xp.sgd_update(p, g, v, np.float64(0.1), momentum=0.9, keras=True)
    xp.sgd_update(p, g, v, 0.1, momentum=0.9, nesterov=True, keras=True)
    strided = np.ones((4, 6), np.float32)[:, ::2]
    xp.sgd_update(strided, g, v, 0.1, momentum=0.9, keras=True)
    np.testing.assert_array_equal(strided, np.ones((4, 3), np.float32) - np.float32(0.1) * v)
    assert calls == ["momentum", "plain"]


# ------------------------------------------------------------------------------------------ numba missing


def test_without_numba_the_jit_module_disables_itself_and_the_host_still_works(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # "import numba" now raises ImportError
    try:
        module = importlib.reload(_host_jit)
        assert module.kernels is None
        x = np.maximum(np.random.default_rng(0).standard_normal((2, 3, 6, 6)), 0).astype(np.float32)
        y, ctx = xp.pool2d_forward(x, "max", (2, 2), (2, 2))
        np.testing.assert_array_equal(y, pool2d_ref(x, (2, 2), (2, 2), (0, 0), "max"))
        w, b = np.ones((2, 3, 3, 3), np.float32), np.zeros(2, np.float32)
        out = xp.conv2d_forward(x, w, padding=(1, 1), bias=b, activation="relu")
        np.testing.assert_allclose(out, np.maximum(conv_with_bias(x, w, b, (1, 1)), 0), rtol=1e-5)
    finally:
        monkeypatch.undo()
        importlib.reload(_host_jit)
    assert (_host_jit.kernels is not None) == HAVE_NUMBA


def test_jit_can_be_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("MAGMADNN_JIT", "off")
    try:
        assert not _host_jit.enabled() and importlib.reload(_host_jit).kernels is None
    finally:
        monkeypatch.undo()
        importlib.reload(_host_jit)
    assert (_host_jit.kernels is not None) == HAVE_NUMBA


# ------------------------------------------------------------------------------------------ functional fusion


@pytest.mark.parametrize("kind", ["relu", "tanh", "sigmoid"])
def test_functional_conv2d_fused_activation_matches_separate_ops(jit, kind):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 6, 6))
    w, b = rng.standard_normal((3, 2, 3, 3)), rng.standard_normal(3)
    grads = []
    for fused in (True, False):
        params = [Tensor(a, requires_grad=True) for a in (x, w, b)]
        if fused:
            y = F.conv2d(*params, padding=1, activation=kind)
        else:
            y = F.activation(F.conv2d(*params, padding=1), kind)
        F.sum(F.multiply(y, y)).backward()
        grads.append([y.numpy()] + [p.grad for p in params])
    for fused_value, separate_value in zip(*grads):
        np.testing.assert_allclose(fused_value, separate_value, rtol=1e-10, atol=1e-12)


def test_functional_conv2d_rejects_unfusable_activation():
    with pytest.raises(ValueError, match="conv2d: activation must be one of"):
        F.conv2d(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), activation="gelu")
