"""Dynamic loss scaling (``optimizers.LossScaleOptimizer``): the state machine against Keras 3's own
LossScaleOptimizer (torch backend) fed the same gradients, an overflowing step skipped with weights and slots
untouched on the host and the simulated device, fit going on, graph replay equal to eager steps bit for bit, no
extra host read per step, configuration, checkpoints and bad arguments. gpu-marked twins run the device tests on a
GPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn import optimizers as O
from magmadnn.autograd import Parameter
from magmadnn.models import replay
from tests.magmadnn.backends import model_device

DEVICES = ["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)]
GRADIENT_ROWS = [1.0, 1.0, 1.0, np.inf, np.nan, 1.0, -np.inf, 1.0, 1.0, 1.0, 1.0]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "host":
        yield "host"
    else:
        yield from model_device(request.param)


@pytest.fixture(params=DEVICES[1:])
def gpu(request):
    yield from model_device(request.param)


INNER = {"sgd": lambda k: k.SGD(0.1, momentum=0.9), "adam": lambda k: k.Adam(0.01)}


@pytest.fixture(scope="module", params=sorted(INNER))
def keras_trace(request):
    """Keras' LossScaleOptimizer(SGD(0.1, momentum=0.9) or Adam(0.01), initial_scale=8, dynamic_growth_steps=2)
    over the gradient rows: the inner name, (scale, weights) after each step, and Keras' iterations."""
    from tests.keras_reference import keras

    w0 = _weights0()
    variables = [keras.Variable(w) for w in w0]
    opt = keras.optimizers.LossScaleOptimizer(INNER[request.param](keras.optimizers), initial_scale=8.0,
                                              dynamic_growth_steps=2)
    trace = []
    for grads in _gradients():
        opt.apply([keras.ops.convert_to_tensor(g) for g in grads], variables)
        trace.append((float(opt.dynamic_scale), [np.asarray(v.numpy()) for v in variables]))
    return request.param, trace, int(opt.iterations)


def _weights0():
    return [np.array([1.0, -2.0, 0.5], np.float32), np.array([[0.25, -0.75]], np.float32)]


def _gradients():
    """Scaled gradients: a row's value in the first weight's gradient (finite, inf or NaN)."""
    rng = np.random.default_rng(5)
    for k, value in enumerate(GRADIENT_ROWS):
        g = (rng.normal(size=3) * 8).astype(np.float32)
        g[k % 3] = value if not np.isfinite(value) else g[k % 3]
        yield [g, (rng.normal(size=(1, 2)) * 8).astype(np.float32)]


def test_the_state_machine_equals_keras(device, keras_trace):
    """Same gradients: the same scale after every step (halved on inf and NaN, doubled after two finite steps in a
    row), the same weights (skipped steps leave them, and slots: momentum, Adam's moments; Adam's bias correction
    counts the applied steps, as Keras')."""
    inner, trace, keras_iterations = keras_trace
    xp = mdnn.backend.get("host" if device == "host" else "gpu")
    params = [Parameter(xp.asarray(w), backend=xp) for w in _weights0()]
    opt = O.LossScaleOptimizer(INNER[inner](O), initial_scale=8.0, dynamic_growth_steps=2)
    assert opt.dynamic_scale == 8.0
    with np.errstate(invalid="ignore", over="ignore"):
        for (scale, weights), grads in zip(trace, _gradients()):
            for p, g in zip(params, grads):
                p.grad = xp.asarray(g)
            opt.step(params)
            assert opt.dynamic_scale == scale
            for p, w in zip(params, weights):
                np.testing.assert_allclose(np.asarray(xp.to_numpy(p.data)), w, rtol=2e-6, atol=1e-7)
    skipped = sum(not np.isfinite(v) for v in GRADIENT_ROWS)
    assert keras_iterations == len(GRADIENT_ROWS) - skipped
    assert opt.iterations == len(GRADIENT_ROWS)  # the documented difference: skipped steps count on the host


def _model(device, optimizer, graph=False):
    model = mdnn.Sequential([L.Input((6,)), L.Dense(8, activation="relu"), L.Dense(3)])
    return model.compile(optimizer, "cross_entropy", seed=1, device=device, graph=graph)


def _data(bad_batches=(1,), n=32):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n)
    for b in bad_batches:  # the loss stays finite (~1e35); scaled by 2**15 it overflows float32
        x[8 * b:8 * b + 8] *= np.float32(1e36)
    return x, y


def _host(a):
    return np.array(a if isinstance(a, np.ndarray) else a.get())


def _state(model):
    opt = model.optimizer
    return ([_host(p.data) for p in model.parameters()],
            {(i, k): _host(a) for i, slots in opt.slot_arrays.items() if i != "loss_scale" for k, a in slots.items()})


def test_an_overflowing_step_is_skipped_with_weights_and_slots_untouched(device):
    x, y = _data(bad_batches=())
    big = x[:8] * np.float32(1e36)
    model = _model(device, O.LossScaleOptimizer(O.Adam(0.01)))
    with np.errstate(all="ignore"):
        model.train_on_batch(x[:8], y[:8])
        weights, slots = _state(model)
        loss = model.train_on_batch(big, y[:8])  # finite loss, scaled gradients inf/NaN: not an error
        assert np.isfinite(loss)
        assert model.optimizer.dynamic_scale == 2.0**14
        after_weights, after_slots = _state(model)
        for a, b in zip(weights, after_weights):
            np.testing.assert_array_equal(a, b)
        assert slots.keys() == after_slots.keys()
        for key in slots:
            np.testing.assert_array_equal(slots[key], after_slots[key])
        model.train_on_batch(x[8:16], y[8:16])  # and the next step applies
    assert not np.array_equal(_state(model)[0][0], weights[0])
    assert model.optimizer.dynamic_scale == 2.0**14


def test_a_skipped_step_does_not_stop_fit(device):
    x, y = _data(bad_batches=(1, 2))
    model = _model(device, O.LossScaleOptimizer(O.SGD(0.05, momentum=0.9), dynamic_growth_steps=1))
    model.progress_interval = 0  # a host read after every batch: the non-finite paths would run if they fired
    with np.errstate(all="ignore"):
        history = model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
    # grow, skip, skip, grow: 2**15 * 2 / 4 * 2
    assert model.optimizer.dynamic_scale == 2.0**15
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_graph_replay_equals_eager_bit_for_bit_with_skipped_steps(gpu):
    """Two epochs of 4 batches with overflowing batches at 2 and 3 (replayed ones) and growth every 2 steps."""
    x, y = _data(bad_batches=(2, 3))
    results = []
    for graph in (False, True):
        model = _model(gpu, O.LossScaleOptimizer(O.Adam(0.01), dynamic_growth_steps=2), graph)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.filterwarnings("error", message="graph=True")  # a step that cannot be captured warns
            history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        weights, slots = _state(model)
        results.append((history.history, weights, slots, model.optimizer.dynamic_scale, model.optimizer.iterations))
        if graph:
            launches = sum(s.graph.launches for s in model._graphs.steps.values()
                           if isinstance(s, replay._Step) and s.kind == "train")
            assert launches == 8 - replay.WARMUP
    (h0, w0, s0, scale0, it0), (h1, w1, s1, scale1, it1) = results
    assert h0 == h1 and (scale0, it0) == (scale1, it1)
    assert scale0 == 2.0**15 * 2 / 4 * 2 / 4  # steps: f f(grow) s s f f(grow) s s
    for a, b in zip(w0, w1):
        np.testing.assert_array_equal(a, b)
    for key in s0:
        np.testing.assert_array_equal(s0[key], s1[key])


def test_train_on_batch_replayed_skips_overflowing_steps_as_eagerly(gpu):
    """train_on_batch (the checked step, replayed by default on the device) with batches whose scaled gradients
    overflow: the same skipped updates, scale changes, weights, slots and returned losses as eager steps."""
    x, y = _data(bad_batches=(2, 3))
    results = []
    for graph in (False, "auto"):
        model = _model(gpu, O.LossScaleOptimizer(O.Adam(0.01), dynamic_growth_steps=2), graph)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", RuntimeWarning)  # nothing runs eagerly for want of a capture
            losses = [model.train_on_batch(x[8 * b:8 * b + 8], y[8 * b:8 * b + 8]) for _ in range(2) for b in range(4)]
        weights, slots = _state(model)
        results.append((losses, weights, slots, model.optimizer.dynamic_scale, model.optimizer.iterations))
        if graph:
            launches = sum(s.graph.launches for s in model._graphs.steps.values()
                           if isinstance(s, replay._Step) and s.kind == "train_checked")
            assert launches == 8 - replay.WARMUP
    (l0, w0, s0, scale0, it0), (l1, w1, s1, scale1, it1) = results
    np.testing.assert_array_equal(l0, l1)
    assert (scale0, it0) == (scale1, it1) and scale0 < 2.0**15  # overflowing steps were skipped, the scale cut
    for a, b in zip(w0, w1):
        np.testing.assert_array_equal(a, b)
    for key in s0:
        np.testing.assert_array_equal(s0[key], s1[key])


@pytest.mark.parametrize("graph", [False, True])
def test_no_extra_host_read_per_step(gpu, graph, monkeypatch):
    """An epoch of 4 steps reads the device once (the tally at its end) with or without loss scaling."""
    from pymagma import runtime

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    counts = []
    for optimizer, bad in ((O.SGD(0.05), ()), (O.LossScaleOptimizer(O.SGD(0.05)), (2,))):  # a skip: scaled only
        x, y = _data(bad_batches=bad)
        model = _model(gpu, optimizer, graph)
        model.progress_interval = float("inf")
        with np.errstate(all="ignore"):
            model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)  # builds and captures
            reads.clear()
            model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        counts.append(len(reads))
    assert counts[0] == counts[1] == 1


def test_config_round_trip_and_delegation():
    opt = O.LossScaleOptimizer(O.Adam(0.003, beta_1=0.8), initial_scale=1024, dynamic_growth_steps=7, name="ls")
    config = opt.get_config()
    inner = {"class_name": "Adam", "config": opt.inner_optimizer.get_config()}
    assert config == {"name": "ls", "inner_optimizer": inner, "initial_scale": 1024.0, "dynamic_growth_steps": 7}
    back = O.get(opt.to_config())
    assert isinstance(back, O.LossScaleOptimizer) and back.get_config() == config
    assert isinstance(back.inner_optimizer, O.Adam) and back.inner_optimizer.beta1 == 0.8
    assert O.LossScaleOptimizer.from_config(config).get_config() == config
    back.learning_rate = 0.5  # Keras: the inner optimizer's learning rate
    assert back.inner_optimizer.learning_rate == 0.5 and back.learning_rate == 0.5
    assert back.dynamic_scale == 1024.0  # before any step: initial_scale, as Keras
    loss = mdnn.Tensor(np.float32(1.5))
    assert float(back.scale_loss(loss).numpy()) == 1536.0


def test_the_scale_is_saved_and_loaded_with_the_checkpoint(tmp_path):
    x, y = _data(bad_batches=(1,))
    model = _model("host", O.LossScaleOptimizer(O.Adam(0.01), dynamic_growth_steps=3))
    with np.errstate(all="ignore"):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)  # f s f f: scale 2**14, counter 2
    assert model.optimizer.state_dict()["loss_scale"] == pytest.approx(
        {"scale": 2.0**14, "counter": 2, "beta_1_power": 0.9**3, "beta_2_power": 0.999**3}, rel=1e-15)  # 3 applied
    assert model.optimizer.dynamic_scale == 2.0**14
    path = model.save_checkpoint(tmp_path / "ls.safetensors")
    loaded = mdnn.models.load(path)
    saved_model = mdnn.models.load(model.save(tmp_path / "model.safetensors"))  # Keras' model.save keeps it too
    for m in (loaded, saved_model):
        assert isinstance(m.optimizer, O.LossScaleOptimizer)
        assert m.optimizer.dynamic_scale == 2.0**14 and m.optimizer.dynamic_growth_steps == 3
    clean = _data(bad_batches=())[0][:8]
    for m in (model, loaded):
        m.train_on_batch(clean, y[:8])  # the third finite step in a row: both grow to 2**15
    assert loaded.optimizer.dynamic_scale == model.optimizer.dynamic_scale == 2.0**15
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_damaged_saved_scale_is_a_model_file_error(tmp_path):
    from magmadnn.saving import ModelFileError, read_file, write_file

    model = _model("host", O.LossScaleOptimizer(O.SGD(0.05)))
    model.train_on_batch(*[a[:8] for a in _data(bad_batches=())])
    tensors, meta = read_file(model.save_checkpoint(tmp_path / "ok.safetensors"))
    assert meta["optimizer"]["loss_scale"] == {"scale": 2.0**15, "counter": 1}
    meta["optimizer"]["loss_scale"]["scale"] = -1.0
    with pytest.raises(ModelFileError, match="loss_scale scale must be a finite number >= 0"):
        mdnn.models.load(write_file(tmp_path / "bad.safetensors", tensors, meta))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"inner_optimizer": "sgd"}, TypeError, "inner_optimizer must be a magmadnn optimizer"),
    ({"initial_scale": "big"}, TypeError, "initial_scale must be a number"),
    ({"initial_scale": 0.0}, ValueError, "initial_scale must be a finite float32 > 0"),
    ({"initial_scale": float("inf")}, ValueError, "initial_scale must be a finite float32 > 0"),
    ({"initial_scale": 1e39}, ValueError, "initial_scale must be a finite float32 > 0"),
    ({"initial_scale": float("nan")}, ValueError, "initial_scale must be a finite float32 > 0"),
    ({"dynamic_growth_steps": 2.5}, TypeError, "dynamic_growth_steps must be an int"),
    ({"dynamic_growth_steps": 0}, ValueError, r"dynamic_growth_steps must be in \[1, 2\*\*24\]"),
    ({"dynamic": False}, ValueError, "dynamic=False is not supported"),
    ({"clipnorm": 1.0}, ValueError, "does not support clipnorm=; set it on the inner optimizer"),
    ({"momentum": 0.9}, TypeError, r"unexpected arguments \['momentum'\]"),
])
def test_bad_arguments_are_typed_errors(kwargs, error, match):
    kwargs = {"inner_optimizer": O.SGD(), **kwargs}
    with pytest.raises(error, match=match):
        O.LossScaleOptimizer(**kwargs)


def test_a_loss_scale_optimizer_is_not_wrapped_twice():
    with pytest.raises(TypeError, match="not a LossScaleOptimizer"):
        O.LossScaleOptimizer(O.LossScaleOptimizer(O.SGD()))


def test_a_non_finite_loss_under_scaling_is_skipped_not_an_error(device):
    """As in Keras: a batch whose loss is NaN is a skipped step (scale halved, weights kept), and fit goes on,
    reporting the NaN in that epoch's running loss; the next epoch is finite again."""
    x, y = _data(bad_batches=())
    x_bad = x.copy()
    x_bad[9] = np.float32(3e38) * np.sign(x_bad[9])  # overflows the forward pass: the loss itself is inf or NaN
    model = _model(device, O.LossScaleOptimizer(O.SGD(0.05), dynamic_growth_steps=100))
    with np.errstate(all="ignore"):
        first = model.fit(x_bad, y, batch_size=8, epochs=1, verbose=0, shuffle=False).history["loss"]
        assert np.isnan(first[0]) and model.optimizer.dynamic_scale == 2.0**14
        assert np.isnan(model.train_on_batch(x_bad[8:16], y[8:16]))
        assert model.optimizer.dynamic_scale == 2.0**13
        second = model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False).history["loss"]
    assert np.isfinite(second[0])
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_float64_weights_with_the_float32_scale(device):
    """The scale is float32 (Keras' dtype) and cast to the gradients' dtype: float64 weights step by g / scale."""
    xp = mdnn.backend.get("host" if device == "host" else "gpu")
    w0 = np.array([0.5, -1.25, 2.0])
    param = Parameter(xp.asarray(w0.copy()), backend=xp)
    opt = O.LossScaleOptimizer(O.SGD(0.5), initial_scale=4.0, dynamic_growth_steps=1)
    assert float(opt.scale_loss(mdnn.Tensor(np.float64(3.0), backend=xp)).numpy()) == 12.0
    with np.errstate(invalid="ignore"):
        for g, scale in (([8.0, np.inf, 4.0], 2.0), ([2.0, 4.0, -6.0], 4.0)):
            param.grad = xp.asarray(np.array(g))
            opt.step([param])
            assert opt.dynamic_scale == scale
    np.testing.assert_array_equal(np.asarray(xp.to_numpy(param.data)), w0 - 0.5 * np.array([2.0, 4.0, -6.0]) / 2.0)
    assert np.asarray(xp.to_numpy(param.data)).dtype == np.float64


def test_terminate_on_nan_stops_at_a_non_finite_loss_under_scaling(device):
    """Keras' TerminateOnNaN sees the NaN running loss of a skipped step and stops; without it fit goes on (above).
    The host stops after the batch, the device at the next progress read (here after every batch)."""
    x, y = _data(bad_batches=())
    x[9] = np.float32(3e38) * np.sign(x[9])
    model = _model(device, O.LossScaleOptimizer(O.SGD(0.05)))
    model.progress_interval = 0  # a progress read after every batch
    with np.errstate(all="ignore"):
        model.fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                  callbacks=[mdnn.callbacks.TerminateOnNaN()])
    assert model.stop_training and "TerminateOnNaN: loss is nan at epoch 1, batch 2" in model.stop_reason
    assert model.optimizer.iterations == 2 and model.optimizer.dynamic_scale == 2.0**14
    assert all(np.isfinite(w).all() for w in model.get_weights())


def test_an_overflowing_mixed_float16_step_is_skipped_silently(device):
    """A skipped step is the expected course of dynamic scaling, not an error: on a GPU inf/NaN come without a
    word, and the host and the simulated device say nothing either (no NumPy RuntimeWarning, which ``-W error``
    would turn into an exception)."""
    from magmadnn import mixed_precision

    model = mdnn.Sequential([L.Input((1, 6, 6)), L.Conv2D(4, 3, activation="relu"), L.Flatten(), L.Dense(4)],
                            seed=0, dtype="mixed_float16")
    model.compile("sgd", mdnn.losses.SparseCategoricalCrossentropy(from_logits=True), device=device)
    assert isinstance(model.optimizer, O.LossScaleOptimizer) and mixed_precision.global_policy().name == "float32"
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 1, 6, 6)).astype(np.float32), rng.integers(0, 4, 16)
    huge = x * np.float32(1e6)  # past float16's 65504: the half activations overflow
    before = model.get_weights()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(model.train_on_batch(huge[:8], y[:8]))
        model.fit(huge, y, batch_size=8, epochs=1, verbose=0)
        assert model.optimizer.dynamic_scale == 2.0**12
        for a, b in zip(before, model.get_weights()):
            np.testing.assert_array_equal(a, b)
