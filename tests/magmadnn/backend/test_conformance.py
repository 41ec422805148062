"""The op set's conformance suite: every op of :mod:`magmadnn.backend.ops` against independent references (written
plainly here with Python loops and the math module; softmax, convolution, pooling and batch norm from
``tests/reference.py``), run on every backend: host (NumPy), strict (arrays that refuse NumPy), device on the CPU
simulator (``pymagma.simulator``) and device on a real GPU (``gpu`` marker).

Inputs are made with NumPy and moved in with ``asarray``; results come back through ``to_numpy``: the only two ops
that cross the boundary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import backend
from magmadnn.backend import ops
from tests import reference
from tests.conftest import examples
from tests.magmadnn.backends import HOST, PARAMS, open_backend
from tests.strategies import FLOATS, conv_cases, pool_cases


@pytest.fixture(scope="module", params=PARAMS)
def xp(request):
    yield from open_backend(request.param)


def put(xp, *arrays):
    """Copies of NumPy arrays as backend arrays (one or a tuple): in-place ops never reach the test's own arrays."""
    out = tuple(None if a is None else xp.asarray(np.array(a, copy=True)) for a in arrays)
    return out[0] if len(out) == 1 else out


def get(xp, *arrays):
    """Backend arrays as NumPy arrays (one or a tuple)."""
    out = tuple(np.asarray(xp.to_numpy(a)) for a in arrays)
    return out[0] if len(out) == 1 else out


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


@st.composite
def arrays(draw, shape=None, min_dims=1, max_dims=3, max_side=4, low=-3.0, high=3.0, dtype=None):
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=min_dims, max_size=max_dims)))
    dtype = dtype or draw(st.sampled_from(FLOATS))
    seed = draw(st.integers(0, 2**31 - 1))
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def elementwise_reference(fn, *arrs):
    """Apply a scalar Python function element by element (with NumPy broadcasting of the operands)."""
    b = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in arrs])
    out = np.empty(b[0].shape)
    for pos in np.ndindex(out.shape):
        out[pos] = fn(*(float(a[pos]) for a in b))
    return out


# ------------------------------------------------------------------------------------------ the interface


def test_backend_implements_exactly_the_op_set(xp):
    assert ops.problems(xp) == []


def test_the_op_set_check_names_what_is_wrong():
    import types

    partial = types.ModuleType("partial_backend")
    partial.name = "partial"
    partial.add = lambda x, y: None
    partial.extra_op = lambda a: a
    found = "\n".join(ops.problems(partial))
    assert "missing op 'subtract'" in found and "op 'add' has signature (x, y)" in found
    assert "'extra_op' is not in the op set" in found
    with pytest.raises(TypeError, match="does not implement the op set"):
        ops.check(partial)
    partial.flat_pack = lambda arrays, out: None  # an optional op, when a backend has it, has its signature
    assert "optional op 'flat_pack' has signature (arrays, out)" in "\n".join(ops.problems(partial))


def test_backend_names(monkeypatch):
    assert backend.get() is HOST and backend.get("host") is HOST and HOST.name == "host"
    assert backend.get(HOST) is HOST
    monkeypatch.setenv("MAGMADNN_BACKEND", "host")
    assert backend.get() is HOST
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        backend.get("tpu")
    with pytest.raises(TypeError, match="backend name"):
        backend.get(3)


# ------------------------------------------------------------------------------------------ creation/transfer


def test_creation_ops(xp):
    assert xp.asarray([1.0, 2.0]).dtype == np.float32
    assert xp.asarray(np.array([1.0, 2.0])).dtype == np.float64
    assert xp.asarray(np.float64(2.0)).dtype == np.float64
    assert xp.asarray(np.array([1, 2])).dtype == np.int64
    assert xp.asarray([1, 2], dtype=np.float64).dtype == np.float64
    z = xp.zeros((2, 3), np.float64)
    assert z.shape == (2, 3) and z.dtype == np.float64 and not get(xp, z).any()
    assert xp.zeros((2,)).dtype == np.float32
    assert get(xp, xp.ones((2,), np.float32)).tolist() == [1.0, 1.0]
    assert get(xp, xp.full((2, 2), 7.5, np.float32)).tolist() == [[7.5, 7.5], [7.5, 7.5]]
    a = put(xp, np.arange(6.0).reshape(2, 3))
    assert xp.zeros_like(a).shape == (2, 3) and xp.zeros_like(a).dtype == np.float64
    c = xp.copy(a)
    xp.sgd_update(c, xp.ones((2, 3), np.float64), None, 1.0)  # an in-place op on the copy leaves a alone
    np.testing.assert_array_equal(get(xp, a), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(get(xp, c), np.arange(6.0).reshape(2, 3) - 1)
    assert isinstance(xp.to_numpy(a), np.ndarray)


# ------------------------------------------------------------------------------------------------ elementwise

BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@given(data=st.data())
def test_binary_elementwise_with_broadcasting(xp, op, data):
    a = data.draw(arrays(max_dims=3))
    dtype = a.dtype
    # b broadcasts against a: some axes of a replaced by 1, maybe fewer leading axes
    b_shape = tuple(data.draw(st.sampled_from([1, n])) for n in a.shape)[data.draw(st.integers(0, a.ndim - 1)) :]
    b = data.draw(arrays(shape=b_shape, dtype=dtype))
    got = getattr(xp, op)(*put(xp, a, b))
    assert got.dtype == dtype
    np.testing.assert_allclose(get(xp, got), elementwise_reference(BINARY[op], a, b), **tol(dtype))
    swapped = getattr(xp, op)(*put(xp, b, a))
    np.testing.assert_allclose(get(xp, swapped), elementwise_reference(BINARY[op], b, a), **tol(dtype))


@pytest.mark.parametrize("op", sorted(BINARY) + ["divide"])
@given(a=arrays(low=0.5, high=3.0), scalar=st.sampled_from([2.0, -0.5, 3]))
def test_python_scalar_operands_take_the_array_dtype(xp, op, a, scalar):
    ref = {**BINARY, "divide": lambda u, v: u / v}[op]
    left, right = getattr(xp, op)(put(xp, a), scalar), getattr(xp, op)(scalar, put(xp, a))
    assert left.dtype == a.dtype and right.dtype == a.dtype
    np.testing.assert_allclose(get(xp, left), elementwise_reference(lambda v: ref(v, scalar), a), **tol(a.dtype))
    np.testing.assert_allclose(get(xp, right), elementwise_reference(lambda v: ref(scalar, v), a), **tol(a.dtype))


@given(a=arrays(), data=st.data())
def test_divide(xp, a, data):
    b = data.draw(arrays(shape=a.shape, low=0.5, high=3.0, dtype=a.dtype))
    got = get(xp, xp.divide(*put(xp, a, b)))
    np.testing.assert_allclose(got, elementwise_reference(lambda u, v: u / v, a, b), **tol(a.dtype))


@given(a=arrays(low=0.1, high=5.0), p=st.sampled_from([0.5, 2.0, 3.0, -1.0]))
def test_negative_sqrt_power(xp, a, p):
    d = put(xp, a)
    for got, ref in ((xp.negative(d), lambda v: -v), (xp.sqrt(d), math.sqrt), (xp.power(d, p), lambda v: v**p)):
        assert got.dtype == a.dtype and got.shape == a.shape
        np.testing.assert_allclose(get(xp, got), elementwise_reference(ref, a), **tol(a.dtype))


@given(a=arrays(low=-2.0, high=5.0), lo=st.floats(-1.0, 1.0), width=st.floats(0.0, 3.0))
def test_log_clip(xp, a, lo, width):
    d = put(xp, a)
    hi = lo + width
    clipped = xp.clip(d, lo, hi)
    assert clipped.dtype == a.dtype and clipped.shape == a.shape
    np.testing.assert_allclose(get(xp, clipped), elementwise_reference(lambda v: min(max(v, lo), hi), a),
                               **tol(a.dtype))
    positive = np.abs(a) + np.asarray(0.1, a.dtype)
    np.testing.assert_allclose(get(xp, xp.log(put(xp, positive))), elementwise_reference(math.log, positive),
                               **tol(a.dtype))


def test_isfinite_all(xp):
    assert xp.isfinite_all(xp.ones((3,), np.float32)) is True
    assert xp.isfinite_all(put(xp, np.array([1.0, np.nan]))) is False
    assert xp.isfinite_all(put(xp, np.array([[1.0], [-np.inf]], np.float32))) is False


# ---------------------------------------------------------------------------------------- reductions and shape


def reduce_reference(a, axis, keepdims, fn):
    """Reduce with a plain Python function over the flattened axes."""
    axes = tuple(range(a.ndim)) if axis is None else tuple(ax % a.ndim for ax in np.atleast_1d(axis))
    out_shape = tuple(1 if i in axes else n for i, n in enumerate(a.shape))
    out = np.empty(out_shape)
    for pos in np.ndindex(out_shape):
        sel = tuple(slice(None) if i in axes else slice(p, p + 1) for i, p in enumerate(pos))
        out[pos] = fn([float(v) for v in a[sel].ravel()])
    return out if keepdims else out.reshape(tuple(n for i, n in enumerate(a.shape) if i not in axes))


@given(a=arrays(max_dims=3), data=st.data(), keepdims=st.booleans())
def test_sum_mean(xp, a, data, keepdims):
    pairs = [st.just((0, -1))] if a.ndim > 1 else []
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1), *pairs))
    t, d = tol(a.dtype), put(xp, a)
    np.testing.assert_allclose(get(xp, xp.sum(d, axis, keepdims)), reduce_reference(a, axis, keepdims, math.fsum), **t)
    mean_ref = reduce_reference(a, axis, keepdims, lambda v: math.fsum(v) / len(v))
    np.testing.assert_allclose(get(xp, xp.mean(d, axis, keepdims)), mean_ref, **t)


@given(a=arrays(min_dims=2, max_dims=2), ties=st.booleans())
def test_argmax(xp, a, ties):
    if ties:
        a = np.round(a).astype(a.dtype)
    got = get(xp, xp.argmax(put(xp, a), axis=1))
    assert got.dtype == np.int64
    for i in range(a.shape[0]):
        row = list(a[i])
        assert got[i] == row.index(max(row))


@given(a=arrays(min_dims=2, max_dims=3))
def test_reshape_transpose(xp, a):
    d = put(xp, a)
    flat = [float(v) for v in a.ravel()]
    assert [float(v) for v in get(xp, xp.reshape(d, (-1,)))] == flat
    axes = tuple(reversed(range(a.ndim)))
    t = get(xp, xp.transpose(d, axes))
    for pos in np.ndindex(a.shape):
        assert t[tuple(reversed(pos))] == a[pos]
    np.testing.assert_array_equal(get(xp, xp.transpose(d)), t)


@given(data=st.data())
def test_sum_to_shape_undoes_broadcasting(xp, data):
    target = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3)))
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    full = lead + tuple(n if n > 1 else data.draw(st.integers(1, 3)) for n in target)
    a = data.draw(arrays(shape=full))
    expected = np.zeros(target)
    for pos in np.ndindex(full):
        dst = tuple(0 if n == 1 else p for p, n in zip(pos[len(lead) :], target))
        expected[dst] += float(a[pos])
    got = xp.sum_to_shape(put(xp, a), target)
    assert got.shape == target
    np.testing.assert_allclose(get(xp, got), expected, **tol(a.dtype))


def matmul_reference(a, b):
    m, k = a.shape
    n = b.shape[1]
    return np.array(
        [[math.fsum(float(a[i, p]) * float(b[p, j]) for p in range(k)) for j in range(n)] for i in range(m)]
    )


@given(m=st.integers(1, 4), k=st.integers(1, 4), n=st.integers(1, 4), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([(), (2,), (1, 2)]), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 999))  # fmt: skip
def test_matmul_with_transposes_and_stacks(xp, m, k, n, ta, tb, batch, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(dtype)
    b = rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(dtype)
    got = xp.matmul(*put(xp, a, b), transpose_a=ta, transpose_b=tb)
    assert got.shape == batch + (m, n) and got.dtype == dtype
    got = get(xp, got)
    for idx in np.ndindex(batch):
        aa = a[idx].T if ta else a[idx]
        bb = b[idx].T if tb else b[idx]
        np.testing.assert_allclose(got[idx], matmul_reference(aa, bb), **tol(dtype))


@given(x=arrays(min_dims=2, max_dims=4))
def test_bias_add_and_grad(xp, x):
    c = x.shape[1]
    bias = np.arange(c, dtype=x.dtype) - 1.5
    got = get(xp, xp.bias_add(*put(xp, x, bias)))
    expected_grad = np.zeros(c)
    for pos in np.ndindex(x.shape):
        assert got[pos] == pytest.approx(x[pos] + bias[pos[1]], rel=1e-6, abs=1e-6)
        expected_grad[pos[1]] += float(x[pos])
    np.testing.assert_allclose(get(xp, xp.bias_grad(put(xp, x))), expected_grad, **tol(x.dtype))



@given(x=arrays(min_dims=2, max_dims=4))
def test_channel_sum(xp, x):
    expected = np.zeros(x.shape[1])
    for pos in np.ndindex(x.shape):
        expected[pos[1]] += float(x[pos])
    got = get(xp, xp.channel_sum(put(xp, x)))
    assert got.shape == (x.shape[1],) and got.dtype == x.dtype
    np.testing.assert_allclose(got, expected, **tol(x.dtype))

# ------------------------------------------------------------------------------------------------ activations


#: The op set's activations (tests/reference.py knows cuDNN's too).
ACTIVATIONS = ("elu", "gelu", "leaky_relu", "relu", "sigmoid", "tanh", "gelu_tanh", "silu", "softplus", "softsign",
               "selu", "hard_sigmoid", "exponential")


def derivative(f, v, h=1e-6):
    return (f(v + h) - f(v - h)) / (2 * h)


@pytest.mark.parametrize("kind", ACTIVATIONS)
@given(x=arrays(low=-4, high=4), alpha=st.sampled_from([0.01, 0.2, 1.0]), seed=st.integers(0, 99))
def test_activation_forward_backward(xp, kind, x, alpha, seed):
    x = np.where(np.abs(x) < 1e-3, 0.5, x).astype(x.dtype)  # keep clear of the kink at 0
    x = np.where(np.abs(np.abs(x) - 3) < 1e-3, 2.5, x).astype(x.dtype)  # and of hard_sigmoid's at +-3
    y = xp.activation_forward(put(xp, x), kind, alpha)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_allclose(get(xp, y), reference.activation_ref(kind, x, alpha), **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    dx = get(xp, xp.activation_backward(*put(xp, dy, x), y, kind, alpha))
    expected = dy * derivative(lambda u: reference.activation_ref(kind, u, alpha), x.astype(np.float64))
    np.testing.assert_allclose(dx, expected, rtol=1e-4, atol=1e-4)
    if kind in xp.FUSED_ACTIVATIONS:  # these need only the output
        np.testing.assert_allclose(get(xp, xp.activation_backward(put(xp, dy), None, y, kind)), expected,
                                   rtol=1e-4, atol=1e-4)


def test_activation_extremes_are_finite_and_unknown_kind_rejected(xp):
    x = put(xp, np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32))
    for kind in ACTIVATIONS:
        if kind != "exponential":  # exp(1000) is inf everywhere
            assert xp.isfinite_all(xp.activation_forward(x, kind, 0.1)), kind
    with pytest.raises(ValueError, match="unknown activation kind 'swish'"):
        xp.activation_forward(x, "swish")


# ---------------------------------------------------------------------------------------------------- softmax


@given(x=arrays(min_dims=2, max_dims=2, low=-20, high=20), seed=st.integers(0, 99))
def test_softmax_log_softmax_and_backward(xp, x, seed):
    p = reference.softmax_ref(x, (1,))
    d = put(xp, x)
    np.testing.assert_allclose(get(xp, xp.softmax(d, axis=1)), p, **tol(x.dtype))
    np.testing.assert_allclose(get(xp, xp.log_softmax(d, axis=-1)), np.log(p), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(get(xp, xp.softmax(put(xp, np.ascontiguousarray(x.T)), axis=0)), p.T, **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(x.shape)
    n, c = x.shape
    jac_dx = np.array([[math.fsum(dy[r, j] * p[r, j] * ((i == j) - p[r, i]) for j in range(c)) for i in range(c)]
                       for r in range(n)])  # fmt: skip
    np.testing.assert_allclose(get(xp, xp.softmax_backward(*put(xp, dy, p), axis=-1)), jac_dx, atol=1e-9)
    log_dx = np.array([[dy[r, i] - p[r, i] * math.fsum(dy[r]) for i in range(c)] for r in range(n)])
    np.testing.assert_allclose(get(xp, xp.log_softmax_backward(*put(xp, dy, np.log(p)), axis=-1)), log_dx, atol=1e-9)


@given(x=arrays(min_dims=2, max_dims=2, low=-30, high=30), seed=st.integers(0, 999), soft=st.booleans())
def test_softmax_cross_entropy(xp, x, seed, soft):
    n, c = x.shape
    rng = np.random.default_rng(seed)
    if soft:
        labels = rng.uniform(0, 1, (n, c)).astype(x.dtype)
        labels /= labels.sum(axis=1, keepdims=True)
        target = labels.astype(np.float64)
    else:
        labels = rng.integers(0, c, n)
        target = np.zeros((n, c))
        target[np.arange(n), labels] = 1
    d_labels = put(xp, labels)
    loss, probs = xp.softmax_cross_entropy(put(xp, x), d_labels)
    assert loss.shape == (n,) and loss.dtype == x.dtype and probs.shape == (n, c)
    p = reference.softmax_ref(x, (1,))
    expected = [math.fsum(-target[i, j] * (float(x[i, j]) - max(x[i]) - math.log(math.fsum(
        math.exp(float(v) - max(x[i])) for v in x[i]))) for j in range(c)) for i in range(n)]  # fmt: skip
    np.testing.assert_allclose(get(xp, loss), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(get(xp, probs), p, **tol(x.dtype))
    dloss = rng.uniform(0.5, 2.0, n).astype(x.dtype)
    d = get(xp, xp.softmax_cross_entropy_backward(probs, d_labels, put(xp, dloss)))
    np.testing.assert_allclose(d, (p - target) * dloss[:, None], rtol=1e-4, atol=1e-5)


def test_softmax_cross_entropy_is_stable_for_huge_logits(xp):
    logits = put(xp, np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]], np.float32))
    loss, probs = xp.softmax_cross_entropy(logits, put(xp, np.array([0, 0])))
    assert xp.isfinite_all(loss) and xp.isfinite_all(probs)
    loss = get(xp, loss)
    assert loss[0] == pytest.approx(0.0, abs=1e-6) and loss[1] == pytest.approx(2e4, rel=1e-6)


# ------------------------------------------------------------------------------------------------ convolution


#: The op set's convolutions: asymmetric padding, groups 1 twice as often as 2, sizes from 3.
CONV_CASES = conv_cases(groups=(1, 1, 2), dtypes=FLOATS, asymmetric=True, side=(3, 7))


@given(case=CONV_CASES, with_bias=st.booleans(), fused=st.sampled_from([None, "relu", "sigmoid", "tanh"]))
def test_conv2d_forward_against_loops(xp, case, with_bias, fused):
    x, w, _, stride, padding, dilation, groups = case
    bias = np.linspace(-1, 1, w.shape[0]).astype(x.dtype) if with_bias else None
    y = xp.conv2d_forward(*put(xp, x, w), stride, padding, dilation, groups, bias=put(xp, bias), activation=fused)
    ref = reference.conv2d_ref(x, w, stride, padding, dilation, groups)
    if with_bias:
        ref = ref + bias.reshape(1, -1, 1, 1)
    if fused is not None:
        ref = reference.activation_ref(fused, ref)
    assert y.dtype == x.dtype and y.shape == ref.shape
    np.testing.assert_allclose(get(xp, y), ref, **tol(x.dtype))


@given(case=CONV_CASES, seed=st.integers(0, 99), reuse=st.booleans())
def test_conv2d_backward_against_loops(xp, case, seed, reuse):
    x, w, _, stride, padding, dilation, groups = case
    saved = {}
    dx_, dw_ = put(xp, x, w)
    y = xp.conv2d_forward(dx_, dw_, stride, padding, dilation, groups, saved=saved if reuse else None)
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, stride, padding, dilation, groups)
    ddy = put(xp, dy)
    dx = xp.conv2d_backward_data(ddy, dw_, x.shape, stride, padding, dilation, groups)
    dw = xp.conv2d_backward_filter(ddy, dx_, w.shape, stride, padding, dilation, groups,
                                   saved=saved if reuse else None)
    assert dx.shape == x.shape and dw.shape == w.shape and dx.dtype == x.dtype
    np.testing.assert_allclose(get(xp, dx), dx_ref, **tol(x.dtype))
    np.testing.assert_allclose(get(xp, dw), dw_ref, **tol(x.dtype))
    db = get(xp, xp.conv2d_backward_bias(ddy))
    np.testing.assert_allclose(db, dy.astype(np.float64).sum(axis=(0, 2, 3)), **tol(x.dtype))


# ---------------------------------------------------------------------------------------------------- pooling


#: The reference mode of each op-set pooling mode: its average counts only the real elements of a window.
REFERENCE_POOL_MODE = {"max": "max", "avg": "avg_exclude_pad"}


@pytest.mark.parametrize("mode", ["max", "avg"])
@given(case=pool_cases(dtypes=FLOATS, values="ties", asymmetric=True), seed=st.integers(0, 99))
def test_pool2d_forward_backward_against_loops(xp, mode, case, seed):
    x, window, stride, padding = case
    ref_mode = REFERENCE_POOL_MODE[mode]
    dx_ = put(xp, x)
    y, ctx = xp.pool2d_forward(dx_, mode, window, stride, padding)
    assert y.dtype == x.dtype
    np.testing.assert_allclose(get(xp, y), reference.pool2d_ref(x, window, stride, padding, ref_mode), **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    dx_ref = reference.pool2d_backward_ref(x, dy, window, stride, padding, ref_mode)  # ties: the first maximum gets it
    dx = xp.pool2d_backward(put(xp, dy), dx_, y, ctx, mode, window, stride, padding)
    assert dx.shape == x.shape
    np.testing.assert_allclose(get(xp, dx), dx_ref, **tol(x.dtype))


def test_pool2d_unknown_mode(xp):
    with pytest.raises(ValueError, match="unknown mode 'min'"):
        xp.pool2d_forward(xp.zeros((1, 1, 2, 2)), "min", (2, 2), (2, 2))


# ------------------------------------------------------------------------------------------------- batch norm


@given(data=st.data(), momentum=st.sampled_from([0.0, 0.9, 0.99]), seed=st.integers(0, 99), unbiased=st.booleans())
def test_batch_norm_train_2d(xp, data, momentum, seed, unbiased):
    x = data.draw(arrays(shape=(data.draw(st.integers(2, 6)), data.draw(st.integers(1, 4)))))
    _check_batch_norm(xp, x, momentum, seed, unbiased)


@given(data=st.data(), momentum=st.sampled_from([0.0, 0.9, 0.99]), seed=st.integers(0, 99), unbiased=st.booleans())
def test_batch_norm_train_4d(xp, data, momentum, seed, unbiased):
    x = data.draw(arrays(shape=(data.draw(st.integers(2, 3)), data.draw(st.integers(1, 3)), 2, 3)))
    _check_batch_norm(xp, x, momentum, seed, unbiased)


def _check_batch_norm(xp, x, momentum, seed, unbiased=True):
    rng = np.random.default_rng(seed)
    c = x.shape[1]
    gamma, beta = rng.uniform(0.5, 2, c).astype(x.dtype), rng.standard_normal(c).astype(x.dtype)
    rm0, rv0 = rng.standard_normal(c).astype(x.dtype), rng.uniform(0.5, 2, c).astype(x.dtype)
    d_x, d_gamma, d_beta, d_rm, d_rv = put(xp, x, gamma, beta, rm0, rv0)
    eps = 1e-5
    y, ctx = xp.batch_norm_train(d_x, d_gamma, d_beta, d_rm, d_rv, momentum, eps, unbiased)
    y, rm, rv = get(xp, y, d_rm, d_rv)
    axes, shape = (0, *range(2, x.ndim)), (1, c) + (1,) * (x.ndim - 2)  # per channel
    g64, b64 = gamma.astype(np.float64).reshape(shape), beta.astype(np.float64).reshape(shape)
    y_ref, mean, _, unbiased_var = reference.batch_norm_ref(x, g64, b64, eps, axes)
    batch_var = unbiased_var if unbiased else x.astype(np.float64).var(axis=axes)
    np.testing.assert_allclose(y, y_ref, rtol=1e-3, atol=1e-3)
    for ch in range(c):
        assert rm[ch] == pytest.approx(momentum * rm0[ch] + (1 - momentum) * mean.ravel()[ch], rel=1e-4, abs=1e-5)
        assert rv[ch] == pytest.approx(momentum * rv0[ch] + (1 - momentum) * batch_var.ravel()[ch], rel=1e-4, abs=1e-5)
    # inference with the updated running statistics
    yi = get(xp, xp.batch_norm_infer(d_x, d_gamma, d_beta, d_rm, d_rv, eps))
    rm64, rv64 = rm.astype(np.float64).reshape(shape), rv.astype(np.float64).reshape(shape)
    np.testing.assert_allclose(yi, (x.astype(np.float64) - rm64) / np.sqrt(rv64 + eps) * g64 + b64, rtol=1e-4,
                               atol=1e-4)
    # backward
    dy = rng.standard_normal(x.shape)
    dx, dgamma, dbeta = get(xp, *xp.batch_norm_backward(put(xp, dy.astype(x.dtype)), d_x, d_gamma, ctx))
    dx_ref, dgamma_ref, dbeta_ref = reference.batch_norm_backward_ref(x, dy, g64, eps, axes)
    np.testing.assert_allclose(dx, dx_ref, rtol=2e-3, atol=2e-3)
    for ch in range(c):
        assert dgamma[ch] == pytest.approx(dgamma_ref.ravel()[ch], rel=1e-3, abs=1e-3)
        assert dbeta[ch] == pytest.approx(dbeta_ref.ravel()[ch], rel=1e-4, abs=1e-4)


def test_batch_norm_rejects_3d(xp):
    z, one = xp.zeros((3,)), xp.ones((3,))
    with pytest.raises(ValueError, match="2-D .* or 4-D"):
        xp.batch_norm_train(xp.zeros((2, 3, 4)), one, z, xp.zeros((3,)), xp.ones((3,)), 0.9, 1e-5)


# ---------------------------------------------------------------------------------------------------- dropout


@given(x=arrays(shape=(40, 50), low=0.5, high=1.5), rate=st.sampled_from([0.0, 0.25, 0.5, 0.8]),
       seed=st.integers(0, 999))  # fmt: skip
def test_dropout_follows_the_rng_protocol(xp, x, rate, seed):
    stream = xp.rng(seed)
    y, mask = xp.dropout_forward(put(xp, x), rate, stream)
    assert stream.offset == 1  # one draw
    y, mask = get(xp, y, mask)
    u = HOST.uniform(HOST.rng(seed), x.shape, 0.0, 1.0, x.dtype)  # the protocol's draw, computed on the host
    expected = np.where(u >= x.dtype.type(rate), x.dtype.type(1.0 / (1.0 - rate)), 0).astype(x.dtype)
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_allclose(y, x * mask, rtol=1e-6)
    assert abs((mask != 0).mean() - (1 - rate)) < 0.07
    dy = np.full(x.shape, 2.0, x.dtype)
    np.testing.assert_allclose(get(xp, xp.dropout_backward(*put(xp, dy, mask))), 2.0 * mask)


def test_dropout_rate_checked(xp):
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\), got 1.0"):
        xp.dropout_forward(xp.ones((3,)), 1.0, xp.rng(0))


# ------------------------------------------------------------------------------------- in-place optimizer steps


def _state(seed, n=5, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(2)] + [rng.uniform(0.1, 1, n).astype(dtype)
                                                                       for _ in range(2)]  # fmt: skip


@given(seed=st.integers(0, 999), momentum=st.sampled_from([0.0, 0.9]), nesterov=st.booleans(),
       wd=st.sampled_from([0.0, 0.01]), dtype=st.sampled_from(FLOATS))  # fmt: skip
def test_sgd_update_one_step(xp, seed, momentum, nesterov, wd, dtype):
    p0, g0, v0, _ = _state(seed, dtype=dtype)
    p, g, v = put(xp, p0, g0, v0)
    lr = 0.1
    xp.sgd_update(p, g, v, lr, momentum=momentum, nesterov=nesterov, weight_decay=wd)
    p, v, g = get(xp, p, v, g)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        if momentum:
            vi = momentum * float(v0[i]) + gi
            step = gi + momentum * vi if nesterov else vi
            assert v[i] == pytest.approx(vi, rel=1e-5, abs=1e-6)
        else:
            step = gi
        assert p[i] == pytest.approx(float(p0[i]) - lr * step, rel=1e-5, abs=1e-6)
    np.testing.assert_array_equal(g, g0)  # the gradient is not modified


@given(seed=st.integers(0, 999), momentum=st.sampled_from([0.0, 0.1, 0.9, 0.99]), dtype=st.sampled_from(FLOATS))
def test_running_stat_update_is_the_batch_norm_rule_in_place(xp, seed, momentum, dtype):
    r0, b0, _, _ = _state(seed, dtype=dtype)
    running, batch = put(xp, r0, b0)
    assert xp.running_stat_update(running, batch, momentum) is None
    running, batch = get(xp, running, batch)
    expected = [momentum * float(r) + (1 - momentum) * float(b) for r, b in zip(r0, b0)]
    np.testing.assert_allclose(running, expected, **tol(dtype))
    np.testing.assert_array_equal(batch, b0)  # the batch statistics are not modified


@given(seed=st.integers(0, 999), step=st.integers(1, 5), wd=st.sampled_from([0.0, 0.1]), decoupled=st.booleans(),
       dtype=st.sampled_from(FLOATS))  # fmt: skip
def test_adam_update_one_step(xp, seed, step, wd, decoupled, dtype):
    p0, g0, m0, v0 = _state(seed, dtype=dtype)
    p, g, m, v = put(xp, p0, g0, m0, v0)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    xp.adam_update(p, g, m, v, step, lr, b1, b2, eps, weight_decay=wd, decoupled=decoupled)
    p, m, v = get(xp, p, m, v)
    for i in range(len(p)):
        pi, gi = float(p0[i]), float(g0[i])
        if wd and decoupled:
            pi = pi * (1 - lr * wd)
        elif wd:
            gi = gi + wd * pi
        mi = b1 * float(m0[i]) + (1 - b1) * gi
        vi = b2 * float(v0[i]) + (1 - b2) * gi * gi
        expected = pi - lr * (mi / (1 - b1**step)) / (math.sqrt(vi / (1 - b2**step)) + eps)
        assert m[i] == pytest.approx(mi, rel=1e-5, abs=1e-6) and v[i] == pytest.approx(vi, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(expected, rel=1e-5, abs=1e-6)


@given(seed=st.integers(0, 999), wd=st.sampled_from([0.0, 0.1]), dtype=st.sampled_from(FLOATS))
def test_rmsprop_and_adagrad_one_step(xp, seed, wd, dtype):
    p0, g0, s0, _ = _state(seed, dtype=dtype)
    p, g, s = put(xp, p0, g0, s0)
    lr, rho, eps = 0.01, 0.9, 1e-7
    xp.rmsprop_update(p, g, s, lr, rho, eps, weight_decay=wd)
    p, s = get(xp, p, s)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        si = rho * float(s0[i]) + (1 - rho) * gi * gi
        assert s[i] == pytest.approx(si, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(float(p0[i]) - lr * gi / (math.sqrt(si) + eps), rel=1e-5, abs=1e-6)
    p, g, s = put(xp, p0, g0, s0)
    xp.adagrad_update(p, g, s, lr, eps, weight_decay=wd)
    p, s = get(xp, p, s)
    for i in range(len(p)):
        gi = float(g0[i]) + wd * float(p0[i])
        si = float(s0[i]) + gi * gi
        assert s[i] == pytest.approx(si, rel=1e-5, abs=1e-6)
        assert p[i] == pytest.approx(float(p0[i]) - lr * gi / (math.sqrt(si) + eps), rel=1e-5, abs=1e-6)


# ----------------------------------------------------------------------------------------------------- random


def test_random_follows_the_rng_protocol(xp):
    stream = xp.rng(3)
    a = get(xp, xp.uniform(stream, (201,), -0.5, 0.25, np.float32))
    assert stream.state == {"seed": 3, "offset": 1}
    np.testing.assert_array_equal(a, get(xp, xp.uniform(xp.rng(3), (201,), -0.5, 0.25, np.float32)))
    assert a.dtype == np.float32 and a.min() >= -0.5 and a.max() <= 0.25
    assert not np.array_equal(a, get(xp, xp.uniform(stream, (201,), -0.5, 0.25, np.float32)))  # the next draw
    assert not np.array_equal(a, get(xp, xp.uniform(xp.rng(4), (201,), -0.5, 0.25, np.float32)))
    # the same numbers as the host's NumPy Philox: the protocol, not each backend's own generator
    np.testing.assert_array_equal(a, HOST.uniform(HOST.rng(3), (201,), -0.5, 0.25, np.float32))
    n = get(xp, xp.normal(xp.rng(0), (20000,), 2.0, 0.5, np.float64))
    np.testing.assert_allclose(n, HOST.normal(HOST.rng(0), (20000,), 2.0, 0.5, np.float64), rtol=1e-12, atol=1e-12)
    assert n.dtype == np.float64 and abs(n.mean() - 2.0) < 0.02 and abs(n.std() - 0.5) < 0.02


# ------------------------------------------------------------------------------------------ optional ops


def _optional(xp, *names):
    if not all(hasattr(xp, n) for n in names):
        pytest.skip(f"backend {xp.name!r} has no {', '.join(names)} (optional: magmadnn.distributed does without)")


@pytest.mark.parametrize("dtype", FLOATS)
def test_host_staging(xp, dtype):
    _optional(xp, "host_empty", "copy_to_host")
    host = xp.host_empty((2, 3), dtype)
    assert isinstance(host, np.ndarray) and host.shape == (2, 3) and host.dtype == dtype and host.flags.c_contiguous
    want = np.arange(6, dtype=dtype).reshape(2, 3)
    out = xp.host_empty((6,), dtype)
    assert xp.copy_to_host(xp.multiply(put(xp, want), 2.0), out) is out  # the queued work is done first
    np.testing.assert_array_equal(out, 2 * want.reshape(-1))
    assert xp.copy_to_host(xp.zeros((0,), dtype), np.empty(0, dtype)).size == 0
    for bad in (np.empty(5, dtype), np.empty(6, np.int32), np.empty((6, 2), dtype)[:, 0]):
        with pytest.raises(ValueError, match="copy_to_host"):
            xp.copy_to_host(put(xp, want), bad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_flat_pack_and_unpack(xp, dtype):
    _optional(xp, "flat_pack", "flat_unpack")
    a, b = np.arange(6, dtype=dtype).reshape(2, 3), np.array([7.0, -8.0], dtype)
    flat = xp.zeros((8,), dtype)
    assert xp.flat_pack([put(xp, a), put(xp, b)], 3.0, flat) is None
    np.testing.assert_array_equal(get(xp, flat), 3 * np.concatenate([a.reshape(-1), b]))
    parts = xp.flat_unpack(flat, [(2, 3), (2,)], 3.0)
    assert [p.shape for p in parts] == [(2, 3), (2,)] and all(p.dtype == dtype for p in parts)
    np.testing.assert_array_equal(get(xp, parts[0]), a)
    np.testing.assert_array_equal(get(xp, parts[1]), b)
    head = xp.flat_unpack(flat, [(2,)], 1.0)  # the values at the start; flat may hold more
    np.testing.assert_array_equal(get(xp, head[0]), 3 * a.reshape(-1)[:2])
    six = xp.full((6,), 5.0, dtype)
    xp.flat_pack([put(xp, a)], 0.0, six)
    np.testing.assert_array_equal(get(xp, six), np.zeros(6))
    with pytest.raises(ValueError, match="flat_pack"):
        xp.flat_pack([put(xp, a)], 1.0, flat)  # 6 values into 8


# ------------------------------------------------------------------------------------------ attention


def masked_softmax_reference(x, mask, scale, causal):
    """Row by row with the math module: keys kept by the causal rule and the mask, exp over their sum."""
    out = np.zeros(x.shape)
    for b, h, i in np.ndindex(x.shape[:3]):
        keys = [j for j in range(x.shape[3]) if not (causal and j > i) and (mask is None or mask[b, j] != 0)]
        if keys:
            top = max(scale * float(x[b, h, i, j]) for j in keys)
            e = {j: math.exp(scale * float(x[b, h, i, j]) - top) for j in keys}
            total = math.fsum(e.values())
            for j in keys:
                out[b, h, i, j] = e[j] / total
    return out


@given(x=arrays(min_dims=4, max_dims=4, max_side=5, low=-6, high=6), causal=st.booleans(), masked=st.booleans(),
       scale=st.sampled_from([1.0, 0.5, 0.125]), seed=st.integers(0, 999))
def test_masked_softmax_and_backward(xp, x, causal, masked, scale, seed):
    rng = np.random.default_rng(seed)
    mask = (rng.uniform(size=(x.shape[0], x.shape[3])) < 0.6).astype(x.dtype) if masked else None
    p = masked_softmax_reference(x, mask, scale, causal)
    y = xp.masked_softmax(put(xp, x), put(xp, mask), scale, causal)
    np.testing.assert_allclose(get(xp, y), p, **tol(x.dtype))
    dy = rng.standard_normal(x.shape).astype(x.dtype)
    dx = np.zeros(x.shape)
    for row in np.ndindex(x.shape[:3]):
        dot = math.fsum(float(dy[row][j]) * p[row][j] for j in range(x.shape[3]))
        dx[row] = [scale * p[row][j] * (float(dy[row][j]) - dot) for j in range(x.shape[3])]
    got = get(xp, xp.masked_softmax_backward(put(xp, dy), put(xp, p.astype(x.dtype)), scale))
    np.testing.assert_allclose(got, dx, **tol(x.dtype))



# ------------------------------------------------------------------------------- shape and routing


@given(data=st.data(), rank=st.integers(1, 4), dtype=st.sampled_from(FLOATS))
def test_concatenate_and_split(xp, data, rank, dtype):
    axis = data.draw(st.integers(-rank, rank - 1))
    base = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: sum(s) > 0))
    parts = [data.draw(arrays(shape=tuple(n if d != axis % rank else s for d, n in enumerate(base)), dtype=dtype))
             for s in sizes]
    joined = xp.concatenate([put(xp, p) for p in parts], axis)
    expected = reference.concatenate_ref(parts, axis % rank)
    assert joined.dtype == dtype
    np.testing.assert_array_equal(get(xp, joined), expected)
    whole = put(xp, expected)
    pieces = xp.split(whole, sizes, axis % rank)
    assert len(pieces) == len(parts)
    for piece, part in zip(pieces, parts):
        np.testing.assert_array_equal(get(xp, piece), part)
    xp.sgd_update(whole, xp.ones(whole.shape, dtype), None, 1.0)  # the pieces are new arrays, not views
    for piece, part in zip(pieces, parts):
        np.testing.assert_array_equal(get(xp, piece), part)


def test_concatenate_and_split_reject_what_does_not_fit(xp):
    a, b = put(xp, np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="concatenate"):
        xp.concatenate([a, b], 1)
    with pytest.raises(TypeError, match="concatenate"):
        xp.concatenate([a, put(xp, np.zeros((2, 3), np.float32))], 0)
    with pytest.raises(ValueError, match="split"):
        xp.split(a, [1, 1], 1)


@given(x=arrays(min_dims=4, max_dims=4), size=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 99))
def test_upsample_nearest2d_and_backward(xp, x, size, seed):
    y = xp.upsample_nearest2d(put(xp, x), size)
    np.testing.assert_array_equal(get(xp, y), reference.upsample_nearest2d_ref(x, size))
    dy = np.random.default_rng(seed).uniform(-1, 1, y.shape).astype(x.dtype)
    expected = np.zeros(x.shape)
    for i in range(dy.shape[2]):
        for j in range(dy.shape[3]):
            expected[:, :, i // size[0], j // size[1]] += dy[:, :, i, j]
    dx = xp.upsample_nearest2d_backward(put(xp, dy), size)
    assert dx.dtype == x.dtype
    np.testing.assert_allclose(get(xp, dx), expected, **tol(x.dtype))

# ---------------------------------------------------------------- normalization, embeddings, clipping
@st.composite
def norm_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))) + (draw(st.integers(2, 9)),)
    return shape, draw(st.sampled_from(FLOATS)), draw(st.booleans()), draw(st.sampled_from(["both", "gamma", None]))


@settings(max_examples=examples(12))
@given(case=norm_cases(), seed=st.integers(0, 2**31 - 1))
def test_layer_norm_forward_backward(xp, case, seed):
    shape, dtype, rms, params = case
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=shape) * 3 + rng.normal()).astype(dtype)
    dy = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, shape[-1]).astype(dtype) if params else None
    beta = rng.normal(size=shape[-1]).astype(dtype) if params == "both" else None
    y, ctx = xp.layer_norm_forward(put(xp, x), put(xp, gamma), put(xp, beta), 1e-3, rms)
    assert y.shape == shape and y.dtype == dtype
    np.testing.assert_allclose(get(xp, y), reference.layer_norm_ref(x, gamma, beta, 1e-3, rms), **tol(dtype))
    dx, dgamma, dbeta = xp.layer_norm_backward(put(xp, dy), put(xp, x), put(xp, gamma), ctx, rms)
    want_dx, want_dgamma, want_dbeta = reference.layer_norm_backward_ref(x, dy, gamma, 1e-3, rms)
    loose = {"rtol": 1e-3, "atol": 1e-4} if dtype == np.float32 else tol(dtype)
    np.testing.assert_allclose(get(xp, dx), want_dx, **loose)
    if gamma is None:
        assert dgamma is None and dbeta is None
    else:
        np.testing.assert_allclose(get(xp, dgamma), want_dgamma, **loose)
        np.testing.assert_allclose(get(xp, dbeta), want_dbeta, **loose)


@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), rows=st.integers(1, 7), dim=st.integers(1, 5),
       ids_shape=st.lists(st.integers(1, 4), min_size=1, max_size=2), seed=st.integers(0, 2**31 - 1))
def test_embedding_forward_backward(xp, dtype, rows, dim, ids_shape, seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(rows, dim)).astype(dtype)
    ids = rng.integers(0, rows, tuple(ids_shape))
    dy = rng.normal(size=tuple(ids_shape) + (dim,)).astype(dtype)
    y = xp.embedding_forward(put(xp, table), put(xp, ids))
    assert y.shape == tuple(ids_shape) + (dim,) and y.dtype == dtype
    np.testing.assert_array_equal(get(xp, y), reference.embedding_ref(table, ids).astype(dtype))
    dtable = xp.embedding_backward(put(xp, dy), put(xp, ids), rows)
    assert dtable.shape == (rows, dim) and dtable.dtype == dtype
    np.testing.assert_allclose(get(xp, dtable), reference.embedding_backward_ref(dy, ids, rows), **tol(dtype))


def test_embedding_gradient_is_the_same_every_run(xp):
    rng = np.random.default_rng(3)
    ids, dy = rng.integers(0, 3, 300), rng.normal(size=(300, 4)).astype(np.float32)  # many repeats of 3 rows
    runs = [get(xp, xp.embedding_backward(put(xp, dy), put(xp, ids), 3)) for _ in range(3)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])


def test_embedding_index_out_of_range(xp):
    table, ids = np.arange(8.0).reshape(4, 2), np.array([0, 4, -1, 3])
    if xp.name in ("host", "strict"):
        with pytest.raises(ValueError, match=r"index 4 is out of range for a table of 4 rows.*\[0, 4\)"):
            xp.embedding_forward(put(xp, table), put(xp, ids))
        return
    y = get(xp, xp.embedding_forward(put(xp, table), put(xp, ids)))  # never a read outside the table: NaN rows
    assert np.isnan(y[1:3]).all() and (y[[0, 3]] == table[[0, 3]]).all()
    dtable = get(xp, xp.embedding_backward(put(xp, np.ones((4, 2))), put(xp, ids), 4))
    np.testing.assert_array_equal(dtable, [[1, 1], [0, 0], [0, 0], [1, 1]])  # outside ids add nothing


@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), scale=st.sampled_from([1e-3, 0.3, 1.0, 50.0]), count=st.integers(1, 3),
       max_norm=st.sampled_from([0.5, 1.0, 4.0]), seed=st.integers(0, 2**31 - 1))
def test_clip_norm_scale(xp, dtype, scale, count, max_norm, seed):
    rng = np.random.default_rng(seed)
    arrays = [(rng.normal(size=rng.integers(1, 6, rng.integers(1, 3))) * scale).astype(dtype) for _ in range(count)]
    got = xp.clip_norm_scale([put(xp, a) for a in arrays], max_norm)
    assert got.shape == () and got.dtype == dtype
    np.testing.assert_allclose(get(xp, got), reference.clip_scale_ref(arrays, max_norm), **tol(dtype))


def test_clip_norm_scale_of_zeros_is_one_and_of_nan_is_nan(xp):
    assert get(xp, xp.clip_norm_scale([xp.zeros((3,), np.float32)], 1.0)) == 1.0
    assert np.isnan(get(xp, xp.clip_norm_scale([put(xp, np.array([1.0, np.nan]))], 1.0)))


# ---------------------------------------------------------------------------------- dynamic loss scaling
@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), count=st.integers(1, 3), bad=st.sampled_from([None, np.inf, -np.inf, np.nan]),
       seed=st.integers(0, 2**31 - 1))
def test_finite_flag(xp, dtype, count, bad, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=rng.integers(1, 5, 2)).astype(dtype) * dtype(1e30) for _ in range(count)]
    if bad is not None:
        arrays[rng.integers(count)].flat[0] = bad
    got = xp.finite_flag([put(xp, a) for a in arrays])
    expected = 1.0 if all(math.isfinite(v) for a in arrays for v in a.ravel().tolist()) else 0.0
    assert got.shape == () and got.dtype == dtype and float(get(xp, got)) == expected


def test_revert_update_keeps_or_restores_bit_for_bit(xp):
    a0 = np.array([1.5, np.nan, -np.inf, 2.0], np.float32)
    saved0 = np.array([-1.0, 2.0, 3.0, 4.25], np.float32)
    for keep, expected in ((1.0, a0), (0.0, saved0)):
        a, saved = put(xp, a0, saved0)
        xp.revert_update(a, saved, xp.asarray(np.array(keep, np.float32)))
        np.testing.assert_array_equal(get(xp, a), expected)
    with pytest.raises(ValueError, match="0-d"):
        xp.revert_update(put(xp, a0), put(xp, saved0), put(xp, np.ones(1, np.float32)))


@pytest.mark.parametrize("keras", [False, True])
def test_adam_update_reads_its_values_vector(xp, keras):
    """``lr`` given as the float64 vector {lr, 1 - beta1^t, 1 - beta2^t} is the same step as ``step=t``."""
    rng = np.random.default_rng(3)
    p0, g, m0, v0 = (rng.normal(size=5).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)
    out = []
    for step, lr in ((3, 0.01), (1, np.array([0.01, 1 - 0.9**3, 1 - 0.999**3]))):
        p, m, v = put(xp, p0, m0, v0)
        lr = xp.asarray(lr) if isinstance(lr, np.ndarray) else lr
        xp.adam_update(p, put(xp, g), m, v, step, lr, weight_decay=0.1, decoupled=True, keras=keras)
        out.append(get(xp, p, m, v))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_loss_scale_update_follows_keras_rule(xp):
    """A flag sequence through the op against the rule written plainly: grow after 3 finite steps in a row,
    halve and reset on a non-finite one."""
    flags = [1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1]
    scale, counter = put(xp, np.array(8.0, np.float32), np.array(0.0, np.float32))
    s, c = 8.0, 0
    for f in flags:
        xp.loss_scale_update(scale, counter, xp.asarray(np.array(f, np.float32)), 3)
        if f:
            c += 1
            if c == 3:
                s, c = s * 2, 0
        else:
            s, c = s / 2, 0
        assert (float(get(xp, scale)), float(get(xp, counter))) == (s, c)
    with pytest.raises(TypeError, match="dtype"):
        xp.loss_scale_update(scale, counter, xp.asarray(np.array(1.0)), 3)

# ---------------------------------------------------------------------------------- recurrent layers
# The forward against tests/reference.py's step-by-step LSTM/GRU; the backward against central differences of that
# reference (float64, so the check is tight), on every backend.

from hypothesis import settings  # noqa: E402

from tests.conftest import examples  # noqa: E402

RECURRENT = {"lstm": (4, reference.lstm_ref), "gru": (3, reference.gru_ref)}


def _recurrent_case(kind, n, steps, units, features_seed):
    gates, ref = RECURRENT[kind]
    rng = np.random.default_rng(features_seed)
    args = [rng.uniform(-2, 2, (n, steps, gates * units)), rng.uniform(-1, 1, (units, gates * units))]
    if kind == "gru":
        args.append(rng.uniform(-1, 1, gates * units))
    return args, ref


def _recurrent_vjp_reference(ref, args, dy, return_sequences, eps=1e-6):
    """Central differences of sum(ref(args) * dy) with respect to every argument."""
    def scalar(values):
        y = ref(*values)
        return float(np.sum((y if return_sequences else y[:, -1]) * dy))

    grads = []
    for k, a in enumerate(args):
        g = np.zeros_like(a)
        for pos in np.ndindex(a.shape):
            plus, minus = [v.copy() for v in args], [v.copy() for v in args]
            plus[k][pos] += eps
            minus[k][pos] -= eps
            g[pos] = (scalar(plus) - scalar(minus)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@given(n=st.integers(1, 3), steps=st.integers(1, 4), units=st.integers(1, 3), seed=st.integers(0, 999),
       sequences=st.booleans(), dtype=st.sampled_from(FLOATS))
def test_recurrent_forward_against_the_reference(xp, kind, n, steps, units, seed, sequences, dtype):
    args, ref = _recurrent_case(kind, n, steps, units, seed)
    y, _ = getattr(xp, f"{kind}_forward")(*put(xp, *[a.astype(dtype) for a in args]), return_sequences=sequences)
    expected = ref(*[a.astype(dtype) for a in args])
    got = get(xp, y)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected if sequences else expected[:, -1], **tol(dtype))


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@settings(max_examples=examples(10))  # each example differentiates the reference numerically
@given(n=st.integers(1, 2), steps=st.integers(1, 3), units=st.integers(1, 2), seed=st.integers(0, 999),
       sequences=st.booleans())
def test_recurrent_backward_against_differences_of_the_reference(xp, kind, n, steps, units, seed, sequences):
    args, ref = _recurrent_case(kind, n, steps, units, seed)
    dy = np.random.default_rng(seed + 1).standard_normal((n, steps, units) if sequences else (n, units))
    moved = put(xp, *args)
    _, ctx = getattr(xp, f"{kind}_forward")(*moved, return_sequences=sequences)
    grads = getattr(xp, f"{kind}_backward")(put(xp, dy), moved[1], ctx)
    expected = _recurrent_vjp_reference(ref, args, dy, sequences)
    assert len(grads) == len(expected)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(get(xp, g), e, rtol=1e-6, atol=1e-8)
