"""Finite-difference gradient checks in float64, shared by the autograd, functional and layer tests.

``check_gradients(fn, *arrays)`` builds leaf Tensors (requires_grad) from float64 arrays, runs ``fn`` on them,
back-propagates a fixed random projection ``sum(fn(...) * u)`` and compares every input's ``.grad`` with central
differences of the same scalar, computed element by element under ``no_grad``.
"""

from __future__ import annotations

import numpy as np

from magmadnn import Tensor, no_grad


def numerical_gradient(scalar_fn, arrays, index, eps=1e-6) -> np.ndarray:
    """Central differences of ``scalar_fn(arrays)`` with respect to ``arrays[index]`` (modified in place, restored)."""
    x = arrays[index]
    grad = np.zeros_like(x, dtype=np.float64)
    for pos in np.ndindex(x.shape):
        old = x[pos]
        x[pos] = old + eps
        plus = scalar_fn(arrays)
        x[pos] = old - eps
        minus = scalar_fn(arrays)
        x[pos] = old
        grad[pos] = (plus - minus) / (2 * eps)
    return grad


def check_gradients(fn, *arrays, wrt=None, eps=1e-6, atol=1e-6, rtol=1e-5, seed=0):
    """Assert that autograd gradients of ``fn(*tensors)`` match finite differences for inputs ``wrt`` (default all).

    ``fn`` must be deterministic (re-create any random generator inside it). Returns the analytic gradients.
    """
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    wrt = range(len(arrays)) if wrt is None else wrt
    tensors = [Tensor(a.copy(), requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    u = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(u)

    def scalar(arrs):
        with no_grad():
            return float(np.sum(fn(*[Tensor(a) for a in arrs]).numpy() * u))

    grads = []
    for i in wrt:
        expected = numerical_gradient(scalar, arrays, i, eps)
        got = tensors[i].grad
        assert got is not None, f"input {i} received no gradient"
        np.testing.assert_allclose(
            np.asarray(got), expected, atol=atol, rtol=rtol, err_msg=f"gradient of input {i} (shape {arrays[i].shape})"
        )
        grads.append(np.asarray(got))
    return grads


def spread_values(rng, shape, gap=1e-2, scale=1.0) -> np.ndarray:
    """Distinct values at least ``gap`` apart and away from 0 (no ties or kinks for max/relu under finite steps)."""
    n = int(np.prod(shape))
    values = (rng.permutation(n) - n / 2 + 0.5) * gap * scale
    values = np.where(np.abs(values) < gap, np.sign(values + 1e-12) * gap, values)
    return values.reshape(shape).astype(np.float64)
