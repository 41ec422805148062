"""Keras' cross entropies of probabilities (binary, categorical, sparse categorical; ``from_logits=False``) fused on
the device: the clip, the logs, the sample weights and the reduction in one kernel launch forward and one backward.
Values and gradients on the simulated device against the host backend's chain of ops and against Keras 3 (torch
backend), clipped probabilities and rows that do not sum to 1 included; gpu twins on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import backend
from magmadnn._fused_losses import probability_crossentropy
from magmadnn.autograd import Tensor
from tests.keras_reference import keras

RNG = np.random.default_rng(21)
N, C = 7, 4


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def xp(request):
    if request.param == "simulator":
        from pymagma import simulator

        with simulator.simulated("full"):
            yield backend.get("gpu")
    else:
        yield backend.get("gpu")


def _case(kind: str):
    """(ours, theirs, y_pred, y_true): probabilities with a clipped value each way, rows not summing to 1."""
    if kind == "binary":
        p = RNG.uniform(0.05, 0.95, (N, 3)).astype(np.float32)
        p[0, 0], p[1, 1] = 1e-9, 1.0 - 1e-9  # the clip binds: no gradient there
        return p, RNG.integers(0, 2, (N, 3)).astype(np.float32)
    p = RNG.uniform(0.05, 1.0, (N, C)).astype(np.float32)  # not normalised: the loss divides by the row sum
    p[2] = [1e-12, 0.5, 0.3, 0.2]
    labels = RNG.integers(0, C, N)
    return p, (labels if kind == "sparse" else np.eye(C, dtype=np.float32)[labels])


def _losses(kind: str, smoothing: float, reduction: str):
    options = {"reduction": reduction}
    if kind != "sparse":
        options["label_smoothing"] = smoothing
    name = {"binary": "BinaryCrossentropy", "categorical": "CategoricalCrossentropy",
            "sparse": "SparseCategoricalCrossentropy"}[kind]
    return getattr(mdnn.losses, name)(**options), getattr(keras.losses, name)(**options)


def _ours(loss, xp, p, y, weights):
    """(value, gradient) of ``loss`` on backend ``xp`` as a model step computes it (validate, prepare, checked)."""
    from magmadnn.models.weighting import WeightedTargets

    loss.validate(y, p.shape[1:])
    targets = y
    if weights is not None:
        targets = np.asarray(y).view(WeightedTargets)
        targets.sample_weight = weights.astype(np.float64)
    packed = loss.prepare(targets, xp, np.float32)
    pred = Tensor(xp.asarray(p), requires_grad=True, backend=xp)
    value = loss.checked(pred, packed)
    value.backward()
    return float(np.asarray(xp.to_numpy(value.data))), np.asarray(xp.to_numpy(pred.grad))


def _theirs(loss, p, y, weights):
    import torch

    pred = torch.tensor(p, requires_grad=True)
    value = loss(torch.tensor(y), pred, sample_weight=None if weights is None else torch.tensor(weights))
    value.backward()
    return float(value.detach()), pred.grad.numpy()


@pytest.mark.parametrize("kind", ["binary", "categorical", "sparse"])
@pytest.mark.parametrize("smoothing, reduction, weighted", [(0.0, "sum_over_batch_size", False),
                                                             (0.1, "sum_over_batch_size", True),
                                                             (0.2, "sum", True)])
def test_fused_values_and_gradients_match_the_host_and_keras(xp, kind, smoothing, reduction, weighted):
    p, y = _case(kind)
    weights = RNG.uniform(0.2, 2.0, N).astype(np.float32) if weighted else None
    ours, theirs = _losses(kind, smoothing, reduction)
    from pymagma import _native

    launches = _Launches(_native.current.launcher)
    _native.current.launcher = launches
    try:
        device = _ours(ours, xp, p, y, weights)
    finally:
        _native.current.launcher = launches.target
    assert launches.kernels.count("keras_prob_xent") == 1 and launches.kernels.count("keras_prob_xent_backward") == 1
    host = _ours(_losses(kind, smoothing, reduction)[0], backend.get("host"), p, y, weights)
    keras_value, keras_grad = _theirs(theirs, p, y, weights)
    np.testing.assert_allclose(device[0], host[0], rtol=2e-6)
    np.testing.assert_allclose(device[1], host[1], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(device[0], keras_value, rtol=2e-5)
    np.testing.assert_allclose(device[1], keras_grad, rtol=2e-4, atol=1e-6)
    if kind == "binary":
        assert device[1][0, 0] == 0 and device[1][1, 1] == 0  # clipped: no gradient, as Keras


class _Launches:
    """The kernel launcher in use, recording the kernel of each launch."""

    def __init__(self, target):
        self.target, self.kernels = target, []

    def launch(self, program, expression, *args):
        self.kernels.append(str(expression).split("<")[0])
        return self.target.launch(program, expression, *args)

    def __getattr__(self, name):
        return getattr(self.target, name)


def test_what_is_not_fused_keeps_the_chain(xp):
    """Logits, reduction None / mean_with_sample_weight and outputs of more than two axes run the chain of ops, with
    the same values as the host."""
    p, y = _case("binary")
    for loss in (mdnn.losses.BinaryCrossentropy(reduction="mean_with_sample_weight"),
                 mdnn.losses.BinaryCrossentropy(from_logits=True)):
        packed = xp.asarray(np.zeros((N, 4), np.float32))
        assert probability_crossentropy(loss, Tensor(xp.asarray(p), backend=xp), packed, xp) is None
        device = _ours(loss, xp, p, y, None)
        host = _ours(type(loss)(**{k: getattr(loss, k) for k in ("reduction", "from_logits")}), backend.get("host"),
                     p, y, None)
        np.testing.assert_allclose(device[0], host[0], rtol=1e-6)
        np.testing.assert_allclose(device[1], host[1], rtol=1e-5, atol=1e-7)
