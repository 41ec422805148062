"""Graph replay (``compile(graph=True)``): a replayed step equals an eager step bit for bit, on the simulated device
(which models stream capture as CUDA documents it) and, as gpu twins, on a GPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn import metrics, schedules, zoo
from magmadnn.models import replay
from magmadnn.models.step import Tally
from pymagma import memory, simulator
from tests.magmadnn.backends import model_device


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _models():
    return {
        "lenet5": (lambda: zoo.lenet5(), (1, 28, 28), 2, mdnn.optimizers.Adam),
        "mlp_dropout": (lambda: zoo.mlp((1, 8, 8), hidden=(16, 16), dropout=0.25), (1, 8, 8), 8,
                        lambda lr: mdnn.optimizers.AdamW(lr, weight_decay=0.01)),
        "bn_cnn": (lambda: zoo.small_cnn((1, 8, 8), filters=(4, 8), dense=16, batch_norm=True), (1, 8, 8), 6,
                   lambda lr: mdnn.optimizers.SGD(lr, momentum=0.9, nesterov=True)),
        "resnet": (lambda: zoo.resnet_small((3, 8, 8), widths=(4, 8)), (3, 8, 8), 2,  # residual adds, strided
                   lambda lr: mdnn.optimizers.SGD(lr, momentum=0.9)),  # shortcuts, padded convolutions, pooling
    }


def _compiled(name, graph, device):
    build, _, _, optimizer = _models()[name]
    model = build()
    schedule = schedules.CosineDecay(0.0, decay_steps=25, warmup_target=0.02, warmup_steps=3)
    model.compile(optimizer(schedule), "cross_entropy", ["accuracy", "top2"], seed=7, device=device, graph=graph)
    return model


def _arrays(model) -> list[np.ndarray]:
    out = [p.data.get() for p in model.parameters()]
    out += [a.get() for layer in model.layers for a in layer._state.values()]
    out += [a.get() for slots in model.optimizer.slot_arrays.values() for a in slots.values()]
    return out


@pytest.mark.parametrize("name", list(_models()))
def test_thirty_replayed_steps_equal_eager_steps_bit_for_bit(device, name):
    """30 steps (two epochs of 14 full batches and a partial last one: the partial batch runs eagerly in the first
    epoch and replays its own graph in the second), a cosine schedule with warm-up, validation and every metric."""
    _, shape, batch, _ = _models()[name]
    rng = np.random.default_rng(1)
    n = 14 * batch + batch // 2
    x = rng.standard_normal((n, *shape)).astype(np.float32)
    y = rng.integers(0, 10, n)
    val = (x[:batch + 1], y[:batch + 1])
    histories, states = [], []
    for graph in (False, True):
        model = _compiled(name, graph, device)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a step that cannot be captured warns: none may here
            history = model.fit(x, y, batch_size=batch, epochs=2, validation_data=val, verbose=0)
        histories.append(history.history)
        states.append(_arrays(model) + [model.optimizer.iterations] +
                      [layer.rng.offset for layer in model.layers if getattr(layer, "rng", None) is not None])
        if graph:
            steps = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step)]
            train = [s for s in steps if s.kind == "train"]
            assert len(train) == 2 and all(s.graph.launches for s in train)  # full and partial batch shapes
            assert sum(s.graph.launches for s in train) == 30 - 2 * replay.WARMUP
            assert any(s.kind == "evaluate" for s in steps)  # validation: one full batch and one partial
    assert histories[0] == histories[1]
    for eager, replayed in zip(*states):
        np.testing.assert_array_equal(eager, replayed)


def test_evaluate_and_predict_replay_equal_eager(device):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((23, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 23)
    eager, replayed = _compiled("bn_cnn", False, device), _compiled("bn_cnn", True, device)
    for model in (eager, replayed):
        model.fit(x, y, batch_size=6, epochs=1, verbose=0, shuffle=False)
    for _ in range(2):  # the first call warms up and captures, the second replays only
        assert eager.evaluate(x, y, batch_size=5) == replayed.evaluate(x, y, batch_size=5)
        np.testing.assert_array_equal(eager.predict(x, batch_size=5), replayed.predict(x, batch_size=5))
        wide = x.astype(np.float64) / 3  # converted to float32 on the device when replayed, on the host eagerly
        np.testing.assert_array_equal(eager.predict(wide, batch_size=5), replayed.predict(wide, batch_size=5))
    launches = {"evaluate": 0, "predict": 0}
    for step in replayed._graphs.steps.values():
        if isinstance(step, replay._Step) and step.kind in launches:
            launches[step.kind] += step.graph.launches
    assert launches == {"evaluate": 8, "predict": 16}  # 4 batches of 5 (1 eager) and 3 (eager, then captured) x 2


def test_arrays_rebound_outside_the_graph_are_what_the_next_replay_reads():
    """set_weights rebinds the parameters: the next replay copies them into the graph's arrays first; a changed
    hyperparameter other than the learning rate (a constant of the graph) makes the step captured anew."""
    with simulator.simulated("full"):
        rng = np.random.default_rng(3)
        x, y = rng.standard_normal((16, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 16)
        models = [_compiled("mlp_dropout", graph, "gpu") for graph in (False, True)]
        for model in models:
            model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
            model.set_weights([w * 0.5 for w in model.get_weights()])
            model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
            model.optimizer.weight_decay = 0.1  # a constant of the graph: captured anew
            model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
        for a, b in zip(*map(_arrays, models)):
            np.testing.assert_array_equal(a, b)


def test_what_cannot_be_captured_says_so_once_and_trains_eagerly():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((12, 4)).astype(np.float32), rng.integers(0, 3, 12)
    host = mdnn.Sequential([L.Input((4,)), L.Dense(3)]).compile("sgd", seed=1, device="host", graph=True)
    with pytest.warns(RuntimeWarning, match="graph=True: the host backend has no CUDA graphs; running eagerly") as w:
        host.fit(x, y, batch_size=4, epochs=2, verbose=0)
        host.evaluate(x, y)
    assert len(w) == 1
    class Peeking(metrics.Accuracy):  # host control flow: reads its labels back in the middle of the step
        name = "peeking"

        def hits_of(self, outputs, truth, xp):
            return xp.asarray(float(np.asarray(xp.to_numpy(truth)).sum()), outputs.dtype)

    with simulator.simulated("full"):
        model = mdnn.Sequential([L.Input((4,)), L.Dense(3)])
        model.compile("adam", metrics=[Peeking()], seed=1, device="gpu", graph=True)
        with pytest.warns(RuntimeWarning, match="the train step could not be captured .*GraphCaptureError"):
            history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
        assert np.isfinite(history.history["loss"]).all() and model.optimizer.iterations == 6


def test_replays_allocate_nothing_on_the_null_device():
    """1,000 replayed training steps: no device allocation after the capture (the graph's pool stays flat)."""
    with simulator.simulated("null"):
        model = _compiled("mlp_dropout", True, "gpu")
        x, y = np.zeros((4, 1, 8, 8), np.float32), np.zeros(4, np.int64)
        tally = Tally(model.xp, model._tally_names(False), model.dtype)
        for _ in range(replay.WARMUP + 1):
            model._train_step([x], y, False, tally)
        (step,) = model._graphs.steps.values()
        before, pool = memory.pool_stats(), dict(step.graph.pool.stats)
        for _ in range(1000):
            model._train_step([x], y, False, tally)
        assert step.graph.launches == 1001 and model.optimizer.iterations == 1001 + replay.WARMUP
        assert memory.pool_stats()["requests"] == before["requests"] and step.graph.pool.stats == pool
        assert tally.counts["loss"] == 4 * (1001 + replay.WARMUP)
        for _ in range(3):  # without a tally (as train_on_batch's callers may step): a graph of its own
            model._train_step([x], y, False)
        assert sum(isinstance(s, replay._Step) for s in model._graphs.steps.values()) == 2


def test_replayed_training_reads_the_device_once_per_epoch(monkeypatch):
    """No host round trip in a replayed step: the one device-to-host copy is the tally's, at each epoch end."""
    from pymagma import runtime

    with simulator.simulated("null"):
        model = _compiled("mlp_dropout", True, "gpu")
        model.progress_interval = float("inf")
        reads = []
        original = runtime.memcpy_dtoh
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda *a, **k: reads.append(1) or original(*a, **k))
        x, y = np.zeros((40, 1, 8, 8), np.float32), np.zeros(40, np.int64)
        model.fit(x, y, batch_size=4, epochs=3, verbose=0)
        assert len(reads) == 3
        assert sum(s.graph.launches for s in model._graphs.steps.values()) == 30 - replay.WARMUP


def test_a_non_finite_loss_rolls_back_and_stops_as_in_eager_mode():
    """The rollback to the last progress snapshot rebinds the weights and slots; the eager replay of the pending
    batches then finds the batch whose loss is not finite: the same batch, weights and logs as eager training."""
    from magmadnn.callbacks import TerminateOnNaN

    with simulator.simulated("full"):
        rng = np.random.default_rng(5)
        x, y = rng.standard_normal((40, 1, 8, 8)).astype(np.float32) * 10, rng.integers(0, 10, 40)
        results = []
        for graph in (False, True):
            model = zoo.mlp((1, 8, 8), hidden=(16,))
            model.compile(mdnn.optimizers.SGD(100.0), "cross_entropy", seed=3, device="gpu", graph=graph)
            model.progress_interval = float("inf")  # one read, at the epoch's end: all ten batches are pending
            with np.errstate(over="ignore", invalid="ignore"):  # the simulator's NumPy models overflow, as intended
                history = model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[TerminateOnNaN()])
            if graph:
                (step,) = model._graphs.steps.values()
                assert step.graph.launches == 9  # batches 2-10 replayed before the read found the loss not finite
            results.append((history.history, model.stop_reason, _arrays(model), model.optimizer.iterations))
            assert model.stop_training
        assert results[0][1] == results[1][1] and results[0][3] == results[1][3] == 8  # batch 9's loss: NaN
        assert np.isnan(results[0][0]["loss"]).all() and np.isnan(results[1][0]["loss"]).all()
        for a, b in zip(results[0][2], results[1][2]):
            np.testing.assert_array_equal(a, b)


def test_a_model_holds_at_most_max_graphs(monkeypatch):
    monkeypatch.setattr(replay, "MAX_GRAPHS", 2)
    with simulator.simulated("null"):
        model = _compiled("mlp_dropout", True, "gpu")
        x = np.zeros((8, 1, 8, 8), np.float32)
        with pytest.warns(RuntimeWarning, match="2 graphs .batch shapes. are held already, new batch shapes; running"):
            for batch in (8, 7, 6, 5):  # two calls each: warm-up, then capture
                for _ in range(2):
                    model.predict(x, batch_size=batch)
        assert sum(isinstance(s, replay._Step) for s in model._graphs.steps.values()) == 2


def test_a_random_draw_the_graph_would_fix_is_refused_during_the_capture():
    """A layer drawing from a stream that is not its own dropout stream (here: a dropout layer sharing another
    layer's stream) would replay the same numbers every step: the capture refuses it and the model runs eagerly."""
    with simulator.simulated("null"):
        model = _compiled("mlp_dropout", True, "gpu")
        x, y = np.zeros((8, 1, 8, 8), np.float32), np.zeros(8, np.int64)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # built: each dropout layer has its stream
        dropouts = [layer for layer in model.layers if isinstance(layer, L.Dropout)]
        shared = mdnn.backend.random.Stream(5)

        class Borrowing(L.Dropout):  # draws from a stream it does not hold as ``rng``
            def call(self, x, training=False):
                return mdnn.functional.dropout(x, self.rate, training, shared)

        dropouts[0].__class__ = Borrowing
        model.compile(model.optimizer, model.loss, graph=True)
        with pytest.warns(RuntimeWarning, match="could not be captured .*random draw outside"):
            model.fit(x, y, batch_size=4, epochs=2, verbose=0)
        assert shared.offset == 4  # every step drew eagerly


def test_token_model_with_global_clipnorm_replays_bit_for_bit(device):
    """Integer inputs are staged as int64 and the clipping factor is computed inside the graph: replay == eager."""
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 7, (40, 5)), rng.integers(0, 10, 40)
    results = []
    for graph in (False, True):
        ids = L.Input((5,), dtype="int64")
        out = L.Dense(10)(L.Flatten()(L.LayerNorm()(L.Embedding(7, 4)(ids))))
        model = mdnn.models.Model(ids, out)
        model.compile(mdnn.optimizers.Adam(0.05, global_clipnorm=0.5), "cross_entropy", seed=5, device=device,
                      graph=graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
        if graph:
            assert sum(s.graph.launches for s in model._graphs.steps.values()
                       if isinstance(s, replay._Step) and s.kind == "train") == 10 - replay.WARMUP
        results.append((history.history, [p.data.get() for p in model.parameters()], model.predict(x)))
    assert results[0][0] == results[1][0]
    for eager, replayed in zip(results[0][1] + [results[0][2]], results[1][1] + [results[1][2]]):
        np.testing.assert_array_equal(eager, replayed)
