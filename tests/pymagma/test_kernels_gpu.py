"""pymagma.kernels on a GPU against plain NumPy references (hypothesis-drawn shapes and values)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples
from tests.reference import activation_ref

from .helpers import BF16, BF16_CASE
from .test_kernels_reference import reference_uniform_pairs

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(8), deadline=None)

DTYPES = [np.float32, np.float64, np.float16, BF16_CASE]
FLOATS = [np.float32, np.float64, np.float16] + ([BF16] if BF16 is not None else [])
RTOL = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 4e-3, BF16: 3.2e-2}  # ~8 half-ulps of each type


def dev(a):
    from pymagma import array

    return array.asarray(np.ascontiguousarray(a))


def close(actual, expected, dtype, scale=1.0):
    tol = RTOL[dtype] * scale
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=tol, atol=tol)


def host_values(shape, seed, dtype, low=-3.0, high=3.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


# ---------------------------------------------------------------------------------------------- elementwise
UNARY_REFERENCES = {
    "negative": lambda x, p, q: -x, "abs": lambda x, p, q: np.abs(x), "exp": lambda x, p, q: np.exp(x),
    "log": lambda x, p, q: np.log(x), "sqrt": lambda x, p, q: np.sqrt(x), "square": lambda x, p, q: x * x,
    "relu": lambda x, p, q: np.maximum(x, 0), "sigmoid": lambda x, p, q: 1 / (1 + np.exp(-x)),
    "tanh": lambda x, p, q: np.tanh(x), "sign": lambda x, p, q: np.sign(x), "reciprocal": lambda x, p, q: 1 / x,
    "affine": lambda x, p, q: p * x + q, "power": lambda x, p, q: x ** p, "clip": lambda x, p, q: np.clip(x, p, q),
    "elu": lambda x, p, q: np.where(x > 0, x, p * (np.exp(x) - 1)),
    "leaky_relu": lambda x, p, q: np.where(x > 0, x, p * x),
    "rsqrt": lambda x, p, q: 1 / np.sqrt(x),
    "gelu_tanh": lambda x, p, q: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    **{k: functools.partial(lambda x, p, q, kind: activation_ref(kind, x), kind=k)
       for k in ("gelu", "silu", "softplus", "softsign", "selu", "hard_sigmoid")},
}
POSITIVE_ONLY = {"log", "sqrt", "reciprocal", "power", "rsqrt"}


def test_every_unary_op_has_a_reference():
    from pymagma import kernels

    assert set(UNARY_REFERENCES) == set(kernels.UNARY_OPS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(UNARY_REFERENCES))
@FEW
@given(shape=hnp.array_shapes(max_dims=4, max_side=9), seed=st.integers(0, 2**31))
def test_unary(op, dtype, shape, seed):
    from pymagma import kernels

    low = 0.2 if op in POSITIVE_ONLY else -3.0
    x = host_values(shape, seed, dtype, low)
    p, q = (1.5, 0.0) if op == "power" else (-0.5, 0.75) if op == "clip" else (0.3, -0.2)
    y = kernels.unary(op, dev(x), p, q).get()
    assert y.dtype == dtype and y.shape == x.shape
    close(y, UNARY_REFERENCES[op](x.astype(np.float64), p, q).astype(dtype), dtype, 2.0)


BINARY_REFERENCES = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "power": np.power, "relu_backward": lambda a, b: np.where(b > 0, a, 0),
    "sigmoid_backward": lambda a, b: a * b * (1 - b), "tanh_backward": lambda a, b: a * (1 - b * b),
    "equal": lambda a, b: (a == b).astype(a.dtype), "greater": lambda a, b: (a > b).astype(a.dtype),
    "less": lambda a, b: (a < b).astype(a.dtype), "squared_difference": lambda a, b: (a - b) ** 2,
    "greater_equal": lambda a, b: (a >= b).astype(a.dtype), "less_equal": lambda a, b: (a <= b).astype(a.dtype),
    "not_equal": lambda a, b: (a != b).astype(a.dtype),
}
COMPARISONS = ("equal", "greater", "less", "greater_equal", "less_equal", "not_equal")


def test_every_binary_op_has_a_reference():
    from pymagma import kernels

    assert set(BINARY_REFERENCES) == set(kernels.BINARY_OPS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(BINARY_REFERENCES))
@FEW
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=6), seed=st.integers(0, 2**31),
       transpose=st.booleans())
def test_binary_with_broadcasting_and_strides(op, dtype, shapes, seed, transpose):
    from pymagma import kernels

    (sa, sb), _ = shapes
    positive = op in ("power", "divide")
    a = host_values(sa, seed, dtype, 0.2 if positive else -3.0)
    b = host_values(sb, seed + 1, dtype, 0.2 if positive else -3.0)
    if op in COMPARISONS:
        a, b = np.round(a), np.round(b)  # small integers, so equal elements occur
    da = dev(a.T).T if transpose and a.ndim > 1 else dev(a)  # a transposed (non-contiguous) view
    y = kernels.binary(op, da, dev(b)).get()
    close(y, BINARY_REFERENCES[op](a.astype(np.float64), b.astype(np.float64)), dtype, 4.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["subtract", "divide", "power", "maximum", "greater_equal"])
@FEW
@given(shape=hnp.array_shapes(max_dims=3, max_side=7), seed=st.integers(0, 2**31),
       scalar=st.sampled_from([0.1, 2.0, 3]), scalar_first=st.booleans())
def test_binary_with_a_python_scalar_in_the_arrays_dtype(op, dtype, shape, seed, scalar, scalar_first):
    from pymagma import kernels

    a = host_values(shape, seed, dtype, 0.2, 3.0)
    s = np.asarray(scalar, dtype)  # the scalar takes the array's dtype, as in NumPy
    got = (kernels.binary(op, scalar, dev(a)) if scalar_first else kernels.binary(op, dev(a), scalar)).get()
    wide, ws = a.astype(np.float64), s.astype(np.float64)
    expected = BINARY_REFERENCES[op](ws, wide) if scalar_first else BINARY_REFERENCES[op](wide, ws)
    assert got.dtype == dtype and got.shape == a.shape
    close(got, expected, dtype, 4.0)


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=5), seed=st.integers(0, 2**31))
def test_where_with_broadcasting(dtype, shapes, seed):
    from pymagma import kernels

    (sc, sa, sb), _ = shapes
    cond = (host_values(sc, seed, np.float64) > 0).astype(dtype)
    a, b = host_values(sa, seed + 1, dtype), host_values(sb, seed + 2, dtype)
    got = kernels.where(dev(cond), dev(a), dev(b)).get()
    expected = np.where(cond != 0, a, b)
    assert got.shape == np.broadcast_shapes(*(np.atleast_1d(v).shape for v in (cond, a, b)))  # dev() makes 0-d 1-D
    np.testing.assert_array_equal(got, expected.reshape(got.shape))


_GELU_C = np.sqrt(2 / np.pi)
ACTIVATION_GRAD_REFERENCES = {  # (dy, x, y, alpha) -> dx, from the derivative of each forward formula
    "relu": lambda dy, x, y, a: np.where(x > 0, dy, 0.0),
    "sigmoid": lambda dy, x, y, a: dy * y * (1 - y),
    "tanh": lambda dy, x, y, a: dy * (1 - y * y),
    "leaky_relu": lambda dy, x, y, a: np.where(x > 0, dy, a * dy),
    "elu": lambda dy, x, y, a: np.where(x > 0, dy, dy * a * np.exp(x)),
    "gelu_tanh": lambda dy, x, y, a: dy * (0.5 * (1 + np.tanh(_GELU_C * (x + 0.044715 * x**3)))
                                           + 0.5 * x * (1 - np.tanh(_GELU_C * (x + 0.044715 * x**3)) ** 2)
                                           * _GELU_C * (1 + 3 * 0.044715 * x * x)),
    "gelu": lambda dy, x, y, a: dy * (activation_ref("gelu", x) / x + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
    "silu": lambda dy, x, y, a: dy * (1 / (1 + np.exp(-x))) * (1 + x * (1 - 1 / (1 + np.exp(-x)))),
    "softplus": lambda dy, x, y, a: dy / (1 + np.exp(-x)),
    "softsign": lambda dy, x, y, a: dy / (1 + np.abs(x)) ** 2,
    "selu": lambda dy, x, y, a: dy * 1.0507009873554805 * np.where(x > 0, 1.0, 1.6732632423543772 * np.exp(x)),
    "hard_sigmoid": lambda dy, x, y, a: np.where(np.abs(x) < 3, dy / 6, 0.0),
    "exponential": lambda dy, x, y, a: dy * np.exp(x),
}
ACTIVATION_FORWARD = {"relu": lambda x, a: np.maximum(x, 0), "sigmoid": lambda x, a: 1 / (1 + np.exp(-x)),
                      "tanh": lambda x, a: np.tanh(x), "leaky_relu": lambda x, a: np.where(x > 0, x, a * x),
                      "elu": lambda x, a: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0))),
                      "gelu": lambda x, a: x, "gelu_tanh": lambda x, a: x, "silu": lambda x, a: x,
                      "softplus": lambda x, a: x, "softsign": lambda x, a: x, "hard_sigmoid": lambda x, a: x,
                      "selu": lambda x, a: activation_ref("selu", x), "exponential": lambda x, a: np.exp(x)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", sorted(ACTIVATION_GRAD_REFERENCES))
@FEW
@given(shape=hnp.array_shapes(max_dims=3, max_side=8), seed=st.integers(0, 2**31))
def test_activation_backward(kind, dtype, shape, seed):
    from pymagma import kernels

    assert set(ACTIVATION_GRAD_REFERENCES) == set(kernels.ACTIVATION_GRADS)
    x, dy, alpha = host_values(shape, seed, dtype), host_values(shape, seed + 1, dtype), 0.3
    y = ACTIVATION_FORWARD[kind](x.astype(np.float64), alpha).astype(dtype)
    got = kernels.activation_backward(kind, dev(dy), dev(x), dev(y), alpha).get()
    wide = [v.astype(np.float64) for v in (dy, x, y)]
    close(got, ACTIVATION_GRAD_REFERENCES[kind](*wide, alpha), dtype, 8.0)
    if kind in ("sigmoid", "tanh", "relu"):  # these need only the output (what a fused conv activation keeps)
        close(kernels.activation_backward(kind, dev(dy), None, dev(y)).get(), got, dtype)


def test_activation_backward_names_what_it_needs():
    from pymagma import kernels

    d = dev(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="elu needs x and y"):
        kernels.activation_backward("elu", d, d)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        kernels.activation_backward("swish", d, d)


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4)),
       seed=st.integers(0, 2**31))
def test_bias_add_over_nchw_channels_and_dense_rows(dtype, shape, seed):
    from pymagma import kernels

    x, bias = host_values(shape, seed, dtype), host_values((shape[1],), seed + 1, dtype)
    close(kernels.bias_add(dev(x), dev(bias)).get(), x.astype(np.float64) + bias[None, :, None, None], dtype)
    x2 = x.reshape(shape[0], -1)[:, : shape[1]].copy()
    close(kernels.bias_add(dev(x2), dev(bias)).get(), x2.astype(np.float64) + bias, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill(dtype):
    from pymagma import array, kernels

    x = array.empty((5, 7), dtype)
    np.testing.assert_array_equal(kernels.fill(x, 2.5).get(), np.full((5, 7), 2.5, dtype))


CAST_DTYPES = [np.float32, np.float64, np.float16, BF16_CASE, np.int32, np.int64, np.uint8]


@pytest.mark.parametrize("src", CAST_DTYPES)
@pytest.mark.parametrize("dst", CAST_DTYPES)
def test_cast_between_all_pairs(src, dst):
    from pymagma import kernels

    x = np.arange(0, 200, 3.25).astype(src)
    expected = x.astype(np.float64).astype(dst) if np.issubdtype(dst, np.integer) else x.astype(dst)
    np.testing.assert_array_equal(kernels.cast(dev(x), dst).get(), expected)


def test_integer_casts_are_exact_and_wrap_like_numpy():
    from pymagma import kernels

    big = np.array([2**53 + 1, -(2**62) - 3, 2**31 + 7, -1, 300], np.int64)  # beyond float64's integers
    for dst in (np.int64, np.int32, np.uint8):
        np.testing.assert_array_equal(kernels.cast(dev(big), dst).get(), big.astype(dst))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16_CASE, np.int32, np.int64, np.uint8])
@FEW
@given(shape=hnp.array_shapes(min_dims=2, max_dims=4, max_side=6), seed=st.integers(0, 2**31))
def test_copy_of_transposed_and_reversed_views(dtype, shape, seed):
    from pymagma import kernels

    x = host_values(shape, seed, np.float64, -300.0, 300.0)
    x = np.round(x).astype(np.int64).astype(dtype) if np.issubdtype(dtype, np.integer) else x.astype(dtype)
    d = dev(x)
    np.testing.assert_array_equal(kernels.copy(d.T).get(), x.T)
    np.testing.assert_array_equal(kernels.copy(d[::-1, ::2]).get(), x[::-1, ::2])


def test_copy_into_a_strided_view_pads_without_the_host():
    from pymagma import array, kernels

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    padded = kernels.fill(array.empty((2, 6, 5), np.float32), -1.0)
    kernels.copy(dev(x), out=padded[:, 1:4, 1:])
    expected = np.full((2, 6, 5), -1.0, np.float32)
    expected[:, 1:4, 1:] = x
    np.testing.assert_array_equal(padded.get(), expected)
    with pytest.raises(ValueError, match="expected"):
        kernels.copy(dev(x), out=padded[:, :2])


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=5), divisor=st.sampled_from([1, 3, 7.5]),
       data=st.data())
def test_broadcast_divide_materialises_a_broadcast_divided(dtype, shape, divisor, data):
    """A reduction's gradient in one launch: x broadcast to ``shape`` (axes of length 1, missing leading axes, a
    transposed view) divided by ``divisor`` as the dtype divides, against NumPy; a shape it cannot broadcast to is
    refused."""
    from pymagma import kernels

    small = tuple(data.draw(st.sampled_from([1, n])) for n in shape[data.draw(st.integers(0, len(shape) - 1)):])
    x = host_values(small, 1, dtype)
    got = kernels.broadcast_divide(dev(x), shape, divisor)
    assert got.shape == shape and got.is_c_contiguous
    want = (np.broadcast_to(x, shape).astype(np.float32 if dtype in (np.float16, BF16) else dtype)
            / np.float64(divisor)).astype(dtype)
    close(got.get(), want, dtype)
    if x.ndim == 2:
        close(kernels.broadcast_divide(dev(x).T, (2, *x.T.shape), 2).get(), np.broadcast_to(x.T, (2, *x.T.shape)) / 2,
              dtype)
    with pytest.raises(ValueError, match="does not broadcast"):
        kernels.broadcast_divide(dev(np.ones((2, 3), dtype)), (2, 4), 1)


# ------------------------------------------------------------------------------------------------ reductions
REDUCE_REFERENCES = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
                     "sum_squares": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(REDUCE_REFERENCES))
@FEW
@given(data=st.data(), keepdims=st.booleans())
def test_reduce_over_axes(op, dtype, data, keepdims):
    from pymagma import kernels

    shape = data.draw(hnp.array_shapes(max_dims=4, max_side=7))
    axis = data.draw(st.none() | st.integers(0, len(shape) - 1) |
                     st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True).map(tuple))
    low, high = (0.95, 1.05) if op == "prod" else (-3.0, 3.0)  # products stay well inside float16's range
    x = host_values(shape, data.draw(st.integers(0, 2**31)), dtype, low, high)
    y = kernels.reduce(op, dev(x), axis=axis, keepdims=keepdims).get()
    expected = REDUCE_REFERENCES[op](x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert y.shape == np.shape(expected)
    n = x.size if axis is None else np.prod([shape[a] for a in np.atleast_1d(axis)])
    close(y, expected, dtype, scale=4.0 * max(1.0, np.sqrt(n)))


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=9), seed=st.integers(0, 2**31), data=st.data())
def test_argmax_argmin_with_ties(dtype, shape, seed, data):
    from pymagma import kernels

    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(seed).integers(-3, 4, shape).astype(dtype)  # small ints: many ties
    np.testing.assert_array_equal(kernels.argmax(dev(x), axis).get(), np.argmax(x, axis))
    np.testing.assert_array_equal(kernels.argmin(dev(x), axis).get(), np.argmin(x, axis))


def test_argmax_nan_wins_like_numpy():
    from pymagma import kernels

    x = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 7.0, 7.0, 1.0]], np.float32)
    np.testing.assert_array_equal(kernels.argmax(dev(x), 1).get(), np.argmax(x, 1))
    np.testing.assert_array_equal(kernels.argmin(dev(x), 1).get(), np.argmin(x, 1))


# ----------------------------------------------------------------------------------------------------- random
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**40))
def test_uniform_is_philox_and_deterministic(n, seed, offset):
    from pymagma import kernels

    u0, u1 = reference_uniform_pairs(n, seed, offset)
    expected = np.stack([u0, u1], axis=1).ravel()[:n] * 4.0 - 2.0
    got = kernels.uniform((n,), -2.0, 2.0, seed=seed, offset=offset, dtype=np.float64).get()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
    again = kernels.uniform((n,), -2.0, 2.0, seed=seed, offset=offset, dtype=np.float64).get()
    np.testing.assert_array_equal(got, again)


def test_normal_is_box_muller_of_the_same_stream_and_has_the_right_moments():
    from pymagma import kernels

    n, seed = 1_000_001, 1234
    u0, u1 = reference_uniform_pairs(n, seed, 0)
    radius = np.sqrt(-2.0 * np.log(u0))
    expected = np.stack([radius * np.cos(2 * np.pi * u1), radius * np.sin(2 * np.pi * u1)], axis=1).ravel()[:n]
    got = kernels.normal((n,), 1.0, 2.0, seed=seed, dtype=np.float64).get()
    np.testing.assert_allclose(got, 1.0 + 2.0 * expected, rtol=1e-12, atol=1e-12)
    f32 = kernels.normal((n,), 0.0, 1.0, seed=seed, dtype=np.float32).get()
    assert abs(f32.mean()) < 5e-3 and abs(f32.std() - 1.0) < 5e-3
    assert not np.array_equal(f32[:100], kernels.normal((100,), seed=seed + 1).get())


def test_uniform_and_normal_statistics_for_every_float_dtype():
    from pymagma import kernels

    for dtype in FLOATS:
        u = kernels.uniform((200_000,), seed=7, dtype=dtype).get().astype(np.float64)
        assert u.min() >= 0.0 and u.max() <= 1.0
        assert abs(u.mean() - 0.5) < 5e-3 and abs(u.var() - 1 / 12) < 5e-3
        z = kernels.normal((200_000,), 1.0, 2.0, seed=7, dtype=dtype).get().astype(np.float64)
        assert abs(z.mean() - 1.0) < 2e-2 and abs(z.std() - 2.0) < 2e-2


# ------------------------------------------------------------------------------------------------- resources
def test_no_device_memory_growth_over_1000_calls():
    from pymagma import kernels, memory

    x = dev(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    for _ in range(20):  # warm up the pool and the kernel caches
        kernels.reduce("sum", kernels.add(kernels.relu(x), x), axis=0)
    before = memory.pool_stats()
    for _ in range(1000):
        kernels.reduce("sum", kernels.add(kernels.relu(x), x), axis=0)
    x.get()
    after = memory.pool_stats()
    assert after["in_use_bytes"] == before["in_use_bytes"]
    assert after["mallocs"] == before["mallocs"]


# --------------------------------------------------------------------------------------------------- check.cu
@pytest.mark.parametrize("dtype", DTYPES + [np.int64, np.int32])
@FEW
@given(n=st.integers(1, 700), bad=st.integers(0, 3), seed=st.integers(0, 2**31))
def test_check_kernels_record_the_first_bad_value_in_c_order(dtype, n, bad, seed):
    """check_range (ids in [0, 5)) and check_binary (0 or 1) against NumPy: the first failing index, its value's 64
    bits (an integer's own, a float's double), a record holding a fault left alone, nothing when all pass."""
    from pymagma import array, kernels

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2, n).astype(np.float64)
    places = rng.integers(0, n, bad)
    values[places] = rng.choice([-1.0, 5.0, 0.5, 7.0, np.nan] if np.dtype(dtype).kind == "f" else [-3, 5, 9], bad)
    host = values.astype(dtype)
    wide = host.astype(np.float64)
    for check, failing in (
            (lambda x, r: kernels.check_range(x, 0, 5, r, 7), ~((wide >= 0) & (wide < 5))),
            (lambda x, r: kernels.check_binary(x, r, 7), ~((wide == 0) | (wide == 1)))):
        record = array.zeros((kernels.FAULT_RECORD,), np.int64)
        check(dev(host), record)
        got = record.get()
        if not failing.any():
            assert not got.any()
            continue
        first = int(np.flatnonzero(failing)[0])
        bits = np.array([(int(got[2]) << 32) | int(got[1])], np.uint64)
        value = bits.view(np.int64)[0] if np.dtype(dtype).kind == "i" else bits.view(np.float64)[0]
        assert got[0] == 7 and got[3] == first
        np.testing.assert_array_equal(value, wide[first])
        check(dev(np.full(3, 9, dtype)), record)  # a later fault does not replace the first
        np.testing.assert_array_equal(record.get(), got)
