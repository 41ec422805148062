"""pymagma.dnn on a GPU against the NumPy references of tests/reference.py (hypothesis-drawn problems)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import reference
from tests.conftest import examples
from tests.strategies import conv_cases, pool_cases

from .helpers import BF16, BF16_CASE

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(10), deadline=None)
# float32 convolutions may run on TF32 tensor cores (like PyTorch's default), so their tolerance is TF32's.
TOL = {np.float64: 1e-10, np.float32: 2e-2, np.float16: 3e-2, BF16: 6e-2}
STRICT_TOL = {np.float64: 1e-10, np.float32: 1e-4, np.float16: 3e-3, BF16: 2.5e-2}
# cuDNN's batch norm and the max-pool arg-max test (distinct values) stay with the IEEE types.
ALL = [np.float64, np.float32, np.float16, BF16_CASE]


def dev(a):
    from pymagma import array

    return array.asarray(np.ascontiguousarray(a))


def close(actual, expected, tol, magnitude=1.0):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=tol, atol=tol * magnitude)


def conv_problem():
    return conv_cases(groups=(1, 2, 3), channels=3, filters=3, kernel=4, stride=3, batch=3, side=(1, 11))


@pytest.mark.parametrize("dtype", ALL)
@FEW
@given(problem=conv_problem())
def test_conv2d_forward_and_backward(dtype, problem):
    from pymagma import dnn

    x, w, b, s, p, d, g = problem
    x, w, b = x.astype(dtype), w.astype(dtype), b.astype(dtype)
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    X, W = x.astype(np.float64), w.astype(np.float64)
    ref = reference.conv2d_ref(X, W, s, p, d, g) + b.astype(np.float64)[None, :, None, None]
    fan_in = w[0].size
    y = dnn.conv2d_forward(dev(x), dev(w), dev(b), **kw)
    assert y.shape == ref.shape and y.dtype == dtype
    close(y.get(), ref, TOL[dtype], np.sqrt(fan_in))
    dy = np.random.default_rng(0).standard_normal(ref.shape).astype(dtype)
    dx_ref, dw_ref, db_ref = reference.conv2d_backward_ref(X, W, dy.astype(np.float64), s, p, d, g)
    close(dnn.conv2d_backward_data(dev(dy), dev(w), x.shape, **kw).get(), dx_ref, TOL[dtype], np.sqrt(fan_in))
    count = dy[:, 0].size
    close(dnn.conv2d_backward_filter(dev(x), dev(dy), w.shape, **kw).get(), dw_ref, TOL[dtype], np.sqrt(count))
    close(dnn.conv2d_backward_bias(dev(dy)).get(), db_ref, TOL[dtype], np.sqrt(count))


def test_conv2d_float32_without_tf32_is_accurate(monkeypatch):
    from pymagma import dnn

    monkeypatch.setattr(dnn, "allow_tf32", False)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 9, 9)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = dnn.conv2d_forward(dev(x), dev(w), padding=1).get()
    close(y, reference.conv2d_ref(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1)), 1e-4, 5.0)


@pytest.mark.parametrize("kind", ["forward", "backward_data", "backward_filter"])
def test_algorithm_choice_respects_the_workspace_cap(kind):
    from pymagma import dnn

    x = dev(np.random.default_rng(0).standard_normal((8, 16, 32, 32)).astype(np.float32))
    w = dev(np.random.default_rng(1).standard_normal((32, 16, 5, 5)).astype(np.float32))
    y = dnn.conv2d_forward(x, w, padding=2)
    problem = dnn._problem(x.shape, w.shape, x.dtype, 1, 2, 1, 1, None)
    for limit in (0, 1 << 16, 1 << 30):
        for autotune in (False, True):
            choice = dnn.choose_algorithm(kind, problem, device=x.device, workspace_limit=limit, autotune=autotune,
                                          buffers=(x.copy(), w.copy(), y.copy()))  # Find*Ex overwrites one
            assert choice.workspace <= limit
    # the capped choice really computes the same convolution
    y0 = dnn.conv2d_forward(x, w, padding=2, workspace_limit=0, math="fma").get()
    y1 = dnn.conv2d_forward(x, w, padding=2, autotune=True, math="fma").get()
    close(y0, y1, 1e-4, 10.0)


def test_algorithms_are_cached_by_problem():
    from pymagma import dnn

    dnn.clear_caches()
    x = dev(np.ones((2, 3, 8, 8), np.float32))
    w = dev(np.ones((4, 3, 3, 3), np.float32))
    dnn.conv2d_forward(x, w)
    n = len(dnn._algorithms)
    dnn.conv2d_forward(x, w)
    assert len(dnn._algorithms) == n
    dnn.conv2d_forward(x, w, padding=1)
    assert len(dnn._algorithms) == n + 1


def pool_problem():
    # distinct values so the arg-max of every window is unique
    return pool_cases(values="distinct", pad_limit=lambda k: k // 2, batch=3, channels=4, side=10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["max", "avg"])
@FEW
@given(problem=pool_problem())
def test_pool2d_forward_and_backward(dtype, mode, problem):
    from pymagma import dnn

    x, k, s, p = problem
    x = x.astype(dtype)
    y = dnn.pool2d_forward(dev(x), k, s, p, mode)
    close(y.get(), reference.pool2d_ref(x.astype(np.float64), k, s, p, mode), STRICT_TOL[dtype], 10)
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    dx = dnn.pool2d_backward(y, dev(dy), dev(x), k, s, p, mode)
    close(dx.get(), reference.pool2d_backward_ref(x.astype(np.float64), dy.astype(np.float64), k, s, p, mode),
          STRICT_TOL[dtype], 10)


DERIVATIVES = {  # (x, y) -> dy/dx with coef 1 (the forward is tests/reference.py's)
    "relu": lambda x, y: (x > 0).astype(float),
    "sigmoid": lambda x, y: y * (1 - y),
    "tanh": lambda x, y: 1 - y * y,
    "elu": lambda x, y: np.where(x > 0, 1.0, np.exp(x)),
    "clipped_relu": lambda x, y: ((x > 0) & (x < 1.0)).astype(float),
    "swish": lambda x, y: 1 / (1 + np.exp(-x)) + x * np.exp(-x) / (1 + np.exp(-x)) ** 2,
}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("mode", sorted(DERIVATIVES))
@FEW
@given(shape=st.sampled_from([(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)]), seed=st.integers(0, 2**31))
def test_activation_forward_and_backward(dtype, mode, shape, seed):
    from pymagma import dnn

    df = DERIVATIVES[mode]
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, shape)
    x = np.where(np.abs(x) < 1e-2, 0.5, x).astype(dtype)  # away from the kinks
    x = np.where(np.abs(x - 1.0) < 1e-2, 0.5, x).astype(dtype)
    coef = 1.0
    y = dnn.activation_forward(dev(x), mode, coef)
    X = x.astype(np.float64)
    y_ref = reference.activation_ref(mode, X, coef)
    close(y.get(), y_ref, STRICT_TOL[dtype], 3)
    dy = rng.standard_normal(shape).astype(dtype)
    dx = dnn.activation_backward(y, dev(dy), dev(x), mode, coef)
    close(dx.get(), dy * df(X, y_ref), STRICT_TOL[dtype], 3)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("mode", ["instance", "channel"])
@FEW
@given(shape=st.sampled_from([(4, 10), (3, 5, 2, 3), (1, 7, 1, 1)]), seed=st.integers(0, 2**31))
def test_softmax_forward_and_backward(dtype, log, mode, shape, seed):
    from pymagma import dnn

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    axes = tuple(range(1, len(shape))) if mode == "instance" else (1,)
    ref = reference.softmax_ref(x.astype(np.float64), axes, log)
    y = dnn.softmax_forward(dev(x), log=log, mode=mode)
    close(y.get(), ref, STRICT_TOL[dtype], 10)
    dy = rng.standard_normal(shape)
    if log:
        dx_ref = dy - np.exp(ref) * dy.sum(axis=axes, keepdims=True)
    else:
        dx_ref = ref * (dy - (dy * ref).sum(axis=axes, keepdims=True))
    dx = dnn.softmax_backward(y, dev(dy.astype(dtype)), log=log, mode=mode)
    close(dx.get(), dx_ref, STRICT_TOL[dtype], 10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("mode", ["spatial", "per_activation"])
@FEW
@given(shape=st.sampled_from([(8, 3, 4, 4), (5, 6, 2, 3), (16, 10)]), seed=st.integers(0, 2**31))
def test_batch_norm_training_inference_backward(dtype, mode, shape, seed):
    from pymagma import dnn

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    pdtype = np.float64 if dtype == np.float64 else np.float32
    axes = (0, 2, 3) if mode == "spatial" and len(shape) == 4 else (0,)
    pshape = (shape[1],) if mode == "spatial" else shape[1:]
    bshape = [1] * len(shape)
    for a in range(1, len(shape)):
        if a not in axes:
            bshape[a] = shape[a]
    scale, bias = rng.uniform(0.5, 2, pshape).astype(pdtype), rng.standard_normal(pshape).astype(pdtype)
    rmean, rvar = np.zeros(pshape, pdtype), np.ones(pshape, pdtype)
    d_rmean, d_rvar = dev(rmean), dev(rvar)
    eps, momentum = 1e-5, 0.1
    X = x.astype(np.float64)
    y_ref, mean, inv, var_unbiased = reference.batch_norm_ref(X, scale.reshape(bshape), bias.reshape(bshape), eps, axes)
    y, save_mean, save_inv = dnn.batch_norm_forward_training(dev(x), dev(scale), dev(bias), d_rmean, d_rvar,
                                                             momentum=momentum, eps=eps, mode=mode)
    close(y.get(), y_ref, STRICT_TOL[dtype], 10)
    close(save_mean.get(), mean.reshape(pshape), STRICT_TOL[dtype], 10)
    close(save_inv.get(), inv.reshape(pshape), STRICT_TOL[dtype] * 10, 10)
    close(d_rmean.get(), momentum * mean.reshape(pshape), STRICT_TOL[dtype], 10)
    close(d_rvar.get(), (1 - momentum) + momentum * var_unbiased.reshape(pshape), STRICT_TOL[dtype] * 10, 10)
    y_inf = dnn.batch_norm_forward_inference(dev(x), dev(scale), dev(bias), d_rmean, d_rvar, eps=eps, mode=mode)
    rm, rv = d_rmean.get().reshape(bshape), d_rvar.get().reshape(bshape)
    close(y_inf.get(), scale.reshape(bshape) * (X - rm) / np.sqrt(rv + eps) + bias.reshape(bshape),
          STRICT_TOL[dtype], 10)
    dy = rng.standard_normal(shape).astype(dtype)
    dx_ref, dscale_ref, dbias_ref = reference.batch_norm_backward_ref(X, dy.astype(np.float64), scale.reshape(bshape),
                                                                      eps, axes)
    dx, dscale, dbias = dnn.batch_norm_backward(dev(x), dev(dy), dev(scale), save_mean, save_inv, eps=eps, mode=mode)
    close(dx.get(), dx_ref, STRICT_TOL[dtype] * 10, 10)
    close(dscale.get(), dscale_ref.reshape(pshape), STRICT_TOL[dtype] * 10, 10)
    close(dbias.get(), dbias_ref.reshape(pshape), STRICT_TOL[dtype] * 10, 10)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_dropout_keep_rate_scaling_and_backward(rate):
    from pymagma import dnn

    x = np.random.default_rng(0).uniform(1, 2, (64, 32, 16, 16)).astype(np.float32)
    y, reserve = dnn.dropout_forward(dev(x), rate, seed=11)
    y = y.get()
    kept = y != 0
    n = x.size
    keep_rate = kept.mean()
    assert abs(keep_rate - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
    close(y[kept], x[kept] / (1 - rate), 1e-6)
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    dx = dnn.dropout_backward(dev(dy), reserve, rate, seed=11).get()
    close(dx, np.where(kept, dy / (1 - rate), 0), 1e-6)


def test_dropout_is_deterministic_for_a_seed():
    from pymagma import dnn

    x = dev(np.ones((8, 4, 8, 8), np.float32))
    first = dnn.dropout_forward(x, 0.5, state=dnn.DropoutState(seed=5))[0].get()
    again = dnn.dropout_forward(x, 0.5, state=dnn.DropoutState(seed=5))[0].get()
    other = dnn.dropout_forward(x, 0.5, state=dnn.DropoutState(seed=6))[0].get()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    state = dnn.DropoutState(seed=5)
    a, b = dnn.dropout_forward(x, 0.5, state=state)[0].get(), dnn.dropout_forward(x, 0.5, state=state)[0].get()
    assert not np.array_equal(a, b)  # the generator advances between calls


@pytest.mark.parametrize("dtype", ALL)
def test_tensor_ops(dtype):
    from pymagma import dnn

    rng = np.random.default_rng(0)
    c = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    bias = rng.standard_normal((1, 3, 1, 1)).astype(dtype)
    out = dev(c)
    dnn.add_tensor(dev(bias), out, alpha=2.0, beta=0.5)
    close(out.get(), 2.0 * bias.astype(np.float64) + 0.5 * c, STRICT_TOL[dtype], 4)
    close(dnn.op_tensor("mul", dev(c), dev(bias), alpha1=2.0).get(), 2.0 * c.astype(np.float64) * bias,
          STRICT_TOL[dtype], 4)
    close(dnn.op_tensor("max", dev(c), dev(c * 0)).get(), np.maximum(c, 0), STRICT_TOL[dtype])
    close(dnn.scale_tensor(dev(c), 3.0).get(), 3.0 * c.astype(np.float64), STRICT_TOL[dtype], 4)
    np.testing.assert_array_equal(dnn.set_tensor(dev(c), 1.5).get(), np.full(c.shape, 1.5, dtype))
    for op, ref in (("sum", np.sum), ("max", np.max), ("mean", np.mean), ("norm2", None)):
        got = dnn.reduce_tensor(op, dev(c), (0, 2, 3)).get()
        expected = np.sqrt((c.astype(np.float64) ** 2).sum(axis=(0, 2, 3), keepdims=True)) if ref is None else \
            ref(c.astype(np.float64), axis=(0, 2, 3), keepdims=True)
        close(got, expected, STRICT_TOL[dtype], 20)


def test_bad_inputs_raise_typed_errors():
    from pymagma import dnn

    x = dev(np.ones((2, 3, 8, 8), np.float32))
    with pytest.raises(ValueError, match="groups"):
        dnn.conv2d_forward(x, dev(np.ones((4, 2, 3, 3), np.float32)))
    with pytest.raises(TypeError, match="dtypes differ"):
        dnn.conv2d_forward(x, dev(np.ones((4, 3, 3, 3), np.float64)))
    with pytest.raises(ValueError, match="expected shape"):
        dnn.conv2d_backward_data(dev(np.ones((2, 4, 5, 5), np.float32)), dev(np.ones((4, 3, 3, 3), np.float32)),
                                 (2, 3, 8, 8))
    with pytest.raises(ValueError, match="pooling mode"):
        dnn.pool2d_forward(x, 2, mode="median")
    with pytest.raises(ValueError, match="rate"):
        dnn.dropout_forward(x, 1.0)
    with pytest.raises(TypeError, match="float32"):
        dnn.activation_forward(dev(np.ones(4, np.int32)))
    with pytest.raises(ValueError, match="scale"):
        dnn.batch_norm_forward_training(x, dev(np.ones(4, np.float32)), dev(np.zeros(3, np.float32)))


def test_handle_is_bound_to_the_default_queue_stream():
    import ctypes

    from pymagma import _cudnn as cd
    from pymagma import dnn, queue

    h = dnn.handle()
    stream = ctypes.c_void_p()
    cd.call("cudnnGetStream", h.value, ctypes.byref(stream))
    assert (stream.value or 0) == queue.default_queue().stream
    assert dnn.handle() is h


def test_no_device_memory_growth_over_1000_calls():
    from pymagma import dnn, memory

    rng = np.random.default_rng(0)
    x = dev(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    w = dev(rng.standard_normal((8, 3, 3, 3)).astype(np.float32))

    def step():
        y = dnn.conv2d_forward(x, w, padding=1)
        z = dnn.activation_forward(y, "relu")
        p = dnn.pool2d_forward(z, 2)
        dz = dnn.pool2d_backward(p, p, z, 2)
        dnn.conv2d_backward_filter(x, dnn.activation_backward(z, dz, y, "relu"), w.shape, padding=1)
        dnn.softmax_forward(p.reshape(4, -1))

    for _ in range(10):
        step()
    before = memory.pool_stats()
    for _ in range(1000):
        step()
    x.get()
    after = memory.pool_stats()
    assert after["in_use_bytes"] == before["in_use_bytes"]
    assert after["mallocs"] == before["mallocs"]
