"""Joining and resizing: concatenation along an axis, slicing and zero-padding along an axis, reversing,
nearest-neighbour upsampling."""

from __future__ import annotations

import numbers

from ..autograd import Function, Tensor
from ..backend import geometry
from ._base import _as_tensor, _check_axis, _need_ndim, _same_dtype

__all__ = ["concatenate", "upsample_nearest2d", "slice_axis", "reverse", "pad_axis"]


class ConcatenateFunction(Function):
    def forward(self, *arrays, axis):
        self.axis, self.sizes = axis, [a.shape[axis] for a in arrays]
        return self.xp.concatenate(list(arrays), axis)

    def backward(self, g):
        pieces = self.xp.split(g, self.sizes, self.axis)
        return tuple(p if need else None for p, need in zip(pieces, self.needs_input_grad))


def concatenate(tensors, axis=-1) -> Tensor:
    """The tensors (a list, shapes equal but along ``axis``) joined along ``axis``; the gradient is split back."""
    fn = "concatenate"
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError(f"{fn}: expected a non-empty list of tensors, got {tensors!r}")
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    tensors = [_as_tensor(t, like) for t in tensors]
    first = tensors[0]
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"{fn}: axis must be an int, got {axis!r}")
    _check_axis(fn, first, axis)
    axis = int(axis) % first.ndim
    for t in tensors:
        if t.ndim != first.ndim or any(n != m for d, (n, m) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"{fn}: shapes {[t.shape for t in tensors]} must be equal except along axis {axis}")
    _same_dtype(fn, **{f"tensors[{i}]": t for i, t in enumerate(tensors)})
    return ConcatenateFunction.apply(*tensors, axis=axis)


class UpsampleNearest2dFunction(Function):
    def forward(self, x, size):
        self.size = size
        return self.xp.upsample_nearest2d(x, size)

    def backward(self, g):
        return (self.xp.upsample_nearest2d_backward(g, self.size),)


def upsample_nearest2d(x, size=2) -> Tensor:
    """Nearest-neighbour upsampling of x (N, C, H, W) by integer factors ``size`` (int or pair)."""
    fn = "upsample_nearest2d"
    x = _as_tensor(x)
    _need_ndim(x, 4, fn, "x", "(N, C, H, W)")
    size = geometry.int_pair(size, "size", fn)
    _same_dtype(fn, x=x)
    return UpsampleNearest2dFunction.apply(x, size=size)


class SliceFunction(Function):
    def forward(self, x, axis, start, stop):
        self.axis, self.shape, self.bounds = axis, x.shape, (start, stop)
        sizes = [start, stop - start, x.shape[axis] - stop]
        if sizes == [0, x.shape[axis], 0]:
            return self.xp.copy(x)
        pieces = self.xp.split(x, [s for s in sizes if s], axis)
        return pieces[1 if start else 0]

    def backward(self, g):
        xp, (start, stop) = self.xp, self.bounds
        parts = []
        for size in (start, None, self.shape[self.axis] - stop):
            if size is None:
                parts.append(g)
            elif size:
                shape = list(self.shape)
                shape[self.axis] = size
                parts.append(xp.zeros(tuple(shape), g.dtype))
        return (xp.concatenate(parts, self.axis) if len(parts) > 1 else g,)


class PadFunction(Function):
    def forward(self, x, axis, before, after):
        self.axis, self.sizes = axis, [before, x.shape[axis], after]
        parts = []
        for size in (before, None, after):
            if size is None:
                parts.append(x)
            elif size:
                shape = list(x.shape)
                shape[axis] = size
                parts.append(self.xp.zeros(tuple(shape), x.dtype))
        return self.xp.concatenate(parts, axis) if len(parts) > 1 else self.xp.copy(x)

    def backward(self, g):
        before, size, after = self.sizes
        if not (before or after):
            return (g,)
        return (self.xp.split(g, [s for s in self.sizes if s], self.axis)[1 if before else 0],)


def pad_axis(x, axis, before, after) -> Tensor:
    """``x`` with ``before`` zeros ahead of it and ``after`` zeros behind it along ``axis`` (sizes >= 0)."""
    x = _as_tensor(x)
    _check_axis("pad_axis", x, axis)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0 for v in (before, after)):
        raise ValueError(f"pad_axis: before and after must be integers >= 0, got {before!r}, {after!r}")
    return PadFunction.apply(x, axis=int(axis) % x.ndim, before=int(before), after=int(after))


def slice_axis(x, axis, start, stop) -> Tensor:
    """``x[..., start:stop, ...]`` along ``axis`` (0 <= start < stop <= size); the gradient is zero-padded back."""
    fn = "slice_axis"
    x = _as_tensor(x)
    _check_axis(fn, x, axis)
    axis = int(axis) % x.ndim
    size = x.shape[axis]
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (start, stop)) or \
            not 0 <= start < stop <= size:
        raise ValueError(f"{fn}: need integers 0 <= start < stop <= {size} (axis {axis} of shape {x.shape}), got "
                         f"start={start!r}, stop={stop!r}")
    return SliceFunction.apply(x, axis=axis, start=int(start), stop=int(stop))


class ReverseFunction(Function):
    def forward(self, x, axis):
        self.axis = axis
        return self._flip(x)

    def _flip(self, a):
        n = a.shape[self.axis]
        return self.xp.concatenate(self.xp.split(a, [1] * n, self.axis)[::-1], self.axis) if n > 1 else a

    def backward(self, g):
        return (self._flip(g),)


def reverse(x, axis=1) -> Tensor:
    """``x`` with the order of its entries along ``axis`` reversed (a sequence's time steps: axis 1)."""
    x = _as_tensor(x)
    _check_axis("reverse", x, axis)
    return ReverseFunction.apply(x, axis=int(axis) % x.ndim)
