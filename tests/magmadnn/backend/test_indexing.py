"""The op set's gathers, tiling, broadcasting and cumulative sums (``ops/indexing.py``) on every backend, each
against PyTorch (the gathers' backward against its autograd)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.magmadnn.backend._conformance import get, put, tol

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_take_and_its_backward_match_torch(xp, axis):
    x = RNG.standard_normal((3, 4, 5))
    n = x.shape[axis]
    idx = np.array([[0, n - 1, -1], [1, 1, -n]], np.int64)  # repeats, negatives
    out = xp.take(*put(xp, x, idx), axis)
    t = torch.tensor(x, requires_grad=True)
    picked = torch.index_select(t, axis, torch.tensor(np.where(idx < 0, idx + n, idx).reshape(-1)))
    want = picked.reshape(*x.shape[:axis], *idx.shape, *x.shape[axis + 1:])
    np.testing.assert_array_equal(get(xp, out), want.detach().numpy())
    dy = RNG.standard_normal(tuple(want.shape))
    want.backward(torch.tensor(dy))
    got = xp.take_backward(put(xp, dy), put(xp, idx), axis, n)
    np.testing.assert_allclose(get(xp, got), t.grad.numpy(), **tol(np.float64))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_along_axis_and_its_backward_match_torch(xp, axis):
    x = RNG.standard_normal((3, 4, 5))
    a = axis % 3
    shape = list(x.shape)
    shape[a] = 6
    idx = RNG.integers(-x.shape[a], x.shape[a], shape)
    out = xp.take_along_axis(*put(xp, x, idx), a)
    t = torch.tensor(x, requires_grad=True)
    want = torch.gather(t, a, torch.tensor(np.where(idx < 0, idx + x.shape[a], idx)))
    np.testing.assert_array_equal(get(xp, out), want.detach().numpy())
    dy = RNG.standard_normal(tuple(want.shape))
    want.backward(torch.tensor(dy))
    got = xp.take_along_axis_backward(put(xp, dy), put(xp, idx), a, x.shape[a])
    np.testing.assert_allclose(get(xp, got), t.grad.numpy(), **tol(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_tile_and_broadcast_to(xp, dtype):
    x = (RNG.standard_normal((2, 1, 3)) * 3).astype(dtype)
    t = torch.tensor(x)
    np.testing.assert_array_equal(get(xp, xp.tile(put(xp, x), (2, 3, 1))), torch.tile(t, (2, 3, 1)).numpy())
    got = get(xp, xp.broadcast_to(put(xp, x), (4, 2, 5, 3)))
    assert got.flags.writeable and got.dtype == dtype
    np.testing.assert_array_equal(got, torch.broadcast_to(t, (4, 2, 5, 3)).numpy())


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_cumsum_matches_torch(xp, axis, exclusive, reverse):
    x = RNG.standard_normal((4, 5))
    t = torch.tensor(x).flip(axis) if reverse else torch.tensor(x)
    want = torch.cumsum(t, axis) - (t if exclusive else 0)
    want = want.flip(axis) if reverse else want
    np.testing.assert_allclose(get(xp, xp.cumsum(put(xp, x), axis, exclusive, reverse)), want.numpy(),
                               **tol(np.float64))
    ints = np.arange(12, dtype=np.int64).reshape(3, 4)
    got = get(xp, xp.cumsum(put(xp, ints), axis, exclusive, reverse))
    t = torch.tensor(ints).flip(axis) if reverse else torch.tensor(ints)
    want = torch.cumsum(t, axis) - (t if exclusive else 0)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, (want.flip(axis) if reverse else want).numpy())
