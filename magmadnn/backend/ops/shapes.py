"""Shape and routing: reshape, transpose, concatenate, split and nearest-neighbour upsampling."""

from __future__ import annotations

from ._spec import op


@op
def reshape(a, shape):
    """``a`` with a new shape of the same size (may be a view; never written through)."""


@op
def transpose(a, axes=None):
    """``a`` with permuted axes (reversed when None), as a new array."""


@op
def concatenate(arrays, axis):
    """The arrays (a list of one dtype, shapes equal but along ``axis``) joined along ``axis`` into a new array."""


@op
def split(a, sizes, axis):
    """The inverse of ``concatenate``: a tuple of new arrays, ``sizes[i]`` long along ``axis`` (the sizes sum to
    ``a.shape[axis]``)."""


@op
def upsample_nearest2d(x, size):
    """Nearest-neighbour upsampling of x (N, C, H, W) by integer factors ``size`` (sh, sw) -> (N, C, H sh, W sw):
    ``y[n, c, i, j] = x[n, c, i // sh, j // sw]``."""


@op
def upsample_nearest2d_backward(dy, size):
    """dx of ``upsample_nearest2d``: each input pixel's gradient is the sum of its sh x sw output block."""
