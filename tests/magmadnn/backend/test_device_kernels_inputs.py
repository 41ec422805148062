"""A user's mistakes with the device backend's own kernels (magmadnn/backend/device/kernels/): typed errors naming
what was wrong before any launch, on the simulated device; NumPy arrays refused before any native call (as
tests/pymagma/test_bad_inputs.py and test_host_inputs.py check for pymagma's API)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import pymagma
from magmadnn.backend.device import kernels
from pymagma import simulator
from tests.pymagma.suites.test_host_inputs import C, M, on_device

X4 = (1, 2, 4, 4)


@pytest.fixture
def d():
    """Small device arrays on the simulated device: ``a`` (2, 4), an NCHW ``x`` of shape X4, an int32 ``i32``."""
    with simulator.simulated("full"):
        def up(shape, dtype=np.float32):
            return pymagma.asarray(np.arange(np.prod(shape), dtype=dtype).reshape(shape))

        yield SimpleNamespace(a=up((2, 4)), x=up(X4), i32=up((2, 2), np.int32))

ROWS = [
    ("dropout rate", lambda d: kernels.dropout(d.a, 1.5, seed=0), ValueError, ["dropout rate", "1.5"]),
    ("adam step 0", lambda d: kernels.adam_update(d.a, d.a, d.a, d.a, step=0, lr=0.1), ValueError,
     ["adam step must be between 1"]),
    ("adam step float", lambda d: kernels.adam_update(d.a, d.a, d.a, d.a, step=1.5, lr=0.1), TypeError,
     ["adam step must be an integer"]),
    ("sgd lr nan", lambda d: kernels.sgd_update(d.a, d.a, lr=float("nan")), ValueError, ["lr must be a finite"]),
    ("adagrad lr inf", lambda d: kernels.adagrad_update(d.a, d.a, d.a, lr=float("inf")), ValueError, ["lr", "inf"]),
    ("sgd no velocity", lambda d: kernels.sgd_update(d.a, d.a, lr=0.1, momentum=0.9), ValueError, ["velocity"]),
    # the multi-tensor updates check their hyperparameters' common case (finite floats) inline: what it lets by
    ("sgd_many lr nan", lambda d: kernels.sgd_update_many([d.a], [d.a], lr=float("nan")), ValueError,
     ["lr must be a finite", "nan"]),
    ("sgd_many lr bool", lambda d: kernels.sgd_update_many([d.a], [d.a], lr=True), ValueError, ["lr", "True"]),
    ("sgd_many momentum inf", lambda d: kernels.sgd_update_many([d.a], [d.a], [d.a], lr=0.1, momentum=float("inf")),
     ValueError, ["momentum", "inf"]),
    # the op the backend calls (no wrapper) checks its hyperparameters inline: a NaN or infinite one is refused
    ("sgd_many op lr nan", lambda d: kernels.optim.sgd_update_many_op([d.a], [d.a], None, float("nan")), ValueError,
     ["lr must be a finite", "nan"]),
    ("sgd_many op momentum inf", lambda d: kernels.optim.sgd_update_many_op([d.a], [d.a], [d.a], 0.1, float("inf")),
     ValueError, ["momentum", "inf"]),
    ("adam_many beta2 nan", lambda d: kernels.adam_update_many([d.a], [d.a], [d.a], [d.a], lr=0.1,
                                                               beta2=float("nan")), ValueError, ["beta2", "nan"]),
    ("rmsprop_many eps -inf", lambda d: kernels.rmsprop_update_many([d.a], [d.a], [d.a], lr=0.1, eps=-float("inf")),
     ValueError, ["eps", "-inf"]),
    ("adagrad_many weight_decay nan", lambda d: kernels.adagrad_update_many([d.a], [d.a], [d.a], lr=0.1,
                                                                            weight_decay=float("nan")),
     ValueError, ["weight_decay", "nan"]),
    # the mean cross entropy checks int64 class indices inline: the labels' shape and other integer dtypes
    ("xent_mean labels shape", lambda d: kernels.softmax_cross_entropy_mean(
        d.a, pymagma.asarray(np.zeros(3, np.int64))), ValueError, ["class-index labels must have shape (2,)", "(3,)"]),
    ("xent_mean int32 labels", lambda d: kernels.softmax_cross_entropy_mean(d.a, d.i32[0]), TypeError,
     ["dtypes differ"]),
    ("xent_mean_backward labels shape", lambda d: kernels.softmax_cross_entropy_backward(
        d.a, pymagma.asarray(np.zeros(3, np.int64)), None, mean=True), ValueError,
     ["class-index labels must have shape (2,)", "(3,)"]),
    ("xent_mean_backward host probs", lambda d: kernels.softmax_cross_entropy_backward(
        np.zeros((2, 4), np.float32), pymagma.asarray(np.zeros(2, np.int64)), None, mean=True), TypeError,
     ["DeviceArray"]),
    ("max_pool2d 2-D input", lambda d: kernels.max_pool2d(d.a, (2, 2), (2, 2)), ValueError, ["(N, C, H, W)", "(2, 4)"]),
    ("max_pool2d float window", lambda d: kernels.max_pool2d(d.x, (2.5, 2), (1, 1)), TypeError,
     ["window[0] must be an integer", "2.5"]),
    ("max_pool2d int window", lambda d: kernels.max_pool2d(d.x, 2, (1, 1)), ValueError, ["window must be a pair", "2"]),
    ("max_pool2d zero stride", lambda d: kernels.max_pool2d(d.x, (2, 2), (0, 1)), ValueError, ["positive"]),
    ("max_pool2d padding", lambda d: kernels.max_pool2d(d.x, (2, 2), (1, 1), ((2, 0), (0, 0))), ValueError,
     ["smaller than the window"]),
    ("max_pool2d window too big", lambda d: kernels.max_pool2d(d.x, (5, 5), (1, 1)), ValueError, ["does not fit"]),
    ("max_pool2d_backward offsets", lambda d: kernels.max_pool2d_backward(d.x[:, :, :2, :2], d.x[:, :, :2, :2],
                                                                          X4, (2, 2), (2, 2)), TypeError, ["int32"]),
    ("max_pool2d_backward shape", lambda d: kernels.max_pool2d_backward(d.x, d.i32, X4, (2, 2), (2, 2)), ValueError,
     ["pooled shape", "(1, 2, 2, 2)"]),
    ("max_pool2d int input", lambda d: kernels.max_pool2d(d.i32.reshape(1, 1, 2, 2), (1, 1), (1, 1)), TypeError,
     ["floating dtype"]),
]


@pytest.mark.parametrize(("call", "error", "words"), [pytest.param(c, e, w, id=i) for i, c, e, w in ROWS])
def test_bad_input_gets_a_clear_typed_error(d, call, error, words):
    with pytest.raises(error) as info:
        call(d)
    message = str(info.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"{type(info.value).__name__}: {message!r} lacks {missing}"


def test_finite_hyperparameters_whose_sum_overflows_pass(d):
    """The inline check adds the hyperparameters: finite ones whose sum overflows take the full check and pass."""
    kernels.sgd_update_many([d.a], [d.a], [d.a], lr=1e308, momentum=1e308)
    kernels.adam_update_many([d.a], [d.a], [d.a], [d.a], lr=1e308, eps=1e308)


def test_checks_answered_once_per_arguments_still_refuse_an_equal_float(d):
    """Pooling geometries are checked once per distinct arguments and cached: a float equal to an int that passed
    (2.0 == 2, same hash) is still a TypeError, as on a first call."""
    cases = [
        (lambda: kernels.max_pool2d(d.x, (2, 2), (2, 2)), lambda: kernels.max_pool2d(d.x, (2, 2.0), (2, 2))),
        (lambda: kernels.max_pool2d(d.x, (2, 2), (2, 2), ((0, 0), (0, 0))),
         lambda: kernels.max_pool2d(d.x, (2, 2), (2, 2), ((0, 0), (0, 0.0)))),
    ]
    for good, bad in cases:
        good()
        good()  # answered from the cache
        with pytest.raises(TypeError, match="integer"):
            bad()


CALLS = {
    "kernels.softmax_cross_entropy": lambda: kernels.softmax_cross_entropy(M, np.zeros(4, np.int64)),
    "kernels.softmax_cross_entropy labels": lambda: kernels.softmax_cross_entropy(on_device(M), np.zeros(4, np.int64)),
    "kernels.sgd_update": lambda: kernels.sgd_update(C, C, lr=0.1),
    "kernels.adam_update": lambda: kernels.adam_update(on_device(C), C, C, C, step=1, lr=0.1),
    "kernels.rmsprop_update": lambda: kernels.rmsprop_update(C, C, C, lr=0.1),
    "kernels.adagrad_update": lambda: kernels.adagrad_update(C, C, C, lr=0.1),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_host_arrays_are_a_type_error_before_any_native_call(call):
    with pytest.raises(TypeError, match=r"expected a pymagma\.DeviceArray, got ndarray \(use pymagma\.asarray\)"):
        call()
