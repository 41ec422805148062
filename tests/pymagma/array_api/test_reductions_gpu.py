"""pymagma.array_api's reductions, scans, searching, sorting and set functions (``kernels/array_api_reduce.cu``) on
a GPU against NumPy: hypothesis-drawn dtypes, shapes (empty ones too), axes, strided views and NaNs; every result
comes back through ``numpy.from_dlpack(x, device="cpu")``.  The same tests run on the simulator from
test_kernels_emulated.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(12), deadline=None)

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float32, np.float64]
NUMERIC = INTS + FLOATS
ALL = [np.bool_] + NUMERIC


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x) -> np.ndarray:
    return np.from_dlpack(x, device="cpu")


def values(dtype, shape, nan=True):
    """Values of ``dtype``: small integers (overflow reachable in int8/uint8 sums of the element type), floats
    from a small set (ties) or moderate ones, NaN and infinities when ``nan``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elements = st.sampled_from([0.0, -0.0, 1.0, -2.5, 3.0]) | st.floats(-1e3, 1e3, width=dtype.itemsize * 8)
        if nan:
            elements = elements | st.sampled_from([math.nan, math.inf, -math.inf])
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        info = np.iinfo(dtype)
        elements = st.integers(max(info.min, -100), min(info.max, 100))
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def operand(draw, dtypes=ALL, min_dims=0, max_dims=3, min_side=0, nan=True):
    """(host values, the same values on the device as a C-contiguous, reversed or strided array)."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=4))
    a = draw(values(dtype, shape, nan))
    layout = draw(st.sampled_from(["contiguous", "reversed", "strided"]))
    if layout == "reversed" and a.ndim:
        return a, xp().asarray(np.ascontiguousarray(a[::-1]), copy=True)[::-1]
    if layout == "strided" and a.ndim:
        big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
        big[..., ::2] = a
        return a, xp().asarray(big, copy=True)[..., ::2]
    return a, xp().asarray(a, dtype=a.dtype, copy=True)


def an_axis(data, ndim: int, tuples=True):
    """None, an int (negative too) or a tuple of distinct axes."""
    choices = st.none()
    if ndim:
        choices = choices | st.integers(-ndim, ndim - 1)
        if tuples:
            choices = choices | st.lists(st.integers(0, ndim - 1), unique=True).map(
                lambda axes: tuple(a - ndim if a % 2 else a for a in axes))
    return data.draw(choices)


def close(got, expected, dtype):
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    if np.dtype(dtype).kind == "f":
        rtol = 1e-6 if np.dtype(dtype) == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def _accumulator(dtype):
    """The standard's (and NumPy's) sum dtype: int64 for bool and signed integers, uint64 for unsigned ones."""
    return {"b": np.int64, "i": np.int64, "u": np.uint64}.get(dtype.kind, dtype)


def _wide(a):
    """The plain reference's accumulation: int64 for bool and integers, float64 for floats."""
    return a.astype(np.int64 if a.dtype.kind in "biu" else np.float64)


@FEW
@given(pair=operand(), data=st.data(), keepdims=st.booleans())
def test_sum_prod_min_max_count_nonzero_equal_numpy(pair, data, keepdims):
    a, d = pair
    axis = an_axis(data, a.ndim)
    acc = _accumulator(a.dtype)
    for name in ("sum", "prod"):
        got = host(getattr(xp(), name)(d, axis=axis, keepdims=keepdims))
        expected = getattr(np, name)(_wide(a), axis=axis, keepdims=keepdims).astype(acc)
        close(got, expected, acc)
    reduced = range(a.ndim) if axis is None else [x % a.ndim for x in np.atleast_1d(axis)]
    for name in ("min", "max"):
        if any(a.shape[x] == 0 for x in reduced):
            with pytest.raises(ValueError, match="empty"):
                getattr(xp(), name)(d, axis=axis, keepdims=keepdims)
        else:
            close(host(getattr(xp(), name)(d, axis=axis, keepdims=keepdims)),
                  getattr(np, name)(a, axis=axis, keepdims=keepdims), a.dtype)
    got = host(xp().count_nonzero(d, axis=axis, keepdims=keepdims))
    close(got, np.asarray(np.count_nonzero(a, axis=axis, keepdims=keepdims), np.int64), np.int64)


@FEW
@given(pair=operand(FLOATS), data=st.data(), keepdims=st.booleans(),
       correction=st.sampled_from([0, 1, 0.5, 2.0]))
def test_mean_var_std_equal_numpy(pair, data, keepdims, correction):
    a, d = pair
    axis = an_axis(data, a.ndim)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of an empty slice
        mean = np.mean(a.astype(np.float64), axis=axis, keepdims=keepdims)
        var = np.var(a.astype(np.float64), axis=axis, keepdims=keepdims, ddof=correction)
    n = a.size if axis is None else math.prod(a.shape[x] for x in np.atleast_1d(axis))
    if n - correction <= 0:  # the standard's rule (NumPy gives inf where the squares do not sum to 0)
        var = np.full_like(var, math.nan)
    close(host(xp().mean(d, axis=axis, keepdims=keepdims)), np.asarray(mean, a.dtype), a.dtype)
    close(host(xp().var(d, axis=axis, keepdims=keepdims, correction=correction)), np.asarray(var, a.dtype), a.dtype)
    close(host(xp().std(d, axis=axis, keepdims=keepdims, correction=correction)),
          np.sqrt(np.asarray(var, a.dtype)), a.dtype)


@FEW
@given(pair=operand(min_dims=1), data=st.data(), include_initial=st.booleans(),
       dtype=st.sampled_from([None, np.float64, np.int32]))
def test_cumulative_sum_and_prod_equal_numpy(pair, data, include_initial, dtype):
    a, d = pair
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1)) if a.ndim > 1 else data.draw(st.none() | st.just(0))
    if dtype is not None and (np.dtype(dtype).kind != "f") and a.dtype.kind == "f":
        dtype = np.float32
    acc = np.dtype(dtype) if dtype is not None else np.dtype(_accumulator(a.dtype))
    along = 0 if axis is None else axis
    for name, ref, initial in (("cumulative_sum", np.cumsum, 0), ("cumulative_prod", np.cumprod, 1)):
        with np.errstate(all="ignore"):
            expected = ref(a.astype(acc), axis=along, dtype=acc)
        if include_initial:
            shape = list(a.shape)
            shape[along] = 1
            expected = np.concatenate([np.full(shape, initial, acc), expected], axis=along)
        kw = {} if dtype is None else {"dtype": dtype}
        got = host(getattr(xp(), name)(d, axis=axis, include_initial=include_initial, **kw))
        close(got, expected, acc)


@FEW
@given(pair=operand(NUMERIC), data=st.data(), keepdims=st.booleans())
def test_argmax_argmin_first_occurrence_and_nan_as_numpy(pair, data, keepdims):
    a, d = pair
    axis = an_axis(data, a.ndim, tuples=False)
    for name in ("argmax", "argmin"):
        empty = a.size == 0 if axis is None else a.shape[axis] == 0
        if empty:
            with pytest.raises(ValueError):
                getattr(xp(), name)(d, axis=axis, keepdims=keepdims)
            continue
        got = host(getattr(xp(), name)(d, axis=axis, keepdims=keepdims))
        expected = np.asarray(getattr(np, name)(a, axis=axis, keepdims=keepdims), np.int64)
        close(got, expected, np.int64)


def _stable_order(row, descending):
    """The stable order of one row written plainly: NaNs last in both directions, ties in their order."""
    items = [v.item() for v in row]
    return sorted(range(len(items)), key=lambda i: (items[i] != items[i],
                                                    -items[i] if descending else items[i]))


@FEW
@given(pair=operand(min_dims=1), data=st.data(), descending=st.booleans())
def test_sort_and_argsort_are_stable_nans_last(pair, data, descending):
    a, d = pair
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    moved = np.moveaxis(a, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, moved.shape[-1])
    order = np.array([_stable_order(r, descending) for r in rows], np.int64).reshape(moved.shape)
    expected_idx = np.moveaxis(order, -1, axis)
    expected = np.take_along_axis(a, expected_idx, axis=axis)
    close(host(xp().argsort(d, axis=axis, descending=descending)), expected_idx, np.int64)
    got = host(xp().sort(d, axis=axis, descending=descending, stable=True))
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, expected)


@FEW
@given(data=st.data(), dtype=st.sampled_from(ALL))
def test_where_broadcasts_three_operands_and_scalars(data, dtype):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3)).input_shapes
    c = data.draw(values(np.bool_, shapes[0]))
    a, b = data.draw(values(dtype, shapes[1])), data.draw(values(dtype, shapes[2]))
    d = xp().asarray(a, copy=True)
    got = host(xp().where(xp().asarray(c, copy=True), d, xp().asarray(b, copy=True)))
    np.testing.assert_array_equal(got, np.where(c, a, b))
    assert got.dtype == a.dtype
    scalar = True if a.dtype == np.bool_ else 7
    got = host(xp().where(xp().asarray(c, copy=True), scalar, d))
    np.testing.assert_array_equal(got, np.where(c, np.asarray(scalar, a.dtype), a))
    assert got.dtype == a.dtype


@FEW
@given(pair=operand(min_dims=1))
def test_nonzero_equals_numpy(pair):
    a, d = pair
    got = xp().nonzero(d)
    expected = np.nonzero(a)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        close(host(g), e.astype(np.int64), np.int64)


@FEW
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), side=st.sampled_from(["left", "right"]),
       use_sorter=st.booleans())
def test_searchsorted_equals_numpy(data, dtype, side, use_sorter):
    raw = data.draw(values(dtype, st.integers(0, 6)))
    x2 = data.draw(values(dtype, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)))
    if use_sorter:
        sorter = np.argsort(raw, kind="stable")
        got = xp().searchsorted(xp().asarray(raw, copy=True), xp().asarray(x2, copy=True), side=side,
                                sorter=xp().asarray(sorter, copy=True))
        expected = np.searchsorted(raw, x2, side=side, sorter=sorter)
    else:
        x1 = np.sort(raw)
        got = xp().searchsorted(xp().asarray(x1, copy=True)[::1], xp().asarray(x2, copy=True), side=side)
        expected = np.searchsorted(x1, x2, side=side)
    close(host(got), np.asarray(expected, np.int64), np.int64)


@FEW
@given(pair=operand())
def test_unique_functions_equal_numpy_each_nan_distinct(pair):
    a, d = pair
    values_, index, inverse, counts = np.unique(a.ravel(), return_index=True, return_inverse=True,
                                                return_counts=True, equal_nan=False)
    got = xp().unique_all(d)
    assert got._fields == ("values", "indices", "inverse_indices", "counts")
    np.testing.assert_array_equal(host(got.values), values_)
    assert host(got.values).dtype == a.dtype
    close(host(got.indices), index.astype(np.int64), np.int64)
    close(host(got.inverse_indices), inverse.reshape(a.shape).astype(np.int64), np.int64)
    close(host(got.counts), counts.astype(np.int64), np.int64)
    c = xp().unique_counts(d)
    assert c._fields == ("values", "counts")
    np.testing.assert_array_equal(host(c.counts), counts)
    i = xp().unique_inverse(d)
    assert i._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(host(i.inverse_indices), inverse.reshape(a.shape))
    np.testing.assert_array_equal(host(xp().unique_values(d)), values_)


@FEW
@given(pair=operand(NUMERIC + [np.bool_], min_dims=1, nan=False), data=st.data(), n=st.integers(0, 3),
       ends=st.sampled_from(["none", "arrays", "scalars"]))
def test_diff_equals_numpy(pair, data, n, ends):
    a, d = pair
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    kw, ref = {}, {}
    if ends == "arrays":
        shape = list(a.shape)
        shape[axis] = 2
        pre = data.draw(values(a.dtype, tuple(shape), nan=False))
        kw, ref = {"prepend": xp().asarray(pre, copy=True)}, {"prepend": pre}
    elif ends == "scalars" and a.dtype != np.bool_:
        kw, ref = {"append": 1}, {"append": np.asarray(1, a.dtype)}  # the standard: the scalar takes x's dtype
    got = host(xp().diff(d, axis=axis, n=n, **kw))
    if n == 0:  # the standard's size rule (N1 - n along axis): the joined array; NumPy returns x alone
        one = list(a.shape)
        one[axis] = 1
        ends_ = {k: v if v.ndim else np.full(tuple(one), v, a.dtype) for k, v in ref.items()}
        expected = np.concatenate([v for v in (ends_.get("prepend"), a, ends_.get("append")) if v is not None],
                                  axis=axis)
    else:
        expected = np.diff(a, axis=axis, n=n, **ref)
    close(got, expected, a.dtype)


def test_every_kernel_in_every_dtype():
    """Each family of array_api_reduce.cu once in each of the namespace's seven dtypes (bool included: NumPy's
    meaning), against NumPy."""
    a = np.array([[3, 0, 2], [1, 2, 0]])
    for dtype in ALL:
        h = a.astype(dtype)
        d = xp().asarray(h, copy=True)
        np.testing.assert_array_equal(host(xp().sum(d, axis=1, dtype=dtype)), np.sum(h, axis=1, dtype=dtype))
        np.testing.assert_array_equal(host(xp().max(d, axis=0)), np.max(h, axis=0))
        np.testing.assert_array_equal(host(xp().argmax(d, axis=1)), np.argmax(h, axis=1))
        np.testing.assert_array_equal(host(xp().cumulative_sum(d, axis=1, dtype=dtype)),
                                      np.cumsum(h, axis=1, dtype=dtype))
        np.testing.assert_array_equal(host(xp().sort(d, axis=1)), np.sort(h, axis=1))
        np.testing.assert_array_equal(host(xp().where(d != d[:1], d, d[1:])), np.where(h != h[:1], h, h[1:]))
        x1 = np.sort(h[0])
        sorter = np.array([2, 1, 0])
        got = xp().searchsorted(xp().asarray(x1[::-1], copy=True), d[1], sorter=xp().asarray(sorter))
        np.testing.assert_array_equal(host(got), np.searchsorted(x1, h[1]))
        np.testing.assert_array_equal(host(xp().unique_counts(d).counts), np.unique(h, return_counts=True)[1])
    np.testing.assert_array_equal(host(xp().nonzero(xp().asarray(a, copy=True))[1]), np.nonzero(a)[1])


def test_empty_axes_identities_and_errors():
    d = xp().asarray(np.zeros((0, 3), np.float32), copy=True)
    assert host(xp().sum(d, axis=0)).tolist() == [0.0] * 3 and host(xp().prod(d, axis=0)).tolist() == [1.0] * 3
    assert host(xp().sum(d)).dtype == np.float32 and host(xp().prod(d)).shape == ()
    assert np.isnan(host(xp().mean(d, axis=0))).all() and host(xp().max(d, axis=1)).shape == (0,)
    with pytest.raises(ValueError, match="empty"):
        xp().max(d, axis=0)
    with pytest.raises(ValueError, match="empty"):
        xp().argmin(d)
    assert host(xp().sum(xp().asarray([True, True, False]))).dtype == np.int64
    assert host(xp().sum(xp().asarray(np.array([200, 100], np.uint8)))).tolist() == 300
    assert host(xp().sum(xp().asarray(np.array([100, 100], np.int8)), dtype=xp().int8)).tolist() == -56
    assert [host(t).shape for t in xp().nonzero(d)] == [(0,), (0,)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_nans_anywhere_follow_numpy(dtype):
    """A NaN in every position of a row (first, middle, last), through each function that treats NaN specially."""
    a = np.array([[np.nan, 1.0, 3.0, 1.0], [2.0, np.nan, 0.5, 2.0], [4.0, -1.0, 4.0, np.nan], [1.0, 2.0, 1.0, 0.0]],
                 dtype)
    d = xp().asarray(a, copy=True)
    for axis in (0, 1, None):
        for name in ("min", "max", "argmin", "argmax", "sum", "prod", "mean"):
            got = host(getattr(xp(), name)(d, axis=axis))
            np.testing.assert_array_equal(got, getattr(np, name)(a, axis=axis).astype(got.dtype), err_msg=name)
    np.testing.assert_array_equal(host(xp().sort(d, axis=0)), np.sort(a, axis=0))
    np.testing.assert_array_equal(host(xp().argsort(d, axis=1)), np.argsort(a, axis=1, kind="stable"))
    np.testing.assert_array_equal(host(xp().unique_values(d)), np.unique(a, equal_nan=False))


def test_bad_arguments_are_typed_errors():
    d = xp().asarray(np.arange(6.0).reshape(2, 3), copy=True)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of range"):
        xp().sum(d, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        xp().prod(d, axis=(1, -1))
    with pytest.raises(TypeError, match="real floating"):
        xp().mean(xp().asarray([1, 2]))
    with pytest.raises(ValueError, match="correction"):
        xp().var(d, correction=-1)
    with pytest.raises(ValueError, match="axis is required"):
        xp().cumulative_sum(d)
    with pytest.raises(TypeError, match="axis must be an int or None"):
        xp().argmax(d, axis=(0, 1))
    with pytest.raises(ValueError, match="1-D"):
        xp().searchsorted(d, d)
    with pytest.raises(ValueError, match="side"):
        xp().searchsorted(d[0], d, side="middle")
    with pytest.raises(ValueError, match="0-d"):
        xp().nonzero(xp().asarray(1.0))
    with pytest.raises(TypeError, match="DeviceArray"):
        xp().sort(np.arange(3))
    with pytest.raises(ValueError, match="do not broadcast"):
        xp().where(xp().asarray([True, False, True]), d, xp().asarray([1.0, 2.0]))
    assert host(xp().argmax(xp().asarray(3.0))).tolist() == 0 and host(xp().sum(xp().asarray(3), axis=())) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_long_reductions_equal_numpy(dtype):
    """At least SPLIT elements per output (not a multiple of PARTS): the two-pass path, on a transposed view."""
    from pymagma.kernels import array_api_reduce as _reduce_kernels

    n = _reduce_kernels.SPLIT + 37
    a = (np.arange(2 * n).reshape(2, n) % 23 - 11).astype(dtype)
    a[1, n // 3] = 40
    d = xp().asarray(a, copy=True).T
    for axis in (None, 0):
        for name in ("sum", "min", "max", "prod") + (("mean",) if a.dtype.kind == "f" else ()):
            got = host(getattr(xp(), name)(d, axis=axis))
            acc = _accumulator(a.dtype) if name in ("sum", "prod") else a.dtype
            with np.errstate(all="ignore"):
                expected = getattr(np, name)(a.T.astype(np.float64 if a.dtype.kind == "f" else acc), axis=axis)
            close(got, np.asarray(expected).astype(acc), acc)
