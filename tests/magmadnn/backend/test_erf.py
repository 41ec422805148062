"""The host's float32 erf and exact-GELU ufuncs (``backend/_erf.py``, numba): against ``math.erf``/``math.erfc``
element by element to float32 rounding, PyTorch's GELU and its autograd gradient, NaN and infinities; and the path
without numba."""

from __future__ import annotations

import math

import numpy as np
import pytest

from magmadnn.backend import _erf

pytest.importorskip("numba")

_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _points() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.concatenate([np.linspace(-10, 10, 40001), rng.standard_normal(20000) * 3,
                           [0.0, -0.0, 1e-30, -1e-30, 1e-45, 0.0625, -0.0625, 0.0624999, 5.9999, 6.0, -6.0, 8.49,
                            -8.49, 8.5, -8.5, 40.0, -40.0]]).astype(np.float32)


def _ulps(got, ref) -> np.ndarray:
    """|got - ref| in units of float32's spacing at ref (ref exact, in float64)."""
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)


def test_float32_kernels_are_there():
    assert _erf._fast() is not None  # numba is installed: the kernels below are what the host runs


def test_erf_float32_is_math_erf_rounded():
    x = _points()
    got = _erf.erf(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    ref = np.array([math.erf(float(v)) for v in x])
    assert _ulps(got, ref).max() <= 1.0  # within one float32 step of the exact value
    assert (np.signbit(got) == np.signbit(x)).all()  # erf(-0) is -0
    x2 = x[:1200].reshape(30, 40)[:, ::2]  # a strided view: the same values
    np.testing.assert_array_equal(_erf.erf(x2), np.asarray(_erf.erf(np.ascontiguousarray(x2))))


def test_gelu_float32_matches_the_exact_formula():
    x = _points()
    got = _erf.gelu(x)
    ref = np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    # within two float32 steps, plus what 1 + erf(x / sqrt 2) (computed in float64) loses for negative x: its
    # error (1.6e-8 at most: 1 - erf(4), beyond the clamp) times |x| / 2 (PyTorch's float32 sum: 6e-8 times that)
    bad = _ulps(got, ref) > 2 + 8e-9 * np.abs(x) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert not bad.any(), x[bad][:5]


def test_gelu_and_its_gradient_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((7, 33, 65)) * 3).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx)
    ty.backward(torch.tensor(dy))
    # PyTorch's float32 1 + erf(x / sqrt 2) loses digits for negative x (a float32 step of 1 times |x| / 2)
    np.testing.assert_allclose(_erf.gelu(x), ty.detach().numpy(), rtol=2e-6, atol=6e-8 * np.abs(x).max())
    np.testing.assert_allclose(_erf.gelu_grad(dy, x), tx.grad.numpy(), rtol=2e-6, atol=1e-6)
    ref = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2)) + float(v) * math.exp(-0.5 * float(v) ** 2)
                    * _INV_SQRT_2PI for v in _points()])
    got = _erf.gelu_grad(np.ones(_points().shape, np.float32), _points())
    assert np.abs(got - ref).max() < 1.2e-7  # a float32 step at most (the derivative is at most 1.13)


def test_nan_and_infinities():
    x = np.array([np.nan, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(_erf.erf(x), [np.nan, 1, -1])
    np.testing.assert_array_equal(_erf.gelu(x), [np.nan, np.inf, 0])
    np.testing.assert_array_equal(_erf.gelu_grad(np.ones(3, np.float32), x), [np.nan, 1, 0])


def test_without_numba_the_float64_accurate_path(monkeypatch):
    x = _points()
    fast = (_erf.erf(x), _erf.gelu(x), _erf.gelu_grad(x, x))
    monkeypatch.setattr(_erf, "_FAST", [None])  # what MAGMADNN_JIT=0 or an install without numba gives
    slow = (_erf.erf(x), _erf.gelu(x), _erf.gelu_grad(x, x))
    for a, b in zip(fast, slow):
        assert b.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    ref = np.array([math.erf(float(v)) for v in x])
    assert _ulps(slow[0], ref).max() <= 1.0
    x64 = x.astype(np.float64)  # float64 never takes the float32 kernels
    np.testing.assert_allclose(_erf.erf(x64), [math.erf(v) for v in x64], rtol=0, atol=4e-15)


def test_gelu_contiguous_loop_is_the_ufunc_bit_for_bit():
    # contiguous arrays take a vectorizing loop, strided views the ufunc: the same values, NaN and infinities too
    x = np.concatenate([np.array([np.nan, np.inf, -np.inf, -0.0], np.float32), _points()])
    x = x[: x.size // 8 * 8].reshape(8, -1)
    ufunc = _erf._fast()[1]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(_erf.gelu(x), ufunc(x))
        np.testing.assert_array_equal(_erf.gelu(x[:, ::3]), ufunc(np.ascontiguousarray(x[:, ::3])))
    assert np.signbit(_erf.gelu(np.array([-0.0], np.float32)))[0] == np.signbit(ufunc(np.float32(-0.0)))
    empty = _erf.gelu(np.zeros((0, 3), np.float32))
    assert empty.shape == (0, 3) and empty.dtype == np.float32
