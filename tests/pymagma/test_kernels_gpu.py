"""pymagma.kernels on a GPU against plain NumPy references (hypothesis-drawn shapes and values)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples
from tests.reference import activation_ref, pool2d_backward_ref, pool2d_ref
from tests.strategies import pool_cases

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


# ----------------------------------------------------------------------------------------------------- loss
def xent_reference(logits, targets):
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -(targets * logp).sum(axis=1), np.exp(logp) - targets


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@FEW
@given(rows=st.integers(1, 40), classes=st.integers(1, 300), seed=st.integers(0, 2**31), indices=st.booleans())
def test_softmax_cross_entropy(dtype, reduction, rows, classes, seed, indices):
    from pymagma import kernels

    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, classes)) * 4).astype(dtype)
    labels = rng.integers(0, classes, rows)
    targets = np.eye(classes)[labels] if indices else rng.dirichlet(np.ones(classes), rows)
    given_labels = dev(labels.astype(np.int64)) if indices else dev(targets.astype(dtype))
    loss, grad = kernels.softmax_cross_entropy(dev(logits), given_labels, reduction=reduction)
    per_row, dlogits = xent_reference(logits.astype(np.float64), targets)
    scale = 1.0 / rows if reduction == "mean" else 1.0
    expected = {"none": per_row, "sum": per_row.sum(), "mean": per_row.mean()}[reduction]
    close(loss.get(), expected, dtype, scale=10.0 * np.sqrt(classes))
    close(grad.get(), dlogits * scale, dtype, scale=10.0)


@pytest.mark.parametrize("indices", [True, False], ids=["labels", "targets"])
@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(rows=st.integers(1, 12), classes=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_softmax_cross_entropy_probs_and_backward(dtype, indices, rows, classes, seed):
    from pymagma import kernels

    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, classes)) * 4).astype(dtype)
    labels = rng.integers(0, classes, rows)
    targets = np.eye(classes)[labels] if indices else rng.dirichlet(np.ones(classes), rows) * rng.uniform(0.5, 2)
    given_labels = dev(labels.astype(np.int64)) if indices else dev(targets.astype(dtype))
    loss, probs = kernels.softmax_cross_entropy(dev(logits), given_labels, reduction="none", probs=True)
    per_row, _ = xent_reference(logits.astype(np.float64), targets)
    wide = logits.astype(np.float64)
    expected_probs = np.exp(wide - wide.max(1, keepdims=True))
    expected_probs /= expected_probs.sum(1, keepdims=True)
    close(loss.get(), per_row, dtype, scale=10.0 * np.sqrt(classes))
    close(probs.get(), expected_probs, dtype, scale=10.0)
    dloss = rng.uniform(-2, 2, rows).astype(dtype)
    got = kernels.softmax_cross_entropy_backward(probs, given_labels, dev(dloss)).get()
    p = probs.get().astype(np.float64)
    expected = (p * targets.sum(1, keepdims=True) - targets) * dloss.astype(np.float64)[:, None]
    close(got, expected, dtype, scale=10.0)


# ------------------------------------------------------------------------------------------------ optimizers
def _optimizer_case(dtype, seed, n=1000):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nesterov", [False, True])
@given(seed=st.integers(0, 2**31), momentum=st.sampled_from([0.0, 0.9]), wd=st.sampled_from([0.0, 1e-2]))
def test_sgd_momentum_and_nesterov(dtype, nesterov, seed, momentum, wd):
    from pymagma import kernels

    p, g, v, _ = _optimizer_case(dtype, seed)
    dp, dv = dev(p), dev(v)
    for _ in range(3):
        kernels.sgd_update(dp, dev(g), dv, lr=0.1, momentum=momentum, weight_decay=wd, nesterov=nesterov)
        d = g.astype(np.float64) + wd * p
        if momentum:
            v = momentum * v + d
            d = d + momentum * v if nesterov else v
        p = p - 0.1 * d
    close(dp.get(), p, dtype, 10)
    if momentum:
        close(dv.get(), v, dtype, 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16_CASE])  # float16 state underflows: not offered
@pytest.mark.parametrize("decoupled", [False, True])
@given(seed=st.integers(0, 2**31), wd=st.sampled_from([0.0, 1e-2]))
def test_adam_and_adamw(dtype, decoupled, seed, wd):
    from pymagma import kernels

    p, g, _, _ = _optimizer_case(dtype, seed)
    m, v = np.zeros_like(p, np.float64), np.zeros_like(p, np.float64)
    dp, dm, dv = dev(p), dev(m.astype(dtype)), dev(v.astype(dtype))
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-2
    p = p.astype(np.float64)
    for t in range(1, 4):
        kernels.adam_update(dp, dev(g), dm, dv, step=t, lr=lr, weight_decay=wd, decoupled=decoupled)
        d = g.astype(np.float64)
        if decoupled:
            p = p - lr * wd * p
        else:
            d = d + wd * p
        m = b1 * m + (1 - b1) * d
        v = b2 * v + (1 - b2) * d * d
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    close(dp.get(), p, dtype, 50)


@pytest.mark.parametrize("dtype", DTYPES)
@given(seed=st.integers(0, 2**31))
def test_rmsprop_and_adagrad(dtype, seed):
    from pymagma import kernels

    p, g, _, _ = _optimizer_case(dtype, seed)
    p1, p2 = p.astype(np.float64), p.astype(np.float64)
    s1, s2 = np.zeros_like(p1), np.zeros_like(p1)
    d1, d2, ds1, ds2 = dev(p), dev(p), dev(s1.astype(dtype)), dev(s2.astype(dtype))
    for _ in range(3):
        kernels.rmsprop_update(d1, dev(g), ds1, lr=0.01, rho=0.9, eps=1e-8)
        kernels.adagrad_update(d2, dev(g), ds2, lr=0.01, eps=1e-10)
        s1 = 0.9 * s1 + 0.1 * g.astype(np.float64) ** 2
        p1 = p1 - 0.01 * g / (np.sqrt(s1) + 1e-8)
        s2 = s2 + g.astype(np.float64) ** 2
        p2 = p2 - 0.01 * g / (np.sqrt(s2) + 1e-10)
    close(d1.get(), p1, dtype, 50)
    close(d2.get(), p2, dtype, 50)


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


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=examples(4), deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**40),
       rate=st.sampled_from([0.0, 0.1, 0.5, 0.9]))
def test_dropout_is_the_uniform_stream_thresholded_in_the_arrays_dtype(dtype, n, seed, offset, rate):
    from pymagma import kernels

    x = host_values((n,), seed % 2**32, dtype)
    y, mask = kernels.dropout(dev(x), rate, seed=seed, offset=offset)
    u = kernels.uniform((n,), 0.0, 1.0, seed=seed, offset=offset, dtype=dtype).get()
    keep = u >= np.asarray(rate, dtype)
    expected_mask = keep.astype(dtype) * np.asarray(1.0 / (1.0 - rate), dtype)
    np.testing.assert_array_equal(mask.get(), expected_mask)
    np.testing.assert_array_equal(y.get(), (x * expected_mask).astype(dtype))


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


def test_out_of_range_label_gives_nan_loss():
    from pymagma import kernels

    logits = np.zeros((3, 4), np.float32)
    loss, _ = kernels.softmax_cross_entropy(dev(logits), dev(np.array([0, 4, -1], np.int64)), reduction="none")
    got = loss.get()
    assert np.isclose(got[0], np.log(4)) and np.isnan(got[1]) and np.isnan(got[2])


# ---------------------------------------------------------------------------------------------- max pooling
@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(data=st.data())
def test_max_pool2d_gives_the_gradient_to_the_first_maximum(dtype, data):
    """The kernel pair behind the device backend's max pooling: y and the gradient against the independent reference
    (first maximum of each window in row-major order, padding never a maximum), ties included."""
    from pymagma import kernels

    x, window, stride, padding = data.draw(pool_cases(dtypes=(dtype,), values="ties", asymmetric=True,
                                                      pad_limit=lambda k: k - 1))
    y, offsets = kernels.max_pool2d(dev(x), window, stride, padding)
    xf = x.astype(np.float64)
    expected = pool2d_ref(xf, window, stride, padding, "max")
    close(y.get(), expected, x.dtype.type)
    dy = np.random.default_rng(0).standard_normal(expected.shape).astype(x.dtype)
    dx = kernels.max_pool2d_backward(dev(dy), offsets, x.shape, window, stride, padding).get()
    close(dx, pool2d_backward_ref(xf, dy, window, stride, padding, "max"), x.dtype.type, scale=4)


def test_max_pool2d_propagates_nan_and_refuses_bad_geometry():
    from pymagma import kernels

    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    y, offsets = kernels.max_pool2d(dev(x), (2, 2), (2, 2))
    assert np.isnan(y.get()[0, 0, 0, 0]) and y.get()[0, 0, 1, 1] == 15 and offsets.get()[0, 0, 1, 1] == 3
    with pytest.raises(ValueError, match="smaller than the window"):
        kernels.max_pool2d(dev(x), (2, 2), (1, 1), ((2, 0), (0, 0)))
    with pytest.raises(TypeError, match="int32"):
        kernels.max_pool2d_backward(dev(np.ones((1, 1, 2, 2), np.float32)), dev(np.zeros((1, 1, 2, 2))), x.shape,
                                    (2, 2), (2, 2))


# ------------------------------------------------------------------------ norm.cu and embeddings.cu
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(rows=st.integers(1, 70), cols=st.integers(1, 300), affine=st.booleans(), seed=st.integers(0, 2**31))
def test_layer_norm_forward_backward_and_parameter_sums(dtype, rms, rows, cols, affine, seed):
    from pymagma import kernels

    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 2 + 1).astype(dtype)
    dy = rng.standard_normal((rows, cols)).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, cols).astype(dtype) if affine else None
    beta = rng.standard_normal(cols).astype(dtype) if affine else None
    y, mean, rstd = kernels.layer_norm(dev(x), None if gamma is None else dev(gamma),
                                       None if beta is None else dev(beta), eps=1e-3, rms=rms)
    wide = x.astype(np.float64)
    mu = np.zeros((rows, 1)) if rms else wide.mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt(((wide - mu) ** 2).mean(axis=1, keepdims=True) + 1e-3)
    xhat = (wide - mu) * inv
    g = np.ones(cols) if gamma is None else gamma.astype(np.float64)
    b = np.zeros(cols) if beta is None else beta.astype(np.float64)
    close(y.get(), xhat * g + b, dtype, scale=10.0)
    close(mean.get(), mu[:, 0], dtype, scale=10.0)
    close(rstd.get(), inv[:, 0], dtype, scale=10.0)
    dx = kernels.layer_norm_backward(dev(dy), dev(x), None if gamma is None else dev(gamma), mean, rstd, rms=rms)
    gg = dy.astype(np.float64) * g
    want = inv * (gg - (0 if rms else gg.mean(axis=1, keepdims=True)) - xhat * (gg * xhat).mean(axis=1, keepdims=True))
    close(dx.get(), want, dtype, scale=40.0 * np.sqrt(cols))
    dgamma, dbeta = kernels.layer_norm_param_grads(dev(dy), dev(x), mean, rstd)
    close(dgamma.get(), (dy.astype(np.float64) * xhat).sum(axis=0), dtype, scale=20.0 * np.sqrt(rows))
    close(dbeta.get(), dy.astype(np.float64).sum(axis=0), dtype, scale=20.0 * np.sqrt(rows))


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(rows=st.integers(1, 9), dim=st.integers(1, 40), n=st.integers(1, 60), seed=st.integers(0, 2**31))
def test_embedding_gather_and_deterministic_scatter_add(dtype, rows, dim, n, seed):
    from pymagma import kernels

    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, dim)).astype(dtype)
    ids = rng.integers(-1, rows + 1, n)  # some outside the table
    dy = rng.standard_normal((n, dim)).astype(dtype)
    out = kernels.embedding(dev(table), dev(ids.astype(np.int64))).get().astype(np.float64)
    inside = (ids >= 0) & (ids < rows)
    np.testing.assert_array_equal(out[inside], table[ids[inside]].astype(np.float64))
    assert np.isnan(out[~inside]).all()  # never a read outside the table
    dtable = [kernels.embedding_backward(dev(dy), dev(ids.astype(np.int64)), rows).get() for _ in range(2)]
    expected = np.zeros((rows, dim))
    for i in np.flatnonzero(inside):
        expected[ids[i]] += dy[i].astype(np.float64)
    close(dtable[0], expected, dtype, scale=4.0 * np.sqrt(n))
    np.testing.assert_array_equal(np.asarray(dtable[0], np.float64), np.asarray(dtable[1], np.float64))


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


def test_norm_and_embedding_arguments_are_checked():
    from pymagma import kernels

    x = dev(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="gamma must have shape"):
        kernels.layer_norm(x, dev(np.ones(2, np.float32)))
    with pytest.raises(TypeError, match="int64"):
        kernels.embedding(x, dev(np.zeros(2, np.int32)))
    with pytest.raises(ValueError, match="indices' shape"):
        kernels.embedding_backward(x, dev(np.zeros(3, np.int64)), 4)


# ------------------------------------------------------------------ per-step values in device memory (step.cu)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_step_kernels_equal_the_eager_kernels_bit_for_bit(dtype):
    """step.cu's updates and dropout, their per-step values read from device memory, against optim.cu's and
    random.cu's with the same values as arguments (what makes a replayed training step equal an eager one)."""
    from pymagma import kernels

    rng = np.random.default_rng(6)
    lr, t, offset = 0.03, 7, 2**40 + 3
    values = dev(np.array([lr, 1 - 0.9**t, 1 - 0.999**t], np.float64))
    offsets = dev(np.array([5, offset], np.uint64).view(np.int64))

    def fresh(k):
        return [dev((rng.standard_normal(37) * (0.1 if i else 1)).astype(dtype)) for i in range(k)]

    cases = {
        "sgd": (3, lambda p, g, v: kernels.sgd_update(p, g, v, lr=lr, momentum=0.9, weight_decay=0.01, nesterov=True),
                lambda p, g, v: kernels.sgd_update_at(p, g, v, values=values, momentum=0.9, weight_decay=0.01,
                                                      nesterov=True)),
        "adamw": (4, lambda p, g, m, v: kernels.adam_update(p, g, m, v, step=t, lr=lr, weight_decay=0.01,
                                                            decoupled=True),
                  lambda p, g, m, v: kernels.adam_update_at(p, g, m, v, values=values, weight_decay=0.01,
                                                            decoupled=True)),
        "rmsprop": (3, lambda p, g, s: kernels.rmsprop_update(p, g, s, lr=lr, weight_decay=0.01),
                    lambda p, g, s: kernels.rmsprop_update_at(p, g, s, values=values, weight_decay=0.01)),
        "adagrad": (3, lambda p, g, s: kernels.adagrad_update(p, g, s, lr=lr),
                    lambda p, g, s: kernels.adagrad_update_at(p, g, s, values=values)),
    }
    if dtype is np.float16:
        del cases["adamw"]  # float16 Adam state is not offered (see test_adam_and_adamw)
    for k, eager, at in cases.values():
        first = fresh(k)
        if k == 4:  # Adam's second moment is a mean of squares: >= 0
            first[3] = dev(np.abs(first[3].get()))
        second = [a.copy() for a in first]
        eager(*first)
        at(*second)
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a.get(), b.get())
    x = fresh(1)[0]
    for got, want in zip(kernels.dropout_at(x, 0.3, seed=11, offsets=offsets, slot=1),
                         kernels.dropout(x, 0.3, seed=11, offset=offset)):
        np.testing.assert_array_equal(got.get(), want.get())


# ------------------------------------------------------------------------------- attention (attention.cu)
def _masked_softmax_ref(x, mask, scale, causal):
    s = x.astype(np.float64) * scale
    keep = np.ones(s.shape, bool)
    if causal:
        keep &= np.tril(np.ones(s.shape[-2:], bool))
    if mask is not None:
        keep &= (mask != 0)[:, None, None, :]
    s = np.where(keep, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.where(keep, np.exp(s - np.where(np.isfinite(top), top, 0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.integers(1, 9)),
       causal=st.booleans(), masked=st.booleans(), scale=st.sampled_from([1.0, 0.35]), seed=st.integers(0, 2**31))
def test_masked_softmax_forward_and_backward(dtype, shape, causal, masked, scale, seed):
    """One fused kernel: scale, causal and key masks (a row with no key left is zeros), softmax; its backward
    ``scale * y * (dy - sum(dy * y))``."""
    from pymagma import kernels

    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, shape).astype(dtype)
    mask = (rng.uniform(size=(shape[0], shape[3])) > 0.3).astype(dtype) if masked else None
    y = kernels.masked_softmax(dev(x), None if mask is None else dev(mask), scale, causal=causal)
    want = _masked_softmax_ref(x, mask, scale, causal)
    close(y.get(), want, dtype, scale=4.0)
    dy = rng.standard_normal(shape).astype(dtype)
    yh = y.get().astype(np.float64)
    dx = kernels.masked_softmax_backward(dev(dy), y, scale)
    d = dy.astype(np.float64)
    close(dx.get(), scale * yh * (d - (d * yh).sum(axis=-1, keepdims=True)), dtype, scale=8.0 * shape[3])


# ----------------------------------------------------------------------------- recurrent gates (recurrent.cu)
def _recurrent_pass(kind, x_proj, w, b, dy, sequences):
    """A whole sequence through the gate kernels as the device backend drives them, with the recurrent products
    (``h @ w``, ``dgates @ w.T``) computed on the host in float64 and rounded to the arrays' dtype: returns every
    buffer the kernels wrote, as float64."""
    from pymagma import array, kernels

    dtype = x_proj.dtype
    n, steps, width = x_proj.shape
    gates_per = 4 if kind == "lstm" else 3
    u = width // gates_per
    up = lambda a: dev(np.asarray(a).astype(dtype))  # noqa: E731
    xd, hs = up(x_proj), dev(np.zeros((steps + 1, n, u), dtype))
    gates, y = dev(np.zeros((steps, n, width), dtype)), (dev(np.zeros((n, steps, u), dtype)) if sequences else None)
    cs, qn = dev(np.zeros((steps + 1, n, u), dtype)), dev(np.zeros((steps, n, u), dtype))
    for t in range(steps):
        rec = up(hs.get()[t].astype(np.float64) @ w)
        if kind == "lstm":
            kernels.lstm_gates_forward(xd, rec, cs, hs, gates, y, t)
        else:
            kernels.gru_gates_forward(xd, rec, up(b), hs, gates, qn, y, t)
    dyd = up(dy)
    dh, dc = dev(np.zeros((n, u), dtype)), dev(np.zeros((n, u), dtype))
    dgates, dx = dev(np.zeros((steps, n, width), dtype)), dev(np.zeros((n, steps, width), dtype))
    for t in range(steps - 1, -1, -1):
        if kind == "lstm":
            kernels.lstm_gates_backward(dyd, dh, dc, gates, cs, dgates, dx, t)
            carried = 0.0
        else:
            kernels.gru_gates_backward(dyd, dh, gates, qn, hs, dgates, dx, t)
            carried = dh.get().astype(np.float64)
        if t:
            dh = up(carried + dgates.get()[t].astype(np.float64) @ w.T)
    out = [hs, gates, dgates, dx] + ([y] if sequences else []) + ([cs] if kind == "lstm" else [qn])
    return [array.to_numpy(a).astype(np.float64) for a in out]


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d is not np.float64])  # float64 is the reference run
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("sequences", [False, True])
def test_recurrent_gate_kernels_in_every_dtype_match_their_float64_run(dtype, kind, sequences):
    """The gate kernels' float64 instantiation is checked against the NumPy LSTM/GRU by the device-backend tests;
    here every other instantiation must compute the same function on the same (rounded) inputs."""
    rng = np.random.default_rng(11)
    n, steps, u = 2, 4, 3
    width = (4 if kind == "lstm" else 3) * u
    lowp = lambda a: a.astype(dtype).astype(np.float64)  # noqa: E731
    x_proj, w, b = lowp(rng.uniform(-1, 1, (n, steps, width))), lowp(rng.uniform(-0.5, 0.5, (u, width))), lowp(
        rng.uniform(-0.5, 0.5, width))
    dy = lowp(rng.standard_normal((n, steps, u) if sequences else (n, u)))
    got = _recurrent_pass(kind, x_proj.astype(dtype), w, b, dy, sequences)
    want = _recurrent_pass(kind, x_proj, w, b, dy, sequences)
    for g, e in zip(got, want):
        close(g, e, dtype, scale=16.0 * steps)
