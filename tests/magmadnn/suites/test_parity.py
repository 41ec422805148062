"""Parity: the same seeded model trained on the host and on the device gives the same loss at every step.

LeNet-5, the MLP (with dropout: the RNG protocol makes the masks identical) and a BatchNorm + Dropout CNN each take
20 optimizer steps on fixed batches on both backends; the losses must agree to float32 tolerance at every step, and
the weights after the last step too. The device runs on the CPU simulator here (``native``: it reads real cuDNN
descriptors) and on a real GPU under the ``gpu`` marker.
"""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import optimizers, zoo
from tests.magmadnn.backends import open_backend

STEPS = 20
BATCH = 16

RECIPES = {
    "lenet5": (lambda: zoo.lenet5((1, 28, 28), 10), (1, 28, 28), lambda: optimizers.SGD(0.02, momentum=0.9)),
    "mlp": (lambda: zoo.mlp((1, 12, 12), 10, hidden=(64, 32), dropout=0.2, seed=3), (1, 12, 12),
            lambda: optimizers.Adam(1e-3)),
    "bn_dropout_cnn": (lambda: zoo.small_cnn((1, 12, 12), 10, filters=(8, 16), dense=32, batch_norm=True,
                                             dropout=0.3, seed=5), (1, 12, 12), lambda: optimizers.RMSProp(1e-3)),
}


def _batches(shape, seed=0):
    """Learnable batches: noisy copies of one prototype image per class."""
    rng = np.random.default_rng(seed)
    prototypes = rng.normal(size=(10,) + shape)
    y = rng.integers(0, 10, (STEPS, BATCH))
    x = (prototypes[y] + 0.5 * rng.normal(size=(STEPS, BATCH) + shape)).astype(np.float32)
    return x, y


def _train(recipe: str, device) -> tuple[list[float], list[np.ndarray]]:
    build, shape, optimizer = RECIPES[recipe]
    model = build()
    model.compile(optimizer(), "cross_entropy", seed=11, device=device)
    x, y = _batches(shape)
    losses = [model.train_on_batch(x[i], y[i]) for i in range(STEPS)]
    return losses, model.get_weights()


@pytest.fixture(scope="module", params=[pytest.param("device", marks=pytest.mark.native),
                                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device_backend(request):
    yield from open_backend(request.param)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_host_and_device_train_to_the_same_losses(recipe, device_backend):
    host_losses, host_weights = _train(recipe, "host")
    device_losses, device_weights = _train(recipe, device_backend)
    assert all(np.isfinite(host_losses)) and np.mean(host_losses[-5:]) < np.mean(host_losses[:5])  # it learns
    np.testing.assert_allclose(device_losses, host_losses, rtol=2e-4, atol=2e-5)
    for dw, hw in zip(device_weights, host_weights, strict=True):
        np.testing.assert_allclose(dw, hw, rtol=2e-3, atol=2e-4)
