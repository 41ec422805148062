"""Keras 3's learning-rate schedules and ``clipvalue=`` side by side with Keras (torch backend): the same values at
every step, the same configs, and training from identical weights that agrees; the earlier spellings still work."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import schedules
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import X, Y, fit_both, mlp, same_weights, twins

KS = keras.optimizers.schedules

CASES = [
    ("ExponentialDecay", dict(initial_learning_rate=0.1, decay_steps=7, decay_rate=0.5)),
    ("ExponentialDecay", dict(initial_learning_rate=0.1, decay_steps=7, decay_rate=0.5, staircase=True)),
    ("InverseTimeDecay", dict(initial_learning_rate=0.2, decay_steps=3, decay_rate=0.7)),
    ("InverseTimeDecay", dict(initial_learning_rate=0.2, decay_steps=3, decay_rate=0.7, staircase=True)),
    ("PolynomialDecay", dict(initial_learning_rate=0.1, decay_steps=10, end_learning_rate=0.01, power=2.0)),
    ("PolynomialDecay", dict(initial_learning_rate=0.1, decay_steps=10, power=0.5, cycle=True)),
    ("PiecewiseConstantDecay", dict(boundaries=[3, 8], values=[0.1, 0.05, 0.01])),
    ("CosineDecay", dict(initial_learning_rate=0.1, decay_steps=20)),
    ("CosineDecay", dict(initial_learning_rate=0.1, decay_steps=20, alpha=0.2)),
    ("CosineDecay", dict(initial_learning_rate=0.01, decay_steps=20, alpha=0.1, warmup_target=0.2, warmup_steps=5)),
]


@pytest.mark.parametrize("name, kwargs", CASES)
def test_schedule_values_and_config_are_keras(name, kwargs):
    ours, theirs = getattr(schedules, name)(**kwargs), getattr(KS, name)(**kwargs)
    steps = range(0, 40)
    np.testing.assert_allclose([ours(t) for t in steps], [float(theirs(t)) for t in steps], rtol=1e-6, atol=1e-9)
    assert ours.get_config() == pytest.approx(theirs.get_config()) if name != "PiecewiseConstantDecay" else \
        ours.get_config() == theirs.get_config()
    again = schedules.get(keras.optimizers.schedules.serialize(theirs))  # Keras' saved form loads here
    assert [again(t) for t in steps] == [ours(t) for t in steps]
    assert schedules.get(ours.to_config()).get_config() == ours.get_config()
    assert mdnn.optimizers.schedules.LearningRateSchedule is schedules.Schedule


def test_cosine_warmup_steps_without_target_is_ignored_as_keras_with_a_warning():
    with pytest.warns(UserWarning, match=r"warmup_target=lr"):
        ours = schedules.CosineDecay(0.1, decay_steps=10, warmup_steps=4)
    theirs = KS.CosineDecay(0.1, decay_steps=10, warmup_steps=4)
    np.testing.assert_allclose([ours(t) for t in range(20)], [float(theirs(t)) for t in range(20)], rtol=1e-6)


def test_the_earlier_cosine_spellings_keep_their_warm_up_from_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = schedules.CosineDecay(initial_lr=0.2, decay_steps=10, warmup_steps=4)
        positional = schedules.CosineDecay(0.2, 10, 0.0, 4)  # alpha, warmup_steps by position
    keras_form = KS.CosineDecay(0.0, decay_steps=10, warmup_target=0.2, warmup_steps=4)
    for schedule in (old, positional, schedules.get({"class_name": "CosineDecay", "config": {
            "initial_lr": 0.2, "decay_steps": 10, "alpha": 0.0, "warmup_steps": 4}})):  # a config saved before
        np.testing.assert_allclose([schedule(t) for t in range(20)], [float(keras_form(t)) for t in range(20)],
                                   rtol=1e-6, atol=1e-9)
    assert old.initial_lr == 0.2


@pytest.mark.parametrize("make, error, words", [
    (lambda: schedules.ExponentialDecay(0.1, 0, 0.5), ValueError, ["decay_steps"]),
    (lambda: schedules.ExponentialDecay(0.1, 10, 0.5, staircase=1), TypeError, ["staircase", "True or False"]),
    (lambda: schedules.PiecewiseConstantDecay([1, 2], [0.1, 0.2]), ValueError, ["one shorter"]),
    (lambda: schedules.PiecewiseConstantDecay([3, 2], [0.1, 0.2, 0.3]), ValueError, ["increase"]),
    (lambda: schedules.PolynomialDecay(0.1, 10, end_learning_rate=-1), ValueError, ["end_learning_rate"]),
    (lambda: schedules.CosineDecay(0.1, 10, initial_lr=0.1), TypeError, ["initial_learning_rate", "initial_lr"]),
    (lambda: schedules.CosineDecay(-0.1, 10), ValueError, ["initial_learning_rate", "-0.1"]),
])
def test_bad_schedule_arguments(make, error, words):
    with pytest.raises(error) as caught:
        make()
    assert all(word in str(caught.value) for word in words), str(caught.value)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "RMSprop", "Adagrad", "AdamW"])
def test_clipvalue_and_an_exponential_schedule_train_as_keras(optimizer):
    ours, theirs = twins(*mlp(3, "softmax"))

    def make(module, sched):
        return getattr(module.optimizers, optimizer)(
            learning_rate=sched.ExponentialDecay(0.05, decay_steps=2, decay_rate=0.8), clipvalue=0.02)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.compile(make(mdnn, schedules), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    theirs.compile(make(keras, KS), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    fit_both(ours, theirs, X, Y, epochs=3)
    same_weights(ours, theirs)
    assert ours.optimizer.get_config()["clipvalue"] == 0.02


def test_clipvalue_clips_each_element_and_excludes_the_other_clips():
    from magmadnn import autograd, backend

    xp = backend.get("host")
    p = autograd.Parameter(np.zeros(4, np.float32), backend=xp)
    p.grad = np.array([-3.0, -0.1, 0.2, 5.0], np.float32)
    mdnn.optimizers.SGD(1.0, clipvalue=0.5).step([p])
    np.testing.assert_array_equal(p.data, np.float32([0.5, 0.1, -0.2, -0.5]))
    with pytest.raises(ValueError, match="only one of clipnorm"):
        mdnn.optimizers.Adam(clipnorm=1.0, clipvalue=1.0)
    with pytest.raises(ValueError, match="clipvalue"):
        mdnn.optimizers.Adam(clipvalue=0.0)


@pytest.mark.native
def test_clipvalue_on_the_simulated_device_and_replayed_matches_the_host():
    from pymagma import simulator

    def run(device, graph):
        model = mdnn.Sequential(mlp(3, "softmax")[0], seed=0)
        model.compile(mdnn.optimizers.Adam(schedules.ExponentialDecay(0.05, 2, 0.8), clipvalue=0.02),
                      "sparse_categorical_crossentropy", device=device, graph=graph)
        history = model.fit(X, Y, epochs=2, batch_size=16, shuffle=False, verbose=0).history["loss"]
        return history, model.get_weights()

    host = run("host", False)
    with simulator.simulated("full"):
        for graph in (False, True):
            loss, weights = run("gpu", graph)
            np.testing.assert_allclose(loss, host[0], rtol=1e-5)
            for a, b in zip(weights, host[1], strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
