"""Callbacks (EarlyStopping, ModelCheckpoint, LearningRateScheduler, CSVLogger, History) and the metrics."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from magmadnn import backend, metrics, schedules
from magmadnn import layers as L
from magmadnn.callbacks import Callback, CSVLogger, EarlyStopping, LearningRateScheduler, ModelCheckpoint
from magmadnn.models import Sequential

XP = backend.get("host")


def blobs(n=96, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = (rng.normal(size=(n, 4)) + 2.0 * np.eye(3, 4)[y]).astype(np.float32)
    return x, y


def mlp(seed=0):
    model = Sequential([L.Input((4,)), L.Dense(8, activation="relu"), L.Dense(3)], seed=seed)
    model.compile("sgd", metrics=["accuracy"])
    return model


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_train_begin(self, logs=None):
        self.events.append("train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(f"epoch_begin {epoch}")

    def on_batch_end(self, batch, logs=None):
        self.events.append(f"batch {batch} {sorted(logs)}")

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(f"epoch_end {epoch} {sorted(logs)}")

    def on_train_end(self, logs=None):
        self.events.append("train_end")


def test_hook_order_and_logs():
    x, y = blobs(32)
    rec = Recorder()
    mlp().fit(x, y, batch_size=16, epochs=2, validation_data=(x, y), callbacks=[rec], verbose=0)
    assert rec.events == [
        "train_begin", "epoch_begin 0", "batch 0 ['accuracy', 'loss']", "batch 1 ['accuracy', 'loss']",
        "epoch_end 0 ['accuracy', 'loss', 'val_accuracy', 'val_loss']", "epoch_begin 1",
        "batch 0 ['accuracy', 'loss']", "batch 1 ['accuracy', 'loss']",
        "epoch_end 1 ['accuracy', 'loss', 'val_accuracy', 'val_loss']", "train_end"]


def test_early_stopping_stops_after_patience_and_restores_best():
    x, y = blobs()
    model = mlp()
    model.optimizer.lr = 1e-9  # nothing improves by min_delta
    stopper = EarlyStopping(monitor="loss", min_delta=0.1, patience=2)
    history = model.fit(x, y, epochs=20, callbacks=[stopper], verbose=0)
    assert len(history.epoch) == 3 and stopper.stopped_epoch == 2
    assert model.stop_training and "EarlyStopping" in model.stop_reason

    model = mlp()
    model.optimizer.lr = 0.5
    best = EarlyStopping(monitor="val_loss", patience=0, restore_best_weights=True)
    spy = []

    class Snapshot(Callback):
        def on_epoch_end(self, epoch, logs=None):
            spy.append((logs["val_loss"], self.model.get_weights()))

    model.fit(x, y, epochs=30, validation_data=blobs(48, seed=1), callbacks=[Snapshot(), best], verbose=0)
    losses = [v for v, _ in spy]
    best_epoch = int(np.argmin(losses))
    for a, b in zip(model.get_weights(), spy[best_epoch][1]):
        np.testing.assert_array_equal(a, b)


def test_early_stopping_on_a_missing_key_explains():
    x, y = blobs(16)
    with pytest.raises(KeyError, match="val_loss.*validation_split"):
        mlp().fit(x, y, epochs=1, callbacks=[EarlyStopping()], verbose=0)


def test_model_checkpoint_best_only(tmp_path):
    x, y = blobs(48)
    model = mlp()
    losses = iter([3.0, 2.0, 2.5, 1.0])

    class FakeLoss(Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["loss"] = next(losses)

    saver = ModelCheckpoint(tmp_path / "best-{epoch}-{loss:.1f}.npz", monitor="loss", save_best_only=True,
                            save_weights_only=True)
    model.fit(x, y, epochs=4, callbacks=[FakeLoss(), saver], verbose=0)
    assert [p.split("/")[-1] for p in saver.saved] == ["best-1-3.0.npz", "best-2-2.0.npz", "best-4-1.0.npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.split("/")[-1] for p in saver.saved)


def test_learning_rate_scheduler_sets_and_logs_the_rate():
    x, y = blobs(32)
    model = mlp()
    seen = []

    class Spy(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(self.model.optimizer.learning_rate)

    history = model.fit(x, y, epochs=4, verbose=0,
                        callbacks=[LearningRateScheduler(schedules.StepDecay(0.2, step_size=2, gamma=0.1)), Spy()])
    assert seen == pytest.approx([0.2, 0.2, 0.02, 0.02])
    assert history.history["learning_rate"] == pytest.approx([0.2, 0.2, 0.02, 0.02])
    model.fit(x, y, epochs=2, verbose=0, callbacks=[LearningRateScheduler(lambda epoch, lr: lr * 0.5)])
    assert model.optimizer.learning_rate == pytest.approx(0.02 * 0.25)
    with pytest.raises(ValueError, match="learning rate at epoch 0 .* is -1.0"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[LearningRateScheduler(lambda epoch: -1.0)])


def test_csv_logger_rows_match_history(tmp_path):
    x, y = blobs(32)
    path = tmp_path / "log.csv"
    history = mlp().fit(x, y, epochs=3, validation_split=0.25, callbacks=[CSVLogger(path)], verbose=0)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose([float(r[key]) for r in rows], history.history[key], rtol=1e-6)
    mlp().fit(x, y, epochs=1, callbacks=[CSVLogger(path, append=True)], verbose=0)
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    assert len(lines) == 5 and lines[0].startswith("epoch,")


def test_csv_logger_does_not_hide_an_earlier_callback_failure(tmp_path):
    class Broken(Callback):
        def on_train_begin(self, logs=None):
            raise RuntimeError("broken callback")

    x, y = blobs(16)
    with pytest.raises(RuntimeError, match="broken callback"):
        mlp().fit(x, y, epochs=1, callbacks=[Broken(), CSVLogger(tmp_path / "log.csv")], verbose=0)


# ---------------------------------------------------------------------------------------------- metrics


@given(scores=hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(2, 6)),
                         elements=st.integers(-50, 50).map(lambda v: v / 8)),  # ties, no sub-1e-30 gaps
       data=st.data())
def test_accuracy_and_top_k_against_a_plain_reference(scores, data):
    n, c = scores.shape
    labels = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n)))
    k = data.draw(st.integers(1, c))
    acc, topk = metrics.get("accuracy"), metrics.TopK(k)
    acc.update(scores, labels, XP)
    topk.update(scores, labels, XP)
    hits_top1 = hits_topk = 0
    for row, label in zip(scores, labels):
        hits_top1 += int(np.argmax(row) == label)
        strictly_better = sum(1 for v in row if v > row[label])
        hits_topk += int(strictly_better < k)
    assert acc.result() == pytest.approx(hits_top1 / n)
    assert topk.result() == pytest.approx(hits_topk / n)


def test_metrics_accumulate_over_batches_and_accept_one_hot():
    acc = metrics.Accuracy()
    acc.update(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 0]), XP)
    acc.update(np.array([[0.0, 1.0]]), np.eye(2)[[1]], XP)
    assert acc.result() == pytest.approx(2 / 3)
    acc.reset()
    assert np.isnan(acc.result())
    assert metrics.get("top3").k == 3 and metrics.get("top3").name == "top3_accuracy"
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.get("not_a_metric")  # "precision" is Keras' Precision now
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        metrics.TopK(0)


def test_csv_logger_listed_first_still_records_the_scheduled_lr(tmp_path):
    x, y = blobs(32)
    path = tmp_path / "log.csv"
    schedule = LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1))
    mlp().fit(x, y, epochs=2, callbacks=[CSVLogger(path), schedule], verbose=0)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([0.1, 0.05])


def test_a_callback_list_calls_every_hook_that_acts_and_skips_no_ops():
    """Each hook fans out to the callbacks that override it (directly, through Keras' ``on_batch_*`` delegates, or
    set on the instance), in order; a hook none overrides is one no-op call per batch."""
    from magmadnn.callbacks import CallbackList

    seen = []

    class Direct(Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(("direct", batch))

    class Delegated(Callback):
        def on_batch_end(self, batch, logs=None):
            seen.append(("delegated", batch))

    plain, on_instance = Callback(), Callback()
    on_instance.on_train_batch_end = lambda batch, logs=None: seen.append(("instance", batch))
    cbs = CallbackList([Direct(), plain, Delegated(), on_instance], model=None)
    cbs.on_train_batch_end(3, {})
    cbs.on_train_batch_end(4, {})
    assert seen == [("direct", 3), ("delegated", 3), ("instance", 3), ("direct", 4), ("delegated", 4),
                    ("instance", 4)]
    assert CallbackList([plain], model=None).on_train_batch_begin(0, {}) is None
    with pytest.raises(AttributeError):
        cbs.not_a_hook  # noqa: B018
