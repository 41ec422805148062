"""LayerNorm, RMSNorm, GroupNorm, Embedding, the token losses and gradient clipping as a user meets them: layers
against tests/reference.py, integer inputs, save/load, PyTorch's losses, clipping, host-vs-simulated-device parity
and no device-to-host copy in training or inference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import F, Tensor, backend, losses, metrics, models, optimizers
from magmadnn import layers as L
from magmadnn.layers import layer_class
from tests import reference
from tests.conftest import examples
from tests.magmadnn.backends import open_backend

HOST = backend.get("host")


def _set(layer, **arrays):
    for name, value in arrays.items():
        layer.params[name].data = layer.xp.asarray(value)


# ------------------------------------------------------------------------------------------ layers vs reference
@settings(max_examples=examples(15))
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), axis=st.integers(1, 3), rms=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_layer_norm_and_rms_norm_over_any_axis(shape, axis, rms, seed):
    axis = min(axis, len(shape))
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 3.0, (2, *shape))
    layer = L.RMSNorm(eps=1e-3, axis=axis, dtype="float64") if rms else L.LayerNorm(axis=axis, eps=1e-3,
                                                                                    dtype="float64")
    layer(x)
    size = x.shape[axis]
    gamma, beta = rng.uniform(0.5, 1.5, size), rng.normal(size=size)
    _set(layer, gamma=gamma) if rms else _set(layer, gamma=gamma, beta=beta)
    moved = np.moveaxis(x, axis, -1)
    want = np.moveaxis(reference.layer_norm_ref(moved, gamma, None if rms else beta, 1e-3, rms), -1, axis)
    np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-10, atol=1e-12)
    assert sorted(layer.params) == (["gamma"] if rms else ["beta", "gamma"])


@settings(max_examples=examples(10))
@given(groups=st.sampled_from([1, 2, 3, 6]), hw=st.lists(st.integers(1, 3), min_size=0, max_size=2),
       seed=st.integers(0, 2**31 - 1))
def test_group_norm_matches_the_reference(groups, hw, seed):  # (C,) samples too, as PyTorch's GroupNorm
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 2.0, (3, 6, *hw))
    layer = L.GroupNorm(groups, eps=1e-4, dtype="float64")
    layer(x)
    gamma, beta = rng.uniform(0.5, 1.5, 6), rng.normal(size=6)
    _set(layer, gamma=gamma, beta=beta)
    np.testing.assert_allclose(layer(x).numpy(), reference.group_norm_ref(x, groups, gamma, beta, 1e-4),
                               rtol=1e-10, atol=1e-12)


@settings(max_examples=examples(10))
@given(ids_shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 2**31 - 1))
def test_embedding_layer_picks_rows_of_any_id_shape(ids_shape, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 6, (2, *ids_shape))
    layer = L.Embedding(6, 3)
    y = layer(ids)
    assert y.shape == (*ids.shape, 3) and layer.output_shape == (*ids_shape, 3)
    table = layer.params["embeddings"].numpy()
    assert table.shape == (6, 3) and np.abs(table).max() <= 0.05  # Keras' uniform(-0.05, 0.05)
    np.testing.assert_array_equal(y.numpy(), reference.embedding_ref(table, ids).astype(np.float32))


# ------------------------------------------------------------------------------------------ models and files
def token_model(seed=0, vocab=9, t=6, classes=5):
    """Token ids (N, T) -> logits (N, T, classes) through every layer of this module."""
    x = L.Input((t,), dtype="int64")
    h = L.RMSNorm()(L.LayerNorm()(L.Embedding(vocab, classes)(x)))
    return models.Model(x, h, seed=seed)


def image_model(seed=0):
    x = L.Input((4, 3, 3))
    return models.Model(x, L.Dense(3)(L.Flatten()(L.GroupNorm(2)(x))), seed=seed)


def token_data(n=16, vocab=9, t=6, classes=5, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (n, t))
    return ids, (ids * 7 + 1) % classes  # learnable: the target is a function of the token


def test_integer_inputs_stay_integer_and_configs_round_trip():
    model = token_model()
    assert model.inputs[0].layer.dtype == np.int64
    ids, _ = token_data()
    out = model.predict(ids)
    assert out.shape == (16, 6, 5) and out.dtype == np.float32
    for layer in model.layers[1:]:
        config = layer.get_config()
        assert layer_class(type(layer).__name__).from_config(config).get_config() == config


def test_a_sequential_starting_with_embedding_builds_an_int64_input_from_its_data():
    model = models.Sequential([L.Embedding(9, 4), L.LayerNorm(), L.Flatten(), L.Dense(3)], seed=0)
    model.compile("sgd", "cross_entropy")
    ids, y = token_data()
    model.fit(ids, y[:, 0] % 3, batch_size=8, epochs=1, verbose=0)
    assert model.inputs[0].layer.dtype == np.int64 and model.predict(ids).shape == (16, 3)


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_save_load_round_trip(tmp_path, fmt):
    pytest.importorskip("safetensors") if fmt == "safetensors" else None
    ids, y = token_data()
    for model, x, loss, target in ((token_model(), ids, losses.SoftmaxCrossEntropy("mean", 0.1, 3), y),
                                   (image_model(), np.random.default_rng(1).normal(size=(8, 4, 3, 3)),
                                    "binary_cross_entropy", np.random.default_rng(2).uniform(0, 1, (8, 3)))):
        model.compile(optimizers.Adam(0.01, global_clipnorm=1.0), loss)
        model.fit(x, target, batch_size=4, epochs=1, verbose=0)
        path = model.save(tmp_path / f"{model.name}.{fmt}")
        loaded = models.load_model(path)
        np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
        assert loaded.get_config() == model.get_config()


# -------------------------------------------------------------------------------------------- losses vs PyTorch
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("ignore", [None, 2, -100])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 4)])
def test_cross_entropy_is_pytorchs(shape, reduction, ignore, smoothing):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(len(shape) + abs(ignore or 0))
    logits = rng.normal(0, 3, shape)
    labels = rng.integers(0, shape[-1], shape[:-1])
    if ignore is not None:
        labels.flat[::3] = ignore
    loss = losses.SoftmaxCrossEntropy(reduction if reduction != "none" else "mean", smoothing, ignore)
    got = F.cross_entropy(Tensor(logits), labels, reduction, smoothing, ignore).numpy()
    kwargs = {"reduction": reduction, "label_smoothing": smoothing, "ignore_index": -1000 if ignore is None
              else ignore}
    t_logits = torch.tensor(logits)
    want = torch.nn.functional.cross_entropy(t_logits if len(shape) == 2 else t_logits.permute(0, 2, 1),
                                             torch.tensor(labels), **kwargs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if reduction != "none":
        np.testing.assert_allclose(loss(Tensor(logits), labels).numpy(), want, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's 0 / 0
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_mean_of_only_ignored_tokens_is_nan_with_zero_gradients_as_pytorch(smoothing):
    labels = np.full((2, 3), 7)
    logits = Tensor(np.random.default_rng(3).normal(size=(2, 3, 4)), requires_grad=True)
    loss = F.cross_entropy(logits, labels, label_smoothing=smoothing, ignore_index=7)
    loss.backward()
    assert math.isnan(float(loss.numpy()))
    np.testing.assert_array_equal(logits.grad, np.zeros((2, 3, 4)))  # PyTorch's gradient: no label, no push


def test_binary_cross_entropy_is_pytorchs_and_stable():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits = np.concatenate([rng.normal(0, 4, 12), [-800.0, 800.0, -30.0, 40.0]]).reshape(4, 4)
    targets = np.concatenate([rng.uniform(0, 1, 12), [0.0, 1.0, 1.0, 0.0]]).reshape(4, 4)
    for reduction in ("mean", "sum", "none"):
        got = F.binary_cross_entropy_with_logits(Tensor(logits), targets, reduction).numpy()
        want = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(logits), torch.tensor(targets),
                                                                    reduction=reduction).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.isfinite(losses.BinaryCrossEntropy()(Tensor(logits.astype(np.float32)), targets).numpy())


# ------------------------------------------------------------------------------------------------- clipping
@pytest.mark.parametrize("option", ["clipnorm", "global_clipnorm"])
@pytest.mark.parametrize("scale", [1e-3, 10.0])
def test_clipping_scales_like_keras(option, scale):
    rng = np.random.default_rng(1)
    params = [Tensor(rng.normal(size=s), requires_grad=True) for s in ((3, 2), (4,))]
    grads = [rng.normal(size=p.shape) * scale for p in params]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    before = [p.numpy().copy() for p in params]
    optimizers.SGD(0.5, **{option: 1.0}).step(params)
    factors = ([reference.clip_scale_ref([g], 1.0) for g in grads] if option == "clipnorm"
               else [reference.clip_scale_ref(grads, 1.0)] * 2)
    for p, b, g, f in zip(params, before, grads, factors):
        np.testing.assert_allclose(p.numpy(), b - 0.5 * f * g, rtol=1e-12)
    assert (scale < 1) == all(f == 1.0 for f in factors)


# --------------------------------------------------------------------------- host vs simulated device, no reads
@pytest.fixture(scope="module", params=[pytest.param("device", marks=pytest.mark.native),
                                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device_backend(request):
    yield from open_backend(request.param)


RECIPES = {
    "tokens": (token_model, token_data, lambda: losses.SoftmaxCrossEntropy("mean", 0.1, 3),
               lambda: optimizers.Adam(0.02, global_clipnorm=0.5)),
    "groups": (image_model, lambda: (np.random.default_rng(3).normal(size=(16, 4, 3, 3)).astype(np.float32),
                                     np.random.default_rng(4).uniform(0, 1, (16, 3)).round(1)),
               lambda: "binary_cross_entropy", lambda: optimizers.SGD(0.1, momentum=0.9, clipnorm=0.3)),
}


def _train(recipe, device, steps=6):
    build, make_data, loss, optimizer = RECIPES[recipe]
    model = build(seed=5)
    model.compile(optimizer(), loss(), device=device)
    x, y = make_data()
    return [model.train_on_batch(x[:8], y[:8]) for _ in range(steps)], model  # one batch: the loss must fall


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_host_and_device_train_to_the_same_losses(recipe, device_backend):
    host_losses, host_model = _train(recipe, "host")
    device_losses, device_model = _train(recipe, device_backend)
    assert np.all(np.isfinite(host_losses)) and host_losses[-1] < host_losses[0]
    np.testing.assert_allclose(device_losses, host_losses, rtol=2e-4, atol=2e-5)
    for dw, hw in zip(device_model.get_weights(), host_model.get_weights(), strict=True):
        np.testing.assert_allclose(dw, hw, rtol=2e-3, atol=2e-4)


@pytest.mark.native
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_training_and_inference_never_read_the_device(recipe, monkeypatch):
    from pymagma import runtime, simulator

    build, make_data, loss, optimizer = RECIPES[recipe]
    with simulator.simulated():
        model = build(seed=1)
        model.compile(optimizer(), loss(), device="gpu",
                      metrics=[metrics.Accuracy(ignore_index=3)] if recipe == "tokens" else None)  # token accuracy
        model.progress_interval = math.inf
        x, y = make_data()
        reads = {"n": 0}
        original = runtime.memcpy_dtoh

        def counted(*args, **kwargs):
            reads["n"] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(runtime, "memcpy_dtoh", counted)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # 4 steps
        assert reads["n"] == 1, "training read the device more than once (the epoch's one tally read)"
        reads["n"] = 0
        model.evaluate(x, y, batch_size=4)
        assert reads["n"] == 1, "evaluate read the device more than once"


@pytest.mark.native
def test_token_cross_entropy_of_device_labels_reads_nothing(monkeypatch):
    from pymagma import runtime, simulator

    rng = np.random.default_rng(2)
    logits, labels = rng.normal(size=(3, 4, 5)).astype(np.float32), rng.integers(0, 5, (3, 4))
    labels[0, :2] = -1
    want = F.cross_entropy(Tensor(logits), labels, "mean", 0.2, -1).numpy()
    with simulator.simulated():
        gpu = backend.get("gpu")
        x = Tensor(gpu.asarray(logits), requires_grad=True, backend=gpu)
        y = gpu.asarray(labels)
        monkeypatch.setattr(runtime, "memcpy_dtoh", lambda *a, **k: pytest.fail("the loss read the device"))
        loss = F.cross_entropy(x, y, "mean", 0.2, -1, check_labels=False)
        loss.backward()
        monkeypatch.undo()
        np.testing.assert_allclose(loss.numpy(), want, rtol=1e-5)


# ----------------------------------------------------------------------------------- accuracy of token outputs
def _token_hits(scores, labels, ignore=None):
    """(hits, counted) by definition: a token counts unless its label is ``ignore``; a hit when the label is the
    first class of highest score."""
    hits = counted = 0
    for row, label in zip(scores.reshape(-1, scores.shape[-1]), labels.reshape(-1)):
        if label == ignore:
            continue
        counted += 1
        hits += int(label == min(i for i, v in enumerate(row) if v == row.max()))
    return hits, counted


@settings(max_examples=examples(20))
@given(n=st.integers(1, 4), t=st.integers(1, 4), c=st.integers(2, 5), ignore=st.sampled_from([None, -100, 0]),
       one_hot=st.booleans(), seed=st.integers(0, 2**31 - 1))  # one class: "accuracy" is binary accuracy (Keras)
def test_accuracy_of_token_outputs_counts_tokens(n, t, c, ignore, one_hot, seed):
    rng = np.random.default_rng(seed)
    scores = [rng.integers(-3, 4, (n, t, c)) / 2.0 for _ in range(2)]  # ties: the first highest class wins
    labels = [rng.integers(0, c, (n, t)) for _ in range(2)]
    if ignore is not None:
        labels[0][rng.random((n, t)) < 0.4] = ignore
        labels[1] = labels[0].copy()  # as many counted tokens in both batches: the figure is exact
    acc = metrics.Accuracy(ignore_index=ignore)
    for s, y in zip(scores, labels):
        acc.update(s, np.eye(c)[y] if one_hot and ignore is None else y, HOST)
    hits, counted = (sum(v) for v in zip(*(_token_hits(s, y, ignore) for s, y in zip(scores, labels))))
    assert acc.count == (2 * n if ignore is None else counted)
    if counted:
        assert acc.result() == pytest.approx(hits / counted, abs=1e-12)
    else:
        with pytest.raises(ValueError, match="ignore_index"):
            acc.result()


def test_token_accuracy_counts_tokens_over_batches_when_counts_differ():
    scores = np.eye(3)[[[0, 1], [2, 2]]]  # (2, 2, 3): predictions 0 1 / 2 2
    acc = metrics.Accuracy(ignore_index=-1)
    acc.update(scores, np.array([[0, -1], [-1, -1]]), HOST)  # 1 of 1 counted token
    acc.update(scores, np.array([[0, 0], [0, 2]]), HOST)  # 2 of 4
    assert acc.result() == pytest.approx(3 / 5)  # hits over every counted token, not a mean of batch figures


def test_fit_and_evaluate_report_token_accuracy_honoring_ignore_index():
    ids, labels = token_data(n=12)
    labels[::3, :2] = 3
    model = token_model(seed=2)
    model.compile("adam", losses.SoftmaxCrossEntropy(ignore_index=3), metrics=[metrics.Accuracy(ignore_index=3)])
    history = model.fit(ids, labels, batch_size=4, epochs=2, verbose=0)
    assert 0.0 <= history.history["accuracy"][-1] <= 1.0
    result = model.evaluate(ids, labels, batch_size=12, return_dict=True)  # one batch: exactly the token accuracy
    hits, counted = _token_hits(model.predict(ids), labels, 3)
    assert result["accuracy"] == pytest.approx(hits / counted, rel=1e-6)
    assert metrics.get(model.metrics[0].to_config()).ignore_index == 3  # what a checkpoint stores
