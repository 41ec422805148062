"""The device backend's planned binaries (``add``, ``subtract``, ``multiply``, ``divide`` on pymagma's planned
binary): a repeated call launches its kept plan, equal bit for bit to the first, checked call and to NumPy; a plan
never answers for another layout, dtype or device, and the op set's errors come every time."""

from __future__ import annotations

import numpy as np
import pytest


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((0, 4), (4,))])
def test_planned_binaries_equal_the_checked_call_and_numpy(dev, dtype, shapes):
    a_host, b_host = _data(shapes[0], dtype, 7) / 4, np.abs(_data(shapes[1], dtype, 8)) / 4 + 0.5  # (no zero divisor)
    a, b = dev.asarray(a_host), dev.asarray(b_host)
    for op, ref in (("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide)):
        want = ref(a_host, b_host)  # one rounding, as the kernel
        for _ in range(3):
            got = dev.to_numpy(getattr(dev, op)(a, b))
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_a_binary_plan_never_answers_for_another_layout_dtype_or_device(dev, sim, monkeypatch):
    from pymagma import runtime as rt

    host = _data((4, 6), np.float32, 9)
    x, y = dev.asarray(host[:, :3].copy()), dev.asarray(host[:, 3:].copy())
    dev.add(x, y)  # planned from here
    full = dev.asarray(host)
    for _ in range(2):
        np.testing.assert_array_equal(dev.to_numpy(dev.add(full[:, ::2], y)), host[:, ::2] + host[:, 3:])
        np.testing.assert_array_equal(dev.to_numpy(dev.add(x, full[:, 1::2])), host[:, :3] + host[:, 1::2])
        np.testing.assert_array_equal(dev.to_numpy(dev.add(x, 2.0)), host[:, :3] + np.float32(2.0))
        with pytest.raises(TypeError, match="does not promote"):
            dev.add(x, dev.asarray(host[:, 3:].astype(np.float64)))
        with pytest.raises(ValueError, match="do not broadcast"):
            dev.add(x, dev.asarray(np.ones(4, np.float32)))
        with pytest.raises(TypeError, match="floating dtype"):
            dev.add(dev.asarray(np.ones((4, 3), np.int32)), dev.asarray(np.ones((4, 3), np.int32)))
        dev.add(x, dev.asarray(np.float32(2.0)))  # a 0-d operand: the same layout in either dtype
        with pytest.raises(TypeError, match="does not promote"):
            dev.add(x, dev.asarray(np.float64(2.0)))
    monkeypatch.setattr(sim.runtime, "device_count", 2)
    monkeypatch.delattr(sim.libraries, "device_count", raising=False)
    with rt.on_device(1):
        y1 = dev.asarray(host[:, 3:].copy())
    for _ in range(2):
        with pytest.raises(ValueError, match="different devices"):
            dev.add(x, y1)




def test_pymagmas_own_binary_on_its_plans(dev, sim, monkeypatch):
    """pymagma's ``binary`` takes the same kept launches: equal to NumPy, errors every time."""
    from pymagma import kernels
    from pymagma import runtime as rt

    host = _data((4, 3), np.float32, 11)
    x, y = dev.asarray(host), dev.asarray(host[::-1].copy())
    for _ in range(3):
        np.testing.assert_array_equal(kernels.binary("multiply", x, y).get(), host * host[::-1])
        with pytest.raises(TypeError, match="dtypes differ"):
            kernels.binary("multiply", x, dev.asarray(host.astype(np.float64)))
        with pytest.raises(ValueError, match="unknown binary op"):
            kernels.binary("modulo", x, y)
    monkeypatch.setattr(sim.runtime, "device_count", 2)
    monkeypatch.delattr(sim.libraries, "device_count", raising=False)
    with rt.on_device(1):
        y1 = dev.asarray(host)
    for _ in range(2):
        with pytest.raises(ValueError, match="different devices"):
            kernels.binary("multiply", x, y1)
