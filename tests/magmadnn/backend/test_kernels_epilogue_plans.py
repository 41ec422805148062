"""The bias + activation epilogue's plans (kernels/epilogue.py): a call's checked plan kept by its arguments, its
checks' errors never kept (a bad call is refused each time, also after a good call of the same shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.backend.device import kernels
from magmadnn.backend.device.kernels import epilogue
from pymagma import simulator


def test_bad_calls_are_refused_every_time_and_good_ones_planned_once():
    import pymagma

    with simulator.simulated("null"):
        x, good, bad = (pymagma.zeros(s, np.float32) for s in ((2, 3), (3,), (4,)))
        for _ in range(2):
            with pytest.raises(ValueError, match="bias must have shape"):
                kernels.bias_activation(x, bad, "relu")
            with pytest.raises(ValueError, match="unknown activation"):
                kernels.bias_activation(x, good, "cube")
            with pytest.raises(ValueError, match="unknown activation"):
                kernels.bias_activation_backward(x, None, x, "cube")
            with pytest.raises(ValueError, match="needs"):  # gelu's gradient reads z
                kernels.bias_activation_backward(x, None, x, "gelu")
        epilogue._FORWARD_PLANS.clear()
        y, z = kernels.bias_activation(x, good, "relu")
        assert z is None and y.shape == (2, 3) and len(epilogue._FORWARD_PLANS) == 1
        kernels.bias_activation(pymagma.zeros((2, 3), np.float32), good, "relu")
        assert len(epilogue._FORWARD_PLANS) == 1  # the same arguments: the same plan
        with pytest.raises(ValueError, match="bias must have shape"):  # x's shape planned, the bias' refused
            kernels.bias_activation(pymagma.zeros((2, 3), np.float32), bad, "relu")
        dx, db = kernels.bias_activation_backward(x, None, y, "relu")
        assert dx.shape == (2, 3) and db.shape == (3,)


# ------------------------------------------------------------------------------------- the planned launches
def _checked_calls(monkeypatch):
    """The calls that take the checked path of the forward and the backward (the others launch their plan)."""
    calls = []
    for name in ("_bias_activation_checked", "_bias_activation_backward_checked"):
        fn = getattr(epilogue, name)
        monkeypatch.setattr(epilogue, name, lambda *args, _fn=fn, _name=name: (calls.append(_name), _fn(*args))[1])
    return calls


def test_every_kind_the_op_set_names_is_a_kind_the_kernels_plan():
    """A plan is found by the kind's name: the op set's kinds and the kernels' are one set, so a planned call never
    answers for a kind the op set refuses."""
    from magmadnn.backend import geometry
    from pymagma.kernels.elementwise import ACTIVATION_GRADS

    assert set(geometry.ACTIVATIONS) == set(ACTIVATION_GRADS) == set(epilogue._FORWARD)


@pytest.mark.parametrize("kind", ["relu", "gelu", "sigmoid", "leaky_relu"])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5)])
def test_planned_calls_equal_the_checked_call_bit_for_bit_and_numpy(kind, shape, monkeypatch):
    import pymagma

    rng = np.random.default_rng(0)
    x_host = rng.standard_normal(shape).astype(np.float32)
    b_host = rng.standard_normal(shape[1]).astype(np.float32)
    dy_host = rng.standard_normal(shape).astype(np.float32)
    z_want = x_host + b_host.reshape((-1,) + (1,) * (len(shape) - 2))  # one float32 rounding, as the kernel
    with simulator.simulated("full"):
        epilogue._FORWARD_PLANS.clear()
        epilogue._BACKWARD_PLANS.clear()
        calls = _checked_calls(monkeypatch)
        results = []
        for _ in range(3):
            y, z = kernels.bias_activation(pymagma.asarray(x_host), pymagma.asarray(b_host), kind, 0.2)
            dx, db = kernels.bias_activation_backward(pymagma.asarray(dy_host), z, y, kind, 0.2)
            results.append([a.get() for a in (y, dx, db)] + [None if z is None else z.get()])
        assert calls == ["_bias_activation_checked", "_bias_activation_backward_checked"]  # then planned, twice
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            np.testing.assert_array_equal(a, b)  # planned == checked, bit for bit
    y, dx, db, z = results[0]
    assert (z is None) == (kind in ("relu", "sigmoid"))
    if z is not None:
        np.testing.assert_array_equal(z, z_want)
    if kind == "relu":
        np.testing.assert_array_equal(y, np.maximum(z_want, 0))
        np.testing.assert_array_equal(dx, np.where(z_want > 0, dy_host, 0))
    elif kind == "sigmoid":
        np.testing.assert_allclose(y, 1 / (1 + np.exp(-z_want.astype(np.float64))), rtol=1e-6)
    np.testing.assert_allclose(db, dx.astype(np.float64).sum(axis=tuple(i for i in range(len(shape)) if i != 1)),
                               rtol=1e-5, atol=1e-6)


def test_a_plan_never_answers_for_another_layout_dtype_or_shape(monkeypatch):
    import pymagma

    rng = np.random.default_rng(1)
    wide = rng.standard_normal((4, 6)).astype(np.float32)
    b_host = rng.standard_normal(3).astype(np.float32)
    with simulator.simulated("full"):
        x, b = pymagma.asarray(wide[:, :3].copy()), pymagma.asarray(b_host)
        kernels.bias_activation(x, b, "relu")
        kernels.bias_activation(pymagma.asarray(wide[:, :3].copy()), b, "gelu")
        y, z = kernels.bias_activation(pymagma.asarray(wide[:, :3].copy()), b, "gelu")
        kernels.bias_activation_backward(y, z, y, "gelu")
        calls = _checked_calls(monkeypatch)  # from here: (4, 3) float32 relu and gelu planned, and gelu's gradient
        strided = pymagma.asarray(wide)[:, ::2]  # x's shape and dtype, another layout
        strided_b = pymagma.asarray(np.repeat(b_host, 2))[::2]
        for _ in range(2):
            np.testing.assert_array_equal(
                kernels.bias_activation(strided, b, "gelu")[0].get(),
                kernels.bias_activation(pymagma.asarray(wide[:, ::2].copy()), b, "gelu")[0].get())
            np.testing.assert_array_equal(strided.get(), wide[:, ::2])  # z went to a copy, not into x's view
            np.testing.assert_array_equal(kernels.bias_activation(x, strided_b, "relu")[0].get(),
                                          kernels.bias_activation(x, b, "relu")[0].get())
            with pytest.raises(TypeError, match="does not promote"):
                kernels.bias_activation(pymagma.asarray(wide[:, :3].astype(np.float64)), b, "gelu")
            with pytest.raises(ValueError, match="must have dy's shape"):
                kernels.bias_activation_backward(y, pymagma.zeros((3, 4), np.float32), y, "gelu")
            with pytest.raises(TypeError, match="dtypes differ"):
                kernels.bias_activation_backward(y, z, pymagma.zeros((4, 3), np.float64), "gelu")
            dx_strided = kernels.bias_activation_backward(y, strided, y, "gelu")[0]
            dx_copy = kernels.bias_activation_backward(y, pymagma.asarray(wide[:, ::2].copy()), y, "gelu")[0]
            np.testing.assert_array_equal(dx_strided.get(), dx_copy.get())
    # per round: the strided x, the strided bias, float64 x; z of another shape, y of another dtype, the strided z
    assert calls.count("_bias_activation_checked") == 2 * 3 and calls.count("_bias_activation_backward_checked") == 6


def test_a_plan_never_answers_for_operands_on_two_devices(monkeypatch):
    import pymagma
    from pymagma import runtime as rt

    with simulator.simulated("full") as sim:
        x, b = pymagma.zeros((2, 3), np.float32), pymagma.zeros((3,), np.float32)
        y, _ = kernels.bias_activation(x, b, "relu")
        kernels.bias_activation(pymagma.zeros((2, 3), np.float32), b, "relu")  # planned
        kernels.bias_activation_backward(y, None, y, "relu")
        kernels.bias_activation_backward(y, None, y, "sigmoid")  # (its gradient reads y alone)
        monkeypatch.setattr(sim.runtime, "device_count", 2)
        monkeypatch.delattr(sim.libraries, "device_count", raising=False)
        with rt.on_device(1):
            b1, y1 = pymagma.zeros((3,), np.float32), pymagma.zeros((2, 3), np.float32)
        for _ in range(2):
            with pytest.raises(ValueError, match="different devices"):
                kernels.bias_activation(pymagma.zeros((2, 3), np.float32), b1, "relu")
            with pytest.raises(ValueError, match="different devices"):
                kernels.bias_activation_backward(y, None, y1, "relu")  # (z is y1 here)
            with pytest.raises(ValueError, match="different devices"):
                kernels.bias_activation_backward(y, None, y1, "sigmoid")
            with pytest.raises(ValueError, match="different devices"):
                kernels.bias_activation_backward(y, y1, y, "relu")
