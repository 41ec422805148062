"""LSTM and GRU layers: against PyTorch's nn.LSTM/nn.GRU (weights moved by transposition), against the NumPy
reference, float64 finite-difference gradients, save/load, host vs simulated-device training parity (and its GPU
twin), and no device-to-host copy while training or evaluating on the device."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import F, Tensor, models, optimizers, zoo
from magmadnn import layers as L
from magmadnn.models import Sequential
from tests import reference
from tests.magmadnn._gradcheck import check_gradients
from tests.magmadnn.backends import open_backend

LAYERS = {"LSTM": (L.LSTM, 4), "GRU": (L.GRU, 3)}


def built(kind, units, steps, features, return_sequences, seed=0):
    cls, _ = LAYERS[kind]
    layer = cls(units, return_sequences=return_sequences)
    layer.configure("host", "float64", seed)
    layer.build((steps, features))
    return layer


def _weights(layer):
    return {name: np.asarray(p.data) for name, p in layer.params.items()}


# ------------------------------------------------------------------------------------------------------ PyTorch
@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("return_sequences", [True, False])
def test_matches_pytorch_forward_and_gradients(kind, return_sequences):
    torch = pytest.importorskip("torch")
    n, steps, features, units = 3, 5, 4, 6
    layer = built(kind, units, steps, features, return_sequences)
    torch.manual_seed(0)
    net = (torch.nn.LSTM if kind == "LSTM" else torch.nn.GRU)(features, units, batch_first=True).double()
    w = {k: v.detach().numpy() for k, v in net.named_parameters()}
    # PyTorch's gate order is ours (i, f, g, o / r, z, n): transposition moves the weights
    layer.params["kernel"].data[...] = w["weight_ih_l0"].T
    layer.params["recurrent_kernel"].data[...] = w["weight_hh_l0"].T
    if kind == "LSTM":  # one bias: PyTorch's two add up
        layer.params["bias"].data[...] = w["bias_ih_l0"] + w["bias_hh_l0"]
    else:  # the recurrent bias sits inside the reset gate's product
        layer.params["bias"].data[...] = w["bias_ih_l0"]
        layer.params["recurrent_bias"].data[...] = w["bias_hh_l0"]
    x = np.random.default_rng(1).standard_normal((n, steps, features))
    xt = torch.tensor(x, requires_grad=True)
    full, _ = net(xt)
    expected = full if return_sequences else full[:, -1]
    u = np.random.default_rng(2).standard_normal(tuple(expected.shape))
    (expected * torch.tensor(u)).sum().backward()

    ours_x = Tensor(x.copy(), requires_grad=True)
    y = layer(ours_x)
    y.backward(u)
    np.testing.assert_allclose(y.numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ours_x.grad), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    grads = {k: v.grad.numpy() for k, v in net.named_parameters()}
    got = {k: np.asarray(p.grad) for k, p in layer.params.items()}
    np.testing.assert_allclose(got["kernel"], grads["weight_ih_l0"].T, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got["recurrent_kernel"], grads["weight_hh_l0"].T, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got["bias"], grads["bias_ih_l0"], rtol=1e-9, atol=1e-11)
    if kind == "GRU":
        np.testing.assert_allclose(got["recurrent_bias"], grads["bias_hh_l0"], rtol=1e-9, atol=1e-11)


# ------------------------------------------------------------------------------------------ NumPy reference
@pytest.mark.parametrize("kind", sorted(LAYERS))
@given(n=st.integers(1, 4), steps=st.integers(1, 6), features=st.integers(1, 5), units=st.integers(1, 5),
       return_sequences=st.booleans(), seed=st.integers(0, 9999))
def test_layer_against_the_reference(kind, n, steps, features, units, return_sequences, seed):
    layer = built(kind, units, steps, features, return_sequences, seed)
    rng = np.random.default_rng(seed)
    for p in layer.params.values():  # non-zero biases too
        p.data[...] = rng.uniform(-1, 1, p.shape)
    w = _weights(layer)
    x = rng.uniform(-2, 2, (n, steps, features))
    x_proj = x @ w["kernel"] + w["bias"]
    if kind == "LSTM":
        expected = reference.lstm_ref(x_proj, w["recurrent_kernel"])
    else:
        expected = reference.gru_ref(x_proj, w["recurrent_kernel"], w["recurrent_bias"])
    got = layer(x).numpy()
    assert got.shape == ((n, steps, units) if return_sequences else (n, units))
    np.testing.assert_allclose(got, expected if return_sequences else expected[:, -1], rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------- gradient checks
@pytest.mark.parametrize("return_sequences", [True, False])
def test_lstm_gradients(return_sequences):
    rng = np.random.default_rng(0)
    check_gradients(lambda x, k, r, b: F.lstm(x, k, r, b, return_sequences), rng.uniform(-1, 1, (2, 4, 3)),
                    rng.uniform(-1, 1, (3, 8)), rng.uniform(-1, 1, (2, 8)), rng.uniform(-1, 1, 8))


@pytest.mark.parametrize("return_sequences", [True, False])
def test_gru_gradients(return_sequences):
    rng = np.random.default_rng(1)
    check_gradients(lambda x, k, r, b, rb: F.gru(x, k, r, b, rb, return_sequences), rng.uniform(-1, 1, (2, 4, 3)),
                    rng.uniform(-1, 1, (3, 6)), rng.uniform(-1, 1, (2, 6)), rng.uniform(-1, 1, 6),
                    rng.uniform(-1, 1, 6))


def test_stacked_layers_gradients():
    """A sequence-returning LSTM feeding a GRU: the gradient flows through every step of both."""
    lstm, gru = built("LSTM", 3, 4, 2, True), built("GRU", 2, 4, 3, False, seed=1)
    params = [p for layer in (lstm, gru) for p in layer.parameters()]

    def net(x, *weights):
        a = F.lstm(x, *weights[:3], return_sequences=True)
        return F.gru(a, *weights[3:], return_sequences=False)

    check_gradients(net, np.random.default_rng(3).uniform(-1, 1, (2, 4, 2)), *[np.asarray(p.data) for p in params])


# ------------------------------------------------------------------------------------------------ models
def sequence_model(seed=0):
    return Sequential([L.Input((6, 5)), L.LSTM(8, return_sequences=True), L.GRU(7), L.Dense(3)], seed=seed)


def sequences(n=32, seed=0):
    """Learnable sequences: the class is which third of the time axis holds a bump."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = 0.3 * rng.standard_normal((n, 6, 5))
    for i, c in enumerate(y):
        x[i, 2 * c:2 * c + 2] += 1.0
    return x.astype(np.float32), y


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_save_and_load_round_trip(fmt, tmp_path):
    model = sequence_model()
    model.compile(optimizers.Adam(1e-2), "cross_entropy", seed=1)
    x, y = sequences()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    loaded = models.load(model.save(tmp_path / f"m.{fmt}"))
    assert [type(layer).__name__ for layer in loaded.layers] == [type(layer).__name__ for layer in model.layers]
    recurrent = [layer for layer in loaded.layers if isinstance(layer, (L.LSTM, L.GRU))]
    assert [layer.return_sequences for layer in recurrent] == [True, False]
    assert sorted(recurrent[1].params) == ["bias", "kernel", "recurrent_bias", "recurrent_kernel"]
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))


def test_zoo_lstm_classifier_learns_on_the_host():
    x, y = sequences(64)
    model = zoo.lstm_classifier((6, 5), 3, units=16)
    model.compile(optimizers.Adam(2e-2), "cross_entropy", metrics=["accuracy"], seed=0)
    history = model.fit(x, y, batch_size=16, epochs=6, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert model.evaluate(x, y, return_dict=True)["accuracy"] >= 0.9


# --------------------------------------------------------------------------- the device (simulated, GPU twin)
@pytest.fixture(scope="module", params=[pytest.param("device", marks=pytest.mark.native),
                                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device_backend(request):
    yield from open_backend(request.param)


def _train(device, steps=8):
    model = sequence_model(seed=4)
    model.compile(optimizers.Adam(1e-2), "cross_entropy", seed=5, device=device)
    x, y = sequences(steps * 8)
    losses = [model.train_on_batch(x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8]) for i in range(steps)]
    return losses, model.get_weights()


def test_host_and_device_train_to_the_same_losses(device_backend):
    host_losses, host_weights = _train("host")
    device_losses, device_weights = _train(device_backend)
    assert np.all(np.isfinite(host_losses)) and np.mean(host_losses[-3:]) < np.mean(host_losses[:3])
    np.testing.assert_allclose(device_losses, host_losses, rtol=2e-4, atol=2e-5)
    for dw, hw in zip(device_weights, host_weights, strict=True):
        np.testing.assert_allclose(dw, hw, rtol=2e-3, atol=2e-4)


def test_training_and_evaluation_on_the_device_never_copy_to_the_host(device_backend, monkeypatch):
    from pymagma import runtime

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    x, y = sequences(32)
    model = sequence_model(seed=2)
    model.compile(optimizers.Adam(1e-3), metrics=["accuracy"], seed=3, device=device_backend)
    model.progress_interval = float("inf")  # one progress update: the epoch end
    for _ in range(2):
        reads.clear()
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 4 steps: {reads}"
    reads.clear()
    model.evaluate(x, y, batch_size=8)
    assert len(reads) == 1, f"{len(reads)} device-to-host copies in one evaluation: {reads}"



def test_bench_row_lstm_recipe_runs():
    """``scripts/bench.py``'s row-LSTM recipe on 16 generated images (its logic, never its timings)."""
    import importlib.util
    import sys
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[3] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        spec = importlib.util.spec_from_file_location("bench_script", scripts / "bench.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(scripts))
    rng = np.random.default_rng(0)
    data = (rng.random((16, 1, 28, 28), np.float32), rng.integers(0, 10, 16), rng.random((8, 1, 28, 28), np.float32),
            rng.integers(0, 10, 8))
    rows = bench.train_recipe("row_lstm", data, 1, 0, ["magmadnn"], batch=8)  # PyTorch's import alone takes seconds
    assert [r["framework"] for r in rows] == ["magmadnn"]
    assert all(r["images_per_s"] > 0 and 0 <= r["test_accuracy"] <= 1 for r in rows)


def test_gate_kernels_name_a_wrong_buffer():
    """The device backend's gate kernels check every buffer before a launch (arrays at a null pointer: nothing
    runs)."""
    from magmadnn.backend.device import kernels
    from pymagma.array import DeviceArray

    def fake(*shape, dtype=np.float32):
        return DeviceArray(shape, dtype, 0, None)

    x, rec, state, gates = fake(2, 3, 16), fake(2, 16), fake(4, 2, 4), fake(3, 2, 16)
    with pytest.raises(ValueError, match=r"lstm_gates_forward: cs must be a C-contiguous array of shape \(4, 2, 4\)"):
        kernels.lstm_gates_forward(x, rec, fake(3, 2, 4), state, gates, None, 0)
    with pytest.raises(ValueError, match="step 3 is outside the sequence of 3 steps"):
        kernels.lstm_gates_forward(x, rec, state, state, gates, None, 3)
    with pytest.raises(ValueError, match=r"x_proj must be \(N, T, 3 units\)"):
        kernels.gru_gates_forward(fake(2, 3, 16), rec, fake(16), state, gates, state, None, 0)
    with pytest.raises(TypeError, match="dtypes differ"):
        kernels.lstm_gates_forward(x, fake(2, 16, dtype=np.float64), state, state, gates, None, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_host_lstm_backward_is_the_same_with_and_without_numba(dtype, return_sequences, monkeypatch):
    """The host's fused backward step (``_host_jit``, when numba is installed) against its NumPy path."""
    from magmadnn.backend import _host_jit
    from magmadnn.backend import host as H

    if _host_jit.kernels is None:
        pytest.skip("numba is not installed: only the NumPy path exists")
    rng = np.random.default_rng(0)
    x_proj, w = rng.uniform(-2, 2, (3, 5, 16)).astype(dtype), rng.uniform(-1, 1, (4, 16)).astype(dtype)
    y, ctx = H.lstm_forward(x_proj, w, return_sequences)
    dy = rng.standard_normal(y.shape).astype(dtype)
    fused = H.lstm_backward(dy, w, ctx)
    monkeypatch.setattr(_host_jit, "kernels", None)
    plain = H.lstm_backward(dy, w, ctx)
    for a, b in zip(fused, plain, strict=True):
        assert a.dtype == dtype
        close = {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-14}
        np.testing.assert_allclose(a, b, **close)


@pytest.mark.native
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_the_recurrence_replays_from_a_cuda_graph_bit_for_bit(kind):
    """Forward and backpropagation through time captured once (pymagma.graphs on the simulator) and replayed on new
    inputs equal eager runs: nothing in the recurrence leaves the queue's stream or the graph's memory."""
    from magmadnn import backend
    from pymagma import graphs, simulator

    gates = LAYERS[kind][1]
    rng = np.random.default_rng(0)
    with simulator.simulated("full"):
        dev = backend.get("gpu")
        weights = [dev.asarray(rng.uniform(-1, 1, (3, 3 * gates)).astype(np.float32))]
        if kind == "GRU":
            weights.append(dev.asarray(rng.uniform(-1, 1, 3 * gates).astype(np.float32)))
        forward, backward = getattr(dev, f"{kind.lower()}_forward"), getattr(dev, f"{kind.lower()}_backward")
        x, dy = dev.zeros((2, 4, 3 * gates)), dev.asarray(rng.standard_normal((2, 4, 3)).astype(np.float32))

        def run(inputs):
            y, ctx = forward(inputs, *weights, True)
            return (y, *backward(dy, weights[0], ctx))

        with graphs.capture() as graph:
            captured = run(x)
        for _ in range(2):
            batch = rng.uniform(-2, 2, (2, 4, 3 * gates)).astype(np.float32)
            x.set(batch)
            graph.launch()
            for got, expected in zip(captured, run(dev.asarray(batch)), strict=True):
                np.testing.assert_array_equal(dev.to_numpy(got), dev.to_numpy(expected))
