"""The Keras-named losses, metrics and sample weights on the device: the simulated device agrees with the host, and
a replayed graph equals eager steps bit for bit (gpu twins on a GPU; no Keras needed here)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from magmadnn.models import replay
from tests.magmadnn._keras_cases import RNG, TRAIN, X_VAL, X, model_for
from tests.magmadnn.backends import model_device


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


@pytest.mark.parametrize("name", list(TRAIN))
def test_device_agrees_with_host_and_replays_bit_for_bit(device, name):
    _, y, y_val, *_ = TRAIN[name]
    weights = RNG.random(48).astype(np.float32)
    kw = dict(batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(X_VAL, y_val), sample_weight=weights)
    host = model_for(name).fit(X, y, **kw).history
    runs = []
    for graph in (False, True):
        model = model_for(name, device, graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a step that cannot be captured warns: none may here
            runs.append((model.fit(X, y, **kw).history, [np.asarray(w) for w in model.get_weights()]))
        if graph:
            train = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step) and s.kind == "train"]
            assert sum(s.graph.launches for s in train) == 12 - replay.WARMUP
    assert runs[0][0] == runs[1][0]
    for eager, replayed in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(eager, replayed)
    assert set(runs[0][0]) == set(host)
    for key in host:
        np.testing.assert_allclose(runs[0][0][key], host[key], rtol=1e-4, atol=1e-6, err_msg=key)


def test_callable_loss_and_metric_on_the_device_and_replayed(device):
    import magmadnn as mdnn
    from magmadnn import layers as L

    def loss_fn(y_true, y_pred):  # scalars through F.scale: they stay kernel arguments, so the step is capturable
        d = y_pred - y_true
        return mdnn.F.mean(mdnn.F.scale(d * d, 0.5) + mdnn.F.abs(d), -1)

    def gap(y_true, y_pred):
        return mdnn.F.abs(y_pred - y_true)

    y = RNG.standard_normal((48, 2)).astype(np.float32)
    results = []
    for dev, graph in (("host", False), (device, False), (device, True)):
        model = mdnn.Sequential([L.Input((5,)), L.Dense(2)], seed=0)
        model.compile(mdnn.optimizers.SGD(0.05), loss=loss_fn, metrics=[gap], device=dev, graph=graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            history = model.fit(X, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
        results.append((history, [np.asarray(w) for w in model.get_weights()]))
    assert results[1][0] == results[2][0]
    for eager, replayed in zip(results[1][1], results[2][1]):
        np.testing.assert_array_equal(eager, replayed)
    for key in results[0][0]:
        np.testing.assert_allclose(results[1][0][key], results[0][0][key], rtol=1e-4, err_msg=key)


@pytest.mark.parametrize("targets", ["labels", "one-hot"])
def test_weighted_cross_entropy_on_the_device_agrees_with_host_and_replays_bit_for_bit(device, targets):
    """magmadnn's own "cross_entropy" with class weights: the packed (targets, weight) rows staged like a Keras
    loss's, on the simulated device eager and replayed."""
    import magmadnn as mdnn
    from magmadnn import layers as L
    from magmadnn import losses

    y = RNG.integers(0, 3, 48) if targets == "labels" else np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 48)]
    kw = dict(batch_size=8, epochs=2, shuffle=False, verbose=0, class_weight={0: 0.5, 1: 2.0})

    def model(device="host", graph=False):
        m = mdnn.Sequential([L.Input((5,)), L.Dense(3)], seed=0)
        return m.compile(mdnn.optimizers.SGD(0.1), losses.SoftmaxCrossEntropy(label_smoothing=0.1), device=device,
                         graph=graph)

    host = model().fit(X, y, **kw).history
    runs = []
    for graph in (False, True):
        m = model(device, graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            runs.append((m.fit(X, y, **kw).history, [np.asarray(w) for w in m.get_weights()]))
    assert runs[0][0] == runs[1][0]
    for eager, replayed in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(eager, replayed)
    np.testing.assert_allclose(runs[0][0]["loss"], host["loss"], rtol=1e-5)
