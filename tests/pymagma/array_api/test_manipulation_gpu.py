"""pymagma.array_api's later elementwise functions, manipulation functions and indexing on a GPU against NumPy
(hypothesis-drawn dtypes, shapes, broadcasting, empty arrays, strided and reversed views); inputs made with
``xp.asarray(numpy_array, copy=True)``, results read back with ``numpy.from_dlpack(x, device="cpu")``.  The same
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

ALL = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float32,
       np.float64]
FLOATS = [np.float32, np.float64]


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x) -> np.ndarray:
    return np.from_dlpack(x, device="cpu")


def values(dtype, shape, low=-100, high=100):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elements = st.floats(float(dtype.type(low)), float(dtype.type(high)), width=dtype.itemsize * 8)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        info = np.iinfo(dtype)
        elements = st.integers(max(info.min, -100), min(info.max, 100))
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def operand(draw, dtype, shape, low=-100, high=100):
    """(host values, the same values on the device): C-contiguous, reversed, transposed or a strided slice."""
    a = draw(values(dtype, shape, low, high))
    layout = draw(st.sampled_from(["contiguous", "reversed", "transposed", "strided"]))
    if layout == "reversed" and a.ndim:
        return a, xp().asarray(np.ascontiguousarray(a[::-1]), copy=True)[::-1]
    if layout == "transposed" and a.ndim >= 2:
        return a, xp().asarray(np.ascontiguousarray(a.T), copy=True).T
    if layout == "strided" and a.ndim:
        big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
        big[..., ::2] = a
        return a, xp().asarray(big, copy=True)[..., ::2]
    return a, xp().asarray(a, copy=True)


def same(got, expected):
    got = host(got)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    if expected.dtype.kind == "f":
        tol = 2e-6 if expected.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
NONEMPTY = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
# name -> (NumPy function, domain of the drawn values)
UNARY = {"acos": (np.arccos, (-1, 1)), "asin": (np.arcsin, (-1, 1)), "atan": (np.arctan, (-50, 50)),
         "acosh": (np.arccosh, (1, 50)), "asinh": (np.arcsinh, (-50, 50)), "atanh": (np.arctanh, (-0.99, 0.99)),
         "cosh": (np.cosh, (-20, 20)), "sinh": (np.sinh, (-20, 20))}
BINARY = {"atan2": np.arctan2, "copysign": np.copysign, "hypot": np.hypot, "logaddexp": np.logaddexp,
          "nextafter": np.nextafter}


@FEW
@given(dtype=st.sampled_from(FLOATS), shape=SHAPES, name=st.sampled_from(sorted(UNARY)), data=st.data())
def test_inverse_and_hyperbolic_functions_equal_numpy(dtype, shape, name, data):
    function, (low, high) = UNARY[name]
    a, d = data.draw(operand(dtype, shape, low, high))
    same(getattr(xp(), name)(d), np.asarray(function(a)))


@FEW
@given(dtype=st.sampled_from(FLOATS), shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
       name=st.sampled_from(sorted(BINARY)), data=st.data())
def test_two_argument_float_functions_broadcast_and_equal_numpy(dtype, shapes, name, data):
    (a, da), (b, db) = (data.draw(operand(dtype, s)) for s in shapes.input_shapes)
    same(getattr(xp(), name)(da, db), np.asarray(BINARY[name](a, b)))


def test_float_function_specials_and_dtype_errors():
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -3.0])
    b = np.array([1.0, np.nan, np.inf, 0.0, -0.0, -np.inf, np.nan])
    da, db = xp().asarray(a, copy=True), xp().asarray(b, copy=True)
    with np.errstate(all="ignore"):
        for name, function in BINARY.items():
            np.testing.assert_array_equal(host(getattr(xp(), name)(da, db)), function(a, b))
        for name, (function, _) in UNARY.items():
            np.testing.assert_array_equal(host(getattr(xp(), name)(da)), function(a))
    assert host(xp().nextafter(xp().asarray(np.float32(1)), xp().asarray(np.float32(2)))) == np.nextafter(
        np.float32(1), np.float32(2))
    # the standard's special cases of floor_divide (NumPy gives -1 for 1 // -inf) and signbit of a negative NaN
    inf = np.inf
    a = np.array([inf, inf, -inf, 1.0, -1.0, -0.0, 0.0, 7.0, -7.0, np.nan])
    b = np.array([2.0, -2.0, 2.0, -inf, inf, 2.0, -2.0, 2.0, 2.0, 1.0])
    expected = np.array([inf, -inf, -inf, -0.0, -0.0, -0.0, -0.0, 3.0, -4.0, np.nan])
    got = host(xp().asarray(a, copy=True) // xp().asarray(b, copy=True))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got[:-1]), np.signbit(expected[:-1]))
    assert host(xp().signbit(xp().asarray(np.array([-np.nan, np.nan]), copy=True))).tolist() == [True, False]
    for name in ("acos", "atan2", "hypot"):
        with pytest.raises(TypeError, match=name):
            getattr(xp(), name)(*[xp().asarray([1, 2])] * (2 if name != "acos" else 1))


@FEW
@given(dtype=st.sampled_from([np.int8, np.int32, np.int64, np.float32, np.float64]), shape=SHAPES,
       bounds=st.sampled_from(["scalars", "arrays", "low only", "high only", "none"]), data=st.data())
def test_clip_equals_numpy(dtype, shape, bounds, data):
    a, d = data.draw(operand(dtype, shape))
    low, high = -10, 20
    if bounds == "arrays":
        low_h = data.draw(values(dtype, shape[-1:] if shape else (), -20, 0))
        high_h = data.draw(values(dtype, (), 0, 30))
        got = xp().clip(d, min=xp().asarray(low_h, copy=True), max=xp().asarray(high_h, copy=True))
        expected = np.clip(a, low_h, high_h)
    else:
        kwargs = {"scalars": dict(min=low, max=high), "low only": dict(min=low), "high only": dict(max=high),
                  "none": {}}[bounds]
        got = xp().clip(d, **kwargs)
        expected = np.clip(a, kwargs.get("min"), kwargs.get("max")) if kwargs else a.copy()
    same(got, expected.astype(dtype))


def test_clip_nan_and_real_conj_imag():
    d = xp().asarray(np.array([np.nan, -5.0, 5.0]), copy=True)
    np.testing.assert_array_equal(host(xp().clip(d, 0.0, 1.0)), [np.nan, 0.0, 1.0])
    np.testing.assert_array_equal(host(xp().clip(d, min=float("nan"))), [np.nan] * 3)
    r = xp().real(d)
    assert r.ptr != d.ptr and r.dtype == np.float64
    np.testing.assert_array_equal(host(r), host(d))
    np.testing.assert_array_equal(host(xp().conj(xp().asarray(np.array([1, -2], np.int8)))), [1, -2])
    with pytest.raises(TypeError, match="complex"):
        xp().imag(d)
    with pytest.raises(TypeError, match="x's dtype|bound"):
        xp().clip(d, min=xp().asarray(np.array([0.0], np.float32)))


# ---------------------------------------------------------------------------------------------- manipulation
@FEW
@given(dtypes=st.sampled_from([(np.float64, np.float64), (np.int8, np.int32), (np.float32, np.float64),
                               (np.bool_, np.bool_), (np.uint8, np.uint8)]),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), data=st.data())
def test_concat_and_stack_equal_numpy(dtypes, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    (a, da), (b, db) = data.draw(operand(dtypes[0], shape)), data.draw(operand(dtypes[1], tuple(other)))
    same(xp().concat([da, db], axis=axis), np.concatenate([a, b], axis=axis))
    same(xp().concat((da, db, da), axis=None), np.concatenate([a.ravel(), b.ravel(), a.ravel()]))
    (c, dc) = data.draw(operand(dtypes[1], shape))
    new = data.draw(st.integers(-len(shape) - 1, len(shape)))
    same(xp().stack([da, dc], axis=new), np.stack([a, c], axis=new))


@FEW
@given(dtype=st.sampled_from(ALL), shape=NONEMPTY, data=st.data())
def test_views_equal_numpy(dtype, shape, data):
    """permute_dims, moveaxis, expand_dims, squeeze, flip, broadcast_to, broadcast_arrays, unstack."""
    a, d = data.draw(operand(dtype, shape))
    n = a.ndim
    perm = data.draw(st.permutations(range(n)))
    same(xp().permute_dims(d, perm), np.transpose(a, perm))
    src, dst = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-n, n - 1))
    same(xp().moveaxis(d, src, dst), np.moveaxis(a, src, dst))
    same(xp().moveaxis(d, (0, -1), (-1, 0)) if n > 1 else d, np.moveaxis(a, (0, -1), (-1, 0)) if n > 1 else a)
    where = data.draw(st.integers(-n - 1, n))
    expanded = xp().expand_dims(d, axis=where)
    same(expanded, np.expand_dims(a, where))
    same(xp().squeeze(expanded, axis=where), a)
    flip_axis = data.draw(st.none() | st.integers(-n, n - 1) | st.just(tuple(range(n))))
    same(xp().flip(d, axis=flip_axis), np.flip(a, axis=flip_axis))
    target = (2, *[1 if s == 1 else s for s in shape])
    target = tuple(data.draw(st.sampled_from([t, 3])) if t == 1 else t for t in target)
    same(xp().broadcast_to(d, target), np.broadcast_to(a, target))
    one = xp().asarray(np.ones(shape[-1:], dtype), copy=True)
    for got, expected in zip(xp().broadcast_arrays(d, one), np.broadcast_arrays(a, np.ones(shape[-1:], dtype))):
        same(got, expected)
    axis = data.draw(st.integers(-n, n - 1))
    parts = xp().unstack(d, axis=axis)
    assert len(parts) == a.shape[axis]
    for got, expected in zip(parts, np.moveaxis(a, axis, 0)):
        same(got, expected)


@FEW
@given(dtype=st.sampled_from(ALL), shape=SHAPES, data=st.data())
def test_roll_tile_repeat_equal_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    n = a.ndim
    shift = data.draw(st.integers(-7, 7))
    same(xp().roll(d, shift), np.roll(a, shift))
    if n:
        axes = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3))
        shifts = data.draw(st.lists(st.integers(-5, 5), min_size=len(axes), max_size=len(axes)))
        same(xp().roll(d, tuple(shifts), axis=tuple(axes)), np.roll(a, tuple(shifts), axis=tuple(axes)))
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)))
    same(xp().tile(d, reps), np.tile(a, reps))
    r = data.draw(st.integers(0, 3))
    same(xp().repeat(d, r), np.repeat(a, r))
    if n:
        axis = data.draw(st.integers(-n, n - 1))
        counts = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=a.shape[axis], max_size=a.shape[axis])),
                            np.int64)
        same(xp().repeat(d, xp().asarray(counts, copy=True), axis=axis), np.repeat(a, counts, axis=axis))
        same(xp().repeat(d, r, axis=axis), np.repeat(a, r, axis=axis))


@FEW
@given(dtype=st.sampled_from(ALL[1:]), shape=NONEMPTY, data=st.data())
def test_diff_with_array_ends_equals_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    axis, n = data.draw(st.integers(-a.ndim, a.ndim - 1)), data.draw(st.integers(1, 4))  # (n=0: NumPy drops append)
    extra = {}
    for name in ("prepend", "append"):
        if data.draw(st.booleans()):
            other = list(shape)
            other[axis] = data.draw(st.integers(0, 2))
            extra[name] = data.draw(operand(dtype, tuple(other)))
    with np.errstate(all="ignore"):
        expected = np.diff(a, n=n, axis=axis, **{k: v[0] for k, v in extra.items()})
    same(xp().diff(d, axis=axis, n=n, **{k: v[1] for k, v in extra.items()}), expected)


@FEW
@given(dtype=st.sampled_from(ALL), shape=hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=5),
       k=st.integers(-5, 5), data=st.data())
def test_tril_triu_equal_numpy(dtype, shape, k, data):
    a, d = data.draw(operand(dtype, shape))
    same(xp().tril(d, k=k), np.tril(a, k))
    same(xp().triu(d, k=k), np.triu(a, k))


def test_meshgrid_and_manipulation_errors():
    x, y, z = (np.arange(n, dtype=np.float32) for n in (2, 3, 4))
    dx, dy, dz = (xp().asarray(v, copy=True) for v in (x, y, z))
    for indexing in ("xy", "ij"):
        for got, expected in zip(xp().meshgrid(dx, dy[::-1], dz, indexing=indexing),
                                 np.meshgrid(x, y[::-1], z, indexing=indexing)):
            same(got, expected)
    d = xp().asarray(np.zeros((2, 3)), copy=True)
    with pytest.raises(ValueError, match="size 2"):
        xp().squeeze(d, axis=0)
    with pytest.raises(IndexError, match="out of range"):
        xp().expand_dims(d, axis=3)
    with pytest.raises(ValueError, match="differ"):
        xp().concat([d, xp().asarray(np.zeros((3, 3)), copy=True)], axis=1)
    with pytest.raises(ValueError, match="different shapes"):
        xp().stack([d, d.T])
    with pytest.raises(ValueError, match="broadcast"):
        xp().broadcast_to(d, (3, 3))
    with pytest.raises(ValueError, match="permutation"):
        xp().permute_dims(d, (0, 0))
    with pytest.raises(TypeError, match="dtypes"):
        xp().meshgrid(dx, xp().asarray([1, 2]))


# ---------------------------------------------------------------------------------------------- indexing
@FEW
@given(dtype=st.sampled_from(ALL), shape=NONEMPTY, data=st.data())
def test_take_and_take_along_axis_equal_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    index_dtype = data.draw(st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.int16, np.uint16, np.uint32,
                                                   np.uint64]))
    low = 0 if np.dtype(index_dtype).kind == "u" else -n
    idx = np.asarray(data.draw(st.lists(st.integers(low, n - 1), max_size=5)), index_dtype)
    same(xp().take(d, xp().asarray(idx, copy=True), axis=axis), np.take(a, idx, axis=axis))
    if a.ndim == 1:
        same(xp().take(d, xp().asarray(idx, copy=True)), np.take(a, idx))
    along = list(a.shape)
    along[axis] = data.draw(st.integers(0, 4))
    along = [1 if data.draw(st.booleans()) else s for s in along]  # broadcast against x off the axis
    along[axis] = along[axis] if along[axis] != 1 else 2
    ti = data.draw(hnp.arrays(np.int64, tuple(along), elements=st.integers(-n, n - 1)))
    expected = np.take_along_axis(a, ti, axis=axis)
    same(xp().take_along_axis(d, xp().asarray(ti, copy=True), axis=axis), expected)


@st.composite
def basic_key(draw, shape):
    """A basic index: ints, slices with any (also negative) steps, None and at most one Ellipsis."""
    def part(n):
        return draw(st.one_of(st.integers(-n, n - 1), st.slices(n))) if n else draw(st.slices(n))

    head = draw(st.integers(0, len(shape)))
    parts = [part(n) for n in shape[:head]]
    if draw(st.booleans()):
        tail = draw(st.integers(0, len(shape) - head))
        parts += [Ellipsis] + [part(n) for n in shape[len(shape) - tail:]]
    for _ in range(draw(st.integers(0, 2))):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return tuple(parts) if len(parts) != 1 or draw(st.booleans()) else parts[0]


@FEW
@given(dtype=st.sampled_from(ALL), shape=SHAPES, data=st.data())
def test_basic_getitem_and_setitem_equal_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    key = data.draw(basic_key(shape))
    same(d[key], np.asarray(a[key]))
    b = a.copy()
    selection = np.asarray(b[key])
    if data.draw(st.booleans()):
        value = data.draw(values(dtype, ()))
        value = value.item()
        d[key] = value
        b[key] = value
    else:
        vshape = data.draw(hnp.broadcastable_shapes(selection.shape, min_side=0, max_dims=selection.ndim))
        if np.broadcast_shapes(vshape, selection.shape) != selection.shape:  # (NumPy also stores (0,) into (1,))
            vshape = selection.shape
        v, dv = data.draw(operand(dtype, vshape))
        d[key] = dv
        b[key] = v
    same(d, b)


@FEW
@given(dtype=st.sampled_from(ALL), shape=NONEMPTY, data=st.data())
def test_integer_array_indexing_equals_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    k = data.draw(st.integers(1, a.ndim))
    index_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    key_h, key_d = [], []
    for axis in range(k):
        n = a.shape[axis]
        kind = data.draw(st.sampled_from(["int", "array", "array", "slice"]))
        if kind == "int":
            i = data.draw(st.integers(-n, n - 1))
            key_h.append(i)
            key_d.append(i)
        elif kind == "slice":  # beside arrays: NumPy's placement of the index axes (the standard leaves it open)
            i = data.draw(st.slices(n))
            key_h.append(i)
            key_d.append(i)
        else:
            i = data.draw(hnp.arrays(np.int64, index_shape, elements=st.integers(-n, n - 1)))
            key_h.append(i)
            key_d.append(xp().asarray(i, copy=True))
    if not any(isinstance(i, np.ndarray) for i in key_h):
        n = a.shape[0]
        key_h[0] = np.asarray(data.draw(st.integers(-n, n - 1)))
        key_d[0] = xp().asarray(key_h[0], copy=True)
    if data.draw(st.booleans()):
        key_h.append(Ellipsis)
        key_d.append(Ellipsis)
    same(d[tuple(key_d)], np.asarray(a[tuple(key_h)]))
    b = a.copy()
    value = data.draw(values(dtype, ())).item()
    d[tuple(key_d)] = value
    b[tuple(key_h)] = value
    same(d, b)


@FEW
@given(dtype=st.sampled_from(ALL), shape=SHAPES, data=st.data())
def test_boolean_mask_getitem_and_setitem_equal_numpy(dtype, shape, data):
    a, d = data.draw(operand(dtype, shape))
    m_dims = data.draw(st.integers(0, a.ndim))
    m, dm = data.draw(operand(np.bool_, shape[:m_dims]))
    same(d[dm], a[m])
    b = a.copy()
    rest = a.shape[m_dims:]
    how = data.draw(st.sampled_from(["scalar", "row", "rows"]))
    if how == "scalar":
        v = data.draw(values(dtype, ())).item()
        d[dm] = v
        b[m] = v
    else:
        vshape = rest if how == "row" else (int(m.sum()), *rest)
        v, dv = data.draw(operand(dtype, vshape))
        d[dm] = dv
        b[m] = v
    same(d, b)


def test_indexing_details():
    a = np.arange(24.0).reshape(2, 3, 4)
    d = xp().asarray(a, copy=True)
    assert [float(v) for v in d[0, 0]] == [0.0, 1.0, 2.0, 3.0]
    assert [host(row).tolist() for row in d[:, 0]] == a[:, 0].tolist()
    with pytest.raises(TypeError, match="0-d"):
        iter(d[0, 0, 0])
    same(d[xp().asarray(True)], a[np.True_])  # a 0-d mask: a new axis of length 1 (or 0)
    same(d[xp().asarray(False)], a[np.False_])
    d[1:] = d[:1]  # overlapping source and destination
    np.testing.assert_array_equal(host(d), np.concatenate([a[:1], a[:1]]))
    now = host(d)
    same(d[..., xp().asarray([3, 0])], now[..., [3, 0]])
    same(d[xp().asarray([1]), :, xp().asarray([3, 0])], now[[1], :, [3, 0]])  # separated: the index axes first
    with pytest.raises(IndexError, match="None"):
        d[None, xp().asarray([0])]
    with pytest.raises(IndexError, match="sole index"):
        d[xp().asarray(a[:, 0, 0] > 0), 0]
    with pytest.raises(IndexError, match="does not match"):
        d[xp().asarray(np.ones(3, bool))]
    with pytest.raises(IndexError, match="out of bounds"):
        d[5, xp().asarray([0])]
    with pytest.raises(TypeError, match="cannot be stored"):
        d[0] = xp().asarray(np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="broadcast"):
        d[0] = xp().asarray(np.zeros(3))
    with pytest.raises(TypeError, match="basic indexing"):
        d[[0, 1]]
    half = xp().asarray(np.zeros(2, np.float32), copy=True).astype(np.float16)
    with pytest.raises(TypeError, match="float16 is not supported"):
        half[0] = 1.0
    assert half[1:].shape == (1,)  # basic indexing of any dtype stays a view


def test_every_manipulation_and_indexing_kernel_in_every_dtype():
    """Deterministic: the assignment, tril/triu, gather/scatter and mask kernels once in each dtype, and the index
    offsets in each index dtype, from transposed views."""
    base = np.array([[0, 1, 2], [3, 5, 7]])
    for dtype in ALL:
        a = base.astype(dtype)
        d = xp().asarray(a, copy=True).mT
        same(xp().concat([d, d], axis=1), np.concatenate([a.T, a.T], axis=1))
        same(xp().tril(d, k=-1), np.tril(a.T, -1))
        same(xp().take(d, xp().asarray(np.array([1, 0, 1]), copy=True), axis=1), a.T[:, [1, 0, 1]])
        mask = a.T[:, 0] > 0
        same(d[xp().asarray(mask, copy=True)], a.T[mask])
        e, b = xp().asarray(a, copy=True), a.copy()
        e[xp().asarray(a > 2, copy=True)] = xp().asarray(a[0, :1], copy=True)
        b[a > 2] = a[0, :1]
        same(e, b)
    x = np.arange(6.0)
    for index_dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        idx = np.array([5, 0, 2], index_dtype)
        same(xp().asarray(x, copy=True)[xp().asarray(idx, copy=True)], x[idx])
