"""Day-one Keras programs written twice, once for Keras 3 (torch backend) and once for magmadnn, run side by side
from identical initial weights on the same data without shuffling: losses, metrics, history keys and values,
evaluate/predict returns and weights must agree, or magmadnn must raise a clear error naming the difference."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import callbacks as C
from magmadnn import layers as L
from pymagma import simulator
from tests.keras_reference import keras

K = keras.layers
RTOL, ATOL = 2e-4, 2e-5
RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 40)
YB = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)
YR = (X @ np.array([0.5, -1.0, 0.3, 0.2], np.float32) + 0.1).astype(np.float32)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=RTOL, atol=ATOL)


def same_weights(ours, theirs, to_keras=list):
    for a, b in zip(to_keras(ours.get_weights()), theirs.get_weights(), strict=True):
        close(a, b)


def twins(ours_layers, keras_layers, to_keras=list):
    """A magmadnn and a Keras Sequential built with model.add, Keras' weights set from magmadnn's."""
    ours, theirs = mdnn.Sequential(seed=0), keras.Sequential()
    for layer in ours_layers:
        ours.add(layer)
    for layer in keras_layers:
        theirs.add(layer)
    theirs.set_weights(to_keras(ours.get_weights()))
    return ours, theirs


def compile_both(ours, theirs, optimizer, loss, metrics=()):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.compile(optimizer=optimizer, loss=loss, metrics=list(metrics))
    theirs.compile(optimizer=optimizer, loss=loss, metrics=list(metrics))


def fit_both(ours, theirs, x, y, **kwargs):
    kwargs = {"epochs": 3, "batch_size": 16, "shuffle": False, "verbose": 0, **kwargs}
    mine, ref = ours.fit(x, y, **kwargs), theirs.fit(x, y, **kwargs)
    assert list(mine.history) == list(ref.history)  # the same keys in the same order
    for key in ref.history:
        close(mine.history[key], ref.history[key])
    assert mine.epoch == ref.epoch
    return mine, ref


def mlp(units, activation, hidden=8):
    return ([L.Input(shape=(4,)), L.Dense(hidden, activation="relu"), L.Dense(units, activation=activation)],
            [keras.Input(shape=(4,)), K.Dense(hidden, activation="relu"), K.Dense(units, activation=activation)])


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "rmsprop", "adamw", "adagrad"])
def test_softmax_sparse_ce_with_string_optimizers_and_validation_split(optimizer):
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, optimizer, "sparse_categorical_crossentropy", ["accuracy"])
    close(float(ours.optimizer.learning_rate), float(theirs.optimizer.learning_rate))
    fit_both(ours, theirs, X, Y, validation_split=0.25)
    same_weights(ours, theirs)
    loss, acc = ours.evaluate(X, Y, verbose=0)
    close([loss, acc], theirs.evaluate(X, Y, verbose=0))
    close(ours.predict(X, verbose=0), theirs.predict(X, verbose=0))


def test_one_hot_targets_categorical_ce_and_validation_data():
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "adam", "categorical_crossentropy", ["accuracy"])
    onehot = keras.utils.to_categorical(Y, 3)
    np.testing.assert_array_equal(onehot, np.eye(3, dtype=np.float32)[Y])  # the one-hot a magmadnn user writes
    fit_both(ours, theirs, X, np.eye(3, dtype=np.float32)[Y], validation_data=(X[:10], onehot[:10]))
    close(ours.evaluate(X, onehot, verbose=0), theirs.evaluate(X, onehot, verbose=0))


def test_sigmoid_binary_ce_accuracy_and_class_weight():
    ours, theirs = twins(*mlp(1, "sigmoid"))
    compile_both(ours, theirs, "rmsprop", "binary_crossentropy", ["accuracy"])
    fit_both(ours, theirs, X, YB, class_weight={0: 1.0, 1: 3.0}, validation_split=0.25)  # val_loss unweighted
    same_weights(ours, theirs)
    close(ours.evaluate(X, YB, verbose=0), theirs.evaluate(X, YB, verbose=0))
    assert ours.predict(X[:5], verbose=0).shape == theirs.predict(X[:5], verbose=0).shape == (5, 1)


def test_regression_with_mae_mse_metrics_and_the_evaluate_list_order():
    ours, theirs = twins(*mlp(1, None))
    compile_both(ours, theirs, "sgd", "mse", ["mae", "mse"])
    fit_both(ours, theirs, X, YR, epochs=2, validation_split=0.2)
    result = ours.evaluate(X, YR, verbose=0)
    assert isinstance(result, list) and len(result) == 3
    close(result, theirs.evaluate(X, YR, verbose=0))
    mine, ref = ours.evaluate(X, YR, return_dict=True), theirs.evaluate(X, YR, verbose=0, return_dict=True)
    assert list(mine) == list(ref)
    close(list(mine.values()), list(ref.values()))


def test_evaluate_without_metrics_is_the_scalar_loss_and_defaults_are_keras():
    ours, theirs = twins(*mlp(1, None))
    compile_both(ours, theirs, "adam", "mae")
    fit_both(ours, theirs, X, YR, epochs=1, batch_size=None)  # None means 32, as in Keras
    loss = ours.evaluate(X, YR, batch_size=None, verbose="auto", steps=None)
    assert isinstance(loss, float)
    close(loss, theirs.evaluate(X, YR, verbose=0))
    close(ours.evaluate(X, YR, batch_size=8, steps=2), theirs.evaluate(X, YR, batch_size=8, steps=2, verbose=0))
    close(ours.predict(X, batch_size=None, verbose=0, steps=None, callbacks=None), theirs.predict(X, verbose=0))


def test_on_batch_methods_return_as_keras():
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "sgd", "sparse_categorical_crossentropy", ["accuracy"])
    for start in (0, 10, 20):
        xb, yb = X[start:start + 10], Y[start:start + 10]
        close(ours.train_on_batch(xb, yb), theirs.train_on_batch(xb, yb))
    close(ours.test_on_batch(X, Y), theirs.test_on_batch(X, Y))
    mine, ref = ours.train_on_batch(X, Y, return_dict=True), theirs.train_on_batch(X, Y, return_dict=True)
    assert list(mine) == list(ref)
    close(ours.predict_on_batch(X[:3]), theirs.predict_on_batch(X[:3]))
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "sgd", "sparse_categorical_crossentropy")
    loss = ours.train_on_batch(X, Y)
    assert isinstance(loss, float)
    close(loss, theirs.train_on_batch(X, Y))
    close(ours.test_on_batch(X, Y), theirs.test_on_batch(X, Y))


def test_early_stopping_restores_the_best_weights_as_keras():
    ours, theirs = twins(*mlp(1, None))
    ours.compile(mdnn.optimizers.SGD(0.2), "mse")
    theirs.compile(keras.optimizers.SGD(0.2), "mse")
    stops = [cls(monitor="val_loss", patience=1, restore_best_weights=True) for cls in
             (C.EarlyStopping, keras.callbacks.EarlyStopping)]
    mine, ref = (m.fit(X, YR, epochs=12, batch_size=4, shuffle=False, verbose=0, validation_split=0.5,
                       callbacks=[s]) for m, s in zip((ours, theirs), stops))
    assert mine.epoch == ref.epoch and len(ref.epoch) < 12  # it stopped early
    close(mine.history["val_loss"], ref.history["val_loss"])
    assert stops[0].stopped_epoch == stops[1].stopped_epoch
    same_weights(ours, theirs)


def test_reduce_lr_on_plateau_and_the_history_learning_rate_key():
    ours, theirs = twins(*mlp(1, None))
    compile_both(ours, theirs, "adam", "mse")
    mine, ref = (m.fit(X, YR, epochs=4, batch_size=8, shuffle=False, verbose=0, validation_split=0.25,
                       callbacks=[cls(monitor="loss", factor=0.5, patience=0, min_delta=10.0)])
                 for m, cls in ((ours, C.ReduceLROnPlateau), (theirs, keras.callbacks.ReduceLROnPlateau)))
    assert list(mine.history) == list(ref.history)  # the same keys in the same order
    for key in ref.history:
        close(mine.history[key], ref.history[key])
    same_weights(ours, theirs)


def test_model_checkpoint_and_the_keras_file_format(tmp_path):
    ours, _ = twins(*mlp(3, "softmax"))
    ours.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    with pytest.raises(ValueError, match=r"\.keras.*safetensors|safetensors.*\.keras"):
        ours.save(tmp_path / "model.keras")
    with pytest.raises(ValueError, match=r"safetensors"):
        ours.fit(X, Y, epochs=1, verbose=0, callbacks=[C.ModelCheckpoint(str(tmp_path / "best.keras"))])
    path = tmp_path / "best.safetensors"
    ours.fit(X, Y, epochs=2, verbose=0, validation_split=0.25,
             callbacks=[C.ModelCheckpoint(str(path), monitor="val_loss", save_best_only=True, verbose=0)])
    loaded = mdnn.load_model(path)
    assert isinstance(loaded.evaluate(X, Y), list)
    ours.save(tmp_path / "last.safetensors")
    again = mdnn.models.load(tmp_path / "last.safetensors")
    close(again.predict(X), ours.predict(X))
    close(again.evaluate(X, Y), ours.evaluate(X, Y))


def test_freezing_a_layer_then_compile_summary_and_counts(capsys):
    ours, theirs = twins(*mlp(3, "softmax"))
    ours.layers[0].trainable = False
    theirs.layers[0].trainable = False
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])
    assert ours.count_params() == theirs.count_params()
    assert len(ours.trainable_weights) == len(theirs.trainable_weights) == 2
    assert len(ours.non_trainable_weights) == len(theirs.non_trainable_weights) == 2
    assert len(ours.layers) == len(theirs.layers) == 2
    frozen = [w.copy() for w in ours.layers[0].get_weights()]
    fit_both(ours, theirs, X, Y, epochs=2)
    for a, b in zip(frozen, ours.layers[0].get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    same_weights(ours, theirs)
    lines = []
    theirs.summary(print_fn=lambda text, line_break=None: lines.append(text))
    capsys.readouterr()
    ours.summary()
    totals = [line.strip() for line in capsys.readouterr().out.splitlines() if "params:" in line]
    assert totals == [line.strip() for line in "\n".join(lines).splitlines() if "params:" in line]


def test_get_and_set_weights_round_trip():
    ours, theirs = twins(*mlp(3, "softmax"))
    weights = [w + 0.5 for w in theirs.get_weights()]
    ours.set_weights(weights)
    theirs.set_weights(weights)
    close(ours.predict(X), theirs.predict(X, verbose=0))
    assert [w.shape for w in ours.get_weights()] == [tuple(w.shape) for w in theirs.get_weights()]
    ours.layers[1].set_weights(theirs.layers[1].get_weights())


def test_batch_normalization_and_dropout_in_an_mlp():
    ours, theirs = twins([L.Input((4,)), L.Dense(8), L.BatchNormalization(), L.Activation("relu"),
                          L.Dense(3, activation="softmax")],
                         [keras.Input((4,)), K.Dense(8), K.BatchNormalization(), K.Activation("relu"),
                          K.Dense(3, activation="softmax")])
    compile_both(ours, theirs, "sgd", "sparse_categorical_crossentropy", ["accuracy"])  # (Adam would amplify
    assert ours.count_params() == theirs.count_params()  # the rounding noise of the bias before the BatchNorm)
    fit_both(ours, theirs, X, Y, epochs=2)
    same_weights(ours, theirs)
    close(ours.predict(X), theirs.predict(X, verbose=0))
    drop_ours, drop_theirs = twins([L.Input((4,)), L.Dense(8, activation="relu"), L.Dropout(0.5), L.Dense(3)],
                                   [keras.Input((4,)), K.Dense(8, activation="relu"), K.Dropout(0.5), K.Dense(3)])
    close(drop_ours.predict(X), drop_theirs.predict(X, verbose=0))  # inference: no dropout


def _gru_to_keras(weights):
    """magmadnn's GRU gate blocks (r, z, n) -> Keras' (z, r, h), both biases stacked (reset_after=True)."""
    def order(a):
        r, z, n = np.split(a, 3, axis=-1)
        return np.concatenate([z, r, n], axis=-1)
    emb, kernel, recurrent, bias, recurrent_bias, *rest = weights
    return [emb, order(kernel), order(recurrent), np.stack([order(bias), order(recurrent_bias)]), *rest]


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_embedding_recurrent_dense_text_classifier(cell):
    ids = RNG.integers(1, 20, (24, 6))
    labels = (ids[:, 0] > 10).astype(np.float32)
    ours, theirs = twins([L.Input((6,), dtype="int64"), L.Embedding(20, 5), getattr(L, cell)(4),
                          L.Dense(1, activation="sigmoid")],
                         [keras.Input((6,), dtype="int32"), K.Embedding(20, 5), getattr(K, cell)(4),
                          K.Dense(1, activation="sigmoid")],
                         to_keras=_gru_to_keras if cell == "GRU" else list)
    compile_both(ours, theirs, "adam", "binary_crossentropy", ["accuracy"])
    fit_both(ours, theirs, ids, labels, epochs=2, batch_size=8)
    close(ours.evaluate(ids, labels), theirs.evaluate(ids, labels, verbose=0))


def test_conv1d_global_max_pooling_sequence_classifier():
    seq = RNG.standard_normal((16, 10, 3)).astype(np.float32)
    labels = RNG.integers(0, 2, 16)
    ours, theirs = twins([L.Input((10, 3)), L.Conv1D(4, 3, activation="relu"), L.GlobalMaxPooling1D(),
                          L.Dense(2, activation="softmax")],
                         [keras.Input((10, 3)), K.Conv1D(4, 3, activation="relu"), K.GlobalMaxPooling1D(),
                          K.Dense(2, activation="softmax")],
                         to_keras=lambda ws: [w.transpose(2, 1, 0) if w.ndim == 3 else w for w in ws])
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])
    fit_both(ours, theirs, seq, labels, epochs=2, batch_size=8)


def test_a_custom_layer_and_a_custom_callback():
    def make(base_layer, base_callback, dense):
        class Scale(base_layer):
            def build(self, input_shape):
                self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", trainable=True, name="w")

            def call(self, inputs):
                return inputs * self.w

        class Record(base_callback):
            def __init__(self):
                super().__init__()
                self.seen = []

            def on_epoch_end(self, epoch, logs=None):
                self.seen.append((epoch, list(logs)))

        return Scale(), Record()

    scale_ours, record_ours = make(L.Layer, C.Callback, L.Dense)
    scale_theirs, record_theirs = make(K.Layer, keras.callbacks.Callback, K.Dense)
    ours, theirs = twins([L.Input((4,)), scale_ours, L.Dense(1)], [keras.Input((4,)), scale_theirs, K.Dense(1)])
    compile_both(ours, theirs, "sgd", "mse", ["mae"])
    mine = ours.fit(X, YR, epochs=2, batch_size=10, shuffle=False, verbose=0, callbacks=[record_ours])
    ref = theirs.fit(X, YR, epochs=2, batch_size=10, shuffle=False, verbose=0, callbacks=[record_theirs])
    assert record_ours.seen == record_theirs.seen
    close(mine.history["loss"], ref.history["loss"])
    same_weights(ours, theirs)


def test_functional_model_with_input_shape():
    inputs = L.Input(shape=(4,))
    hidden = L.Dense(8, activation="relu")(inputs)
    ours = mdnn.Model(inputs, L.Dense(3, activation="softmax")(hidden))
    k_inputs = keras.Input(shape=(4,))
    theirs = keras.Model(k_inputs, K.Dense(3, activation="softmax")(K.Dense(8, activation="relu")(k_inputs)))
    theirs.set_weights(ours.get_weights())
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])
    fit_both(ours, theirs, X, Y, epochs=2)
    assert ours.count_params() == theirs.count_params()


def test_first_layer_input_shape_build_with_the_batch_axis_and_learning_rate_assignment():
    ours = mdnn.Sequential([L.Dense(8, activation="relu", input_shape=(4,)), L.Dense(1)], seed=0)
    theirs = keras.Sequential([K.Dense(8, activation="relu", input_shape=(4,)), K.Dense(1)])
    theirs.set_weights(ours.get_weights())
    built = mdnn.Sequential([L.Dense(8), L.Dense(1)])
    built.build((None, 4))  # Keras' form, the batch axis first
    assert built.count_params() == ours.count_params() == theirs.count_params()
    compile_both(ours, theirs, "adam", "mse")
    ours.optimizer.learning_rate = 0.01
    theirs.optimizer.learning_rate = 0.01
    fit_both(ours, theirs, X, YR, epochs=2)
    same_weights(ours, theirs)


def test_save_weights_and_load_weights(tmp_path):
    ours, _ = twins(*mlp(3, "softmax"))
    path = ours.save_weights(tmp_path / "w.safetensors")
    other, _ = twins(*mlp(3, "softmax"))
    other.set_weights([w + 1 for w in other.get_weights()])
    other.load_weights(path)
    for a, b in zip(ours.get_weights(), other.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="safetensors"):
        ours.save_weights(tmp_path / "w.weights.h5")


@pytest.mark.parametrize(("make", "words"), [
    (lambda: L.BatchNormalization(kernel_regularizer="l2"), ["kernel_regularizer", "Dense", "weight_decay"]),
    (lambda: L.LSTM(3, dropout=0.2), ["dropout", "Dropout layer"]),
    (lambda: L.Masking(), ["Masking", "Embedding(mask_zero=True)"]),
    (lambda: L.ReLU(), ["ReLU", 'Activation("relu")']),
    (lambda: mdnn.optimizers.get("nadam"), ["nadam", "adam"]),
    (lambda: mdnn.optimizers.Adam(amsgrad=True), ["amsgrad=True", "default False"]),
    (lambda: mdnn.optimizers.SGD(use_ema=True), ["use_ema=True", "default False"]),
    (lambda: mdnn.losses.get("hinge"), ["hinge", "categorical_crossentropy"]),
])
def test_keras_names_magmadnn_lacks_are_clear_errors(make, words):
    with pytest.raises((TypeError, AttributeError, ValueError)) as error:
        make()
    assert all(word in str(error.value) for word in words), str(error.value)


def test_keras_long_names_of_the_2d_pooling_layers():
    assert L.MaxPooling2D is L.MaxPool2D and L.AveragePooling2D is L.AvgPool2D
    assert L.GlobalAveragePooling2D is L.GlobalAvgPool2D and L.GlobalMaxPooling2D is L.GlobalMaxPool2D


def test_sample_weight_learning_rate_scheduler_and_loss_aliases():
    ours, theirs = twins(*mlp(1, None))
    compile_both(ours, theirs, "sgd", "mean_squared_error", ["mean_absolute_error"])
    weights = np.linspace(0.5, 2.0, 40).astype(np.float32)
    mine, ref = (m.fit(X, YR, epochs=3, batch_size=10, shuffle=False, verbose=0, sample_weight=weights,
                       callbacks=[cls(lambda epoch, lr: lr * 0.5)])
                 for m, cls in ((ours, C.LearningRateScheduler), (theirs, keras.callbacks.LearningRateScheduler)))
    assert list(mine.history) == list(ref.history)
    for key in ref.history:
        close(mine.history[key], ref.history[key])
    same_weights(ours, theirs)
    close(ours.evaluate(X, YR, sample_weight=weights), theirs.evaluate(X, YR, sample_weight=weights, verbose=0))


@pytest.mark.parametrize("spec", [
    ("SGD", {"learning_rate": 0.05, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"learning_rate": 0.01, "clipnorm": 1.0}),
    ("Adam", {"learning_rate": 0.01, "amsgrad": False, "global_clipnorm": 0.5}),  # Keras' defaults are accepted
    ("RMSprop", {"learning_rate": 0.01, "momentum": 0.5, "rho": 0.8}),
    ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1}),
])
def test_optimizer_objects_with_keras_arguments(spec):
    name, kwargs = spec
    ours, theirs = twins(*mlp(3, "softmax"))
    ours.compile(optimizer=getattr(mdnn.optimizers, name)(**kwargs), loss="sparse_categorical_crossentropy",
                 metrics=["accuracy"])
    theirs.compile(optimizer=getattr(keras.optimizers, name)(**kwargs), loss="sparse_categorical_crossentropy",
                   metrics=["accuracy"])
    fit_both(ours, theirs, X, Y, epochs=2, batch_size=8)
    same_weights(ours, theirs)


def test_label_shapes_and_dtypes_keras_accepts():
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])
    fit_both(ours, theirs, X, Y.reshape(-1, 1), epochs=1)  # (N, 1) integer labels
    fit_both(ours, theirs, X, Y.astype(np.float32), epochs=1)  # float labels
    ours, theirs = twins(*mlp(1, "sigmoid"))
    compile_both(ours, theirs, "adam", "binary_crossentropy", ["accuracy"])
    fit_both(ours, theirs, X, YB.astype(np.int64), epochs=1, validation_data=(X[:8], YB[:8], np.ones(8)))


def test_a_two_input_functional_model_with_concatenate():
    a, b = L.Input(shape=(4,)), L.Input(shape=(2,))
    ours = mdnn.Model([a, b], L.Dense(1)(L.Concatenate()([L.Dense(3, activation="relu")(a), b])))
    ka, kb = keras.Input(shape=(4,)), keras.Input(shape=(2,))
    theirs = keras.Model([ka, kb], K.Dense(1)(K.Concatenate()([K.Dense(3, activation="relu")(ka), kb])))
    theirs.set_weights(ours.get_weights())
    compile_both(ours, theirs, "adam", "mse", ["mae"])
    fit_both(ours, theirs, [X, X[:, :2] * 2], YR, epochs=2)
    close(ours.predict([X, X[:, :2]]), theirs.predict([X, X[:, :2]], verbose=0))


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    if request.param == "simulator":
        with simulator.simulated("full"):
            yield "gpu"
    else:
        yield request.param


def test_keras_return_rules_on_the_device_match_keras(device):
    """train_on_batch with metrics tallies on the device; (N, 1) class indices; the figures are Keras'."""
    ours, theirs = twins(*mlp(3, "softmax"))
    ours.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"], device=device)
    theirs.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    column = Y.reshape(-1, 1)
    for start in (0, 20):
        close(ours.train_on_batch(X[start:start + 20], column[start:start + 20]),
              theirs.train_on_batch(X[start:start + 20], column[start:start + 20]))
    fit_both(ours, theirs, X, column, epochs=1, batch_size=8)
    close(ours.evaluate(X, column, batch_size=16), theirs.evaluate(X, column, batch_size=16, verbose=0))
    close(ours.test_on_batch(X, Y), theirs.test_on_batch(X, Y))
    same_weights(ours, theirs)


def test_flatten_mlp_on_small_images_and_layer_weight_attributes():
    images = RNG.random((24, 5, 6)).astype(np.float32)
    labels = RNG.integers(0, 4, 24)
    ours, theirs = twins([L.Input((5, 6)), L.Flatten(), L.Dense(16, activation="relu"),
                          L.Dense(4, activation="softmax")],
                         [keras.Input((5, 6)), K.Flatten(), K.Dense(16, activation="relu"),
                          K.Dense(4, activation="softmax")])
    close(ours.layers[1].kernel.numpy(), theirs.layers[1].kernel.numpy())
    close(ours.layers[2].bias.numpy(), theirs.layers[2].bias.numpy())
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])
    fit_both(ours, theirs, images, labels, epochs=2, batch_size=8, validation_split=0.25)
    np.testing.assert_array_equal(ours.predict(images).argmax(axis=1), theirs.predict(images, verbose=0).argmax(axis=1))


def test_embedding_global_average_pooling_text_classifier():
    ids = RNG.integers(0, 30, (24, 7))
    labels = (ids.mean(axis=1) > 15).astype(np.float32)
    ours, theirs = twins([L.Input((7,), dtype="int64"), L.Embedding(30, 4), L.GlobalAveragePooling1D(),
                          L.Dense(1, activation="sigmoid")],
                         [keras.Input((7,), dtype="int32"), K.Embedding(30, 4), K.GlobalAveragePooling1D(),
                          K.Dense(1, activation="sigmoid")])
    close(ours.layers[0].embeddings.numpy(), theirs.layers[0].embeddings.numpy())
    compile_both(ours, theirs, "adam", "binary_crossentropy", ["accuracy"])
    fit_both(ours, theirs, ids, labels, epochs=3, batch_size=8, validation_data=(ids[:6], labels[:6]))


def test_a_model_inside_a_model_shares_its_layers_and_channels_last_images_are_clear_errors():
    base = mdnn.Sequential([L.Input((4,)), L.Dense(5, activation="relu")])
    assert mdnn.Sequential([base, L.Dense(3)]).layers[0] is base.layers[0]
    assert base(L.Input((4,))).layer is base.layers[0]
    with pytest.raises(TypeError, match="built Sequential.*outputs = model\\(inputs\\)"):
        mdnn.Sequential([mdnn.Sequential([L.Dense(2)]), L.Dense(3)])
    with pytest.raises(ValueError, match="NCHW"):
        mdnn.Sequential([L.Input((8, 8, 1)), L.Conv2D(4, 3), L.Flatten(), L.Dense(2)])


def test_lambda_callback_as_keras():
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "sgd", "sparse_categorical_crossentropy", ["accuracy"])
    seen = {"ours": [], "keras": []}
    for name, model, cls in (("ours", ours, C.LambdaCallback), ("keras", theirs, keras.callbacks.LambdaCallback)):
        record = seen[name]
        model.fit(X, Y, epochs=2, batch_size=20, shuffle=False, verbose=0, callbacks=[cls(
            on_train_begin=lambda logs, r=record: r.append(("begin", 0, 0.0)),
            on_epoch_end=lambda epoch, logs, r=record: r.append(("epoch", epoch, logs["loss"])),
            on_train_batch_end=lambda batch, logs, r=record: r.append(("batch", batch, logs["accuracy"])))])
    assert [r[:2] for r in seen["ours"]] == [r[:2] for r in seen["keras"]]
    close([r[2] for r in seen["ours"]], [r[2] for r in seen["keras"]])
    with pytest.raises(TypeError, match="not a callback hook"):
        C.LambdaCallback(on_epoch_finish=print)


def test_stacked_lstm_sequence_regression_with_loss_class_names():
    seq = RNG.standard_normal((12, 5, 3)).astype(np.float32)
    target = seq.cumsum(axis=1)[:, :, :1]
    ours, theirs = twins([L.Input((5, 3)), L.LSTM(4, return_sequences=True), L.LSTM(4, return_sequences=True),
                          L.Dense(1)],
                         [keras.Input((5, 3)), K.LSTM(4, return_sequences=True), K.LSTM(4, return_sequences=True),
                          K.Dense(1)])
    compile_both(ours, theirs, "Adam", "MeanSquaredError", ["mae"])
    fit_both(ours, theirs, seq, target, epochs=2, batch_size=4)
    close(ours.predict(seq), theirs.predict(seq, verbose=0))


def test_conv1d_max_pooling_flatten_dense():
    seq = RNG.standard_normal((16, 12, 2)).astype(np.float32)
    labels = (seq[:, :, 0].sum(axis=1) > 0).astype(np.float32)
    ours, theirs = twins([L.Input((12, 2)), L.Conv1D(3, 3, padding="same", activation="relu"), L.MaxPooling1D(2),
                          L.Flatten(), L.Dense(1, activation="sigmoid")],
                         [keras.Input((12, 2)), K.Conv1D(3, 3, padding="same", activation="relu"), K.MaxPooling1D(2),
                          K.Flatten(), K.Dense(1, activation="sigmoid")],
                         to_keras=lambda ws: [w.transpose(2, 1, 0) if w.ndim == 3 else w for w in ws])
    compile_both(ours, theirs, "rmsprop", "binary_crossentropy", ["accuracy"])
    fit_both(ours, theirs, seq, labels, epochs=2, batch_size=8, validation_split=0.25)
    close(ours.predict(seq), theirs.predict(seq, verbose=0))


def test_keras_arguments_at_their_defaults_are_accepted_and_others_name_the_default():
    layers = [L.Input(shape=(5, 3), batch_size=None, sparse=False),
              L.LSTM(4, activation="tanh", recurrent_activation="sigmoid", dropout=0.0, unroll=False),
              L.BatchNormalization(center=True, scale=True), L.Dropout(0.1, noise_shape=None),
              L.Dense(2, kernel_regularizer=None)]
    assert mdnn.Sequential(layers).count_params() == keras.Sequential(
        [keras.Input((5, 3)), K.LSTM(4), K.BatchNormalization(), K.Dropout(0.1), K.Dense(2)]).count_params()
    with pytest.raises(TypeError, match=r"activation='relu' is not supported; only Keras' default activation='tanh'"):
        L.LSTM(4, activation="relu")
    assert L.Input(shape=(4,), batch_size=8).batch_size == keras.Input(shape=(4,), batch_size=8).shape[0] == 8


@pytest.mark.parametrize("pattern", ["trained base, new head", "built on data", "Sequential of built layers",
                                     "assigned, then in a model"])
def test_a_layer_keeps_its_weights_when_a_model_takes_it(pattern):
    """Transfer learning: a layer that already holds weights (trained in one model, built by a call on data, or
    given set_weights) keeps them in the next model that uses it, as in Keras, in which each pattern is run too."""

    def run(lib, Layers, make_model, seq, fit):
        layer = Layers.Dense(5, name="h")
        if pattern == "trained base, new head":
            inp = lib.Input((4,))
            hidden = layer(inp)
            base = make_model(inp, Layers.Dense(3)(hidden))
            base.compile("sgd", "mse")
            fit(base)
            before = layer.get_weights()
            make_model(inp, Layers.Dense(2)(hidden))
        else:
            if pattern == "assigned, then in a model":
                inp = lib.Input((4,))
                layer(inp)
                layer.set_weights([np.full((4, 5), 0.25, np.float32), np.arange(5, dtype=np.float32)])
            else:
                layer(X[:2])
            before = layer.get_weights()
            if pattern == "Sequential of built layers":
                seq([lib.Input((4,)), layer, Layers.Dense(2)])
            else:
                inp = lib.Input((4,))
                make_model(inp, Layers.Dense(2)(layer(inp)))
        return [np.array_equal(a, b) for a, b in zip(before, layer.get_weights(), strict=True)]

    theirs = run(keras, K, lambda i, o: keras.Model(i, o), keras.Sequential,
                 lambda m: m.fit(X, YR[:, None].repeat(3, 1), epochs=1, verbose=0))
    ours = run(L, L, lambda i, o: mdnn.Model(i, o), mdnn.Sequential,
               lambda m: m.fit(X, YR[:, None].repeat(3, 1), epochs=1, verbose=0))
    assert theirs == [True, True]
    assert ours == theirs


@pytest.mark.parametrize("kind", ["functional", "Sequential"])
def test_feature_extractor_from_layer_outputs(kind):
    """Keras' transfer-learning idiom: ``Model(base.input, base.get_layer(name).output)`` and a new head on it,
    written for both libraries; the extractor gives the hidden layer's values and shares the base's weights."""

    def run(lib, Layers, make_model, seq):
        if kind == "functional":
            inp = lib.Input((4,))
            base = make_model(inp, Layers.Dense(3, name="out")(Layers.Dense(5, activation="relu", name="h")(inp)))
        else:
            base = seq([lib.Input((4,)), Layers.Dense(5, activation="relu", name="h"), Layers.Dense(3, name="out")])
        base.get_layer("h").set_weights([np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5),
                                         np.full(5, 0.1, np.float32)])
        # Keras' Sequential on the torch backend has inputs and outputs but no input and output
        ins, out = (base.input, base.output) if kind == "functional" else (base.inputs[0], base.outputs[0])
        extractor = make_model(ins, base.get_layer("h").output)
        head = make_model(ins, Layers.Dense(2, name="new")(base.get_layer("h").output))
        assert base.get_layer("h").input is ins and base.get_layer("out").output is out
        with pytest.raises(AttributeError, match="output"):
            Layers.Dense(2).output  # noqa: B018 (never called: no output, in both)
        return np.asarray(extractor.predict(X, verbose=0)), head.get_layer("h") is base.get_layer("h")

    theirs = run(keras, K, lambda i, o: keras.Model(i, o), keras.Sequential)
    ours = run(L, L, lambda i, o: mdnn.Model(i, o), mdnn.Sequential)
    close(ours[0], theirs[0])
    assert ours[1] and theirs[1]


def test_compile_seed_refuses_a_model_made_of_trained_layers():
    """compile(seed=) re-draws only a fresh model: a new head on a trained base is refused, not silently reset."""
    base = mdnn.Sequential([L.Input((4,)), L.Dense(5, name="h"), L.Dense(3)], seed=0)
    base.compile("sgd", "mse")
    base.fit(X, YR[:, None].repeat(3, 1), epochs=1, verbose=0)
    trained = base.get_layer("h").get_weights()
    head = mdnn.Model(base.input, L.Dense(2)(base.get_layer("h").output))
    with pytest.raises(ValueError, match="holds layers trained in another model"):
        head.compile("sgd", "mse", seed=0)
    head.compile("sgd", "mse")
    for a, b in zip(trained, base.get_layer("h").get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    inp = L.Input((4,))  # fresh layers shared by two fresh models: seed= still allowed
    hidden = L.Dense(5)(inp)
    mdnn.Model(inp, hidden)
    mdnn.Model(inp, L.Dense(2)(hidden)).compile("sgd", "mse", seed=3)
