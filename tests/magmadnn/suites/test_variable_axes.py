"""Axes known only at run time (None) through every layer that can take one, checked against real Keras 3 from
identical weights at two lengths; summary prints None; errors name the layer; batches of few shapes bound the
captured graphs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras

K = keras.layers
RNG = np.random.default_rng(9)


def _seq(n, t, f=3):
    return RNG.standard_normal((n, t, f)).astype(np.float32)


# name: (our layers, Keras layers, input shape, data at two lengths)
CASES = {
    "lstm": ([L.LSTM(4, return_sequences=True), L.LSTM(3)], [K.LSTM(4, return_sequences=True), K.LSTM(3)],
             (None, 3), (_seq(2, 5), _seq(2, 9))),
    "conv1d_pool": ([L.Conv1D(4, 3, padding="same"), L.MaxPooling1D(2), L.Conv1D(2, 2),
                     L.GlobalAveragePooling1D()],
                    [K.Conv1D(4, 3, padding="same"), K.MaxPooling1D(2), K.Conv1D(2, 2), K.GlobalAveragePooling1D()],
                    (None, 3), (_seq(2, 6), _seq(2, 11))),
    "dense_norm": ([L.Dense(4), L.LayerNormalization()], [K.Dense(4), K.LayerNormalization()], (None, 3),
                   (_seq(2, 4), _seq(2, 7))),
    "embedding": ([L.Embedding(12, 4), L.GlobalMaxPooling1D()], [K.Embedding(12, 4), K.GlobalMaxPooling1D()],
                  (None,), (RNG.integers(0, 12, (2, 5)), RNG.integers(0, 12, (2, 8)))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layers_take_axes_known_at_run_time_as_keras(name):
    ours_layers, keras_layers, shape, (short, long) = CASES[name]
    ids = short.dtype.kind in "iu"
    ours = mdnn.Sequential([L.Input(shape, dtype="int64" if ids else None), *ours_layers], seed=0)
    theirs = keras.Sequential([keras.Input(shape, dtype="int32" if ids else "float32"), *keras_layers])
    theirs.set_weights([w.transpose(2, 1, 0) if w.ndim == 3 else w for w in ours.get_weights()])  # Conv1D's kernel
    for x in (short, long):
        np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-4, atol=1e-5)
    assert "(None, None, " in ours.summary(print_fn=None)  # Keras' form: batch and time None


def test_images_of_any_size_and_attention_with_a_mask():
    image = L.Input((2, None, None))
    conv = L.Conv2D(3, 3, padding="same", activation="relu")
    model = mdnn.Model(image, L.GlobalAveragePooling2D()(L.MaxPooling2D(2)(conv(image))), seed=0)
    k_in = keras.Input((None, None, 2))
    k_conv = K.Conv2D(3, 3, padding="same", activation="relu")
    theirs = keras.Model(k_in, K.GlobalAveragePooling2D()(K.MaxPooling2D(2)(k_conv(k_in))))
    k_conv.set_weights([conv.get_weights()[0].transpose(2, 3, 1, 0), conv.get_weights()[1]])
    for h, w in ((6, 6), (8, 10)):
        x = RNG.random((2, 2, h, w)).astype(np.float32)
        np.testing.assert_allclose(model.predict(x), theirs.predict(x.transpose(0, 2, 3, 1), verbose=0), rtol=1e-4,
                                   atol=1e-5)
    tokens = L.Input((None,), dtype="int64")
    h = L.Embedding(10, 4, mask_zero=True)(tokens)
    attended = L.MultiHeadAttention(2, 2)([h, h])
    seq = mdnn.Model(tokens, L.GlobalAveragePooling1D()(attended), seed=1)
    for t in (4, 7):
        ids = RNG.integers(1, 10, (3, t))
        ids[:, -1] = 0  # padding the mask hides
        assert seq.predict(ids).shape == (3, 4)


def test_training_with_run_time_axes_and_the_errors():
    model = mdnn.Sequential([L.Input((None, 3)), L.LSTM(4, return_sequences=True), L.Dense(2)], seed=0)
    model.compile("adam", "mse", metrics=["mae"])
    history = model.fit(_seq(8, 5), RNG.standard_normal((8, 5, 2)), batch_size=4, verbose=0).history
    assert np.isfinite(history["loss"][0]) and np.isfinite(history["mae"][0])
    model.evaluate(_seq(4, 9), RNG.standard_normal((4, 9, 2)))
    with pytest.raises(mdnn.layers.ShapeMismatchError, match="Conv1D layer .* features known"):
        mdnn.Sequential([L.Input((5, None)), L.Conv1D(2, 2)])
    with pytest.raises(mdnn.layers.ShapeMismatchError, match="Conv2D layer .* channels C known"):
        mdnn.Sequential([L.Input((None, 5, 5)), L.Conv2D(2, 2)])
    with pytest.raises(mdnn.layers.ShapeMismatchError, match="Flatten|known only at run time"):
        mdnn.Sequential([L.Input((None, 3)), L.Flatten(), L.Dense(2)])


def test_length_buckets_bound_the_batch_shapes():
    sequences = [RNG.integers(1, 9, t) for t in RNG.integers(1, 30, 40)]
    labels = RNG.integers(0, 2, 40).astype(np.float32)
    buckets = mdnn.data.LengthBuckets(sequences, labels, batch_size=8, multiple=8)
    assert len(buckets) == 5 and set(buckets.lengths) <= {8, 16, 24, 32}
    seen = []
    for x, y in buckets:
        seen.append(x.shape[1])
        assert x.shape[1] % 8 == 0 and y.shape == (x.shape[0],)
    assert sorted(seen) == sorted(buckets.lengths)
    first = buckets.batches[0][0]
    x0 = next(x for x, _ in mdnn.data.LengthBuckets(sequences, labels, 8, 8, shuffle=False))
    np.testing.assert_array_equal(x0[0, :len(sequences[first])], sequences[first])
    assert not x0[0, len(sequences[first]):].any()
    padded = mdnn.data.pad_to_multiple(np.ones((2, 5, 3)), 4)
    assert padded.shape == (2, 8, 3) and padded[:, 5:].sum() == 0
    with pytest.raises(ValueError, match="one target per sequence"):
        mdnn.data.LengthBuckets(sequences, labels[:3])


def test_replay_keeps_one_graph_per_padded_length():
    from magmadnn.models import replay
    from pymagma import simulator

    sequences = [RNG.integers(1, 9, t) for t in RNG.integers(1, 17, 24)]
    labels = RNG.integers(0, 2, 24).astype(np.float32)
    buckets = mdnn.data.LengthBuckets(sequences, labels, batch_size=8, multiple=8)
    with simulator.simulated("full"):
        model = mdnn.Sequential([L.Input((None,), dtype="int64"), L.Embedding(10, 4, mask_zero=True),
                                 L.GlobalAveragePooling1D(), L.Dense(1)], seed=0)
        model.compile("adam", "mse", device="gpu", graph=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.fit(buckets, epochs=3, verbose=0)
        train = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step) and s.kind == "train"]
        shapes = {(len(b), length) for b, length in zip(buckets.batches, buckets.lengths)}
        assert 1 <= len(train) <= len(shapes)


def test_a_subclassed_sequence_model_takes_batches_of_any_length():
    class Tagger(mdnn.Model):
        def __init__(self):
            super().__init__(seed=3)
            self.embed, self.rnn, self.head = L.Embedding(10, 4), L.LSTM(5, return_sequences=True), L.Dense(2)

        def call(self, ids, training=None):
            return self.head(self.rnn(self.embed(ids)))

    model = Tagger()
    model.compile("adam", "mse")
    for t in (4, 9):
        model.fit(RNG.integers(0, 10, (6, t)), RNG.standard_normal((6, t, 2)), verbose=0)
        assert model.predict(RNG.integers(0, 10, (2, t))).shape == (2, t, 2)
    with pytest.raises(ValueError, match="dense.*expected x of shape \\(N, ..., 5\\)"):
        model.head(mdnn.Tensor(np.ones((2, 3, 7), np.float32)))  # the features axis is fixed
