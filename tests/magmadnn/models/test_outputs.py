"""Training models of several outputs as Keras 3 does (loss list / dict / one for all, loss_weights, metrics per
output, targets and sample_weight per output, history keys), checked against real Keras 3 from identical weights;
nested models and shared layers."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from tests.keras_reference import keras

RNG = np.random.default_rng(3)
X = RNG.standard_normal((24, 4)).astype(np.float32)
YA = RNG.integers(0, 3, 24)
YB = RNG.standard_normal((24, 1)).astype(np.float32)
W = RNG.random(24).astype(np.float32) + 0.5


def _twins(dict_outputs=False):
    i = L.Input((4,))
    h = L.Dense(5, activation="tanh", name="h")(i)
    a, b = L.Dense(3, activation="softmax", name="a")(h), L.Dense(1, name="b")(h)
    ours = mdnn.Model(i, {"p": a, "q": b} if dict_outputs else [a, b], seed=0)
    ki = keras.Input((4,))
    kh = keras.layers.Dense(5, activation="tanh", name="h")(ki)
    ka, kb = keras.layers.Dense(3, activation="softmax", name="a")(kh), keras.layers.Dense(1, name="b")(kh)
    theirs = keras.Model(ki, {"p": ka, "q": kb} if dict_outputs else [ka, kb])
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def _close_logs(ours: dict, theirs: dict):
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=2e-4, atol=2e-5, err_msg=key)


CASES = {
    "lists": dict(loss=["sparse_categorical_crossentropy", "mse"], loss_weights=[1.0, 0.5],
                  metrics=[["accuracy"], ["mae"]]),
    "dicts": dict(loss={"a": "sparse_categorical_crossentropy", "b": "mse"}, loss_weights={"a": 1.0, "b": 2.0},
                  metrics={"a": "accuracy", "b": ["mae", "mse"]}),
    "one_loss_head": dict(loss=["sparse_categorical_crossentropy", None]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_and_evaluate_give_keras_logs(case):
    ours, theirs = _twins()
    kwargs = CASES[case]
    ours.compile(mdnn.optimizers.SGD(0.1), **kwargs)
    theirs.compile(keras.optimizers.SGD(0.1), **kwargs)
    y = [YA, YB]
    got = ours.fit(X, y, batch_size=8, epochs=2, shuffle=False, validation_split=0.25, verbose=0).history
    want = theirs.fit(X, y, batch_size=8, epochs=2, shuffle=False, validation_split=0.25, verbose=0).history
    _close_logs(got, want)
    for a, b in zip(ours.get_weights(), theirs.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    _close_logs(ours.evaluate(X, y, batch_size=5, return_dict=True),
                theirs.evaluate(X, y, batch_size=5, return_dict=True, verbose=0))
    np.testing.assert_allclose(ours.evaluate(X, y, batch_size=5), theirs.evaluate(X, y, batch_size=5, verbose=0),
                               rtol=2e-4, atol=2e-5)  # the list: loss, output losses, then metrics in order


def test_dict_outputs_targets_and_sample_weight_per_output():
    ours, theirs = _twins(dict_outputs=True)
    kwargs = dict(loss={"p": "sparse_categorical_crossentropy", "q": "mae"}, metrics={"p": ["accuracy"]})
    ours.compile(mdnn.optimizers.Adam(0.01), **kwargs)
    theirs.compile(keras.optimizers.Adam(0.01), **kwargs)
    y, sw = {"p": YA, "q": YB}, {"p": W, "q": np.ones(24, np.float32)}
    got = ours.fit(X, y, sample_weight=sw, batch_size=6, epochs=2, shuffle=False, verbose=0).history
    want = theirs.fit(X, y, sample_weight=sw, batch_size=6, epochs=2, shuffle=False, verbose=0).history
    _close_logs(got, want)
    _close_logs(ours.evaluate(X, y, sample_weight={"p": W, "q": W}, return_dict=True),
                theirs.evaluate(X, y, sample_weight={"p": W, "q": W}, return_dict=True, verbose=0))
    pred, kpred = ours.predict(X), theirs.predict(X, verbose=0)
    assert list(pred) == ["p", "q"]
    np.testing.assert_allclose(pred["q"], kpred["q"], rtol=1e-4, atol=1e-5)


def test_one_loss_for_every_output_and_train_on_batch():
    ours, theirs = _twins()
    y = [np.eye(3, dtype=np.float32)[YA], YB]
    ours.compile(mdnn.optimizers.SGD(0.05), loss="mse")
    theirs.compile(keras.optimizers.SGD(0.05), loss="mse")
    _close_logs(ours.fit(X, y, batch_size=8, shuffle=False, verbose=0).history,
                theirs.fit(X, y, batch_size=8, shuffle=False, verbose=0).history)
    np.testing.assert_allclose(ours.train_on_batch(X, y), theirs.train_on_batch(X, y), rtol=2e-4, atol=2e-5)


def test_bad_structures_name_the_output_and_what_was_expected():
    ours, _ = _twins(dict_outputs=True)
    with pytest.raises(ValueError, match=r"loss names \['zz'\].*outputs are \['p', 'q'\]"):
        ours.compile("sgd", loss={"p": "mse", "zz": "mse"})
    with pytest.raises(ValueError, match="loss must be a list of 2"):
        ours.compile("sgd", loss=["mse"])
    with pytest.raises(ValueError, match="metrics must be a list of 2"):
        ours.compile("sgd", loss="mse", metrics=["mae"])
    with pytest.raises(ValueError, match="no output .* has a loss"):
        ours.compile("sgd", loss=[None, None])
    ours.compile("sgd", loss={"p": "sparse_categorical_crossentropy", "q": "mse"})
    with pytest.raises(ValueError, match="targets y must be a list of 2 .* got one ndarray"):
        ours.fit(X, YB, verbose=0)
    with pytest.raises(ValueError, match="targets y must be a list of 2 .* got a list of 1"):
        ours.evaluate(X, [YA])
    with pytest.raises(ValueError, match=r"targets dict names \['r'\].*\['p', 'q'\]"):
        ours.fit(X, {"p": YA, "r": YB}, verbose=0)
    with pytest.raises(ValueError, match="no targets for output 'q'"):
        ours.fit(X, {"p": YA}, verbose=0)
    with pytest.raises(ValueError, match="targets of output 'q' have shape"):
        ours.fit(X, {"p": YA, "q": YB[:5]}, verbose=0)
    with pytest.raises(ValueError, match="class_weight"):
        ours.fit(X, {"p": YA, "q": YB}, class_weight={0: 2.0}, verbose=0)


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    from tests.magmadnn.backends import model_device

    yield from model_device(request.param)


def _heads(device, graph):
    i = L.Input((4,))
    h = L.Dense(5, activation="relu", name="h")(i)
    model = mdnn.Model(i, {"p": L.Dense(3, name="a")(h), "q": L.Dense(1, name="b")(h)}, seed=1)
    model.compile(mdnn.optimizers.Adam(0.01), device=device, graph=graph,
                  loss={"p": mdnn.losses.SparseCategoricalCrossentropy(from_logits=True), "q": "mse"},
                  loss_weights={"p": 1.0, "q": 0.3}, metrics={"p": ["accuracy"], "q": ["mae"]})
    return model


def test_device_and_replay_equal_the_host(device):
    """Host, the device eagerly and the device replaying captured steps: the same history and weights."""
    import warnings

    from magmadnn.models import replay

    y = {"p": YA, "q": YB}
    runs = []
    for dev, graph in (("host", False), (device, False), (device, True)):
        model = _heads(dev, graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing may fall back to eager steps
            history = model.fit(X, y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                                validation_data=(X[:9], {"p": YA[:9], "q": YB[:9]})).history
        runs.append((history, model.get_weights()))
        if graph:
            steps = [s for s in model._graphs.steps.values() if isinstance(s, replay._Step)]
            assert any(s.kind == "train" and s.graph.launches for s in steps)
    (h0, w0), (h1, w1), (h2, w2) = runs
    assert sorted(h0) == sorted(["loss", "p_loss", "q_loss", "p_accuracy", "q_mae", "val_loss", "val_p_loss",
                                 "val_q_loss", "val_p_accuracy", "val_q_mae"])
    assert h1 == h2  # replay equals eager on the device bit for bit
    for key in h0:
        np.testing.assert_allclose(h0[key], h1[key], rtol=1e-5, atol=1e-6)
    for a, b, c in zip(w0, w1, w2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(b, c)


def test_nested_models_and_shared_layers_train_as_keras():
    """A siamese pair: one encoder (a functional model) used as a layer on two inputs, its Dense shared; the outer
    model trains it as Keras does; freezing the nested model freezes its weights in the outer one."""
    def build(lib, model_cls, dense, inp, concat):
        i = inp((4,))
        encoder = model_cls(i, dense(3, activation="tanh", name="enc")(i), name="encoder")
        a, b = inp((4,)), inp((4,))
        head = dense(1, name="head")(concat()([encoder(a), encoder(b)]))
        return encoder, model_cls([a, b], head)

    enc, ours = build(mdnn, mdnn.Model, L.Dense, L.Input, L.Concatenate)
    kenc, theirs = build(keras, keras.Model, keras.layers.Dense, keras.Input, keras.layers.Concatenate)
    assert [layer.name for layer in ours.layers if layer.params] == ["enc", "head"]  # the encoder's Dense, shared
    theirs.set_weights(ours.get_weights())
    xb = X[::-1].copy()
    for model, lib in ((ours, mdnn), (theirs, keras)):
        model.compile(lib.optimizers.SGD(0.1), loss="mse")
    _close_logs(ours.fit([X, xb], YB, batch_size=8, shuffle=False, verbose=0).history,
                theirs.fit([X, xb], YB, batch_size=8, shuffle=False, verbose=0).history)
    np.testing.assert_allclose(enc.predict(X), kenc.predict(X, verbose=0), rtol=1e-4, atol=1e-5)
    enc.trainable, kenc.trainable = False, False
    frozen = enc.get_weights()
    for model, lib in ((ours, mdnn), (theirs, keras)):
        model.compile(lib.optimizers.SGD(0.1), loss="mse")
    _close_logs(ours.fit([X, xb], YB, batch_size=8, shuffle=False, verbose=0).history,
                theirs.fit([X, xb], YB, batch_size=8, shuffle=False, verbose=0).history)
    for a, b in zip(enc.get_weights(), frozen, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(ours.trainable_weights) == 2  # the head's kernel and bias


def test_a_sequential_model_inside_a_sequential_model_shares_its_layers():
    inner = mdnn.Sequential([L.Input((4,)), L.Dense(3, name="d1")], seed=0)
    outer = mdnn.Sequential([inner, L.Dense(1, name="d2")], seed=0)
    assert [layer.name for layer in outer.layers] == ["d1", "d2"]
    assert outer.layers[0] is inner.layers[0]
    kernel, bias = inner.get_weights()
    np.testing.assert_allclose(outer.predict(X), (X @ kernel + bias) @ outer.get_weights()[2]
                               + outer.get_weights()[3], rtol=1e-5, atol=1e-6)


def test_saved_and_loaded_compiled_bit_for_bit(tmp_path):
    ours, _ = _twins(dict_outputs=True)
    ours.compile(mdnn.optimizers.Adam(0.01), loss={"p": "sparse_categorical_crossentropy", "q": "mse"},
                 loss_weights={"p": 1.0, "q": 0.25}, metrics={"q": ["mae"]})
    y = {"p": YA, "q": YB}
    ours.fit(X, y, batch_size=8, verbose=0)
    loaded = mdnn.load_model(ours.save(str(tmp_path / "heads.npz")))
    assert loaded.evaluate(X, y, return_dict=True) == ours.evaluate(X, y, return_dict=True)
    h1 = loaded.fit(X, y, batch_size=8, shuffle=False, verbose=0).history
    h2 = ours.fit(X, y, batch_size=8, shuffle=False, verbose=0).history
    assert h1 == h2 and sorted(h1) == ["loss", "p_loss", "q_loss", "q_mae"]


def test_loss_weights_of_one_output_scale_its_loss_as_keras(tmp_path):
    ours = mdnn.Sequential([L.Input((4,)), L.Dense(1)], seed=0)
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    theirs.set_weights(ours.get_weights())
    ours.compile(mdnn.optimizers.SGD(0.05), loss="mse", loss_weights=[3.0])
    theirs.compile(keras.optimizers.SGD(0.05), loss="mse", loss_weights=[3.0])
    _close_logs(ours.fit(X, YB, batch_size=8, shuffle=False, verbose=0).history,
                theirs.fit(X, YB, batch_size=8, shuffle=False, verbose=0).history)
    loaded = mdnn.load_model(ours.save(str(tmp_path / "scaled.npz")))
    assert loaded.evaluate(X, YB) == ours.evaluate(X, YB)
