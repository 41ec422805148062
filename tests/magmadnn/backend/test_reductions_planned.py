"""The device backend's planned reductions (``sum``, ``mean``, ``channel_sum``, ``bias_grad`` on pymagma's planned
reductions; ``broadcast_divide`` on its planned broadcast division): a repeated call launches its kept plan through the
libraries in use, equal bit for bit to the first, checked call and to NumPy (integer-valued data: every sum exact); a
plan never answers for another layout, dtype or argument type, and the op set's errors come every time."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma.kernels import reductions


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (-1, True), ((0, 2), False), ((1,), True)])
def test_planned_sums_and_means_equal_the_checked_call_and_numpy(dev, dtype, axis, keepdims):
    host = _data((3, 4, 5), dtype)
    x = dev.asarray(host)
    for op, ref in (("sum", np.sum), ("mean", np.mean)):
        outs = [dev.to_numpy(getattr(dev, op)(x, axis=axis, keepdims=keepdims)) for _ in range(3)]
        want = ref(host, axis=axis, keepdims=keepdims)
        for got in outs:
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        assert (op, x.shape, x.strides, x.dtype, axis, keepdims) in reductions._LAUNCHES


def test_channel_sum_and_bias_grad_planned_equal_numpy(dev):
    dev.channel_sum.plans.clear()
    dev.bias_grad.plans.clear()
    for shape in [(4, 3), (2, 3, 5), (2, 3, 2, 2), (1, 3)]:
        host = _data(shape, np.float32, 1)
        want = host.sum(axis=(0, *range(2, len(shape))))
        for _ in range(3):
            for op in (dev.channel_sum, dev.bias_grad):
                got = dev.to_numpy(op(dev.asarray(host)))
                assert got.shape == want.shape
                np.testing.assert_array_equal(got, want)
    assert len(dev.channel_sum.plans) == 4 and len(dev.bias_grad.plans) == 4


def test_a_plan_never_answers_for_another_layout_dtype_or_argument_type(dev):
    host = _data((4, 6), np.float32, 2)
    x = dev.asarray(host)
    dev.sum(x, axis=1)
    dev.channel_sum(x)
    view = x[:, ::2]  # another layout of the same shape as a (4, 3) array
    for _ in range(2):
        np.testing.assert_array_equal(dev.to_numpy(dev.sum(view, axis=1)), host[:, ::2].sum(axis=1))
        np.testing.assert_array_equal(dev.to_numpy(dev.channel_sum(view)), host[:, ::2].sum(axis=0))
        np.testing.assert_array_equal(dev.to_numpy(dev.mean(x.T, axis=0)), host.T.mean(axis=0))
        wide = dev.asarray(host.astype(np.float64))
        got = dev.to_numpy(dev.sum(wide, axis=1))
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, host.astype(np.float64).sum(axis=1))
        with pytest.raises(TypeError, match="integer"):
            dev.sum(x, axis=1.0)  # equal (and hashing equal) to the planned axis 1, refused every time
        with pytest.raises(TypeError, match="integer"):
            dev.sum(x, axis=(1.0,))
        with pytest.raises(ValueError, match="out of range"):
            dev.sum(x, axis=2)
        with pytest.raises(ValueError, match="repeated axis"):
            dev.mean(x, axis=(1, -1))
        with pytest.raises(TypeError, match="floating dtype"):
            dev.sum(dev.asarray(np.ones((4, 6), np.int32)), axis=1)
        with pytest.raises(TypeError, match="floating dtype"):
            dev.channel_sum(dev.asarray(np.ones((4, 6), np.int32)))
        with pytest.raises(TypeError):
            dev.channel_sum(host)  # a host array of the planned layout: the kernel's TypeError naming it
        with pytest.raises(ValueError, match="unknown reduction"):
            reductions.reduce("median", x, axis=1)
        with pytest.raises(TypeError):
            dev.sum(host, axis=1)  # a host array: the kernel's TypeError naming it


def test_planned_calls_launch_through_the_libraries_in_use(dev, sim, monkeypatch):
    """A planned call reads the native seam at each call: a launcher swapped in after planning sees it."""
    x = dev.asarray(_data((2, 3), np.float32, 3))
    b = dev.asarray(_data((3,), np.float32, 4))
    calls = [dev.sum(x, axis=0), dev.mean(x), dev.channel_sum(x), dev.bias_grad(x), dev.bias_add(x, b)]
    seen = []
    real = sim.libraries.launcher

    class Recording:
        def launch(self, program, expression, *args):
            seen.append(program)
            return real.launch(program, expression, *args)

        def __getattr__(self, name):
            return getattr(real, name)

    monkeypatch.setattr(sim.libraries, "launcher", Recording())
    again = [dev.sum(x, axis=0), dev.mean(x), dev.channel_sum(x), dev.bias_grad(x), dev.bias_add(x, b)]
    assert seen == ["reductions"] * 4 + ["elementwise"]
    for first, second in zip(calls, again):
        np.testing.assert_array_equal(dev.to_numpy(first), dev.to_numpy(second))


def test_planned_broadcast_divides_equal_the_checked_call_and_numpy(dev):
    host = _data((3, 1), np.float32, 10)
    x = dev.asarray(host)
    for shape, divisor in (((3, 4), 1), ((2, 3, 4), 3), ((3, 4), 3)):
        want = np.broadcast_to(host, shape) / np.float32(divisor)  # one rounding, as the kernel
        for _ in range(3):
            np.testing.assert_array_equal(dev.to_numpy(dev.broadcast_divide(x, shape, divisor)), want)
        np.testing.assert_array_equal(dev.to_numpy(dev.broadcast_divide(x, list(shape), divisor)), want)
    for _ in range(2):
        np.testing.assert_array_equal(dev.to_numpy(dev.broadcast_divide(x, (3.0, 4.0), 2)), np.broadcast_to(
            host, (3, 4)) / np.float32(2))  # equal to the planned (3, 4): the same ints
        np.testing.assert_array_equal(dev.to_numpy(dev.broadcast_divide(x.T, (2, 3), 1)), np.broadcast_to(
            host.T, (2, 3)))  # another layout
        with pytest.raises(ValueError, match="does not broadcast"):
            dev.broadcast_divide(x, (4, 5), 1)
        with pytest.raises(TypeError, match="floating dtype"):
            dev.broadcast_divide(dev.asarray(np.ones((3, 1), np.int32)), (3, 4), 1)
        with pytest.raises(TypeError):
            dev.broadcast_divide(host, (3, 4), 1)  # a host array of the planned layout
