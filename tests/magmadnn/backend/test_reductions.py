"""The op set's reductions (``ops/reductions.py``: sum, mean, argmax, sum_to_shape, channel_sum) on every backend,
against loops."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.magmadnn.backend._conformance import arrays, get, put, tol


def reduce_reference(a, axis, keepdims, fn):
    """Reduce with a plain Python function over the flattened axes."""
    axes = tuple(range(a.ndim)) if axis is None else tuple(ax % a.ndim for ax in np.atleast_1d(axis))
    out_shape = tuple(1 if i in axes else n for i, n in enumerate(a.shape))
    out = np.empty(out_shape)
    for pos in np.ndindex(out_shape):
        sel = tuple(slice(None) if i in axes else slice(p, p + 1) for i, p in enumerate(pos))
        out[pos] = fn([float(v) for v in a[sel].ravel()])
    return out if keepdims else out.reshape(tuple(n for i, n in enumerate(a.shape) if i not in axes))


@given(a=arrays(max_dims=3), data=st.data(), keepdims=st.booleans())
def test_sum_mean(xp, a, data, keepdims):
    pairs = [st.just((0, -1))] if a.ndim > 1 else []
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1), *pairs))
    t, d = tol(a.dtype), put(xp, a)
    np.testing.assert_allclose(get(xp, xp.sum(d, axis, keepdims)), reduce_reference(a, axis, keepdims, math.fsum), **t)
    mean_ref = reduce_reference(a, axis, keepdims, lambda v: math.fsum(v) / len(v))
    np.testing.assert_allclose(get(xp, xp.mean(d, axis, keepdims)), mean_ref, **t)


@given(a=arrays(min_dims=2, max_dims=2), ties=st.booleans())
def test_argmax(xp, a, ties):
    if ties:
        a = np.round(a).astype(a.dtype)
    got = get(xp, xp.argmax(put(xp, a), axis=1))
    assert got.dtype == np.int64
    for i in range(a.shape[0]):
        row = list(a[i])
        assert got[i] == row.index(max(row))


@given(data=st.data())
def test_sum_to_shape_undoes_broadcasting(xp, data):
    target = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3)))
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    full = lead + tuple(n if n > 1 else data.draw(st.integers(1, 3)) for n in target)
    a = data.draw(arrays(shape=full))
    expected = np.zeros(target)
    for pos in np.ndindex(full):
        dst = tuple(0 if n == 1 else p for p, n in zip(pos[len(lead) :], target))
        expected[dst] += float(a[pos])
    got = xp.sum_to_shape(put(xp, a), target)
    assert got.shape == target
    np.testing.assert_allclose(get(xp, got), expected, **tol(a.dtype))


@given(x=arrays(min_dims=2, max_dims=4))
def test_channel_sum(xp, x):
    expected = np.zeros(x.shape[1])
    for pos in np.ndindex(x.shape):
        expected[pos[1]] += float(x[pos])
    got = get(xp, xp.channel_sum(put(xp, x)))
    assert got.shape == (x.shape[1],) and got.dtype == x.dtype
    np.testing.assert_allclose(got, expected, **tol(x.dtype))
