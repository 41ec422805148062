"""Keras' BatchNormalization (momentum 0.99, epsilon 1e-3, biased moving variance), LayerNormalization and
GroupNormalization (epsilon 1e-3) against Keras 3 itself, on the host and the simulated device; magmadnn's
BatchNorm/LayerNorm/GroupNorm keep PyTorch's defaults (checked against torch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from magmadnn import layers as L
from tests.keras_reference import keras
from tests.magmadnn.backends import open_backend


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _batches(shape, seed=0, count=4):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * 3 + 1.5).astype(np.float32) for _ in range(count)]


def _to_numpy(device, a):
    return np.asarray(device.to_numpy(a))


@pytest.mark.parametrize("options", [{}, {"momentum": 0.8, "epsilon": 0.01}])
def test_moving_statistics_and_outputs_are_keras(device, options):
    batches = _batches((5, 3))  # a small batch: the biased and unbiased variances differ by 25%
    k = keras.layers.BatchNormalization(**options)
    k.build((None, 3))
    mine = L.BatchNormalization(**options)
    mine.configure(backend=device)
    for x in batches:
        expected = k(x, training=True).detach().cpu().numpy()
        got = mine(x, training=True)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    state = mine.state
    np.testing.assert_allclose(_to_numpy(device, state["running_mean"]), k.moving_mean.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_to_numpy(device, state["running_var"]), k.moving_variance.numpy(), rtol=1e-6)
    x = batches[0]
    np.testing.assert_allclose(mine(x).numpy(), k(x, training=False).detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_images_normalise_the_channels_of_nchw_as_keras_does_those_of_nhwc(device):
    batches = _batches((2, 3, 4, 5), seed=1)
    k = keras.layers.BatchNormalization()  # NHWC: axis=-1
    mine = L.BatchNormalization()  # NCHW: axis=1
    mine.configure(backend=device)
    for x in batches:
        expected = k(np.transpose(x, (0, 2, 3, 1)), training=True).detach().cpu().numpy()
        got = mine(x, training=True).numpy()
        np.testing.assert_allclose(got, np.transpose(expected, (0, 3, 1, 2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_to_numpy(device, mine.state["running_var"]), k.moving_variance.numpy(), rtol=1e-6)


def test_batch_norm_keeps_pytorchs_defaults():
    batches = _batches((5, 3), seed=2)
    t = torch.nn.BatchNorm1d(3)  # momentum 0.1 (= 0.9 here), eps 1e-5, unbiased running variance
    mine = L.BatchNorm()
    for x in batches:
        expected = t(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(mine(x, training=True).numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mine.state["running_var"], t.running_var.numpy(), rtol=1e-6)
    np.testing.assert_allclose(mine.state["running_mean"], t.running_mean.numpy(), rtol=1e-6, atol=1e-7)


def test_arguments_keras_names_eps_alias_config_and_axis_errors():
    layer = L.BatchNormalization(eps=1e-4, momentum=0.9)
    assert layer.epsilon == 1e-4 and layer.momentum == 0.9
    config = layer.get_config()
    assert config["epsilon"] == 1e-4 and "eps" not in config
    again = L.layer_class("BatchNormalization")(**config)
    assert type(again) is L.BatchNormalization and again.epsilon == 1e-4
    with pytest.raises(ValueError, match="axis=3 to be a non-batch axis"):
        L.BatchNormalization(axis=3)(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="axis=-1 of an image is its width here.*pass axis=3"):
        L.BatchNormalization(axis=-1)(np.ones((2, 3, 4, 4), np.float32))  # Keras' NHWC habit on an NCHW image
    np.testing.assert_allclose(L.BatchNormalization(axis=-1)(np.ones((2, 3), np.float32)).numpy(),
                               np.ones((2, 3)) / np.sqrt(1 + 1e-3), rtol=1e-6)


@pytest.mark.parametrize("shape, axis", [((4, 5, 3), None), ((4, 5, 3), -1), ((4, 5, 3), 1), ((2, 3, 4, 5), 3),
                                         ((2, 3, 4, 5), 2), ((2, 3, 2, 2, 3), -1)])
def test_any_axis_of_any_rank_is_keras(device, shape, axis):
    """Sequences (N, T, F) normalise their features by default (Conv1D -> BatchNormalization), and any explicit
    axis of any rank is Keras' axis: training outputs, moving statistics, inference and a frozen layer."""
    batches = _batches(shape, seed=5)
    k = keras.layers.BatchNormalization(**({} if axis is None else {"axis": axis}))
    mine = L.BatchNormalization(axis=axis)
    mine.configure(backend=device)
    for x in batches:
        expected = k(x, training=True).detach().cpu().numpy()
        np.testing.assert_allclose(mine(x, training=True).numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_to_numpy(device, mine.state["running_mean"]), k.moving_mean.numpy(), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(_to_numpy(device, mine.state["running_var"]), k.moving_variance.numpy(), rtol=1e-6)
    x = batches[0]
    np.testing.assert_allclose(mine(x).numpy(), k(x, training=False).detach().cpu().numpy(), rtol=1e-5, atol=1e-5)
    mine.trainable = k.trainable = False
    np.testing.assert_allclose(mine(x, training=True).numpy(), k(x, training=True).detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_layer_and_group_normalization_are_keras(device):
    rng = np.random.default_rng(3)
    seq = (rng.standard_normal((2, 3, 6)) * 0.05).astype(np.float32)  # small variance: epsilon matters
    mine = L.LayerNormalization()
    mine.configure(backend=device)
    np.testing.assert_allclose(mine(seq).numpy(), keras.layers.LayerNormalization()(seq).detach().cpu().numpy(),
                               rtol=1e-4, atol=1e-5)
    images = (rng.standard_normal((2, 4, 3, 3)) * 0.05).astype(np.float32)
    mine = L.GroupNormalization(groups=2)
    mine.configure(backend=device)
    expected = keras.layers.GroupNormalization(groups=2)(np.transpose(images, (0, 2, 3, 1))).detach().cpu().numpy()
    np.testing.assert_allclose(mine(images).numpy(), np.transpose(expected, (0, 3, 1, 2)), rtol=1e-4, atol=1e-5)


def test_layer_and_group_norm_keep_pytorchs_eps():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 4, 3, 3)) * 0.05).astype(np.float32)
    np.testing.assert_allclose(L.GroupNorm(2)(x).numpy(), torch.nn.GroupNorm(2, 4)(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(L.LayerNorm()(x[:, 0]).numpy(),
                               torch.nn.LayerNorm(3)(torch.tensor(x[:, 0])).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert L.LayerNormalization(eps=1e-5).epsilon == 1e-5
    assert L.GroupNormalization(eps=1e-5).get_config()["epsilon"] == 1e-5
    with pytest.raises(ValueError, match="GroupNormalization .*axis=-1 is not supported"):
        L.GroupNormalization(axis=-1)
