"""Layering contract (DESIGN.md): autograd, functional, layers, models, optimizers, losses and metrics touch backend
arrays only through the backend op set, so a GPU backend with its own array type plugs in without changes.

The "strict" backend (tests/magmadnn/backends.py) wraps every host op; its arrays are not NumPy arrays and refuse
Python operators, indexing and every NumPy call. Training, evaluation, prediction and saving through it must work
and give exactly the host results.
"""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn import models, optimizers
from tests.magmadnn.backends import HOST, STRICT


def test_the_strict_backend_really_refuses_operators_and_numpy():
    a = STRICT.ones((2, 2))
    for misuse in (lambda: a + a, lambda: a[0], lambda: -a, lambda: np.asarray(a), lambda: np.add(a, 1),
                   lambda: np.sum(a), lambda: float(STRICT.sum(a)), lambda: bool(a)):
        with pytest.raises(TypeError, match="outside the backend op set|does not support ufuncs"):
            misuse()
    np.testing.assert_array_equal(STRICT.to_numpy(STRICT.add(a, a)), np.full((2, 2), 2.0))


def graph_model(backend_module):
    """Every layer kind, a shared layer (two uses of one parameter) and residual Adds (multi-use nodes)."""
    image = L.Input((1, 6, 6))
    h = L.BatchNorm()(L.Conv2D(4, 3, padding="same", activation="relu")(image))
    h = L.Add()([h, L.Conv2D(4, 3, padding="same", dilation=2, strides=1)(h)])
    h = L.AvgPool2D(1)(L.MaxPool2D(2)(L.Activation("gelu")(h)))
    features = L.Dense(5, activation="elu")(L.Dropout(0.3)(L.Flatten()(h)))
    shared = L.Dense(5, activation="tanh")
    pooled = shared(shared(L.GlobalAvgPool2D()(L.Conv2D(5, 1)(h))))
    logits = L.Dense(3)(L.BatchNorm()(L.Add()([features, pooled])))
    return models.Model(image, logits, seed=1, backend=backend_module)


@pytest.mark.parametrize("optimizer", [
    lambda: optimizers.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), lambda: optimizers.AdaGrad(0.05),
    lambda: optimizers.RMSProp(0.01), lambda: optimizers.Adam(0.01), lambda: optimizers.AdamW(0.01),
], ids=["nesterov", "adagrad", "rmsprop", "adam", "adamw"])
def test_training_through_the_op_set_only_matches_the_host(optimizer, tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(24, 1, 6, 6)).astype(np.float32), rng.integers(0, 3, 24)
    runs = []
    for backend_module in (HOST, STRICT):
        model = graph_model(backend_module)
        model.compile(optimizer(), metrics=["accuracy", "top2"])
        history = model.fit(x, y, batch_size=8, epochs=2, validation_split=0.25, verbose=0)
        loaded = models.load(model.save(tmp_path / f"{backend_module.name}.npz"), backend=backend_module)
        runs.append((history.history, model.evaluate(x, y), model.predict(x), loaded.predict(x)))
    (host_history, host_eval, host_pred, _), (history, evaluation, pred, reloaded) = runs
    assert history == host_history and evaluation == host_eval
    np.testing.assert_array_equal(pred, host_pred)
    np.testing.assert_array_equal(reloaded, host_pred)
