"""The planned channel bias (``pymagma.kernels.bias_add``): a call into a new output whose operands' shapes and dtype
were seen before launches its kept plan in its own frame, equal bit for bit to the checked call and to NumPy; a plan
never answers for another layout, dtype, an ``out`` or operands on two devices."""

from __future__ import annotations

import numpy as np
import pytest

import pymagma
from pymagma import kernels, simulator
from pymagma import runtime as rt
from pymagma.kernels import elementwise


@pytest.fixture(autouse=True)
def simulated():
    with simulator.simulated("full") as sim:
        elementwise._BIAS_PLANS.clear()
        yield sim


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 2, 2), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_planned_calls_equal_the_checked_call_and_numpy(shape, dtype):
    rng = np.random.default_rng(0)
    x_host, b_host = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    want = x_host + b_host.reshape((-1,) + (1,) * (len(shape) - 2))  # one rounding, as the kernel
    b = pymagma.asarray(b_host)
    outs = [kernels.bias_add(pymagma.asarray(x_host), b).get() for _ in range(3)]
    assert len(elementwise._BIAS_PLANS) == 1
    for got in outs:
        np.testing.assert_array_equal(got, want)


def test_a_plan_never_answers_for_another_layout_dtype_out_or_device(simulated, monkeypatch):
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((4, 6)).astype(np.float32)
    b_host = rng.standard_normal(3).astype(np.float32)
    x, b = pymagma.asarray(wide[:, :3].copy()), pymagma.asarray(b_host)
    kernels.bias_add(x, b)  # planned from here
    strided = pymagma.asarray(wide)[:, ::2]
    strided_b = pymagma.asarray(np.repeat(b_host, 2))[::2]
    for _ in range(2):
        np.testing.assert_array_equal(kernels.bias_add(strided, b).get(), wide[:, ::2] + b_host)
        np.testing.assert_array_equal(kernels.bias_add(x, strided_b).get(), wide[:, :3] + b_host)
        out = pymagma.zeros((4, 3), np.float32)
        assert kernels.bias_add(x, b, out=out) is out
        np.testing.assert_array_equal(out.get(), wide[:, :3] + b_host)
        with pytest.raises(TypeError, match="dtypes differ"):
            kernels.bias_add(x, pymagma.asarray(b_host.astype(np.float64)))
        with pytest.raises(ValueError, match="bias must have shape"):
            kernels.bias_add(x, pymagma.asarray(np.ones(4, np.float32)))
    assert len(elementwise._BIAS_PLANS) == 1
    monkeypatch.setattr(simulated.runtime, "device_count", 2)
    monkeypatch.delattr(simulated.libraries, "device_count", raising=False)
    with rt.on_device(1):
        b1 = pymagma.asarray(b_host)
    for _ in range(2):
        with pytest.raises(ValueError, match="different devices"):
            kernels.bias_add(x, b1)
