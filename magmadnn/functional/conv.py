"""Convolution and transposed convolution with their geometry (padding rules, output sizes)."""

from __future__ import annotations

import numbers

from .._checks import Plans
from ..autograd import Function, Tensor
from ..autograd import _state as _grad_state  # (is_grad_enabled() without its call)
from ..backend import geometry
from ._base import _as_tensor, _need_ndim, _same_dtype, signature
from .operators import reshape, transpose

__all__ = ["conv1d", "conv1d_padding", "conv2d", "conv2d_output_shape", "conv2d_padding", "conv_transpose2d",
           "conv_transpose2d_geometry"]


def conv2d_padding(in_hw, kernel_hw, stride=1, padding=0, dilation=1) -> tuple[tuple[int, int], tuple[int, int]]:
    """Resolve padding (int | pair | ((t, b), (l, r)) | "same" | "valid") to ((top, bottom), (left, right)).

    "same" gives an output of ceil(in / stride) with the extra pixel at the bottom/right (TensorFlow convention).
    """
    fn = "conv2d_padding"
    kernel = geometry.int_pair(kernel_hw, "kernel size", fn)
    stride, dilation = geometry.int_pair(stride, "stride", fn), geometry.int_pair(dilation, "dilation", fn)
    return geometry.resolve_padding(in_hw, kernel, stride, padding, dilation, owner=fn)


def conv2d_output_shape(in_hw, kernel_hw, stride=1, padding=0, dilation=1) -> tuple[int, int]:
    """Output (H, W) of a convolution (or pooling, with dilation 1) of an input of spatial size ``in_hw``."""
    fn = "conv2d_output_shape"
    pads = conv2d_padding(in_hw, kernel_hw, stride, padding, dilation)
    kernel = geometry.int_pair(kernel_hw, "kernel size", fn)
    stride, dilation = geometry.int_pair(stride, "stride", fn), geometry.int_pair(dilation, "dilation", fn)
    return geometry.output_hw(in_hw, kernel, stride, pads, dilation)


class Conv2dFunction(Function):
    def forward(self, x, w, b=None, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1,
                activation=None):
        self.x, self.w, self.has_bias, self.activation = x, w, b is not None, activation
        self.geom = geom = (stride, padding, dilation, groups)  # the op set's positional geometry
        self.saved = saved = {} if _grad_state.enabled else None  # None: nothing is kept for a backward (inference)
        xp = self.xp
        if activation is None or activation not in getattr(xp, "FUSED_ACTIVATIONS", ()):
            y = xp.conv2d_forward(x, w, *geom, bias=b, saved=saved)
            self.y = y if activation is None else xp.activation_forward(y, activation)
        else:
            self.y = xp.conv2d_forward(x, w, *geom, bias=b, saved=saved, activation=activation)
        return self.y

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        gb = None
        if self.activation is not None and self.has_bias:  # its gradient and the bias's in one op (the output only)
            g, gb = xp.bias_activation_backward(g, None, self.y, self.activation, bias=need[2])
        elif self.activation is not None:  # fused activation: its backward needs only the output
            g = xp.activation_backward(g, None, self.y, self.activation)
        gx = xp.conv2d_backward_data(g, self.w, self.x.shape, *self.geom) if need[0] else None
        gw = xp.conv2d_backward_filter(g, self.x, self.w.shape, *self.geom, saved=self.saved) if need[1] else None
        if not self.has_bias:
            return gx, gw
        if self.activation is not None:
            return gx, gw, gb
        return gx, gw, (xp.conv2d_backward_bias(g) if need[2] else None)


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation=None) -> Tensor:
    """2-D cross-correlation, x (N, C, H, W), w (K, C/groups, R, S), b (K,) -> (N, K, Ho, Wo).

    ``activation`` (relu, sigmoid or tanh) is applied inside the op: the same result as ``activation(conv2d(...))``
    without a separate pass over the output.
    """
    key = signature(x, w, b, stride, padding, dilation, groups, activation)
    geom = _CONV2D_PLANS.get(key) if key is not None else None
    if geom is None:  # every check, then the geometry the call decided, kept for its signature
        x, w = _as_tensor(x), _as_tensor(w)
        b = None if b is None else _as_tensor(b)
        geom = _CONV2D_PLANS.keep(key, _plan_conv2d(x, w, b, stride, padding, dilation, groups, activation))
    args = (x, w) if b is None else (x, w, b)
    return Conv2dFunction.apply(*args, **geom)


_CONV2D_PLANS = Plans()


def conv2d_arguments(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation=None) -> dict:
    """The keyword arguments of ``Conv2dFunction.apply(x, w(, b), **arguments)`` that ``conv2d`` runs for operands of
    these shapes and dtypes, after every check."""
    return _plan_conv2d(_as_tensor(x), _as_tensor(w), None if b is None else _as_tensor(b), stride, padding,
                        dilation, groups, activation)


def _plan_conv2d(x, w, b, stride, padding, dilation, groups, activation) -> dict:
    """The checks of :func:`conv2d` and the geometry they decide (stride, resolved pads, dilation, groups)."""
    fn = "conv2d"
    if activation is not None and activation not in geometry.FUSED_ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be one of {geometry.FUSED_ACTIVATIONS} or None, got {activation!r}")
    _need_ndim(x, 4, fn, "x", "(N, C, H, W)")
    _need_ndim(w, 4, fn, "w", "(K, C/groups, R, S)")
    if not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"{fn}: groups must be a positive int, got {groups!r}")
    k, cg, kh, kw = w.shape
    if k % groups or x.shape[1] != cg * groups:
        raise ValueError(
            f"{fn}: x has shape {x.shape} (C={x.shape[1]}) and w has shape {w.shape} with groups={groups}; "
            f"expected C = {cg * groups} and K divisible by groups"
        )
    stride, dilation = geometry.int_pair(stride, "stride", fn), geometry.int_pair(dilation, "dilation", fn)
    pads = conv2d_padding(x.shape[2:], (kh, kw), stride, padding, dilation)
    ho, wo = geometry.output_hw(x.shape[2:], (kh, kw), stride, pads, dilation)
    if ho < 1 or wo < 1:
        raise ValueError(
            f"{fn}: input of spatial size {x.shape[2:]} is too small for kernel {(kh, kw)} with dilation {dilation} "
            f"and padding {pads}: output would be {(ho, wo)}"
        )
    tensors = {"x": x, "w": w}
    if b is not None:
        if b.shape != (k,):
            raise ValueError(f"{fn}: b has shape {b.shape}, expected ({k},) for w of shape {w.shape}")
        tensors["b"] = b
    _same_dtype(fn, **tensors)
    return {"stride": stride, "padding": pads, "dilation": dilation, "groups": int(groups), "activation": activation}


def conv_transpose2d_geometry(in_hw, kernel_hw, stride=1, padding=0, output_padding=0, dilation=1):
    """``(pads, (Ho, Wo))`` of a transposed convolution of an input of spatial size ``in_hw``.

    Padding is the padding of the convolution it transposes: int | pair | ((t, b), (l, r)) | "valid" | "same".
    "same" gives an output of ``in * stride`` (Keras), padded as a "same" convolution of that output would be;
    otherwise the output is ``(in - 1) stride - top - bottom + dilation (k - 1) + 1 + output_padding`` (PyTorch),
    with ``0 <= output_padding < stride``.
    """
    fn = "conv_transpose2d"
    kernel = geometry.int_pair(kernel_hw, "kernel size", fn)
    stride, dilation = geometry.int_pair(stride, "stride", fn), geometry.int_pair(dilation, "dilation", fn)
    extra = geometry.int_pair(output_padding, "output_padding", fn, 0)
    if extra[0] >= stride[0] or extra[1] >= stride[1]:
        raise ValueError(f"{fn}: output_padding {extra} must be smaller than the stride {stride}")
    if isinstance(padding, str) and padding.lower() == "same":
        if any(extra):
            raise ValueError(f"{fn}: output_padding must be 0 with padding 'same' (the output is input * stride)")
        out = (int(in_hw[0]) * stride[0], int(in_hw[1]) * stride[1])
        return geometry.resolve_padding(out, kernel, stride, "same", dilation, owner=fn), out
    pads = geometry.resolve_padding(in_hw, kernel, stride, padding, dilation, owner=fn)
    out = tuple(int((n - 1) * s - lo - hi + d * (k - 1) + 1 + e) for n, s, (lo, hi), d, k, e
                in zip(in_hw, stride, pads, dilation, kernel, extra))
    return pads, out


class ConvTranspose2dFunction(Function):
    """The adjoint of a convolution: forward is its backward-data, backward its forward and backward-filter."""

    def forward(self, x, w, b=None, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), out_shape=None):
        self.x, self.w, self.has_bias = x, w, b is not None
        self.geom = {"stride": stride, "padding": padding, "dilation": dilation}
        y = self.xp.conv2d_backward_data(x, w, out_shape, **self.geom)
        return y if b is None else self.xp.bias_add(y, b)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        gx = xp.conv2d_forward(g, self.w, **self.geom) if need[0] else None
        gw = xp.conv2d_backward_filter(self.x, g, self.w.shape, **self.geom) if need[1] else None
        if not self.has_bias:
            return gx, gw
        return gx, gw, (xp.conv2d_backward_bias(g) if need[2] else None)


def conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1) -> Tensor:
    """Transposed convolution, x (N, C_in, H, W), w (C_in, C_out, R, S) (PyTorch's layout), b (C_out,) ->
    (N, C_out, Ho, Wo); geometry as :func:`conv_transpose2d_geometry` (PyTorch's ``conv_transpose2d``)."""
    fn = "conv_transpose2d"
    x, w = _as_tensor(x), _as_tensor(w)
    _need_ndim(x, 4, fn, "x", "(N, C_in, H, W)")
    _need_ndim(w, 4, fn, "w", "(C_in, C_out, R, S)")
    if x.shape[1] != w.shape[0]:
        raise ValueError(f"{fn}: x has shape {x.shape} but w has shape {w.shape}; expected x of shape "
                         f"(N, {w.shape[0]}, H, W)")
    pads, (ho, wo) = conv_transpose2d_geometry(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation)
    if ho < 1 or wo < 1:
        raise ValueError(f"{fn}: input of spatial size {x.shape[2:]} with kernel {w.shape[2:]} and padding {pads} "
                         f"gives an empty output {(ho, wo)}")
    tensors = {"x": x, "w": w}
    if b is not None:
        b = _as_tensor(b)
        if b.shape != (w.shape[1],):
            raise ValueError(f"{fn}: b has shape {b.shape}, expected ({w.shape[1]},) for w of shape {w.shape}")
        tensors["b"] = b
    _same_dtype(fn, **tensors)
    stride, dilation = geometry.int_pair(stride, "stride", fn), geometry.int_pair(dilation, "dilation", fn)
    args = (x, w) if b is None else (x, w, b)
    return ConvTranspose2dFunction.apply(*args, stride=stride, padding=pads, dilation=dilation,
                                         out_shape=(x.shape[0], w.shape[1], ho, wo))


def conv1d_padding(steps, kernel_size, stride=1, padding="valid", dilation=1) -> tuple[int, int]:
    """Resolve a 1-D padding ("valid" | "same" | "causal" | int | (left, right)) to (left, right).

    "same": an output of ceil(steps / stride), the extra step at the right (Keras/TensorFlow); "causal": the
    dilated kernel's reach minus one, all on the left (output step t sees inputs up to t only)."""
    fn = "conv1d_padding"
    if isinstance(padding, str) and padding.lower() == "causal":
        return dilation * (kernel_size - 1), 0
    if isinstance(padding, str):
        return conv2d_padding((1, steps), (1, kernel_size), (1, stride), padding, (1, dilation))[1]
    if isinstance(padding, (tuple, list)):
        pair = geometry.int_pair(padding, "padding", fn, 0)
        return pair[0], pair[1]
    pad = geometry.int_pair(padding, "padding", fn, 0)[0]
    return pad, pad


def conv1d(x, w, b=None, stride=1, padding="valid", dilation=1, groups=1, activation=None) -> Tensor:
    """1-D cross-correlation of sequences x (N, T, C) with w (K, C/groups, k), b (K,) -> (N, T', K).

    Runs as :func:`conv2d` on (N, C, 1, T) with a (K, C/groups, 1, k) kernel: the same op (cuDNN's on the device).
    ``padding``: "valid", "same", "causal", an int or (left, right)."""
    fn = "conv1d"
    x, w = _as_tensor(x), _as_tensor(w)
    _need_ndim(x, 3, fn, "x", "(N, T, C)")
    _need_ndim(w, 3, fn, "w", "(K, C/groups, kernel_size)")
    for name, value in (("stride", stride), ("dilation", dilation)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{fn}: {name} must be a positive int, got {value!r}")
    left, right = conv1d_padding(x.shape[1], w.shape[2], stride, padding, dilation)
    n, steps, channels = x.shape
    planes = reshape(transpose(x, (0, 2, 1)), (n, channels, 1, steps))
    kernel = reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))
    y = conv2d(planes, kernel, b, stride=(1, stride), padding=((0, 0), (left, right)), dilation=(1, dilation),
               groups=groups, activation=activation)
    return transpose(reshape(y, (n, y.shape[1], y.shape[3])), (0, 2, 1))
