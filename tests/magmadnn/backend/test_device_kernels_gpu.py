"""The device backend's own kernels (magmadnn/backend/device/kernels/: optimizer updates, softmax cross-entropy,
dropout, max pooling, layer norm, embeddings, value checks, the replayed step's kernels, masked softmax, recurrent
gates) on a GPU against plain NumPy references (hypothesis-drawn shapes and values).  The same tests run on the CPU
simulator in test_device_kernels_emulated.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tests.pymagma.helpers import BF16_CASE
from tests.pymagma.test_kernels_gpu import DTYPES, FEW, close, dev, host_values
from tests.reference import pool2d_backward_ref, pool2d_ref
from tests.strategies import pool_cases

pytestmark = pytest.mark.gpu


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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=examples(4), deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**40),
       rate=st.sampled_from([0.0, 0.1, 0.5, 0.9]))
def test_dropout_is_the_uniform_stream_thresholded_in_the_arrays_dtype(dtype, n, seed, offset, rate):
    from magmadnn.backend.device import kernels
    from pymagma import kernels as pymagma_kernels

    x = host_values((n,), seed % 2**32, dtype)
    y, mask = kernels.dropout(dev(x), rate, seed=seed, offset=offset)
    u = pymagma_kernels.uniform((n,), 0.0, 1.0, seed=seed, offset=offset, dtype=dtype).get()
    keep = u >= np.asarray(rate, dtype)
    expected_mask = keep.astype(dtype) * np.asarray(1.0 / (1.0 - rate), dtype)
    np.testing.assert_array_equal(mask.get(), expected_mask)
    np.testing.assert_array_equal(y.get(), (x * expected_mask).astype(dtype))


def test_out_of_range_label_gives_nan_loss():
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    y, offsets = kernels.max_pool2d(dev(x), (2, 2), (2, 2))
    assert np.isnan(y.get()[0, 0, 0, 0]) and y.get()[0, 0, 1, 1] == 15 and offsets.get()[0, 0, 1, 1] == 3
    with pytest.raises(ValueError, match="smaller than the window"):
        kernels.max_pool2d(dev(x), (2, 2), (1, 1), ((2, 0), (0, 0)))
    with pytest.raises(TypeError, match="int32"):
        kernels.max_pool2d_backward(dev(np.ones((1, 1, 2, 2), np.float32)), dev(np.zeros((1, 1, 2, 2))), x.shape,
                                    (2, 2), (2, 2))


@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 6), st.integers(1, 6)),
       pads=st.tuples(*(st.integers(0, 3),) * 4), seed=st.integers(0, 2**16))
def test_pad2d_surrounds_with_zeros_bit_for_bit(dtype, shape, pads, seed):
    """The zero padding of a convolution's input (one launch): NumPy's constant padding, every element of x copied as
    stored (NaN, infinities and negative zero too)."""
    from magmadnn.backend.device import kernels

    x = host_values(shape, seed, dtype)
    flat = x.reshape(-1)
    specials = np.array([np.nan, -np.inf, -0.0]).astype(x.dtype)[: flat.size]
    flat[: specials.size] = specials
    t, b, l, r = pads
    got = kernels.pad2d(dev(x), pads).get()
    expected = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    assert got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def test_pad2d_refuses_bad_arguments():
    from magmadnn.backend.device import kernels

    x = dev(np.ones((1, 1, 2, 2), np.float32))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        kernels.pad2d(dev(np.ones((2, 2), np.float32)), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="top, bottom, left, right"):
        kernels.pad2d(x, (1, 1))
    with pytest.raises(ValueError, match="pad"):
        kernels.pad2d(x, (1, -1, 0, 0))
    with pytest.raises(TypeError, match="floating"):
        kernels.pad2d(dev(np.ones((1, 1, 2, 2), np.int32)), (1, 1, 1, 1))


# ------------------------------------------------------------------------ norm.cu and embeddings.cu
@pytest.mark.parametrize("rms", [False, True], ids=["layer", "rms"])
@pytest.mark.parametrize("dtype", DTYPES)
@FEW
@given(rows=st.integers(1, 70), cols=st.integers(1, 300), affine=st.booleans(), seed=st.integers(0, 2**31))
def test_layer_norm_forward_backward_and_parameter_sums(dtype, rms, rows, cols, affine, seed):
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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


def test_norm_and_embedding_arguments_are_checked():
    from magmadnn.backend.device import kernels

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
    dropout.cu's with the same values as arguments (what makes a replayed training step equal an eager one)."""
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels

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
    from magmadnn.backend.device import kernels
    from pymagma import array

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
