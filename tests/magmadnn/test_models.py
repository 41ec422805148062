"""Models: learning on generated data, functional graphs (residual, multi-input), summary, fit/evaluate/predict
behaviour and the bad-input errors of issue 2 item 9 that concern models."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import Tensor, no_grad
from magmadnn import layers as L
from magmadnn.callbacks import TerminateOnNaN
from magmadnn.data import DataLoader
from magmadnn.losses import MSE
from magmadnn.models import Model, NonFiniteLossError, Sequential

from ._gradcheck import numerical_gradient


def bars(n, seed=0, size=8, noise=0.35):
    """Images of one bar (row, column, diagonal or anti-diagonal) at a random place, plus noise; label = orientation."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    x = rng.normal(0.0, noise, size=(n, 1, size, size)).astype(np.float32)
    for i, label in enumerate(labels):
        k = rng.integers(1, size - 1)
        if label == 0:
            x[i, 0, k, :] += 1.0
        elif label == 1:
            x[i, 0, :, k] += 1.0
        elif label == 2:
            x[i, 0, np.arange(size), np.arange(size)] += 1.0
        else:
            x[i, 0, np.arange(size), size - 1 - np.arange(size)] += 1.0
    return x, labels


def small_cnn(seed=0, dropout=0.0):
    return Sequential([L.Input((1, 8, 8)), L.Conv2D(8, 3, padding="same", activation="relu"), L.BatchNorm(),
                       L.MaxPool2D(2), L.Flatten(), L.Dropout(dropout), L.Dense(4)], seed=seed)


def test_cnn_learns_bar_orientation_far_above_chance():
    x, y = bars(800, seed=1)
    xt, yt = bars(300, seed=2)
    model = small_cnn(seed=0, dropout=0.1)
    model.compile("adam", metrics=["accuracy"])
    model.optimizer.lr = 0.01
    history = model.fit(x, y, batch_size=32, epochs=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    result = model.evaluate(xt, yt, batch_size=100, return_dict=True)
    assert result["accuracy"] > 0.85, result  # chance is 0.25


def test_mlp_regression_with_mse():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    model = Sequential([L.Input((3,)), L.Dense(1)], seed=0)
    model.compile("sgd", loss="mse")
    model.optimizer.lr = 0.1
    history = model.fit(x, y, batch_size=32, epochs=20, verbose=0)
    assert history.history["loss"][-1] < 1e-3 * history.history["loss"][0]


def residual_two_input_model(dtype="float32"):
    a, b = L.Input((4,), name="a"), L.Input((3,), name="b")
    h = L.Dense(3, activation="tanh", name="proj")(a)
    merged = L.Add(name="residual")([h, b])
    out = L.Dense(2, name="head")(L.Activation("relu", name="act")(merged))
    return Model([a, b], out, seed=4, dtype=dtype)


def test_functional_residual_multi_input_forward_matches_numpy():
    model = residual_two_input_model()
    rng = np.random.default_rng(3)
    xa, xb = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    w1, b1, w2, b2 = (np.asarray(w, dtype=np.float64) for w in model.get_weights())
    expected = np.maximum(np.tanh(xa @ w1 + b1) + xb, 0) @ w2 + b2
    np.testing.assert_allclose(model.predict([xa, xb]), expected, rtol=1e-5, atol=1e-6)


def test_functional_model_gradients_through_residual_and_both_inputs():
    model = residual_two_input_model("float64")
    rng = np.random.default_rng(4)
    xa, xb = rng.normal(size=(3, 4)), rng.normal(size=(3, 3))
    ta, tb = Tensor(xa.copy(), requires_grad=True), Tensor(xb.copy(), requires_grad=True)
    u = rng.normal(size=(3, 2))
    model([ta, tb]).backward(u)

    def scalar(arrays):
        with no_grad():
            return float(np.sum(model([Tensor(arrays[0]), Tensor(arrays[1])]).numpy() * u))

    np.testing.assert_allclose(ta.grad, numerical_gradient(scalar, [xa, xb], 0), atol=1e-6)
    np.testing.assert_allclose(tb.grad, numerical_gradient(scalar, [xa, xb], 1), atol=1e-6)
    for param in model.parameters():
        np.testing.assert_allclose(param.grad, numerical_gradient(lambda _: scalar([xa, xb]), [param.data], 0),
                                   atol=1e-6, err_msg=param.name)


def test_functional_model_trains():
    model = residual_two_input_model()
    rng = np.random.default_rng(5)
    xa, xb = rng.normal(size=(200, 4)), rng.normal(size=(200, 3))
    y = (xa[:, 0] + xb[:, 1] > 0).astype(np.int64)
    model.compile("adam", metrics=["accuracy"])
    model.optimizer.lr = 0.05
    history = model.fit([xa, xb], y, batch_size=20, epochs=8, verbose=0)
    assert history.history["accuracy"][-1] > 0.85


def test_summary_lists_layers_shapes_and_counts(capsys):
    model = Sequential([L.Input((1, 8, 8), name="image"), L.Conv2D(4, 3, name="c1"), L.BatchNorm(name="bn"),
                        L.Flatten(name="flat"), L.Dense(10, name="out")], name="net")
    text = model.summary()
    assert text in capsys.readouterr().out
    conv, bn, dense = 1 * 4 * 9 + 4, 2 * 4, 4 * 6 * 6 * 10 + 10
    for row in (f"c1 (Conv2D)|(None, 4, 6, 6)|{conv}", f"bn (BatchNorm)|(None, 4, 6, 6)|{bn + 8}",
                "flat (Flatten)|(None, 144)|0", f"out (Dense)|(None, 10)|{dense:,}"):
        name, shape, count = row.split("|")
        line = next(li for li in text.splitlines() if li.startswith(name))
        assert shape in line and line.rstrip().endswith(count), line
    assert 'Model: "net"' in text and "image (Input)" not in text  # Keras lists no Input row in a Sequential
    assert f"Trainable params: {conv + bn + dense:,} ({(conv + bn + dense) * 4 / 1024:.2f} KB)" in text
    assert "Non-trainable params: 8 (32.00 B)" in text  # running mean and variance
    assert f"Total params: {conv + bn + dense + 8:,}" in text
    functional = residual_two_input_model().summary(print_fn=None)
    assert "Connected to" in functional
    assert next(li for li in functional.splitlines() if li.startswith("residual")).rstrip().endswith("b, proj")


def test_fit_history_validation_and_predict():
    x, y = bars(120, seed=3)
    model = small_cnn(seed=1)
    model.compile("sgd", metrics=["accuracy", "top2"])
    history = model.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "top2_accuracy", "val_accuracy", "val_loss",
                                       "val_top2_accuracy"]
    assert history.epoch == [0, 1] and all(len(v) == 2 for v in history.history.values())
    val = model.evaluate(x[90:], y[90:], return_dict=True)
    assert val["loss"] == pytest.approx(history.history["val_loss"][-1], rel=1e-5)
    pred = model.predict(x, batch_size=7)
    assert pred.shape == (120, 4) and pred.dtype == np.float32
    np.testing.assert_allclose(pred[:5], model(x[:5]).numpy(), rtol=1e-5, atol=1e-6)
    history = model.fit(x, y, batch_size=16, epochs=1, validation_data=(x[:10], y[:10]), verbose=0)
    assert "val_loss" in history.history


def test_fit_is_reproducible_from_the_seed():
    x, y = bars(96, seed=4)

    def train():
        model = small_cnn(seed=7, dropout=0.3)
        model.compile("adam")
        return model.fit(x, y, batch_size=16, epochs=2, verbose=0).history["loss"]

    assert train() == train()


def test_fit_accepts_a_dataloader_and_one_hot_labels():
    x, y = bars(64, seed=5)
    onehot = np.eye(4, dtype=np.float32)[y]
    model = small_cnn(seed=2)
    model.compile("sgd", metrics=["accuracy"])
    history = model.fit(DataLoader(x, onehot, batch_size=16, seed=0), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and 0.0 <= history.history["accuracy"][-1] <= 1.0


def test_progress_bar_reports_loss_metrics_and_throughput(capsys):
    x, y = bars(64, seed=6)
    model = small_cnn(seed=2)
    model.compile("sgd", metrics=["accuracy"])
    model.fit(x, y, batch_size=16, epochs=2, verbose=1)
    out = capsys.readouterr().out
    assert "Epoch 1/2" in out and "Epoch 2/2" in out
    assert "4/4 [" in out and "loss: " in out and "accuracy: " in out and "img/s" in out


def test_lazy_sequential_builds_on_first_data():
    model = Sequential([L.Flatten(), L.Dense(3)], seed=0)
    assert not model.built
    out = model.predict(np.ones((2, 2, 5)))
    assert out.shape == (2, 3) and model.layers[0].input_shape == (2, 5)


# ---------------------------------------------------------------------------------------------- bad input


def compiled(model=None, **kwargs):
    model = model or small_cnn(seed=0)
    model.compile("sgd", **kwargs)
    return model


def test_wrong_input_shape_and_rank():
    x, y = bars(8)
    with pytest.raises(L.ShapeMismatchError, match=r"expects batches of shape \(N, 1, 8, 8\).*\(8, 64\)"):
        compiled().fit(x.reshape(8, 64), y, verbose=0)
    with pytest.raises(L.ShapeMismatchError, match=r"\(N, 1, 8, 8\).*\(1, 8, 8\)"):
        compiled().predict(x[0])


def test_labels_out_of_range_wrong_dtype_and_length():
    x, y = bars(8)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\).*found label 4"):
        compiled().fit(x, np.where(y == 0, 4, y), verbose=0)
    with pytest.raises(ValueError, match=r"found label -1"):
        compiled().evaluate(x, y - 1)
    with pytest.raises(TypeError, match="integer class indices"):
        compiled().fit(x, y.astype(np.float32), verbose=0)
    with pytest.raises(ValueError, match="one-hot targets have 3 columns"):
        compiled().fit(x, np.eye(3)[y % 3], verbose=0)
    with pytest.raises(ValueError, match="x has 8 samples"):
        compiled().fit(x, y[:5], verbose=0)


def test_wrong_input_dtype():
    with pytest.raises(TypeError, match="real numbers.*<U"):
        compiled().fit(np.full((4, 1, 8, 8), "a"), np.zeros(4, dtype=int), verbose=0)
    with pytest.raises(TypeError, match="complex"):
        compiled().predict(np.zeros((4, 1, 8, 8), dtype=np.complex64))


def test_multi_input_count_mismatch():
    model = compiled(residual_two_input_model())
    with pytest.raises(ValueError, match=r"has 2 inputs \['a', 'b'\], got 1"):
        model.predict(np.ones((2, 4)))


def test_fit_before_compile_and_bad_arguments():
    x, y = bars(8)
    with pytest.raises(RuntimeError, match="compile"):
        small_cnn().fit(x, y)
    with pytest.raises(ValueError, match="batch_size"):
        compiled().fit(x, y, batch_size=0)
    with pytest.raises(ValueError, match="validation_split"):
        compiled().fit(x, y, validation_split=1.5)
    with pytest.raises(ValueError, match="unknown loss"):
        small_cnn().compile("sgd", loss="hinge")
    with pytest.raises(ValueError, match="unknown metric"):
        small_cnn().compile("sgd", metrics=["f1"])


def test_duplicate_layer_names_and_foreign_inputs():
    with pytest.raises(ValueError, match=r"unique.*'dup'"):
        Sequential([L.Input((3,)), L.Dense(3, name="dup"), L.Dense(3, name="dup")])
    a, b = L.Input((3,), name="used"), L.Input((3,), name="missing")
    with pytest.raises(ValueError, match="'missing'.*not among the model inputs"):
        Model(a, L.Add()([a, b]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_non_finite_loss_raises_without_terminate_on_nan():
    x, y = bars(32)
    x[20] = np.finfo(np.float32).max  # finite data (NaN data is rejected up front) that overflows
    model = compiled()
    model.fit(x[:16], y[:16], batch_size=16, epochs=1, shuffle=False, verbose=0)
    before = model.get_weights()
    with pytest.raises(NonFiniteLossError, match=r"loss became nan at epoch 1, batch 2.*TerminateOnNaN"):
        model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    after = model.get_weights()
    assert all(np.isfinite(w).all() for w in after)
    assert not np.array_equal(before[0], after[0])  # batch 1 was applied, batch 2 (NaN) was not


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_terminate_on_nan_stops_cleanly(capsys):
    x, y = bars(48)
    x[20] = -np.finfo(np.float32).max  # finite data (NaN data is rejected up front) that overflows
    model = compiled()
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, callbacks=[TerminateOnNaN()], verbose=0)
    assert model.stop_training and model.stop_reason.startswith("TerminateOnNaN: loss is nan at epoch 1, batch 2")
    assert capsys.readouterr().out == ""  # verbose=0 prints nothing
    assert len(history.epoch) == 1 and np.isnan(history.history["loss"][0])
    assert all(np.isfinite(w).all() for w in model.get_weights())
    model.fit(x, y, batch_size=16, epochs=3, shuffle=False, callbacks=[TerminateOnNaN()], verbose=2)
    assert capsys.readouterr().out.count("TerminateOnNaN: loss is nan at epoch 1, batch 2") == 1


def test_adding_a_layer_keeps_trained_weights():
    x, y = bars(32)
    model = small_cnn(seed=3)
    model.compile("sgd")
    model.fit(x, y, epochs=1, verbose=0)
    trained = model.get_weights()
    model.add(L.Activation("softmax"))
    for a, b in zip(model.get_weights(), trained):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"compile\(seed=3\) would re-initialise the weights .* reinitialize=True"):
        model.compile("sgd", seed=3)  # compile never destroys training silently
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), trained))
    model.compile("sgd", seed=3, reinitialize=True)  # explicitly: the initial weights of seed 3 again
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), small_cnn(seed=3).get_weights()))


def test_plain_python_lists_are_accepted_for_one_input():
    model = Sequential([L.Input((3,)), L.Dense(2)], seed=0)
    np.testing.assert_allclose(model.predict([[1.0, 2.0, 3.0]]), model.predict(np.array([[1.0, 2.0, 3.0]])))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_reported_loss_does_not_depend_on_batch_size(reduction):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 3)).astype(np.float32)
    y = rng.standard_normal((10, 2)).astype(np.float32)
    model = Sequential([L.Input((3,)), L.Dense(2)])
    model.compile(optimizer="sgd", loss=MSE(reduction=reduction), seed=0)
    pred = model.predict(x)
    per_element = (pred.astype(np.float64) - y) ** 2
    # reference written plainly: "mean" = mean over every element, "sum" = total over the data set
    expected = per_element.sum() if reduction == "sum" else per_element.mean()
    for batch_size in (3, 4, 10):
        loss = model.evaluate(x, y, batch_size=batch_size, return_dict=True)["loss"]
        assert loss == pytest.approx(expected, rel=1e-5)
