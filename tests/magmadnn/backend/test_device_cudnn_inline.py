"""The device backend's cuDNN ops make the planned call in their own frame (device/conv.py, normalization.py,
activations.py), and max pooling and pad2d launch a kept launch in theirs (device/pooling.py, kernels/pool.py): the
same result bit for bit as the plan's method and as pymagma.dnn's unplanned call (and the references), the same native
calls, through the cuDNN object in use at each call (a library swapped in later is used), the convolution's workspace
back in the memory pool after the call, even when the call fails."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import simulator
from tests import reference

RNG = np.random.default_rng(4)
TOL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture
def device():
    with simulator.simulated("full") as simulation:
        from magmadnn.backend import device as xp

        yield xp, simulation


def _put(*arrays):
    import pymagma

    return tuple(pymagma.asarray(a) for a in arrays)


def _strided(a):
    """A strided DeviceArray view holding ``a``'s values (every other element of a wider array)."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    view = _put(wide)[0][..., ::2]
    assert not view.is_c_contiguous
    return view


def _no_methods(monkeypatch):
    """The plans' methods refused: a call that still reaches one fails (the inline call does not)."""
    from pymagma import _dnn_plans

    def refused(*args, **kwargs):
        raise AssertionError("the plan's method ran")

    for cls, names in ((_dnn_plans.ConvPlan, ("forward", "backward_data", "backward_filter")),
                       (_dnn_plans.BatchNormPlan, ("forward_training", "backward")),
                       (_dnn_plans.ActivationPlan, ("forward", "backward"))):
        for name in names:
            monkeypatch.setattr(cls, name, refused)


def _conv_step(xp, x, w, dy, geometry, bias=None, activation=None):
    saved = {}
    y = xp.conv2d_forward(x, w, *geometry, bias=bias, saved=saved, activation=activation)
    dx = xp.conv2d_backward_data(dy, w, x.shape, *geometry)
    dw = xp.conv2d_backward_filter(dy, x, w.shape, *geometry, saved=saved)
    return [y.get(), dx.get(), dw.get()]


def _bn_step(xp, x, gamma, beta, dy, unbiased):
    mean, var = _put(np.zeros(x.shape[1], np.float32), np.ones(x.shape[1], np.float32))
    y, ctx = xp.batch_norm_train(x, gamma, beta, mean, var, 0.9, 1e-5, unbiased)
    dx, dgamma, dbeta = xp.batch_norm_backward(dy, x, gamma, ctx)
    return [y.get(), mean.get(), var.get(), ctx[0].get(), ctx[1].get(), dx.get(), dgamma.get(), dbeta.get()]


def _act_step(xp, x, dy, kind, alpha):
    y = xp.activation_forward(x, kind, alpha)
    return [y.get(), xp.activation_backward(dy, x, y, kind, alpha).get()]


def _pool_step(xp, x, dy, window, stride, pads):
    y, ctx = xp.pool2d_forward(x, "max", window, stride, pads)
    return [y.get(), ctx.get(), xp.pool2d_backward(dy, x, y, ctx, "max", window, stride, pads).get()]


@pytest.mark.parametrize("padding", [((1, 1), (1, 1)), ((0, 1), (1, 2))], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("epilogue", [(False, None), (True, "relu"), (True, None)], ids=["plain", "bias-relu", "bias"])
def test_an_inline_convolution_computes_what_the_plans_method_and_dnn_compute(device, monkeypatch, padding, epilogue):
    xp, _ = device
    from pymagma import dnn

    has_bias, activation = epilogue
    x, w = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    geometry = ((2, 1), padding, (1, 1), 1)
    ho, wo = (7 + sum(padding[0]) - 3) // 2 + 1, 6 + sum(padding[1]) - 2
    dy = RNG.standard_normal((2, 4, ho, wo)).astype(np.float32)
    d_x, d_w, d_dy, d_b = _put(x, w, dy, b)
    bias = d_b if has_bias else None
    method = _conv_step(xp, d_x, d_w, d_dy, geometry, bias, activation)  # a first call: through the plan's methods
    with monkeypatch.context() as m:
        _no_methods(m)
        inline = _conv_step(xp, d_x, d_w, d_dy, geometry, bias, activation)
    for got, want in zip(inline, method):
        np.testing.assert_array_equal(got, want)
    # the unplanned calls of pymagma.dnn on the explicitly padded input
    (t, bt), (le, r) = padding
    (d_padded,) = _put(np.pad(x, ((0, 0), (0, 0), (t, bt), (le, r))))
    sym = (min(t, bt), min(le, r))
    xp_pad = (t - sym[0], bt - sym[0], le - sym[1], r - sym[1])
    (d_xp,) = _put(np.pad(x, ((0, 0), (0, 0), (xp_pad[0], xp_pad[1]), (xp_pad[2], xp_pad[3]))))
    y = dnn.conv2d_forward(d_xp, d_w, stride=(2, 1), padding=sym)
    if not has_bias:
        np.testing.assert_array_equal(inline[0], y.get())
    dw = dnn.conv2d_backward_filter(d_xp, d_dy, w.shape, stride=(2, 1), padding=sym)
    np.testing.assert_array_equal(inline[2], dw.get())
    del d_padded
    want = reference.conv2d_ref(x, w, (2, 1), padding, (1, 1), 1)
    if has_bias:
        want = want + b[None, :, None, None]
    if activation == "relu":
        want = np.maximum(want, 0)
    np.testing.assert_allclose(inline[0], want, **TOL)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, (2, 1), padding, (1, 1), 1)
    np.testing.assert_allclose(inline[1], dx_ref, **TOL)
    np.testing.assert_allclose(inline[2], dw_ref, **TOL)


def test_strided_operands_of_the_inline_convolution_are_made_contiguous_first(device, monkeypatch):
    xp, _ = device
    x, w = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32), RNG.standard_normal((3, 4, 3, 3)).astype(np.float32)
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    dy = RNG.standard_normal((2, 4, 6, 4)).astype(np.float32)
    d_x, d_wt, d_dy = _put(x, w.transpose(1, 0, 2, 3).copy(), dy)
    dense_w = _put(w.transpose(1, 0, 2, 3))[0]
    dense_x = _put(np.ascontiguousarray(x[:, :, :, ::2]))[0]
    want = _conv_step(xp, dense_x, dense_w, d_dy, geometry)
    d_w = d_wt.transpose(1, 0, 2, 3).transpose(1, 0, 2, 3)  # a strided view of the same values
    strided_w = _put(w)[0].transpose(1, 0, 2, 3)
    strided_x = d_x[:, :, :, ::2]
    assert not strided_w.is_c_contiguous and not strided_x.is_c_contiguous
    with monkeypatch.context() as m:
        _no_methods(m)
        got = _conv_step(xp, strided_x, strided_w, d_dy, geometry)
        got_dense = _conv_step(xp, dense_x, d_w, d_dy, geometry)
    for g, gd, e in zip(got, got_dense, want):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(gd, e)
    strided_dy = _strided(dy)
    with monkeypatch.context() as m:
        _no_methods(m)
        np.testing.assert_array_equal(xp.conv2d_backward_data(strided_dy, dense_w, dense_x.shape, *geometry).get(),
                                      want[1])


@pytest.mark.parametrize("unbiased", [True, False])
def test_an_inline_batch_norm_computes_what_the_plans_method_and_dnn_compute(device, monkeypatch, unbiased):
    xp, _ = device
    from pymagma import dnn

    x = RNG.standard_normal((4, 3, 5, 5)).astype(np.float32)
    dy = RNG.standard_normal(x.shape).astype(np.float32)
    gamma, beta = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    d_x, d_dy, d_g, d_b = _put(x, dy, gamma, beta)
    method = _bn_step(xp, d_x, d_g, d_b, d_dy, unbiased)
    with monkeypatch.context() as m:
        _no_methods(m)
        inline = _bn_step(xp, d_x, d_g, d_b, d_dy, unbiased)
        strided = _bn_step(xp, _strided(x), d_g, d_b, _strided(dy), unbiased)
    for got, want, other in zip(inline, method, strided):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(other, want)
    mean, var = _put(np.zeros(3, np.float32), np.ones(3, np.float32))
    y, m_, inv = dnn.batch_norm_forward_training(d_x, d_g, d_b, mean, var, momentum=0.1, eps=1e-5)
    dx, dg, db = dnn.batch_norm_backward(d_x, d_dy, d_g, m_, inv, eps=1e-5)
    for got, want in zip([inline[0], inline[3], inline[4], *inline[5:]], [y, m_, inv, dx, dg, db]):
        np.testing.assert_array_equal(got, want.get())
    if unbiased:
        np.testing.assert_array_equal(inline[1], mean.get())
        np.testing.assert_array_equal(inline[2], var.get())
    np.testing.assert_allclose(inline[1], 0.1 * x.mean(axis=(0, 2, 3)), **TOL)
    var_ref = x.var(axis=(0, 2, 3), ddof=1 if unbiased else 0)
    np.testing.assert_allclose(inline[2], 0.9 + 0.1 * var_ref, **TOL)


def test_an_inline_batch_norm_refuses_parameters_of_another_layout(device):
    """After its plan is bound, a batch norm whose parameters or statistics do not have the plan's layout is refused
    with the plan's error, before any native call."""
    xp, simulation = device
    x = _put(RNG.standard_normal((2, 3, 4, 4)).astype(np.float32))[0]
    good = _put(np.ones(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32), np.ones(3, np.float32))
    xp.batch_norm_train(x, *good, 0.9, 1e-5)
    xp.batch_norm_train(x, *good, 0.9, 1e-5)
    for i, bad in enumerate((np.ones(4, np.float32), np.ones(3, np.float64), np.ones(6, np.float32))):
        arrays = list(good)
        wrong = _put(bad)[0]
        arrays[i] = wrong if i < 2 else wrong[::2]  # the running mean strided
        simulation.cudnn.calls.clear()
        with pytest.raises(ValueError, match="BatchNormPlan"):
            xp.batch_norm_train(x, *arrays, 0.9, 1e-5)
        assert "cudnnBatchNormalizationForwardTraining" not in simulation.cudnn.calls
    with pytest.raises(TypeError, match="BatchNormPlan"):  # a host array: the plan's TypeError
        xp.batch_norm_train(x, np.ones(3, np.float32), *good[1:], 0.9, 1e-5)
    y, (mean, inv, eps, plan) = xp.batch_norm_train(x, *good, 0.9, 1e-5)
    xp.batch_norm_backward(y, x, good[0], (mean, inv, eps, plan))
    for bad in (_put(np.ones(4, np.float32))[0], _put(np.ones(6, np.float32))[0][::2], np.ones(3, np.float32)):
        simulation.cudnn.calls.clear()
        with pytest.raises((ValueError, TypeError), match="BatchNormPlan"):
            xp.batch_norm_backward(y, x, good[0], (mean, bad, eps, plan))
        assert "cudnnBatchNormalizationBackward" not in simulation.cudnn.calls


def test_the_inline_convolution_and_activation_gradients_refuse_a_dy_of_another_shape(device):
    """After their plans are bound, a convolution's backward data and backward filter and an activation's backward given
    a dy whose shape is not the plan's output shape are refused with the plan's error, before any native call (the
    plans are keyed by x and w alone: dy is checked by the one comparison of each call)."""
    xp, simulation = device
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    x, w = _put(RNG.standard_normal((2, 3, 6, 6)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(
        np.float32))
    dy, bad = _put(np.ones((2, 4, 6, 6), np.float32), np.ones((2, 4, 5, 6), np.float32))
    for _ in range(2):  # bound and kept
        saved = {}
        xp.conv2d_forward(x, w, *geometry, saved=saved)
        xp.conv2d_backward_data(dy, w, x.shape, *geometry)
        xp.conv2d_backward_filter(dy, x, w.shape, *geometry, saved=saved)
    simulation.cudnn.calls.clear()
    with pytest.raises(ValueError, match="ConvPlan: dy"):
        xp.conv2d_backward_data(bad, w, x.shape, *geometry)
    with pytest.raises(ValueError, match="ConvPlan: dy"):
        xp.conv2d_backward_filter(bad, x, w.shape, *geometry, saved=saved)
    xa = _put(RNG.standard_normal((2, 4, 6, 6)).astype(np.float32))[0]
    for _ in range(2):
        xp.activation_backward(dy, xa, xp.activation_forward(xa, "relu"), "relu")
    y = xp.activation_forward(xa, "relu")
    simulation.cudnn.calls.clear()
    with pytest.raises(ValueError, match="ActivationPlan: dy"):
        xp.activation_backward(bad, xa, y, "relu")
    assert not {"cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter", "cudnnActivationBackward"} & set(
        simulation.cudnn.calls)


@pytest.mark.parametrize("kind,alpha", [("relu", 0.0), ("elu", 0.5), ("tanh", 0.0)])
def test_an_inline_activation_computes_what_the_plans_method_and_dnn_compute(device, monkeypatch, kind, alpha):
    xp, _ = device
    from pymagma import dnn

    x, dy = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32), RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    d_x, d_dy = _put(x, dy)
    method = _act_step(xp, d_x, d_dy, kind, alpha)
    with monkeypatch.context() as m:
        _no_methods(m)
        inline = _act_step(xp, d_x, d_dy, kind, alpha)
        strided = _act_step(xp, _strided(x), _strided(dy), kind, alpha)
    coef = alpha if kind == "elu" else None
    y = dnn.activation_forward(d_x, kind, coef)
    want = [y.get(), dnn.activation_backward(y, d_dy, d_x, kind, coef).get()]
    for got, same, other, w in zip(inline, method, strided, want):
        np.testing.assert_array_equal(got, same)
        np.testing.assert_array_equal(got, w)
        np.testing.assert_array_equal(other, w)
    ref = {"relu": np.maximum(x, 0), "tanh": np.tanh(x), "elu": np.where(x > 0, x, alpha * np.expm1(x))}[kind]
    np.testing.assert_allclose(inline[0], ref, **TOL)


@pytest.mark.parametrize("pads", [((0, 0), (0, 0)), ((1, 0), (0, 1))], ids=["none", "asymmetric"])
def test_a_kept_max_pooling_launch_computes_what_the_checked_kernel_computes(device, monkeypatch, pads):
    xp, _ = device
    from magmadnn.backend.device.kernels import pool

    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    x[0, 0, :2, :2] = 1.5  # a tied window: the first maximum takes the gradient
    window, stride = (2, 2), (2, 2)
    ho, wo = (7 + sum(pads[0]) - 2) // 2 + 1, (6 + sum(pads[1]) - 2) // 2 + 1
    dy = RNG.standard_normal((2, 3, ho, wo)).astype(np.float32)
    d_x, d_dy = _put(x, dy)
    pool.LAUNCHES.clear()
    checked = _pool_step(xp, d_x, d_dy, window, stride, pads)
    assert len(pool.LAUNCHES) == 2
    with monkeypatch.context() as m:
        for name in ("max_pool2d", "max_pool2d_backward"):
            m.setattr(pool, name, lambda *a, **k: pytest.fail("the checked kernel ran"))
        kept = _pool_step(xp, d_x, d_dy, window, stride, pads)
    for got, want in zip(kept, checked):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(kept[0], reference.pool2d_ref(x, window, stride, pads, "max"))


def test_a_kept_max_pooling_backward_checks_its_operands_each_call(device):
    """The offsets of another shape, dtype or device, and a strided dy, go to the checked kernel (its error, or its
    result on a contiguous copy)."""
    xp, _ = device
    from pymagma import kernels

    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    dy = RNG.standard_normal((1, 2, 2, 2)).astype(np.float32)
    d_x, d_dy = _put(x, dy)
    window, pads = (2, 2), ((0, 0), (0, 0))
    y, offsets = xp.pool2d_forward(d_x, "max", window, window, pads)
    want = xp.pool2d_backward(d_dy, d_x, y, offsets, "max", window, window, pads).get()
    with pytest.raises(TypeError, match="int32"):
        xp.pool2d_backward(d_dy, d_x, y, kernels.cast(offsets, np.float32), "max", window, window, pads)
    with pytest.raises(ValueError, match="pooled shape"):
        xp.pool2d_backward(d_dy, d_x, y, offsets.reshape(1, 2, 4, 1), "max", window, window, pads)
    strided = _strided(dy)
    np.testing.assert_array_equal(xp.pool2d_backward(strided, d_x, y, offsets, "max", window, window, pads).get(),
                                  want)


def test_a_kept_pad2d_launch_pads_as_the_checked_one(device, monkeypatch):
    xp, _ = device
    from magmadnn.backend.device.kernels import pool

    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (d_x,) = _put(x)
    pads = (1, 0, 2, 1)
    pool.LAUNCHES.clear()
    first = pool.pad2d(d_x, pads).get()
    with monkeypatch.context() as m:
        m.setattr(pool, "_float_dtype", lambda *a: pytest.fail("the checked pad2d ran"))
        kept = pool.pad2d(d_x, pads).get()
    np.testing.assert_array_equal(kept, first)
    np.testing.assert_array_equal(kept, np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1))))
    with pytest.raises(TypeError):  # a float pad is refused at every call: never answered by the kept int launch
        pool.pad2d(d_x, (1.0, 0, 2, 1))
    np.testing.assert_array_equal(pool.pad2d(d_x, [1, 0, 2, 1]).get(), first)
    in_place = [1, 0, 2, 1]  # a list its owner changes between calls: never answered by a kept launch
    for top in (1, 2, 0):
        in_place[0] = top
        np.testing.assert_array_equal(pool.pad2d(d_x, in_place).get(), np.pad(x, ((0, 0), (0, 0), (top, 0), (2, 1))))
    np.testing.assert_array_equal(pool.pad2d(d_x, (1, 0, 2, 1)).get(), first)  # equal pads, another tuple
    assert all(launch[0].__class__ is tuple for key, launch in pool.LAUNCHES.items() if key[0] == "pad")


def _native_calls(simulation):
    return list(simulation.cudnn.calls)


def test_the_inline_calls_make_the_plans_native_calls(device, monkeypatch):
    """The inline convolution, batch norm and activation make exactly the cuDNN calls the plans' methods make."""
    xp, simulation = device
    x, w = _put(RNG.standard_normal((2, 3, 6, 6)).astype(np.float32),
                RNG.standard_normal((3, 3, 3, 3)).astype(np.float32))
    gamma, beta = _put(np.ones(3, np.float32), np.zeros(3, np.float32))
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)

    def step():
        mean, var = _put(np.zeros(3, np.float32), np.ones(3, np.float32))
        simulation.cudnn.calls.clear()
        saved = {}
        y = xp.conv2d_forward(x, w, *geometry, saved=saved)
        xp.conv2d_backward_data(y, w, x.shape, *geometry)
        xp.conv2d_backward_filter(y, x, w.shape, *geometry, saved=saved)
        a = xp.activation_forward(y, "relu")
        xp.activation_backward(y, y, a, "relu")
        z, ctx = xp.batch_norm_train(a, gamma, beta, mean, var, 0.9, 1e-5)
        xp.batch_norm_backward(z, a, gamma, ctx)
        return _native_calls(simulation)

    from pymagma import _native

    step()  # plans made, algorithms chosen
    for plan in _native.current.cudnn_plans.values():  # unbound: the next calls go through the methods
        plan.cudnn = None
    methods = step()
    with monkeypatch.context() as m:
        _no_methods(m)
        inline = step()
    assert inline == methods
    assert inline == ["cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
                      "cudnnActivationForward", "cudnnActivationBackward", "cudnnBatchNormalizationForwardTraining",
                      "cudnnBatchNormalizationBackward"]


class _Counting:
    """A cuDNN library wrapped as a meter wraps it: every bound function counted."""

    def __init__(self, target):
        self.target, self.count = target, 0

    def bind(self, name):
        fn = self.target.bind(name)

        def call(*args):
            self.count += 1
            return fn(*args)

        return call

    def __getattr__(self, name):
        return getattr(self.target, name)


def test_the_inline_calls_go_through_the_cudnn_object_in_use_at_each_call(device, monkeypatch):
    xp, _ = device
    from pymagma import _native

    x, w = _put(RNG.standard_normal((1, 2, 5, 5)).astype(np.float32),
                RNG.standard_normal((2, 2, 3, 3)).astype(np.float32))
    gamma, beta, mean, var = _put(np.ones(2, np.float32), np.zeros(2, np.float32), np.zeros(2, np.float32),
                                  np.ones(2, np.float32))
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)

    def step():
        saved = {}
        y = xp.conv2d_forward(x, w, *geometry, saved=saved)
        xp.conv2d_backward_data(y, w, x.shape, *geometry)
        xp.conv2d_backward_filter(y, x, w.shape, *geometry, saved=saved)
        a = xp.activation_forward(y, "relu")
        xp.activation_backward(y, y, a, "relu")
        z, ctx = xp.batch_norm_train(a, gamma, beta, mean, var, 0.9, 1e-5)
        xp.batch_norm_backward(z, a, gamma, ctx)
        return z.get()

    want = step()
    step()
    libraries = _native.current
    real = libraries.cudnn
    for _ in range(2):  # a wrapper swapped in, twice: each one takes every call made while it is in use
        counting = _Counting(real)
        monkeypatch.setattr(libraries, "cudnn", counting)
        for n in (1, 2):
            np.testing.assert_array_equal(step(), want)
            assert counting.count == 7 * n
    monkeypatch.setattr(libraries, "cudnn", real)
    np.testing.assert_array_equal(step(), want)
    assert counting.count == 14


def test_the_workspace_goes_back_to_the_pool_after_each_call_even_a_failed_one(device, monkeypatch):
    xp, _ = device
    from pymagma import _native, errors

    x, w = _put(RNG.standard_normal((1, 2, 8, 8)).astype(np.float32),
                RNG.standard_normal((2, 2, 3, 3)).astype(np.float32))
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    saved = {}
    xp.conv2d_forward(x, w, *geometry, saved=saved)
    plan = saved["plan"]
    size, bucket = plan._call("forward")[-2:]
    pool = _native.current.memory_pool
    blocks = pool.free_blocks[(plan.device, bucket)]
    assert size > 0 and bucket >= size and len(blocks) >= 1
    before, requests = len(blocks), pool.stats["requests"]
    for _ in range(3):
        xp.conv2d_forward(x, w, *geometry)  # (its output given back at once too)
        assert len(blocks) == before
    assert pool.stats["requests"] == requests + 2 * 3  # the output and the workspace, each call
    monkeypatch.setattr(plan, "cudnnConvolutionForward", lambda *args: 8)  # CUDNN_STATUS_EXECUTION_FAILED
    with pytest.raises(errors.CudnnError):
        xp.conv2d_forward(x, w, *geometry)
    assert len(blocks) == before


@pytest.mark.gpu
def test_the_inline_calls_compute_what_the_plans_methods_compute_on_the_gpu(monkeypatch):
    """The same comparison on a GPU: each op's inline call against the plan's method (unbound plans: the first pass
    goes through the methods), within a tight tolerance (a GPU's cuDNN algorithms need not be deterministic)."""
    from magmadnn.backend import device as xp
    from pymagma import _native

    x, w = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    geometry = ((1, 1), ((0, 1), (1, 2)), (1, 1), 1)
    dy = RNG.standard_normal((2, 4, 8, 9)).astype(np.float32)
    gamma, beta = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    d_x, d_w, d_dy, d_g, d_b = _put(x, w, dy, gamma, beta)
    window = ((2, 2), (2, 2), ((0, 0), (0, 0)))

    def steps():
        out = _conv_step(xp, d_x, d_w, d_dy, geometry)
        out += _bn_step(xp, d_dy, d_g, d_b, d_dy, True)
        out += _act_step(xp, d_dy, d_dy, "relu", 0.0)
        pooled = xp.pool2d_forward(d_dy, "max", *window)[0]
        return out + _pool_step(xp, d_dy, pooled, *window)

    steps()
    for plan in _native.current.cudnn_plans.values():
        plan.cudnn = None
    methods = steps()
    with monkeypatch.context() as m:
        _no_methods(m)
        inline = steps()
    for got, want in zip(inline, methods):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_backward_call_after_a_library_swap_goes_through_the_plans_method_and_computes_the_same(device,
                                                                                                 monkeypatch):
    """The forwards bind their plans to the cuDNN object in use; another one swapped in before the backwards sends
    each backward through its plan's method (the op's mapping of its operands into the method's order), which
    computes what the inline backward computes, through the object in use."""
    xp, _ = device
    from pymagma import _native

    x = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 3)).astype(np.float32)
    dy = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    gamma, beta = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    d_x, d_w, d_dy, d_g, d_b = _put(x, w, dy, gamma, beta)
    geometry = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    libraries = _native.current
    real = libraries.cudnn

    def step(swap: bool):
        mean, var = _put(np.zeros(3, np.float32), np.ones(3, np.float32))
        saved = {}
        y = xp.conv2d_forward(d_x, d_w, *geometry, saved=saved)
        a = xp.activation_forward(d_x, "tanh")
        z, ctx = xp.batch_norm_train(d_x, d_g, d_b, mean, var, 0.9, 1e-5)
        counting = _Counting(real)
        if swap:
            monkeypatch.setattr(libraries, "cudnn", counting)
        out = [y.get(), a.get(), z.get(), xp.conv2d_backward_data(d_dy, d_w, d_x.shape, *geometry).get(),
               xp.conv2d_backward_filter(d_dy, d_x, d_w.shape, *geometry, saved=saved).get(),
               xp.activation_backward(d_dy, d_x, a, "tanh").get(),
               *(g.get() for g in xp.batch_norm_backward(d_dy, d_x, d_g, ctx))]
        monkeypatch.setattr(libraries, "cudnn", real)
        return out, counting.count

    step(False)
    inline, _ = step(False)
    swapped, count = step(True)
    assert count == 4  # the four backwards, each through the object swapped in
    for got, want in zip(swapped, inline):
        np.testing.assert_array_equal(got, want)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(swapped[3], dx_ref, **TOL)
    np.testing.assert_allclose(swapped[4], dw_ref, **TOL)
    np.testing.assert_allclose(swapped[5], dy * (1 - np.tanh(x) ** 2), **TOL)
    mu, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(swapped[7], (dy * xhat).sum(axis=(0, 2, 3)), **TOL)
    np.testing.assert_allclose(swapped[8], dy.sum(axis=(0, 2, 3)), **TOL)
    g = gamma[None, :, None, None] / np.sqrt(var + 1e-5)
    dx = g * (dy - dy.mean(axis=(0, 2, 3), keepdims=True) - xhat * (dy * xhat).mean(axis=(0, 2, 3), keepdims=True))
    np.testing.assert_allclose(swapped[6], dx, rtol=1e-4, atol=1e-4)
