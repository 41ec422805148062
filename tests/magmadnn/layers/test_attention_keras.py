"""Keras' Attention (dot and concat scores, use_scale) and AdditiveAttention side by side with Keras 3 (torch
backend) from identical weights: outputs and scores, causal masks, Embedding masks, training; bad inputs;
save/reload; the simulated device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, fit_both, same_weights

K = keras.layers
RNG = np.random.default_rng(41)
Q = RNG.standard_normal((8, 4, 5)).astype(np.float32)
V = RNG.standard_normal((8, 6, 5)).astype(np.float32)
KEY = RNG.standard_normal((8, 6, 5)).astype(np.float32)
IDS = RNG.integers(0, 7, (16, 6)).astype(np.int64)
IDS[:, 4:] = 0  # padding: masked keys and queries
Y = RNG.standard_normal((16, 2)).astype(np.float32)


@pytest.mark.parametrize("name, kwargs", [
    ("Attention", {}), ("Attention", {"use_scale": True}), ("Attention", {"score_mode": "concat"}),
    ("Attention", {"score_mode": "concat", "use_scale": True}), ("AdditiveAttention", {}),
    ("AdditiveAttention", {"use_scale": False}),
])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_outputs_and_scores_as_keras(name, kwargs, causal):
    ours, theirs = getattr(L, name)(seed=0, **kwargs), getattr(K, name)(**kwargs)
    out, scores = ours([Q, V, KEY], return_attention_scores=True, use_causal_mask=causal)
    theirs([Q, V, KEY])
    theirs.set_weights(ours.get_weights())
    ref, ref_scores = theirs([Q, V, KEY], return_attention_scores=True, use_causal_mask=causal)
    close(out.numpy(), keras.ops.convert_to_numpy(ref))
    close(scores.numpy(), keras.ops.convert_to_numpy(ref_scores))
    two, ref_two = getattr(L, name)(seed=1, **kwargs), getattr(K, name)(**kwargs)
    out = two([Q, V])
    ref_two([Q, V])
    ref_two.set_weights(two.get_weights())
    close(out.numpy(), keras.ops.convert_to_numpy(ref_two([Q, V])))


def _build(lib, inputs, name):
    q_ids, v_ids = inputs((6,), dtype="int64"), inputs((6,), dtype="int64")
    embed = lib.Embedding(7, 4, mask_zero=True)
    attended = getattr(lib, name)()([lib.Dense(4)(embed(q_ids)), embed(v_ids)])
    return [q_ids, v_ids], lib.Dense(2)(lib.GlobalAveragePooling1D()(attended))


@pytest.mark.parametrize("name", ["Attention", "AdditiveAttention"])
def test_attention_with_embedding_masks_trains_as_keras(name):
    ours = mdnn.Model(*_build(L, L.Input, name), seed=0)
    theirs = keras.Model(*_build(K, keras.Input, name))
    theirs.set_weights(ours.get_weights())
    x = [IDS, IDS[::-1].copy()]
    close(ours.predict(x, verbose=0), theirs.predict(x, verbose=0))
    compile_both(ours, theirs, "adam", "mse")
    fit_both(ours, theirs, x, Y, epochs=2, batch_size=8)
    same_weights(ours, theirs)


def test_a_symbolic_call_returning_scores_as_keras():
    q, v = L.Input((4, 5)), L.Input((6, 5))
    out, scores = L.Attention()([q, v], return_attention_scores=True)
    assert (out.shape, scores.shape) == ((4, 5), (4, 6))  # per sample, as every shape here
    model = mdnn.Model([q, v], [out, scores])
    kq, kv = keras.Input((4, 5)), keras.Input((6, 5))
    ref = keras.Model([kq, kv], K.Attention()([kq, kv], return_attention_scores=True))
    for a, b in zip(model.predict([Q, V], verbose=0), ref.predict([Q, V], verbose=0), strict=True):
        close(a, b)


@pytest.mark.parametrize("make, error, words", [
    (lambda: L.Attention(score_mode="general"), ValueError, "score_mode must be 'dot' or 'concat'"),
    (lambda: L.Attention(use_scale="yes"), TypeError, "use_scale must be True or False"),
    (lambda: L.AdditiveAttention(dropout=1.0), ValueError, "dropout"),
    (lambda: L.Attention()(Q), ValueError, r"\[query, value\]"),
    (lambda: L.Attention()([Q, V[:, :, :3]]), ValueError, "query and key of one dim"),
    (lambda: L.Attention()([Q, V, KEY[:, :5]]), ValueError, "key and value of one time"),
    (lambda: L.Attention()([Q, V], use_causal_mask="yes"), TypeError, "use_causal_mask must be True or False"),
])
def test_bad_inputs_to_the_attention_layers_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _model():
    q, v = L.Input((4, 5)), L.Input((6, 5))
    a = L.Attention(use_scale=True, score_mode="concat", dropout=0.2)([q, v], use_causal_mask=True)
    b = L.AdditiveAttention()([L.Dense(5)(q), v, v])
    return mdnn.Model([q, v], L.Dense(2)(L.Flatten()(L.Concatenate()([a, b]))), seed=2)


def test_the_attention_layers_save_and_reload_bit_for_bit(tmp_path):
    model = _model()
    model.compile("adam", "mse")
    model.fit([Q, V], Y[:8], epochs=2, batch_size=4, verbose=0)
    again = mdnn.load_model(model.save(tmp_path / "m.safetensors"))
    assert [la.get_config() for la in again.layers] == [la.get_config() for la in model.layers]
    np.testing.assert_array_equal(again.predict([Q, V], verbose=0), model.predict([Q, V], verbose=0))


@pytest.mark.native
def test_the_attention_layers_on_the_simulated_device_match_the_host_and_replay():
    from pymagma import simulator

    def run(device, graph=False):
        model = _model()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit([Q, V], Y[:8], epochs=3, batch_size=4, verbose=0, shuffle=False).history
        return history, model.get_weights()

    host, _ = run("host")
    with simulator.simulated("full"):
        device, device_weights = run("gpu")
        replayed, replayed_weights = run("gpu", graph=True)
    assert np.all(np.isfinite(host["loss"])) and np.all(np.isfinite(device["loss"]))
    assert device == replayed
    for x, y in zip(device_weights, replayed_weights, strict=True):
        np.testing.assert_array_equal(x, y)
    model = _model()  # without dropout, the device matches the host
    model.compile("sgd", "mse")
    expected = model.predict([Q, V], verbose=0)
    with simulator.simulated("full"):
        model.compile("sgd", "mse", device="gpu")
        np.testing.assert_allclose(model.predict([Q, V], verbose=0), expected, rtol=1e-5, atol=1e-6)


def _keras_mha(mha, d):
    k_mha = keras.layers.MultiHeadAttention(2, 3, dtype="float64")
    k_mha.build((None, 5, d), (None, 4, d), (None, 4, d))
    w = {k: v.numpy() for k, v in mha.params.items()}
    k_mha.set_weights([w["query_kernel"].reshape(d, 2, 3), w["query_bias"].reshape(2, 3),
                       w["key_kernel"].reshape(d, 2, 3), w["key_bias"].reshape(2, 3),
                       w["value_kernel"].reshape(d, 2, 3), w["value_bias"].reshape(2, 3),
                       w["output_kernel"].reshape(2, 3, d), w["output_bias"]])
    return k_mha


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_multi_head_attention_mask_and_scores_as_keras(causal, with_mask):
    q, v = RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 4, 4))
    mask = RNG.random((3, 5, 4)) > 0.3 if with_mask else None
    mask = None if mask is None else mask | (np.arange(4) == 0)  # every query sees key 0 (Keras' rows of nothing
    # are uniform, magmadnn's zero: a difference kept, see docs)
    ours = L.MultiHeadAttention(2, 3, dtype="float64", seed=0)
    out, scores = ours(q, v, attention_mask=mask, return_attention_scores=True, use_causal_mask=causal)
    theirs = _keras_mha(ours, 4)
    ref, ref_scores = theirs(q, v, attention_mask=mask, return_attention_scores=True, use_causal_mask=causal)
    assert scores.shape == (3, 2, 5, 4)
    close(out.numpy(), keras.ops.convert_to_numpy(ref))
    close(scores.numpy(), keras.ops.convert_to_numpy(ref_scores))
    close(ours(q, v, use_causal_mask=causal).numpy(), keras.ops.convert_to_numpy(
        theirs(q, v, use_causal_mask=causal)))  # the fused path unchanged


def test_multi_head_attention_mask_and_scores_bad_inputs():
    q, v = RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 4, 4))
    mha = L.MultiHeadAttention(2, 3, dtype="float64")
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(batch, query_time, key_time\)"):
        mha(q, v, attention_mask=np.ones((3, 4, 4), bool))
    with pytest.raises(TypeError, match="return_attention_scores must be True or False"):
        mha(q, v, return_attention_scores="yes")
    a, b = L.Input((5, 4)), L.Input((4, 4))
    with pytest.raises(TypeError, match="on data calls here, not in a model"):
        L.MultiHeadAttention(2, 3)(a, b, return_attention_scores=True)
