"""Losses, metrics and sample/class weights under Keras' names give Keras 3's results: values, gradients, training
from identical weights, metric figures (their device twins: test_losses_keras_device.py)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import magmadnn as mdnn
from magmadnn import Tensor, losses
from magmadnn import layers as L
from tests.conftest import examples
from tests.keras_reference import keras
from tests.magmadnn._keras_cases import TRAIN, X_VAL, YB, X, Y, metric_objects, model_for

RNG = np.random.default_rng(0)
N, C = 6, 4
PROBS = RNG.dirichlet(np.ones(C), size=N).astype(np.float32)
LABELS = RNG.integers(0, C, N)
ONE_HOT = np.eye(C, dtype=np.float32)[LABELS]
BINARY = (RNG.random((N, C)) > 0.5).astype(np.float32)
SIGMOID = RNG.random((N, C)).astype(np.float32)
LOGITS = RNG.standard_normal((N, C)).astype(np.float32) * 3
WEIGHTS = RNG.random(N).astype(np.float32)

# (class name, y_true, y_pred, kwargs)
CASES = [
    ("CategoricalCrossentropy", ONE_HOT, PROBS, {}),
    ("CategoricalCrossentropy", ONE_HOT, LOGITS, {"from_logits": True, "label_smoothing": 0.1}),
    ("CategoricalCrossentropy", ONE_HOT, PROBS, {"label_smoothing": 0.3}),
    ("SparseCategoricalCrossentropy", LABELS, PROBS, {}),
    ("SparseCategoricalCrossentropy", LABELS[:, None], LOGITS, {"from_logits": True}),
    ("BinaryCrossentropy", BINARY, SIGMOID, {}),
    ("BinaryCrossentropy", BINARY, LOGITS, {"from_logits": True, "label_smoothing": 0.2}),
    ("MeanSquaredError", SIGMOID, LOGITS, {}),
    ("MeanAbsoluteError", SIGMOID, LOGITS, {}),
    ("Huber", SIGMOID, LOGITS, {}),
    ("Huber", SIGMOID, LOGITS, {"delta": 0.4}),
    ("LogCosh", SIGMOID, LOGITS, {}),
    ("KLDivergence", ONE_HOT, PROBS, {}),
]
IDS = [f"{c}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, _, _, kw in CASES]


def _numpy(value):
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", None])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_loss_values_equal_keras(case, reduction, weighted):
    cls, y_true, y_pred, kwargs = case
    w = WEIGHTS if weighted else None
    expected = getattr(keras.losses, cls)(reduction=reduction, **kwargs)(y_true, y_pred, sample_weight=w)
    got = getattr(losses, cls)(reduction=reduction, **kwargs)(y_true, Tensor(y_pred), sample_weight=w)
    np.testing.assert_allclose(got.numpy(), _numpy(expected), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_loss_gradients_equal_keras(case):
    cls, y_true, y_pred, kwargs = case
    pred = torch.tensor(y_pred, requires_grad=True)
    getattr(keras.losses, cls)(**kwargs)(torch.tensor(y_true), pred, sample_weight=WEIGHTS).backward()
    ours = Tensor(y_pred.copy(), requires_grad=True)
    getattr(losses, cls)(**kwargs)(y_true, ours, sample_weight=WEIGHTS).backward()
    np.testing.assert_allclose(ours.grad.numpy() if hasattr(ours.grad, "numpy") else np.asarray(ours.grad),
                               pred.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_issue_example_takes_probabilities():
    value = losses.get("sparse_categorical_crossentropy")(np.array([0]), Tensor(np.array([[0.7, 0.2, 0.1]],
                                                                                         np.float32)))
    assert value.item() == pytest.approx(-np.log(0.7), rel=1e-6)  # 0.357, not the 0.768 of the logits reading
    assert losses.get("cross_entropy")(Tensor(np.array([[0.7, 0.2, 0.1]], np.float32)), np.array([0])).item() == \
        pytest.approx(0.7679495, rel=1e-5)  # magmadnn's PyTorch-style name keeps logits


@pytest.mark.parametrize("y_shape", [(N,), (N, 1)])
@pytest.mark.parametrize("cls", ["BinaryCrossentropy", "MeanSquaredError", "Huber"])
def test_targets_differing_by_a_unit_axis_follow_keras(cls, y_shape):
    y_true = BINARY[:, 0].reshape(y_shape)
    pred = SIGMOID[:, :1]
    expected = _numpy(getattr(keras.losses, cls)()(y_true, pred))
    np.testing.assert_allclose(getattr(losses, cls)()(y_true, Tensor(pred)).numpy(), expected, rtol=1e-5)


def test_token_outputs_reduce_over_every_token():
    probs = RNG.dirichlet(np.ones(C), size=(3, 5)).astype(np.float32)
    labels = RNG.integers(0, C, (3, 5))
    for reduction in ("sum_over_batch_size", "sum"):
        expected = _numpy(keras.losses.SparseCategoricalCrossentropy(reduction=reduction)(labels, probs))
        got = losses.SparseCategoricalCrossentropy(reduction=reduction)(labels, Tensor(probs)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5)


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 5), c=st.integers(2, 6), smoothing=st.floats(0.0, 1.0))
def test_probability_crossentropy_against_a_plain_reference(seed, n, c, smoothing):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(c), size=n) * rng.uniform(0.5, 2.0)  # not normalised: Keras divides by the sum
    t = np.eye(c)[rng.integers(0, c, n)]
    ts = t * (1 - smoothing) + smoothing / c
    expected = np.mean(-np.sum(ts * np.log(np.clip(p / p.sum(-1, keepdims=True), 1e-7, 1 - 1e-7)), -1))
    got = losses.CategoricalCrossentropy(label_smoothing=smoothing)(t, Tensor(p)).item()
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    q = rng.random((n, c))
    tb = (rng.random((n, c)) > 0.5).astype(np.float64)
    smooth = tb * (1 - smoothing) + 0.5 * smoothing
    qc = np.clip(q, 1e-7, 1 - 1e-7)
    expected = np.mean(np.mean(-(smooth * np.log(qc) + (1 - smooth) * np.log(1 - qc)), -1))
    assert losses.BinaryCrossentropy(label_smoothing=smoothing)(tb, Tensor(q)).item() == pytest.approx(expected,
                                                                                                         rel=1e-9)


# ------------------------------------------------------------------------------------------- training
def _pair(name):
    """A magmadnn model for case ``name`` and the same model in Keras, from identical weights."""
    loss, _, _, act, units, names = TRAIN[name]
    model = model_for(name)
    reference = keras.Sequential([keras.Input((5,)), keras.layers.Dense(units, activation=act)])
    reference.set_weights(model.get_weights())  # Dense kernels are (inputs, units) in both
    reference.compile(keras.optimizers.SGD(0.1), loss=loss(keras) if callable(loss) else loss,
                      metrics=metric_objects(keras.metrics, names))
    return model, reference


def _assert_history(ours, theirs, rtol=1e-5):
    theirs = {re.sub(r"_\d+$", "", k): v for k, v in theirs.items()}  # Keras numbers a second AUC() "auc_1"
    assert set(ours) == set(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("name", list(TRAIN))
def test_fit_equals_keras_from_identical_weights(name):
    _, y, y_val, *_ = TRAIN[name]
    model, reference = _pair(name)
    kw = dict(batch_size=16, epochs=2, shuffle=False, verbose=0, validation_data=(X_VAL, y_val))
    theirs = reference.fit(X, y, **kw).history
    ours = model.fit(X, y, **kw).history
    _assert_history(ours, theirs)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.evaluate(X, y), reference.evaluate(X, y, verbose=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sparse", "categorical", "binary"])
@pytest.mark.parametrize("how", ["sample_weight", "class_weight"])
def test_sample_and_class_weights_equal_keras(name, how):
    _, y, y_val, *_ = TRAIN[name]
    weights = {"sample_weight": RNG.random(48).astype(np.float32), "class_weight": {0: 1.0, 1: 3.0, 2: 0.25}}[how]
    val = (X_VAL, y_val, RNG.random(13).astype(np.float32))
    model, reference = _pair(name)
    kw = dict(batch_size=16, epochs=2, shuffle=False, verbose=0, validation_data=val, **{how: weights})
    _assert_history(model.fit(X, y, **kw).history, reference.fit(X, y, **kw).history)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    w = RNG.random(48).astype(np.float32)
    assert model.evaluate(X, y, sample_weight=w, return_dict=True)["loss"] == pytest.approx(
        reference.evaluate(X, y, sample_weight=w, verbose=0, return_dict=True)["loss"], rel=1e-5)


def test_sample_weights_follow_validation_split_and_shuffling():
    w = RNG.random(48).astype(np.float32)
    model, reference = _pair("sparse")
    kw = dict(batch_size=16, epochs=2, shuffle=False, verbose=0, sample_weight=w, validation_split=0.25)
    _assert_history(model.fit(X, Y, **kw).history, reference.fit(X, Y, **kw).history)
    # shuffled: full-batch steps do not depend on the order, so the weights must have moved with their samples
    model, reference = _pair("sparse")
    kw = dict(batch_size=48, epochs=3, verbose=0, sample_weight=w)
    model.fit(X, Y, shuffle=True, **kw)
    reference.fit(X, Y, shuffle=False, **kw)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_sample_weight_errors_are_clear():
    model, _ = _pair("sparse")
    with pytest.raises(ValueError, match="one weight per sample"):
        model.fit(X, Y, sample_weight=np.ones(3), verbose=0)
    with pytest.raises(ValueError, match="not both"):
        model.fit(X, Y, sample_weight=np.ones(48), class_weight={0: 1.0}, verbose=0)
    torch_style = mdnn.Sequential([L.Input((5,)), L.Dense(3)], seed=0)
    torch_style.compile("sgd", loss=losses.BinaryCrossEntropy())
    with pytest.raises(ValueError, match="BinaryCrossentropy"):
        torch_style.fit(X, np.eye(3)[Y], sample_weight=np.ones(48), verbose=0)


# ------------------------------------------------------------------------------------------- callables
def test_callable_loss_and_metric_equal_keras():
    def loss_fn(y_true, y_pred):
        d = y_pred - y_true
        return mdnn.F.mean(d * d * 0.5 + mdnn.F.abs(d), -1)

    def keras_loss(y_true, y_pred):
        d = y_pred - y_true
        return keras.ops.mean(d * d * 0.5 + keras.ops.abs(d), -1)

    def gap(y_true, y_pred):
        return mdnn.F.abs(y_pred - y_true)

    def keras_gap(y_true, y_pred):
        return keras.ops.abs(y_pred - y_true)

    model = mdnn.Sequential([L.Input((5,)), L.Dense(2)], seed=0)
    model.compile(mdnn.optimizers.SGD(0.05), loss=loss_fn, metrics=[gap])
    reference = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])
    reference.set_weights(model.get_weights())
    reference.compile(keras.optimizers.SGD(0.05), loss=keras_loss, metrics=[keras_gap])
    y = RNG.standard_normal((48, 2)).astype(np.float32)
    ours = model.fit(X, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    theirs = reference.fit(X, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-5)
    np.testing.assert_allclose(ours["gap"], theirs["keras_gap"], rtol=1e-5)


def test_a_callable_must_return_a_tensor():
    model = mdnn.Sequential([L.Input((5,)), L.Dense(1)], seed=0)
    model.compile("sgd", loss=lambda t, p: 0.0)
    with pytest.raises(TypeError, match="must return a Tensor"):
        model.fit(X, YB, verbose=0)


# ------------------------------------------------------------------------------------------- compile advice
@pytest.mark.parametrize("act, loss, warns", [
    ("softmax", losses.CategoricalCrossentropy(from_logits=True), "takes logits"),
    (None, "categorical_crossentropy", "takes probabilities"),
    (None, "sparse_categorical_crossentropy", "takes probabilities"),
    ("softmax", "categorical_crossentropy", None),
    (None, "cross_entropy", None),
])
def test_compile_warns_where_outputs_and_loss_disagree(act, loss, warns):
    model = mdnn.Sequential([L.Input((5,)), L.Dense(3, activation=act)], seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile("sgd", loss=loss)
    messages = [str(w.message) for w in caught]
    assert (warns is None and not messages) or (len(messages) == 1 and warns in messages[0])


def test_compile_refuses_a_loss_without_reduction():
    model = mdnn.Sequential([L.Input((5,)), L.Dense(1)], seed=0)
    with pytest.raises(ValueError, match="one number"):
        model.compile("sgd", loss=losses.MeanSquaredError(reduction=None))


def test_accuracy_is_binary_for_one_sigmoid_unit():
    model = mdnn.Sequential([L.Input((5,)), L.Dense(1, activation="sigmoid")], seed=0)
    model.compile("sgd", loss="binary_crossentropy", metrics=["accuracy"])
    pred = model.predict(X)[:, 0]
    assert model.evaluate(X, YB, return_dict=True)["accuracy"] == pytest.approx(np.mean((pred > 0.5) == (YB == 1)))


def test_losses_and_metrics_round_trip_through_their_configs():
    import json

    from magmadnn import metrics

    for loss in (losses.CategoricalCrossentropy(label_smoothing=0.1), losses.get("mse"), losses.Huber(0.5),
                 losses.SparseCategoricalCrossentropy(from_logits=True), losses.get("kld"),
                 losses.BinaryCrossentropy(from_logits=True, reduction="sum")):
        again = losses.get(json.loads(json.dumps(loss.to_config())))
        assert type(again) is type(loss) and again.to_config() == loss.to_config()
    for metric in (metrics.get("acc"), metrics.AUC(), metrics.Precision(0.3), metrics.get("mae"), metrics.get("top3"),
                   metrics.get("top_k_categorical_accuracy"), metrics.RootMeanSquaredError(), metrics.Recall(),
                   metrics.Accuracy(ignore_index=-100), metrics.BinaryAccuracy(threshold=0.2)):
        again = metrics.get(json.loads(json.dumps(metric.to_config())))
        assert type(again) is type(metric) and again.name == metric.name and again.to_config() == metric.to_config()
    with pytest.raises(ValueError, match="compile the loaded model"):
        losses.get(losses.get(lambda t, p: p).to_config())


# ------------------------------------------------------------------- metric arguments and target values
_P = np.random.default_rng(7).uniform(size=(12, 1)).astype(np.float32)
_TARGETS = {
    "0-1-2": np.array([0, 1, 2] * 4).reshape(12, 1),
    "minus-plus-one": np.array([-1, 1] * 6).reshape(12, 1),
    "bool": (np.arange(12) % 3 == 0).reshape(12, 1),
    "halves": np.array([0.0, 0.5] * 6, np.float32).reshape(12, 1),
    "nan": np.array([0.0, np.nan, 1.0] * 4, np.float32).reshape(12, 1),
}
_METRIC_KW = {"Precision": {}, "Recall": {}, "AUC": {}, "Precision-0.3": {"thresholds": [0.3]},
              "Recall-0.7": {"thresholds": 0.7}}


@pytest.mark.parametrize("targets", list(_TARGETS))
@pytest.mark.parametrize("metric", list(_METRIC_KW))
def test_confusion_metrics_cast_targets_to_bool_as_keras(metric, targets):
    """Fault list, metric target values (each against Keras 3 on the same input; was: precision above 1):
      Precision / Recall / AUC, targets {0, 1, 2}           Keras: any non-zero target is a positive
      Precision / Recall / AUC, targets {-1, +1}            Keras: -1 is a positive too
      Precision / Recall / AUC, bool targets                Keras
      Precision / Recall / AUC, targets {0, 0.5}            Keras: 0.5 is a positive
      Precision / Recall / AUC, NaN targets                 Keras: NaN is a positive
      Precision(thresholds=[0.3]), Recall(thresholds=0.7)   Keras (a one-element list is one threshold)
    """
    from magmadnn import metrics
    from magmadnn.backend import get

    cls = metric.split("-")[0]
    ours = getattr(metrics, cls)(**_METRIC_KW[metric])
    ours.update(_P, _TARGETS[targets], get("host"))
    theirs = getattr(keras.metrics, cls)(**_METRIC_KW[metric])
    theirs.update_state(_TARGETS[targets], _P)
    assert 0.0 <= ours.result() <= 1.0
    assert ours.result() == pytest.approx(float(theirs.result()), abs=1e-6)


def test_confusion_metric_targets_in_fit_are_cast_as_keras():
    """[-1, +1] targets through evaluate: the figure equals Keras' Precision on the model's own outputs."""
    from magmadnn import metrics

    model = mdnn.Sequential([L.Input((5,)), L.Dense(1, activation="sigmoid")], seed=0)
    model.compile("sgd", "mse", metrics=[metrics.Precision(), metrics.Recall()])
    y = np.where(np.arange(48) % 3 == 0, -1.0, 1.0).reshape(48, 1).astype(np.float32)
    figures = model.evaluate(X, y, return_dict=True)
    outputs = model.predict(X)
    for name, cls in (("precision", keras.metrics.Precision), ("recall", keras.metrics.Recall)):
        reference = cls()
        reference.update_state(y, outputs)
        assert figures[name] == pytest.approx(float(reference.result()), abs=1e-6)


_BAD_METRIC_ARGUMENTS = [
    ("precision-threshold-above-1", lambda m: m.Precision(thresholds=1.5), ValueError, ["[0, 1]", "1.5"]),
    ("recall-threshold-negative", lambda m: m.Recall(thresholds=-0.1), ValueError, ["[0, 1]", "-0.1"]),
    ("precision-threshold-nan", lambda m: m.Precision(thresholds=float("nan")), ValueError, ["thresholds", "nan"]),
    ("precision-threshold-str", lambda m: m.Precision(thresholds="0.5"), TypeError, ["thresholds", "'0.5'"]),
    ("recall-threshold-bool", lambda m: m.Recall(thresholds=True), TypeError, ["thresholds", "True"]),
    ("precision-several-thresholds", lambda m: m.Precision(thresholds=[0.3, 0.7]), ValueError,
     ["one number", "[0.3, 0.7]"]),
    ("precision-threshold-list-above-1", lambda m: m.Precision(thresholds=[2.0]), ValueError, ["[0, 1]"]),
    ("auc-thresholds-str", lambda m: m.AUC(thresholds="0.5"), TypeError, ["AUC", "thresholds", "list"]),
    ("auc-thresholds-entry", lambda m: m.AUC(thresholds=[0.2, "x"]), TypeError, ["AUC", "thresholds", "'x'"]),
    ("auc-num-thresholds-1", lambda m: m.AUC(num_thresholds=1), ValueError, ["num_thresholds", ">= 2"]),
    ("auc-from-logits-str", lambda m: m.AUC(from_logits="yes"), TypeError, ["from_logits", "True or False"]),
    ("auc-curve", lambda m: m.AUC(curve="DET"), ValueError, ["curve", "'DET'"]),
    ("precision-top-k", lambda m: m.Precision(top_k=2), ValueError, ["top_k", "not supported"]),
    ("precision-str-targets", lambda m: m.Precision().update(_P, np.array(["a"] * 12).reshape(12, 1), _host()),
     TypeError, ["precision", "targets", "numbers"]),
    ("recall-targets-shape", lambda m: m.Recall().update(_P, np.zeros((12, 2)), _host()), ValueError,
     ["recall", "(12, 2)", "(12, 1)"]),
]


def _host():
    from magmadnn.backend import get

    return get("host")


@pytest.mark.parametrize("call, error, words", [pytest.param(*row[1:], id=row[0]) for row in _BAD_METRIC_ARGUMENTS])
def test_bad_metric_arguments_are_refused_as_keras(call, error, words):
    """Fault list, metric arguments (Keras 3 raises ValueError for thresholds outside [0, 1] and num_thresholds < 2):
      Precision(thresholds=1.5), Recall(thresholds=-0.1)   ValueError "[0, 1]" (was accepted: nothing predicted)
      Precision(thresholds=nan)                            ValueError naming thresholds
      Precision(thresholds="0.5"), Recall(thresholds=True) TypeError naming thresholds
      Precision(thresholds=[0.3, 0.7])                     ValueError: one number (Keras' list of results unsupported)
      Precision(thresholds=[2.0])                          ValueError "[0, 1]"
      AUC(thresholds="0.5"), AUC(thresholds=[0.2, "x"])    TypeError naming thresholds (was a float() ValueError)
      AUC(num_thresholds=1)                                ValueError
      AUC(from_logits="yes")                               TypeError (was taken as True)
      AUC(curve="DET"), Precision(top_k=2)                 ValueError naming the argument
      Precision().update with string targets               TypeError naming the targets
      Recall().update with targets (12, 2) for outputs (12, 1)  ValueError naming both shapes
    """
    from magmadnn import metrics

    with pytest.raises(error) as caught:
        call(metrics)
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{caught.value!r} lacks {missing}"


def test_keras_refuses_the_same_thresholds():
    for bad in (1.5, -0.1, [2.0]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            keras.metrics.Precision(thresholds=bad)
    with pytest.raises(ValueError, match="num_thresholds"):
        keras.metrics.AUC(num_thresholds=1)


# ------------------------------------------------------------------- sample and class weights
def _xent_pair(targets, smoothing):
    """magmadnn's own "cross_entropy" on logits, and the same model in Keras under its from_logits loss."""
    model = mdnn.Sequential([L.Input((5,)), L.Dense(3)], seed=0)
    model.compile(mdnn.optimizers.SGD(0.1), loss=losses.SoftmaxCrossEntropy(label_smoothing=smoothing))
    reference = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    reference.set_weights(model.get_weights())
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True) if targets == "labels" and not smoothing \
        else keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    reference.compile(keras.optimizers.SGD(0.1), loss=loss)
    return model, reference


@pytest.mark.parametrize("how", ["sample_weight", "class_weight"])
@pytest.mark.parametrize("targets, smoothing", [("labels", 0.0), ("one-hot", 0.0), ("labels", 0.1)])
def test_cross_entropy_takes_sample_and_class_weights_as_keras(how, targets, smoothing):
    """The README's loss "cross_entropy" with fit's Keras weights (was: "need a loss under a Keras name"): the same
    history and weights as Keras' from_logits cross entropy given the same weights."""
    model, reference = _xent_pair(targets, smoothing)
    y = Y if targets == "labels" else np.eye(3, dtype=np.float32)[Y]
    y_keras = np.eye(3, dtype=np.float32)[Y] if smoothing else y
    weights = {"sample_weight": RNG.random(48).astype(np.float32), "class_weight": {0: 1.0, 1: 3.0, 2: 0.25}}[how]
    kw = dict(batch_size=16, epochs=2, shuffle=False, verbose=0, **{how: weights})
    _assert_history(model.fit(X, y, **kw).history, reference.fit(X, y_keras, **kw).history)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    w = RNG.random(48).astype(np.float32)
    assert model.evaluate(X, y, sample_weight=w) == pytest.approx(
        reference.evaluate(X, y_keras, sample_weight=w, verbose=0), rel=1e-5)


def test_cross_entropy_weights_on_token_logits_and_sum_reduction_against_numpy():
    x = L.Input((4,), dtype="int64")
    model = mdnn.models.Model(x, L.Embedding(6, 3)(x), seed=0)  # token logits (N, 4, 3)
    ids = np.random.default_rng(1).integers(0, 6, (8, 4))
    labels = np.random.default_rng(2).integers(0, 3, (8, 4))
    w = np.random.default_rng(3).random(8)
    for reduction in ("mean", "sum"):
        model.compile("sgd", losses.SoftmaxCrossEntropy(reduction=reduction))
        logits = model.predict(ids).astype(np.float64)
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        per_token = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0] * w[:, None]
        expected = per_token.mean() if reduction == "mean" else per_token.sum()
        got = model.evaluate(ids, labels, sample_weight=w, batch_size=8)
        assert got == pytest.approx(expected, rel=1e-5)


_BAD_WEIGHTS = [
    ("sample-weight-overflows-float32", dict(sample_weight=np.full(48, 1e39)), ValueError,
     ["sample_weight of sample 0", "1e+39", "overflows", "float32"]),
    ("sample-weight-one-overflows", dict(sample_weight=np.r_[np.ones(47), -4e38]), ValueError,
     ["sample 47", "overflows"]),
    ("class-weight-overflows", dict(class_weight={0: 1.0, 1: 5e38}), ValueError, ["class_weight", "overflows"]),
    ("sample-weight-nan", dict(sample_weight=np.r_[np.ones(47), np.nan]), ValueError, ["NaN", "sample 47"]),
    ("sample-weight-inf", dict(sample_weight=np.r_[np.inf, np.ones(47)]), ValueError, ["infinite", "sample 0"]),
    ("class-weight-nan", dict(class_weight={0: float("nan")}), ValueError, ["class_weight[0]", "finite"]),
    ("class-weight-str", dict(class_weight={0: "2"}), TypeError, ["class_weight[0]", "'2'"]),
    ("class-weight-key-str", dict(class_weight={"0": 2.0}), TypeError, ["class_weight keys", "'0'"]),
    ("class-weight-list", dict(class_weight=[1.0, 2.0, 3.0]), TypeError, ["class_weight", "dict"]),
    ("sample-weight-count", dict(sample_weight=np.ones(47)), ValueError, ["one weight per sample", "(47,)"]),
    ("sample-weight-str", dict(sample_weight=np.array(["1"] * 48)), TypeError, ["sample_weight", "numbers"]),
    ("sample-weight-2d", dict(sample_weight=np.ones((48, 2))), ValueError, ["one weight per sample", "(48, 2)"]),
    ("both-weights", dict(sample_weight=np.ones(48), class_weight={0: 1.0}), ValueError, ["not both"]),
    ("weights-with-ignore-index", dict(sample_weight=np.ones(48), loss=losses.SoftmaxCrossEntropy(ignore_index=0)),
     ValueError, ["ignore_index=0", "weight of 0"]),
    ("weights-with-torch-bce", dict(sample_weight=np.ones(48), loss=losses.BinaryCrossEntropy()), ValueError,
     ["Keras name or 'cross_entropy'", "BinaryCrossEntropy"]),
]


@pytest.mark.parametrize("kwargs, error, words", [pytest.param(*row[1:], id=row[0]) for row in _BAD_WEIGHTS])
def test_bad_sample_and_class_weights_are_named(kwargs, error, words):
    """Fault list, sample and class weights (each refused before the first batch, the model untouched):
      sample_weight 1e39 (float64) for a float32 model   ValueError naming the sample and the overflow (was: a
                                                         non-finite loss, "lower the learning rate")
      one weight of -4e38 among ones                      ValueError naming sample 47
      class_weight {1: 5e38}                              ValueError naming class_weight and the overflow
      a NaN / an inf sample weight                        ValueError naming the sample
      class_weight {0: nan}                               ValueError (was TypeError) naming class_weight[0]
      class_weight {0: "2"}, {"0": 2.0}, a list           TypeError naming the key / value / the dict expected
      47 weights for 48 samples, (48, 2) weights          ValueError naming one weight per sample and the shape
      string weights                                      TypeError naming sample_weight
      sample_weight and class_weight together             ValueError "not both" (Keras)
      weights with SoftmaxCrossEntropy(ignore_index=0)    ValueError: weight the ignored samples 0 instead
      weights with the PyTorch-style BinaryCrossEntropy   ValueError naming the losses that take weights
      sample_weight / class_weight with "cross_entropy"   Keras' from_logits cross entropy (test above; was refused)
    """
    kwargs = dict(kwargs)
    model = mdnn.Sequential([L.Input((5,)), L.Dense(3 if "loss" not in kwargs else 3)], seed=0)
    loss = kwargs.pop("loss", "cross_entropy")
    model.compile("sgd", loss)
    before = model.get_weights()
    y = Y if not isinstance(loss, losses.BinaryCrossEntropy) else np.eye(3, dtype=np.float32)[Y]
    with pytest.raises(error) as caught:
        model.fit(X, y, verbose=0, **kwargs)
    missing = [w for w in words if w not in str(caught.value)]
    assert not missing, f"{caught.value!r} lacks {missing}"
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
