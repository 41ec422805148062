"""2-D convolution (cross-correlation), NCHW, with groups, dilation, asymmetric padding and a fused bias and
activation."""

from __future__ import annotations

from ._spec import op


@op
def conv2d_forward(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=None, saved=None,
                   activation=None):
    """Cross-correlation of x (N, C, H, W) with w (K, C/groups, R, S) -> (N, K, Ho, Wo), plus ``bias`` (K,), then
    ``activation`` (one of :data:`.geometry.FUSED_ACTIVATIONS`) when given. ``saved``, when a dict, may be filled with
    whatever lets ``conv2d_backward_filter`` skip work."""


@op
def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dx (N, C, H, W) of ``conv2d_forward``."""


@op
def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    """dw (K, C/groups, R, S) of ``conv2d_forward``; ``saved`` is the dict the forward filled (optional)."""


@op
def conv2d_backward_bias(dy):
    """db (K,) of ``conv2d_forward``."""
