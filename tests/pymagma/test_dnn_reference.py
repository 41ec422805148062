"""Plain NumPy reference implementations for the dnn tests, and checks of those references against PyTorch on the CPU.

The references are written directly from the definitions (loops over output positions), independent of pymagma.
The GPU tests import them; the tests here make sure the references themselves are right.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st


# ------------------------------------------------------------------------------------------------ convolution
def pad2(x, p, value=0.0):
    return np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=value)


def conv_out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(h_out, w_out, k, s, d):
    """For each output position, the row and column slices of the (padded) input it reads."""
    for oh in range(h_out):
        for ow in range(w_out):
            rows = slice(oh * s[0], oh * s[0] + d[0] * (k[0] - 1) + 1, d[0])
            cols = slice(ow * s[1], ow * s[1] + d[1] * (k[1] - 1) + 1, d[1])
            yield oh, ow, rows, cols


def conv2d_ref(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """Direct cross-correlation: y[n, k, oh, ow] = sum over c, i, j of x_pad[n, c, oh*s + i*d, ...] * w[k, c, i, j]."""
    n, c, h, wd = x.shape
    kf, cg, kh, kw = w.shape
    ho = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_out_size(wd, kw, stride[1], padding[1], dilation[1])
    xp = pad2(x, padding)
    y = np.zeros((n, kf, ho, wo), dtype=np.float64)
    kg = kf // groups
    for oh, ow, rows, cols in _windows(ho, wo, (kh, kw), stride, dilation):
        for g in range(groups):
            patch = xp[:, g * cg:(g + 1) * cg, rows, cols]
            y[:, g * kg:(g + 1) * kg, oh, ow] = np.einsum("ncij,kcij->nk", patch, w[g * kg:(g + 1) * kg])
    return y


def conv2d_backward_ref(x, w, dy, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """(dx, dw, db) of conv2d_ref for the output gradient dy, accumulated window by window."""
    kf, cg, kh, kw = w.shape
    xp = pad2(x, padding)
    dxp = np.zeros_like(xp, dtype=np.float64)
    dw = np.zeros(w.shape, dtype=np.float64)
    kg = kf // groups
    for oh, ow, rows, cols in _windows(dy.shape[2], dy.shape[3], (kh, kw), stride, dilation):
        for g in range(groups):
            ks, cs = slice(g * kg, (g + 1) * kg), slice(g * cg, (g + 1) * cg)
            dxp[:, cs, rows, cols] += np.einsum("nk,kcij->ncij", dy[:, ks, oh, ow], w[ks])
            dw[ks] += np.einsum("nk,ncij->kcij", dy[:, ks, oh, ow], xp[:, cs, rows, cols])
    dx = dxp[:, :, padding[0]:padding[0] + x.shape[2], padding[1]:padding[1] + x.shape[3]]
    return dx, dw, dy.sum(axis=(0, 2, 3))


# ---------------------------------------------------------------------------------------------------- pooling
def pool2d_ref(x, window, stride, padding, mode):
    """Max pooling (padding never wins) or average pooling counting the padded zeros."""
    n, c, h, w = x.shape
    ho = (h + 2 * padding[0] - window[0]) // stride[0] + 1
    wo = (w + 2 * padding[1] - window[1]) // stride[1] + 1
    xp = pad2(x, padding, -np.inf if mode == "max" else 0.0)
    y = np.zeros((n, c, ho, wo))
    for oh, ow, rows, cols in _windows(ho, wo, window, stride, (1, 1)):
        patch = xp[:, :, rows, cols]
        y[:, :, oh, ow] = patch.max(axis=(2, 3)) if mode == "max" else patch.sum(axis=(2, 3)) / (window[0] * window[1])
    return y


def pool2d_backward_ref(x, dy, window, stride, padding, mode):
    """dx of pool2d_ref: max routes dy to the (unique) arg-max of each window; average spreads it evenly."""
    xp = pad2(x, padding, -np.inf if mode == "max" else 0.0)
    dxp = np.zeros_like(xp)
    for oh, ow, rows, cols in _windows(dy.shape[2], dy.shape[3], window, stride, (1, 1)):
        patch = xp[:, :, rows, cols]
        if mode == "max":
            flat = patch.reshape(patch.shape[0], patch.shape[1], -1)
            mask = flat == flat.max(axis=2, keepdims=True)
            dxp[:, :, rows, cols] += (mask * dy[:, :, oh, ow][..., None]).reshape(patch.shape)
        else:
            dxp[:, :, rows, cols] += dy[:, :, oh, ow][..., None, None] / (window[0] * window[1])
    return dxp[:, :, padding[0]:padding[0] + x.shape[2], padding[1]:padding[1] + x.shape[3]]


# ----------------------------------------------------------------------------------- softmax and batch norm
def softmax_ref(x, axis_set, log=False):
    """Softmax over the axes in ``axis_set`` (a tuple)."""
    shifted = x - x.max(axis=axis_set, keepdims=True)
    logs = shifted - np.log(np.exp(shifted).sum(axis=axis_set, keepdims=True))
    return logs if log else np.exp(logs)


def batch_norm_ref(x, scale, bias, eps, axes):
    """Training-mode batch norm over ``axes``: (y, mean, inv_std, unbiased var)."""
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    count = np.prod([x.shape[a] for a in axes])
    y = scale * (x - mean) * inv + bias
    return y, mean, inv, var * count / max(count - 1, 1)


def batch_norm_backward_ref(x, dy, scale, eps, axes):
    """(dx, dscale, dbias) of training-mode batch norm, from the textbook formula."""
    count = np.prod([x.shape[a] for a in axes])
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) * inv
    dbias = dy.sum(axis=axes, keepdims=True)
    dscale = (dy * xhat).sum(axis=axes, keepdims=True)
    dx = scale * inv / count * (count * dy - dbias - xhat * dscale)
    return dx, dscale, dbias


# ------------------------------------------------------------------------------------ checks of the references
def _torch():
    torch = pytest.importorskip("torch")
    return torch, torch.nn.functional


@st.composite
def conv_case(draw):
    groups = draw(st.sampled_from([1, 2]))
    cg, kg = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    s, p, d = (draw(st.tuples(st.integers(lo, 2), st.integers(lo, 2))) for lo in (1, 0, 1))
    h = draw(st.integers(d[0] * (kh - 1) + 1, 7))
    w = draw(st.integers(d[1] * (kw - 1) + 1, 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((2, cg * groups, h, w))
    wt = rng.standard_normal((kg * groups, cg, kh, kw))
    return x, wt, s, p, d, groups


@given(conv_case())
def test_reference_conv_matches_torch(case):
    torch, F = _torch()
    x, w, s, p, d, g = case
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = F.conv2d(tx, tw, stride=s, padding=p, dilation=d, groups=g)
    y = conv2d_ref(x, w, s, p, d, g)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    dy = np.random.default_rng(1).standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    dx, dw, db = conv2d_backward_ref(x, w, dy, s, p, d, g)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)))


@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 1), st.sampled_from(["max", "avg"]),
       st.integers(0, 2**32 - 1))
def test_reference_pool_matches_torch(k, s, p, mode, seed):
    torch, F = _torch()
    p = min(p, k // 2)  # torch's limit on padding
    x = np.random.default_rng(seed).standard_normal((2, 3, 6, 5))
    tx = torch.tensor(x, requires_grad=True)
    if mode == "max":
        ty = F.max_pool2d(tx, k, s, p)
    else:
        ty = F.avg_pool2d(tx, k, s, p, count_include_pad=True)
    y = pool2d_ref(x, (k, k), (s, s), (p, p), mode)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    dy = np.random.default_rng(seed + 1).standard_normal(y.shape)
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(pool2d_backward_ref(x, dy, (k, k), (s, s), (p, p), mode), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_reference_softmax_and_batch_norm_match_torch(seed, log):
    torch, F = _torch()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5, 2, 2))
    tsm = F.log_softmax if log else F.softmax
    expected = tsm(torch.tensor(x).reshape(3, -1), dim=1).reshape(x.shape).numpy()
    np.testing.assert_allclose(softmax_ref(x, (1, 2, 3), log), expected, rtol=1e-12, atol=1e-12)
    scale, bias = rng.standard_normal((1, 5, 1, 1)), rng.standard_normal((1, 5, 1, 1))
    tx = torch.tensor(x, requires_grad=True)
    ts, tb = torch.tensor(scale.ravel(), requires_grad=True), torch.tensor(bias.ravel(), requires_grad=True)
    ty = F.batch_norm(tx, None, None, ts, tb, training=True, eps=1e-5)
    y, _, _, _ = batch_norm_ref(x, scale, bias, 1e-5, (0, 2, 3))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal(x.shape)
    ty.backward(torch.tensor(dy))
    dx, dscale, dbias = batch_norm_backward_ref(x, dy, scale, 1e-5, (0, 2, 3))
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(dscale.ravel(), ts.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dbias.ravel(), tb.grad.numpy(), rtol=1e-10, atol=1e-10)
