"""The device backend (magmadnn.backend.device) on pymagma's CPU simulator: every op against the host backend on the
same random data, no device-to-host copies outside ``to_numpy``/``isfinite_all``, in-place updates, ``for_index``,
and the adapters for cuDNN's conventions (asymmetric padding, average-pool counts, batch-norm momentum).

The conformance suite (test_<topic>.py beside this module) checks both backends against loop references; this
module checks the two backends against each other (parity, bit-exact for the random streams) and what only a device
backend has.
"""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend
from magmadnn.backend import ops

HOST = backend.get("host")
pytestmark = pytest.mark.native
DTYPES = (np.float32, np.float64)
CALLED: set[str] = set()


@pytest.fixture(scope="module")
def dev():
    from pymagma import simulator

    with simulator.simulated():
        yield backend.get("gpu")


class Recording:
    """A backend seen through a proxy that records which ops a case calls."""

    def __init__(self, xp):
        self._xp = xp

    def __getattr__(self, attr):
        if attr in ops.OPS:
            CALLED.add(attr)
        return getattr(self._xp, attr)


def tol(dtype):
    return {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-11}


def run(xp, case, inputs):
    """``case`` on fresh copies of ``inputs`` moved to ``xp``; results back as NumPy arrays."""
    moved = [xp.asarray(np.array(a, copy=True)) if isinstance(a, np.ndarray) else a for a in inputs]
    out = case(Recording(xp), *moved)
    out = out if isinstance(out, tuple) else (out,)
    CALLED.add("to_numpy")
    return [np.asarray(xp.to_numpy(o)) if not isinstance(o, (bool, np.bool_)) else np.asarray(o) for o in out]


# ----------------------------------------------------------------------------------------------- the cases
def _creation(xp, a):
    return (xp.zeros((2, 3), a.dtype), xp.ones((3,), a.dtype), xp.full((2, 2), -1.5, a.dtype), xp.zeros_like(a),
            xp.copy(a), xp.asarray([1.0, 2.5]))


def _elementwise(xp, a, b, c):
    return (xp.add(a, b), xp.subtract(b, a), xp.multiply(a, c), xp.divide(a, xp.add(xp.multiply(b, b), 1.0)),
            xp.add(2, a), xp.subtract(0.1, a), xp.multiply(a, 0.1), xp.divide(1.0, xp.add(c, 5)), xp.negative(a),
            xp.sqrt(xp.multiply(a, a)), xp.power(xp.add(xp.multiply(a, a), 0.5), 1.5), xp.isfinite_all(a),
            xp.isfinite_all(xp.divide(a, 0.0)), xp.log(xp.add(xp.multiply(a, a), 0.5)), xp.clip(a, -0.3, 0.4))


def _reductions(xp, a, b, c):
    return (xp.sum(a), xp.sum(a, 1), xp.mean(a, (0, 2), True), xp.argmax(a, 1), xp.argmax(a),
            xp.reshape(xp.transpose(a, (2, 0, 1)), (-1, 2)), xp.transpose(c), xp.sum_to_shape(a, (1, 4, 1)),
            xp.sum_to_shape(a, (4, 5)), xp.bias_add(a, xp.reshape(xp.sum(b, (0, 2)), (4,))), xp.bias_grad(a),
            xp.channel_sum(a), xp.channel_sum(c))


def _matmul(xp, a, b, c):
    return (xp.matmul(b, a), xp.matmul(a, b, transpose_a=True, transpose_b=True),
            xp.matmul(xp.transpose(c, (0, 2, 1)), c), xp.matmul(c, c, transpose_a=True))


def _activations(xp, x, dy):
    out = []
    for kind, alpha in (("sigmoid", 0.0), ("tanh", 0.0), ("relu", 0.0), ("leaky_relu", 0.1), ("elu", 0.7),
                        ("gelu", 0.0), ("gelu_tanh", 0.0), ("silu", 0.0), ("softplus", 0.0), ("softsign", 0.0),
                        ("selu", 0.0), ("hard_sigmoid", 0.0), ("exponential", 0.0)):
        y = xp.activation_forward(x, kind, alpha)
        out += [y, xp.activation_backward(dy, x, y, kind, alpha), xp.activation_backward(dy, x, None, kind, alpha)]
        if kind in ("sigmoid", "tanh", "relu"):
            out.append(xp.activation_backward(dy, None, y, kind))
    return tuple(out)


def _softmax(xp, x, dy):
    s0, s1, ls = xp.softmax(x, 0), xp.softmax(x, axis=-1), xp.log_softmax(x, 1)
    return s0, s1, ls, xp.softmax_backward(dy, s1, -1), xp.softmax_backward(dy, s0, 0), xp.log_softmax_backward(dy, ls)


def _cross_entropy(xp, logits, soft, labels, dloss):
    out = []
    for lab in (labels, soft):
        loss, probs = xp.softmax_cross_entropy(logits, lab)
        out += [loss, probs, xp.softmax_cross_entropy_backward(probs, lab, dloss)]
    return tuple(out)


CONV_GEOMETRY = [((1, 1), ((0, 1), (1, 0)), (1, 1), 1), ((2, 1), ((1, 2), (0, 0)), (1, 2), 2),
                 ((1, 2), ((1, 1), (2, 2)), (2, 1), 1)]  # (stride, padding, dilation, groups)


def _convolution(xp, x, w1, w2, bias):
    out = []
    for stride, padding, dilation, groups in CONV_GEOMETRY:
        wg = w1 if groups == 1 else w2
        saved = {}
        y = xp.conv2d_forward(x, wg, stride, padding, dilation, groups, bias=bias, saved=saved, activation="relu")
        dy = xp.multiply(y, 0.5)
        out += [y, xp.conv2d_backward_data(dy, wg, x.shape, stride, padding, dilation, groups),
                xp.conv2d_backward_filter(dy, x, wg.shape, stride, padding, dilation, groups, saved=saved),
                xp.conv2d_backward_filter(dy, x, wg.shape, stride, padding, dilation, groups),
                xp.conv2d_backward_bias(dy)]
    return tuple(out)


POOL_GEOMETRY = [((2, 2), (2, 2), ((0, 0), (0, 0))), ((3, 3), (2, 1), ((1, 2), (0, 1))),
                 ((2, 3), (1, 2), ((1, 1), (2, 2)))]


def _pooling(xp, x):
    out = []
    for mode in ("max", "avg"):
        for window, stride, padding in POOL_GEOMETRY:
            y, ctx = xp.pool2d_forward(x, mode, window, stride, padding)
            out += [y, xp.pool2d_backward(xp.add(y, 1.0), x, y, ctx, mode, window, stride, padding)]
    return tuple(out)


def _batch_norm(xp, x4, x2, gamma, beta, rm, rv, dy4):
    out = []
    for x, dy in ((x4, dy4), (x2, xp.reshape(xp.copy(x2), x2.shape))):
        y, ctx = xp.batch_norm_train(x, gamma, beta, rm, rv, 0.9, 1e-5)
        out += [y, *xp.batch_norm_backward(dy, x, gamma, ctx), xp.copy(rm), xp.copy(rv),
                xp.batch_norm_infer(x, gamma, beta, rm, rv, 1e-3)]
    return tuple(out)


def _dropout_and_random(xp, x):
    stream = xp.rng(1234)
    y, mask = xp.dropout_forward(x, 0.3, stream)
    return (y, mask, xp.dropout_backward(xp.multiply(x, 2.0), mask), xp.uniform(stream, (7, 3), -1.0, 2.0, x.dtype),
            xp.normal(stream, (5,), 1.0, 0.5, x.dtype), xp.uniform(xp.rng(9), (11,), 0.0, 1.0, x.dtype))


def _updates(xp, p, g, a, b):
    ps = [xp.copy(p) for _ in range(6)]
    sv, am, av, rs, gs = xp.copy(a), xp.copy(a), xp.copy(b), xp.copy(b), xp.copy(b)  # second moments positive
    for _ in range(2):
        xp.sgd_update(ps[0], g, sv, 0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
        xp.sgd_update(ps[1], g, None, 0.1)
        xp.adam_update(ps[2], g, am, av, 2, 0.01, weight_decay=0.1, decoupled=True)
        xp.rmsprop_update(ps[3], g, rs, 0.01, weight_decay=0.01)
        xp.adagrad_update(ps[4], g, gs, 0.01)
        xp.running_stat_update(ps[5], g, 0.9)
    return (*ps, sv, av, am, rs, gs)


def _norms_and_embeddings(xp, x, gamma, beta, dy, table, ids, dids):
    y, ctx = xp.layer_norm_forward(x, gamma, beta, 1e-5)
    dx, dgamma, dbeta = xp.layer_norm_backward(dy, x, gamma, ctx)
    r, rctx = xp.layer_norm_forward(x, gamma, None, 1e-6, rms=True)
    dr = xp.layer_norm_backward(dy, x, gamma, rctx, rms=True)
    g, gctx = xp.layer_norm_forward(xp.reshape(x, (6, 4)), None, None, 1e-5)  # GroupNorm's rows: no parameters
    dg = xp.layer_norm_backward(xp.reshape(dy, (6, 4)), xp.reshape(x, (6, 4)), None, gctx)[0]
    e = xp.embedding_forward(table, ids)
    de = xp.embedding_backward(dids, ids, 5)
    scale = xp.clip_norm_scale([dy, table], 0.5)
    return (y, dx, dgamma, dbeta, r, *dr, g, dg, e, de, scale, xp.clip_norm_scale([xp.multiply(dy, 1e-3)], 1.0))


def _inputs(kind, rng, dtype):
    def r(*shape, low=-2.0, high=2.0):
        return rng.uniform(low, high, shape).astype(dtype)

    if kind in _ATTENTION_INPUTS:
        return [a.astype(dtype) for a in _ATTENTION_INPUTS[kind](r)]
    return {
        "creation": lambda: [r(2, 3)],
        "elementwise": lambda: [r(3, 4), r(4), r(3, 1)],
        "reductions": lambda: [r(3, 4, 5), r(2, 4, 3), r(4, 5)],
        "matmul": lambda: [r(3, 4), r(5, 3), r(2, 3, 4)],
        "activations": lambda: [np.where(np.abs(x := r(4, 6, low=-4, high=4)) < 1e-3, 0.5, x).astype(dtype),
                                r(4, 6)],
        "softmax": lambda: [r(5, 6, low=-20, high=20), r(5, 6)],
        "cross_entropy": lambda: [r(6, 4, low=-10, high=10), r(6, 4, low=0, high=1), rng.integers(0, 4, 6),
                                  r(6, low=0.5, high=2)],
        "convolution": lambda: [r(2, 4, 7, 6), r(4, 4, 3, 3), r(4, 2, 3, 3), r(4)],
        "pooling": lambda: [np.round(r(2, 3, 7, 6)).astype(dtype)],  # ties: the first maximum gets the gradient
        "batch_norm": lambda: [r(3, 4, 2, 3), r(5, 4), r(4, low=0.5), r(4), r(4), r(4, low=0.5, high=2), r(3, 4, 2, 3)],
        "dropout_and_random": lambda: [r(10, 9)],
        "updates": lambda: [r(50), r(50), r(50), r(50, low=0.1, high=1)],
        "shape_routing": lambda: [r(2, 3, 4, 2), r(2, 1, 4, 2), r(2, 4, 3, 2)],
        "norms_and_embeddings": lambda: [r(3, 8, low=-3, high=5), r(8, low=0.5, high=1.5), r(8), r(3, 8), r(5, 4),
                                         rng.integers(0, 5, (3, 6)), r(3, 6, 4)],
        "recurrent": lambda: [r(3, 5, 8), r(2, 8), r(3, 5, 6), r(2, 6), r(6), r(3, 5, 2), r(3, 2)],
        "loss_scaling": lambda: [r(4, 3), r(3), r(5), r(5), np.array(1024.0, dtype), np.array(0.0, dtype)],
        "math_and_indexing": lambda: [r(3, 4), r(4), r(3, 4, low=0.5, high=2), r(3, 2)],
    }[kind]()


# attention
def _attention(xp, x, mask, dy):
    y = xp.masked_softmax(x, mask, 0.5, True)
    return y, xp.masked_softmax(x, None, 1.0, False), xp.masked_softmax_backward(dy, y, 0.5)


_ATTENTION_INPUTS = {"attention": lambda r: [r(2, 3, 4, 5, low=-6, high=6), (r(2, 5, low=0, high=1) > 0.3) * 1.0,
                                             r(2, 3, 4, 5)]}


CASES = {"creation": _creation, "elementwise": _elementwise, "reductions": _reductions, "matmul": _matmul,
         "activations": _activations, "softmax": _softmax, "cross_entropy": _cross_entropy,
         "convolution": _convolution, "pooling": _pooling, "batch_norm": _batch_norm,
         "dropout_and_random": _dropout_and_random, "updates": _updates,
         "norms_and_embeddings": _norms_and_embeddings}
CASES["attention"] = _attention


# -- shape and routing
def _shape_routing(xp, a, b, c):
    joined, last = xp.concatenate([a, b, a], 1), xp.concatenate([xp.transpose(c, (0, 2, 1, 3)), a], 1)
    up = xp.upsample_nearest2d(a, (2, 3))
    return (joined, *xp.split(joined, [3, 1, 3], 1), last, *xp.split(last, [1, 0, 1], 3), up,
            xp.upsample_nearest2d_backward(up, (2, 3)), xp.upsample_nearest2d_backward(up, (1, 2)))


CASES["shape_routing"] = _shape_routing



# -- recurrent layers: every step's output and the last one's, forward and backpropagation through time
def _recurrent(xp, lstm_x, lstm_w, gru_x, gru_w, gru_b, dy_seq, dy_last):
    out = []
    for seq, dy in ((True, dy_seq), (False, dy_last)):
        y, ctx = xp.lstm_forward(lstm_x, lstm_w, seq)
        out += [y, *xp.lstm_backward(dy, lstm_w, ctx)]
        y, ctx = xp.gru_forward(gru_x, gru_w, gru_b, seq)
        out += [y, *xp.gru_backward(dy, gru_w, ctx)]
    return tuple(out)


CASES["recurrent"] = _recurrent


# -- dynamic loss scaling: the flag of finite and non-finite gradients, an update undone or kept, the scale's rule
def _loss_scaling(xp, g, bad, p, saved, scale, counter):
    ok, not_ok = xp.finite_flag([g, p]), xp.finite_flag([g, xp.divide(bad, 0.0)])
    kept, undone = xp.copy(p), xp.copy(p)
    xp.revert_update(kept, saved, ok)
    xp.revert_update(undone, saved, not_ok)
    out = [ok, not_ok, kept, undone]
    for flag in (ok, ok, not_ok, ok):
        xp.loss_scale_update(scale, counter, flag, 2)
        out += [xp.copy(scale), xp.copy(counter)]
    return tuple(out)


CASES["loss_scaling"] = _loss_scaling


def _math_and_indexing(xp, a, b, c, dy):
    """The ops ONNX's operators add (``math`` and ``indexing``)."""
    idx = xp.asarray(np.array([[2, -1], [0, 1]], np.int64))
    along = xp.asarray(np.array([[1, 0], [3, 3], [-1, 2]], np.int64))
    y = xp.math_forward(c, "log")
    bigger = xp.compare(a, b, "greater")
    return (y, xp.math_backward(a, c, y, "log"), xp.math_forward(a, "erf"), xp.maximum(a, b), xp.minimum(a, b),
            bigger, xp.logical(bigger, xp.compare(a, 0.5, "less"), "logical_xor"), xp.logical_not(bigger),
            xp.where(bigger, a, b), xp.pow(c, a), xp.remainder(a, c), xp.astype(a, np.int64),
            xp.reduce_by(a, "prod", (1,), True), xp.take(a, idx, 1), xp.take_backward(xp.take(a, idx, 1), idx, 1, 4),
            xp.take_along_axis(a, along, 1), xp.take_along_axis_backward(dy, along, 1, 4), xp.tile(b, (2, 3)),
            xp.broadcast_to(b, (2, 3, 4)), xp.cumsum(a, 1, True, True))


CASES["math_and_indexing"] = _math_and_indexing
# the same Philox stream on both: bit for bit (normal up to libm's last bits); loss scaling: exact by its rule
EXACT = {"dropout_and_random", "loss_scaling"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_ops_match_the_host_backend(dev, kind, dtype):
    inputs = _inputs(kind, np.random.default_rng(7), dtype)
    with np.errstate(divide="ignore"):  # the elementwise case divides by zero on purpose (isfinite_all)
        got, expected = run(dev, CASES[kind], inputs), run(HOST, CASES[kind], inputs)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape and g.dtype == e.dtype, (kind, i, g.shape, e.shape, g.dtype, e.dtype)
        assert np.isfinite(g).all() or kind == "elementwise", (kind, i)  # no NaN hides in allclose
        if kind in EXACT and i != 4:
            np.testing.assert_array_equal(g, e, err_msg=f"{kind} result {i}")
        else:
            np.testing.assert_allclose(g, e, **tol(dtype), err_msg=f"{kind} result {i}")


def test_the_cases_above_called_every_op(request):
    """Runs after the parity cases: together they called every op of the op set."""
    if request.config.option.keyword:
        pytest.skip("counts the ops of a whole-module run")
    assert set(ops.OPS) - CALLED == set()


def test_the_backend_and_its_views_implement_exactly_the_op_set(dev):
    assert dev.name == "device" and ops.problems(dev) == []
    assert ops.problems(dev.for_index(0)) == []


# --------------------------------------------------------------------------------------------- device residency
@pytest.fixture
def reads(monkeypatch):
    """Counts device-to-host copies."""
    from pymagma import runtime

    count = {"n": 0}
    original = runtime.memcpy_dtoh

    def counted(*args, **kwargs):
        count["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(runtime, "memcpy_dtoh", counted)
    return count


def test_an_mlp_training_step_never_reads_the_device(dev, reads):
    rng = np.random.default_rng(0)
    x, labels = dev.asarray(rng.standard_normal((8, 5)).astype(np.float32)), dev.asarray(rng.integers(0, 3, 8))
    stream = dev.rng(0)
    w1, w2 = dev.normal(stream, (5, 6), 0.0, 0.5), dev.normal(stream, (6, 3), 0.0, 0.5)
    b1, b2 = dev.zeros((6,)), dev.zeros((3,))
    params = [w1, b1, w2, b2]
    m, v = [dev.zeros_like(p) for p in params], [dev.zeros_like(p) for p in params]
    pointers = [p.ptr for p in params]
    for step in (1, 2):
        h_pre = dev.bias_add(dev.matmul(x, w1), b1)
        h = dev.activation_forward(h_pre, "gelu")
        h_drop, mask = dev.dropout_forward(h, 0.2, stream)
        logits = dev.bias_add(dev.matmul(h_drop, w2), b2)
        loss, probs = dev.softmax_cross_entropy(logits, labels)
        dlogits = dev.softmax_cross_entropy_backward(probs, labels, dev.full((8,), 1 / 8))
        dw2, db2 = dev.matmul(h_drop, dlogits, transpose_a=True), dev.bias_grad(dlogits)
        dh = dev.activation_backward(dev.dropout_backward(dev.matmul(dlogits, w2, transpose_b=True), mask), h_pre,
                                     h, "gelu")
        dw1, db1 = dev.matmul(x, dh, transpose_a=True), dev.bias_grad(dh)
        for p, g, mi, vi in zip(params, (dw1, db1, dw2, db2), m, v):
            dev.adam_update(p, g, mi, vi, step, 0.01)
        dev.mean(loss)
    assert reads["n"] == 0, "a training step copied data to the host"
    assert [p.ptr for p in params] == pointers  # updated in place
    assert dev.isfinite_all(w1) is True and reads["n"] == 1  # one scalar read
    dev.to_numpy(w1)
    assert reads["n"] == 2


def test_updates_change_their_arguments_in_place(dev, reads):
    p0, g0 = np.linspace(-1, 1, 6).astype(np.float32), np.full(6, 0.5, np.float32)
    p, g, s = dev.asarray(p0), dev.asarray(g0), dev.zeros((6,))
    dev.rmsprop_update(p, g, s, 0.1)
    assert reads["n"] == 0
    np.testing.assert_allclose(dev.to_numpy(s), 0.1 * g0**2, rtol=1e-6)
    assert not np.allclose(dev.to_numpy(p), p0)


# -------------------------------------------------------------------------------------------------- several GPUs
def test_for_index_creates_on_its_gpu_and_is_cached(dev, monkeypatch):
    from pymagma import _native
    from pymagma.simulator import runtime as simulated_runtime

    monkeypatch.setattr(simulated_runtime, "DEVICE_COUNT", 2)
    monkeypatch.delattr(_native.current, "device_count", raising=False)  # read once per set of libraries
    view = dev.for_index(1)
    assert view is dev.for_index(1) and view.name == "gpu:1" and backend.device_label(view) == "gpu:1"
    assert ops.problems(view) == []
    stream = view.rng(3)
    made = [view.asarray(np.ones(3, np.float32)), view.zeros((2,)), view.ones((2,)), view.full((2,), 2.0),
            view.uniform(stream, (4,)), view.normal(stream, (4,)), view.zeros_like(view.zeros((2,)))]
    assert all(a.device == 1 for a in made)
    assert view.add(made[0], 1.0).device == 1  # ops on existing arrays run on their device
    assert dev.zeros((2,)).device == 0
    with pytest.raises(ValueError, match="must be >= 0"):
        dev.for_index(-1)


# ------------------------------------------------------------------------------------------------------- adapters
def test_asymmetric_convolution_padding_is_explicit_and_saved(dev):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 5, 5)).astype(np.float32), rng.standard_normal((3, 2, 2, 2)).astype(np.float32)
    padding = ((0, 1), (0, 1))  # "same" for a 2x2 kernel: the extra pixel bottom/right
    saved = {}
    y = dev.conv2d_forward(dev.asarray(x), dev.asarray(w), (1, 1), padding, saved=saved)
    assert y.shape == (1, 3, 5, 5) and tuple(saved["padded_x"].shape) == (1, 2, 6, 6)
    expected = HOST.conv2d_forward(x, w, (1, 1), padding)
    np.testing.assert_allclose(dev.to_numpy(y), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(dev.to_numpy(saved["padded_x"])[:, :, 5, :], 0)  # the padded row is zero


def test_average_pooling_counts_only_real_elements(dev):
    x = dev.ones((1, 1, 4, 5))
    for padding in (((1, 1), (1, 1)), ((0, 2), (1, 0))):  # symmetric (cuDNN's own mode) and asymmetric
        y, ctx = dev.pool2d_forward(x, "avg", (3, 3), (1, 1), padding)
        np.testing.assert_allclose(dev.to_numpy(y), 1.0, rtol=1e-6)  # the mean of ones is one, padding excluded
        dx = dev.to_numpy(dev.pool2d_backward(dev.ones(y.shape), x, y, ctx, "avg", (3, 3), (1, 1), padding))
        _, host_ctx = HOST.pool2d_forward(np.ones((1, 1, 4, 5), np.float32), "avg", (3, 3), (1, 1), padding)
        expected = HOST.pool2d_backward(np.ones(y.shape, np.float32), np.ones((1, 1, 4, 5), np.float32), None,
                                        host_ctx, "avg", (3, 3), (1, 1), padding)
        np.testing.assert_allclose(dx, expected, rtol=1e-6)


def test_max_pooling_ignores_padding_even_when_everything_is_negative(dev):
    x = -np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    y, _ = dev.pool2d_forward(dev.asarray(x), "max", (2, 2), (2, 2), ((1, 0), (0, 1)))
    np.testing.assert_array_equal(dev.to_numpy(y), HOST.pool2d_forward(x, "max", (2, 2), (2, 2),
                                                                       ((1, 0), (0, 1)))[0])


def test_batch_norm_momentum_weighs_the_running_statistic(dev):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    rm, rv = dev.full((3,), 10.0, np.float64), dev.full((3,), 2.0, np.float64)
    dev.batch_norm_train(dev.asarray(x), dev.ones((3,), np.float64), dev.zeros((3,), np.float64), rm, rv, 0.75, 1e-5)
    np.testing.assert_allclose(dev.to_numpy(rm), 0.75 * 10.0 + 0.25 * x.mean(0))
    np.testing.assert_allclose(dev.to_numpy(rv), 0.75 * 2.0 + 0.25 * x.var(0, ddof=1))


def test_operands_are_not_promoted_and_scalars_take_the_array_dtype(dev):
    a32, a64 = dev.ones((2,), np.float32), dev.ones((2,), np.float64)
    with pytest.raises(TypeError, match="does not promote"):
        dev.add(a32, a64)
    third = dev.multiply(dev.asarray(np.full(3, 3.0, np.float32)), 0.1)
    assert third.dtype == np.float32
    np.testing.assert_array_equal(dev.to_numpy(third), np.full(3, 3.0, np.float32) * 0.1)  # NumPy's own rounding
    with pytest.raises(TypeError, match="exponent must be a scalar"):
        dev.power(a32, a32)


def test_int32_labels_work_like_int64(dev):
    logits = dev.asarray(np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32))
    l32, l64 = dev.asarray(np.array([0, 2, 1, 2], np.int32)), dev.asarray(np.array([0, 2, 1, 2]))
    np.testing.assert_array_equal(dev.to_numpy(dev.softmax_cross_entropy(logits, l32)[0]),
                                  dev.to_numpy(dev.softmax_cross_entropy(logits, l64)[0]))
