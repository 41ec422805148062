"""The NumPy references of ``tests/reference.py`` (used by the dnn and op-set tests) against PyTorch on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.strategies import conv_cases, pool_cases


def _torch():
    torch = pytest.importorskip("torch")
    return torch, torch.nn.functional


@given(conv_cases(asymmetric=True))
def test_reference_conv_matches_torch(case):
    torch, F = _torch()
    x, w, _, s, p, d, g = case
    (t, b), (l, r) = p
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = F.conv2d(F.pad(tx, (l, r, t, b)), tw, stride=s, dilation=d, groups=g)
    y = reference.conv2d_ref(x, w, s, p, d, g)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    dy = np.random.default_rng(1).standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    dx, dw, db = reference.conv2d_backward_ref(x, w, dy, s, p, d, g)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)))


@given(pool_cases(values="ties", pad_limit=lambda k: k // 2, channels=3), st.sampled_from(reference.POOL_MODES))
def test_reference_pool_matches_torch(case, mode):
    """Every mode, with ties (both pick the first maximum) and torch's limit on padding (half the window)."""
    torch, F = _torch()
    x, k, s, p = case
    tx = torch.tensor(x, requires_grad=True)
    if mode == "max":
        ty = F.max_pool2d(tx, k, s, p)
    else:
        ty = F.avg_pool2d(tx, k, s, p, count_include_pad=mode == "avg")
    y = reference.pool2d_ref(x, k, s, p, mode)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    dy = np.random.default_rng(1).standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(reference.pool2d_backward_ref(x, dy, k, s, p, mode), tx.grad.numpy(), rtol=1e-12,
                               atol=1e-12)


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_reference_softmax_and_batch_norm_match_torch(seed, log):
    torch, F = _torch()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5, 2, 2))
    tsm = F.log_softmax if log else F.softmax
    expected = tsm(torch.tensor(x).reshape(3, -1), dim=1).reshape(x.shape).numpy()
    np.testing.assert_allclose(reference.softmax_ref(x, (1, 2, 3), log), expected, rtol=1e-12, atol=1e-12)
    scale, bias = rng.standard_normal((1, 5, 1, 1)), rng.standard_normal((1, 5, 1, 1))
    tx = torch.tensor(x, requires_grad=True)
    ts, tb = torch.tensor(scale.ravel(), requires_grad=True), torch.tensor(bias.ravel(), requires_grad=True)
    ty = F.batch_norm(tx, None, None, ts, tb, training=True, eps=1e-5)
    y, _, _, _ = reference.batch_norm_ref(x, scale, bias, 1e-5, (0, 2, 3))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal(x.shape)
    ty.backward(torch.tensor(dy))
    dx, dscale, dbias = reference.batch_norm_backward_ref(x, dy, scale, 1e-5, (0, 2, 3))
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(dscale.ravel(), ts.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dbias.ravel(), tb.grad.numpy(), rtol=1e-10, atol=1e-10)


@given(st.sampled_from(reference.ACTIVATION_KINDS), st.sampled_from([0.2, 1.0, 2.5]), st.integers(0, 2**32 - 1))
def test_reference_activations_match_torch(kind, alpha, seed):
    torch, F = _torch()
    x = np.random.default_rng(seed).standard_normal(50) * 4
    t = torch.tensor(x)
    expected = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": F.relu,
                "leaky_relu": lambda v: F.leaky_relu(v, alpha), "elu": lambda v: F.elu(v, alpha),
                "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "silu": F.silu,
                "softplus": F.softplus, "softsign": F.softsign, "selu": F.selu, "hard_sigmoid": F.hardsigmoid,
                "exponential": torch.exp, "clipped_relu": lambda v: F.hardtanh(v, 0.0, alpha),
                "swish": lambda v: v * torch.sigmoid(alpha * v)}[kind](t).numpy()
    np.testing.assert_allclose(reference.activation_ref(kind, x, alpha), expected, rtol=1e-12, atol=1e-12)
