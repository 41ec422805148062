"""Conv1D, 1-D pooling, Bidirectional, LSTM/GRU(return_state=True) and Embedding(mask_zero=True) against Keras 3
(torch backend) from identical weights: forward outputs and the gradients of a fixed projection of the output with
respect to the input and every weight (through torch's autograd on the Keras side)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from magmadnn import Model, Sequential, Tensor
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.models import NonFiniteLossError
from tests.keras_reference import keras
from tests.magmadnn.backends import model_device

RTOL, ATOL = 1e-5, 1e-6  # Keras computes some layers in float32 even with dtype="float64"


def _keras_grads(layer, inputs, u, weights_first=False):
    """Keras ``layer`` on float64 torch inputs: outputs and d sum(out * u) / d(inputs, weights)."""
    xs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    out = layer(*xs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    total = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, u))
    params = [v.value for v in layer.weights]
    total.backward()
    return ([o.detach().numpy() for o in outs], [x.grad.numpy() if x.grad is not None else None for x in xs],
            [p.grad.numpy() for p in params])


def _ours_grads(layer, inputs, u):
    xs = [Tensor(a, requires_grad=a.dtype.kind == "f") for a in inputs]
    out = layer(xs[0] if len(xs) == 1 else xs)
    outs = out if isinstance(out, list) else [out]
    total = None
    for o, w in zip(outs, u):
        term = (o * Tensor(w)).sum()
        total = term if total is None else total + term
    total.backward()
    return ([o.numpy() for o in outs], [x.grad if x.requires_grad else None for x in xs],
            [p.grad for p in layer.parameters()])


def _compare(ours, theirs):
    for a, b in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    for a, b in zip(ours[1], theirs[1], strict=True):
        if b is not None:
            np.testing.assert_allclose(np.asarray(a), b, rtol=RTOL, atol=ATOL)


def _keras_layer(layer, shape, dtype="float64"):
    layer.build((None, *shape)) if not layer.built else None
    return layer


# ------------------------------------------------------------------------------------------------ Conv1D
@pytest.mark.parametrize("padding,strides,dilation,groups", [
    ("valid", 1, 1, 1), ("same", 1, 1, 1), ("causal", 1, 1, 1), ("valid", 2, 1, 1), ("same", 2, 1, 1),
    ("same", 3, 1, 1), ("causal", 2, 1, 1), ("valid", 1, 2, 1), ("same", 1, 2, 1), ("causal", 1, 3, 1),
    ("same", 1, 1, 2)])
def test_conv1d_matches_keras(padding, strides, dilation, groups):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 9, 4))
    ours = L.Conv1D(6, 3, strides=strides, padding=padding, dilation_rate=dilation, groups=groups,
                    activation="tanh", dtype="float64")
    ours.build(x.shape[1:])
    ours.params["bias"].data[:] = rng.normal(size=6)
    theirs = keras.layers.Conv1D(6, 3, strides=strides, padding=padding, dilation_rate=dilation, groups=groups,
                                 activation="tanh", dtype="float64")
    theirs.build((None, 9, 4))
    kernel = ours.params["kernel"].numpy()
    theirs.set_weights([kernel.transpose(2, 1, 0), ours.params["bias"].numpy()])  # the documented conversion
    out_shape = ours.output_shape
    u = [rng.normal(size=(2, *out_shape))]
    mine, keras_side = _ours_grads(ours, [x], u), _keras_grads(theirs, [x], u)
    assert mine[0][0].shape == keras_side[0][0].shape
    _compare(mine, keras_side)
    np.testing.assert_allclose(mine[2][0].transpose(2, 1, 0), keras_side[2][0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(mine[2][1], keras_side[2][1], rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------------------------- pooling
@pytest.mark.parametrize("cls,kcls,args", [
    (L.MaxPooling1D, keras.layers.MaxPooling1D, {}), (L.MaxPooling1D, keras.layers.MaxPooling1D, {"pool_size": 3}),
    (L.MaxPooling1D, keras.layers.MaxPooling1D, {"pool_size": 3, "strides": 2, "padding": "same"}),
    (L.AveragePooling1D, keras.layers.AveragePooling1D, {"pool_size": 2}),
    (L.AveragePooling1D, keras.layers.AveragePooling1D, {"pool_size": 3, "strides": 1}),
    (L.AveragePooling1D, keras.layers.AveragePooling1D, {"pool_size": 2, "padding": "same"}),
    (L.AveragePooling1D, keras.layers.AveragePooling1D, {"pool_size": 3, "strides": 1, "padding": "same"}),
    (L.GlobalAveragePooling1D, keras.layers.GlobalAveragePooling1D, {}),
    (L.GlobalAveragePooling1D, keras.layers.GlobalAveragePooling1D, {"keepdims": True}),
    (L.GlobalMaxPooling1D, keras.layers.GlobalMaxPooling1D, {}),
    (L.GlobalMaxPooling1D, keras.layers.GlobalMaxPooling1D, {"keepdims": True})])
def test_pooling_1d_matches_keras(cls, kcls, args):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 7, 5))
    ours = cls(**args, dtype="float64")
    ours.build(x.shape[1:])
    theirs = kcls(**args, dtype="float64")
    u = [rng.normal(size=(3, *ours.output_shape))]
    _compare(_ours_grads(ours, [x], u), _keras_grads(theirs, [x], u))


def test_average_pooling_1d_same_with_uneven_padding_leaves_padded_steps_out():
    """Padding 1 left, 2 right: the mean of the real steps in each window (Keras' rule, TensorFlow's result; Keras'
    torch backend repeats the edge steps into uneven padding instead)."""
    x = np.random.default_rng(6).normal(size=(2, 7, 3))
    got = L.AveragePooling1D(4, strides=3, padding="same", dtype="float64")(x).numpy()
    padded_start = [-1, 2, 5]
    expected = np.stack([x[:, max(s, 0):min(s + 4, 7)].mean(axis=1) for s in padded_start], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ----------------------------------------------------------------------------------------- recurrent
def _gru_to_keras(weights):
    """magmadnn's GRU blocks (r, z, n) -> Keras' (z, r, h), the two biases stacked (reset_after=True)."""
    def order(a):
        r, z, n = np.split(a, 3, axis=-1)
        return np.concatenate([z, r, n], axis=-1)
    return [order(weights["kernel"]), order(weights["recurrent_kernel"]),
            np.stack([order(weights["bias"]), order(weights["recurrent_bias"])])]


def _keras_weights(layer):
    w = {k: v.numpy() for k, v in layer.params.items()}
    return _gru_to_keras(w) if isinstance(layer, L.GRU) else [w["kernel"], w["recurrent_kernel"], w["bias"]]


def _randomise(layer, rng):
    for p in layer.parameters():
        p.data[...] = rng.uniform(-0.6, 0.6, p.shape)


def _keras_param_grads_as_ours(kind, grads):
    if kind == "LSTM":
        return grads
    def back(a):  # Keras (z, r, h) -> magmadnn (r, z, n)
        z, r, n = np.split(a, 3, axis=-1)
        return np.concatenate([r, z, n], axis=-1)
    return [back(grads[0]), back(grads[1]), back(grads[2][0]), back(grads[2][1])]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("return_sequences", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_return_state_and_masks_match_keras(kind, return_sequences, masked):
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 9, (3, 6))
    if masked:
        ids[0, 4:] = 0  # padding at the end
        ids[1, :2] = 0  # padding at the start
        ids[2, 2] = 0  # a hole
    table = rng.normal(size=(9, 4))
    ours_rnn = getattr(L, kind)(5, return_sequences=return_sequences, return_state=True, dtype="float64")
    x = L.Input((6,), dtype="int64")
    emb = L.Embedding(9, 4, mask_zero=masked, dtype="float64")
    outs = ours_rnn(emb(x))
    model = Model(x, outs[0], dtype="float64")
    emb.params["embeddings"].data[...] = table
    _randomise(ours_rnn, rng)

    k_emb = keras.layers.Embedding(9, 4, mask_zero=masked, dtype="float64")
    k_rnn = getattr(keras.layers, kind)(5, return_sequences=return_sequences, return_state=True, dtype="float64")
    k_emb.build((None, 6))
    k_emb.set_weights([table])
    k_rnn.build((None, 6, 4))
    k_rnn.set_weights(_keras_weights(ours_rnn))

    shapes = [ours_rnn.output_shape[0]] + [(5,)] * (len(outs) - 1)
    u = [rng.normal(size=(3, *s)) for s in shapes]
    # Keras side
    e = k_emb(torch.tensor(ids))
    k_outs = k_rnn(e, mask=k_emb.compute_mask(torch.tensor(ids)))
    total = sum((o * torch.tensor(w)).sum() for o, w in zip(k_outs, u))
    total.backward()
    # ours: the layer's several outputs, each with its own projection
    assert model is not None
    ours_e = emb(Tensor(ids))
    ours_outs = ours_rnn(ours_e)
    assert len(ours_outs) == len(k_outs) == (3 if kind == "LSTM" else 2)
    total = None
    for o, w in zip(ours_outs, u):
        term = (o * Tensor(w)).sum()
        total = term if total is None else total + term
    total.backward()
    for a, b in zip(ours_outs, k_outs):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL)
    keras_grads = _keras_param_grads_as_ours(kind, [v.value.grad.numpy() for v in k_rnn.weights])
    for p, g in zip(ours_rnn.parameters(), keras_grads, strict=True):
        np.testing.assert_allclose(p.grad, g, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(emb.params["embeddings"].grad, k_emb.weights[0].value.grad.numpy(), rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
@pytest.mark.parametrize("return_sequences,masked", [(False, False), (True, False), (False, True), (True, True)])
def test_bidirectional_matches_keras(kind, merge_mode, return_sequences, masked):
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 7, (2, 5))
    if masked:
        ids[0, 3:] = 0
        ids[1, 0] = 0
    table = rng.normal(size=(7, 3))
    emb = L.Embedding(7, 3, mask_zero=masked, dtype="float64")
    bi = L.Bidirectional(getattr(L, kind)(4, return_sequences=return_sequences), merge_mode=merge_mode,
                         dtype="float64")
    x = L.Input((5,), dtype="int64")
    out = bi(emb(x))
    Model(x, out[0] if isinstance(out, list) else out, dtype="float64")
    emb.params["embeddings"].data[...] = table
    _randomise(bi, rng)
    k_emb = keras.layers.Embedding(7, 3, mask_zero=masked, dtype="float64")
    k_bi = keras.layers.Bidirectional(getattr(keras.layers, kind)(4, return_sequences=return_sequences),
                                      merge_mode=merge_mode, dtype="float64")
    k_emb.build((None, 5))
    k_emb.set_weights([table])
    k_bi.build((None, 5, 3))
    k_bi.set_weights(_keras_weights(bi.forward_layer) + _keras_weights(bi.backward_layer))
    assert bi.count_params() == k_bi.count_params()

    shapes = bi.output_shape if isinstance(bi.output_shape, list) else [bi.output_shape]
    u = [rng.normal(size=(2, *s)) for s in shapes]
    k_out = k_bi(k_emb(torch.tensor(ids)), mask=k_emb.compute_mask(torch.tensor(ids)) if masked else None)
    k_outs = k_out if isinstance(k_out, (list, tuple)) else [k_out]
    sum((o * torch.tensor(w)).sum() for o, w in zip(k_outs, u)).backward()
    out = bi(emb(Tensor(ids)))
    outs = out if isinstance(out, list) else [out]
    total = None
    for o, w in zip(outs, u):
        term = (o * Tensor(w)).sum()
        total = term if total is None else total + term
    total.backward()
    for a, b in zip(outs, k_outs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL)
    grads = [v.value.grad.numpy() for v in k_bi.weights]
    half = len(grads) // 2
    expected = _keras_param_grads_as_ours(kind, grads[:half]) + _keras_param_grads_as_ours(kind, grads[half:])
    for p, g in zip(bi.parameters(), expected, strict=True):
        np.testing.assert_allclose(p.grad, g, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("return_sequences", [False, True])
def test_masked_embedding_global_average_pooling_matches_keras(return_sequences):
    rng = np.random.default_rng(4)
    ids = rng.integers(1, 6, (3, 5))
    ids[0, 2:] = 0
    ids[2, 0] = 0
    table = rng.normal(size=(6, 3))
    emb = L.Embedding(6, 3, mask_zero=True, dtype="float64")
    dense = L.Dense(4, dtype="float64")
    gap = L.GlobalAveragePooling1D(dtype="float64")
    x = L.Input((5,), dtype="int64")
    model = Model(x, gap(dense(emb(x))), dtype="float64")
    emb.params["embeddings"].data[...] = table
    k_emb = keras.layers.Embedding(6, 3, mask_zero=True, dtype="float64")
    k_dense, k_gap = keras.layers.Dense(4, dtype="float64"), keras.layers.GlobalAveragePooling1D(dtype="float64")
    k_emb.build((None, 5))
    k_emb.set_weights([table])
    k_dense.build((None, 5, 3))
    k_dense.set_weights([dense.params["kernel"].numpy(), dense.params["bias"].numpy()])
    kx = keras.Input((5,), dtype="int64")
    k_model = keras.Model(kx, k_gap(k_dense(k_emb(kx))))
    np.testing.assert_allclose(model(ids).numpy(), k_model(torch.tensor(ids)).detach().numpy(), rtol=RTOL,
                               atol=ATOL)


def test_masked_lstm_model_trains_like_keras():
    """Embedding(mask_zero) -> LSTM -> Dense, three SGD steps of mean squared error in both: the weights agree."""
    from magmadnn import optimizers  # noqa: PLC0415

    rng = np.random.default_rng(5)
    ids = rng.integers(1, 8, (8, 6))
    ids[:4, 4:] = 0
    y = rng.normal(size=(8, 2))
    model = Sequential([L.Input((6,), dtype="int64"), L.Embedding(8, 3, mask_zero=True), L.LSTM(4), L.Dense(2)],
                       dtype="float64", seed=0)
    k_model = keras.Sequential([keras.Input((6,), dtype="int64"),
                                keras.layers.Embedding(8, 3, mask_zero=True, dtype="float64"),
                                keras.layers.LSTM(4, dtype="float64"), keras.layers.Dense(2, dtype="float64")])
    k_model.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
    model.compile(optimizers.SGD(0.1), "mse")
    k_model.compile(keras.optimizers.SGD(0.1), "mse")
    for _ in range(3):
        model.train_on_batch(ids, y)
        k_model.train_on_batch(ids, y)
    for a, b in zip(model.get_weights(), k_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("cross", [False, True])
def test_masked_multi_head_attention_matches_keras(cross):
    """Embedding(mask_zero) -> MultiHeadAttention (self, or query and value of two embeddings): padded keys hidden,
    padded queries attend to nothing, and the query's mask reaches GlobalAveragePooling1D."""
    rng = np.random.default_rng(8)
    q_ids, v_ids = rng.integers(1, 6, (2, 5)), rng.integers(1, 6, (2, 4))
    q_ids[0, 3:] = 0
    v_ids[1, 1:] = 0
    v_ids[0, 0] = 0
    tables = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    qx, vx = L.Input((5,), dtype="int64"), L.Input((4,), dtype="int64")
    q_emb, v_emb = L.Embedding(6, 4, mask_zero=True), L.Embedding(6, 4, mask_zero=True)
    mha = L.MultiHeadAttention(2, 3)
    q = q_emb(qx)
    att = mha([q, v_emb(vx)] if cross else q)
    model = Model([qx, vx] if cross else qx, L.GlobalAveragePooling1D()(att), dtype="float64")
    q_emb.params["embeddings"].data[...] = tables[0]
    if cross:
        v_emb.params["embeddings"].data[...] = tables[1]
    for p in mha.parameters():
        p.data[...] = rng.uniform(-0.5, 0.5, p.shape)

    kq, kv = keras.Input((5,), dtype="int64"), keras.Input((4,), dtype="int64")
    kq_emb = keras.layers.Embedding(6, 4, mask_zero=True, dtype="float64")
    kv_emb = keras.layers.Embedding(6, 4, mask_zero=True, dtype="float64")
    k_mha = keras.layers.MultiHeadAttention(2, 3, dtype="float64")
    k_q = kq_emb(kq)
    k_att = k_mha(k_q, kv_emb(kv)) if cross else k_mha(k_q, k_q)
    k_model = keras.Model([kq, kv] if cross else kq, keras.layers.GlobalAveragePooling1D(dtype="float64")(k_att))
    kq_emb.set_weights([tables[0]])
    if cross:
        kv_emb.set_weights([tables[1]])
    w = {k: v.numpy() for k, v in mha.params.items()}
    k_mha.set_weights([w["query_kernel"].reshape(4, 2, 3), w["query_bias"].reshape(2, 3),
                       w["key_kernel"].reshape(4, 2, 3), w["key_bias"].reshape(2, 3),
                       w["value_kernel"].reshape(4, 2, 3), w["value_bias"].reshape(2, 3),
                       w["output_kernel"].reshape(2, 3, 4), w["output_bias"]])
    inputs = [q_ids, v_ids] if cross else q_ids
    k_inputs = [torch.tensor(q_ids), torch.tensor(v_ids)] if cross else torch.tensor(q_ids)
    np.testing.assert_allclose(model(inputs).numpy(), k_model(k_inputs).detach().numpy(), rtol=RTOL, atol=ATOL)


def _keras_mha_twin(mha, d_query, d_key, d_value):
    """A Keras MultiHeadAttention (float64) with ``mha``'s weights (2 heads of size 3)."""
    k_mha = keras.layers.MultiHeadAttention(2, 3, dtype="float64")
    k_mha.build((None, 5, d_query), (None, 4, d_value), (None, 4, d_key))
    w = {k: v.numpy() for k, v in mha.params.items()}
    k_mha.set_weights([w["query_kernel"].reshape(d_query, 2, 3), w["query_bias"].reshape(2, 3),
                       w["key_kernel"].reshape(d_key, 2, 3), w["key_bias"].reshape(2, 3),
                       w["value_kernel"].reshape(d_value, 2, 3), w["value_bias"].reshape(2, 3),
                       w["output_kernel"].reshape(2, 3, d_query), w["output_bias"]])
    return k_mha


@pytest.mark.parametrize("form", ["query, value", "query, value, key=", "use_causal_mask=True"])
def test_multi_head_attention_takes_keras_call_arguments(form, tmp_path):
    """``mha(query, value, key=..., use_causal_mask=...)`` as Keras calls it, on data and in a functional model
    (which keeps the causal mask through save and load), against Keras with the same weights."""
    from magmadnn import load_model  # noqa: PLC0415

    rng = np.random.default_rng(11)
    q = rng.normal(size=(2, 5, 4))
    v = q if form == "use_causal_mask=True" else rng.normal(size=(2, 4, 3))
    k = rng.normal(size=(2, 4, 2)) if form.endswith("key=") else None
    args = {"key": k} if k is not None else {}
    causal = {"use_causal_mask": True} if form == "use_causal_mask=True" else {}
    data = [q] if form == "use_causal_mask=True" else [q, v] + ([k] if k is not None else [])
    inputs = [L.Input(a.shape[1:]) for a in data]
    value = inputs[0] if form == "use_causal_mask=True" else inputs[1]
    mha = L.MultiHeadAttention(2, 3)
    model = Model(inputs, mha(inputs[0], value, **dict(zip(["key"], inputs[2:])), **causal), dtype="float64")
    for p in mha.parameters():
        p.data[...] = rng.uniform(-0.5, 0.5, p.shape)
    k_mha = _keras_mha_twin(mha, 4, (k if k is not None else v).shape[-1], v.shape[-1])
    expected = k_mha(torch.tensor(q), torch.tensor(v), **({"key": torch.tensor(k)} if k is not None else {}),
                     **causal).detach().numpy()
    data = data if len(data) > 1 else data[0]
    np.testing.assert_allclose(model(data).numpy(), expected, rtol=RTOL, atol=ATOL)
    assert mha.causal is bool(causal)

    eager = L.MultiHeadAttention(2, 3, dtype="float64")
    eager(q, v, **args)
    eager.set_weights(mha.get_weights())
    np.testing.assert_allclose(eager(q, v, **args, **causal).numpy(), expected, rtol=RTOL, atol=ATOL)
    assert eager.causal is False  # on data, a call's use_causal_mask holds for that call only
    model.save(tmp_path / "mha.npz")
    np.testing.assert_allclose(load_model(tmp_path / "mha.npz")(data).numpy(), expected, rtol=RTOL, atol=ATOL)


def test_multi_head_attention_call_errors_are_typed():
    q = L.Input((5, 4))
    mha = L.MultiHeadAttention(2, 3)
    mha(q, q, use_causal_mask=True)
    with pytest.raises(ValueError, match="causal in all of a model's calls or in none"):
        mha(q, q, use_causal_mask=False)
    with pytest.raises(TypeError, match="use_causal_mask must be True or False"):
        L.MultiHeadAttention(2, 3)(q, q, use_causal_mask="yes")
    with pytest.raises(TypeError, match="key= was given without value="):
        L.MultiHeadAttention(2, 3)(q, key=q)
    with pytest.raises(TypeError, match="pass training= by keyword"):
        L.MultiHeadAttention(2, 3)(np.zeros((1, 5, 4), np.float32), True)
    with pytest.raises(TypeError, match=r"takes them as one list, layer\(\[a, b\]\)"):
        L.Dense(3)(q, q)  # a second input is not read as training


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_bidirectional_return_state_matches_keras(kind):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 5, 3))
    bi = L.Bidirectional(getattr(L, kind)(4, return_sequences=True, return_state=True), dtype="float64")
    bi.build((5, 3))
    _randomise(bi, rng)
    k_bi = keras.layers.Bidirectional(getattr(keras.layers, kind)(4, return_sequences=True, return_state=True),
                                      dtype="float64")
    k_bi.build((None, 5, 3))
    k_bi.set_weights(_keras_weights(bi.forward_layer) + _keras_weights(bi.backward_layer))
    outs = bi(x)
    k_outs = k_bi(torch.tensor(x))
    assert len(outs) == len(k_outs) == (5 if kind == "LSTM" else 3)
    for a, b in zip(outs, k_outs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_conv1d_model_trains_like_keras():
    """Conv1D -> MaxPooling1D -> GlobalAveragePooling1D -> Dense, three SGD steps of mean squared error in both."""
    from magmadnn import optimizers  # noqa: PLC0415

    rng = np.random.default_rng(10)
    x, y = rng.normal(size=(8, 10, 3)), rng.normal(size=(8, 2))
    model = Sequential([L.Input((10, 3)), L.Conv1D(4, 3, padding="causal", activation="relu"), L.MaxPooling1D(),
                        L.Conv1D(4, 2, strides=2, padding="same"), L.GlobalAveragePooling1D(), L.Dense(2)],
                       dtype="float64", seed=0)
    k_model = keras.Sequential([keras.Input((10, 3)),
                                keras.layers.Conv1D(4, 3, padding="causal", activation="relu", dtype="float64"),
                                keras.layers.MaxPooling1D(dtype="float64"),
                                keras.layers.Conv1D(4, 2, strides=2, padding="same", dtype="float64"),
                                keras.layers.GlobalAveragePooling1D(dtype="float64"),
                                keras.layers.Dense(2, dtype="float64")])

    def to_keras(weights):
        return [w.transpose(2, 1, 0) if w.ndim == 3 else w for w in weights]

    k_model.set_weights(to_keras(model.get_weights()))
    model.compile(optimizers.SGD(0.1), "mse")
    k_model.compile(keras.optimizers.SGD(0.1), "mse")
    for _ in range(3):
        model.train_on_batch(x, y)
        k_model.train_on_batch(x, y)
    for a, b in zip(to_keras(model.get_weights()), k_model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_lambda_with_a_mask_function_passes_the_mask_on_as_keras():
    rng = np.random.default_rng(11)
    ids = rng.integers(1, 6, (2, 5))
    ids[0, 3:] = 0
    table = rng.normal(size=(6, 3))
    emb = L.Embedding(6, 3, mask_zero=True, dtype="float64")
    lstm = L.LSTM(4, dtype="float64")
    x = L.Input((5,), dtype="int64")
    model = Model(x, lstm(L.Lambda(lambda t: t * 2.0, mask=lambda inputs, mask: mask)(emb(x))), dtype="float64")
    emb.params["embeddings"].data[...] = table
    _randomise(lstm, rng)
    kx = keras.Input((5,), dtype="int64")
    k_emb, k_lstm = keras.layers.Embedding(6, 3, mask_zero=True, dtype="float64"), keras.layers.LSTM(4, dtype="float64")
    k_model = keras.Model(kx, k_lstm(keras.layers.Lambda(lambda t: t * 2.0, mask=lambda inputs, mask: mask)(k_emb(kx))))
    k_emb.set_weights([table])
    k_lstm.set_weights(_keras_weights(lstm))
    np.testing.assert_allclose(model(ids).numpy(), k_model(torch.tensor(ids)).detach().numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_encoder_decoder_with_initial_state_matches_keras(kind):
    """The seq2seq pattern: an encoder's return_state outputs start a decoder (initial_state=), masked encoder
    input; outputs and every weight gradient against Keras."""
    rng = np.random.default_rng(12)
    src, tgt = rng.integers(1, 7, (2, 5)), rng.normal(size=(2, 4, 3))
    src[0, 3:] = 0
    table = rng.normal(size=(7, 3))
    s_in, t_in = L.Input((5,), dtype="int64"), L.Input((4, 3))
    emb = L.Embedding(7, 3, mask_zero=True, dtype="float64")
    encoder = getattr(L, kind)(4, return_state=True, dtype="float64")
    decoder = getattr(L, kind)(4, return_sequences=True, dtype="float64")
    _, *states = encoder(emb(s_in))
    out = decoder(t_in, initial_state=states)
    model = Model([s_in, t_in], out, dtype="float64")
    emb.params["embeddings"].data[...] = table
    _randomise(encoder, rng)
    _randomise(decoder, rng)

    ks, kt = keras.Input((5,), dtype="int64"), keras.Input((4, 3), dtype="float64")
    k_emb = keras.layers.Embedding(7, 3, mask_zero=True, dtype="float64")
    k_enc = getattr(keras.layers, kind)(4, return_state=True, dtype="float64")
    k_dec = getattr(keras.layers, kind)(4, return_sequences=True, dtype="float64")
    _, *k_states = k_enc(k_emb(ks))
    k_model = keras.Model([ks, kt], k_dec(kt, initial_state=k_states))
    k_emb.set_weights([table])
    k_enc.set_weights(_keras_weights(encoder))
    k_dec.set_weights(_keras_weights(decoder))

    u = rng.normal(size=(2, 4, 4))
    ours = model([src, tgt])
    (ours * Tensor(u)).sum().backward()
    theirs = k_model([torch.tensor(src), torch.tensor(tgt)])
    (theirs * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=RTOL, atol=ATOL)
    for layer, k_layer in ((encoder, k_enc), (decoder, k_dec)):
        expected = _keras_param_grads_as_ours(kind, [v.value.grad.numpy() for v in k_layer.weights])
        for p, g in zip(layer.parameters(), expected, strict=True):
            np.testing.assert_allclose(p.grad, g, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------- masks: their shapes and 0/0 over padding (round three)


@pytest.fixture(params=["host", "simulator"])
def device(request):
    yield from model_device(request.param)


def _masked(mask_fn, after=None, name="lam"):
    ids = L.Input((5,), dtype="int64")
    e = L.Embedding(7, 4, mask_zero=True, name="tokens")(ids)
    out = L.Lambda(lambda t: t, mask=mask_fn, name=name)(e)
    return Model(ids, (after or L.GlobalAveragePooling1D(name="mean"))(out), seed=0)


_IDS = np.array([[1, 2, 0, 0, 3], [4, 5, 6, 0, 0]])
MASK_ROWS = [
    ("short-time", lambda t, m: F.slice_axis(m, 1, 0, 3), ["'lam'", "(2, 3)", "(batch, time) = (2, 5)"]),
    ("extra-axis", lambda t, m: F.reshape(m, (-1, 5, 1)), ["'lam'", "(2, 5, 1)", "(2, 5)"]),
    ("one-row", lambda t, m: F.slice_axis(m, 0, 0, 1), ["'lam'", "(1, 5)", "(2, 5)"]),
    ("flat", lambda t, m: F.reshape(m, (-1,)), ["'lam'", "(10,)", "(2, 5)"]),
]


@pytest.mark.parametrize("mask_fn, words", [pytest.param(*r[1:], id=r[0]) for r in MASK_ROWS])
def test_a_wrong_mask_is_named_by_the_layer_that_computes_it(mask_fn, words):
    """Fault list, masks (Keras: a mask rides on its tensor as (batch, time); a wrong one surfaces in the layer
    reading it, or not at all):
      Lambda(mask=...) giving (2, 3) for (2, 5, 4) outputs      ValueError naming the Lambda (was: blamed on the
                                                                 next layer)
      giving (2, 5, 1) / (1, 5) / (10,)                          ValueError naming the Lambda and (batch, time)
      the input's mask kept on an output pooled over time       ValueError naming the layer (test below)
      a correct Lambda mask                                     the masked mean, as NumPy (test below)
      an all-padding sample in predict                          NaN, as Keras (test below)
      an all-padding sample in fit (host, simulated device)     NonFiniteLossError naming the sample, the
                                                                 GlobalAveragePooling1D layer and 0/0 (was: "lower
                                                                 the learning rate / check the data for NaN")
      a layer making NaN from finite inputs (log of negatives)  NonFiniteLossError naming that layer
      finite outputs, sample weights overflowing the loss        NonFiniteLossError naming the weights
      a masked input to a layer without masking                 ValueError naming the layer (earlier round)
    """
    with pytest.raises(ValueError) as caught:
        _masked(mask_fn).predict(_IDS)
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{caught.value!r} lacks {missing}"


def test_a_mask_kept_on_an_output_without_time_is_named():
    model = _masked(lambda t, m: m, after=lambda t: L.Lambda(lambda v: F.mean(v, 1), mask=lambda v, m: m,
                                                               name="pooled")(t))
    with pytest.raises(ValueError, match="'pooled'.*\\(2, 5\\) for an output of shape \\(2, 4\\)"):
        model.predict(_IDS)


def test_a_correct_lambda_mask_gives_the_masked_mean():
    model = _masked(lambda t, m: m)
    table = model.get_layer("tokens").get_weights()[0]
    mask = (_IDS != 0).astype(np.float32)[..., None]
    expected = (table[_IDS] * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(model.predict(_IDS), expected, rtol=1e-6)


def test_an_all_padding_sample_predicts_nan_as_keras():
    ids = _IDS.copy()
    ids[1] = 0
    ours = _masked(lambda t, m: m).predict(ids)
    k_ids = keras.Input((5,), dtype="int64")
    reference = keras.Model(k_ids, keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(7, 4, mask_zero=True)(k_ids)))
    theirs = reference.predict(ids, verbose=0)
    assert np.isnan(ours[1]).all() and np.isnan(theirs[1]).all() and np.isfinite(ours[0]).all()


def test_an_all_padding_sample_in_fit_is_named_as_0_over_0(device):
    model = _masked(lambda t, m: m)
    model.compile("sgd", "mse", device=device)
    ids = np.tile(_IDS, (4, 1))
    ids[5] = 0
    with pytest.raises(NonFiniteLossError) as caught:
        model.fit(ids, np.zeros((8, 4), np.float32), batch_size=8, shuffle=False, verbose=0)
    text = str(caught.value)
    assert all(w in text for w in ["sample(s) [5]", "all padding", "GlobalAveragePooling1D layer 'mean'", "0/0"]), text


class _Log(L.Layer):
    def call(self, x):
        return F.log(x)


def test_a_layer_making_nan_from_finite_inputs_is_named(device):
    model = Sequential([L.Input((3,)), L.Dense(3, name="d"), _Log(name="logs")], seed=0)
    model.compile("sgd", "mse", device=device)
    with pytest.raises(NonFiniteLossError, match="_Log layer 'logs' is the first that is not finite"):
        model.fit(-np.ones((4, 3), np.float32) * np.arange(1, 4), np.zeros((4, 3), np.float32), verbose=0)


def test_weights_overflowing_the_loss_are_named():
    model = Sequential([L.Input((3,)), L.Dense(3)], seed=0)
    model.compile("sgd", "cross_entropy")
    with pytest.raises(NonFiniteLossError, match="weighted loss overflowed float32.*3e\\+38"):
        model.fit(np.ones((4, 3), np.float32) * 5, np.array([0, 1, 2, 0]), sample_weight=np.full(4, 3e38),
                  verbose=0)
