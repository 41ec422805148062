"""Hypothesis strategies shared by the tests: convolution and pooling problems (NCHW).

Each strategy takes the ranges its callers need (keyword maxima, minimum 1); the geometry is drawn first, then the
values from a drawn seed. A ``padding`` is ``(ph, pw)`` (both sides) or, with ``asymmetric=True``,
``((top, bottom), (left, right))`` -- the two forms :mod:`tests.reference` accepts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

FLOATS = (np.float32, np.float64)


def seeds():
    """Seeds for ``np.random.default_rng``."""
    return st.integers(0, 2**32 - 1)


class ConvGeometry(NamedTuple):
    x_shape: tuple
    w_shape: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int


class ConvCase(NamedTuple):
    x: np.ndarray
    w: np.ndarray
    b: np.ndarray
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int


class PoolCase(NamedTuple):
    x: np.ndarray
    window: tuple
    stride: tuple
    padding: tuple


def _pair(draw, high, low=1):
    return draw(st.integers(low, high)), draw(st.integers(low, high))


@st.composite
def conv_geometries(draw, groups=(1, 2), channels=2, filters=2, kernel=3, stride=2, dilation=2, padding=2,
                    asymmetric=False, batch=2, side=(1, 7), valid=True):
    """A convolution: ``groups`` sampled from a sequence, ``channels``/``filters`` per group, each spatial size in
    ``side`` (raised to the smallest the window fits in when ``valid``; from 1 regardless when not)."""
    g = draw(st.sampled_from(groups))
    cg, kg = draw(st.integers(1, channels)), draw(st.integers(1, filters))
    kh, kw = _pair(draw, kernel)
    s, d = _pair(draw, stride), _pair(draw, dilation)
    if asymmetric:
        pads = (_pair(draw, padding, 0), _pair(draw, padding, 0))
    else:
        ph, pw = _pair(draw, padding, 0)
        pads = ((ph, ph), (pw, pw))
    sizes = []
    for k, di, p in zip((kh, kw), d, pads):
        low = max(1, di * (k - 1) + 1 - sum(p)) if valid else 1
        sizes.append(draw(st.integers(max(side[0], low), max(side[1], low))))
    return ConvGeometry((draw(st.integers(1, batch)), cg * g, *sizes), (kg * g, cg, kh, kw), s,
                        pads if asymmetric else (pads[0][0], pads[1][0]), d, g)


@st.composite
def conv_cases(draw, dtypes=(np.float64,), **geometry):
    """A convolution with standard-normal x, w and bias b of a dtype from ``dtypes`` (the geometry as
    :func:`conv_geometries`)."""
    gm = draw(conv_geometries(**geometry))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(seeds()))
    x, w, b = (rng.standard_normal(shape).astype(dtype) for shape in (gm.x_shape, gm.w_shape, gm.w_shape[:1]))
    return ConvCase(x, w, b, gm.stride, gm.padding, gm.dilation, gm.groups)


def _pool_limit(k):
    return k - 1


@st.composite
def pool_geometries(draw, window=3, stride=3, pad_limit=_pool_limit, asymmetric=False, batch=2, channels=2,
                    side=7, valid=True):
    """A pooling: ``(x_shape, window, stride, padding)``; each pad at most ``pad_limit(window)``, each spatial size
    from the window (from 1 when not ``valid``) to ``side``."""
    win, s = _pair(draw, window), _pair(draw, stride)
    if asymmetric:
        padding = tuple((draw(st.integers(0, pad_limit(k))), draw(st.integers(0, pad_limit(k)))) for k in win)
    else:
        padding = tuple(draw(st.integers(0, pad_limit(k))) for k in win)
    n, c = draw(st.integers(1, batch)), draw(st.integers(1, channels))
    h, w = (draw(st.integers(k if valid else 1, max(k, side))) for k in win)
    return (n, c, h, w), win, s, padding


@st.composite
def pool_cases(draw, dtypes=(np.float64,), values="normal", **geometry):
    """A pooling problem ``(x, window, stride, padding)`` (geometry as :func:`pool_geometries`). ``values``:
    "normal" (standard normal), "ties" (half the time rounded to integers: many tied maxima) or "distinct" (a
    permutation: every window has one maximum)."""
    shape, win, s, padding = draw(pool_geometries(**geometry))
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(seeds()))
    if values == "distinct":
        x = rng.permutation(np.prod(shape)).reshape(shape) / 7.0
    else:
        x = rng.standard_normal(shape)
        if values == "ties" and draw(st.booleans()):
            x = np.round(x)
    return PoolCase(x.astype(dtype), win, s, padding)
