"""The sequence layers in models: finite-difference gradients, several outputs, masks in the graph, Lambda's
registered functions, save/load, ONNX refusals, bad inputs, and host vs simulated device training."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import Model, Sequential, models, optimizers
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.layers.base import ShapeMismatchError
from tests.magmadnn._gradcheck import check_gradients
from tests.magmadnn.backends import open_backend

# ------------------------------------------------------------------------------------------ gradient checks


@pytest.mark.parametrize("padding,stride,dilation", [("valid", 1, 1), ("same", 2, 1), ("causal", 1, 2)])
def test_conv1d_gradients(padding, stride, dilation):
    rng = np.random.default_rng(0)
    check_gradients(lambda x, w, b: F.conv1d(x, w, b, stride=stride, padding=padding, dilation=dilation),
                    rng.normal(size=(2, 7, 3)), rng.normal(size=(4, 3, 3)), rng.normal(size=4))


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pool1d_gradients(pool):
    x = np.random.default_rng(1).permutation(42).reshape(2, 7, 3) / 7.0  # distinct values: max is differentiable
    fn = F.max_pool1d if pool == "max" else F.avg_pool1d
    check_gradients(lambda t: fn(t, 3, 2, "same"), x)


def test_slice_and_reverse_gradients():
    x = np.random.default_rng(2).normal(size=(2, 5, 3))
    check_gradients(lambda t: F.reverse(F.slice_axis(t, 1, 1, 4), 1), x)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_masked_steps_and_final_states_gradients(kind):
    rng = np.random.default_rng(3)
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0]], float)
    gates = 4 if kind == "lstm" else 3
    args = [rng.uniform(-1, 1, (2, 4, 3)), rng.uniform(-1, 1, (3, 2 * gates)), rng.uniform(-1, 1, (2, 2 * gates)),
            rng.uniform(-1, 1, 2 * gates)] + ([rng.uniform(-1, 1, 2 * gates)] if kind == "gru" else [])
    steps = F.lstm_steps if kind == "lstm" else F.gru_steps

    def net(*tensors):
        out = steps(*tensors, mask=mask, return_sequences=True, go_backwards=True)
        return F.concatenate([F.flatten(out[0]), *out[1:]], axis=1)  # the sequence and every final state

    check_gradients(net, *args)


# ------------------------------------------------------------------------------------------- several outputs
def test_return_state_outputs_feed_other_layers_and_save(tmp_path):
    x = L.Input((5, 3))
    out, h, c = L.LSTM(4, return_sequences=True, return_state=True)(x)
    assert [t.shape for t in (out, h, c)] == [(5, 4), (4,), (4,)]
    y = L.Dense(2)(L.Concatenate()([h, c]))
    model = Model(x, y, seed=0)
    assert "[(None, 5, 4), (None, 4), (None, 4)]" in model.summary(print_fn=None)  # as Keras shows several outputs
    data = np.random.default_rng(0).normal(size=(6, 5, 3)).astype(np.float32)
    model.compile(optimizers.Adam(1e-2), "mse")
    model.fit(data, np.zeros((6, 2), np.float32), epochs=1, batch_size=3, verbose=0)
    loaded = models.load(model.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    # h is the last step of the output sequence; c differs from h
    (lstm,) = [layer for layer in model.layers if isinstance(layer, L.LSTM)]
    seq, h_val, c_val = (t.numpy() for t in lstm(data))
    np.testing.assert_allclose(h_val, seq[:, -1], rtol=1e-6)
    assert not np.allclose(c_val, h_val)


def test_a_layer_with_several_outputs_runs_once_per_call(monkeypatch):
    x = L.Input((4, 2))
    gru = L.GRU(3, return_state=True)
    out, h = gru(x)
    model = Model(x, L.Add()([out, h]), seed=0)
    calls = []
    original = gru.call
    monkeypatch.setattr(gru, "call", lambda *a, **k: calls.append(1) or original(*a, **k))
    model.predict(np.zeros((2, 4, 2), np.float32))
    assert len(calls) == 1


def test_sequential_refuses_a_layer_with_several_outputs():
    with pytest.raises(ValueError, match="has 3 outputs"):
        Sequential([L.Input((4, 2)), L.LSTM(3, return_state=True)])


# ------------------------------------------------------------------------------------------------ masks
def test_masked_sequence_model_saves_and_loads(tmp_path):
    model = Sequential([L.Input((6,), dtype="int64"), L.Embedding(9, 4, mask_zero=True),
                        L.Bidirectional(L.GRU(3, return_sequences=True)), L.Dropout(0.1), L.Dense(5),
                        L.GlobalAveragePooling1D(), L.Dense(2)], seed=0)
    ids = np.array([[1, 2, 3, 0, 0, 0], [4, 5, 6, 7, 8, 1]])
    before = model.predict(ids)
    loaded = models.load(model.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(ids), before)
    (emb,) = [layer for layer in loaded.layers if isinstance(layer, L.Embedding)]
    (bi,) = [layer for layer in loaded.layers if isinstance(layer, L.Bidirectional)]
    assert emb.mask_zero and bi.forward_layer.return_sequences


def test_padding_does_not_change_a_masked_models_output():
    model = Sequential([L.Input((7,), dtype="int64"), L.Embedding(9, 4, mask_zero=True), L.LSTM(3)], seed=0)
    short = Sequential([L.Input((3,), dtype="int64"), L.Embedding(9, 4), L.LSTM(3)], seed=0)
    short.set_weights(model.get_weights())
    np.testing.assert_allclose(model.predict(np.array([[0, 2, 0, 5, 7, 0, 0]])), short.predict(np.array([[2, 5, 7]])),
                               rtol=1e-6)


@pytest.mark.parametrize("layer", [L.Flatten(), L.Conv1D(2, 2), L.MaxPooling1D(), L.GlobalMaxPooling1D(),
                                   L.Lambda(lambda t: t * 2.0)],
                         ids=lambda layer: type(layer).__name__)
def test_a_layer_without_masking_refuses_a_masked_input(layer):
    x = L.Input((6,), dtype="int64")
    with pytest.raises(ValueError, match=f"{type(layer).__name__} layer .* does not support masking.*mask_zero"):
        layer(L.Embedding(9, 4, mask_zero=True)(x))


def test_eager_calls_carry_the_mask():
    emb, gap = L.Embedding(5, 2, mask_zero=True), L.GlobalAveragePooling1D()
    ids = np.array([[1, 2, 0, 0]])
    out = gap(emb(ids)).numpy()
    table = emb.params["embeddings"].numpy()
    np.testing.assert_allclose(out, table[[1, 2]].mean(axis=0, keepdims=True), rtol=1e-6)


# ----------------------------------------------------------------------------------------------- Lambda
@L.register_lambda
def _double_plus_one(x):
    return x * 2.0 + 1.0


def test_lambda_saves_by_registered_name_and_loads(tmp_path):
    model = Sequential([L.Input((3,)), L.Dense(4), L.Lambda(_double_plus_one), L.Dense(1)], seed=0)
    path = model.save(tmp_path / "m.npz")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(models.load(path).predict(x), model.predict(x))
    (lam,) = [layer for layer in model.layers if isinstance(layer, L.Lambda)]
    assert lam.get_config()["function"] == "_double_plus_one"


def test_lambda_is_differentiable_and_infers_its_shape():
    layer = L.Lambda(F.flatten)
    layer.build((2, 3))
    assert layer.output_shape == (6,)
    check_gradients(lambda t: L.Lambda(lambda v: F.tanh(v) * v)(t), np.random.default_rng(0).normal(size=(2, 3)))


def test_an_unregistered_lambda_cannot_be_saved(tmp_path):
    model = Sequential([L.Input((3,)), L.Lambda(lambda t: t * 3.0, name="triple")], seed=0)
    with pytest.raises(ValueError, match=r"'triple'.*<lambda>.*not registered.*register_lambda"):
        model.save(tmp_path / "m.npz")


def test_loading_an_unknown_lambda_name_names_it_and_runs_nothing(tmp_path):
    @L.register_lambda(name="temporary_fn")
    def temporary(x):
        return x + 1.0

    path = Sequential([L.Input((3,)), L.Lambda(temporary)], seed=0).save(tmp_path / "m.npz")
    from magmadnn.layers import lambda_layer  # noqa: PLC0415

    del lambda_layer._FUNCTIONS["temporary_fn"]
    with pytest.raises(ValueError, match="'temporary_fn' is not registered"):
        models.load(path)


def test_onnx_export_refuses_lambda_and_masks(tmp_path):
    pytest.importorskip("onnx")
    from magmadnn.onnx.errors import OnnxExportError  # noqa: PLC0415

    with pytest.raises(OnnxExportError, match=r"'twice' \(Lambda\) has no ONNX form"):
        Sequential([L.Input((3,)), L.Lambda(_double_plus_one, name="twice")]).export(tmp_path / "a.onnx")
    ids = L.Input((4,), dtype="int64")
    masked = L.LSTM(2, name="masked_lstm")(L.Embedding(5, 2, mask_zero=True)(ids))
    with pytest.raises(OnnxExportError, match="'masked_lstm'.*mask"):
        Model(ids, masked).export(tmp_path / "c.onnx")


# ------------------------------------------------------------------------------------------- bad inputs
ROWS = [
    ("conv1d-padding", lambda: L.Conv1D(2, 3, padding="full"), ValueError, ["Conv1D", "padding", "'full'", "causal"]),
    ("conv1d-kernel-0", lambda: L.Conv1D(2, 0), ValueError, ["Conv1D", "kernel_size", ">= 1"]),
    ("conv1d-groups", lambda: L.Conv1D(3, 2, groups=2), ValueError, ["filters (3)", "groups (2)"]),
    ("conv1d-stride-and-dilation", lambda: L.Conv1D(2, 2, strides=2, dilation_rate=2), ValueError,
     ["strides", "dilation_rate"]),
    ("conv1d-channels-first", lambda: L.Conv1D(2, 2, data_format="channels_first"), ValueError,
     ["channels_last", "Permute((2, 1))"]),
    ("conv1d-rank", lambda: Sequential([L.Input((1, 8, 8)), L.Conv1D(2, 3)]), ShapeMismatchError,
     ["Conv1D", "(time, features)", "(1, 8, 8)"]),
    ("conv1d-too-short", lambda: Sequential([L.Input((2, 3)), L.Conv1D(2, 3)]), ShapeMismatchError,
     ["Conv1D", "at least 3 steps", "(2, 3)"]),
    ("conv1d-groups-features", lambda: Sequential([L.Input((5, 3)), L.Conv1D(4, 2, groups=2)]), ShapeMismatchError,
     ["groups=2", "(5, 3)"]),
    ("maxpool1d-padding", lambda: L.MaxPooling1D(padding="causal"), ValueError, ["MaxPooling1D", "padding"]),
    ("maxpool1d-too-short", lambda: Sequential([L.Input((1, 3)), L.MaxPooling1D(2)]), ShapeMismatchError,
     ["at least 2 steps"]),
    ("avgpool1d-no-size", lambda: L.AveragePooling1D(), TypeError, ["pool_size"]),
    ("gap1d-rank", lambda: Sequential([L.Input((4,)), L.GlobalAveragePooling1D()]), ShapeMismatchError,
     ["GlobalAveragePooling1D", "(time, features)"]),
    ("gap1d-keepdims", lambda: L.GlobalMaxPooling1D(keepdims=1), TypeError, ["keepdims", "True or False"]),
    ("lambda-not-callable", lambda: L.Lambda(3), TypeError, ["Lambda", "callable"]),
    ("lambda-unknown-name", lambda: L.Lambda("no_such_fn"), ValueError, ["'no_such_fn'", "register_lambda"]),
    ("lambda-failing", lambda: Sequential([L.Input((3,)), L.Lambda(lambda t: t @ t)]), ValueError,
     ["Lambda", "failed", "output_shape="]),
    ("lambda-register-lambda", lambda: L.register_lambda(lambda t: t), ValueError, ["no usable name", "name="]),
    ("bidirectional-dense", lambda: L.Bidirectional(L.Dense(3)), TypeError,
     ["Bidirectional", "LSTM, GRU or SimpleRNN"]),
    ("bidirectional-merge", lambda: L.Bidirectional(L.LSTM(3), merge_mode="max"), ValueError,
     ["merge_mode", "'max'", "concat"]),
    ("bidirectional-backward-layer", lambda: L.Bidirectional(L.LSTM(3), backward_layer=L.LSTM(3)), ValueError,
     ["backward_layer", "opposite go_backwards"]),
    ("lstm-initial-state-count", lambda: L.LSTM(3)(L.Input((4, 2)), initial_state=[L.Input((3,))]), ValueError,
     ["LSTM", "initial_state", "2 state(s) [h, c]", "got 1"]),
    ("gru-initial-state-shape", lambda: L.GRU(3)(L.Input((4, 2)), initial_state=[L.Input((5,))]),
     ShapeMismatchError, ["GRU", "initial states of per-sample shape (3,)", "(5,)"]),
    ("lstm-return-state", lambda: L.LSTM(3, return_state=1), TypeError, ["return_state", "True or False"]),
    ("gru-reset-before", lambda: L.GRU(3, reset_after=False), ValueError, ["GRU", "reset_after=True"]),
    ("embedding-mask-zero", lambda: L.Embedding(5, 2, mask_zero="yes"), TypeError, ["mask_zero", "True or False"]),
    ("embedding-mask-zero-rank", lambda: Sequential([L.Input((3, 2), dtype="int64"), L.Embedding(5, 2,
                                                                                                 mask_zero=True)]),
     ShapeMismatchError, ["mask_zero=True", "(time,)"]),
    ("masked-flatten", lambda: Sequential([L.Input((3,), dtype="int64"), L.Embedding(5, 2, mask_zero=True),
                                           L.Flatten()]), ValueError, ["Flatten", "does not support masking"]),
]


@pytest.mark.parametrize("call, error, words", [pytest.param(*row[1:], id=row[0]) for row in ROWS])
def test_bad_input_gives_a_clear_typed_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# ------------------------------------------------------------------- host vs the simulated device (GPU twin)
@pytest.fixture(scope="module", params=[pytest.param("device", marks=pytest.mark.native),
                                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device_backend(request):
    yield from open_backend(request.param)


def _conv_model():
    return Sequential([L.Input((12, 3)), L.Conv1D(6, 3, padding="causal", activation="relu"),
                       L.Conv1D(6, 3, strides=2, padding="same", dilation_rate=1, groups=2),
                       L.MaxPooling1D(2), L.AveragePooling1D(2, padding="same"), L.Conv1D(4, 1),
                       L.Lambda(_double_plus_one), L.GlobalMaxPooling1D(), L.Dense(3)], seed=2)


def _recurrent_model():
    ids = L.Input((7,), dtype="int64")
    seq = L.Bidirectional(L.LSTM(4, return_sequences=True))(L.Embedding(10, 3, mask_zero=True)(ids))
    seq = L.MultiHeadAttention(2, 3)(seq)  # masked keys and queries
    out, h = L.GRU(5, return_sequences=True, return_state=True)(seq)
    out = L.GRU(5, return_sequences=True)(out, initial_state=[h])  # masked, from a given state
    pooled = L.GlobalAveragePooling1D()(out)
    return Model(ids, L.Dense(3)(L.Concatenate()([pooled, h])), seed=3)


def _data(kind, n=24):
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, n)
    if kind == "conv":
        return rng.normal(size=(n, 12, 3)).astype(np.float32) + y[:, None, None], y
    ids = rng.integers(1, 10, (n, 7))
    ids[: n // 2, 5:] = 0
    ids[::3, 0] = 0
    return ids, y


def _train(kind, device, steps=4):
    model = _conv_model() if kind == "conv" else _recurrent_model()
    model.compile(optimizers.Adam(1e-2), "cross_entropy", seed=5, device=device)
    x, y = _data(kind)
    losses = [model.train_on_batch(x[i * 6:(i + 1) * 6], y[i * 6:(i + 1) * 6]) for i in range(steps)]
    return losses, model.get_weights()


@pytest.mark.parametrize("kind", ["conv", "recurrent"])
def test_host_and_device_train_to_the_same_losses(kind, device_backend):
    host_losses, host_weights = _train(kind, "host")
    device_losses, device_weights = _train(kind, device_backend)
    assert np.all(np.isfinite(host_losses))
    np.testing.assert_allclose(device_losses, host_losses, rtol=2e-4, atol=2e-5)
    for dw, hw in zip(device_weights, host_weights, strict=True):
        np.testing.assert_allclose(dw, hw, rtol=2e-3, atol=2e-4)


def test_a_lambda_function_with_a_mask_parameter_receives_the_mask():
    seen = []

    def fn(x, mask=None):
        seen.append(mask)
        return x

    L.Lambda(fn, mask=lambda inputs, mask: mask)(L.Embedding(5, 2, mask_zero=True)(np.array([[1, 0, 2]])))
    np.testing.assert_array_equal(seen[-1].numpy(), [[1.0, 0.0, 1.0]])


@pytest.mark.parametrize("keepdims", [False, True])
def test_conv1d_and_1d_pooling_export_to_onnx_and_run_in_onnxruntime(keepdims, tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx  # noqa: PLC0415

    from tests.magmadnn._onnx_helpers import run_ort  # noqa: PLC0415

    x = L.Input((13, 4), name="sequence")
    h = L.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="relu")(x)
    h = L.Conv1D(6, 4, strides=2, padding="same", groups=2, activation="softmax")(h)
    h = L.MaxPooling1D(2, strides=1, padding="same")(h)
    h = L.AveragePooling1D(3, strides=2, padding="same")(h)
    a = L.GlobalAveragePooling1D(keepdims=keepdims)(h)
    b = L.GlobalMaxPooling1D(keepdims=keepdims)(L.Conv1D(6, 2, use_bias=False)(h))
    model = Model(x, L.Add()([a, b]), seed=0)
    data = np.random.default_rng(0).standard_normal((3, 13, 4)).astype(np.float32)
    path = model.export(tmp_path / "seq.onnx")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    np.testing.assert_allclose(run_ort(path, {"sequence": data}), model.predict(data), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.native
def test_masked_and_several_output_steps_replay_from_a_cuda_graph_as_eager():
    """compile(graph=True) on the simulated device: the masked recurrent model's replayed steps equal eager ones."""
    import warnings  # noqa: PLC0415

    from pymagma import simulator  # noqa: PLC0415

    x, y = _data("recurrent")
    results = []
    with simulator.simulated("full"):
        for graph in (False, True):
            model = _recurrent_model()
            model.compile(optimizers.Adam(1e-2), "cross_entropy", seed=5, device="gpu", graph=graph)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a step that cannot be captured warns: none may here
                # 4 batches an epoch: 1 eager (WARMUP), 1 captured, then replays, across an epoch's end too
                history = model.fit(x, y, batch_size=6, epochs=2, shuffle=False, verbose=0)
            results.append((history.history["loss"], model.get_weights()))
        assert model._graphs.steps  # the training step was captured (and replayed in the later batches)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for eager, replayed in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_array_equal(eager, replayed)


def test_a_given_backward_layer_is_used_and_saved(tmp_path):
    bi = L.Bidirectional(L.GRU(3, return_sequences=True), backward_layer=L.GRU(3, return_sequences=True,
                                                                                go_backwards=True, name="back"))
    model = Sequential([L.Input((4, 2)), bi, L.GlobalMaxPooling1D()], seed=0)
    x = np.random.default_rng(0).normal(size=(2, 4, 2)).astype(np.float32)
    loaded = models.load(model.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    (back,) = [layer for layer in loaded.layers if isinstance(layer, L.Bidirectional)]
    assert back.backward_layer.name == "back"


def test_an_encoder_decoder_model_saves_loads_and_trains(tmp_path):
    src, tgt = L.Input((5,), dtype="int64"), L.Input((4, 3))
    _, h, c = L.LSTM(4, return_state=True)(L.Embedding(7, 3, mask_zero=True)(src))
    out = L.Dense(2)(L.LSTM(4, return_sequences=True)(tgt, initial_state=[h, c]))
    model = Model([src, tgt], L.GlobalAveragePooling1D()(out), seed=0)
    rng = np.random.default_rng(0)
    xs = [rng.integers(0, 7, (6, 5)), rng.normal(size=(6, 4, 3)).astype(np.float32)]
    model.compile(optimizers.Adam(1e-2), "mse")
    losses = [model.train_on_batch(xs, np.zeros((6, 2), np.float32)) for _ in range(5)]
    assert losses[-1] < losses[0]
    loaded = models.load(model.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(xs), model.predict(xs))


def test_lambda_on_a_list_of_inputs():
    a, b = L.Input((3,)), L.Input((3,))
    model = Model([a, b], L.Lambda(lambda ts: ts[0] * ts[1])([a, b]), seed=0)
    x, y = np.arange(6.0).reshape(2, 3), np.ones((2, 3)) * 2
    np.testing.assert_allclose(model.predict([x, y]), x * y)
