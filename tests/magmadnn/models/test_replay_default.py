"""Replay by default: ``compile()`` replays every kind of step on the device (``graph="auto"``) bit for bit as
eager steps run, says nothing on the host, is turned off by ``MAGMADNN_GRAPH=0``, and falls back to eager steps
(one warning per kind of step) when a capture, an instantiation or a launch fails (faults injected into the
simulated CUDA runtime; gpu twins run the same on a GPU)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn import schedules
from magmadnn.models import replay
from magmadnn.models.fitting import NonFiniteLossError
from pymagma import _native
from tests.magmadnn.backends import model_device


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _model(device, graph="auto", dtype=None):
    model = mdnn.Sequential([L.Input((6,)), L.Dense(8), L.BatchNorm(), L.Activation("relu"), L.Dropout(0.2),
                             L.Dense(3)], dtype=dtype)
    kwargs = {} if graph == "auto" else {"graph": graph}
    schedule = schedules.CosineDecay(0.01, decay_steps=20, warmup_steps=2)
    return model.compile(mdnn.optimizers.Adam(schedule), "cross_entropy", ["accuracy"], seed=3, device=device,
                         **kwargs)


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n)


def _state(model) -> list[np.ndarray]:
    out = [np.asarray(p.data.get()) for p in model.parameters()]
    out += [np.asarray(a.get()) for layer in model.layers for a in layer._state.values()]
    out += [np.asarray(a.get()) for slots in model.optimizer.slot_arrays.values() for a in slots.values()]
    return out


def _session(model, x, y) -> list:
    """What a user runs: fit with validation, then each *_on_batch three times, evaluate and predict."""
    results = [model.fit(x, y, batch_size=4, epochs=2, validation_split=0.25, verbose=0).history]
    for i in range(3):
        results.append(model.train_on_batch(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4], return_dict=True))
        results.append(model.test_on_batch(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4], return_dict=True))
        results.append(model.predict_on_batch(x[4 * i:4 * i + 4]))
    results.append(model.evaluate(x, y, batch_size=4, return_dict=True))
    results.append(model.predict(x, batch_size=4))
    return results


def _assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _assert_same(u, v)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _launches(model) -> dict:
    out: dict = {}
    for step in model._graphs.steps.values():
        if isinstance(step, replay._Step):
            out[step.kind] = out.get(step.kind, 0) + step.graph.launches
    return out


def test_the_default_replays_every_step_bit_for_bit_as_eager_steps(device):
    x, y = _data()
    default, eager = _model(device), _model(device, graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: every step is captured
        replayed = _session(default, x, y)
    _assert_same(replayed, _session(eager, x, y))
    _assert_same(_state(default), _state(eager))
    assert eager._graphs is None
    launches = _launches(default)
    assert set(launches) == {"train", "train_checked", "evaluate", "predict"}, launches
    assert all(n > 0 for n in launches.values())


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_replay_under_a_mixed_policy_with_a_layer_frozen_midway_is_eager_bit_for_bit(device, policy):
    """Every kind of step under a mixed precision policy (half compute, float32 weights) and a cosine schedule,
    then again with the first Dense frozen (its graphs no longer fit: destroyed, warmed up and captured anew)."""
    x, y = _data()
    runs = []
    for graph in ("auto", False):
        model = _model(device, graph, dtype=policy)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # nothing runs eagerly for want of a capture
            first = _session(model, x, y)
            before = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step)] if graph else []
            frozen = model.layers[0].get_weights()
            model.layers[0].trainable = False
            second = _session(model, x, y)
        _assert_same(model.layers[0].get_weights(), frozen)
        recaptured = {s.kind for s in (model._graphs.steps.values() if graph else ())
                      if isinstance(s, replay._Step) and all(s is not b for b in before) and s.graph.launches}
        runs.append((first, second, _state(model), recaptured))
    _assert_same(runs[0][:3], runs[1][:3])
    assert runs[0][3] >= {"train", "train_checked"}, runs[0][3]  # the frozen model's training steps replayed


def test_the_host_runs_eagerly_and_says_nothing():
    x, y = _data()
    model = _model("host")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _session(model, x, y)
    assert not any(isinstance(s, replay._Step) for s in model._graphs.steps.values())


def test_magmadnn_graph_0_turns_replay_off(device, monkeypatch):
    monkeypatch.setenv("MAGMADNN_GRAPH", "0")
    x, y = _data()
    default, eager = _model(device), _model(device, graph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same(_session(default, x, y), _session(eager, x, y))
    assert not _launches(default)
    explicit = _model(device, graph=True)  # asked for: said once
    with pytest.warns(RuntimeWarning, match="graph=True: MAGMADNN_GRAPH=0; running eagerly") as said:
        explicit.fit(x, y, batch_size=4, epochs=1, verbose=0)
        explicit.evaluate(x, y, batch_size=4)
    assert len(said) == 1


def test_compile_graph_argument():
    model = mdnn.Sequential([L.Input((2,)), L.Dense(1)])
    with pytest.raises(TypeError, match="graph must be 'auto', True or False, got 'yes'"):
        model.compile("sgd", "mse", graph="yes")
    assert model.compile("sgd", "mse")._graphs.mode == "auto"
    assert model.compile("sgd", "mse", graph=True)._graphs.mode is True
    assert model.compile("sgd", "mse", graph=False)._graphs is None
    assert model.compile("sgd", "mse", run_eagerly=True)._graphs is None  # Keras' switch to eager steps


class _Fault:
    """A CUDA runtime entry point of the simulator that fails from its ``after``-th call on."""

    def __init__(self, cudart, name: str, after: int):
        self.real, self.calls, self.after, self.name = getattr(cudart, name), 0, after, name

    def __call__(self, *args):
        self.calls += 1
        if self.calls > self.after:
            from cuda.bindings import runtime  # noqa: PLC0415

            error = runtime.cudaError_t.cudaErrorNotSupported
            return (error, None) if self.name == "cudaGraphInstantiate" else (error,)
        return self.real(*args)


@pytest.mark.parametrize("name, after", [("cudaStreamBeginCapture", 0), ("cudaGraphInstantiate", 0),
                                         ("cudaGraphLaunch", 0), ("cudaGraphLaunch", 3)])
def test_a_capture_instantiate_or_launch_error_falls_back_to_eager_steps(name, after, monkeypatch):
    """The fault from the first call on, or from a later launch (after three replays): each kind of step says so
    once and runs eagerly, and the results equal eager training's bit for bit."""
    from pymagma import simulator

    x, y = _data()
    with simulator.simulated("full"):
        eager = _model("gpu", graph=False)
        expected = _session(eager, x, y)
        model = _model("gpu")
        fault = _Fault(_native.current.cudart, name, after)
        monkeypatch.setattr(_native.current.cudart, name, fault)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            got = _session(model, x, y)
        _assert_same(got, expected)
        _assert_same(_state(model), _state(eager))
    messages = [str(w.message) for w in said]
    assert fault.calls > after
    assert all("running eagerly" in m and "cudaErrorNotSupported" in m for m in messages), messages
    kinds = [m.split("the ")[1].split(" step")[0] for m in messages]
    assert sorted(kinds) == sorted(set(kinds)), messages  # one warning per kind of step
    assert "train" in kinds
    assert set(model._graphs.failed) == set(kinds)


@pytest.mark.filterwarnings("ignore:overflow")
def test_train_on_batch_replayed_puts_a_rejected_step_back(device):
    """A non-finite loss in a replayed train_on_batch: nothing applied (weights, statistics, slots, step count),
    as eagerly; the next batch replays again."""
    x, y = _data()
    bad = np.full((4, 6), 3e38, np.float32)  # finite data, a loss that is not (the first Dense overflows)
    models = _model(device), _model(device, graph=False)
    for model in models:
        for i in range(3):
            model.train_on_batch(x[4 * i:4 * i + 4], y[4 * i:4 * i + 4])
        before, iterations = _state(model), model.optimizer.iterations
        with pytest.raises(NonFiniteLossError, match="no update was applied"):
            model.train_on_batch(bad, y[:4])
        _assert_same(_state(model), before)
        assert model.optimizer.iterations == iterations
        model.train_on_batch(x[12:16], y[12:16])
    _assert_same(_state(models[0]), _state(models[1]))
    assert _launches(models[0])["train_checked"] == 4 - replay.WARMUP + 1
