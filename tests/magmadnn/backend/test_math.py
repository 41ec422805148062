"""The op set's element-wise math (``ops/math.py``) on every backend: each function against Python's math module
element by element, each derivative against PyTorch's autograd, the comparisons, logic, where, pow, remainder,
conversions and max/min/prod reductions against Python and PyTorch."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

from magmadnn.backend.ops.math import COMPARISONS, LOGIC, MATH_FUNCTIONS
from tests.magmadnn.backend._conformance import elementwise_reference, get, put, tol

torch = pytest.importorskip("torch")

#: kind -> (Python's function of one float, PyTorch's function, the domain drawn from)
FUNCTIONS = {
    "sin": (math.sin, torch.sin, (-3, 3)), "cos": (math.cos, torch.cos, (-3, 3)), "tan": (math.tan, torch.tan, (-1, 1)),
    "asin": (math.asin, torch.asin, (-0.9, 0.9)), "acos": (math.acos, torch.acos, (-0.9, 0.9)),
    "atan": (math.atan, torch.atan, (-3, 3)), "sinh": (math.sinh, torch.sinh, (-3, 3)),
    "cosh": (math.cosh, torch.cosh, (-3, 3)), "asinh": (math.asinh, torch.asinh, (-3, 3)),
    "acosh": (math.acosh, torch.acosh, (1.1, 4)), "atanh": (math.atanh, torch.atanh, (-0.9, 0.9)),
    "exp": (math.exp, torch.exp, (-3, 3)), "log": (math.log, torch.log, (0.1, 4)),
    "sqrt": (math.sqrt, torch.sqrt, (0.1, 4)), "reciprocal": (lambda v: 1 / v, torch.reciprocal, (0.5, 3)),
    "abs": (abs, torch.abs, (-3, 3)), "tanh": (math.tanh, torch.tanh, (-3, 3)),
    "erf": (math.erf, torch.erf, (-3, 3)), "negative": (operator.neg, torch.neg, (-3, 3)),
    "floor": (math.floor, torch.floor, (-3, 3)), "ceil": (math.ceil, torch.ceil, (-3, 3)),
    "round": (round, torch.round, (-3, 3)), "sign": (lambda v: float(np.sign(v)), torch.sign, (-3, 3)),
    "trunc": (math.trunc, torch.trunc, (-3, 3)),
}


def _draw(kind, dtype, seed=0, shape=(3, 5)):
    low, high = FUNCTIONS[kind][2]
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def test_every_function_has_a_case():
    assert set(FUNCTIONS) == set(MATH_FUNCTIONS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_math_forward_matches_python(xp, kind, dtype):
    a = _draw(kind, dtype)
    got = xp.math_forward(put(xp, a), kind)
    assert got.dtype == a.dtype and got.shape == a.shape
    want = elementwise_reference(FUNCTIONS[kind][0], a)
    np.testing.assert_allclose(get(xp, got), want, **tol(dtype))


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_math_backward_matches_torch(xp, kind):
    x, dy = _draw(kind, np.float64, 1), np.random.default_rng(2).standard_normal((3, 5))
    xd = put(xp, x)
    got = get(xp, xp.math_backward(put(xp, dy), xd, xp.math_forward(xd, kind), kind))
    t = torch.tensor(x, requires_grad=True)
    FUNCTIONS[kind][1](t).backward(torch.tensor(dy))
    np.testing.assert_allclose(got, t.grad.numpy(), **tol(np.float64))


@pytest.mark.parametrize("kind", ["abs", "negative", "sign"])
def test_math_forward_keeps_integers(xp, kind):
    a = np.array([[-3, 0, 2]], np.int64)
    got = get(xp, xp.math_forward(put(xp, a), kind))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[FUNCTIONS[kind][0](int(v)) for v in a[0]]])


def _pair(seed=3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.uniform(-3, 3, (2, 3, 4)).astype(dtype), rng.uniform(-3, 3, (3, 1)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_minimum_where_broadcast(xp, dtype):
    a, b = _pair(dtype=dtype)
    cond = np.random.default_rng(4).random((1, 3, 4)) > 0.5
    da, db = put(xp, a, b)
    np.testing.assert_array_equal(get(xp, xp.maximum(da, db)), elementwise_reference(max, a, b).astype(dtype))
    np.testing.assert_array_equal(get(xp, xp.minimum(da, db)), elementwise_reference(min, a, b).astype(dtype))
    got = get(xp, xp.where(put(xp, cond), da, db))
    np.testing.assert_array_equal(got, elementwise_reference(lambda c, u, v: u if c else v, cond, a, b).astype(dtype))


def test_pow_and_remainder(xp):
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.2, 3, (3, 4)), rng.uniform(-2, 2, (4,))
    np.testing.assert_allclose(get(xp, xp.pow(*put(xp, a, b))), elementwise_reference(math.pow, a, b),
                               **tol(np.float64))
    a, b = rng.uniform(-5, 5, (3, 4)), np.array([1.5, -0.75, 2.0, -3.0])
    np.testing.assert_allclose(get(xp, xp.remainder(*put(xp, a, b))), elementwise_reference(operator.mod, a, b),
                               **tol(np.float64))
    ints = np.array([[-7, 7, 5], [3, -2, 0]], np.int64), np.array([3, -3, 2], np.int64)
    got = get(xp, xp.remainder(*put(xp, *ints)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[a_ % b_ for a_, b_ in zip(row, ints[1])] for row in ints[0].tolist()])


_PY_COMPARE = {"equal": operator.eq, "not_equal": operator.ne, "less": operator.lt, "less_equal": operator.le,
               "greater": operator.gt, "greater_equal": operator.ge}
_PY_LOGIC = {"logical_and": lambda u, v: bool(u) and bool(v), "logical_or": lambda u, v: bool(u) or bool(v),
             "logical_xor": lambda u, v: bool(u) != bool(v), "bitwise_and": operator.and_,
             "bitwise_or": operator.or_, "bitwise_xor": operator.xor}


@pytest.mark.parametrize("kind", COMPARISONS)
def test_compare(xp, kind):
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = np.array([2.0, 2.0, 2.0])
    got = get(xp, xp.compare(*put(xp, a, b), kind))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, [[_PY_COMPARE[kind](u, v) for u, v in zip(row, b)] for row in a.tolist()])


@pytest.mark.parametrize("kind", LOGIC)
def test_logical_and_not(xp, kind):
    if kind.startswith("bitwise"):
        a, b = np.array([[5, 3, 12]], np.int64), np.array([[6, 1, 10]], np.int64)
    else:
        a, b = np.array([[True, True, False, False]]), np.array([[True, False, True, False]])
    got = get(xp, xp.logical(*put(xp, a, b), kind))
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, [[_PY_LOGIC[kind](int(u), int(v)) for u, v in zip(a[0], b[0])]])
    if not kind.startswith("bitwise"):
        np.testing.assert_array_equal(get(xp, xp.logical_not(put(xp, a))), ~a)


def test_astype(xp):
    a = np.array([[-1.75, -0.5, 0.0, 0.5, 2.5]])
    d = put(xp, a)
    for dtype, want in ((np.int64, [[math.trunc(v) for v in a[0]]]), (np.bool_, [[v != 0 for v in a[0]]]),
                        (np.float32, a.astype(np.float32))):
        got = get(xp, xp.astype(d, dtype))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(get(xp, xp.astype(put(xp, np.array([3, -2], np.int64)), np.float64)), [3.0, -2.0])


@pytest.mark.parametrize("kind", ["max", "min", "prod"])
@pytest.mark.parametrize("axes", [(0,), (1, 2), (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_by_matches_torch(xp, kind, axes, keepdims):
    a = np.random.default_rng(6).uniform(0.5, 1.5, (2, 3, 4)) * np.sign(np.random.default_rng(7).standard_normal(
        (2, 3, 4)))
    got = get(xp, xp.reduce_by(put(xp, a), kind, axes, keepdims))
    t = torch.tensor(a)
    if kind == "prod":
        for axis in sorted(axes, reverse=True):
            t = t.prod(axis, keepdim=keepdims) if keepdims else t.prod(axis)
        want = t
    else:
        want = getattr(torch, "amax" if kind == "max" else "amin")(t, dim=axes, keepdim=keepdims)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got, want.numpy(), **tol(np.float64))
