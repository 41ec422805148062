"""The layers of :mod:`magmadnn.onnx.exporters_more` export: onnxruntime runs each file like the model, and
``magmadnn.onnx.load`` reads it back to the same predictions; the forms they cannot write are OnnxExportErrors
naming the layer."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as m
from magmadnn import layers as L
from tests.magmadnn._onnx_helpers import monnx, ort

RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _session(path):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _causal(layer):
    layer.causal = True
    return layer


def _case(name):
    """(inputs, output, batches) of the model named ``name``."""
    a, b = L.Input((4,), name="a"), L.Input((4,), name="b")
    img, seq = L.Input((3, 6, 6), name="img"), L.Input((5, 3), name="seq")
    q, v = L.Input((3, 4), name="q"), L.Input((5, 4), name="v")
    clip = L.Input((4, 3, 6, 6), name="clip")
    pair, image, steps = [_x(3, 4), _x(3, 4)], [_x(2, 3, 6, 6)], [_x(2, 5, 3)]
    adapted = L.Normalization()
    adapted.adapt(_x(20, 4) * 3 + 1)
    cases = {
        "subtract": ([a, b], lambda: L.Subtract()([a, b]), pair),
        "multiply": ([a, b], lambda: L.Multiply()([a, b]), pair),
        "maximum": ([a, b], lambda: L.Maximum()([a, b]), pair),
        "minimum": ([a, b], lambda: L.Minimum()([a, b]), pair),
        "average": ([a, b], lambda: L.Average()([a, b]), pair),
        "noise_and_spatial_dropout": (img, lambda: L.GaussianNoise(0.5)(L.SpatialDropout2D(0.3)(img)), image),
        "zero_padding": (img, lambda: L.ZeroPadding2D(((1, 2), (0, 1)))(img), image),
        "cropping": (img, lambda: L.Cropping2D(((1, 2), (0, 1)))(img), image),
        "separable": (img, lambda: L.SeparableConv2D(5, 3, padding="same", activation="relu",
                                                     depth_multiplier=2)(img), image),
        "repeat_vector": (a, lambda: L.RepeatVector(3)(a), [_x(2, 4)]),
        "rescaling": (a, lambda: L.Rescaling(0.5, 0.1)(a), [_x(2, 4)]),
        "normalization_adapted": (a, lambda: adapted(a), [_x(2, 4)]),
        "normalization_inverted": (a, lambda: L.Normalization(mean=[1, 2, 3, 4], variance=[1, 4, 9, 16],
                                                              invert=True)(a), [_x(2, 4)]),
        "simple_rnn_tanh": (seq, lambda: L.SimpleRNN(4)(seq), steps),
        "simple_rnn_relu_sequences": (seq, lambda: L.SimpleRNN(4, activation="relu", return_sequences=True)(seq),
                                      steps),
        "simple_rnn_linear": (seq, lambda: L.SimpleRNN(4, activation=None, use_bias=False)(seq), steps),
        "attention_dot": ([q, v], lambda: L.Attention(use_scale=True)([q, v]), [_x(2, 3, 4), _x(2, 5, 4)]),
        "attention_concat": ([q, v], lambda: L.Attention(use_scale=True, score_mode="concat")([q, v]),
                             [_x(2, 3, 4), _x(2, 5, 4)]),
        "attention_causal": ([q, v], lambda: _causal(L.Attention())([q, v]), [_x(2, 3, 4), _x(2, 5, 4)]),
        "additive_attention": ([q, v], lambda: L.AdditiveAttention()([q, v, v]), [_x(2, 3, 4), _x(2, 5, 4)]),
        "bidirectional_gru": (seq, lambda: L.Bidirectional(L.GRU(3))(seq), steps),
        "bidirectional_simple_rnn": (seq, lambda: L.Bidirectional(L.SimpleRNN(3, activation="relu",
                                                                              return_sequences=True))(seq), steps),
        "time_distributed_dense": (seq, lambda: L.TimeDistributed(L.Dense(2, activation="gelu"))(seq), steps),
        "time_distributed_conv": (clip, lambda: L.TimeDistributed(L.Conv2D(2, 3))(clip), [_x(2, 4, 3, 6, 6)]),
    }
    inputs, make, batches = cases[name]
    return inputs, make(), batches


CASES = ["subtract", "multiply", "maximum", "minimum", "average", "noise_and_spatial_dropout", "zero_padding",
         "cropping", "separable", "repeat_vector", "rescaling", "normalization_adapted", "normalization_inverted",
         "simple_rnn_tanh", "simple_rnn_relu_sequences", "simple_rnn_linear", "attention_dot", "attention_concat",
         "attention_causal", "additive_attention", "bidirectional_gru", "bidirectional_simple_rnn",
         "time_distributed_dense", "time_distributed_conv"]


def _round_trip(inputs, output, batches, tmp_path):
    model = m.Model(inputs, output, seed=0)
    path = model.export(tmp_path / "m.onnx")
    feed = batches if len(batches) > 1 else batches[0]
    expected = model.predict(feed, verbose=0)
    names = [i.layer.name for i in model.inputs]
    np.testing.assert_allclose(_session(path).run(None, dict(zip(names, batches)))[0], expected, rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(monnx.load(path).predict(feed, verbose=0), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", CASES)
def test_the_layer_exports_and_loads_back(name, tmp_path):
    _round_trip(*_case(name), tmp_path)


@pytest.mark.parametrize("mode", ["concat", "sum", "mul", "ave"])
def test_bidirectional_lstm_merges(mode, tmp_path):
    seq = L.Input((5, 3), name="seq")
    _round_trip(seq, L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode=mode)(seq), [_x(2, 5, 3)],
                tmp_path)


def _states(name):
    """(inputs, outputs, batches) of a recurrent model with several outputs of one layer, or initial states."""
    seq, h0, c0 = L.Input((5, 3), name="seq"), L.Input((4,), name="h0"), L.Input((4,), name="c0")
    batches = [_x(2, 5, 3)]
    if name == "lstm_return_state_go_backwards":
        return seq, L.LSTM(4, return_state=True, go_backwards=True)(seq), batches
    if name == "gru_sequences_state":
        return seq, L.GRU(4, return_sequences=True, return_state=True)(seq), batches
    if name == "lstm_initial_state":
        return [seq, h0, c0], L.LSTM(4, return_sequences=True)(seq, initial_state=[h0, c0]), \
            batches + [_x(2, 4), _x(2, 4)]
    if name == "simple_rnn_state_backwards":
        return [seq, h0], L.SimpleRNN(4, return_state=True, go_backwards=True)(seq, initial_state=[h0]), \
            batches + [_x(2, 4)]
    if name == "simple_rnn_relu_state_backwards":
        return [seq, h0], L.SimpleRNN(4, activation="relu", return_state=True, go_backwards=True,
                                      return_sequences=True)(seq, initial_state=[h0]), batches + [_x(2, 4)]
    if name == "bidirectional_lstm_states":
        return seq, L.Bidirectional(L.LSTM(3, return_sequences=True, return_state=True))(seq), batches
    if name == "bidirectional_unmerged":
        return seq, L.Bidirectional(L.GRU(3), merge_mode=None)(seq), batches
    q, v = L.Input((3, 4), name="q"), L.Input((5, 4), name="v")
    layer = L.Attention()
    layer.return_attention_scores = True
    return [q, v], layer([q, v]), [_x(2, 3, 4), _x(2, 5, 4)]


STATES = ["lstm_return_state_go_backwards", "gru_sequences_state", "lstm_initial_state",
          "simple_rnn_state_backwards", "simple_rnn_relu_state_backwards", "bidirectional_lstm_states",
          "bidirectional_unmerged", "attention_scores"]


@pytest.mark.parametrize("name", STATES)
def test_several_outputs_of_a_layer_initial_states_and_go_backwards(name, tmp_path):
    inputs, outputs, batches = _states(name)
    model = m.Model(inputs, outputs, seed=0)
    path = model.export(tmp_path / "m.onnx")
    feed = batches if len(batches) > 1 else batches[0]
    expected = model.predict(feed, verbose=0)
    expected = expected if isinstance(expected, list) else [expected]
    names = [i.layer.name for i in model.inputs]
    written = _session(path).run(None, dict(zip(names, batches)))
    assert len(written) == len(expected) == len(model.outputs)
    back = monnx.load(path).predict(feed, verbose=0)
    back = list(back.values()) if isinstance(back, dict) else [back]
    for w, g, e in zip(written, back, expected):
        np.testing.assert_allclose(w, e, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make, match", [
    (lambda s: L.SimpleRNN(3, activation="relu")(s), r"SimpleRNN layer 'simple_rnn.*fixed number of steps"),
    (lambda s: L.TimeDistributed(L.Dense(2), name="td")(s), r"TimeDistributed layer 'td'.*fixed"),
    (lambda s: _causal(L.Attention(name="att"))([s, s]), r"Attention layer 'att': causal=True.*fixed"),
])
def test_forms_without_onnx_export_are_named(make, match, tmp_path):
    seq = L.Input((None, 3), name="seq")
    model = m.Model(seq, make(seq))
    with pytest.raises(monnx.OnnxExportError, match=match):
        model.export(tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
