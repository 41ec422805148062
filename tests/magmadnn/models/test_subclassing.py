"""Subclassed models (layers tracked from attributes, ``call``), custom training steps and ``add_loss``, as Keras 3
writes them, checked against real Keras 3 from identical weights; saving, freezing, the device and graph replay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import functional as F
from magmadnn import layers as L
from tests.keras_reference import keras

RNG = np.random.default_rng(5)
X = RNG.standard_normal((24, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 24)


@mdnn.models.register
class Mlp(mdnn.Model):
    def __init__(self, units=5, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.blocks = {"first": L.Dense(units, activation="relu"), "second": [L.Dense(units, activation="tanh")]}
        self.head = L.Dense(3, activation="softmax")

    def call(self, inputs, training=None):
        x = self.blocks["first"](inputs)
        return self.head(self.blocks["second"][0](x))

    def get_config(self):
        return {"units": self.units}


class KerasMlp(keras.Model):
    def __init__(self, units=5):
        super().__init__()
        self.first = keras.layers.Dense(units, activation="relu")
        self.second = [keras.layers.Dense(units, activation="tanh")]
        self.head = keras.layers.Dense(3, activation="softmax")

    def call(self, inputs, training=None):
        return self.head(self.second[0](self.first(inputs)))


def _twins():
    ours, theirs = Mlp(seed=0), KerasMlp()
    ours.predict(X[:2])  # builds on data, as Keras builds on its first call
    theirs(X[:2])
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _close(a, b, tol=2e-4):
    assert sorted(a) == sorted(b)
    for key in b:
        np.testing.assert_allclose(a[key], b[key], rtol=tol, atol=tol / 10, err_msg=key)


def test_a_subclassed_model_trains_evaluates_and_predicts_as_keras():
    ours, theirs = _twins()
    assert [type(layer).__name__ for layer in ours.layers] == ["Dense"] * 3
    for model, lib in ((ours, mdnn), (theirs, keras)):
        model.compile(lib.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    _close(ours.fit(X, Y, batch_size=8, epochs=2, shuffle=False, validation_split=0.25, verbose=0).history,
           theirs.fit(X, Y, batch_size=8, epochs=2, shuffle=False, validation_split=0.25, verbose=0).history)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X, verbose=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.evaluate(X, Y), theirs.evaluate(X, Y, verbose=0), rtol=2e-4)
    assert "dense" in ours.summary(print_fn=None)


def test_saved_and_loaded_bit_for_bit_by_attribute_path(tmp_path):
    model = Mlp(units=4, seed=3)
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(X, Y, epochs=1, verbose=0)
    assert "layers.blocks.second.0.kernel" in model.named_arrays()
    path = model.save(tmp_path / "mlp.safetensors" if False else str(tmp_path / "mlp.npz"))
    loaded = mdnn.load_model(path)
    assert type(loaded) is Mlp and loaded.units == 4
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    before = loaded.get_weights()
    loaded.fit(X, Y, epochs=1, verbose=0, shuffle=False)
    model.fit(X, Y, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)  # the optimizer state came back too
    assert not np.array_equal(before[0], loaded.get_weights()[0])


def test_an_unregistered_class_is_named_on_load(tmp_path):
    class Local(mdnn.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d = L.Dense(2)

        def call(self, x):
            return self.d(x)

    model = Local()
    model.predict(X)
    path = model.save(str(tmp_path / "local.npz"))
    with pytest.raises(ValueError, match="'Local' is not registered.*register"):
        mdnn.load_model(path)
    assert isinstance(mdnn.load_model(path, custom_objects={"Local": Local}), Local)


def test_freezing_a_nested_block_and_bad_returns():
    class Outer(mdnn.Model):
        def __init__(self):
            super().__init__(seed=1)
            self.encoder = Mlp(units=3)
            self.head = L.Dense(1)

        def call(self, x, training=None):
            return self.head(self.encoder(x, training=training))

    outer = Outer()
    outer.compile("sgd", "mse")
    outer.fit(X, Y.astype(np.float32), epochs=1, verbose=0)
    outer.encoder.trainable = False
    frozen = outer.encoder.get_weights()
    outer.fit(X, Y.astype(np.float32), epochs=1, verbose=0)
    for a, b in zip(outer.encoder.get_weights(), frozen, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(outer.trainable_weights) == 2

    class Bad(mdnn.Model):
        def __init__(self):
            super().__init__()
            self.d = L.Dense(2)

        def call(self, x):
            return {"a": self.d(x), "b": 3.0}

    with pytest.raises(TypeError, match="call\\(\\) must return a Tensor.*got a dict holding \\['Tensor', 'float'\\]"):
        Bad().predict(X)
    with pytest.raises(TypeError, match="give both the Input"):
        mdnn.Model()


class Vae(mdnn.Model):
    """Keras' VAE: the KL term added in call with add_loss, the reconstruction loss compiled."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.encoder = L.Dense(4)
        self.mean, self.log_var = L.Dense(2), L.Dense(2)
        self.decoder = L.Dense(4)

    def call(self, x, training=None):
        h = F.relu(self.encoder(x))
        mean, log_var = self.mean(h), self.log_var(h)
        self.add_loss(F.mean(F.sum(-0.5 * (1 + log_var - mean * mean - F.exponential(log_var)), axis=1)))
        return self.decoder(mean)  # the mean of q(z|x): deterministic, for the comparison below


def test_add_loss_adds_the_term_to_training_as_keras():
    ours = Vae(seed=2)
    ours.predict(X[:2])

    class KerasVae(keras.Model):
        def __init__(self):
            super().__init__()
            self.encoder, self.mean, self.log_var = (keras.layers.Dense(4), keras.layers.Dense(2),
                                                     keras.layers.Dense(2))
            self.decoder = keras.layers.Dense(4)

        def call(self, x, training=None):
            ops = keras.ops
            h = ops.relu(self.encoder(x))
            mean, log_var = self.mean(h), self.log_var(h)
            self.add_loss(ops.mean(ops.sum(-0.5 * (1 + log_var - mean * mean - ops.exp(log_var)), axis=1)))
            return self.decoder(mean)

    theirs = KerasVae()
    theirs(X[:2])
    theirs.set_weights(ours.get_weights())
    for model, lib in ((ours, mdnn), (theirs, keras)):
        model.compile(lib.optimizers.SGD(0.05), "mse")
    _close(ours.fit(X, X, batch_size=8, epochs=2, shuffle=False, verbose=0).history,
           theirs.fit(X, X, batch_size=8, epochs=2, shuffle=False, verbose=0).history)
    assert len(ours.losses) == 1


class CustomStep(Mlp):
    """Keras 3's custom train_step (torch backend guide), written with magmadnn.grad and optimizer.apply."""

    def train_step(self, data):
        x, y = data
        y_pred = self(x, training=True)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        grads = mdnn.grad(loss, self.trainable_weights)
        self.optimizer.apply(grads, self.trainable_weights)
        self.tracker_update(loss)
        return {"loss": self.seen_loss / self.seen, **{m.name: m.result() for m in self.compiled_metrics_list()}}

    def tracker_update(self, loss):
        self.seen_loss = getattr(self, "seen_loss", 0.0) + float(loss.numpy())
        self.seen = getattr(self, "seen", 0) + 1

    def compiled_metrics_list(self):
        return []


def test_a_custom_train_step_matches_the_built_in_one():
    """The same updates as fit's own step (one loss, SGD): weights equal after an epoch; logs are the step's."""
    built_in, custom = Mlp(seed=4), CustomStep(seed=4)
    for model in (built_in, custom):
        model.compile(mdnn.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    built_in.fit(X, Y, batch_size=6, shuffle=False, verbose=0)
    history = custom.fit(X, Y, batch_size=6, shuffle=False, verbose=0).history
    for a, b in zip(built_in.get_weights(), custom.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert list(history) == ["loss"] and custom.seen == 4


def test_default_steps_through_super_and_apply_gradients():
    class Default(Mlp):
        def train_step(self, data):
            return super().train_step(data)

    ours, theirs = Default(seed=0), KerasMlp()
    ours.predict(X[:2])
    theirs(X[:2])
    theirs.set_weights(ours.get_weights())
    for model, lib in ((ours, mdnn), (theirs, keras)):
        model.compile(lib.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    _close(ours.fit(X, Y, batch_size=8, shuffle=False, verbose=0).history,
           theirs.fit(X, Y, batch_size=8, shuffle=False, verbose=0).history)
    weights = ours.trainable_weights
    loss = F.mean(ours(X, training=True))
    before = [w.numpy().copy() for w in weights]
    grads = mdnn.grad(loss, weights)
    assert all(w.grad is None for w in weights)
    mdnn.optimizers.SGD(1.0).apply_gradients(zip(grads, weights))
    np.testing.assert_allclose(weights[0].numpy(), before[0] - grads[0].numpy(), rtol=1e-6)


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    from tests.magmadnn.backends import model_device

    yield from model_device(request.param)


def test_device_and_replay_equal_the_host(device):
    from magmadnn.models import replay

    runs = []
    for dev, graph in (("host", False), (device, False), (device, True)):
        model = Mlp(seed=6)
        model.compile(mdnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"], device=dev,
                      graph=graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            runs.append((model.fit(X, Y, batch_size=8, epochs=2, verbose=0).history, model.get_weights()))
        if graph:
            assert any(isinstance(s, replay._Step) and s.kind == "train" and s.graph.launches
                       for s in model._graphs.steps.values())
    (h0, w0), (h1, w1), (h2, w2) = runs
    assert h1 == h2
    _close(h0, h1, 1e-5)
    for a, b, c in zip(w0, w1, w2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(b, c)


def test_a_subclassed_model_of_two_outputs_compiled_before_it_is_built():
    class TwoHeads(mdnn.Model):
        def __init__(self):
            super().__init__(seed=8)
            self.trunk, self.cls, self.reg = L.Dense(6, activation="relu"), L.Dense(3), L.Dense(1)

        def call(self, x, training=None):
            h = self.trunk(x)
            return {"cls": self.cls(h), "reg": self.reg(h)}

    model = TwoHeads()
    model.compile("adam", loss={"cls": mdnn.losses.SparseCategoricalCrossentropy(from_logits=True), "reg": "mse"},
                  metrics={"cls": ["accuracy"]})
    y = {"cls": Y, "reg": X[:, :1]}
    history = model.fit(X, y, batch_size=8, epochs=2, verbose=0).history
    assert sorted(history) == ["cls_accuracy", "cls_loss", "loss", "reg_loss"]
    assert model.output_names == ["cls", "reg"] and model.predict(X)["reg"].shape == (24, 1)
    with pytest.raises(ValueError, match=r"targets dict names \['other'\]"):
        model.evaluate(X, {"cls": Y, "other": X})


def test_a_custom_step_on_the_device_equals_the_host(device):
    runs = []
    for dev in ("host", device):
        model = CustomStep(seed=4)
        model.compile(mdnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", device=dev)
        runs.append((model.fit(X, Y, batch_size=6, shuffle=False, verbose=0).history, model.get_weights()))
    np.testing.assert_allclose(runs[0][0]["loss"], runs[1][0]["loss"], rtol=1e-5)
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_metric_trackers_of_a_metrics_property_are_reset_each_epoch():
    """Keras' guide pattern: a tracker metric attribute, a ``metrics`` property listing it, updated in the step."""
    class MeanTracker(mdnn.metrics.Metric):

        def __init__(self, name="mean"):
            super().__init__(name=name)
            self.total = self.add_variable(shape=(), initializer="zeros", name="total")
            self.count = self.add_variable(shape=(), initializer="zeros", name="count")

        def update_state(self, values, sample_weight=None):
            self.total.assign_add(values)
            self.count.assign_add(1.0)

        def result(self):
            return self.total / self.count

    class M(mdnn.Model):

        def __init__(self):
            super().__init__(seed=0)
            self.d = L.Dense(3)
            self.loss_tracker = MeanTracker("loss")

        @property
        def metrics(self):
            return [self.loss_tracker]

        def call(self, x, training=None):
            return self.d(x)

        def train_step(self, data):
            x, y = data
            loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
            self.optimizer.apply(mdnn.grad(loss, self.trainable_weights), self.trainable_weights)
            self.loss_tracker.update_state(loss)
            return {m.name: m.result() for m in self.metrics}

    model = M()
    model.compile("sgd", mdnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(X, Y, batch_size=6, epochs=2, shuffle=False, verbose=0).history
    assert list(history) == ["loss"] and float(model.loss_tracker.count.numpy()) == 4.0  # one epoch's batches
    assert np.isfinite(history["loss"]).all()


def test_a_custom_step_refuses_what_it_cannot_honour():
    model = CustomStep(seed=1)
    model.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"overrides train_step; \['validation_split'\].*validation_data"):
        model.fit(X, Y, validation_split=0.2, verbose=0)
    history = model.fit(X, Y, validation_data=(X[:6], Y[:6]), verbose=0).history
    assert sorted(history) == ["loss", "val_loss"]  # validation runs Keras' default test_step
