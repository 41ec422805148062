"""pymagma's planned cuDNN calls (pymagma._dnn_plans: conv2d_plan, batch_norm_plan, activation_plan) on the
simulated device: each planned call computes bit for bit what the matching per-call function of pymagma.dnn
computes (and that against the independent references of tests/reference.py), makes exactly its one cuDNN call,
refuses operands of another layout before any native call, plans equal arguments of other types apart, and follows
the native libraries when the simulator is swapped. The same comparison on a GPU: the ``gpu`` twin at the end."""

from __future__ import annotations

import numpy as np
import pytest

import pymagma
from pymagma import _cudnn as cd
from pymagma import _dnn_plans as plans
from pymagma import dnn, simulator
from tests import reference

pytestmark = pytest.mark.native

CONVS = [  # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 9, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 10, 10), (6, 2, 3, 2), (2, 1), (0, 1), (1, 2), 2),
    ((3, 2, 7, 7), (5, 2, 1, 1), (2, 2), (0, 0), (1, 1), 1),
]


@pytest.fixture
def sim():
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    with simulator.simulated("full") as simulation:
        yield simulation.cudnn


def dev(rng, shape, dtype):
    return pymagma.asarray(rng.standard_normal(shape).astype(dtype))


def cudnn_calls(sim) -> int:
    return len(sim.calls)


def check_convolutions(dtype) -> None:
    """Planned forward / backward-data / backward-filter against dnn's functions (bit for bit) and the reference."""
    rng = np.random.default_rng(0)
    for x_shape, w_shape, stride, padding, dilation, groups in CONVS:
        x, w = dev(rng, x_shape, dtype), dev(rng, w_shape, dtype)
        geometry = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        plan = plans.conv2d_plan(x_shape, w_shape, np.dtype(dtype), x.device, stride, padding, dilation, groups)
        y = plan.forward(x, w)
        expected = dnn.conv2d_forward(x, w, **geometry).get()
        np.testing.assert_array_equal(y.get(), expected)
        np.testing.assert_allclose(y.get(), reference.conv2d_ref(x.get(), w.get(), stride, padding, dilation, groups),
                                   rtol=1e-4, atol=1e-4)
        dy = dev(rng, plan.y_shape, dtype)
        np.testing.assert_array_equal(plan.backward_data(dy, w).get(),
                                      dnn.conv2d_backward_data(dy, w, x_shape, **geometry).get())
        np.testing.assert_array_equal(plan.backward_filter(x, dy).get(),
                                      dnn.conv2d_backward_filter(x, dy, w_shape, **geometry).get())
        dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x.get(), w.get(), dy.get(), stride, padding, dilation, groups)
        np.testing.assert_allclose(plan.backward_data(dy, w).get(), dx_ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(plan.backward_filter(x, dy).get(), dw_ref, rtol=1e-4, atol=1e-4)


def check_batch_norm(dtype) -> None:
    """Planned training forward (running statistics too) and backward against dnn's functions, bit for bit."""
    rng = np.random.default_rng(1)
    for shape in ((4, 3, 5, 2), (6, 5)):
        x, dy = dev(rng, shape, dtype), dev(rng, shape, dtype)
        c = shape[1]
        scale, bias = dev(rng, (c,), np.float32 if dtype != np.float64 else dtype), \
            dev(rng, (c,), np.float32 if dtype != np.float64 else dtype)
        stats = [rng.random(c).astype(scale.dtype) for _ in range(2)]
        mean_a, var_a = (pymagma.asarray(s) for s in stats)
        mean_b, var_b = (pymagma.asarray(s) for s in stats)
        plan = plans.batch_norm_plan(shape, np.dtype(dtype), x.device)
        got = plan.forward_training(x, scale, bias, mean_a, var_a, momentum=0.3, eps=1e-3)
        want = dnn.batch_norm_forward_training(x, scale, bias, mean_b, var_b, momentum=0.3, eps=1e-3)
        for g, e in zip((*got, mean_a, var_a), (*want, mean_b, var_b)):
            np.testing.assert_array_equal(g.get(), e.get())
        axes = (0, 2, 3) if len(shape) == 4 else (0,)
        kshape = (1, c) + (1,) * (len(shape) - 2)
        y_ref = reference.batch_norm_ref(x.get(), scale.get().reshape(kshape), bias.get().reshape(kshape), 1e-3,
                                         axes)[0]
        np.testing.assert_allclose(got[0].get(), y_ref, rtol=1e-4, atol=1e-4)
        back = plan.backward(x, dy, scale, got[1], got[2], eps=1e-3)
        for g, e in zip(back, dnn.batch_norm_backward(x, dy, scale, got[1], got[2], eps=1e-3)):
            np.testing.assert_array_equal(g.get(), e.get())


def check_activations(dtype) -> None:
    rng = np.random.default_rng(2)
    for mode, coef in (("relu", None), ("sigmoid", None), ("tanh", None), ("elu", 0.7)):
        x, dy = dev(rng, (2, 3, 4), dtype), dev(rng, (2, 3, 4), dtype)
        plan = plans.activation_plan((2, 3, 4), np.dtype(dtype), x.device, mode, coef)
        y = plan.forward(x)
        np.testing.assert_array_equal(y.get(), dnn.activation_forward(x, mode, coef).get())
        np.testing.assert_allclose(y.get(), reference.activation_ref(mode, x.get(), coef or 0.0), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_array_equal(plan.backward(y, dy, x).get(),
                                      dnn.activation_backward(y, dy, x, mode, coef).get())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_planned_calls_compute_what_the_dnn_functions_compute(sim, dtype):
    check_convolutions(dtype)
    check_batch_norm(dtype)
    check_activations(dtype)


def test_a_planned_call_is_one_cudnn_call(sim):
    rng = np.random.default_rng(3)
    x, w = dev(rng, (1, 2, 6, 6), np.float32), dev(rng, (3, 2, 3, 3), np.float32)
    plan = plans.conv2d_plan(x.shape, w.shape, x.dtype, x.device, 1, 1, 1, 1)
    y = plan.forward(x, w)  # the algorithm chosen on the first call
    relu = plans.activation_plan(y.shape, y.dtype, y.device)
    relu.forward(y)
    before = list(sim.calls)
    plan.forward(x, w)
    relu.forward(y)
    assert sim.calls[len(before):] == ["cudnnConvolutionForward", "cudnnActivationForward"]


def test_operands_of_another_layout_are_refused_before_any_native_call(sim):
    rng = np.random.default_rng(4)
    x, w = dev(rng, (1, 2, 6, 6), np.float32), dev(rng, (3, 2, 3, 3), np.float32)
    plan = plans.conv2d_plan(x.shape, w.shape, x.dtype, x.device, 1, 0, 1, 1)
    bn = plans.batch_norm_plan(x.shape, x.dtype, x.device)
    ones = pymagma.asarray(np.ones(2, np.float32))
    calls = len(sim.calls)
    bad = [
        (lambda: plan.forward(dev(rng, (1, 2, 6, 7), np.float32), w), ValueError, r"shape \(1, 2, 6, 6\)"),
        (lambda: plan.forward(x.astype(np.float64), w), ValueError, "float32"),
        (lambda: plan.forward(x, w.get()), TypeError, "DeviceArray"),
        (lambda: plan.backward_filter(x[:, :, :, ::-1], dev(rng, plan.y_shape, np.float32)), ValueError, "strided"),
        (lambda: bn.forward_training(x, ones, pymagma.asarray(np.ones(3, np.float32))), ValueError, "bias"),
        (lambda: bn.forward_training(x, ones, ones, ones), ValueError, "both running_mean and running_var"),
    ]
    for call, error, words in bad:
        with pytest.raises(error, match=words):
            call()
    assert len(sim.calls) == calls


def test_equal_arguments_of_other_types_are_planned_apart(sim):
    """A float equal to an int that was planned (2.0 == 2, same hash) is still refused, as on a first call."""
    plans.conv2d_plan((1, 2, 6, 6), (3, 2, 3, 3), np.dtype(np.float32), 0, 2, 1, 1, 1)
    with pytest.raises(TypeError, match="integer"):
        plans.conv2d_plan((1, 2, 6, 6), (3, 2, 3, 3), np.dtype(np.float32), 0, 2.0, 1, 1, 1)
    with pytest.raises(TypeError, match="float32, float64"):
        plans.batch_norm_plan((4, 3), np.dtype(np.int32), 0)
    with pytest.raises(ValueError, match="activation must be one of"):
        plans.activation_plan((4, 3), np.dtype(np.float32), 0, "gelu")


def test_a_plan_follows_the_native_libraries():
    """A plan made before the simulator was swapped computes with the libraries in use now (its own made again)."""
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    rng = np.random.default_rng(5)
    xs, ws = rng.standard_normal((1, 2, 5, 5)).astype(np.float32), rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    with simulator.simulated("full") as simulation:
        plan = plans.conv2d_plan(xs.shape, ws.shape, np.dtype(np.float32), 0, 1, 1, 1, 1)
        first = plan.forward(pymagma.asarray(xs), pymagma.asarray(ws)).get()
        with simulator.simulated("null"):
            pass  # out of null: a fresh simulated device and libraries
        swapped = simulator.enable("full")
        assert swapped is not simulation
        again = plan.forward(pymagma.asarray(xs), pymagma.asarray(ws)).get()
        assert swapped.cudnn.calls.count("cudnnConvolutionForward") == 1
        assert plans.conv2d_plan(xs.shape, ws.shape, np.dtype(np.float32), 0, 1, 1, 1, 1) is not plan
    np.testing.assert_array_equal(again, first)


class _Wrapped:
    """A cuDNN library object in front of another (as a meter puts one): every function it binds is counted."""

    def __init__(self, target):
        self.target, self.calls = target, []

    def bind(self, name):
        fn = self.target.bind(name)

        def call(*args):
            self.calls.append(name)
            return fn(*args)

        return call

    def __getattr__(self, name):
        return getattr(self.target, name)


def test_planned_calls_go_through_the_cudnn_object_in_use(sim):
    """A plan binds its cuDNN functions once, and again whenever another cuDNN object is put in the native
    libraries: its calls reach the object in use, not the one it first bound from."""
    from pymagma import _native

    rng = np.random.default_rng(6)
    x, w = dev(rng, (1, 2, 6, 6), np.float32), dev(rng, (3, 2, 3, 3), np.float32)
    conv = plans.conv2d_plan(x.shape, w.shape, x.dtype, x.device, 1, 1, 1, 1)
    bn = plans.batch_norm_plan(x.shape, x.dtype, x.device)
    relu = plans.activation_plan(x.shape, x.dtype, x.device)
    ones, zeros = pymagma.asarray(np.ones(2, np.float32)), pymagma.asarray(np.zeros(2, np.float32))

    def step():
        y = conv.forward(x, w)
        conv.backward_data(y, w)
        conv.backward_filter(x, y)
        out, mean, inv = bn.forward_training(x, ones, zeros, zeros, ones)
        bn.backward(x, out, ones, mean, inv)
        r = relu.forward(x)
        return relu.backward(r, x, x).get()

    names = ["cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
             "cudnnBatchNormalizationForwardTraining", "cudnnBatchNormalizationBackward", "cudnnActivationForward",
             "cudnnActivationBackward"]
    first = step()  # bound from the simulator itself
    real = _native.current.cudnn
    wrapped = _native.current.cudnn = _Wrapped(real)
    try:
        again = step()
        assert wrapped.calls == names
        other = _native.current.cudnn = _Wrapped(real)  # another object in use: bound again from it
        step()
        assert other.calls == names and wrapped.calls == names
    finally:
        _native.current.cudnn = real
    before = len(sim.calls)
    step()  # back on the simulator's own object
    assert sim.calls[before:] == names and wrapped.calls == names and other.calls == names
    np.testing.assert_array_equal(again, first)


def test_plans_of_arrays_are_the_planners_plans(sim):
    """The device backend's look-ups by an array's values give the planner's plan of those values, per option (a
    coefficient, a mode), and refuse what the planner refuses."""
    rng = np.random.default_rng(7)
    x = dev(rng, (2, 3, 4), np.float32)
    assert plans.batch_norm_plan_of(x) is plans.batch_norm_plan_of(x)
    assert plans.batch_norm_plan_of(x).x_shape == x.shape
    relu, sigmoid = plans.activation_plan_of(x, "relu"), plans.activation_plan_of(x, "sigmoid")
    assert relu is plans.activation_plan_of(x, "relu") and sigmoid is not relu
    assert (relu.mode, sigmoid.mode) == ("relu", "sigmoid")
    elu = plans.activation_plan_of(x, "elu", 0.5)
    assert elu.coef == 0.5 and plans.activation_plan_of(x, "elu", 0.25).coef == 0.25
    np.testing.assert_array_equal(plans.activation_plan_of(x, "elu", 0.25).forward(x).get(),
                                  dnn.activation_forward(x, "elu", 0.25).get())
    y = plans.activation_plan_of(x, "sigmoid").forward(x)
    np.testing.assert_array_equal(y.get(), dnn.activation_forward(x, "sigmoid").get())
    with pytest.raises(ValueError, match="activation must be one of"):
        plans.activation_plan_of(x, "gelu")
    with pytest.raises(TypeError, match="float32, float64"):
        plans.batch_norm_plan_of(pymagma.asarray(np.ones((2, 3), np.int32)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_planned_calls_compute_what_the_dnn_functions_compute_on_the_gpu(dtype):
    check_convolutions(dtype)
    check_batch_norm(dtype)
    check_activations(dtype)


def test_a_planned_convolution_follows_allow_tf32(sim, monkeypatch):
    """pymagma.dnn.allow_tf32 decides a float32 convolution's math at each call of dnn.conv2d_forward; a plan made
    before the flag changed (kept by its caller, as the device backend keeps its layers' plans) computes what
    dnn.conv2d_forward computes now, not what the flag said when the plan was made."""
    from pymagma.simulator.cudnn.numerics import tf32

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    exact, rounded = reference.conv2d_ref(x, w), reference.conv2d_ref(tf32(x), tf32(w))
    assert np.abs(exact - rounded).max() > 1e-4
    sim.tf32 = True
    monkeypatch.setattr(dnn, "allow_tf32", True)
    plan = plans.conv2d_plan(x.shape, w.shape, np.float32, 0)
    xd, wd = pymagma.asarray(x), pymagma.asarray(w)
    np.testing.assert_allclose(plan.forward(xd, wd).get(), rounded, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(dnn, "allow_tf32", False)
    np.testing.assert_allclose(dnn.conv2d_forward(xd, wd).get(), exact, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plan.forward(xd, wd).get(), exact, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plans.conv2d_plan(x.shape, w.shape, np.float32, 0).forward(xd, wd).get(), exact,
                               rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(dnn, "allow_tf32", True)
    np.testing.assert_allclose(plan.forward(xd, wd).get(), rounded, rtol=1e-5, atol=1e-5)
