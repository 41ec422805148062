"""Graph replay follows every change eager training sees, every built-in loss is captured, and the values an op
needs (embedding ids, attention key masks) are checked on the device wherever they come from.

Faults this file proves fixed (one line each; on the simulated device, gpu twins for the device ones):
replay-clipnorm-on: clipnorm turned on after the first epoch was ignored by the replayed step
replay-global-clipnorm-changed: a new global_clipnorm value was ignored by the replayed step
replay-adam-beta: an optimizer beta / momentum changed after capture was ignored
replay-weight-decay: a weight decay changed after capture was ignored
replay-dropout-rate: a Dropout rate changed after capture was ignored (also turned off, rate 0)
replay-batchnorm-momentum: a BatchNorm momentum changed after capture was ignored
replay-batchnorm-eps: a BatchNorm epsilon changed after capture was ignored (training and predict)
replay-leaky-slope: a LeakyReLU slope changed after capture was ignored (training and predict)
replay-attention-dropout: a MultiHeadAttention dropout changed after capture was ignored
replay-loss-smoothing: a loss's label_smoothing changed after capture was ignored
replay-any-attribute: any public attribute a layer's step reads (e.g. trainable, a custom scale) was ignored
replay-user-lr: a learning rate or schedule set by the user must keep replaying (read from device memory)
loss-label-smoothing-captured: SoftmaxCrossEntropy(label_smoothing=...) was never captured (host constant uploaded)
loss-bce-captured: BinaryCrossEntropy(from_logits=True) was never captured (host constants uploaded)
capture-warning-names-component: the warning named pymagma.asarray, not the layer, loss or metric running
device-id-behind-reshape-predict: an id out of range behind a Reshape gave a row of NaN at predict
device-id-behind-reshape-evaluate: the same id gave a NaN loss at evaluate
device-id-behind-reshape-fit: fit said "the loss became nan ... lower the learning rate", updates after it applied
device-id-in-replay: the same in a replayed (graph) step
device-id-train-on-batch: train_on_batch said the loss is nan instead of naming the id
device-mask-behind-layer: a key mask of 0.5 behind a layer was accepted (predict and fit, eager and replay)
device-check-no-extra-read: the device checks add no host read to fit (the record rides on the progress read)
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn import losses, metrics, schedules
from magmadnn.backend import faults
from magmadnn.backend.device import kernels
from magmadnn.models import replay
from pymagma import array, simulator
from tests.magmadnn.backends import model_device

EMBEDDING_MESSAGE = "embedding: index 9 is out of range for a table of 7 rows; expected indices in [0, 7)"
MASK_MESSAGE = ("call: MultiHeadAttention layer 'mha': a key mask holds 1 (attend) or 0 (padding) or booleans, got "
                "0.5; for PyTorch's key_padding_mask pass its negation, an additive mask (0/-inf) is not a mask")


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _steps(model, kind):
    return [s for s in model._graphs.steps.values() if isinstance(s, replay._Step) and s.kind == kind]


def _state(model) -> list[np.ndarray]:
    out = [p.data.get() for p in model.parameters()]
    out += [a.get() for layer in model.layers for a in layer._state.values()]
    out += [a.get() for slots in model.optimizer.slot_arrays.values() for a in slots.values()]
    return out


# ------------------------------------------------------------------------------- replay follows every change
def _dense_model():
    return mdnn.Sequential([L.Input((12,)), L.Dense(16), L.BatchNorm(name="bn"),
                            L.Activation("leaky_relu", alpha=0.1, name="leaky"), L.Dropout(0.25, name="drop"),
                            L.Dense(4)])


def _attention_model():
    x = L.Input((3, 4))
    y = L.MultiHeadAttention(2, 2, dropout=0.1, name="mha")(x)
    return mdnn.models.Model(x, L.Dense(4)(L.Flatten()(y)))


class Scaled(L.Layer):
    """A custom layer whose step reads a public attribute (as a step reads ``trainable``): a constant of a graph."""

    def __init__(self, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, x, training=False):
        return F.multiply(x, self.scale)


def _scaled_model():
    return mdnn.Sequential([L.Input((12,)), L.Dense(8), Scaled(2.0, name="scaled"), L.Dense(4)])


def _layer(model, name):
    return next(layer for layer in model.layers if layer.name == name)


def _set(target: str, attribute: str, value):
    def change(model):
        obj = model.optimizer if target == "optimizer" else model.loss if target == "loss" else _layer(model, target)
        setattr(obj, attribute, value)

    return change


CHANGES = {  # name: (model, optimizer, change after epoch 1, recaptured)
    "replay-clipnorm-on": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("optimizer", "clipnorm", 0.05),
                           True),
    "replay-global-clipnorm-changed": (_dense_model, lambda: mdnn.optimizers.SGD(0.1, global_clipnorm=1.0),
                                       _set("optimizer", "global_clipnorm", 0.01), True),
    "replay-adam-beta": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("optimizer", "beta1", 0.5), True),
    "replay-sgd-momentum": (_dense_model, lambda: mdnn.optimizers.SGD(0.05, momentum=0.9),
                            _set("optimizer", "momentum", 0.5), True),
    "replay-weight-decay": (_dense_model, lambda: mdnn.optimizers.AdamW(0.01), _set("optimizer", "weight_decay", 0.3),
                            True),
    "replay-dropout-rate": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("drop", "rate", 0.6), True),
    "replay-dropout-off": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("drop", "rate", 0.0), True),
    "replay-batchnorm-momentum": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("bn", "momentum", 0.5),
                                  True),
    "replay-batchnorm-eps": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("bn", "eps", 0.5), True),
    "replay-leaky-slope": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("leaky", "alpha", 0.5), True),
    "replay-attention-dropout": (_attention_model, lambda: mdnn.optimizers.Adam(0.01), _set("mha", "dropout", 0.5),
                                 True),
    "replay-loss-smoothing": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("loss", "label_smoothing", 0.3),
                              True),
    "replay-any-attribute": (_scaled_model, lambda: mdnn.optimizers.Adam(0.01), _set("scaled", "scale", 0.5), True),
    "replay-user-lr": (_dense_model, lambda: mdnn.optimizers.Adam(0.01), _set("optimizer", "lr", 0.003), False),
    "replay-user-schedule": (_dense_model, lambda: mdnn.optimizers.Adam(schedules.CosineDecay(0.02, 20)),
                             _set("optimizer", "lr", schedules.StepDecay(0.05, 2, 0.5)), False),
}


def _change_run(name, graph, device, apply=True):
    build, optimizer, change, _ = CHANGES[name]
    model = build()
    model.compile(optimizer(), losses.SoftmaxCrossEntropy(label_smoothing=0.1), ["accuracy"], seed=3, device=device,
                  graph=graph)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((24, *model.input_shapes[0])).astype(np.float32)
    y = rng.integers(0, 4, 24)
    history, captured = [], None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every step here can be captured
        history.append(model.fit(x, y, batch_size=6, epochs=1, verbose=0, shuffle=False).history)
        before = model.predict(x, batch_size=6)
        model.predict(x, batch_size=6)  # captured and replayed before the change
        if graph:
            captured = _steps(model, "train")[0]
            assert captured.graph.launches == 3
        if apply:
            change(model)
        history.append(model.fit(x, y, batch_size=6, epochs=2, verbose=0, shuffle=False).history)
        after = [model.predict(x, batch_size=6) for _ in range(2)]
        results = history, [before, *after], _state(model) + [model.optimizer.iterations]
    if graph and apply:
        (train,) = _steps(model, "train")
        assert (train is not captured) == CHANGES[name][3]  # captured anew only when the graph held the value
        assert train.graph.launches >= 6 - 2 * replay.WARMUP
        assert sum(s.graph.launches for s in _steps(model, "predict")) >= 4
    return results


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_change_after_capture_replays_as_eager_training_runs(device, name):
    """The change applied between two fits (after the steps were captured and replayed): the replayed run equals
    the eager run bit for bit (histories, predictions before and after, weights, slots, statistics)."""
    eager, replayed = _change_run(name, False, device), _change_run(name, True, device)
    assert eager[0] == replayed[0]
    for a, b in zip(eager[1] + eager[2], replayed[1] + replayed[2], strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_change_changes_the_result(device):
    """The changes above reach eager training (else the comparison above would prove nothing)."""
    for name in ("replay-clipnorm-on", "replay-dropout-rate", "replay-batchnorm-momentum", "replay-leaky-slope",
                 "replay-any-attribute", "replay-loss-smoothing"):
        changed, unchanged = _change_run(name, False, device), _change_run(name, False, device, apply=False)
        assert any(not np.array_equal(a, b) for a, b in zip(changed[1] + changed[2], unchanged[1] + unchanged[2])), name


def test_a_public_attribute_moves_the_generation_and_only_a_real_change_recaptures():
    """Setting the same value again moves the generation but keeps the graph (the keys are equal); the step
    count and the learning rate are not part of any key."""
    from magmadnn import _configurable

    with simulator.simulated("null"):
        model = _dense_model()
        model.compile("adam", seed=1, device="gpu", graph=True)
        x, y = np.zeros((6, 12), np.float32), np.zeros(6, np.int64)
        for _ in range(3):  # warm-up, capture, replay
            model._train_step([x], y, False)
        (step,) = _steps(model, "train")
        generation = _configurable.generation
        _layer(model, "drop").rate = 0.25  # the same value
        model.optimizer.lr = 0.5
        assert _configurable.generation == generation + 1  # the rate; the learning rate is volatile
        model._train_step([x], y, False)
        assert _steps(model, "train") == [step] and step.graph.launches == 3
        for _ in range(10):  # a replayed step moves nothing
            model._train_step([x], y, False)
        assert _configurable.generation == generation + 1


# ----------------------------------------------------------------------------------- every built-in loss captured
LOSSES = {
    "loss-label-smoothing-captured": (lambda: losses.SoftmaxCrossEntropy(label_smoothing=0.2),
                                      lambda rng, n: rng.integers(0, 4, n)),
    "loss-smoothing-soft-targets": (lambda: losses.SoftmaxCrossEntropy(label_smoothing=0.2),
                                    lambda rng, n: np.eye(4, dtype=np.float32)[rng.integers(0, 4, n)]),
    "loss-bce-captured": (lambda: losses.BinaryCrossEntropy(from_logits=True),
                          lambda rng, n: rng.integers(0, 2, (n, 4)).astype(np.float32)),
    "loss-ignore-index": (lambda: losses.SoftmaxCrossEntropy(ignore_index=1), lambda rng, n: rng.integers(0, 4, n)),
    "loss-mse": (lambda: losses.MSE(), lambda rng, n: rng.standard_normal((n, 4)).astype(np.float32)),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_built_in_loss_is_captured_and_replays_bit_for_bit(device, name):
    loss, targets = LOSSES[name]
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((30, 12)).astype(np.float32), targets(rng, 30)
    results = []
    for graph in (False, True):
        model = _dense_model()
        model.compile(mdnn.optimizers.Adam(0.01), loss(), seed=2, device=device, graph=graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not captured: a warning
            history = model.fit(x, y, batch_size=6, epochs=2, verbose=0, validation_data=(x[:12], y[:12]))
            evaluated = model.evaluate(x, y, batch_size=6)
        if graph:
            assert sum(s.graph.launches for s in _steps(model, "train")) == 10 - replay.WARMUP
            assert sum(s.graph.launches for s in _steps(model, "evaluate")) >= 4
        results.append((history.history, evaluated, _state(model)))
    assert results[0][:2] == results[1][:2]
    for a, b in zip(results[0][2], results[1][2], strict=True):
        np.testing.assert_array_equal(a, b)


def test_constants_are_made_once_outside_the_step():
    """A scalar operand and a loss's fixed matrices come from the device's constant cache: one array per value,
    made in the eager step before the capture, none during it."""
    from magmadnn.backend import device_graphs

    with simulator.simulated("null"):
        dev = mdnn.backend.get("gpu")
        a = F._base.constant(dev, 0.3, np.float32)
        assert F._base.constant(dev, 0.3, np.float32) is a and F._base.constant(dev, 0.3, np.float64) is not a
        assert F._base.constant(dev, [[0.0, 1.0]], np.float32) is F._base.constant(dev, [[0.0, 1.0]], np.float32)
        np.testing.assert_array_equal(a.get(), np.float32(0.3))
        from pymagma import graphs

        x = dev.zeros((3,), np.float32)
        with graphs.capture() as graph:  # a scalar first seen inside a capture: a fill kernel of the graph
            inside = F._base.constant(dev, 0.7, np.float32)
            y = dev.add(x, inside)
        graph.launch()
        assert F._base.constant(dev, 0.7, np.float32) is not inside  # not kept: it belongs to the graph
        del y
        assert len(device_graphs._constants) >= 1


# ------------------------------------------------------------------------------- what cannot be captured says who
def test_a_step_that_cannot_be_captured_names_the_layer_loss_or_metric():
    class Peeking(metrics.Accuracy):  # reads its labels back in the middle of the step
        name = "peeking"

        def hits_of(self, outputs, truth, xp):
            return xp.asarray(float(np.asarray(xp.to_numpy(truth)).sum()), outputs.dtype)

    class HostLoss(losses.MSE):  # uploads a host array inside the step
        def __call__(self, outputs, targets):
            return F.add(F.mse(outputs, targets), outputs.xp.asarray(np.zeros((), np.float32)))

    class HostLayer(L.Layer):
        def call(self, x, training=False):
            return F.add(x, np.ones(x.shape, np.float32))  # a host array becomes a device constant each step

    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((12, 4)).astype(np.float32), rng.integers(0, 3, 12)
    cases = [
        (lambda: [L.Input((4,)), L.Dense(3)], "cross_entropy", [Peeking()], y,
         r"in the metric 'peeking' \(Peeking\), Peeking\.hits_of: GraphCaptureError: DeviceArray\.get"),
        (lambda: [L.Input((4,)), L.Dense(3)], HostLoss(), None, np.zeros((12, 3), np.float32),
         r"in the loss HostLoss, HostLoss\.__call__: GraphCaptureError: pymagma\.asarray"),
        (lambda: [L.Input((4,)), HostLayer(name="host_layer"), L.Dense(3)], "cross_entropy", None, y,
         r"in layer 'host_layer' \(HostLayer\), HostLayer\.call: GraphCaptureError: pymagma\.asarray"),
    ]
    with simulator.simulated("null"):
        for layers, loss, mets, targets, pattern in cases:
            model = mdnn.Sequential(layers())
            model.compile("adam", loss, metrics=mets, seed=1, device="gpu", graph=True)
            with pytest.warns(RuntimeWarning, match=r"the train step could not be captured \(" + pattern):
                model.fit(x, targets, batch_size=4, epochs=2, verbose=0)
            assert model.optimizer.iterations == 6


# ---------------------------------------------------------------------------- device checks of ids and masks
def _token_model(device, graph):
    ids = L.Input((6,), dtype="int64")
    out = L.Dense(3)(L.Flatten()(L.Embedding(7, 4)(L.Reshape((2, 3))(ids))))
    model = mdnn.models.Model(ids, out)
    model.compile(mdnn.optimizers.SGD(0.1), "cross_entropy", seed=1, device=device, graph=graph)
    return model


def _token_data(bad_sample=None):
    rng = np.random.default_rng(7)
    x, y = rng.integers(0, 7, (16, 6)), rng.integers(0, 3, 16)
    if bad_sample is not None:
        x[bad_sample, 4] = 9
    return x, y


def _mask_model(device, graph):
    x, mask = L.Input((3, 4)), L.Input((3,))
    hidden = L.Activation("relu")(mask)  # behind a layer: the model's host check of input masks does not see it
    out = L.Dense(2)(L.Flatten()(L.MultiHeadAttention(2, 2, name="mha")([x, hidden])))
    model = mdnn.models.Model([x, mask], out)
    model.compile(mdnn.optimizers.SGD(0.1), "mse", seed=1, device=device, graph=graph)
    return model


def _mask_data(bad_sample=None):
    rng = np.random.default_rng(8)
    xs = rng.standard_normal((16, 3, 4)).astype(np.float32)
    keys = rng.integers(0, 2, (16, 3)).astype(np.float32)
    if bad_sample is not None:
        keys[bad_sample, 1] = 0.5
    return [xs, keys], rng.standard_normal((16, 2)).astype(np.float32)


CHECKED = {"ids": (_token_model, _token_data, EMBEDDING_MESSAGE), "masks": (_mask_model, _mask_data, MASK_MESSAGE)}


@pytest.mark.parametrize("kind", list(CHECKED))
def test_the_host_raises_the_message_the_device_repeats(kind):
    build, data, message = CHECKED[kind]
    model = build("host", False)
    x, y = data(bad_sample=11)
    with pytest.raises(ValueError) as caught:
        model.predict(x, batch_size=4)
    assert str(caught.value) == message
    with pytest.raises(ValueError) as caught:
        model.fit(x, y, batch_size=4, verbose=0, shuffle=False)
    assert str(caught.value) == message and model.optimizer.iterations == 2  # batches 1 and 2 applied


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "replay"])
@pytest.mark.parametrize("kind", list(CHECKED))
def test_a_bad_value_behind_a_layer_raises_the_hosts_message_on_the_device(device, kind, graph):
    """predict, evaluate and fit on data whose bad value sits in batch 3 of 4 (replayed when graph=True): the host's
    message, no NaN row, and fit stops with the updates before that batch applied, as on the host."""
    build, data, message = CHECKED[kind]
    good, y = data()
    bad, _ = data(bad_sample=11)
    model = build(device, graph)
    clean = model.predict(good, batch_size=4)
    assert np.isfinite(clean).all()
    with pytest.raises(ValueError) as caught:
        model.predict(bad, batch_size=4)
    assert str(caught.value) == message
    np.testing.assert_array_equal(model.predict(good, batch_size=4), clean)  # the record was cleared
    with pytest.raises(ValueError) as caught:
        model.evaluate(bad, y, batch_size=4)
    assert str(caught.value) == message
    reference = build(device, False)
    reference.fit(good[:8] if kind == "ids" else [a[:8] for a in good], y[:8], batch_size=4, verbose=0,
                  shuffle=False)
    model.progress_interval = float("inf")  # one read, at the epoch's end: the bad batch and the next are pending
    with pytest.raises(ValueError) as caught:
        model.fit(bad, y, batch_size=4, verbose=0, shuffle=False)
    assert str(caught.value) == message and model.optimizer.iterations == 2
    for a, b in zip(_state(model), _state(reference), strict=True):
        np.testing.assert_array_equal(a, b)
    if graph:
        assert sum(s.graph.launches for s in _steps(model, "train")) == 3  # batches 2-4 replayed before the read
        assert sum(s.graph.launches for s in _steps(model, "predict")) >= 4


def test_train_on_batch_names_the_id_and_applies_nothing(device):
    model = _token_model(device, False)
    x, y = _token_data(bad_sample=1)
    before = _state(model)
    with pytest.raises(ValueError, match="embedding: index 9 is out of range"):
        model.train_on_batch(x[:4], y[:4])
    assert model.optimizer.iterations == 0
    for a, b in zip(_state(model), before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_checks_add_no_host_read_to_fit(monkeypatch):
    """The fault record rides on the tally's read: one device-to-host copy per epoch, as without checks."""
    from pymagma import runtime

    with simulator.simulated("full"):
        model = _token_model("gpu", True)
        model.progress_interval = float("inf")
        x, y = _token_data()
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # the record exists from here on
        reads = []
        original = runtime.memcpy_dtoh
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda *a, **k: reads.append(1) or original(*a, **k))
        model.fit(x, y, batch_size=4, epochs=3, verbose=0)
        assert len(reads) == 3


def test_faults_read_without_a_record_is_the_plain_read():
    host = mdnn.backend.get("host")
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(faults.read(host, a), a)


# ------------------------------------------------------------------------------------------- the check kernels
def _bits(record) -> int:
    return (int(record[2]) << 32) | int(record[1])


def test_check_kernels_record_the_first_bad_value_in_c_order(device):
    record = array.zeros((kernels.FAULT_RECORD,), np.int64)
    ids = np.zeros((3, 300), np.int64)
    ids[2, 7], ids[1, 290], ids[2, 299] = -4, 2**62 + 3, 7  # spread over the threads of the block
    kernels.check_range(array.asarray(ids), 0, 2**62, record, 5)
    got = record.get()
    assert got[0] == 5 and got[3] == 590 and _bits(got) == 2**62 + 3
    kernels.check_range(array.asarray(np.array([-1], np.int64)), 0, 3, record, 6)
    assert record.get()[0] == 5  # a record holding a fault is not written again
    for dtype in (np.float32, np.float64, np.float16):
        record = array.zeros((kernels.FAULT_RECORD,), np.int64)
        mask = np.ones(700, dtype)
        mask[[3, 400]] = 1
        mask[[611, 650]] = (0.25, np.nan)
        kernels.check_binary(array.asarray(mask), record, 2)
        got = record.get()
        assert got[0] == 2 and got[3] == 611
        assert np.array([_bits(got)], np.uint64).view(np.float64)[0] == 0.25
    record = array.zeros((kernels.FAULT_RECORD,), np.int64)
    kernels.check_binary(array.asarray(np.array([0, 1, 1, 0], np.int32)), record, 1)
    kernels.check_range(array.asarray(np.array([0.5, 2.5], np.float32)), 0.0, 3.0, record, 1)
    assert not record.get().any()
    kernels.check_range(array.asarray(np.array([0.5, np.nan], np.float32)), 0.0, 3.0, record, 1)
    assert record.get()[3] == 1


def test_a_bad_id_in_the_validation_data_stops_fit_after_the_training_batches(device):
    model = _token_model(device, True)
    x, y = _token_data()
    bad, _ = _token_data(bad_sample=2)
    with pytest.raises(ValueError) as caught:
        model.fit(x, y, batch_size=4, verbose=0, shuffle=False, validation_data=(bad, y))
    assert str(caught.value) == EMBEDDING_MESSAGE and model.optimizer.iterations == 4  # as on the host


def test_an_eager_call_on_device_ids_raises_at_its_read(device):
    """Ids already on the device (behind a layer, or a Tensor) reach the gather unchecked by the host: the result's
    first read raises the host's message instead of handing back a row of NaN."""
    from magmadnn.autograd import Tensor

    dev = mdnn.backend.get(device)
    layer = L.Embedding(7, 4)
    layer.configure(dev, np.float32, 1)
    ids = Tensor(dev.asarray(np.array([[1, 9, 2]], np.int64)), backend=dev)
    out = layer(ids)
    with pytest.raises(ValueError) as caught:
        out.numpy()
    assert str(caught.value) == EMBEDDING_MESSAGE
    assert np.isfinite(layer(Tensor(dev.asarray(np.array([[1, 2, 6]], np.int64)), backend=dev)).numpy()).all()
