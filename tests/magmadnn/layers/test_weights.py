"""Freezing (Keras' ``trainable``), weight lists, ``count_params`` and ``summary`` totals, ``Sequential.layers``, and
layer ``get_weights`` / ``set_weights``, each checked against Keras 3 (torch backend) from identical weights."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn import optimizers as O
from magmadnn.models import Model, Sequential
from pymagma import simulator
from tests.keras_reference import keras
from tests.magmadnn.backends import model_device

KL = keras.layers
RNG = np.random.default_rng(5)
X = RNG.standard_normal((24, 4)).astype(np.float32)
Y = RNG.standard_normal((24, 2)).astype(np.float32)


@pytest.fixture(params=["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _mlp(device="host"):
    return Sequential([L.Input((4,)), L.Dense(5, activation="tanh"), L.Dense(2)], seed=0, device=device)


def _keras_mlp(weights):
    k = keras.Sequential([keras.Input((4,)), KL.Dense(5, activation="tanh"), KL.Dense(2)])
    k.set_weights(weights)
    return k


def _same(ours, theirs, frozen=(), rtol=1e-4, atol=1e-5):
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"weight {i}")


def test_a_frozen_dense_matches_keras_after_adam_steps(device):
    model = _mlp(device)
    start = model.get_weights()
    k = _keras_mlp(start)
    model.layers[0].trainable = False
    k.layers[0].trainable = False
    model.compile(O.Adam(0.01, eps=1e-7), "mse")
    k.compile(keras.optimizers.Adam(0.01, epsilon=1e-7), "mse")
    model.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    after = model.get_weights()
    np.testing.assert_array_equal(after[0], start[0])  # frozen: bit for bit unchanged
    np.testing.assert_array_equal(after[1], start[1])
    assert not np.allclose(after[2], start[2])
    _same(after, k.get_weights())


def test_clipping_and_weight_decay_count_the_trainable_weights_only():
    for ours, theirs in [(O.SGD(0.1, global_clipnorm=0.05), keras.optimizers.SGD(0.1, global_clipnorm=0.05)),
                         (O.SGD(0.1, clipnorm=0.05), keras.optimizers.SGD(0.1, clipnorm=0.05)),
                         (O.AdamW(0.01, eps=1e-7, weight_decay=0.1),
                          keras.optimizers.AdamW(0.01, weight_decay=0.1, epsilon=1e-7))]:
        model = _mlp()
        start = model.get_weights()
        k = _keras_mlp(start)
        model.layers[1].trainable = False
        k.layers[1].trainable = False
        model.compile(ours, "mse")
        k.compile(theirs, "mse")
        model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        k.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        after = model.get_weights()
        np.testing.assert_array_equal(after[2], start[2])
        _same(after, k.get_weights())


def _bn_pair(device="host"):
    model = Sequential([L.Input((4,)), L.Dense(3), L.BatchNorm(eps=1e-3), L.Dense(2)], seed=1, device=device)
    k = keras.Sequential([keras.Input((4,)), KL.Dense(3), KL.BatchNormalization(epsilon=1e-3), KL.Dense(2)])
    weights = model.get_weights()
    weights[4], weights[5] = np.array([0.5, -1.0, 2.0], np.float32), np.array([0.5, 2.0, 4.0], np.float32)
    weights[2], weights[3] = np.array([1.5, 0.5, 1.0], np.float32), np.array([0.1, -0.2, 0.3], np.float32)
    model.set_weights(weights)
    k.set_weights(weights)
    return model, k, weights


def test_a_frozen_batchnorm_uses_and_keeps_its_moving_statistics_as_keras(device):
    model, k, start = _bn_pair(device)
    model.layers[1].trainable = False
    k.layers[1].trainable = False
    model.compile(O.SGD(0.05), "mse")
    k.compile(keras.optimizers.SGD(0.05), "mse")
    model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    after = model.get_weights()
    for i in (2, 3, 4, 5):  # gamma, beta, moving mean, moving variance
        np.testing.assert_array_equal(after[i], start[i])
    assert not np.allclose(after[0], start[0])
    _same(after, k.get_weights())
    training = model(X[:5], training=True).numpy()  # inference mode even when training
    np.testing.assert_allclose(training, model(X[:5], training=False).numpy(), rtol=1e-6)


def _counts(model) -> tuple:
    return (len(model.weights), len(model.trainable_weights), len(model.non_trainable_weights),
            [(len(layer.weights), len(layer.trainable_weights), len(layer.non_trainable_weights))
             for layer in model.layers])


def test_weight_lists_follow_keras_through_freezing_and_unfreezing():
    model, k, _ = _bn_pair()
    assert _counts(model) == _counts(k)
    steps = [("layer", 0, False), ("layer", 1, False), ("model", None, False), ("layer", 2, True),
             ("model", None, True), ("layer", 1, True)]
    for what, index, value in steps:
        for m in (model, k):
            if what == "model":
                m.trainable = value
            else:
                m.layers[index].trainable = value
        assert (model.trainable, [la.trainable for la in model.layers]) == (k.trainable,
                                                                            [la.trainable for la in k.layers])
        assert _counts(model) == _counts(k), (what, index, value)
    kinds = [type(w).__name__ for w in model.layers[1].weights]
    assert kinds == ["Parameter", "Parameter", "StateWeight", "StateWeight"]
    assert [w.trainable for w in model.layers[1].weights] == [w.trainable for w in k.layers[1].weights]


def _summary_totals(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "params:" in line]


def _keras_summary(k) -> str:
    lines = []
    k.summary(print_fn=lambda text, line_break=True: lines.append(text))
    return "\n".join(lines)


def test_count_params_and_summary_totals_match_keras():
    cnn = Sequential([L.Input((1, 8, 8)), L.Conv2D(4, 3), L.BatchNorm(), L.MaxPool2D(2), L.Flatten(), L.Dense(3)])
    kcnn = keras.Sequential([keras.Input((8, 8, 1)), KL.Conv2D(4, 3), KL.BatchNormalization(), KL.MaxPooling2D(2),
                             KL.Flatten(), KL.Dense(3)])  # NHWC there, NCHW here: the counts agree
    model, k, _ = _bn_pair()
    for ours, theirs in [(_mlp(), _keras_mlp(_mlp().get_weights())), (model, k), (cnn, kcnn)]:
        assert ours.count_params() == theirs.count_params()
        assert [la.count_params() for la in ours.layers] == [la.count_params() for la in theirs.layers]
        assert _summary_totals(ours.summary(print_fn=None)) == _summary_totals(_keras_summary(theirs))
        ours.layers[-1].trainable = theirs.layers[-1].trainable = False
        assert _summary_totals(ours.summary(print_fn=None)) == _summary_totals(_keras_summary(theirs))


def test_summary_counts_the_optimizer_slots_once_built_as_keras():
    model = _mlp()
    k = _keras_mlp(model.get_weights())
    model.compile(O.Adam(0.01), "mse")
    k.compile(keras.optimizers.Adam(0.01), "mse")
    model.fit(X, Y, epochs=1, verbose=0)
    k.fit(X, Y, epochs=1, verbose=0)
    ours, theirs = _summary_totals(model.summary(print_fn=None)), _summary_totals(_keras_summary(k))
    assert ours == theirs and ours[-1].startswith("Optimizer params: 76")  # 2 x 37 slots, step count, lr


def test_sequential_layers_leave_the_input_out_and_functional_keeps_it_as_keras():
    model = _mlp()
    k = _keras_mlp(model.get_weights())
    assert [type(la).__name__ for la in model.layers] == [type(la).__name__ for la in k.layers] == ["Dense"] * 2
    lazy = Sequential([L.Dense(3), L.Dense(2)])
    assert len(lazy.layers) == 2
    lazy.predict(X)
    assert len(lazy.layers) == 2
    x = L.Input((4,))
    functional = Model(x, L.Dense(2)(x))
    kx = keras.Input((4,))
    kf = keras.Model(kx, KL.Dense(2)(kx))
    assert [type(la).__name__ for la in functional.layers] == ["Input", "Dense"]
    assert [type(la).__name__ for la in kf.layers] == ["InputLayer", "Dense"]


def test_layer_get_and_set_weights_in_keras_order():
    model, k, weights = _bn_pair()
    ours, theirs = model.layers[1].get_weights(), k.layers[1].get_weights()
    assert [a.shape for a in ours] == [a.shape for a in theirs]
    _same(ours, theirs, rtol=0, atol=0)
    new = [a + 1 for a in ours]
    model.layers[1].set_weights(new)
    _same(model.layers[1].get_weights(), new, rtol=0, atol=0)
    np.testing.assert_array_equal(model.layers[1].state["running_var"], new[3])
    with pytest.raises(ValueError, match=r"set_weights got 2 arrays, the layer has 4 weights"):
        model.layers[1].set_weights(new[:2])
    with pytest.raises(ValueError, match=r"has shape \(3,\), the array given has shape \(4,\)"):
        model.layers[1].set_weights([np.ones(4)] + new[1:])
    _same(model.layers[1].get_weights(), new, rtol=0, atol=0)  # nothing was assigned
    with pytest.raises(ValueError, match="not built yet"):
        L.Dense(3).count_params()


def test_changing_trainable_after_compile_takes_effect_as_keras():
    model = _mlp()
    start = model.get_weights()
    k = _keras_mlp(start)
    model.compile(O.SGD(0.1), "mse")
    k.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    model.layers[1].trainable = k.layers[1].trainable = False  # no compile in between: Keras applies it too
    frozen = model.layers[1].get_weights()
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    k.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    _same(model.layers[1].get_weights(), frozen, rtol=0, atol=0)
    _same(model.get_weights(), k.get_weights())
    model.layers[1].trainable = True  # Keras raises "Unknown variable" here; magmadnn trains it again
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(model.layers[1].get_weights()[0], frozen[0])


def test_graph_replay_holds_frozen_weights_and_equals_eager_steps():
    results = []
    with simulator.simulated("full"):
        for graph in (False, True):
            model = _mlp("gpu")
            model.compile(O.Adam(0.01), "mse", graph=graph)
            model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)  # replayed (captured) steps
            model.layers[0].trainable = False
            frozen = model.layers[0].get_weights()
            model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
            _same(model.layers[0].get_weights(), frozen, rtol=0, atol=0)
            model.trainable = True
            model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
            assert not np.array_equal(model.layers[0].get_weights()[0], frozen[0])
            if graph:
                assert any(getattr(s, "graph", None) is not None and s.graph.launches
                           for s in model._graphs.steps.values())
            results.append(model.get_weights())
    for eager, replayed in zip(*results):
        np.testing.assert_array_equal(eager, replayed)


def test_compile_keeps_trained_weights_and_seed_needs_reinitialize():
    model = _mlp()
    model.compile(O.SGD(0.1), "mse", seed=3)  # never trained: a seed may re-create the weights
    np.testing.assert_array_equal(model.get_weights()[0], Sequential(
        [L.Input((4,)), L.Dense(5, activation="tanh"), L.Dense(2)], seed=3).get_weights()[0])
    model.fit(X, Y, epochs=1, verbose=0)
    trained = model.get_weights()
    model.compile(O.SGD(0.01), "mse")  # lowering the learning rate, as Keras users do
    _same(model.get_weights(), trained, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"reinitialize=True \(or call model.reinitialize\(seed\)\)"):
        model.compile("sgd", "mse", seed=0)
    _same(model.get_weights(), trained, rtol=0, atol=0)
    model.reinitialize(3)
    assert not np.allclose(model.get_weights()[0], trained[0])


def test_weights_assign_and_bad_flags():
    model, _, weights = _bn_pair()
    bn = model.layers[1]
    moving_var = bn.weights[3]
    moving_var.assign(np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(bn.state["running_var"], 2.0)
    bn.weights[0].assign(0.5)  # a number fills the weight
    np.testing.assert_array_equal(bn.params["gamma"].numpy(), 0.5)
    with pytest.raises(TypeError, match="trainable must be True or False"):
        bn.trainable = "no"
    with pytest.raises(TypeError, match="trainable must be True or False"):
        model.trainable = 0
    frozen = L.Dense(2, trainable=False)  # Keras' constructor argument
    Sequential([L.Input((3,)), frozen])
    assert frozen.trainable_weights == [] and len(frozen.non_trainable_weights) == 2
    assert frozen.get_config()["trainable"] is False


def test_freezing_a_sequential_before_it_is_built_freezes_its_layers():
    model = Sequential([L.Dense(3), L.BatchNorm(), L.Dense(2)], seed=0)
    model.trainable = False
    model.compile(O.SGD(0.1), "mse")
    model.predict(X)  # builds
    start = model.get_weights()
    model.fit(X, Y, epochs=1, verbose=0)
    assert model.trainable_weights == [] and all(not la.trainable for la in model.layers)
    for a, b in zip(model.get_weights(), start):
        np.testing.assert_array_equal(a, b)


def test_onnx_export_is_the_same_for_a_frozen_model(tmp_path):
    pytest.importorskip("onnx")
    model, _, _ = _bn_pair()
    plain = (tmp_path / "a.onnx").read_bytes() if model.export(tmp_path / "a.onnx") else b""
    model.trainable = False
    frozen = (tmp_path / "b.onnx").read_bytes() if model.export(tmp_path / "b.onnx") else b""
    assert plain and plain == frozen


def test_get_layer_by_name_or_index_as_keras():
    model = Sequential([L.Input((4,)), L.Dense(5, name="hidden"), L.Dense(2, name="out")])
    k = keras.Sequential([keras.Input((4,)), KL.Dense(5, name="hidden"), KL.Dense(2, name="out")])
    for m in (model, k):
        assert m.get_layer("out") is m.layers[1] and m.get_layer(index=0) is m.layers[0]
    with pytest.raises(ValueError, match=r"no layer named 'nope'; model .* has \['hidden', 'out'\]"):
        model.get_layer("nope")
    with pytest.raises(ValueError, match="exactly one"):
        model.get_layer()


@pytest.mark.parametrize("cls", [L.BatchNorm, L.BatchNormalization])
def test_both_batchnorm_names_run_in_inference_mode_when_frozen(cls):
    model = Sequential([L.Input((4,)), cls()], seed=0)
    layer = model.layers[0]
    layer.set_weights([np.full(4, 1.5, np.float32), np.full(4, 0.1, np.float32), np.full(4, 0.3, np.float32),
                       np.full(4, 2.0, np.float32)])
    layer.trainable = False
    stats = [a.copy() for a in layer.get_weights()[2:]]
    x = RNG.standard_normal((8, 4)).astype(np.float32)
    np.testing.assert_allclose(model(x, training=True).numpy(), model(x, training=False).numpy(), rtol=1e-6)
    for a, b in zip(layer.get_weights()[2:], stats):
        np.testing.assert_array_equal(a, b)
    layer.trainable = True
    assert not np.allclose(model(x, training=True).numpy(), model(x, training=False).numpy())


# ------------------------------------------------------------- training a frozen model warns (round three)
def _frozen_all(model):
    model.trainable = False


def _each_layer(model):
    for layer in model.layers:
        layer.trainable = False


def _after_compile(model):
    model.trainable = False  # compile happened before (the fixture compiles first)


def _unfrozen_again(model):
    model.trainable = False
    model.trainable = True


def _one_layer(model):
    model.layers[0].trainable = False


FREEZE_CASES = [  # (id, how, trains through, warns)
    ("model-trainable-false", _frozen_all, "fit", True),
    ("every-layer-frozen", _each_layer, "fit", True),
    ("frozen-train-on-batch", _frozen_all, "train_on_batch", True),
    ("frozen-after-compile", _after_compile, "fit", True),
    ("unfrozen-again", _unfrozen_again, "fit", False),
    ("one-layer-frozen", _one_layer, "fit", False),
]


@pytest.mark.parametrize("how, through, warns", [pytest.param(*c[1:], id=c[0]) for c in FREEZE_CASES])
def test_training_without_a_trainable_weight_warns_as_keras(device, how, through, warns):
    """Fault list, freezing (Keras 3's train step warns "The model does not have any trainable weights."):
      model.trainable = False, then fit                 Keras' warning, naming the model (was: silent)
      every layer frozen one by one, then fit           the warning ("every layer is frozen")
      model.trainable = False, then train_on_batch      the warning
      frozen after compile                               the warning (magmadnn applies a flag at once, so no
                                                         recompile is needed, unlike Keras)
      frozen, then trainable = True again               no warning, the weights move
      one layer frozen                                  no warning, that layer unchanged
      a model without weights (Activation only)         the warning (test below)
      only add_weight(trainable=False) weights          the warning (test below)
      model.trainable = "no" / 0                        TypeError naming the model (test below)
    """
    model = _mlp(device).compile(O.SGD(0.1), "mse")
    how(model)
    before = model.get_weights()
    with pytest.warns(UserWarning, match="does not have any trainable weights") if warns else _no_warning():
        if through == "fit":
            model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
        else:
            model.train_on_batch(X[:8], Y[:8])
    after = model.get_weights()
    moved = [not np.array_equal(a, b) for a, b in zip(before, after)]
    assert not any(moved) if warns else any(moved)
    if how is _one_layer:
        assert moved[:2] == [False, False]


class _no_warning:  # noqa: N801 - a context manager
    def __enter__(self):
        import warnings

        self.catcher = warnings.catch_warnings(record=True)
        self.seen = self.catcher.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        self.catcher.__exit__(*exc)
        assert not [w for w in self.seen if "trainable weights" in str(w.message)]
        return False


class _FrozenOnly(L.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", trainable=False)

    def call(self, x):
        return x * self.w


@pytest.mark.parametrize("layers", [[L.Activation("tanh")], [_FrozenOnly()]], ids=["no-weights", "frozen-weights"])
def test_a_model_with_nothing_to_train_warns_as_keras(layers):
    model = Sequential([L.Input((2,)), *layers], seed=0).compile("sgd", "mse")
    with pytest.warns(UserWarning, match="does not have any trainable weights"):
        model.fit(X[:, :2], Y, verbose=0)
    reference = keras.Sequential([keras.Input((2,)), KL.Activation("tanh")])
    reference.compile("sgd", "mse")
    with pytest.warns(UserWarning, match="does not have any trainable weights"):
        reference.fit(X[:, :2], Y, verbose=0)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_trainable_must_be_a_bool(value):
    with pytest.raises(TypeError, match="trainable must be True or False"):
        _mlp().trainable = value


# ------------------------------------------------------------- the last round's API changes keep a path
def _compiled(metrics=()):
    model = _mlp()
    model.compile(O.SGD(0.1), "mse", metrics=list(metrics))
    return model


def test_old_spellings_fail_naming_the_new_ones():
    """Fault list, API changes of the last round (code written against the earlier magmadnn):
      layer.weights["kernel"]                 TypeError naming layer.params['kernel'] (was: "list indices must be
                                              integers or slices, not str")
      model.evaluate(x, y)["loss"], metrics   TypeError naming return_dict=True
      model.evaluate(x, y)["loss"], no metric TypeError naming return_dict=True (was: float not subscriptable)
      model.train_on_batch(x, y)["loss"]      TypeError naming return_dict=True
      Sequential.layers[1] meant for the old list with the Input first   documented in Sequential.layers and in
                                              docs/coming-from-keras-pytorch.md (an index cannot tell)
      the list / float returned otherwise     a list / float: equal, unpackable, indexable by int, JSON-able
    """
    model = _compiled(["mae"])
    with pytest.raises(TypeError, match=r"layer\.params\['kernel'\]"):
        model.layers[0].weights["kernel"]
    with pytest.raises(TypeError, match="return_dict=True"):
        model.evaluate(X, Y)["loss"]
    with pytest.raises(TypeError, match="return_dict=True"):
        _compiled().evaluate(X, Y)["loss"]
    with pytest.raises(TypeError, match="return_dict=True"):
        model.train_on_batch(X, Y)["mae"]
    assert "layers[i + 1]" in type(model).layers.__doc__


def test_the_new_containers_are_plain_lists_and_floats():
    import json

    model = _compiled(["mae"])
    weights = model.layers[0].weights
    assert isinstance(weights, list) and weights == list(weights) and weights[0] is model.layers[0].kernel
    assert weights[-1:] == [model.layers[0].bias] and len(weights) == 2
    with pytest.raises(TypeError):
        weights[1.5]
    loss, mae = model.evaluate(X, Y)
    assert [loss, mae] == model.evaluate(X, Y) and json.loads(json.dumps(model.evaluate(X, Y))) == [loss, mae]
    alone = _compiled().evaluate(X, Y)
    assert isinstance(alone, float) and alone == pytest.approx(float(alone)) and alone + 1.0 > alone
    assert model.evaluate(X, Y, return_dict=True)["loss"] == loss
    reference = keras.Sequential([keras.Input((4,)), KL.Dense(5, activation="tanh"), KL.Dense(2)])
    reference.compile("sgd", "mse", metrics=["mae"])
    assert len(reference.evaluate(X, Y, verbose=0)) == len(model.evaluate(X, Y))
    assert [type(layer).__name__ for layer in model.layers] == [type(layer).__name__ for layer in reference.layers]
