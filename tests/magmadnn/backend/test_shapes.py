"""The op set's shape ops (``ops/shapes.py``: reshape, transpose, concatenate, split, nearest upsampling) on every
backend, against NumPy and ``tests/reference.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import arrays, get, put, tol
from tests.strategies import FLOATS


@given(a=arrays(min_dims=2, max_dims=3))
def test_reshape_transpose(xp, a):
    d = put(xp, a)
    flat = [float(v) for v in a.ravel()]
    assert [float(v) for v in get(xp, xp.reshape(d, (-1,)))] == flat
    axes = tuple(reversed(range(a.ndim)))
    t = get(xp, xp.transpose(d, axes))
    for pos in np.ndindex(a.shape):
        assert t[tuple(reversed(pos))] == a[pos]
    np.testing.assert_array_equal(get(xp, xp.transpose(d)), t)


@given(data=st.data(), rank=st.integers(1, 4), dtype=st.sampled_from(FLOATS))
def test_concatenate_and_split(xp, data, rank, dtype):
    axis = data.draw(st.integers(-rank, rank - 1))
    base = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: sum(s) > 0))
    parts = [data.draw(arrays(shape=tuple(n if d != axis % rank else s for d, n in enumerate(base)), dtype=dtype))
             for s in sizes]
    joined = xp.concatenate([put(xp, p) for p in parts], axis)
    expected = reference.concatenate_ref(parts, axis % rank)
    assert joined.dtype == dtype
    np.testing.assert_array_equal(get(xp, joined), expected)
    whole = put(xp, expected)
    pieces = xp.split(whole, sizes, axis % rank)
    assert len(pieces) == len(parts)
    for piece, part in zip(pieces, parts):
        np.testing.assert_array_equal(get(xp, piece), part)
    xp.sgd_update(whole, xp.ones(whole.shape, dtype), None, 1.0)  # the pieces are new arrays, not views
    for piece, part in zip(pieces, parts):
        np.testing.assert_array_equal(get(xp, piece), part)


def test_concatenate_and_split_reject_what_does_not_fit(xp):
    a, b = put(xp, np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="concatenate"):
        xp.concatenate([a, b], 1)
    with pytest.raises(TypeError, match="concatenate"):
        xp.concatenate([a, put(xp, np.zeros((2, 3), np.float32))], 0)
    with pytest.raises(ValueError, match="split"):
        xp.split(a, [1, 1], 1)


@given(x=arrays(min_dims=4, max_dims=4), size=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 99))
def test_upsample_nearest2d_and_backward(xp, x, size, seed):
    y = xp.upsample_nearest2d(put(xp, x), size)
    np.testing.assert_array_equal(get(xp, y), reference.upsample_nearest2d_ref(x, size))
    dy = np.random.default_rng(seed).uniform(-1, 1, y.shape).astype(x.dtype)
    expected = np.zeros(x.shape)
    for i in range(dy.shape[2]):
        for j in range(dy.shape[3]):
            expected[:, :, i // size[0], j // size[1]] += dy[:, :, i, j]
    dx = xp.upsample_nearest2d_backward(put(xp, dy), size)
    assert dx.dtype == x.dtype
    np.testing.assert_allclose(get(xp, dx), expected, **tol(x.dtype))
