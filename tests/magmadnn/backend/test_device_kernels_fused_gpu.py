"""The device backend's fused kernels (fewer launches per training step) on a GPU: multi-tensor optimizer updates
(optim.cu's ``*_many``), bias + activation epilogues (epilogue.cu), the mean softmax cross-entropy and its gradient
(loss.cu), layer norm's backward with its parameter sums (norm.cu) and attention over interleaved heads
(attention.cu), against the single-tensor kernels they replace (bit for bit where the arithmetic is the same) and
NumPy references. The same tests run on the CPU simulator in test_device_kernels_emulated.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.pymagma.test_kernels_gpu import DTYPES, FEW, RTOL, close, dev

pytestmark = pytest.mark.gpu


# -------------------------------------------------------------------------------- multi-tensor updates
def _tensors(rng, dtype, sizes, count):
    """``count`` lists of tensors of ``sizes`` (the last list, a second moment, >= 0)."""
    out = [[(rng.standard_normal(n) * (0.1 if i else 1)).astype(dtype) for n in sizes] for i in range(count)]
    out[-1] = [np.abs(a) for a in out[-1]]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_tensor_updates_equal_the_single_tensor_kernels_bit_for_bit(dtype):
    """More tensors than one launch takes (MANY), of mixed sizes (one empty), each rule in one call: every tensor
    ends as the single-tensor kernel leaves it, and the replayed form (values read from device memory) too."""
    from magmadnn.backend.device import kernels

    rng = np.random.default_rng(3)
    sizes = [int(n) for n in rng.integers(1, 40, kernels.MANY + 5)] + [0, 7]
    lr, t = 0.03, 5
    values = dev(np.array([lr, 1 - 0.9**t, 1 - 0.999**t], np.float64))
    rules = {
        "sgd": (3, lambda p, g, v: kernels.sgd_update(p, g, v, lr=lr, momentum=0.9, weight_decay=0.01, nesterov=True,
                                                      keras=True),
                lambda ps, gs, vs, **at: kernels.sgd_update_many(ps, gs, vs, momentum=0.9, weight_decay=0.01,
                                                                 nesterov=True, keras=True, **at)),
        "adamw": (4, lambda p, g, m, v: kernels.adam_update(p, g, m, v, step=t, lr=lr, weight_decay=0.01,
                                                            decoupled=True),
                  lambda ps, gs, ms, vs, **at: kernels.adam_update_many(ps, gs, ms, vs, step=t, weight_decay=0.01,
                                                                        decoupled=True, **at)),
        "rmsprop": (3, lambda p, g, s: kernels.rmsprop_update(p, g, s, lr=lr, weight_decay=0.01),
                    lambda ps, gs, ss, **at: kernels.rmsprop_update_many(ps, gs, ss, weight_decay=0.01, **at)),
        "adagrad": (3, lambda p, g, s: kernels.adagrad_update(p, g, s, lr=lr, keras=True),
                    lambda ps, gs, ss, **at: kernels.adagrad_update_many(ps, gs, ss, keras=True, **at)),
    }
    if dtype is np.float16:
        del rules["adamw"]  # float16 Adam state is not offered (see test_device_kernels_gpu)
    for count, one, many in rules.values():
        start = _tensors(rng, dtype, sizes, count)
        singles = [[dev(a) for a in column] for column in start]
        for row in zip(*singles):
            if row[0].size:
                one(*row)
        for at in ({"lr": lr}, {"values": values}):
            together = [[dev(a) for a in column] for column in start]
            many(*together, **at)
            for got, want in zip(together, singles):
                for a, b in zip(got, want):
                    np.testing.assert_array_equal(a.get(), b.get())


def test_multi_tensor_updates_check_every_tensor_before_the_first_launch():
    from magmadnn.backend.device import kernels

    p = [dev(np.ones(3, np.float32)) for _ in range(2)]
    before = [a.get() for a in p]
    with pytest.raises(ValueError, match="shape"):
        kernels.sgd_update_many(p, [dev(np.ones(3, np.float32)), dev(np.ones(4, np.float32))], lr=0.1)
    with pytest.raises(ValueError, match="velocity"):
        kernels.sgd_update_many(p, p, [None, None], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="one entry per parameter"):
        kernels.adam_update_many(p, p, p[:1], p, lr=0.1)
    for a, b in zip(p, before):
        np.testing.assert_array_equal(a.get(), b)


# ------------------------------------------------------------------------------------------ epilogues
ACTIVATIONS = ("relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "gelu_tanh", "silu", "softplus", "softsign",
               "selu", "hard_sigmoid", "exponential")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ACTIVATIONS)
@FEW
@given(shape=st.sampled_from([(5, 7), (3, 4, 2, 3), (1, 300)]), seed=st.integers(0, 2**31))
def test_bias_activation_and_its_backward(dtype, kind, shape, seed):
    """y = act(x + b) over axis 1 with x + b rounded to the dtype first (as bias_add stores it); dx the activation's
    gradient (from z or y), db the sum of dx as stored over every axis but 1."""
    from magmadnn.backend.device import kernels

    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, shape).astype(dtype)
    b = rng.uniform(-1, 1, shape[1]).astype(dtype)
    z = (x + b.reshape((1, -1) + (1,) * (len(shape) - 2))).astype(dtype)
    z = np.where(np.abs(z.astype(np.float64)) < 0.05, 0.5, z).astype(dtype)  # clear of relu's kink
    x = (z - b.reshape((1, -1) + (1,) * (len(shape) - 2))).astype(dtype)
    z = (x + b.reshape((1, -1) + (1,) * (len(shape) - 2))).astype(dtype)
    y, kept = kernels.bias_activation(dev(x), dev(b), kind, 0.2)
    close(y.get(), reference.activation_ref(kind, z.astype(np.float64), 0.2), dtype, scale=10.0)
    assert (kept is None) == (kind in ("relu", "sigmoid", "tanh", "exponential"))
    if kept is not None:
        np.testing.assert_array_equal(kept.get(), z)
    dy = rng.standard_normal(shape).astype(dtype)
    dx, db = kernels.bias_activation_backward(dev(dy), kept, y, kind, 0.2)
    wide = z.astype(np.float64)
    slope = (reference.activation_ref(kind, wide + 1e-6, 0.2) - reference.activation_ref(kind, wide - 1e-6, 0.2))
    want = dy.astype(np.float64) * slope / 2e-6  # central differences: good to about 1e-8 in float64
    np.testing.assert_allclose(dx.get().astype(np.float64), want, rtol=max(RTOL[dtype] * 200, 1e-6),
                               atol=max(RTOL[dtype] * 200, 1e-6))
    axes = (0, *range(2, len(shape)))
    close(db.get(), dx.get().astype(np.float64).sum(axis=axes), dtype, scale=10.0 * np.sqrt(dx.size))


@pytest.mark.parametrize("kind", ACTIVATIONS)
def test_bias_activation_keeps_nan_and_infinity(kind):
    """A NaN stays NaN through every kind (as cuDNN's and NumPy's ReLU: an overflowing half step must show), and
    infinities go where the activation sends them."""
    from magmadnn.backend.device import kernels

    x = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
    y, _ = kernels.bias_activation(dev(x), dev(np.zeros(4, np.float32)), kind, 0.2)
    with np.errstate(all="ignore"):
        want = reference.activation_ref(kind, x.astype(np.float64), 0.2)
    got = y.get()
    assert np.isnan(got[0, 0])
    np.testing.assert_allclose(got[0, 1:], want[0, 1:], rtol=1e-6)


# --------------------------------------------------------------------------------------------- losses
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("indices", [True, False], ids=["labels", "targets"])
@FEW
@given(rows=st.sampled_from([1, 5, 300, 7000]), classes=st.integers(1, 12), seed=st.integers(0, 2**31))
def test_mean_softmax_cross_entropy_and_its_gradient(dtype, indices, rows, classes, seed):
    """The mean loss (one launch up to MEAN_IN_ONE_LAUNCH elements, two beyond), the softmax, and the gradient of
    the mean from a 0-d upstream gradient: (p - target) * g / rows."""
    from magmadnn.backend.device import kernels

    rng = np.random.default_rng(seed)
    logits = rng.uniform(-4, 4, (rows, classes)).astype(dtype)
    labels = rng.integers(0, classes, rows)
    targets = np.eye(classes)[labels] if indices else rng.dirichlet(np.ones(classes), rows)
    given_labels = dev(labels.astype(np.int64)) if indices else dev(targets.astype(dtype))
    loss, probs = kernels.softmax_cross_entropy_mean(dev(logits), given_labels)
    assert loss.shape == () and probs.shape == logits.shape
    wide = logits.astype(np.float64)
    logp = wide - wide.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    targets = (targets if indices else targets.astype(dtype)).astype(np.float64)
    close(loss.get(), -(targets * logp).sum(1).mean(), dtype, scale=20.0 * np.sqrt(classes))
    close(probs.get(), np.exp(logp), dtype, scale=10.0)
    g = np.asarray(rng.uniform(0.5, 2), dtype)
    got = kernels.softmax_cross_entropy_backward(probs, given_labels, dev(g).reshape(()), mean=True).get()
    p = probs.get().astype(np.float64)
    share = float(np.asarray(g.astype(np.float64) / rows, dtype))
    close(got, (p * targets.sum(1, keepdims=True) - targets) * share, dtype, scale=10.0)
    one = kernels.softmax_cross_entropy_backward(probs, given_labels, None, mean=True).get()  # loss.backward()'s 1
    close(one, (p * targets.sum(1, keepdims=True) - targets) * float(np.asarray(1.0 / rows, dtype)), dtype, scale=10.0)


def _keras_xent_reference(p, t, w, binary, smoothing, eps, scale, g):
    """Keras' cross entropy of probabilities, weighted and reduced, and its gradient, in float64 NumPy (the clip's
    bounds as the kernels' arithmetic type holds them)."""
    p_dtype = p.dtype
    p, t, w = (a.astype(np.float64) for a in (p, t, w))
    cols = p.shape[1]
    if binary:
        ts, q, total = t * (1 - smoothing) + smoothing / 2, p, 1.0
    else:
        total = p.sum(1, keepdims=True)
        ts, q = t * (1 - smoothing) + smoothing / cols, p / total
    acc = np.float64 if p_dtype == np.float64 else np.float32  # the kernels' arithmetic type: the clip's bounds
    lo, hi = float(acc(eps)), float(acc(1) - acc(eps))
    c = np.clip(q, lo, hi)
    inside = (q > lo) & (q < hi)
    if binary:
        rows = -(ts * np.log(c) + (1 - ts) * np.log(1 - c)).mean(1)
        grad = np.where(inside, (c - ts) / (c * (1 - c)), 0.0) / cols
    else:
        rows = -(ts * np.log(c)).sum(1)
        dq = np.where(inside, -ts / np.where(inside, q, 1.0), 0.0)
        grad = (dq - (dq * q).sum(1, keepdims=True)) / total
    return scale * (w * rows).sum(), grad * (scale * g) * w[:, None]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "categorical"])
@pytest.mark.parametrize("rows", [1, 9, 300])
def test_keras_cross_entropy_of_probabilities_and_its_gradient(dtype, binary, rows):
    """Keras' cross entropy of probabilities (clip, logs, weights, reduction: one launch; its gradient: one more)
    against NumPy, with label smoothing, clipped values (no gradient there) and rows that do not sum to 1."""
    from magmadnn.backend.device import kernels

    rng = np.random.default_rng(rows)
    cols = 3 if binary else 5
    p = rng.uniform(0.05, 0.95, (rows, cols))
    p[0, 0], p[-1, -1] = 0.0, (1.0 if binary else 0.0)
    t = rng.integers(0, 2, (rows, cols)).astype(np.float64) if binary else np.eye(cols)[rng.integers(0, cols, rows)]
    w = rng.uniform(0.5, 2.0, rows)
    p, packed = p.astype(dtype), np.concatenate([t, w[:, None]], 1).astype(dtype)
    smoothing, scale, g = 0.1, 1.0 / rows, 1.5
    loss = kernels.keras_prob_xent(dev(p), dev(packed), binary, smoothing, 1e-7, scale)
    grad = kernels.keras_prob_xent_backward(dev(p), dev(packed), dev(np.asarray(g, dtype)).reshape(()), binary,
                                            smoothing, 1e-7, scale)
    one = kernels.keras_prob_xent_backward(dev(p), dev(packed), None, binary, smoothing, 1e-7, scale)
    weights = packed[:, -1].astype(np.float64)
    want, want_grad = _keras_xent_reference(p, packed[:, :-1], weights, binary, smoothing, 1e-7, scale, g)
    assert loss.shape == () and grad.shape == p.shape
    close(loss.get(), want, dtype, scale=20.0)
    close(grad.get(), want_grad, dtype, scale=20.0)
    close(one.get(), want_grad / g, dtype, scale=20.0)
    with pytest.raises(ValueError, match=r"packed targets must have shape"):
        kernels.keras_prob_xent(dev(p), dev(packed[:, :-1]), binary, smoothing, 1e-7, scale)


# ---------------------------------------------------------------------------------------- layer norm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [3, 63, 64, 700])
def test_layer_norm_backward_with_parameters_equals_the_three_kernels_bit_for_bit(dtype, rows):
    from magmadnn.backend.device import kernels

    rng = np.random.default_rng(rows)
    x, dy = (rng.standard_normal((rows, 37)).astype(dtype) for _ in range(2))
    gamma, beta = rng.uniform(0.5, 1.5, 37).astype(dtype), rng.standard_normal(37).astype(dtype)
    for rms in (False, True):
        _, mean, rstd = kernels.layer_norm(dev(x), dev(gamma), dev(beta), eps=1e-3, rms=rms)
        fused = kernels.layer_norm_backward_params(dev(dy), dev(x), dev(gamma), mean, rstd, rms=rms)
        dx = kernels.layer_norm_backward(dev(dy), dev(x), dev(gamma), mean, rstd, rms=rms)
        apart = (dx, *kernels.layer_norm_param_grads(dev(dy), dev(x), mean, rstd))
        for a, b in zip(fused, apart):
            np.testing.assert_array_equal(a.get(), b.get())


# ------------------------------------------------------------------------------------------ attention
def _split(a, heads):
    b, t, w = a.shape
    return a.reshape(b, t, heads, w // heads).transpose(0, 2, 1, 3)


def _merge(a):
    b, h, t, d = a.shape
    return a.transpose(0, 2, 1, 3).reshape(b, t, h * d)


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(batch=st.integers(1, 3), heads=st.integers(1, 3), tq=st.integers(1, 6), tk=st.integers(1, 6),
       dk=st.integers(1, 5), dv=st.integers(1, 5), causal=st.booleans(), masked=st.booleans(),
       seed=st.integers(0, 2**31))
def test_attention_over_interleaved_heads_and_its_backward(dtype, batch, heads, tq, tk, dk, dv, causal, masked,
                                                           seed):
    """o = merge(masked_softmax(q_h k_h^T) v_h) and its gradients, against float64 NumPy on split heads (rows with
    no key left attend to nothing: zeros)."""
    from magmadnn.backend.device import kernels

    from .test_device_kernels_gpu import _masked_softmax_ref

    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((batch, tq, heads * dk)).astype(dtype), rng.standard_normal(
        (batch, tk, heads * dk)).astype(dtype)
    v = rng.standard_normal((batch, tk, heads * dv)).astype(dtype)
    mask = (rng.random((batch, tk)) > 0.3).astype(dtype) if masked else None
    scale = 1 / np.sqrt(dk)
    o, p = kernels.attention_heads(dev(q), dev(k), dev(v), heads, None if mask is None else dev(mask), scale, causal)
    qh, kh, vh = (_split(a.astype(np.float64), heads) for a in (q, k, v))
    want_p = _masked_softmax_ref(qh @ kh.transpose(0, 1, 3, 2), mask, scale, causal)
    close(p.get(), want_p, dtype, scale=20.0 * dk)
    close(o.get(), _merge(want_p @ vh), dtype, scale=40.0 * dk * tk)
    dout = rng.standard_normal(o.shape).astype(dtype)
    dq, dk_, dv_ = kernels.attention_heads_backward(dev(dout), dev(q), dev(k), dev(v), p, heads, scale)
    ph, doh = p.get().astype(np.float64), _split(dout.astype(np.float64), heads)
    dp = doh @ vh.transpose(0, 1, 3, 2)
    ds = scale * ph * (dp - (dp * ph).sum(-1, keepdims=True))
    size = 80.0 * (dk + dv) * (tq + tk)
    close(dq.get(), _merge(ds @ kh), dtype, scale=size)
    close(dk_.get(), _merge(ds.transpose(0, 1, 3, 2) @ qh), dtype, scale=size)
    close(dv_.get(), _merge(ph.transpose(0, 1, 3, 2) @ doh), dtype, scale=size)
