"""MultiHeadAttention and Dense/activations on any rank: against the NumPy reference and PyTorch, finite-difference
gradients, save/load, host vs simulated-device training, and no host round trip on the device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import F, Tensor, models, optimizers
from magmadnn import layers as L
from tests import reference
from tests.conftest import examples
from tests.magmadnn._gradcheck import check_gradients


def _rand(rng, *shape):
    return rng.standard_normal(shape)


def _layer_weights(layer, rng):
    """Random weights (biases too) put into a built layer, as a dict of NumPy arrays."""
    weights = {}
    for name, param in layer.params.items():
        weights[name] = 0.5 * rng.standard_normal(param.shape)
        param.data = layer.xp.asarray(weights[name].astype(layer.dtype))
    return weights


def _torch_mha(query, key, value, w, heads, key_mask, causal):
    """The same attention in PyTorch: projections, ``scaled_dot_product_attention`` with a boolean mask, output."""
    t = torch.from_numpy

    def project(x, name):
        y = t(x) @ t(w[f"{name}_kernel"])
        y = y + t(w[f"{name}_bias"]) if f"{name}_bias" in w else y
        return y.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)

    q, k, v = project(query, "query"), project(key, "key"), project(value, "value")
    tq, tk = q.shape[2], k.shape[2]
    allowed = torch.ones(query.shape[0], 1, tq, tk, dtype=torch.bool)
    if causal:
        allowed = allowed & torch.tril(torch.ones(tq, tk, dtype=torch.bool))
    if key_mask is not None:
        allowed = allowed & t(key_mask != 0)[:, None, None, :]
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    o = o.transpose(1, 2).reshape(query.shape[0], tq, -1) @ t(w["output_kernel"])
    return (o + t(w["output_bias"]) if "output_bias" in w else o).numpy()


@st.composite
def attention_cases(draw):
    b, tq, tk = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    form = draw(st.sampled_from(["self", "qv", "qkv"]))
    causal, masked = draw(st.booleans()), draw(st.booleans())
    tk = tq if form == "self" else tk
    dims = (draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    heads, key_dim = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    value_dim = draw(st.sampled_from([None, draw(st.integers(1, 4))]))
    return (b, tq, tk, form, causal, masked, dims, heads, key_dim, value_dim, draw(st.booleans()),
            draw(st.integers(0, 2**31 - 1)))


@settings(max_examples=examples(25))
@given(case=attention_cases())
def test_multi_head_attention_matches_the_reference_and_pytorch(case):
    b, tq, tk, form, causal, masked, (dq, dk, dv), heads, key_dim, value_dim, use_bias, seed = case
    rng = np.random.default_rng(seed)
    query = _rand(rng, b, tq, dq)
    key, value = (query, query) if form == "self" else (_rand(rng, b, tk, dk), _rand(rng, b, tk, dv))
    key = value if form == "qv" else key
    key_mask = None
    if masked:
        key_mask = (rng.uniform(size=(b, tk)) < 0.7).astype(np.float64)
        key_mask[:, 0] = 1.0  # every query keeps a key: PyTorch gives NaN for a row with none, magmadnn zeros
    inputs = {"self": [query], "qv": [query, value], "qkv": [query, key, value]}[form]
    inputs = inputs + ([key_mask] if masked else [])
    layer = L.MultiHeadAttention(heads, key_dim, value_dim, causal=causal, use_bias=use_bias, dtype="float64")
    layer(inputs if len(inputs) > 1 else inputs[0])
    w = _layer_weights(layer, rng)
    got = layer(inputs if len(inputs) > 1 else inputs[0]).numpy()
    assert got.shape == (b, tq, dq)
    expected = reference.multi_head_attention_ref(query, key, value, w, heads, key_mask, causal)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got, _torch_mha(query, key, value, w, heads, key_mask, causal), rtol=1e-10,
                               atol=1e-12)


def test_weights_move_to_and_from_torch_multihead_attention_by_transposition():
    rng = np.random.default_rng(1)
    d, heads, t = 8, 2, 5
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(d, heads, batch_first=True, dtype=torch.float64)
    ours = L.MultiHeadAttention(heads, d // heads, dtype="float64")
    x = _rand(rng, 3, t, d)
    ours(x)
    wq, wk, wv = theirs.in_proj_weight.detach().numpy().reshape(3, d, d)
    bq, bk, bv = theirs.in_proj_bias.detach().numpy().reshape(3, d)
    for name, value in {"query_kernel": wq.T, "key_kernel": wk.T, "value_kernel": wv.T,
                        "output_kernel": theirs.out_proj.weight.detach().numpy().T, "query_bias": bq,
                        "key_bias": bk, "value_bias": bv, "output_bias": theirs.out_proj.bias.detach().numpy()}.items():
        ours.params[name].data = np.ascontiguousarray(value)
    mask = np.ones((3, t))
    mask[1, 3:] = 0
    causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # True: not allowed, as key_padding_mask
    expected = theirs(*(torch.from_numpy(x),) * 3, key_padding_mask=torch.from_numpy(mask == 0), need_weights=False,
                      attn_mask=causal)[0].detach().numpy()
    causal_ours = L.MultiHeadAttention(heads, d // heads, causal=True, dtype="float64")
    causal_ours([x, mask])
    for name, param in ours.params.items():
        causal_ours.params[name].data = param.data
    np.testing.assert_allclose(causal_ours([x, mask]).numpy(), expected, rtol=1e-10, atol=1e-12)


def test_a_query_without_any_key_attends_to_nothing():
    scores = np.random.default_rng(0).standard_normal((1, 1, 3, 3))
    mask = np.array([[0.0, 1.0, 1.0]])
    p = F.masked_softmax(scores, mask, 0.5, causal=True).numpy()
    np.testing.assert_array_equal(p[0, 0, 0], 0.0)  # query 0 may see key 0 only, which is padding
    np.testing.assert_allclose(p[0, 0, 1:].sum(axis=-1), 1.0)


@pytest.mark.parametrize("where", [pytest.param("simulator", marks=pytest.mark.native),
                                   pytest.param("gpu", marks=pytest.mark.gpu)])
def test_the_fused_kernel_handles_rows_longer_than_a_block_in_every_float_dtype(where):
    import contextlib

    from magmadnn import backend
    from pymagma import simulator

    rng = np.random.default_rng(6)
    x, dy = 4 * _rand(rng, 2, 1, 3, 300), _rand(rng, 2, 1, 3, 300)
    mask = (rng.uniform(size=(2, 300)) < 0.5).astype(np.float64)
    host = backend.get("host")
    p = host.masked_softmax(x, mask, 0.3, True)
    dx = host.masked_softmax_backward(dy, p, 0.3)
    with simulator.simulated() if where == "simulator" else contextlib.nullcontext():
        dev = backend.get("gpu")
        for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-6), (np.float16, 2e-3)):
            got = dev.masked_softmax(dev.asarray(x.astype(dtype)), dev.asarray(mask.astype(dtype)), 0.3, True)
            np.testing.assert_allclose(dev.to_numpy(got), p, atol=tol)
            grad = dev.masked_softmax_backward(dev.asarray(dy.astype(dtype)), dev.asarray(p.astype(dtype)), 0.3)
            np.testing.assert_allclose(dev.to_numpy(grad), dx, atol=tol)


# ------------------------------------------------------------------------------------------------ gradients
@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (True, True)])
def test_masked_softmax_and_attention_gradients(causal, masked):
    rng = np.random.default_rng(2)
    mask = np.array([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 1.0]]) if masked else None
    check_gradients(lambda s: F.masked_softmax(s, mask, 0.7, causal), _rand(rng, 2, 2, 4, 4))
    check_gradients(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, key_mask=mask, causal=causal),
                    _rand(rng, 2, 2, 4, 3), _rand(rng, 2, 2, 4, 3), _rand(rng, 2, 2, 4, 2))


def test_multi_head_attention_gradients_of_inputs_and_weights():
    rng = np.random.default_rng(3)
    layer = L.MultiHeadAttention(2, 2, 3, causal=True, dtype="float64")
    query, value = _rand(rng, 2, 3, 4), _rand(rng, 2, 4, 5)
    layer([query, value])
    w = _layer_weights(layer, rng)
    names = sorted(w)

    def run(q, v, *weights):
        layer._params.update(zip(names, weights))
        return layer([q, v])

    check_gradients(run, query, value, *(w[n] for n in names))


def test_dense_on_any_rank_gradients():
    rng = np.random.default_rng(4)
    check_gradients(F.dense, _rand(rng, 2, 3, 4), _rand(rng, 4, 5), _rand(rng, 5))
    check_gradients(F.dense, _rand(rng, 2, 1, 2, 3), _rand(rng, 3, 2))


# ------------------------------------------------------------------------------------- Dense and activations
@settings(max_examples=examples(20))
@given(lead=st.lists(st.integers(1, 3), min_size=1, max_size=3), features=st.integers(1, 4),
       units=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_dense_acts_on_the_last_axis_of_any_rank(lead, features, units, seed):
    rng = np.random.default_rng(seed)
    x = _rand(rng, 2, *lead, features)
    dense = L.Dense(units, activation="softmax", dtype="float64")
    y = dense(x).numpy()
    assert dense.output_shape == (*lead, units)
    z = x @ dense.params["kernel"].numpy() + dense.params["bias"].numpy()
    np.testing.assert_allclose(y, reference.softmax_ref(z, (-1,)), rtol=1e-10, atol=1e-12)
    tokens = L.Activation("softmax", dtype="float64")(x).numpy()
    np.testing.assert_allclose(tokens, reference.softmax_ref(x, (1 if x.ndim == 4 else -1,)), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(L.Activation("gelu", dtype="float64")(x).numpy(), reference.activation_ref("gelu", x),
                               rtol=1e-10, atol=1e-12)


def test_position_embedding_adds_one_learned_vector_per_position():
    rng = np.random.default_rng(5)
    x = _rand(rng, 3, 4, 2)
    layer = L.PositionEmbedding(dtype="float64")
    assert layer(x).shape == (3, 4, 2) and layer.params["embeddings"].shape == (4, 2)
    w = _layer_weights(layer, rng)
    np.testing.assert_allclose(layer(x).numpy(), x + w["embeddings"][None], rtol=1e-12)

    def run(a, e):
        layer._params["embeddings"] = e
        return layer(a)

    check_gradients(run, x, w["embeddings"])


@pytest.mark.parametrize("where", [pytest.param("simulator", marks=pytest.mark.native),
                                   pytest.param("gpu", marks=pytest.mark.gpu)])
def test_dense_and_activations_on_rank_3_match_the_host_on_the_device(where):
    import contextlib

    from magmadnn import Tensor, backend
    from pymagma import simulator

    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5), (5, 4), (4,)))
    host = backend.get("host")

    def run(xp, kind):
        tensors = [Tensor(xp.asarray(a), backend=xp, requires_grad=True) for a in (x, w, b)]
        y = L.Activation(kind).call(F.dense(*tensors))
        y.backward(xp.asarray(np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape)))
        return [xp.to_numpy(t) for t in (y.data, *(t.grad for t in tensors))]

    with simulator.simulated() if where == "simulator" else contextlib.nullcontext():
        dev = backend.get("gpu")
        for kind in ("relu", "sigmoid", "tanh", "elu", "leaky_relu", "gelu", "softmax"):
            for got, expected in zip(run(dev, kind), run(host, kind)):
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=kind)


# ---------------------------------------------------------------------------------------------- models
def attention_model(seed=0, t=6, d=8, classes=3, dropout=0.0):
    """Self-attention with a key mask, a token-wise GELU MLP, a residual sum; flattened into a classifier."""
    x, mask = L.Input((t, d)), L.Input((t,))
    h = L.MultiHeadAttention(2, 4, dropout=dropout, causal=True)([x, mask])
    h = L.Add()([x, L.Dense(d)(L.Dense(2 * d, activation="gelu")(h))])
    return models.Model([x, mask], L.Dense(classes)(L.Flatten()(h)), seed=seed)


def attention_data(n=32, t=6, d=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, t, d)).astype(np.float32)
    lengths = rng.integers(2, t + 1, n)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
    return [x, mask], (x[:, 0, :3].argmax(axis=1))


def test_save_load_round_trip_and_training_lowers_the_loss(tmp_path):
    xs, y = attention_data()
    model = attention_model(seed=1, dropout=0.1)
    model.compile(optimizers.Adam(1e-2), seed=2)
    before = model.evaluate(xs, y, verbose=0, return_dict=True)
    model.fit(xs, y, batch_size=8, epochs=5, verbose=0)
    after = model.evaluate(xs, y, verbose=0, return_dict=True)
    assert after["loss"] < 0.7 * before["loss"], (before, after)
    loaded = models.load(model.save(tmp_path / "attention.safetensors"))
    np.testing.assert_array_equal(loaded.predict(xs), model.predict(xs))
    assert loaded.layers[2].get_config() == model.layers[2].get_config()


@pytest.mark.parametrize("where", [pytest.param("simulator", marks=pytest.mark.native),
                                   pytest.param("gpu", marks=pytest.mark.gpu)])
def test_host_and_device_train_to_the_same_losses(where):
    import contextlib

    from pymagma import simulator

    xs, y = attention_data(n=16)

    def train(device):
        model = attention_model(seed=3, dropout=0.2)  # SGD: Adam would blow up the key bias' zero gradient's noise
        model.compile(optimizers.SGD(0.05, momentum=0.9), seed=4, device=device)
        return [model.train_on_batch([xs[0][i::2], xs[1][i::2]], y[i::2]) for i in (0, 1, 0, 1)], model.get_weights()

    host_losses, host_weights = train("host")
    with simulator.simulated() if where == "simulator" else contextlib.nullcontext():
        device_losses, device_weights = train("gpu")
    np.testing.assert_allclose(device_losses, host_losses, rtol=1e-4)
    for a, b in zip(device_weights, host_weights):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.native
def test_training_and_inference_on_the_device_read_it_only_for_progress_and_results(monkeypatch):
    from pymagma import runtime, simulator

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    xs, y = attention_data(n=16)
    with simulator.simulated():
        model = attention_model(seed=5, dropout=0.2)
        model.compile(optimizers.Adam(1e-3), seed=6, device="gpu")
        model.progress_interval = float("inf")
        model.fit(xs, y, batch_size=8, epochs=1, verbose=0)  # builds and compiles: reads allowed
        reads.clear()
        model.fit(xs, y, batch_size=8, epochs=1, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 2 steps: {reads}"
        reads.clear()
        out = model.predict(xs, batch_size=8)
        assert out.shape == (16, 3) and len(reads) == 2, reads  # one read of each batch's result



# ------------------------------------------------------------------------ review: masks, empty rows, dropout
def _torch_mha_grads(query, value, w, heads, key_mask, causal, u):
    """Output and gradients (query, value, every weight) of PyTorch's attention, a query with no key left attending
    to nothing (PyTorch gives NaN there; magmadnn's documented zeros): all keys allowed, then the row zeroed."""
    t = {k: torch.tensor(a, requires_grad=True) for k, a in {**w, "query": query, "value": value}.items()}

    def project(x, name):
        y = x @ t[f"{name}_kernel"] + t[f"{name}_bias"]
        return y.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)

    q, k, v = project(t["query"], "query"), project(t["value"], "key"), project(t["value"], "value")
    allowed = torch.from_numpy(key_mask != 0)[:, None, None, :].expand(-1, 1, q.shape[2], -1)
    if causal:
        allowed = allowed & torch.tril(torch.ones(q.shape[2], k.shape[2], dtype=torch.bool))
    some = allowed.any(-1, keepdim=True)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~some) * some
    o = o.transpose(1, 2).reshape(query.shape[0], query.shape[1], -1) @ t["output_kernel"] + t["output_bias"]
    (o * torch.from_numpy(u)).sum().backward()
    return o.detach().numpy(), {k: a.grad.numpy() for k, a in t.items()}


@pytest.mark.parametrize("causal", [False, True])
def test_a_sample_of_padding_only_matches_pytorch_with_its_rows_zeroed_forward_and_backward(causal):
    rng = np.random.default_rng(8)
    query, value = _rand(rng, 3, 4, 5), _rand(rng, 3, 3, 6)
    key_mask = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])  # sample 1: every key is padding
    layer = L.MultiHeadAttention(3, 2, 4, causal=causal, dtype="float64")
    layer([query, value, key_mask])
    w = _layer_weights(layer, rng)
    tq, tv = Tensor(query.copy(), requires_grad=True), Tensor(value.copy(), requires_grad=True)
    y = layer([tq, tv, key_mask])
    u = _rand(rng, *y.shape)
    y.backward(u)
    expected, grads = _torch_mha_grads(query, value, w, 3, key_mask, causal, u)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.numpy()[1], np.broadcast_to(w["output_bias"], (4, 5)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(tq.grad), grads["query"], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.asarray(tv.grad), grads["value"], rtol=1e-9, atol=1e-11)
    for name, param in layer.params.items():
        np.testing.assert_allclose(np.asarray(param.grad), grads[name], rtol=1e-9, atol=1e-11, err_msg=name)


def test_a_key_mask_of_booleans_or_integers_is_the_float_mask():
    rng = np.random.default_rng(9)
    x = _rand(rng, 2, 4, 3)
    keys = np.array([[1, 0, 1, 1], [0, 1, 1, 0]])
    layer = L.MultiHeadAttention(2, 2, causal=True, dtype="float64")
    expected = layer([x, keys.astype(np.float64)]).numpy()
    scores = _rand(rng, 2, 1, 4, 4)
    for mask in (keys.astype(bool), keys, keys.astype(np.float32)):
        np.testing.assert_array_equal(layer([x, mask]).numpy(), expected)
        np.testing.assert_array_equal(F.masked_softmax(scores, mask).numpy(),
                                      F.masked_softmax(scores, keys.astype(np.float64)).numpy())


@pytest.mark.native
@pytest.mark.parametrize("value", [0.5, -np.inf, np.nan])
def test_a_device_model_refuses_a_mask_that_is_not_0_or_1_before_any_step(value):
    from pymagma import simulator

    xs, y = attention_data(n=8)
    xs[1][3, 1] = value
    with simulator.simulated():
        model = attention_model(seed=7)
        model.compile(optimizers.SGD(0.1), device="gpu")
        before = model.get_weights()
        with pytest.raises(ValueError, match="key mask holds 1 .attend. or 0 .padding."):
            model.fit(xs, y, batch_size=4, epochs=1, verbose=0)
        for a, b in zip(model.get_weights(), before):
            np.testing.assert_array_equal(a, b)


def test_attention_dropout_is_inactive_in_predict_and_evaluate_and_draws_per_seed():
    xs, y = attention_data(n=16)

    def trained(seed):
        model = attention_model(seed=seed, dropout=0.5)
        model.compile(optimizers.SGD(0.05), seed=seed + 1)
        return model, [model.train_on_batch(xs, y) for _ in range(2)]

    model, losses = trained(3)
    assert trained(3)[1] == losses and trained(4)[1] != losses  # the dropout draws follow the seed
    plain = attention_model(seed=3, dropout=0.0)
    plain.compile(optimizers.SGD(0.05))
    plain.set_weights(model.get_weights())
    np.testing.assert_array_equal(model.predict(xs), plain.predict(xs))
    assert model.evaluate(xs, y, verbose=0) == plain.evaluate(xs, y, verbose=0)
    layer = model.layers[2]
    sample = [xs[0][:2], xs[1][:2]]
    assert not np.array_equal(layer(sample, training=True).numpy(), layer(sample, training=True).numpy())


@pytest.mark.native
def test_an_integer_key_mask_input_is_cast_on_the_device_without_a_host_copy(monkeypatch):
    from pymagma import runtime, simulator

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    (x, mask), y = attention_data(n=8)

    def model_with(dtype):
        xi, mi = L.Input(x.shape[1:]), L.Input(mask.shape[1:], dtype=dtype)
        model = models.Model([xi, mi], L.Dense(3)(L.Flatten()(L.MultiHeadAttention(2, 4)([xi, mi]))), seed=8)
        model.compile(optimizers.SGD(0.1), device="gpu")
        model.progress_interval = float("inf")
        return model

    with simulator.simulated():
        ints, floats = model_with("int64"), model_with("float32")
        ints.fit([x, mask.astype(np.int64)], y, batch_size=4, epochs=1, verbose=0)  # builds: reads allowed
        floats.fit([x, mask], y, batch_size=4, epochs=1, verbose=0)
        np.testing.assert_allclose(ints.predict([x, mask.astype(np.int64)]), floats.predict([x, mask]), rtol=1e-6,
                                   atol=1e-7)
        reads.clear()
        ints.fit([x, mask.astype(np.int64)], y, batch_size=4, epochs=1, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 2 steps: {reads}"


@pytest.mark.native
def test_an_eager_call_on_the_device_checks_a_host_key_mask():
    from pymagma import simulator

    with simulator.simulated():
        layer = L.MultiHeadAttention(2, 2)
        layer.configure("gpu", "float32", 0)
        x = np.zeros((1, 3, 4), np.float32)
        assert layer([x, np.ones((1, 3), np.float32)]).shape == (1, 3, 4)
        with pytest.raises(ValueError, match="MultiHeadAttention layer .* key mask .* got 0.5"):
            layer([x, np.array([[1.0, 0.5, 0.0]])])
