"""fit's replay loop (``models/replayed_epoch.py``): once a batch shape's training step is captured, every batch of
that shape is one copy and one graph launch, and the results equal the general loop's and eager training's bit for
bit (shuffles, partial batches, dropout, BatchNorm, schedules, metrics, sample weights, validation, callbacks that
change the learning rate, progress reads, a non-finite loss rolled back); gpu twins run the same on a GPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import callbacks, schedules
from magmadnn import layers as L
from magmadnn.models import replay, replayed_epoch
from magmadnn.models.fitting import NonFiniteParameterError
from pymagma import _native
from tests.magmadnn.backends import model_device


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


class BatchHook(callbacks.Callback):
    """Acts on every batch end: fit then runs its general loop (Keras' batch hooks see each step)."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1


def _model(device, graph="auto"):
    model = mdnn.Sequential([L.Input((6,)), L.Dense(8), L.BatchNorm(), L.Activation("relu"), L.Dropout(0.2),
                             L.Dense(3)])
    schedule = schedules.CosineDecay(0.0, decay_steps=40, warmup_target=0.01, warmup_steps=3)
    return model.compile(mdnn.optimizers.Adam(schedule), "cross_entropy", ["accuracy"], seed=5, device=device,
                         graph=graph)


def _data(n=30, seed=2):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n)


def _state(model) -> list[np.ndarray]:
    out = [np.asarray(p.data.get()) for p in model.parameters()]
    out += [np.asarray(a.get()) for layer in model.layers for a in layer._state.values()]
    out += [np.asarray(a.get()) for slots in model.optimizer.slot_arrays.values() for a in slots.values()]
    return out + [np.asarray(model.optimizer.iterations)]


def _assert_same(a, b) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def _tight_batches(monkeypatch) -> list:
    """Counts the batches fit's replay loop fed (one entry per tight run: its first and next batch)."""
    runs = []
    tight = replayed_epoch._tight

    def counted(epoch, step, selectors, k):
        out = tight(epoch, step, selectors, k)
        runs.append((k, out[0]))
        return out
    monkeypatch.setattr(replayed_epoch, "_tight", counted)
    return runs


@pytest.mark.parametrize("shuffle", [True, False])
def test_the_replay_loop_equals_the_general_loop_and_eager_steps_bit_for_bit(device, shuffle, monkeypatch):
    """Three epochs of 7 batches of 4 and a partial one of 2, validation, sample weights, a LearningRateScheduler
    (it sets the rate at each epoch start) and a progress read mid-epoch: eager, the general loop (a callback acts on
    each batch) and the replay loop agree bit for bit, and the replay loop fed most batches."""
    x, y = _data()
    weights = np.linspace(0.5, 1.5, x.shape[0]).astype(np.float32)
    lr = callbacks.LearningRateScheduler(lambda epoch, rate: rate * 0.5)
    runs = _tight_batches(monkeypatch)
    results = []
    for graph, hook in ((False, None), ("auto", BatchHook()), ("auto", None)):
        model = _model(device, graph)
        model.progress_interval = 0.0 if hook is None and graph else model.progress_interval  # reads mid-epoch
        cbs = [lr] + ([hook] if hook else [])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every step is captured: nothing to say
            history = model.fit(x, y, batch_size=4, epochs=3, validation_split=0.1, sample_weight=weights,
                                shuffle=shuffle, callbacks=cbs, verbose=0)
        results.append((history.history, _state(model)))
        if hook is not None:
            assert hook.seen == 3 * 7 and not runs  # the general loop ran every batch
    assert results[0][0] == results[1][0] == results[2][0]
    _assert_same(results[0][1], results[1][1])
    _assert_same(results[0][1], results[2][1])
    fed = sum(stop - start for start, stop in runs)
    assert fed >= 3 * 6 - 2 * replay.WARMUP - 1, runs  # all but the warm-up, the capture and the partial batches


def test_the_replay_loop_rolls_a_non_finite_update_back_as_eager(device, monkeypatch):
    """An update that overflows the weights, found at the epoch's one read (no read in between: every batch since
    the snapshot is replayed from its index): TerminateOnNaN stops with the same weights as eager training, and
    without it the same error names the same batch."""
    runs = _tight_batches(monkeypatch)
    x, y = _data(40)
    x[29] *= 1e37  # finite data whose update overflows
    outcomes = []
    for graph in (False, "auto"):
        model = mdnn.Sequential([L.Input((6,)), L.Dense(3, name="out")])
        model.compile(mdnn.optimizers.SGD(0.5), "cross_entropy", seed=1, device=device, graph=graph)
        model.progress_interval = float("inf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            history = model.fit(x, y, batch_size=2, epochs=2, shuffle=True, callbacks=[callbacks.TerminateOnNaN()],
                                verbose=0)
            reason = model.stop_reason
            with pytest.raises((NonFiniteParameterError, FloatingPointError)) as raised:
                model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
        outcomes.append((np.isnan(history.history["loss"]).tolist(), reason, str(raised.value), _state(model)))
    assert outcomes[0][:3] == outcomes[1][:3]
    _assert_same(outcomes[0][3], outcomes[1][3])
    assert runs  # the replayed fit went through the replay loop before the rollback


class _Count:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def test_a_replayed_batch_is_one_copy_and_one_launch(monkeypatch):
    """The replay floor's native calls: per batch of fit's replay loop, the batch's copy into the graph's buffer
    and the graph launch, plus one event record and one wait every few batches (the page-locked ring); no kernel,
    MAGMA or cuDNN call, no read."""
    from pymagma import simulator

    x, y = _data(200)
    with simulator.simulated("null"):
        counted = {}  # counters in place before anything binds the runtime's functions
        for name in ("cudaMemcpyAsync", "cudaGraphLaunch", "cudaEventRecord", "cudaEventSynchronize", "cudaMemcpy",
                     "cudaStreamSynchronize"):
            counted[name] = _Count(getattr(_native.current.cudart, name))
            monkeypatch.setattr(_native.current.cudart, name, counted[name])
        launches = _Count(_native.current.launcher.launch)
        monkeypatch.setattr(_native.current.launcher, "launch", launches)
        model = mdnn.Sequential([L.Input((6,)), L.Dense(8, activation="relu"), L.Dropout(0.1), L.Dense(3)])
        model.compile(mdnn.optimizers.Adam(0.01), "cross_entropy", ["accuracy"], seed=0, device="gpu")
        model.fit(x[:8], y[:8], batch_size=1, verbose=0)  # captured
        short = {k: c.calls for k, c in counted.items()}, launches.calls
        model.fit(x[:8], y[:8], batch_size=1, verbose=0)
        mid = {k: c.calls for k, c in counted.items()}, launches.calls
        model.fit(x, y, batch_size=1, verbose=0)
        end = {k: c.calls for k, c in counted.items()}, launches.calls
    per_batch = {k: ((end[0][k] - mid[0][k]) - (mid[0][k] - short[0][k])) / (200 - 8) for k in counted}
    assert per_batch["cudaGraphLaunch"] == 1 and per_batch["cudaMemcpyAsync"] == 1, per_batch
    assert per_batch["cudaEventRecord"] <= 0.5 and per_batch["cudaEventSynchronize"] <= 0.5, per_batch
    assert per_batch["cudaMemcpy"] == 0 and per_batch["cudaStreamSynchronize"] == 0, per_batch  # no read
    assert (end[1] - mid[1]) == (mid[1] - short[1])  # kernels: the epoch's own (snapshot, read), none per batch


def test_a_callback_acting_on_batches_or_an_iterable_runs_the_general_loop(monkeypatch):
    runs = _tight_batches(monkeypatch)
    x, y = _data()
    from pymagma import simulator

    with simulator.simulated():
        model = _model("gpu")
        hook = BatchHook()
        model.fit(x, y, batch_size=4, epochs=2, callbacks=[hook], verbose=0)
        assert hook.seen == 16 and not runs
        model.fit(x, y, batch_size=4, epochs=2, verbose=0)
        assert runs


class StopAtEpochBegin(callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            self.model.stop_training = True


def test_stop_training_set_before_a_batch_stops_after_it_as_the_general_loop(monkeypatch):
    """A callback sets ``stop_training`` at the second epoch's start: one batch runs (as Keras' loop checks after
    each batch), then fit stops, in the replay loop as in the general loop and eagerly."""
    runs = _tight_batches(monkeypatch)
    x, y = _data()
    from pymagma import simulator

    results = []
    with simulator.simulated():
        for graph, extra in ((False, []), ("auto", [BatchHook()]), ("auto", [])):
            model = _model("gpu", graph)
            history = model.fit(x, y, batch_size=4, epochs=3, callbacks=[StopAtEpochBegin(), *extra], verbose=0)
            results.append((history.history, model.optimizer.iterations, _state(model)))
    assert results[0][:2] == results[1][:2] == results[2][:2]
    assert results[0][1] == 8 + 1
    _assert_same(results[0][2], results[2][2])
    assert runs and runs[-1] == (0, 1)  # the second epoch's one batch went through the replay loop
