"""Dense on x of rank > 2 (the rows of one matrix product, its 2-D <-> rank-3 views C-order reshapes): contiguous
and non-contiguous x, on the host and on the simulated device, the call planned and replayed, against NumPy (forward
and every gradient)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend
from magmadnn import functional as F
from magmadnn.autograd import Tensor
from tests.magmadnn.backends import HOST_SIMULATOR_GPU, backend_of

RNG = np.random.default_rng(38)


@pytest.fixture(params=HOST_SIMULATOR_GPU)
def xp(request):
    yield from backend_of(request.param)


def _reference(x, w, b, g):
    """(y, dx, dw, db) of ``x @ w + b`` on the last axis, NumPy in float64."""
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    y = x64 @ w64 + b
    rows = x64.reshape(-1, x.shape[-1])
    grows = g64.reshape(-1, g.shape[-1])
    return y, (grows @ w64.T).reshape(x.shape), rows.T @ grows, grows.sum(0)


@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed-view"])
@pytest.mark.parametrize("activation", [None, "gelu"])
def test_rank3_dense_views_equal_numpy(xp, transposed, activation):
    x = RNG.standard_normal((3, 2, 4)).astype(np.float32)  # (time, batch, in): transposed below to (batch, time, in)
    w = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    data = xp.asarray(x)
    if transposed:  # a view whose rows are not in memory order: the reshape must copy, in C order
        data = data.transpose((1, 0, 2)) if hasattr(data, "transpose") else np.transpose(data, (1, 0, 2))
        x = x.transpose(1, 0, 2)
    else:
        data = xp.reshape(data, (2, 3, 4))
        x = x.reshape(2, 3, 4)
    xt = Tensor(data, requires_grad=True, backend=xp)
    wt = Tensor(xp.asarray(w), requires_grad=True, backend=xp)
    bt = Tensor(xp.asarray(b), requires_grad=True, backend=xp)
    for _ in range(2):  # the first call plans, the second replays the plan
        for t in (xt, wt, bt):
            t.grad = None
        y = F.dense(xt, wt, bt, activation=activation)
        g = RNG.standard_normal(y.shape).astype(np.float32)
        y.backward(Tensor(xp.asarray(g), backend=xp))
        ref_y, dx, dw, db = _reference(x, w, b, g)
        if activation == "gelu":  # the activation's gradient is the epilogue's: compare through a host dense
            host = backend.get("host")
            hx, hw, hb = (Tensor(np.array(a), requires_grad=True, backend=host) for a in (x, w, b))
            hy = F.dense(hx, hw, hb, activation="gelu")
            hy.backward(Tensor(g, backend=host))
            ref_y, dx, dw, db = hy.data, np.asarray(hx.grad), np.asarray(hw.grad), np.asarray(hb.grad)
        assert y.shape == (2, 3, 5)
        np.testing.assert_allclose(np.asarray(xp.to_numpy(y.data)), ref_y, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(np.asarray(xp.to_numpy(xt.grad)), dx, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(np.asarray(xp.to_numpy(wt.grad)), dw, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(np.asarray(xp.to_numpy(bt.grad)), db, rtol=2e-5, atol=2e-5)
