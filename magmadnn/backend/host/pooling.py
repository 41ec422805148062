"""Host pooling: max and average over (H, W), looping over the window offsets only (each step one vectorised op
on (N, C, Ho, Wo)); 2x2 stride-2 max pooling through ``_host_jit`` when numba is there."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _host_jit, geometry
from ._common import same_objects
from .conv import _pad_input, _pads


def _geometry(x_shape, window, stride, padding):
    """``((wh, ww), (sh, sw), pads, ho, wo, two)`` (``two``: 2x2 windows, stride 2, no padding: see
    :func:`_is_max_2x2`)."""
    (wh, ww), (sh, sw), pads = geometry.pair(window), geometry.pair(stride), _pads(padding)
    t, b, l, r = pads
    ho, wo = geometry.output_hw(x_shape[2:], (wh, ww), (sh, sw), ((t, b), (l, r)))
    return (wh, ww), (sh, sw), pads, ho, wo, _is_max_2x2("max", (wh, ww), (sh, sw), pads)


#: :func:`_geometry` of a pooling's input shape (by value) and window, stride, padding (by identity), once
_pool_geometry = same_objects(_geometry, by_value=1)


def _offset_slices(i, j, ho, wo, stride):
    sh, sw = stride
    return (slice(None), slice(None), slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))


def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max or average pooling over (H, W) -> ``(y, ctx)``.

    Max ignores padding (padded with -inf); the gradient goes to the first maximum of each window (row-major), and
    ``ctx`` is that window offset. Average divides by the number of real (unpadded) elements in each window, and
    ``ctx`` is that count. Both loop over the window offsets only, each step one vectorised op on (N, C, Ho, Wo).
    """
    if mode not in ("max", "avg"):
        raise ValueError(f"pool2d_forward: unknown mode {mode!r}; expected 'max' or 'avg'")
    (wh, ww), st, pads, ho, wo, two = _pool_geometry(x.shape, window, stride, padding)
    jit = _host_jit.kernels
    if jit is not None and two and mode == "max":
        y = np.empty((x.shape[0], x.shape[1], ho, wo), dtype=x.dtype)
        idx = np.empty(y.shape, dtype=np.uint8)
        jit.max_pool2x2_forward(np.ascontiguousarray(x), y, idx)
        return y, idx
    if st == (wh, ww) and not any(pads):
        views = _window_planes(x, wh, ww, ho, wo)
    else:
        xp = _pad_input(x, pads, fill=-np.inf if mode == "max" else 0.0)
        views = [xp[_offset_slices(k // ww, k % ww, ho, wo, st)] for k in range(wh * ww)]
    if mode == "avg":
        y = np.array(views[0])
        for v in views[1:]:
            y += v
        counts = _avg_counts(x.shape, (wh, ww), st, pads, ho, wo, x.dtype)
        y /= counts
        return y, counts
    y = np.array(views[0]) if len(views) == 1 else np.maximum(views[0], views[1])
    for v in views[2:]:
        np.maximum(y, v, out=y)
    # offset of the first maximum = number of leading offsets whose value differs from the max
    not_yet = np.not_equal(views[0], y)
    idx = not_yet.astype(np.uint8 if len(views) < 256 else np.int32)
    for v in views[1:-1]:
        not_yet &= np.not_equal(v, y)
        idx += not_yet
    return y, idx


def _window_planes(x, wh, ww, ho, wo):
    """Non-overlapping windows: the wh*ww window offsets of x as contiguous (N, C, Ho, Wo) planes, made by one
    strided copy, so that the reductions after it run on contiguous arrays instead of short strided runs."""
    n, c = x.shape[:2]
    sn, sc, sh, sw = x.strides
    view = as_strided(x, shape=(wh, ww, n, c, ho, wo), strides=(sh, sw, sn, sc, sh * wh, sw * ww), writeable=False)
    planes = np.empty(view.shape, dtype=x.dtype)
    np.copyto(planes, view)
    return list(planes.reshape(wh * ww, n, c, ho, wo))


def _is_max_2x2(mode, window, stride, pads) -> bool:
    """The common max pooling that the optional JIT kernels cover: 2x2 windows, stride 2, no padding."""
    return mode == "max" and tuple(window) == (2, 2) and tuple(stride) == (2, 2) and not any(pads)


_ONEHOT = {}


def _onehot(dtype):
    """The 4x4 identity in ``dtype`` (one per dtype): row k is the gradient's mask of window offset k."""
    eye = _ONEHOT.get(dtype)
    if eye is None:
        eye = _ONEHOT[dtype] = np.eye(4, dtype=dtype)
    return eye


def _avg_counts(x_shape, window, stride, pads, ho, wo, dtype):
    if not any(pads):
        return np.asarray(window[0] * window[1], dtype=dtype)
    ones_p = _pad_input(np.ones((1, 1) + tuple(x_shape[2:]), dtype=dtype), pads)
    counts = np.zeros((1, 1, ho, wo), dtype=dtype)
    for k in range(window[0] * window[1]):
        counts += ones_p[_offset_slices(k // window[1], k % window[1], ho, wo, stride)]
    return counts


def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    """dx of ``pool2d_forward``; ``ctx`` is what the forward returned."""
    if mode not in ("max", "avg"):
        raise ValueError(f"pool2d_backward: unknown mode {mode!r}; expected 'max' or 'avg'")
    (wh, ww), st, pads, ho, wo, two = _pool_geometry(x.shape, window, stride, padding)
    jit = _host_jit.kernels
    if jit is not None and two and mode == "max":
        dx = np.empty(x.shape, dtype=dy.dtype)
        jit.max_pool2x2_backward(np.ascontiguousarray(dy), np.ascontiguousarray(ctx), dx, _onehot(dx.dtype))
        return dx
    t, b, l, r = pads
    n, c, h, w = x.shape
    dxp = np.zeros((n, c, h + t + b, w + l + r), dtype=dy.dtype)
    overlapping = st[0] < wh or st[1] < ww
    g = dy / ctx if mode == "avg" else dy
    for k in range(wh * ww):
        target = dxp[_offset_slices(k // ww, k % ww, ho, wo, st)]
        if mode == "avg":
            part = g
        elif overlapping:
            part = np.multiply(g, ctx == k)
        else:  # each input pixel is in at most one window: write in place, no temporary
            np.multiply(g, ctx == k, out=target)
            continue
        if overlapping:
            target += part
        else:
            target[...] = part
    if any(pads):
        return np.ascontiguousarray(dxp[:, :, t : t + h, l : l + w])
    return dxp
