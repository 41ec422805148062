"""The device backend's linear ops on their plans (``device/linear.py``: ``matmul`` on pymagma's planned matmul,
``bias_activation`` and its backward the epilogue's launchers): a repeated call equals its first, checked call bit
for bit; layouts the backend copies first (strided views) keep their transposes and equal NumPy; the op set's errors
come every time."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymagma import simulator


@pytest.fixture(scope="module")
def dev():
    from magmadnn import backend

    with simulator.simulated("full"):
        yield backend.get("gpu")


def test_repeated_products_equal_the_first_checked_one_and_numpy(dev):
    rng = np.random.default_rng(0)
    a_host, b_host = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    first = {}
    for _ in range(3):
        for ta, tb in itertools.product((False, True), repeat=2):
            a = dev.asarray(np.ascontiguousarray(a_host.T) if ta else a_host)
            b = dev.asarray(np.ascontiguousarray(b_host.T) if tb else b_host)
            got = dev.to_numpy(dev.matmul(a, b, transpose_a=ta, transpose_b=tb))
            np.testing.assert_array_equal(got, first.setdefault((ta, tb), got))
            np.testing.assert_allclose(got, a_host @ b_host, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta,tb", list(itertools.product((False, True), repeat=2)))
def test_strided_views_keep_their_transposes(dev, ta, tb):
    """Operands BLAS cannot take as they are (every second column) are copied first, then multiplied with the
    flags: the checked path, every time."""
    rng = np.random.default_rng(1)
    a_wide = rng.standard_normal((5, 6) if ta else (3, 10)).astype(np.float64)
    b_wide = rng.standard_normal((4, 10) if tb else (5, 8)).astype(np.float64)
    a, b = dev.asarray(a_wide)[:, ::2], dev.asarray(b_wide)[:, ::2]
    a_view, b_view = a_wide[:, ::2], b_wide[:, ::2]
    want = (a_view.T if ta else a_view) @ (b_view.T if tb else b_view)
    for _ in range(2):
        np.testing.assert_allclose(dev.to_numpy(dev.matmul(a, b, transpose_a=ta, transpose_b=tb)), want,
                                   rtol=1e-12)


def test_the_op_sets_errors_come_every_time(dev):
    a32, b64 = dev.ones((2, 3), np.float32), dev.ones((3, 4), np.float64)
    dev.matmul(a32, dev.ones((3, 4), np.float32))
    x, b = dev.ones((2, 3), np.float32), dev.ones((3,), np.float32)
    dev.bias_activation(x, b, "relu")
    for _ in range(2):
        with pytest.raises(TypeError, match="does not promote"):
            dev.matmul(a32, b64)
        with pytest.raises(TypeError, match="does not promote"):
            dev.bias_activation(dev.ones((2, 3), np.float32), dev.ones((3,), np.float64), "relu")
        with pytest.raises(ValueError, match="unknown activation kind"):
            dev.bias_activation(dev.ones((2, 3), np.float32), b, "cube")
        with pytest.raises(ValueError, match="unknown activation kind"):
            dev.bias_activation_backward(x, None, x, "cube")


def test_device_bias_add_planned_and_its_errors_every_time(dev):
    host, b_host = np.arange(24.0, dtype=np.float32).reshape(4, 3, 2) - 12, np.array([1.5, -2.0, 0.25], np.float32)
    x, b = dev.asarray(host), dev.asarray(b_host)
    want = host + b_host[:, None]
    for _ in range(3):
        np.testing.assert_array_equal(dev.to_numpy(dev.bias_add(x, b)), want)
        with pytest.raises(TypeError, match="does not promote"):
            dev.bias_add(x, dev.asarray(b_host.astype(np.float64)))
        with pytest.raises(ValueError, match="bias must have shape"):
            dev.bias_add(x, dev.asarray(np.ones(4, np.float32)))
        strided = dev.asarray(np.repeat(b_host, 2))[::2]
        np.testing.assert_array_equal(dev.to_numpy(dev.bias_add(x, strided)), want)

