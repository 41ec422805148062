"""Keras 3 callbacks side by side with Keras 3 (torch backend): the hook sequence and logs of fit, evaluate and
predict from identical weights, EarlyStopping and ReduceLROnPlateau driven by the same monitored values,
``validation_split`` counted as Keras counts it, and the lazy batch logs on the simulated device."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import callbacks as C
from magmadnn import layers as L
from magmadnn.models import Sequential
from tests.keras_reference import keras

HOOKS = ["on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
         "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
         "on_predict_begin", "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end"]
WHOLE = ("train_begin", "train_end", "test_begin", "test_end", "predict_begin", "predict_end")


def recorder(base):
    """A callback class (subclass of ``base``) recording ``(hook, index, logs)`` for every hook."""

    def make(hook):
        if hook.endswith(WHOLE):
            def method(self, logs=None):
                self.seq.append((hook, None, dict(logs) if logs is not None else None))
        else:
            def method(self, index, logs=None):
                self.seq.append((hook, index, dict(logs) if logs is not None else None))
        return method

    def init(self):
        base.__init__(self)
        self.seq = []

    return type("Recorder", (base,), {"__init__": init, **{hook: make(hook) for hook in HOOKS}})


def data(n=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 3, n)


def weights(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(3, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)]


def keras_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.set_weights(weights())
    return model


def magmadnn_model(device="host", graph=False):
    model = Sequential([L.Input((3,)), L.Dense(3)], seed=0)
    model.compile(mdnn.optimizers.SGD(0.1), "cross_entropy", metrics=["accuracy"], device=device, graph=graph)
    model.set_weights(weights())
    return model


def assert_same_sequence(ours, theirs):
    assert [(h, i, None if logs is None else sorted(logs)) for h, i, logs in ours] == \
        [(h, i, None if logs is None else sorted(logs)) for h, i, logs in theirs]
    for (hook, index, a), (_, _, b) in zip(ours, theirs):
        for key in a or {}:
            np.testing.assert_allclose(np.asarray(a[key], np.float64), np.asarray(b[key], np.float64), rtol=2e-5,
                                       atol=1e-6, err_msg=f"{hook} {index} {key}")


# ------------------------------------------------------------------------------------- hooks against Keras 3


def test_fit_evaluate_predict_call_every_hook_in_keras_order_with_keras_logs():
    """fit with validation_split (7 train samples in batches of 4, 3 validation samples), evaluate and predict:
    the same hooks, indices, log keys and values (running means in the batch logs) as Keras 3."""
    x, y = data()
    ours, theirs = magmadnn_model(), keras_model()
    ours_rec, theirs_rec = recorder(C.Callback)(), recorder(keras.callbacks.Callback)()
    ours.fit(x, y, batch_size=4, epochs=2, validation_split=0.3, shuffle=False, callbacks=[ours_rec], verbose=0)
    theirs.fit(x, y, batch_size=4, epochs=2, validation_split=0.3, shuffle=False, callbacks=[theirs_rec], verbose=0)
    assert_same_sequence(ours_rec.seq, theirs_rec.seq)
    assert ours_rec.seq[-1][0] == "on_train_end" and ours_rec.seq[-1][2]["val_loss"] > 0

    for method, kwargs in (("evaluate", {"y": y}), ("predict", {})):
        ours_rec.seq, theirs_rec.seq = [], []
        getattr(ours, method)(x, batch_size=4, callbacks=[ours_rec], **kwargs)
        getattr(theirs, method)(x, batch_size=4, callbacks=[theirs_rec], verbose=0, **kwargs)
        assert_same_sequence(ours_rec.seq, theirs_rec.seq)


def test_on_batch_hooks_alias_the_train_batch_hooks_as_in_keras():
    """A callback overriding only on_batch_begin/end is called for training batches, not for test or predict
    batches (Keras' base class routes on_train_batch_* to them)."""
    x, y = data()
    seen = {}
    for name, base, model in (("ours", C.Callback, magmadnn_model()), ("keras", keras.callbacks.Callback,
                                                                        keras_model())):
        calls = []
        cls = type("Batches", (base,), {
            "on_batch_begin": lambda self, batch, logs=None, calls=calls: calls.append(("begin", batch)),
            "on_batch_end": lambda self, batch, logs=None, calls=calls: calls.append(("end", batch, sorted(logs)))})
        model.fit(x, y, batch_size=4, epochs=1, validation_split=0.3, shuffle=False, callbacks=[cls()], verbose=0)
        model.evaluate(x, y, batch_size=4, callbacks=[cls()], verbose=0)
        model.predict(x, batch_size=4, callbacks=[cls()], verbose=0) if name == "keras" else \
            model.predict(x, batch_size=4, callbacks=[cls()])
        seen[name] = calls
    assert seen["ours"] == seen["keras"] == [("begin", 0), ("end", 0, ["accuracy", "loss"]), ("begin", 1),
                                             ("end", 1, ["accuracy", "loss"])]


def test_callbacks_get_params_and_the_last_epoch_logs_at_train_end():
    x, y = data()
    params = {}
    for name, base, model in (("ours", C.Callback, magmadnn_model()), ("keras", keras.callbacks.Callback,
                                                                        keras_model())):
        cls = type("Params", (base,), {"on_train_begin": lambda self, logs=None, name=name: params.__setitem__(
            name, {k: self.params[k] for k in ("epochs", "steps", "verbose")})})
        model.fit(x, y, batch_size=4, epochs=3, callbacks=[cls()], verbose=0)
    assert params["ours"] == params["keras"] == {"epochs": 3, "steps": 3, "verbose": 0}
    model = magmadnn_model()
    history = model.fit(x, y, epochs=2, verbose=0)
    assert model.history is history and history.params == {"epochs": 2, "steps": 1, "verbose": 0}


def test_evaluate_and_predict_check_their_callbacks():
    x, y = data()
    model = magmadnn_model()
    with pytest.raises(TypeError, match="evaluate: callbacks must be a list"):
        model.evaluate(x, y, callbacks=C.History())
    with pytest.raises(TypeError, match="predict: callbacks must be Callback instances"):
        model.predict(x, callbacks=[object()])


# ------------------------------------------------------------------------------------------ the lazy batch logs


class Stash(C.Callback):
    """Keeps every train batch's logs without looking into them; read after fit."""

    def __init__(self):
        self.kept = []

    def on_train_batch_end(self, batch, logs=None):
        self.kept.append(logs)


def test_batch_logs_behave_as_a_dict_and_keep_their_batch_figures():
    x, y = data(16)
    stash, rec = Stash(), recorder(C.Callback)()
    magmadnn_model().fit(x, y, batch_size=4, epochs=2, shuffle=False, callbacks=[stash, rec], verbose=0)
    read_at_once = [logs for hook, _, logs in rec.seq if hook == "on_train_batch_end"]
    assert [dict(logs) for logs in stash.kept] == read_at_once  # read after fit: still each batch's figures
    logs = stash.kept[0]
    assert isinstance(logs, dict) and "loss" in logs and logs.get("nothing") is None and len(logs) == 2
    assert json.loads(json.dumps(logs)) == read_at_once[0] and repr(logs) == repr(read_at_once[0])
    assert {**logs} == read_at_once[0] and copy.deepcopy(logs) == read_at_once[0] and logs == read_at_once[0]
    fresh = C.BatchLogs(lambda: {"loss": 1.0})
    fresh["extra"] = 2
    assert dict(fresh) == {"loss": 1.0, "extra": 2}
    late = C.BatchLogs(lambda: {"loss": 1.0, "extra": 0})
    dict.__setitem__(late, "extra", 5)  # a key written before the first look wins over the read one
    assert late["extra"] == 5 and late != {"loss": 1.0, "extra": 0}


def simulated():
    from pymagma import simulator

    return simulator.simulated("full")


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def on_device(request):
    """A context manager factory: the simulated device, or (gpu twin) the real GPU as it is."""
    return simulated if request.param == "simulator" else _nothing


@pytest.mark.parametrize("graph", [False, True])
def test_device_batch_logs_equal_the_host_ones_and_are_read_only_when_looked_at(graph, monkeypatch, on_device):
    """On the simulated device (eager and graph replay) the batch logs equal the host's; a callback overriding a
    batch hook without reading the logs adds no device-to-host copy; reading them adds one per batch."""
    from pymagma import runtime

    x, y = data(24)
    host_rec = recorder(C.Callback)()
    magmadnn_model().fit(x, y, batch_size=4, epochs=2, shuffle=False, validation_split=0.25,
                         callbacks=[host_rec], verbose=0)
    with on_device():
        reads = []
        original = runtime.memcpy_dtoh
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda *a, **k: reads.append(1) or original(*a, **k))
        counts, stash = [], Stash()
        for callbacks in ([], [stash]):
            model = magmadnn_model("gpu", graph)
            model.progress_interval = float("inf")
            reads.clear()
            model.fit(x, y, batch_size=4, epochs=2, shuffle=False, validation_split=0.25, callbacks=callbacks,
                      verbose=0)
            counts.append(len(reads))
        assert counts[0] == counts[1]
        host_batches = [logs for hook, _, logs in host_rec.seq if hook == "on_train_batch_end"]
        for kept, want in zip(stash.kept, host_batches, strict=True):  # read after fit: still each batch's figures
            assert sorted(kept) == sorted(want) and [kept[k] for k in want] == pytest.approx(list(want.values()),
                                                                                               rel=1e-5)
        rec = recorder(C.Callback)()
        model = magmadnn_model("gpu", graph)
        model.progress_interval = float("inf")
        reads.clear()
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, validation_split=0.25, callbacks=[rec], verbose=0)
        batches = sum(hook in ("on_train_batch_end", "on_test_batch_end") for hook, _, _ in rec.seq)
        assert len(reads) == counts[0] + batches == counts[0] + 2 * (5 + 2)
    assert_same_sequence(rec.seq, host_rec.seq)


# ---------------------------------------------------------------------------- EarlyStopping and ReduceLROnPlateau


class StubModel:
    """What the two callbacks touch: stop_training, metrics, get/set_weights (the epoch the weights are from)
    and an optimizer."""

    def __init__(self, optimizer=None):
        self.stop_training, self.metrics, self.optimizer = False, [], optimizer
        self.epoch, self.restored = None, None

    def get_weights(self):
        return [np.array(self.epoch)]

    def set_weights(self, weights):
        self.restored = int(weights[0])


def drive(callback, model, values, monitor="val_loss"):
    """Run ``callback`` over epochs whose monitored value is ``values[epoch]``; the epochs run and each epoch's
    logs."""
    callback.set_model(model)
    callback.on_train_begin({})
    seen = []
    for epoch, value in enumerate(values):
        model.epoch = epoch
        callback.on_epoch_begin(epoch, {})
        logs = {"loss": 1.0, monitor: value}
        callback.on_epoch_end(epoch, logs)
        seen.append(logs)
        if model.stop_training:
            break
    callback.on_train_end({})
    return seen


EARLY = [
    ({}, [1.0, 0.9, 0.95, 0.8]),
    ({"patience": 2}, [1.0, 0.9, 0.95, 0.96, 0.97, 0.5]),
    ({"patience": 1, "min_delta": 0.05}, [1.0, 0.97, 0.96, 0.9, 0.88]),
    ({"patience": 2, "restore_best_weights": True}, [1.0, 0.7, 0.8, 0.9, 0.6]),
    ({"patience": 9, "restore_best_weights": True}, [1.0, 0.7, 0.8, 0.9, 0.75]),  # never stops: best restored
    ({"patience": 1, "baseline": 0.5}, [1.0, 0.9, 0.8, 0.7]),
    ({"patience": 1, "baseline": 0.5, "restore_best_weights": True}, [1.0, 0.4, 0.45, 0.3, 0.35, 0.36]),
    ({"patience": 0, "start_from_epoch": 2, "restore_best_weights": True}, [1.0, 2.0, 3.0, 2.5, 2.6]),
    ({"patience": 1, "mode": "max", "monitor": "val_accuracy"}, [0.5, 0.6, 0.6, 0.55, 0.7]),
    ({"patience": 1, "monitor": "val_accuracy"}, [0.5, 0.6, 0.6, 0.55, 0.7]),
    ({"patience": 0}, [1.0, 1.0, 1.0]),
]


def compiled_with_validation(module):
    """A real model of ``module``'s library after one fit with validation (Keras then knows its metrics)."""
    x, y = data()
    model = magmadnn_model() if module is C else keras_model()
    model.fit(x, y, epochs=1, validation_split=0.3, verbose=0)
    model.restored = None
    return model


@pytest.mark.parametrize("kwargs, values", EARLY)
def test_early_stopping_stops_and_restores_as_keras_3(kwargs, values):
    runs = []
    for module in (C, keras.callbacks):
        model = StubModel()
        if kwargs.get("monitor") == "val_accuracy" and "mode" not in kwargs:  # "auto": the metric tells
            model = compiled_with_validation(module)
        callback = module.EarlyStopping(**kwargs)
        seen = drive(callback, model, values, kwargs.get("monitor", "val_loss"))
        runs.append((len(seen), model.stop_training, callback.stopped_epoch, callback.best_epoch, model.restored,
                     None if callback.best is None else float(callback.best), callback.wait))
    assert runs[0] == runs[1]


PLATEAU = [
    ({"patience": 1}, [1.0, 1.0, 1.0, 0.5, 0.6, 0.7, 0.8]),
    ({"patience": 2, "factor": 0.5, "cooldown": 1}, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 0.2, 0.3]),
    ({"patience": 1, "factor": 0.2, "min_lr": 0.01}, [1.0] * 8),
    ({"patience": 1, "min_delta": 0.1}, [1.0, 0.95, 0.85, 0.84, 0.7]),
    ({"patience": 1, "monitor": "val_accuracy"}, [0.5, 0.4, 0.6, 0.6, 0.6]),
    ({"patience": 1, "mode": "max", "monitor": "val_auc"}, [0.5, 0.4, 0.6, 0.6, 0.6]),
    ({}, [1.0] * 23),
]


@pytest.mark.parametrize("kwargs, values", PLATEAU)
def test_reduce_lr_on_plateau_gives_keras_3_learning_rates(kwargs, values):
    """The logged ``learning_rate`` of every epoch and the final rate (Keras keeps its rate in float32)."""
    runs = []
    for module, optimizer in ((C, mdnn.optimizers.SGD(0.1)), (keras.callbacks, keras.optimizers.SGD(0.1))):
        model = StubModel(optimizer)
        if kwargs.get("monitor") == "val_accuracy" and "mode" not in kwargs:
            model = compiled_with_validation(module)
            model.optimizer = optimizer
        seen = drive(module.ReduceLROnPlateau(**kwargs), model, values, kwargs.get("monitor", "val_loss"))
        runs.append([logs["learning_rate"] for logs in seen] + [float(np.asarray(optimizer.learning_rate))])
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-6)
    assert len(set(np.round(runs[0], 12))) > 1 or kwargs == {}


def test_reduce_lr_on_plateau_checks_its_arguments_and_the_optimizer():
    with pytest.raises(ValueError, match="factor"):
        C.ReduceLROnPlateau(factor=1.0)
    with pytest.raises(ValueError, match="mode"):
        C.ReduceLROnPlateau(mode="up")
    with pytest.raises(ValueError, match="min_lr"):
        C.ReduceLROnPlateau(min_lr=-1)
    x, y = data()
    model = magmadnn_model()
    model.optimizer.lr = mdnn.schedules.CosineDecay(0.1, decay_steps=10)
    with pytest.raises(TypeError, match="schedule"):
        model.fit(x, y, callbacks=[C.ReduceLROnPlateau(monitor="loss")], verbose=0)
    for module in (C, keras.callbacks):  # a figure whose direction cannot be told: both ask for the mode
        with pytest.raises(ValueError, match="mode='max'"):
            drive(module.EarlyStopping(monitor="val_wiggle"), StubModel(), [1.0, 2.0], "val_wiggle")


class Forced(C.Callback):
    """Overwrites the monitored figure with a fixed sequence (the callbacks after it see these values)."""

    def __init__(self, values, key="loss"):
        self.values, self.key = values, key

    def on_epoch_end(self, epoch, logs=None):
        logs[self.key] = self.values[epoch]


def test_early_stopping_restores_the_best_weights_at_train_end_without_stopping():
    x, y = data(16)
    model = magmadnn_model()
    snapshots = []
    keep = type("Keep", (C.Callback,), {
        "on_epoch_end": lambda self, epoch, logs=None: snapshots.append(self.model.get_weights())})()
    stopper = C.EarlyStopping(monitor="loss", patience=10, restore_best_weights=True)
    history = model.fit(x, y, batch_size=4, epochs=4, callbacks=[Forced([3.0, 1.0, 2.0, 4.0]), keep, stopper],
                        verbose=0)
    assert len(history.epoch) == 4 and stopper.stopped_epoch == 0 and stopper.best_epoch == 1
    for ours, best in zip(model.get_weights(), snapshots[1]):
        np.testing.assert_array_equal(ours, best)
    assert not np.array_equal(snapshots[1][0], snapshots[3][0])


@pytest.mark.parametrize("where", ["host", "simulator eager", "simulator graph",
                                   pytest.param("gpu eager", marks=pytest.mark.gpu),
                                   pytest.param("gpu graph", marks=pytest.mark.gpu)])
def test_reduce_lr_on_plateau_reaches_every_training_step(where):
    """The rates ReduceLROnPlateau sets are the ones the next epoch's steps use, in replayed graphs too: the
    weights equal those of a run given the same rates by a LearningRateScheduler."""
    x, y = data(32)
    forced = [1.0, 1.0, 1.0, 1.0, 0.5, 0.5]
    keras_logs = drive(keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, cooldown=1),
                       StubModel(keras.optimizers.SGD(0.1)), forced, "loss")
    expected = [round(logs["learning_rate"], 8) for logs in keras_logs]  # Keras' float32 rates, as decimals
    assert len(set(expected)) >= 4
    device, graph = ("host", False) if where == "host" else ("gpu", where.endswith("graph"))
    with simulated() if where.startswith("simulator") else _nothing():
        plateau = magmadnn_model(device, graph)
        history = plateau.fit(x, y, batch_size=8, epochs=6, shuffle=False, verbose=0,
                              callbacks=[Forced(forced), C.ReduceLROnPlateau(monitor="loss", factor=0.5,
                                                                             patience=1, cooldown=1)])
        assert plateau.optimizer.learning_rate < expected[-1]
        scheduled = magmadnn_model(device, graph)
        scheduled.fit(x, y, batch_size=8, epochs=6, shuffle=False, verbose=0,
                      callbacks=[C.LearningRateScheduler(lambda epoch: expected[epoch])])
        if graph:
            assert sum(step.graph.launches for step in plateau._graphs.steps.values()) > 0
        assert history.history["learning_rate"] == pytest.approx(expected)
        for a, b in zip(plateau.get_weights(), scheduled.get_weights()):
            np.testing.assert_array_equal(a, b)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------------------------------------------- validation_split


@pytest.mark.parametrize("n", [7, 10, 11, 33, 100])
@pytest.mark.parametrize("split", [0.1, 0.2, 0.25, 0.3, 1 / 3, 0.5, 0.7, 0.9])
def test_validation_split_counts_as_keras(n, split):
    from keras.src.trainers.data_adapters.array_slicing import train_validation_split

    x, y = data(n)
    try:
        (_, keras_train), (_, keras_val) = train_validation_split((x, y), split)
    except ValueError:
        with pytest.raises(ValueError, match="empty split"):
            magmadnn_model().fit(x, y, validation_split=split, verbose=0)
        return
    rec = recorder(C.Callback)()
    model = magmadnn_model()
    model.optimizer.lr = 0.0  # weights unchanged: the validation figures are those of the held-out samples
    history = model.fit(x, y, batch_size=1, epochs=1, validation_split=split, shuffle=False, callbacks=[rec],
                        verbose=0)
    train = sum(hook == "on_train_batch_end" for hook, _, _ in rec.seq)
    val = sum(hook == "on_test_batch_end" for hook, _, _ in rec.seq)
    assert (train, val) == (len(keras_train), len(keras_val))
    held_out = model.evaluate(x[train:], y[train:], return_dict=True)
    assert history.history["val_loss"][0] == pytest.approx(held_out["loss"])


def test_stop_evaluating_and_stop_predicting_end_early_as_in_keras():
    x, y = data(12)
    results = {}
    for name, base, model in (("ours", C.Callback, magmadnn_model()), ("keras", keras.callbacks.Callback,
                                                                        keras_model())):
        stop = type("Stop", (base,), {
            "on_test_batch_end": lambda self, batch, logs=None: setattr(self.model, "stop_evaluating", batch == 1),
            "on_predict_batch_end": lambda self, batch, logs=None: setattr(self.model, "stop_predicting",
                                                                           batch == 0)})
        kwargs = {} if name == "ours" else {"verbose": 0}
        evaluated = model.evaluate(x, y, batch_size=4, callbacks=[stop()], **kwargs)
        results[name] = (evaluated, model.predict(x, batch_size=4, callbacks=[stop()], **kwargs))
    assert results["ours"][0] == pytest.approx(results["keras"][0], rel=1e-5)
    np.testing.assert_allclose(results["ours"][1], results["keras"][1], rtol=1e-5, atol=1e-6)
    assert results["ours"][1].shape == (4, 3)
    assert results["ours"][0] == pytest.approx(magmadnn_model().evaluate(x[:8], y[:8]), rel=1e-6)


# ------------------------------------------------------------- schedules' values (round three)
def _fit_with_scheduler(schedule):
    import magmadnn as mdnn
    from magmadnn import layers as L
    from magmadnn.callbacks import LearningRateScheduler

    model = mdnn.Sequential([L.Input((3,)), L.Dense(2)], seed=0).compile("sgd", "mse")
    x = np.ones((4, 3), np.float32)
    return model.fit(x, np.zeros((4, 2), np.float32), epochs=2, verbose=0,
                     callbacks=[LearningRateScheduler(schedule)]).history


def _step_schedule(schedule):
    import magmadnn as mdnn
    from magmadnn import layers as L

    model = mdnn.Sequential([L.Input((3,)), L.Dense(2)], seed=0).compile(mdnn.optimizers.SGD(schedule), "mse")
    return model.train_on_batch(np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32))


def _second_epoch_none(epoch, lr):
    return lr if epoch == 0 else None


def _raises_type_error_inside(epoch, lr):
    return lr * "half"


SCHEDULE_ROWS = [
    ("epoch-none", lambda: _fit_with_scheduler(lambda epoch: None), ValueError,
     ["LearningRateScheduler", "<lambda> (line", "returned None", "at epoch 0", "float"]),
    ("epoch-str", lambda: _fit_with_scheduler(lambda epoch, lr: "0.1"), ValueError, ["returned '0.1'", "at epoch 0"]),
    ("epoch-list", lambda: _fit_with_scheduler(lambda epoch: [0.1]), ValueError, ["returned [0.1]", "list"]),
    ("epoch-bool", lambda: _fit_with_scheduler(lambda epoch: True), ValueError, ["returned True", "bool"]),
    ("epoch-second-none", lambda: _fit_with_scheduler(_second_epoch_none), ValueError,
     ["'_second_epoch_none'", "at epoch 1"]),
    ("epoch-nan", lambda: _fit_with_scheduler(lambda epoch: float("nan")), ValueError,
     ["learning rate at epoch 0 (0-based) is nan", "finite"]),
    ("epoch-negative", lambda: _fit_with_scheduler(lambda epoch: -0.1), ValueError, ["is -0.1", ">= 0"]),
    ("epoch-type-error-inside", lambda: _fit_with_scheduler(_raises_type_error_inside), TypeError,
     ["can't multiply sequence"]),
    ("step-none", lambda: _step_schedule(lambda step: None), ValueError,
     ["SGD", "returned None", "at step 0"]),
    ("step-str", lambda: _step_schedule(lambda step: "0.01"), ValueError, ["SGD", "returned '0.01'", "at step 0"]),
    ("step-inf", lambda: _step_schedule(lambda step: float("inf")), ValueError,
     ["learning rate at step 0 is inf"]),
    ("step-2d-array", lambda: _step_schedule(lambda step: np.array([[0.1]])), ValueError, ["ndarray", "at step 0"]),
]


@pytest.mark.parametrize("call, error, words", [pytest.param(*r[1:], id=r[0]) for r in SCHEDULE_ROWS])
def test_a_schedule_returning_no_learning_rate_is_named_with_its_epoch_or_step(call, error, words):
    """Fault list, callbacks' schedules and callable learning rates (Keras 3's LearningRateScheduler raises a
    ValueError when the schedule does not return a float):
      LearningRateScheduler(lambda epoch: None)          ValueError naming the lambda's line, None, epoch 0 (was:
                                                         float() TypeError)
      returning "0.1" / [0.1] / True                     ValueError naming the value and its type
      None only at the second epoch                      ValueError naming the function and epoch 1
      NaN / -0.1                                         ValueError: a finite number >= 0, naming the epoch
      a TypeError raised inside an (epoch, lr) schedule  that TypeError itself (was: retried as schedule(epoch))
      SGD(lambda step: None / "0.01" / inf / [[0.1]])    ValueError naming SGD, the value and the step
      an int, a NumPy float or a 0-d array               the number (test below; Keras wants a float type)
    """
    with pytest.raises(error) as caught:
        call()
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{caught.value!r} lacks {missing}"


def test_schedules_may_return_any_real_number():
    history = _fit_with_scheduler(lambda epoch: [1, np.float32(0.5)][epoch])
    assert history["learning_rate"] == [1.0, 0.5]
    assert np.isfinite(_step_schedule(lambda step: np.array(0.01)))


def test_keras_refuses_a_schedule_returning_none():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="should be a float"):
        model.fit(np.ones((4, 3)), np.zeros((4, 2)), epochs=1, verbose=0,
                  callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch: None)])
