"""Weight and activity regularizers and weight constraints side by side with Keras 3 (torch backend) from identical
weights: the penalties added to the loss (training and evaluate), the trained weights, the constraints applied after
each update, the names and configs; bad arguments; save/reload; the simulated device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import constraints, regularizers
from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, compile_both, fit_both, same_weights, twins

K = keras.layers
RNG = np.random.default_rng(5)
X = RNG.standard_normal((44, 4)).astype(np.float32)  # 44 = 2 batches of 16 and one of 12: a smaller last batch
YR = RNG.standard_normal((44, 2)).astype(np.float32)
SEQ = RNG.standard_normal((20, 5, 3)).astype(np.float32)
IMG = RNG.standard_normal((12, 2, 6, 6)).astype(np.float32)


def dense_pair(options, keras_options, activity=None, keras_activity=None):
    return twins([L.Input((4,)), L.Dense(6, activation="tanh", activity_regularizer=activity, **options),
                  L.Dense(2, **options)],
                 [keras.Input((4,)), K.Dense(6, activation="tanh", activity_regularizer=keras_activity,
                                             **keras_options), K.Dense(2, **keras_options)])


@pytest.mark.parametrize("ours, theirs", [
    ({"kernel_regularizer": "l2"}, {"kernel_regularizer": "l2"}),
    ({"kernel_regularizer": "l1", "bias_regularizer": "l1l2"}, {"kernel_regularizer": "l1",
                                                                 "bias_regularizer": "l1l2"}),
    ({"kernel_regularizer": regularizers.L1L2(0.02, 0.05)}, {"kernel_regularizer": keras.regularizers.L1L2(0.02,
                                                                                                         0.05)}),
    ({"kernel_regularizer": regularizers.l2(0.1), "bias_regularizer": regularizers.L1(0.3)},
     {"kernel_regularizer": keras.regularizers.l2(0.1), "bias_regularizer": keras.regularizers.L1(0.3)}),
])
def test_weight_penalties_join_the_loss_and_the_training_as_keras(ours, theirs):
    mine, ref = dense_pair(ours, theirs)
    compile_both(mine, ref, "sgd", "mse", ["mae"])
    close(mine.evaluate(X, YR, verbose=0), ref.evaluate(X, YR, verbose=0))  # the penalty is in the reported loss
    fit_both(mine, ref, X, YR, epochs=3, batch_size=16, validation_split=0.25)
    same_weights(mine, ref)
    close(sum(float(t.numpy()) for t in mine.losses), sum(float(keras.ops.convert_to_numpy(t)) for t in ref.losses))


def test_activity_penalty_is_divided_by_the_batch_size_as_keras():
    mine, ref = dense_pair({}, {}, regularizers.L2(0.5), keras.regularizers.L2(0.5))
    compile_both(mine, ref, "adam", "mse")
    close(mine.train_on_batch(X[:7], YR[:7]), ref.train_on_batch(X[:7], YR[:7]))
    fit_both(mine, ref, X, YR, epochs=2, batch_size=16)  # the last batch of 12 divides by 12
    same_weights(mine, ref)
    close(mine.evaluate(X, YR, batch_size=10, verbose=0), ref.evaluate(X, YR, batch_size=10, verbose=0))
    layer = mine.layers[0]
    out = layer(X[:5])
    assert len(layer.losses) == 1  # an outermost call starts its losses anew, as Keras
    expected = 0.5 * np.sum(np.asarray(out.numpy(), np.float64) ** 2) / 5
    close(float(layer.losses[0].numpy()), expected)


def test_a_frozen_layer_adds_no_weight_penalty_as_keras():
    mine, ref = dense_pair({"kernel_regularizer": "l2"}, {"kernel_regularizer": "l2"})
    mine.layers[0].trainable = ref.layers[0].trainable = False
    compile_both(mine, ref, "sgd", "mse")
    assert len(mine.losses) == len(ref.losses) == 1
    fit_both(mine, ref, X, YR, epochs=2)
    same_weights(mine, ref)


def _conv_to_keras(ws):
    return [w.transpose(2, 3, 1, 0) if w.ndim == 4 else w for w in ws]


def _seq_to_keras(ws):
    return [w.transpose(2, 1, 0) if w.ndim == 3 else w for w in ws]


@pytest.mark.parametrize("case", ["conv2d", "conv1d", "lstm", "embedding"])
def test_the_other_layers_take_their_keras_regularizers(case):
    if case == "conv2d":
        ours = [L.Input((2, 6, 6)), L.Conv2D(3, 3, kernel_regularizer="l2", bias_regularizer="l1"), L.Flatten(),
                L.Dense(2)]
        theirs = [keras.Input((6, 6, 2)), K.Conv2D(3, 3, kernel_regularizer="l2", bias_regularizer="l1"),
                  K.Permute((3, 1, 2)), K.Flatten(), K.Dense(2)]
        x, xk, to_keras, y = IMG, IMG.transpose(0, 2, 3, 1), _conv_to_keras, YR[:12]
    elif case == "conv1d":
        both = regularizers.L1L2(0.01, 0.01), keras.regularizers.L1L2(0.01, 0.01)
        ours = [L.Input((5, 3)), L.Conv1D(4, 2, kernel_regularizer=both[0]), L.Flatten(), L.Dense(2)]
        theirs = [keras.Input((5, 3)), K.Conv1D(4, 2, kernel_regularizer=both[1]), K.Flatten(), K.Dense(2)]
        x, xk, to_keras, y = SEQ, SEQ, _seq_to_keras, YR[:20]
    elif case == "lstm":
        ours = [L.Input((5, 3)), L.LSTM(4, kernel_regularizer="l2", recurrent_regularizer="l1",
                                        bias_regularizer="l2"), L.Dense(2)]
        theirs = [keras.Input((5, 3)), K.LSTM(4, kernel_regularizer="l2", recurrent_regularizer="l1",
                                              bias_regularizer="l2"), K.Dense(2)]
        x, xk, to_keras, y = SEQ, SEQ, list, YR[:20]
    else:
        ids = RNG.integers(0, 9, (20, 5))
        ours = [L.Input((5,), dtype="int64"), L.Embedding(9, 3, embeddings_regularizer="l2"), L.Flatten(),
                L.Dense(2)]
        theirs = [keras.Input((5,), dtype="int64"), K.Embedding(9, 3, embeddings_regularizer="l2"), K.Flatten(),
                  K.Dense(2)]
        x, xk, to_keras, y = ids, ids, list, YR[:20]
    mine, ref = twins(ours, theirs, to_keras)
    compile_both(mine, ref, "sgd", "mse")
    close(mine.evaluate(x, y, verbose=0), ref.evaluate(xk, y, verbose=0))
    for _ in range(2):
        close(mine.train_on_batch(x, y), ref.train_on_batch(xk, y))
    same_weights(mine, ref, to_keras)


@pytest.mark.parametrize("ours, theirs", [
    (lambda: constraints.MaxNorm(0.6), lambda: keras.constraints.MaxNorm(0.6)),
    (lambda: constraints.MaxNorm(0.5, axis=1), lambda: keras.constraints.MaxNorm(0.5, axis=1)),
    (lambda: "non_neg", lambda: "non_neg"),
    (lambda: constraints.UnitNorm(), lambda: keras.constraints.UnitNorm()),
    (lambda: constraints.MinMaxNorm(0.3, 0.7, rate=0.5), lambda: keras.constraints.MinMaxNorm(0.3, 0.7, rate=0.5)),
])
def test_constraints_apply_after_each_update_as_keras(ours, theirs):
    mine, ref = twins([L.Input((4,)), L.Dense(6, activation="tanh", kernel_constraint=ours(),
                                              bias_constraint="non_neg"), L.Dense(2, kernel_constraint=ours())],
                      [keras.Input((4,)), K.Dense(6, activation="tanh", kernel_constraint=theirs(),
                                                  bias_constraint="non_neg"), K.Dense(2, kernel_constraint=theirs())])
    compile_both(mine, ref, "adam", "mse")
    fit_both(mine, ref, X, YR, epochs=2, batch_size=16)
    same_weights(mine, ref)


def test_constraint_on_a_conv_kernel_uses_this_packages_layout():
    """Keras' per-filter MaxNorm(axis=[0, 1, 2]) of an (R, S, C, K) kernel is axis=[1, 2, 3] of (K, C, R, S)."""
    mine, ref = twins([L.Input((2, 6, 6)), L.Conv2D(3, 3, kernel_constraint=constraints.MaxNorm(0.4, [1, 2, 3])),
                       L.Flatten(), L.Dense(2)],
                      [keras.Input((6, 6, 2)), K.Conv2D(3, 3, kernel_constraint=keras.constraints.MaxNorm(0.4,
                                                                                                       [0, 1, 2])),
                       K.Permute((3, 1, 2)), K.Flatten(), K.Dense(2)], _conv_to_keras)
    compile_both(mine, ref, "sgd", "mse")
    for _ in range(3):
        close(mine.train_on_batch(IMG, YR[:12]), ref.train_on_batch(IMG.transpose(0, 2, 3, 1), YR[:12]))
    same_weights(mine, ref, _conv_to_keras)


@pytest.mark.parametrize("name", ["l1", "l2", "l1l2", "L1", "L2", "L1L2"])
def test_regularizer_names_and_configs_are_keras(name):
    mine, theirs = regularizers.get(name), keras.regularizers.get(name)
    assert type(mine).__name__ == type(theirs).__name__
    assert mine.get_config() == pytest.approx(theirs.get_config())
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    close(float(mine(mdnn.Tensor(w)).numpy()), float(keras.ops.convert_to_numpy(theirs(w))))


@pytest.mark.parametrize("name", ["max_norm", "non_neg", "unit_norm", "min_max_norm", "MaxNorm", "UnitNorm"])
def test_constraint_names_defaults_and_values_are_keras(name):
    mine, theirs = constraints.get(name), keras.constraints.get(name)
    assert type(mine).__name__ == type(theirs).__name__ and mine.get_config() == theirs.get_config()
    w = RNG.standard_normal((5, 3)).astype(np.float32) * 2
    close(mine(mdnn.Tensor(w)).numpy(), keras.ops.convert_to_numpy(theirs(w)))


@pytest.mark.parametrize("make, error, words", [
    (lambda: regularizers.L2(-1.0), ValueError, "l2 must be a non-negative finite number"),
    (lambda: regularizers.L1(float("nan")), ValueError, "l1 must be a non-negative"),
    (lambda: regularizers.get("l3"), ValueError, "unknown regularizer 'l3'"),
    (lambda: regularizers.get("l1_l2"), ValueError, r"Keras 3.15 does not take.*L1L2\(l1=0.01, l2=0.01\)"),
    (lambda: regularizers.get(3), TypeError, "regularizer must be None, a name"),
    (lambda: L.Dense(2, kernel_regularizer="l5"), ValueError, "unknown regularizer 'l5'"),
    (lambda: constraints.MaxNorm(-1), ValueError, "max_value must be a real number >= 0"),
    (lambda: constraints.MinMaxNorm(2.0, 1.0), ValueError, "max_value"),
    (lambda: constraints.UnitNorm(axis="rows"), TypeError, "axis must be an integer"),
    (lambda: constraints.get("positive"), ValueError, "unknown constraint 'positive'"),
    (lambda: L.BatchNormalization(kernel_regularizer="l2"), TypeError, "kernel_regularizer='l2' is not supported"),
    (lambda: L.LayerNormalization(kernel_constraint="non_neg"), TypeError, "kernel_constraint"),
    (lambda: constraints.UnitNorm(axis=2)(mdnn.Tensor(np.ones((2, 2), np.float32))), ValueError,
     r"axis 2 is out of range for a weight of shape \(2, 2\)"),
])
def test_bad_regularizer_and_constraint_arguments_are_clear_errors(make, error, words):
    with pytest.raises(error, match=words):
        make()


def test_a_plain_callable_trains_but_cannot_be_saved(tmp_path):
    model = mdnn.Sequential([L.Input((4,)), L.Dense(2, kernel_regularizer=lambda w: mdnn.F.sum(w * w) * 0.01,
                                                    kernel_constraint=lambda w: mdnn.F.clip(w, -0.2, 0.2))], seed=0)
    model.compile("sgd", "mse")
    model.fit(X, YR, epochs=1, verbose=0)
    assert np.abs(model.get_weights()[0]).max() <= 0.2
    with pytest.raises(TypeError, match="plain callable, which cannot be saved"):
        model.save(tmp_path / "m.safetensors")


def test_a_custom_regularizer_subclass_and_add_weight_take_part_and_reload(tmp_path):
    class Sparse(regularizers.Regularizer):
        def __init__(self, factor=0.1):
            self.factor = factor

        def __call__(self, x):
            return mdnn.F.sum(mdnn.F.abs(x)) * self.factor

        def get_config(self):
            return {"factor": self.factor}

    class Scale(L.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", regularizer=Sparse(0.5),
                                     constraint=constraints.NonNeg())

        def call(self, x):
            return x * self.w

    L.register(Scale)
    model = mdnn.Sequential([L.Input((4,)), Scale(), L.Dense(2, kernel_regularizer=Sparse())], seed=0)
    model.compile("sgd", "mse")
    assert len(model.losses) == 2
    close(float(model.losses[0].numpy()), 0.5 * 4)
    model.fit(X, YR, epochs=2, verbose=0)
    path = model.save(tmp_path / "m.safetensors")
    again = mdnn.load_model(path)
    assert again.layers[1].kernel_regularizer == Sparse()
    for a, b in zip(model.get_weights(), again.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    close(again.evaluate(X, YR, verbose=0), model.evaluate(X, YR, verbose=0))


def test_save_and_reload_keep_regularizers_and_constraints_bit_for_bit(tmp_path):
    model = mdnn.Sequential([L.Input((4,)), L.Dense(6, kernel_regularizer=regularizers.L1L2(0.01, 0.02),
                                                    activity_regularizer="l2",
                                                    kernel_constraint=constraints.MaxNorm(1.5, axis=0)),
                             L.Dense(2, bias_constraint="non_neg")], seed=3)
    model.compile("adam", "mse")
    model.fit(X, YR, epochs=2, verbose=0)
    path = model.save(tmp_path / "m.safetensors")
    again = mdnn.load_model(path)
    first = again.layers[0]
    assert first.kernel_regularizer == regularizers.L1L2(0.01, 0.02)
    assert first.activity_regularizer == regularizers.L2(0.01)
    assert first.kernel_constraint.get_config() == {"max_value": 1.5, "axis": 0}
    assert isinstance(again.layers[1].bias_constraint, constraints.NonNeg)
    close(again.evaluate(X, YR, verbose=0), model.evaluate(X, YR, verbose=0))
    for a, b in zip(model.get_weights(), again.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    a, b = (m.fit(X, YR, epochs=1, verbose=0, shuffle=False).history["loss"] for m in (model, again))
    assert a == b


@pytest.mark.native
def test_penalties_and_constraints_on_the_simulated_device_and_in_graph_replay():
    from pymagma import simulator

    def run(device, graph=False):
        model = mdnn.Sequential([L.Input((4,)), L.Dense(6, activation="tanh",
                                                        kernel_regularizer=regularizers.L1L2(0.01, 0.01),
                                                        activity_regularizer="l2",
                                                        kernel_constraint=constraints.MaxNorm(0.7)),
                                 L.Dense(2, bias_constraint="non_neg", kernel_constraint=constraints.UnitNorm(1))],
                                seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing keeps the step from being captured
            model.compile(mdnn.optimizers.Adam(0.01), "mse", device=device, graph=graph)
            history = model.fit(X, YR, epochs=3, batch_size=16, verbose=0, shuffle=False,
                                validation_split=0.25).history
        return history, model.get_weights(), model

    host, host_weights, _ = run("host")
    with simulator.simulated("full"):
        device, device_weights, _ = run("gpu")
        replayed, replayed_weights, model = run("gpu", graph=True)
        assert any(step.graph.launches for step in model._graphs.steps.values() if hasattr(step, "graph"))
    for key in host:
        np.testing.assert_allclose(device[key], host[key], rtol=1e-5)
    for a, b in zip(host_weights, device_weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert device == replayed
    for a, b in zip(device_weights, replayed_weights, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_loss_scale_step_skipped_for_overflow_leaves_constrained_weights_unchanged():
    model = mdnn.Sequential([L.Input((4,)), L.Dense(2, kernel_constraint=constraints.MaxNorm(0.3))], seed=0)
    model.compile(mdnn.optimizers.LossScaleOptimizer(mdnn.optimizers.SGD(0.1), initial_scale=1e38), "mse")
    before = model.get_weights()
    model.train_on_batch(X * 1e3, YR)  # the scaled loss overflows: the step is skipped
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    model.train_on_batch(X, YR)  # the scale has dropped: this step applies, and the constraint with it
    kernel = model.get_weights()[0]
    assert not np.array_equal(kernel, before[0])
    assert np.linalg.norm(kernel, axis=0).max() <= 0.3 + 1e-6
