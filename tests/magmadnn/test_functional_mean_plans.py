"""The mean planned per input signature (functional/operators.py's MeanFunction, run by ``F.mean`` and the global
average pooling layers): a repeated call skips what the first decided, and its output and gradient equal the
unplanned path's bit for bit, on the host and the simulated device, and NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.autograd import Tensor
from magmadnn.functional import operators
from tests.magmadnn.backends import HOST_SIMULATOR_GPU, backend_of

RNG = np.random.default_rng(38)

#: (input shape, axis, keepdims): GlobalAveragePooling1D's, GlobalAvgPool2D's, the whole array's, the last axis'
CASES = [((3, 5, 4), 1, False), ((3, 5, 4), 1, True), ((2, 3, 4, 5), (2, 3), False), ((4, 6), None, False),
         ((4, 6), -1, True), ((2, 3, 4), (0, 2), False)]


@pytest.fixture(params=HOST_SIMULATOR_GPU)
def xp(request):
    yield from backend_of(request.param)


def _numpy(x: np.ndarray, g: np.ndarray, axis, keepdims):
    """NumPy's mean and its gradient ``g`` (the output's shape) spread over the reduced elements."""
    y = np.mean(x, axis=axis, keepdims=keepdims)
    kept = np.mean(x, axis=axis, keepdims=True).shape
    count = x.size // max(1, int(np.prod(kept)))
    return y, np.divide(np.broadcast_to(np.reshape(g, kept), x.shape), count, dtype=x.dtype)


def _run(xp, x, g, axis, keepdims):
    t = Tensor(xp.asarray(x), requires_grad=True, backend=xp)
    y = F.mean(t, axis=axis, keepdims=keepdims)
    y.backward(g)
    return y.numpy(), xp.to_numpy(t.grad)


@pytest.mark.parametrize("shape, axis, keepdims", CASES, ids=[f"{s}-{a}-{k}" for s, a, k in CASES])
def test_planned_mean_equals_the_unplanned_one_and_numpy(xp, shape, axis, keepdims, monkeypatch):
    decided = []
    kept_shape = operators._kept_shape.__wrapped__
    monkeypatch.setattr(operators._kept_shape, "__wrapped__", lambda *a: decided.append(a) or kept_shape(*a))
    operators._MEAN_PLANS.clear()
    for trial in range(3):
        x = RNG.standard_normal(shape).astype(np.float32)
        g = RNG.standard_normal(np.mean(x, axis=axis, keepdims=keepdims).shape).astype(np.float32)
        y_ref, dx_ref = _numpy(x, g, axis, keepdims)
        before = len(decided)
        planned = _run(xp, x, g, axis, keepdims)
        assert len(decided) - before == (1 if trial == 0 and not keepdims else 0)  # a plan decides nothing again
        operators._MEAN_PLANS.clear()
        unplanned = _run(xp, x, g, axis, keepdims)  # (the checked path, which plans again)
        for got, want in zip(planned, unplanned):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        assert planned[0].shape == y_ref.shape and planned[1].shape == dx_ref.shape
        if xp.name == "host":  # (a real device too: its summation order is its own)
            np.testing.assert_array_equal(planned[0], y_ref)
        else:  # (the device's reduction adds in another order than NumPy's pairwise sum)
            np.testing.assert_allclose(planned[0], y_ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(planned[1], dx_ref)


def test_a_plan_answers_only_for_its_signature(xp):
    operators._MEAN_PLANS.clear()
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    for axis, keepdims in ((1, True), (1, False), (2, False), ((1,), False), (1, 1), (1, False)):
        g = RNG.standard_normal(np.mean(x, axis=axis, keepdims=bool(keepdims)).shape).astype(np.float32)
        y, dx = _run(xp, x, g, axis, keepdims)
        y_ref, dx_ref = _numpy(x, g, axis, bool(keepdims))
        assert y.shape == y_ref.shape
        np.testing.assert_allclose(y, y_ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(dx, dx_ref)
    x64 = RNG.standard_normal((3, 4, 5))
    y = F.mean(Tensor(xp.asarray(x64), backend=xp), axis=1).numpy()
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, np.mean(x64, axis=1), rtol=1e-12)
    assert len(operators._MEAN_PLANS) == 6


@pytest.mark.parametrize("layer, shape", [(lambda: L.GlobalAveragePooling1D(), (2, 6, 3)),
                                          (lambda: L.GlobalAveragePooling1D(keepdims=True), (2, 6, 3)),
                                          (lambda: L.GlobalAvgPool2D(), (2, 3, 4, 5))],
                         ids=["gap1d", "gap1d-keepdims", "gap2d"])
def test_global_average_pooling_planned_equals_unplanned(xp, layer, shape):
    layer = layer()
    layer.configure(xp, np.float32, 1)
    axis = 1 if len(shape) == 3 else (2, 3)
    got = []
    for clear in (False, False, True):  # the layer's and the mean's plans, then the mean's unplanned path
        if clear:
            operators._MEAN_PLANS.clear()
        x = np.linspace(-2, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)
        t = Tensor(xp.asarray(x), requires_grad=True, backend=xp)
        y = layer(t)
        g = np.arange(int(np.prod(y.shape)), dtype=np.float32).reshape(y.shape) / 7
        y.backward(g)
        got.append((y.numpy(), xp.to_numpy(t.grad)))
        y_ref, dx_ref = _numpy(x, g, axis, getattr(layer, "keepdims", False))
        np.testing.assert_allclose(got[-1][0], y_ref, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got[-1][1], dx_ref)
    for planned in got[:2]:
        np.testing.assert_array_equal(planned[0], got[2][0])
        np.testing.assert_array_equal(planned[1], got[2][1])
