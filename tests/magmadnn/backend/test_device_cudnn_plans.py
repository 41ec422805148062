"""The device backend's cuDNN ops find their plans in one look-up per call (device/conv.py, pooling.py,
activations.py, normalization.py): the convolution's and pooling's geometry by the identity of the objects a layer
passes at every call, the activation's and batch norm's plan by the array's values. A call that finds its plan
computes bit for bit what a call that works it out again computes (and that against the references of
tests/reference.py); a geometry the caller changes in place is never kept; the input gradient of a convolution with
asymmetric padding is the interior view of the padded gradient, strided as NumPy's slice of it; a kept convolution
follows ``pymagma.dnn.allow_tf32``."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import simulator
from tests import reference

RNG = np.random.default_rng(38)
TOL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture
def device():
    with simulator.simulated("full"):
        from magmadnn.backend import device as xp

        yield xp


def _put(*arrays):
    import pymagma

    return tuple(pymagma.asarray(a) for a in arrays)


def _forget(xp):
    """Every plan the device backend and pymagma keep for these ops dropped: the next call works them out again."""
    from magmadnn.backend.device import conv, pooling
    from pymagma import _native

    conv._SEEN.clear()
    pooling._SEEN.clear()
    _native.current.cudnn_plans.clear()


def _conv_step(xp, x, w, dy, geometry):
    saved = {}
    y = xp.conv2d_forward(x, w, *geometry, saved=saved)
    dx = xp.conv2d_backward_data(dy, w, x.shape, *geometry)
    dw = xp.conv2d_backward_filter(dy, x, w.shape, *geometry, saved=saved)
    return y.get(), dx.get(), dw.get()


@pytest.mark.parametrize("padding", [((1, 1), (1, 1)), ((0, 1), (1, 2)), ((2, 0), (0, 0))],
                         ids=["symmetric", "asymmetric", "top-only"])
def test_a_convolution_that_finds_its_plan_computes_what_a_fresh_one_computes(device, padding):
    xp = device
    x, w = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    geometry = ((2, 1), padding, (1, 1), 1)  # the same objects at every call, as a layer passes them
    ho = (7 + sum(padding[0]) - 3) // 2 + 1
    wo = 6 + sum(padding[1]) - 2
    dy = RNG.standard_normal((2, 4, ho, wo)).astype(np.float32)
    arrays = _put(x, w, dy)
    _forget(xp)
    fresh = _conv_step(xp, *arrays, geometry)
    planned = [_conv_step(xp, *arrays, geometry) for _ in range(2)]
    for got in planned:
        for g, e in zip(got, fresh):
            np.testing.assert_array_equal(g, e)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, (2, 1), padding, (1, 1), 1)
    np.testing.assert_allclose(fresh[0], reference.conv2d_ref(x, w, (2, 1), padding, (1, 1), 1), **TOL)
    np.testing.assert_allclose(fresh[1], dx_ref, **TOL)
    np.testing.assert_allclose(fresh[2], dw_ref, **TOL)


def test_the_input_gradient_of_asymmetric_padding_is_the_padded_gradients_interior(device):
    """The view the plan worked out (offset, shape, strides, contiguity) is NumPy's slice of the padded gradient."""
    xp = device
    from pymagma import dnn

    x, w = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    for padding in (((0, 1), (0, 1)), ((0, 2), (1, 0)), ((1, 1), (0, 1))):
        geometry = ((1, 1), padding, (1, 1), 1)
        (t, b), (l, r) = padding
        ph, pw = min(t, b), min(l, r)
        dy = RNG.standard_normal((2, 4, 6 + t + b - 2, 5 + l + r - 2)).astype(np.float32)
        d_dy, d_w = _put(dy, w)
        for _ in range(2):  # a miss, then a hit
            dx = xp.conv2d_backward_data(d_dy, d_w, x.shape, *geometry)
            padded = dnn.conv2d_backward_data(d_dy, d_w, (2, 3, 6 + t + b - 2 * ph, 5 + l + r - 2 * pw),
                                              padding=(ph, pw)).get()
            interior = padded[:, :, t - ph:t - ph + 6, l - pw:l - pw + 5]
            assert dx.shape == x.shape and dx.strides == interior.strides
            assert dx.is_c_contiguous == interior.flags.c_contiguous
            assert dx.ptr - dx.owner.ptr == interior.__array_interface__["data"][0] - \
                padded.__array_interface__["data"][0]
            np.testing.assert_array_equal(dx.get(), interior)


@pytest.mark.parametrize("shape_of", [list, lambda s: tuple(np.int64(n) for n in s)], ids=["list", "numpy-ints"])
def test_an_input_shape_of_another_kind_gives_the_same_gradient(device, shape_of):
    xp = device
    x, w = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32), RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    dy = RNG.standard_normal((1, 3, 2, 2)).astype(np.float32)
    geometry = ((2, 2), ((0, 1), (0, 1)), (1, 1), 1)
    d_dy, d_w = _put(dy, w)
    want = xp.conv2d_backward_data(d_dy, d_w, x.shape, *geometry).get()
    for _ in range(2):
        np.testing.assert_array_equal(xp.conv2d_backward_data(d_dy, d_w, shape_of(x.shape), *geometry).get(), want)
    np.testing.assert_allclose(want, reference.conv2d_backward_ref(x, w, dy, (2, 2), ((0, 1), (0, 1)), (1, 1),
                                                                    1)[0], **TOL)


def test_a_pooling_geometry_changed_in_place_is_honoured(device):
    """A window or stride the caller keeps in a list and changes between calls gives the new geometry's result."""
    xp = device
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    (d_x,) = _put(x)
    window, pads = [2, 2], ((0, 0), (0, 0))
    for mode in ("max", "avg"):
        for size in (2, 3, 2):
            window[:] = [size, size]
            y, _ = xp.pool2d_forward(d_x, mode, window, window, pads)
            want = reference.pool2d_ref(x, (size, size), (size, size), pads, "max" if mode == "max" else
                                        "avg_exclude_pad")
            np.testing.assert_allclose(y.get(), want, **TOL)


def test_the_ops_find_their_plans_without_working_them_out_again(device, monkeypatch):
    """After a first call, a repeated call of each op (the same shapes and geometry objects) finds its plan in one
    look-up: none of the functions that work a plan out (and check its arguments) runs again."""
    xp = device
    from magmadnn.backend.device import conv, pooling
    from pymagma import _dnn_plans

    ran = []

    def counted(owner, name):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            ran.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    for owner, name in ((conv, "_seen"), (pooling, "_seen"), (_dnn_plans, "activation_plan_of"),
                        (_dnn_plans, "batch_norm_plan_of")):
        counted(owner, name)
    x, w = _put(RNG.standard_normal((2, 3, 6, 6)).astype(np.float32), RNG.standard_normal((3, 3, 3, 3)).astype(
        np.float32))
    gamma, beta, mean, var = _put(np.ones(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32),
                                  np.ones(3, np.float32))
    geometry, window = ((1, 1), ((0, 1), (0, 1)), (1, 1), 1), ((2, 2), (2, 2), ((0, 0), (0, 0)))

    def step():
        saved = {}
        y = xp.conv2d_forward(x, w, *geometry, saved=saved)
        xp.conv2d_backward_data(y, w, x.shape, *geometry)
        xp.conv2d_backward_filter(y, x, w.shape, *geometry, saved=saved)
        for kind, alpha in (("relu", 0.0), ("elu", 0.5)):
            a = xp.activation_forward(y, kind, alpha)
            xp.activation_backward(y, y, a, kind, alpha)
        z, ctx = xp.batch_norm_train(y, gamma, beta, mean, var, 0.9, 1e-5)
        xp.batch_norm_backward(z, y, gamma, ctx)
        for mode in ("max", "avg"):
            p, c = xp.pool2d_forward(y, mode, *window)
            xp.pool2d_backward(p, y, p, c, mode, *window)

    step()
    assert sorted(set(ran)) == ["_seen", "activation_plan_of", "batch_norm_plan_of"]
    ran.clear()
    step()
    assert ran == []


def test_a_kept_convolution_follows_allow_tf32(monkeypatch):
    """The plan the device convolution keeps for a layer's geometry computes with the math that
    ``pymagma.dnn.allow_tf32`` allows at each call (TF32-rounded operands or exact float32), as an unplanned call."""
    from pymagma import dnn
    from pymagma.simulator.cudnn.numerics import tf32

    x, w = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32), RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    exact = reference.conv2d_ref(x, w, (1, 1), ((0, 1), (0, 1)))
    rounded = reference.conv2d_ref(tf32(x), tf32(w), (1, 1), ((0, 1), (0, 1)))
    assert np.abs(exact - rounded).max() > 1e-4
    geometry = ((1, 1), ((0, 1), (0, 1)), (1, 1), 1)
    with simulator.simulated("full") as simulation:
        from magmadnn.backend import device as xp

        simulation.cudnn.tf32 = True
        d_x, d_w, d_padded = _put(x, w, np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1))))
        for allowed in (True, False, True, False):
            monkeypatch.setattr(dnn, "allow_tf32", allowed)
            got = xp.conv2d_forward(d_x, d_w, *geometry).get()
            np.testing.assert_allclose(got, rounded if allowed else exact, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(got, dnn.conv2d_forward(d_padded, d_w).get())  # the unplanned call
