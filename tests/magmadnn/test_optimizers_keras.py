"""Keras-named optimizers against Keras 3 itself (torch backend): a few steps from the same weights with the same
gradients give the same weights, with Keras' defaults, argument names and rules, on the host and the simulated
device; magmadnn's own RMSProp/AdaGrad keep their PyTorch-style rule (checked against torch.optim)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from magmadnn import Parameter, optimizers
from tests.keras_reference import keras
from tests.magmadnn.backends import open_backend

RNG = np.random.default_rng(11)
P0 = RNG.normal(size=(4, 5)).astype(np.float32)
#: gradients of mixed scales: the small ones show where epsilon sits
GRADS = [(RNG.normal(size=(4, 5)) * RNG.choice([1e-4, 1e-2, 1.0], size=(4, 5))).astype(np.float32)
         for _ in range(4)]


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _keras_run(optimizer):
    var = keras.Variable(P0.copy())
    out = []
    for g in GRADS:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g), var)])
        out.append(keras.ops.convert_to_numpy(var.value).copy())
    return out


def _mine_run(optimizer, device):
    param = Parameter(device.asarray(P0.copy()), backend=device)
    out = []
    for g in GRADS:
        param.grad = device.asarray(g)
        optimizer.step([param])
        out.append(np.asarray(device.to_numpy(param.data)).copy())
    return out


CASES = [
    ("SGD", {}), ("SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    ("SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    ("Adam", {}), ("Adam", {"learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99, "weight_decay": 0.1}),
    ("AdamW", {}), ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.2, "epsilon": 1e-4}),
    ("RMSprop", {}), ("RMSprop", {"learning_rate": 0.01, "rho": 0.8, "weight_decay": 0.1, "epsilon": 1e-5}),
    ("RMSprop", {"momentum": 0.9}), ("RMSprop", {"centered": True, "learning_rate": 0.01}),
    ("RMSprop", {"momentum": 0.5, "centered": True, "weight_decay": 0.1, "learning_rate": 0.01}),
    ("Adagrad", {}), ("Adagrad", {"learning_rate": 0.05, "initial_accumulator_value": 0.5, "weight_decay": 0.1}),
]


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_steps_equal_keras(device, name, options):
    expected = _keras_run(getattr(keras.optimizers, name)(**options))
    got = _mine_run(getattr(optimizers, name)(**options), device)
    for step, (a, b) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6, err_msg=f"step {step + 1}")


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_names_in_compile_are_keras_classes_with_keras_defaults(name):
    mine, theirs = optimizers.get(name), keras.optimizers.get(name)
    assert type(mine).__name__ == type(theirs).__name__
    assert mine.learning_rate == pytest.approx(float(theirs.learning_rate))
    for own, keras_name in (("eps", "epsilon"), ("beta1", "beta_1"), ("beta2", "beta_2"), ("rho", "rho"),
                            ("momentum", "momentum"), ("initial_accumulator_value", "initial_accumulator_value")):
        if hasattr(theirs, keras_name):
            assert getattr(mine, own) == pytest.approx(getattr(theirs, keras_name)), (name, own)
    assert mine.weight_decay == pytest.approx(theirs.weight_decay or 0.0)


def test_own_spellings_are_aliases_and_not_both():
    adam = optimizers.Adam(lr=0.01, beta1=0.5, beta2=0.9, eps=1e-6)
    assert (adam.learning_rate, adam.beta1, adam.beta2, adam.eps) == (0.01, 0.5, 0.9, 1e-6)
    assert optimizers.get(adam.to_config()).eps == 1e-6
    with pytest.raises(TypeError, match="pass learning_rate= or its alias lr=, not both"):
        optimizers.Adam(learning_rate=0.1, lr=0.1)
    with pytest.raises(ValueError, match=r"momentum must be in \[0.0, 1.0\)"):
        optimizers.RMSprop(momentum=1.5)


@pytest.mark.parametrize("name", ["RMSProp", "AdaGrad"])
def test_magmadnn_spellings_keep_pytorch_rules(name):
    """PyTorch's RMSprop with alpha = rho and AdaGrad: epsilon outside the root, L2 weight decay, zero state."""
    p = torch.tensor(P0.astype(np.float64), requires_grad=True)
    if name == "RMSProp":
        reference = torch.optim.RMSprop([p], lr=0.01, alpha=0.9, eps=1e-7, weight_decay=0.1)
        mine = optimizers.RMSProp(0.01, rho=0.9, eps=1e-7, weight_decay=0.1)
    else:
        reference = torch.optim.Adagrad([p], lr=0.05, eps=1e-7, weight_decay=0.1)
        mine = optimizers.AdaGrad(0.05, eps=1e-7, weight_decay=0.1)
    param = Parameter(P0.astype(np.float64))
    for g in GRADS:
        p.grad = torch.tensor(g.astype(np.float64))
        reference.step()
        param.grad = g.astype(np.float64)
        mine.step([param])
    np.testing.assert_allclose(param.data, p.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "SGD"])
def test_fit_with_keras_defaults_gives_keras_weights(name):
    """Dense(gelu) -> BatchNormalization -> Dense(silu) -> Dense trained two epochs by fit in both libraries from
    the same weights: every weight and moving statistic equal to ~1e-6."""
    from magmadnn import layers as L
    from magmadnn import models

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 5)).astype(np.float32), rng.standard_normal((64, 1)).astype(np.float32)
    k = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="gelu"),
                          keras.layers.BatchNormalization(), keras.layers.Dense(8, activation="silu"),
                          keras.layers.Dense(1)])
    mine = models.Sequential([L.Input((5,)), L.Dense(8, activation="gelu"), L.BatchNormalization(),
                              L.Dense(8, activation="silu"), L.Dense(1)], seed=0)
    mine.compile(getattr(optimizers, name)(0.01), loss="mse", seed=0)
    mine.predict(x[:2])
    weights = iter(k.get_weights())
    arrays = []  # magmadnn's weights in Keras' order: kernel, bias / gamma, beta, moving mean, moving variance
    for layer in (layer for layer in mine.layers if layer._params):
        arrays += [p.data for p in layer._params.values()]
        arrays += [layer._state[n] for n in ("running_mean", "running_var") if n in layer._state]
    for a in arrays:
        a[...] = next(weights)
    k.compile(getattr(keras.optimizers, name)(0.01), loss="mse")
    k.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    mine.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(arrays, k.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=5e-6)
