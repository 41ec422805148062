"""A Keras user's week-two objects side by side with Keras 3 (torch backend) from identical weights: custom
``Metric`` and ``Loss`` subclasses in compile/fit/evaluate, ``utils.to_categorical``, ``Model.from_config`` /
``Sequential.from_config``, and batch iterables yielding ``(x, y, sample_weight)``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn import losses, metrics
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import close, same_weights, twins

RNG = np.random.default_rng(3)
X = RNG.standard_normal((48, 4)).astype(np.float32)
YR = RNG.standard_normal((48, 2)).astype(np.float32)
W = RNG.uniform(0.2, 2.0, 48).astype(np.float32)
KO = keras.ops


class GapOurs(metrics.Metric):
    def __init__(self, name="abs_gap", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_weight(name="count", shape=(), initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(F.sum(F.abs(y_true - y_pred)))
        self.count.assign_add(float(np.prod(y_pred.shape)))

    def result(self):
        return self.total / self.count


class GapKeras(keras.metrics.Metric):
    def __init__(self, name="abs_gap", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_weight(name="count", shape=(), initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(KO.sum(KO.abs(y_true - y_pred)))
        self.count.assign_add(KO.cast(KO.size(y_pred), "float32"))

    def result(self):
        return self.total / self.count


class ScaledOurs(losses.Loss):
    def __init__(self, factor=3.0, name="scaled_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.factor = factor

    def call(self, y_true, y_pred):
        return F.mean((y_true - y_pred) * (y_true - y_pred), axis=-1) * self.factor


class ScaledKeras(keras.losses.Loss):
    def __init__(self, factor=3.0, name="scaled_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.factor = factor

    def call(self, y_true, y_pred):
        return KO.mean(KO.square(y_true - y_pred), axis=-1) * self.factor


def regression_twins():
    return twins([L.Input((4,)), L.Dense(6, activation="tanh"), L.Dense(2)],
                 [keras.Input((4,)), keras.layers.Dense(6, activation="tanh"), keras.layers.Dense(2)])


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum"])
def test_custom_metric_and_loss_subclasses_train_as_keras(reduction):
    ours, theirs = regression_twins()
    ours.compile(mdnn.optimizers.SGD(0.02), loss=ScaledOurs(reduction=reduction), metrics=[GapOurs(), "mae"])
    theirs.compile(keras.optimizers.SGD(0.02), loss=ScaledKeras(reduction=reduction), metrics=[GapKeras(), "mae"])
    kwargs = {"epochs": 3, "batch_size": 16, "shuffle": False, "verbose": 0, "validation_split": 0.25}
    mine, ref = ours.fit(X, YR, **kwargs).history, theirs.fit(X, YR, **kwargs).history
    assert sorted(mine) == sorted(ref)
    for key in ref:
        close(mine[key], ref[key])
    close(mine["abs_gap"], mine["mae"])  # the same figure as Keras' mae: the state summed over the batches
    same_weights(ours, theirs)
    close(ours.evaluate(X, YR, verbose=0, return_dict=True)["abs_gap"],
          theirs.evaluate(X, YR, verbose=0, return_dict=True)["abs_gap"])


def test_a_custom_metric_accumulates_outside_fit_and_resets_as_keras():
    ours, theirs = GapOurs(), GapKeras()
    for a, b in ((YR[:10], YR[:10] + 1.0), (YR[10:20], YR[10:20] - 0.5)):
        ours.update_state(a, b)
        theirs.update_state(a, b)
    close(float(ours.result().numpy()), float(theirs.result()))
    ours.reset_state()
    theirs.reset_state()
    assert float(ours.total) == float(theirs.total) == 0.0
    assert [v.name for v in ours.variables] == ["total", "count"]
    assert ours.name == "abs_gap"

    class Unnamed(metrics.Metric):
        def update_state(self, y_true, y_pred, sample_weight=None):
            pass

    assert Unnamed().name == "unnamed"


def test_custom_loss_subclass_defaults_and_direct_call_as_keras():
    ours, theirs = ScaledOurs(), ScaledKeras()
    assert ours.get_config() == {k: v for k, v in theirs.get_config().items() if k in ("name", "reduction")}
    assert isinstance(ours, losses.KerasLoss)
    close(ours(YR[:8], YR[8:16], sample_weight=W[:8]).numpy(), theirs(YR[:8], YR[8:16], sample_weight=W[:8]))

    class Bad(losses.Loss):
        def call(self, y_true, y_pred):
            return 1.0

    model = mdnn.Sequential([L.Input((4,)), L.Dense(2)], seed=0)
    model.compile("sgd", loss=Bad())
    with pytest.raises(TypeError, match=r"Bad\.call\) returned float"):
        model.fit(X, YR, verbose=0)


def test_a_metric_without_state_is_a_clear_error():
    class NoState(metrics.Metric):
        def update_state(self, y_true, y_pred, sample_weight=None):
            pass

        def result(self):
            return 0.0

    model = mdnn.Sequential([L.Input((4,)), L.Dense(2)], seed=0)
    model.compile("sgd", "mse", metrics=[NoState()])
    with pytest.raises(TypeError, match="no state variables.*add_variable"):
        model.fit(X, YR, verbose=0)


@pytest.mark.parametrize("x, num_classes", [([0, 2, 1], None), ([[1], [0]], None), ([[0, 1], [2, 0]], None),
                                            (np.array([3, 1]), 5), (np.array([1.0, 0.0]), None)])
def test_to_categorical_as_keras(x, num_classes):
    mine, ref = mdnn.utils.to_categorical(x, num_classes), keras.utils.to_categorical(x, num_classes)
    assert mine.dtype == ref.dtype and mine.shape == ref.shape
    np.testing.assert_array_equal(mine, ref)


@pytest.mark.parametrize("x, num_classes, error", [([0, 3], 2, ValueError), ([-1, 1], None, ValueError),
                                                   ([0.5], None, TypeError), ([1], 0, ValueError)])
def test_to_categorical_refuses_indices_outside_the_classes(x, num_classes, error):
    with pytest.raises(error, match="to_categorical"):
        mdnn.utils.to_categorical(x, num_classes)


def test_model_and_sequential_from_config_rebuild_the_architecture():
    seq = mdnn.Sequential([L.Input((4,)), L.Dense(5, activation="relu"), L.Dense(2)], seed=0)
    again = mdnn.Sequential.from_config(seq.get_config())
    assert isinstance(again, mdnn.Sequential) and again.get_config() == seq.get_config()
    x = L.Input((4,))
    func = mdnn.Model(x, L.Dense(3)(L.Dense(5)(x)), seed=1)
    rebuilt = mdnn.Model.from_config(func.get_config())
    assert type(rebuilt) is mdnn.Model and rebuilt.get_config() == func.get_config()
    for a, b in zip(rebuilt.get_weights(), func.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)  # the same seed draws the same weights
    assert isinstance(mdnn.Model.from_config(seq.get_config()), mdnn.Sequential)
    with pytest.raises(TypeError, match="describes a Model.*Model.from_config"):
        mdnn.Sequential.from_config(func.get_config())
    k = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="relu"), keras.layers.Dense(2)])
    assert type(keras.Sequential.from_config(k.get_config())) is keras.Sequential  # the Keras habit it mirrors


def _batches(weights: bool):
    for start in range(0, 48, 16):
        part = slice(start, start + 16)
        yield (X[part], YR[part], W[part]) if weights else (X[part], YR[part])


def test_a_generator_of_x_y_sample_weight_trains_as_keras_and_as_arrays():
    ours, theirs = regression_twins()
    ours.compile(mdnn.optimizers.SGD(0.05), loss="mse")
    theirs.compile(keras.optimizers.SGD(0.05), loss="mse")
    for _ in range(2):
        mine = ours.fit(_batches(True), epochs=1, verbose=0).history["loss"]
        ref = theirs.fit(_batches(True), epochs=1, verbose=0).history["loss"]
        close(mine, ref)
    same_weights(ours, theirs)
    close(ours.evaluate(_batches(True), verbose=0), theirs.evaluate(_batches(True), verbose=0))
    arrays, _ = regression_twins()
    arrays.compile(mdnn.optimizers.SGD(0.05), loss="mse")
    arrays.fit(X, YR, sample_weight=W, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(arrays.get_weights(), ours.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_data_loader_with_sample_weight_yields_keras_triples():
    loader = mdnn.data.DataLoader(X, YR, batch_size=16, shuffle=False, sample_weight=W)
    ours, _ = regression_twins()
    ours.compile(mdnn.optimizers.SGD(0.05), loss="mse")
    arrays, _ = regression_twins()
    arrays.compile(mdnn.optimizers.SGD(0.05), loss="mse")
    close(ours.fit(loader, epochs=2, verbose=0).history["loss"],
          arrays.fit(X, YR, sample_weight=W, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"])
    with pytest.raises(ValueError, match="sample_weight needs y and one weight per sample"):
        mdnn.data.DataLoader(X, YR, sample_weight=W[:3])
    with pytest.raises(ValueError, match=r"\(x, y\) or \(x, y, sample_weight\).*4 items"):
        ours.fit(iter([(X, YR, W, W)]), verbose=0)


@pytest.mark.native
def test_custom_metric_and_loss_on_the_simulated_device_match_the_host(tmp_path):
    from pymagma import simulator

    def run(device):
        model = mdnn.Sequential([L.Input((4,)), L.Dense(6, activation="tanh"), L.Dense(2)], seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.compile(mdnn.optimizers.SGD(0.02), loss=ScaledOurs(), metrics=[GapOurs()], device=device)
        history = model.fit(_batches(True), epochs=2, verbose=0).history
        return history, model

    host, _ = run("host")
    with simulator.simulated("full"):
        device, model = run("gpu")
        model.save(tmp_path / "m.safetensors")
        weights = model.get_weights()
    for key in host:
        np.testing.assert_allclose(device[key], host[key], rtol=1e-5)
    again = mdnn.models.load_model(tmp_path / "m.safetensors", compile=False)
    for a, b in zip(again.get_weights(), weights, strict=True):
        np.testing.assert_array_equal(a, b)
