"""The host's direct training convolution (``host/_conv_direct``, forward and filter gradient without a column
matrix, with the jit extra) against the loops of ``tests/reference.py``, and the im2col path it stands in for; with
numba off the same calls take the im2col path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import backend
from magmadnn.backend import _host_jit
from magmadnn.backend.host import _conv_direct
from tests import reference

xp = backend.get("host")
HAVE_NUMBA = _host_jit.kernels is not None
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="no numba")


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def _spy(monkeypatch):
    """Count the direct forward's and filter gradient's calls."""
    calls = {"forward": 0, "filter": 0}
    forward, filter_grad = _conv_direct.forward, _conv_direct.filter_grad

    def counted_forward(*args):
        calls["forward"] += 1
        return forward(*args)

    def counted_filter(*args):
        calls["filter"] += 1
        return filter_grad(*args)

    monkeypatch.setattr(_conv_direct, "forward", counted_forward)
    monkeypatch.setattr(_conv_direct, "filter_grad", counted_filter)
    return calls


@st.composite
def direct_cases(draw):
    """Convolutions the direct kernels take: stride and dilation 1, one group, few taps and filters, any padding."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    c, kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    if c * kh * kw > _conv_direct.MAX_TAPS:
        kh = kw = 3
        c = min(c, 3)
    k = draw(st.integers(1, _conv_direct.MAX_FILTERS))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))  # top, bottom, left, right
    h = draw(st.integers(max(1, kh - pads[0] - pads[1]), 9))
    w = draw(st.integers(max(1, kw - pads[2] - pads[3]), 9))
    n = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 999)))
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c, kh, kw)).astype(dtype)
    return x, wt, ((pads[0], pads[1]), (pads[2], pads[3]))


@needs_numba
@settings(max_examples=25, deadline=None)
@given(case=direct_cases(), with_bias=st.booleans(), fused=st.sampled_from([None, "relu", "tanh"]))
def test_direct_forward_and_filter_gradient_match_the_loops(case, with_bias, fused):
    x, w, padding = case
    with pytest.MonkeyPatch.context() as mp:
        calls = _spy(mp)
        bias = np.linspace(-1, 1, w.shape[0]).astype(x.dtype) if with_bias else None
        saved = {}
        y = xp.conv2d_forward(x, w, padding=padding, bias=bias, saved=saved, activation=fused)
        dy = np.random.default_rng(1).standard_normal(y.shape).astype(x.dtype)
        dw = xp.conv2d_backward_filter(dy, x, w.shape, padding=padding, saved=saved)
        dw_unsaved = xp.conv2d_backward_filter(dy, x, w.shape, padding=padding)
    assert calls == {"forward": 1, "filter": 2} and "cols" not in saved
    ref = reference.conv2d_ref(x, w, padding=padding)
    if with_bias:
        ref = ref + bias.reshape(1, -1, 1, 1)
    if fused is not None:
        ref = reference.activation_ref(fused, ref)
    assert y.dtype == x.dtype and y.shape == ref.shape and dw.dtype == x.dtype and dw.shape == w.shape
    np.testing.assert_allclose(y, ref, **tol(x.dtype))
    _, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, padding=padding)
    np.testing.assert_allclose(dw, dw_ref, **tol(x.dtype))
    np.testing.assert_array_equal(dw_unsaved, dw)


@needs_numba
def test_direct_path_equals_the_im2col_path_on_lenet5s_first_convolution(monkeypatch):
    """LeNet-5's first convolution at batch 64 ('same' 5x5 on 28x28, 6 filters, ReLU) takes the direct kernels and
    gives the im2col path's output and filter gradient to float rounding; NaN in the input propagates."""
    rng = np.random.default_rng(4)
    x = rng.random((64, 1, 28, 28), dtype=np.float32)
    x[3, 0, 10, 10] = np.nan
    w = rng.standard_normal((6, 1, 5, 5)).astype(np.float32) * 0.2
    b = rng.standard_normal(6).astype(np.float32)
    dy = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    calls = _spy(monkeypatch)
    clean_x = x.copy()
    clean_x[3, 0, 10, 10] = 0.0

    def run(inputs):
        saved = {}
        y = xp.conv2d_forward(inputs, w, padding=(2, 2), bias=b, saved=saved, activation="relu")
        return y, xp.conv2d_backward_filter(dy, inputs, w.shape, padding=(2, 2), saved=saved), saved

    (y, dw_nan, _), (y_clean, dw, _) = run(x), run(clean_x)
    assert calls == {"forward": 2, "filter": 2}
    monkeypatch.setattr(_conv_direct, "usable", lambda *args: False)
    (y_ref, _, saved), (y_clean_ref, dw_ref, _) = run(x), run(clean_x)
    assert "cols" in saved and calls == {"forward": 2, "filter": 2}
    np.testing.assert_array_equal(np.isnan(y), np.isnan(y_ref))
    assert np.isnan(y[3, :, 8:13, 8:13]).all() and np.isnan(dw_nan).all()
    np.testing.assert_allclose(y_clean, y_clean_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-5, atol=1e-3)
    assert np.abs(dw_ref).max() > 10  # the tolerance is small against the gradient's size


@pytest.mark.parametrize("what", ["stride", "dilation", "groups", "taps", "filters", "dtype", "no numba"])
def test_other_convolutions_take_the_im2col_path(monkeypatch, what):
    """Strided, dilated, grouped, many-tap, many-filter and mixed-dtype convolutions (and every convolution without
    numba) run as before: the direct kernels are not called, and the result still matches the loops."""
    calls = _spy(monkeypatch)
    rng = np.random.default_rng(5)
    c, k, kh, groups, stride, dilation, wdtype = 1, 4, 3, 1, (1, 1), (1, 1), np.float32
    if what == "stride":
        stride = (2, 1)
    elif what == "dilation":
        dilation = (1, 2)
    elif what == "groups":
        c, groups = 2, 2
    elif what == "taps":
        c = 4  # 4 * 3 * 3 = 36 taps
    elif what == "filters":
        k = _conv_direct.MAX_FILTERS + 1
    elif what == "dtype":
        wdtype = np.float64
    else:
        monkeypatch.setattr(_host_jit, "kernels", None)
    x = rng.standard_normal((2, c, 7, 7)).astype(np.float32)
    w = rng.standard_normal((k, c // groups, kh, 3)).astype(wdtype)
    saved = {}
    y = xp.conv2d_forward(x, w, stride, (1, 1), dilation, groups, saved=saved)
    dy = rng.standard_normal(y.shape).astype(y.dtype)
    dw = xp.conv2d_backward_filter(dy, x, w.shape, stride, (1, 1), dilation, groups, saved=saved)
    assert calls == {"forward": 0, "filter": 0}
    np.testing.assert_allclose(y, reference.conv2d_ref(x, w, stride, (1, 1), dilation, groups), rtol=1e-4, atol=1e-4)
    _, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, stride, (1, 1), dilation, groups)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("direct", [True, False])
def test_lenet5_trains_as_pytorch_does(monkeypatch, direct):
    """Three SGD-momentum steps of zoo.lenet5 on the host (its first convolution direct or through im2col) end at
    PyTorch's weights for the same start, batches and rates."""
    torch = pytest.importorskip("torch")
    if direct and not HAVE_NUMBA:
        pytest.skip("no numba")
    if not direct:
        monkeypatch.setattr(_conv_direct, "usable", lambda *args: False)
    calls = _spy(monkeypatch)
    from magmadnn import zoo
    from magmadnn.optimizers import SGD

    model = zoo.lenet5()
    model.compile(optimizer=SGD(0.05, momentum=0.9), loss="cross_entropy", seed=0, device="host")
    start = [np.array(w) for w in model.get_weights()]
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                        nn.Linear(84, 10)).double()
    params = list(net.parameters())
    with torch.no_grad():
        for p, w in zip(params, start, strict=True):
            p.copy_(torch.from_numpy(w.T if w.ndim == 2 else w))  # Dense kernels are (in, out)
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.random((16, 1, 28, 28), dtype=np.float32)
        y = rng.integers(0, 10, 16)
        model.train_on_batch(x, y)
        opt.zero_grad()
        nn.functional.cross_entropy(net(torch.from_numpy(x).double()), torch.from_numpy(y)).backward()
        opt.step()
    assert calls["forward"] == (3 if direct else 0) and calls["filter"] == calls["forward"]
    for got, p in zip(model.get_weights(), params, strict=True):
        want = p.detach().numpy()
        np.testing.assert_allclose(np.asarray(got), want.T if want.ndim == 2 else want, rtol=1e-4, atol=2e-5)
