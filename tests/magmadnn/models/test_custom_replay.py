"""A subclassed model's own ``train_step`` / ``test_step`` replayed as a CUDA graph (``compile(graph="auto")``, the
default on the device): bit for bit as the same steps run eagerly (weights, optimizer slots, returned logs) across
``fit``, ``evaluate``, ``train_on_batch`` and ``test_on_batch``; a step that reads a value on the host, updates
compile()'s metrics or steps a second optimizer runs eagerly after one warning naming why; ``MAGMADNN_GRAPH=0``
turns it off; a capture, instantiate or launch fault (injected into the simulated CUDA runtime) falls back to eager
steps. ``train_on_batch`` of a custom step returns what Keras 3's does (checked against the installed keras)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn.models import custom_replay
from pymagma import _native
from tests.keras_reference import keras
from tests.magmadnn.backends import model_device
from tests.magmadnn.models.test_replay_default import _Fault

RNG = np.random.default_rng(11)
X = RNG.standard_normal((24, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 24)
W = RNG.uniform(0.5, 2.0, 24)


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


class Mean(mdnn.metrics.Metric):
    """Keras' guide tracker: a running mean in two state variables."""

    def __init__(self, name):
        super().__init__(name=name)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, values, sample_weight=None):
        self.total.assign_add(values)
        self.count.assign_add(1.0)

    def result(self):
        return self.total / self.count


class Custom(mdnn.Model):
    """Keras 3's custom steps: compute_loss (sample weights included), grad, optimizer.apply, own metrics."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.drop = L.Dense(8, activation="relu"), L.Dropout(0.25)
        self.norm, self.head = L.BatchNorm(), L.Dense(3)
        self.loss_tracker, self.val_tracker = Mean("loss"), Mean("val")

    @property
    def metrics(self):
        return [self.loss_tracker, self.val_tracker]

    def call(self, x, training=None):
        return self.head(self.norm(self.drop(self.hidden(x), training=training), training=training))

    def train_step(self, data):
        x, y, sample_weight = (*data, None)[:3]
        y_pred = self(x, training=True)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        grads = mdnn.grad(loss, self.trainable_weights)
        self.optimizer.apply(grads, self.trainable_weights)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result(), "batch_loss": loss, "total": self.loss_tracker.total}

    def test_step(self, data):
        x, y = data
        self.val_tracker.update_state(self.compute_loss(x=x, y=y, y_pred=self(x, training=False)))
        return {"loss": self.val_tracker.result()}


def _model(device, cls=Custom, graph="auto", lr=0.01):
    model = cls(seed=4)
    kwargs = {} if graph == "auto" else {"graph": graph}
    return model.compile(mdnn.optimizers.Adam(lr), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True),
                         device=device, **kwargs)


def _session(model) -> list:
    out = [model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0).history,
           model.fit(X, Y, batch_size=4, sample_weight=W, epochs=1, verbose=0).history,
           model.evaluate(X, Y, batch_size=4, return_dict=True)]
    for i in range(3):
        out.append(model.train_on_batch(X[4 * i:4 * i + 4], Y[4 * i:4 * i + 4], return_dict=True))
        out.append(model.test_on_batch(X[4 * i:4 * i + 4], Y[4 * i:4 * i + 4], return_dict=True))
    return out


def _state(model) -> list:
    out = [p.data.get() for p in model.parameters()]
    out += [a.get() for layer in model.layers for a in layer._state.values()]
    out += [a.get() for slots in model.optimizer.slot_arrays.values() for a in slots.values()]
    return out + [v.numpy() for m in model.metrics for v in getattr(m, "variables", ())] + [model.optimizer.iterations]


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _launches(model) -> dict:
    out: dict = {}
    for step in model._graphs.steps.values():
        if isinstance(step, custom_replay.CustomStep):
            out[step.kind] = out.get(step.kind, 0) + step.graph.launches
    return out


def test_a_custom_train_and_test_step_replay_bit_for_bit(device):
    replayed, eager = _model(device), _model(device, graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: both steps are captured
        got = _session(replayed)
    _same(got, _session(eager))
    _same(_state(replayed), _state(eager))
    launches = _launches(replayed)
    # fit: 2 epochs of 6 batches plus the weighted epoch (its own graph); evaluate and test_on_batch share one
    assert launches == {"custom train": 12 - 1 + 6 - 1 + 3, "custom test": 6 - 1 + 3}, launches
    assert np.isfinite(got[0]["loss"]).all() and got[0]["loss"] != got[0]["batch_loss"]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_custom_steps_under_a_mixed_policy_and_a_schedule_replay_bit_for_bit(device, policy):
    """The custom steps under a mixed precision policy (half compute, float32 weights) with a cosine-decay
    schedule read from the device at each replay."""
    runs = []
    for graph in ("auto", False):
        model = Custom(seed=4, dtype=policy)
        kwargs = {} if graph == "auto" else {"graph": graph}
        model.compile(mdnn.optimizers.Adam(mdnn.schedules.CosineDecay(0.02, decay_steps=30)),
                      mdnn.losses.SparseCategoricalCrossentropy(from_logits=True), device=device, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # nothing runs eagerly for want of a capture
            runs.append((_session(model), _state(model), _launches(model) if graph == "auto" else None))
    _same(runs[0][:2], runs[1][:2])
    assert set(runs[0][2]) == {"custom train", "custom test"} and all(runs[0][2].values()), runs[0][2]


def test_weights_set_between_steps_reach_the_graph(device):
    models = _model(device), _model(device, graph=False)
    for model in models:
        model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        model.set_weights([w * 0.5 for w in model.get_weights()])
        model.optimizer.learning_rate = 0.05
        model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    _same(_state(models[0]), _state(models[1]))


class ViaSuper(mdnn.Model):
    """Keras' default steps through super(): the running loss they keep lives on the device too."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.head = L.Dense(8, activation="relu"), L.Dense(3)

    def call(self, x, training=None):
        return self.head(self.hidden(x))

    def train_step(self, data):
        return super().train_step(data)

    def test_step(self, data):
        return super().test_step(data)


@pytest.mark.parametrize("metrics", [[], ["accuracy", "sparse_top_k_categorical_accuracy"]])
def test_the_default_steps_through_super_replay_bit_for_bit(device, metrics):
    """compute_metrics with compile()'s metrics included: their labels staged, their hits added on the device."""
    replayed, eager = (_model(device, ViaSuper, graph).compile(
        mdnn.optimizers.Adam(0.01), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=metrics,
        device=device, **({} if graph else {"graph": False})) for graph in ("auto", False))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _session(replayed)
    _same(got, _session(eager))
    _same(_state(replayed), _state(eager))
    assert set(_launches(replayed)) == {"custom train", "custom test"}
    assert got[0]["loss"][1] < got[0]["loss"][0]
    assert sorted(got[0]) == sorted(["loss", *(["accuracy", "sparse_top_k_categorical_accuracy"] if metrics else [])])


class ReadsTheLoss(Custom):
    def train_step(self, data):
        x, y = data
        loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        self.optimizer.apply(mdnn.grad(loss, self.trainable_weights), self.trainable_weights)
        if float(loss.numpy()) > 1e6:  # a host read inside the step
            raise AssertionError("diverged")
        return {"loss": loss}


class TwoOptimizers(Custom):
    def train_step(self, data):
        x, y = data
        loss = self.compute_loss(x=x, y=y, y_pred=self(x, training=True))
        head, rest = self.head.trainable_weights, self.hidden.trainable_weights
        grads = mdnn.grad(loss, head + rest)
        self.optimizer.apply(grads[:len(head)], head)
        self.other.apply(grads[len(head):], rest)
        return {"loss": loss}


@pytest.mark.parametrize("cls, reason", [
    (ReadsTheLoss, r"the custom train step reads a device value on the host at test_custom_replay\.py:\d+ "
                   r"\(train_step\)"),
    (TwoOptimizers, r"a second optimizer \(SGD\)"),
])
def test_what_cannot_be_captured_runs_eagerly_after_one_warning(device, cls, reason):
    models = []
    for graph in ("auto", False):
        model = _model(device, cls, graph)
        model.other = mdnn.optimizers.SGD(0.1)
        models.append(model)
    with pytest.warns(RuntimeWarning, match=reason) as said:
        got = [models[0].fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0).history,
               models[0].train_on_batch(X[:4], Y[:4], return_dict=True)]
    assert len([w for w in said if "running eagerly" in str(w.message)]) == 1
    _same(got, [models[1].fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0).history,
                models[1].train_on_batch(X[:4], Y[:4], return_dict=True)])
    _same(_state(models[0]), _state(models[1]))
    assert "custom train" in models[0]._graphs.failed and not _launches(models[0])


def test_a_log_returned_as_a_host_value_is_not_captured(device):
    class Counts(Custom):
        def train_step(self, data):
            logs = super().train_step(data)
            self.steps = getattr(self, "steps", 0) + 1
            return {**logs, "steps": float(self.steps)}  # a Python number: it would be fixed at capture

    model = _model(device, Counts)
    with pytest.warns(RuntimeWarning, match="returned 'steps' as a host value"):
        history = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0).history
    assert history["steps"] == [7.0]  # eager from then on (the capture ran the step's Python once)


def test_magmadnn_graph_0_turns_custom_replay_off(device, monkeypatch):
    monkeypatch.setenv("MAGMADNN_GRAPH", "0")
    models = _model(device), _model(device, graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _session(models[0])
    _same(got, _session(models[1]))
    assert not _launches(models[0]) and not models[0]._graphs.steps


@pytest.mark.parametrize("name, after", [("cudaStreamBeginCapture", 0), ("cudaGraphInstantiate", 0),
                                         ("cudaGraphLaunch", 0), ("cudaGraphLaunch", 3)])
def test_a_capture_or_launch_fault_falls_back_to_eager_custom_steps(name, after, monkeypatch):
    from pymagma import simulator

    with simulator.simulated("full"):
        eager = _model("gpu", graph=False)
        expected = _session(eager)
        model = _model("gpu")
        fault = _Fault(_native.current.cudart, name, after)
        monkeypatch.setattr(_native.current.cudart, name, fault)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            got = _session(model)
        _same(got, expected)
        _same(_state(model), _state(eager))
    messages = [str(w.message) for w in said]
    assert fault.calls > after
    assert all("running eagerly" in m and "cudaErrorNotSupported" in m for m in messages), messages
    kinds = sorted(m.split("the ")[1].split(" step")[0] for m in messages)
    assert kinds == ["custom test", "custom train"], messages  # one warning per kind of step
    assert set(model._graphs.failed) == set(kinds)


def test_host_models_run_custom_steps_eagerly_and_say_nothing():
    model = _model("host")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history = model.fit(X, Y, batch_size=4, epochs=1, verbose=0).history
    assert not model._graphs.steps and np.isfinite(history["loss"]).all()


def test_train_on_batch_of_a_custom_step_is_keras_3s():
    """Keras 3: train_on_batch / test_on_batch reset the metrics, run the overridden step once and return its logs:
    one value alone, else the model's metrics in order then the other keys sorted (or the dict)."""

    class Ours(mdnn.Model):
        def __init__(self):
            super().__init__(seed=0)
            self.d = L.Dense(2)

        def call(self, x):
            return self.d(x)

        def train_step(self, data):
            return {"b": F_sum(data[0]) * 0.0 + 2.0, "a": F_sum(data[0]) * 0.0 + 1.0}

        def test_step(self, data):
            return {"z": F_sum(data[0]) * 0.0 + 3.0}

    class Theirs(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(2)

        def call(self, x):
            return self.d(x)

        def train_step(self, data):
            return {"b": 2.0, "a": 1.0}

        def test_step(self, data):
            return {"z": 3.0}

    x, y = np.ones((4, 3), np.float32), np.ones((4, 2), np.float32)
    ours, theirs = Ours(), Theirs()
    ours.compile("sgd", "mse")
    theirs.compile("sgd", "mse")
    for model in (ours, theirs):
        model(x)
    for kwargs in ({}, {"return_dict": True}):
        expected = theirs.train_on_batch(x, y, **kwargs)
        got = ours.train_on_batch(x, y, **kwargs)
        _same(got, expected)
        assert type(got) is type(expected)
    assert ours.test_on_batch(x, y) == theirs.test_on_batch(x, y) == 3.0


def F_sum(x):  # noqa: N802 - a reduction kept on the backend
    from magmadnn import functional as F

    return F.sum(x)


def test_batch_callbacks_see_each_replayed_batchs_logs(device):
    """A callback's batch hook gets each batch's logs, read after that batch's launch (the graph's arrays are the
    next batch's): the same as eager steps give it."""

    class Record(mdnn.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = []

        def on_train_batch_end(self, batch, logs=None):
            self.seen.append(dict(logs))

    records = []
    for graph in ("auto", False):
        record = Record()
        _model(device, graph=graph).fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[record])
        records.append(record.seen)
    _same(records[0], records[1])
    assert len(records[0]) == 12 and len({r["batch_loss"] for r in records[0]}) == 12
