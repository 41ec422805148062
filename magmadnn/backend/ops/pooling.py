"""2-D max and average pooling."""

from __future__ import annotations

from ._spec import op


@op
def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max or average pooling of x (N, C, H, W) -> ``(y, ctx)``."""


@op
def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    """dx of ``pool2d_forward``."""
