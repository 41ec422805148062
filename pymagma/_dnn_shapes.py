"""Shape inference of :mod:`pymagma.dnn`'s convolution and pooling: plain Python, no GPU (a float size is a
TypeError, never truncated). ``pymagma.dnn`` re-exports both functions."""

from __future__ import annotations

from . import _checks


def _tuple2(value, name: str) -> tuple[int, int]:
    """An int or a pair of ints (NumPy integers too) as a pair; a float such as 1.5 is a TypeError, never truncated."""
    try:
        pair = _checks.sizes(value, name)
    except TypeError as exc:
        raise TypeError(f"{exc}; {name} must be an int or a pair of ints") from None
    if not hasattr(value, "__iter__"):
        pair = pair * 2
    if len(pair) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return pair


def conv2d_output_shape(x_shape, w_shape, stride=1, padding=0, dilation=1, groups: int = 1) -> tuple[int, ...]:
    """Output shape (N, K, Ho, Wo) of a 2-D cross-correlation of x (N, C, H, W) with w (K, C/groups, kh, kw)."""
    stride, padding, dilation = _tuple2(stride, "stride"), _tuple2(padding, "padding"), _tuple2(dilation, "dilation")
    groups = _checks.integer(groups, "groups")
    x_shape, w_shape = _checks.sizes(x_shape, "x shape"), _checks.sizes(w_shape, "w shape")
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"conv2d needs 4-D x (N, C, H, W) and w (K, C/groups, kh, kw); got {x_shape} and {w_shape}")
    n, c, h, w = x_shape
    k, cg, kh, kw = w_shape
    if min(n, c, h, w, k, cg, kh, kw) <= 0:
        raise ValueError(f"conv2d shapes must be positive: x {tuple(x_shape)}, w {tuple(w_shape)}")
    if min(stride) <= 0 or min(dilation) <= 0 or min(padding) < 0:
        raise ValueError(f"conv2d needs stride >= 1, dilation >= 1, padding >= 0; got {stride}, {dilation}, {padding}")
    if groups <= 0 or c != cg * groups or k % groups:
        raise ValueError(f"conv2d with groups={groups}: x has {c} channels, w expects {cg}*{groups}; "
                         f"{k} filters must divide into the groups")
    out = []
    for size, kernel, s, p, d in zip((h, w), (kh, kw), stride, padding, dilation):
        span = d * (kernel - 1) + 1
        if size + 2 * p < span:
            raise ValueError(f"conv2d: dilated kernel extent {span} exceeds the padded input {size + 2 * p}")
        out.append((size + 2 * p - span) // s + 1)
    return (n, k, *out)


def pool2d_output_shape(x_shape, window, stride=None, padding=0) -> tuple[int, ...]:
    """Output shape (N, C, Ho, Wo) of 2-D pooling (stride defaults to the window)."""
    window = _tuple2(window, "window")
    stride = window if stride is None else _tuple2(stride, "stride")
    padding = _tuple2(padding, "padding")
    x_shape = _checks.sizes(x_shape, "x shape")
    if len(x_shape) != 4:
        raise ValueError(f"pool2d needs a 4-D x (N, C, H, W), got {x_shape}")
    if min(window) <= 0 or min(stride) <= 0 or min(padding) < 0:
        raise ValueError(f"pool2d needs window >= 1, stride >= 1, padding >= 0; got {window}, {stride}, {padding}")
    if min(x_shape) <= 0:
        raise ValueError(f"pool2d shape must be positive, got {x_shape}")
    n, c, h, w = x_shape
    out = []
    for size, k, s, p in zip((h, w), window, stride, padding):
        if size + 2 * p < k:
            raise ValueError(f"pool2d: window {k} exceeds the padded input {size + 2 * p}")
        out.append((size + 2 * p - k) // s + 1)
    return (n, c, *out)
