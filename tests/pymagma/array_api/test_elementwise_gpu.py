"""pymagma.array_api's elementwise kernels on a GPU against NumPy (hypothesis-drawn dtypes, broadcast shapes,
strided views and values); every result comes back through ``numpy.from_dlpack(x, device="cpu")``.  The same
tests run on the simulator from test_kernels_emulated.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(10), deadline=None)

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float32, np.float64]
NUMERIC = INTS + FLOATS
ALL = [np.bool_] + NUMERIC


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x) -> np.ndarray:
    return np.from_dlpack(x, device="cpu")


def values(dtype, shape):
    """Array values of ``dtype``: small integers for the integer dtypes (overflow still reachable in int8/uint8),
    finite floats of moderate size."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elements = st.floats(-1e3, 1e3, width=dtype.itemsize * 8)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        info = np.iinfo(dtype)
        elements = st.integers(max(info.min, -300), min(info.max, 300))
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def device_operand(draw, dtype, shape):
    """(host values, the same values on the device): C-contiguous, reversed or a strided slice of a larger array."""
    a = draw(values(dtype, shape))
    layout = draw(st.sampled_from(["contiguous", "reversed", "strided"]))
    if layout == "reversed" and a.ndim:
        d = xp().asarray(np.ascontiguousarray(a[::-1]))
        return a, d[::-1]
    if layout == "strided" and a.ndim:
        big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
        big[..., ::2] = a
        return a, xp().asarray(big)[..., ::2]
    return a, xp().asarray(a)


@st.composite
def binary_case(draw, dtypes):
    dtype = draw(st.sampled_from(dtypes))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
    (a, da), (b, db) = (draw(device_operand(dtype, s)) for s in shapes.input_shapes)
    return a, b, da, db


ARITHMETIC = ["add", "subtract", "multiply", "floor_divide", "remainder", "maximum", "minimum"]
NUMPY = {"pow": np.power, "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift,
         "bitwise_invert": np.invert}


def numpy_function(name):
    return NUMPY.get(name) or getattr(np, name)


def assert_same(actual, expected, dtype):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if np.dtype(dtype).kind == "f":
        tol = 4e-6 if np.dtype(dtype) == np.float32 else 1e-13
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


@FEW
@given(case=binary_case(NUMERIC), name=st.sampled_from(ARITHMETIC + ["divide", "pow"]))
def test_arithmetic_with_broadcasting_over_strided_operands_equals_numpy(case, name):
    a, b, da, db = case
    if name == "pow" and a.dtype.kind != "f":  # NumPy refuses negative integer exponents; small ones only
        b, db = np.abs(b) % 5, xp().asarray(np.abs(b) % 5)
    if name == "pow" and a.dtype.kind == "f":
        a, da = np.abs(a), xp().abs(da)
    got = host(getattr(xp(), name)(da, db))
    with np.errstate(all="ignore"):
        expected = numpy_function(name)(a, b)
    if name == "divide" and a.dtype.kind != "f":
        expected = np.divide(a.astype(np.float64), b.astype(np.float64))
    assert_same(got, expected, expected.dtype)


@FEW
@given(case=binary_case(ALL), name=st.sampled_from(["equal", "not_equal", "less", "less_equal", "greater",
                                                      "greater_equal"]))
def test_comparisons_return_bool_arrays_equal_to_numpy(case, name):
    a, b, da, db = case
    if a.dtype == np.bool_ and name not in ("equal", "not_equal"):  # the standard orders numbers only
        with pytest.raises(TypeError, match=name):
            getattr(xp(), name)(da, db)
        return
    got = host(getattr(xp(), name)(da, db))
    np.testing.assert_array_equal(got, getattr(np, name)(a, b))
    assert got.dtype == np.bool_


@FEW
@given(case=binary_case([np.bool_] + INTS), name=st.sampled_from(["bitwise_and", "bitwise_or", "bitwise_xor",
                                                                   "logical_and", "logical_or", "logical_xor",
                                                                   "bitwise_left_shift", "bitwise_right_shift"]))
def test_logical_and_bitwise_functions_equal_numpy(case, name):
    a, b, da, db = case
    if (name.startswith("logical") and a.dtype != np.bool_) or (name.endswith("shift") and a.dtype == np.bool_):
        with pytest.raises(TypeError, match=name):
            getattr(xp(), name)(da, db)
        return
    assert_same(host(getattr(xp(), name)(da, db)), numpy_function(name)(a, b), a.dtype)


UNARY_FLOAT = ["sqrt", "exp", "log", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh", "reciprocal"]
UNARY_ANY = ["negative", "positive", "abs", "square", "sign", "floor", "ceil", "trunc", "round"]


@FEW
@given(dtype=st.sampled_from(NUMERIC), shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
       name=st.sampled_from(UNARY_ANY + UNARY_FLOAT + ["isnan", "isinf", "isfinite"]), data=st.data())
def test_unary_functions_equal_numpy(dtype, shape, name, data):
    a, da = data.draw(device_operand(dtype, shape))
    if name in UNARY_FLOAT and np.dtype(dtype).kind != "f":
        with pytest.raises(TypeError, match=name):
            getattr(xp(), name)(da)
        return
    if name in ("sqrt", "log", "log2", "log10"):
        a, da = np.abs(a) + 1, xp().abs(da) + 1
    if name == "log1p":
        a, da = np.abs(a), xp().abs(da)
    if name in ("exp", "expm1"):
        a, da = a / 100, da / 100
    with np.errstate(all="ignore"):
        expected = np.asarray(getattr(np, name)(a))
    assert_same(host(getattr(xp(), name)(da)), expected, expected.dtype)


def test_float_specials_follow_ieee_and_numpy():
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5], np.float64)
    b = np.array([1.0, np.nan, 2.0, 0.0, -0.0, np.inf, 0.5], np.float64)
    da, db = xp().asarray(a), xp().asarray(b)
    for name in ("maximum", "minimum", "add", "multiply", "equal", "less", "not_equal"):
        np.testing.assert_array_equal(host(getattr(xp(), name)(da, db)), getattr(np, name)(a, b))
    for name in ("isnan", "isinf", "isfinite", "signbit", "sign", "abs", "round"):
        np.testing.assert_array_equal(host(getattr(xp(), name)(da)), getattr(np, name)(a))


@FEW
@given(source=st.sampled_from(ALL), target=st.sampled_from(ALL),
       shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), data=st.data())
def test_astype_between_every_pair_equals_numpy(source, target, shape, data):
    a, da = data.draw(device_operand(source, shape))
    if np.dtype(source).kind == "f" and np.dtype(target).kind in "iu":  # out of range: unspecified (C++ and NumPy)
        info = np.iinfo(target)
        a = np.clip(a, info.min, info.max)
        da = xp().asarray(a)
    got = xp().astype(da, target)
    assert got.dtype == np.dtype(target) and got.is_c_contiguous
    np.testing.assert_array_equal(host(got), a.astype(target))
    np.testing.assert_array_equal(host(da.astype(target)), a.astype(target))


def test_operators_scalars_and_in_place_forms():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = xp().asarray(a)
    np.testing.assert_array_equal(host(d * 2 + 1), a * 2 + 1)
    np.testing.assert_array_equal(host(1 - d), 1 - a)
    np.testing.assert_array_equal(host(2.0 ** d[:, :2]), 2.0 ** a[:, :2])
    np.testing.assert_array_equal(host(-d), -a)
    np.testing.assert_array_equal(host((d > 3) & (d < 9)), (a > 3) & (a < 9))
    np.testing.assert_array_equal(host(d == d.T.T), np.ones((3, 4), bool))
    np.testing.assert_array_equal(host(d != 4.0), a != 4.0)
    i = xp().asarray(np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(host(~i), ~np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(host(7 // (i + 1)), 7 // np.arange(1, 6, dtype=np.int32))
    before = d.ptr
    d += xp().asarray(np.ones(4, np.float32))
    d *= 2
    assert d.ptr == before
    np.testing.assert_array_equal(host(d), (a + 1) * 2)
    with pytest.raises(TypeError, match="in-place"):
        i /= 2  # int32 / int -> float64, which the int32 array cannot hold
    for dtype in ALL:  # in place through strided views: written where the view points
        whole = np.arange(12).reshape(3, 4).astype(dtype)
        d = xp().asarray(whole)
        view = d.mT[::-1, ::2]
        if dtype == np.bool_:
            view ^= True
            whole.T[::-1, ::2] ^= True
        else:
            view *= 3
            whole.T[::-1, ::2] *= 3
        np.testing.assert_array_equal(host(d), whole)


def test_python_scalars_from_zero_d_arrays():
    d = xp().asarray(np.array([[1.5, -2.0]], np.float64))
    assert float(d[0, 0]) == 1.5 and int(d[0, 1]) == -2 and bool(d[0, 0] > 1) is True
    assert complex(d[0, 1]) == -2 + 0j
    i = xp().asarray(np.array([3, 4], np.int64))
    assert [0, 1, 2, 3, 4][i[1]] == 4 and int(i[0] * i[1]) == 12
    with pytest.raises(TypeError, match="__index__"):
        [1, 2][d[0, 0]]
    with pytest.raises(TypeError, match="0-d"):
        float(d)


def test_every_cast_pair_and_bool_unary_on_strided_views():
    """Deterministic: each of the 49 casts and the bool unary functions, from a reversed, strided view."""
    base = np.array([0, 1, -1, 2, 100, -128, 127, 3], np.int64)
    for source in ALL:
        a = base.astype(source)
        d = xp().asarray(a[::-1].copy())[::-2]
        for target in ALL:
            if np.dtype(source).kind == "f" and target == np.uint8:  # negative floats to uint8: unspecified
                a, d = np.abs(a), xp().abs(d)
            np.testing.assert_array_equal(host(xp().astype(d, target)), a[::-1][::-2].astype(target))
    flags = np.array([[True, False, True], [False, False, True]])
    d = xp().asarray(flags).mT
    np.testing.assert_array_equal(host(xp().logical_not(d)), ~flags.T)
    np.testing.assert_array_equal(host(~d), ~flags.T)
    np.testing.assert_array_equal(host(d == d[:, :1]), flags.T == flags.T[:, :1])


def test_every_family_in_every_dtype():
    """Deterministic: each kernel family once in each of its dtypes, on a broadcast, transposed operand."""
    base = np.array([[0, 1, 2], [3, 5, 7]])
    for dtype in ALL:
        a = base.astype(dtype)
        d, row = xp().asarray(a).mT, xp().asarray(a[0])
        binary, unary = ("bitwise_xor", "logical_not") if dtype == np.bool_ else ("add", "negative")
        np.testing.assert_array_equal(host(getattr(xp(), binary)(d, row[:2])),
                                      numpy_function(binary)(a.T, a[0, :2]))
        np.testing.assert_array_equal(host(getattr(xp(), unary)(d)), getattr(np, unary)(a.T))
        np.testing.assert_array_equal(host(xp().equal(d, row[1:])), a.T == a[0, 1:])
        if np.dtype(dtype).kind == "f":
            with np.errstate(divide="ignore", invalid="ignore"):
                np.testing.assert_array_equal(host(xp().isfinite(d / 0)), np.isfinite(a.T / 0))
