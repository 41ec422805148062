"""Differentiable functions on Tensors (import as ``F``).

Each op is one small :class:`~magmadnn.autograd.Function` subclass (``<Op>Function``, never the name of a layer or a
loss) written only against the backend op set, plus a
lower-case wrapper that validates its arguments: a shape or dtype mismatch raises ``ValueError``/``TypeError``
naming the function and the shapes or dtypes seen and expected.
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from ..autograd import Function, Tensor
from ..backend import geometry

__all__ = [
    "add", "subtract", "multiply", "divide", "negative", "power", "matmul", "sum", "mean", "reshape", "transpose",
    "flatten", "activation", "relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "softmax", "log_softmax",
    "dense", "conv2d", "conv2d_output_shape", "conv2d_padding", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "batch_norm", "dropout", "softmax_cross_entropy", "mse",
]  # fmt: skip

# ----------------------------------------------------------------------------------------------------- helpers


def _as_tensor(x, like: Tensor | None = None) -> Tensor:
    """Tensors pass through; scalars take ``like``'s dtype; arrays become constant Tensors."""
    if isinstance(x, Tensor):
        return x
    backend = like.xp if like is not None else None
    if like is not None and isinstance(x, numbers.Number) and np.dtype(like.dtype).kind == "f":
        return Tensor(like.xp.asarray(x, dtype=like.dtype), backend=backend)
    return Tensor(x, backend=backend)


def _pair_of(a, b):
    """Both operands as Tensors; a Python scalar takes the dtype of the other operand."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return _as_tensor(a, like), _as_tensor(b, like)


def _need_ndim(x: Tensor, ndim: int, fn: str, what: str, layout: str) -> None:
    if x.ndim != ndim:
        raise ValueError(f"{fn}: {what} must be {ndim}-D {layout}, got shape {x.shape}")


#: The floating dtypes: a call whose inputs all hold the same one of them passes ``_same_dtype`` at once.
_FLOATING = frozenset(np.dtype(c) for c in np.typecodes["Float"])


def _same_dtype(fn: str, **tensors: Tensor) -> None:
    first = None
    for t in tensors.values():
        if t is None:
            continue
        if first is None:
            first = t.dtype
            if first not in _FLOATING:
                break
        elif t.dtype is not first:
            break
    else:
        return
    dtypes = {name: t.dtype for name, t in tensors.items() if t is not None}
    if len(set(dtypes.values())) > 1:
        seen = ", ".join(f"{n}={d}" for n, d in dtypes.items())
        raise TypeError(f"{fn}: all inputs must have the same floating dtype, got {seen}")
    for name, d in dtypes.items():
        if np.dtype(d).kind != "f":
            raise TypeError(f"{fn}: {name} must be a floating array (float32 or float64), got {d}")


def _expand(xp, g, shape, axis, keepdims):
    """Broadcast the gradient of a reduction back to the input ``shape`` (a real array, not a view)."""
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(a % ndim for a in ((axis,) if isinstance(axis, numbers.Integral) else axis))
    if not keepdims:
        g = xp.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return xp.add(xp.zeros(shape, dtype=g.dtype), g)


# -------------------------------------------------------------------------------------------- elementwise binary


class AddFunction(Function):
    def forward(self, a, b):
        self.shapes = (a.shape, b.shape)
        return self.xp.add(a, b)

    def backward(self, g):
        xp, (sa, sb), (na, nb) = self.xp, self.shapes, self.needs_input_grad
        return (xp.sum_to_shape(g, sa) if na else None, xp.sum_to_shape(g, sb) if nb else None)


class SubtractFunction(Function):
    def forward(self, a, b):
        self.shapes = (a.shape, b.shape)
        return self.xp.subtract(a, b)

    def backward(self, g):
        xp, (sa, sb), (na, nb) = self.xp, self.shapes, self.needs_input_grad
        return (xp.sum_to_shape(g, sa) if na else None, xp.negative(xp.sum_to_shape(g, sb)) if nb else None)


class MultiplyFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.multiply(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        return (
            xp.sum_to_shape(xp.multiply(g, b), a.shape) if na else None,
            xp.sum_to_shape(xp.multiply(g, a), b.shape) if nb else None,
        )


class DivideFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.divide(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        ga = xp.divide(g, b)
        gb = xp.negative(xp.multiply(ga, xp.divide(a, b))) if nb else None
        return (xp.sum_to_shape(ga, a.shape) if na else None, xp.sum_to_shape(gb, b.shape) if nb else None)


@functools.lru_cache(maxsize=1024)
def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast together (answered once per pair of shapes)."""
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _check_broadcast(fn: str, a: Tensor, b: Tensor) -> None:
    if not _broadcasts(a.shape, b.shape):
        raise ValueError(f"{fn}: shapes {a.shape} and {b.shape} do not broadcast together")


def _binary(cls, name):
    def op(a, b) -> Tensor:
        a, b = _pair_of(a, b)
        _check_broadcast(name, a, b)
        return cls.apply(a, b)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} with NumPy broadcasting (Tensors, arrays and scalars mix)."
    return op


add = _binary(AddFunction, "add")
subtract = _binary(SubtractFunction, "subtract")
multiply = _binary(MultiplyFunction, "multiply")
divide = _binary(DivideFunction, "divide")


class NegativeFunction(Function):
    def forward(self, a):
        return self.xp.negative(a)

    def backward(self, g):
        return (self.xp.negative(g),)


def negative(x) -> Tensor:
    return NegativeFunction.apply(_as_tensor(x))


class PowerFunction(Function):
    def forward(self, a, p):
        self.a, self.p = a, p
        return self.xp.power(a, p)

    def backward(self, g):
        xp = self.xp
        return (xp.multiply(g, xp.multiply(self.xp.power(self.a, self.p - 1), self.p)),)


def power(x, p) -> Tensor:
    """x ** p for a constant scalar exponent p."""
    if not isinstance(p, numbers.Real):
        raise TypeError(f"power: the exponent must be a Python number, got {type(p).__name__}")
    return PowerFunction.apply(_as_tensor(x), p=p)


# --------------------------------------------------------------------------------------------------- matmul


class MatMulFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.matmul(a, b)

    def backward(self, g):
        xp, a, b, (na, nb) = self.xp, self.a, self.b, self.needs_input_grad
        ga = xp.sum_to_shape(xp.matmul(g, b, transpose_b=True), a.shape) if na else None
        gb = xp.sum_to_shape(xp.matmul(a, g, transpose_a=True), b.shape) if nb else None
        return ga, gb


def matmul(a, b) -> Tensor:
    """a @ b for 2-D or stacked (..., m, k) @ (..., k, n) operands."""
    a, b = _pair_of(a, b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: both operands must be at least 2-D, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul: inner dimensions differ: a has shape {a.shape} (k={a.shape[-1]}), "
            f"b has shape {b.shape} (k={b.shape[-2]})"
        )
    if not _broadcasts(a.shape[:-2], b.shape[:-2]):
        raise ValueError(f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast")
    return MatMulFunction.apply(a, b)


# ------------------------------------------------------------------------------------- reductions and reshapes


class SumFunction(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        return self.xp.asarray(self.xp.sum(a, axis=axis, keepdims=keepdims))

    def backward(self, g):
        return (_expand(self.xp, g, self.shape, self.axis, self.keepdims),)


class MeanFunction(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        out = self.xp.asarray(self.xp.mean(a, axis=axis, keepdims=keepdims))
        self.count = max(1, math.prod(a.shape) // max(1, math.prod(out.shape)))
        return out

    def backward(self, g):
        return (self.xp.divide(_expand(self.xp, g, self.shape, self.axis, self.keepdims), self.count),)


def _check_axis(fn: str, x: Tensor, axis) -> None:
    if axis is None:
        return
    for a in (axis,) if isinstance(axis, numbers.Integral) else axis:
        if not -x.ndim <= int(a) < x.ndim:
            raise ValueError(f"{fn}: axis {a} is out of range for a tensor of shape {x.shape}")


def sum(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    x = _as_tensor(x)
    _check_axis("sum", x, axis)
    return SumFunction.apply(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False) -> Tensor:
    x = _as_tensor(x)
    _check_axis("mean", x, axis)
    return MeanFunction.apply(x, axis=axis, keepdims=keepdims)


class ReshapeFunction(Function):
    def forward(self, a, shape):
        self.shape = a.shape
        return self.xp.reshape(a, shape)

    def backward(self, g):
        return (self.xp.reshape(g, self.shape),)


def reshape(x, shape) -> Tensor:
    x = _as_tensor(x)
    shape = tuple(int(s) for s in shape)
    if not _reshapes(x.shape, shape):
        raise ValueError(f"reshape: cannot reshape a tensor of shape {x.shape} into shape {shape}")
    return ReshapeFunction.apply(x, shape=shape)


@functools.lru_cache(maxsize=1024)
def _reshapes(old: tuple[int, ...], new: tuple[int, ...]) -> bool:
    """Whether NumPy reshapes ``old`` into ``new`` (-1 included; answered once per pair of shapes, no data)."""
    try:
        np.empty(old, dtype=np.uint8).reshape(new)
    except ValueError:
        return False
    return True


def flatten(x) -> Tensor:
    """(N, ...) -> (N, prod(...)): keeps the batch dimension."""
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"flatten: expected a tensor with a batch dimension, got shape {x.shape}")
    return reshape(x, (x.shape[0], -1))


class TransposeFunction(Function):
    def forward(self, a, axes=None):
        self.axes = axes
        return self.xp.transpose(a, axes)

    def backward(self, g):
        inverse = None if self.axes is None else tuple(int(i) for i in np.argsort(self.axes))
        return (self.xp.transpose(g, inverse),)


def transpose(x, axes=None) -> Tensor:
    x = _as_tensor(x)
    if axes is not None and sorted(int(a) % max(x.ndim, 1) for a in axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes of shape {x.shape}")
    return TransposeFunction.apply(x, axes=None if axes is None else tuple(int(a) for a in axes))


# ----------------------------------------------------------------------------------------------- activations


class ActivationFunction(Function):
    def forward(self, x, kind, alpha=0.0):
        self.x, self.kind, self.alpha = x, kind, alpha
        self.y = self.xp.activation_forward(x, kind, alpha)
        return self.y

    def backward(self, g):
        return (self.xp.activation_backward(g, self.x, self.y, self.kind, self.alpha),)


def activation(x, kind, alpha=0.0) -> Tensor:
    """Apply activation ``kind``: sigmoid, tanh, relu, leaky_relu, elu, gelu (tanh approx.), softmax or linear."""
    x = _as_tensor(x)
    if kind is None or kind == "linear":
        return x
    if kind == "softmax":
        return softmax(x)
    if kind not in geometry.ACTIVATIONS:
        raise ValueError(f"activation: unknown kind {kind!r}; expected one of {geometry.ACTIVATION_NAMES}")
    _same_dtype("activation", x=x)
    return ActivationFunction.apply(x, kind=kind, alpha=float(alpha))


def relu(x) -> Tensor:
    return activation(x, "relu")


def sigmoid(x) -> Tensor:
    return activation(x, "sigmoid")


def tanh(x) -> Tensor:
    return activation(x, "tanh")


def leaky_relu(x, alpha=0.01) -> Tensor:
    return activation(x, "leaky_relu", alpha)


def elu(x, alpha=1.0) -> Tensor:
    return activation(x, "elu", alpha)


def gelu(x) -> Tensor:
    """GELU, tanh approximation."""
    return activation(x, "gelu")


class SoftmaxFunction(Function):
    def forward(self, x, axis=-1):
        self.axis = axis
        self.y = self.xp.softmax(x, axis=axis)
        return self.y

    def backward(self, g):
        return (self.xp.softmax_backward(g, self.y, axis=self.axis),)


class LogSoftmaxFunction(Function):
    def forward(self, x, axis=-1):
        self.axis = axis
        self.y = self.xp.log_softmax(x, axis=axis)
        return self.y

    def backward(self, g):
        return (self.xp.log_softmax_backward(g, self.y, axis=self.axis),)


def softmax(x, axis=-1) -> Tensor:
    x = _as_tensor(x)
    _check_axis("softmax", x, axis)
    return SoftmaxFunction.apply(x, axis=axis)


def log_softmax(x, axis=-1) -> Tensor:
    x = _as_tensor(x)
    _check_axis("log_softmax", x, axis)
    return LogSoftmaxFunction.apply(x, axis=axis)


# --------------------------------------------------------------------------------------------------- dense


class DenseFunction(Function):
    def forward(self, x, w, b=None):
        self.x, self.w, self.has_bias = x, w, b is not None
        y = self.xp.matmul(x, w)
        return y if b is None else self.xp.bias_add(y, b)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        gx = xp.matmul(g, self.w, transpose_b=True) if need[0] else None
        gw = xp.matmul(self.x, g, transpose_a=True) if need[1] else None
        if not self.has_bias:
            return gx, gw
        return gx, gw, (xp.bias_grad(g) if need[2] else None)


def dense(x, w, b=None) -> Tensor:
    """x (..., in) @ w (in, out) + b (out,) through the backend's matmul and bias_add, on the last axis of x of any
    rank >= 2 (the leading axes are taken as rows of one matrix product)."""
    x, w = _as_tensor(x), _as_tensor(w)
    if x.ndim < 2:
        raise ValueError(f"dense: x must be at least 2-D (N, ..., in_features), got shape {x.shape}")
    _need_ndim(w, 2, "dense", "w", "(in_features, out_features)")
    if x.shape[-1] != w.shape[0]:
        raise ValueError(
            f"dense: x has shape {x.shape} but w has shape {w.shape}; expected x of shape (N, ..., {w.shape[0]})"
        )
    if x.ndim > 2:
        lead = x.shape[:-1]
        return reshape(dense(reshape(x, (math.prod(lead), x.shape[-1])), w, b), (*lead, w.shape[1]))
    if b is None:
        _same_dtype("dense", x=x, w=w)
        return DenseFunction.apply(x, w)
    b = _as_tensor(b)
    if b.shape != (w.shape[1],):
        raise ValueError(f"dense: b has shape {b.shape}, expected ({w.shape[1]},) for w of shape {w.shape}")
    _same_dtype("dense", x=x, w=w, b=b)
    return DenseFunction.apply(x, w, b)


# --------------------------------------------------------------------------------------------- convolution


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
        self.geom = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        self.saved = {}
        xp = self.xp
        if activation is None or activation not in getattr(xp, "FUSED_ACTIVATIONS", ()):
            y = xp.conv2d_forward(x, w, bias=b, saved=self.saved, **self.geom)
            self.y = y if activation is None else xp.activation_forward(y, activation)
        else:
            self.y = xp.conv2d_forward(x, w, bias=b, saved=self.saved, activation=activation, **self.geom)
        return self.y

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        if self.activation is not None:  # fused activation: its backward needs only the output
            g = xp.activation_backward(g, None, self.y, self.activation)
        gx = xp.conv2d_backward_data(g, self.w, self.x.shape, **self.geom) if need[0] else None
        gw = xp.conv2d_backward_filter(g, self.x, self.w.shape, saved=self.saved, **self.geom) if need[1] else None
        if not self.has_bias:
            return gx, gw
        return gx, gw, (xp.conv2d_backward_bias(g) if need[2] else None)


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation=None) -> Tensor:
    """2-D cross-correlation, x (N, C, H, W), w (K, C/groups, R, S), b (K,) -> (N, K, Ho, Wo).

    ``activation`` (relu, sigmoid or tanh) is applied inside the op: the same result as ``activation(conv2d(...))``
    without a separate pass over the output.
    """
    fn = "conv2d"
    if activation is not None and activation not in geometry.FUSED_ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be one of {geometry.FUSED_ACTIVATIONS} or None, got {activation!r}")
    x, w = _as_tensor(x), _as_tensor(w)
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
        b = _as_tensor(b)
        if b.shape != (k,):
            raise ValueError(f"{fn}: b has shape {b.shape}, expected ({k},) for w of shape {w.shape}")
        tensors["b"] = b
    _same_dtype(fn, **tensors)
    args = (x, w) if b is None else (x, w, b)
    return Conv2dFunction.apply(*args, stride=stride, padding=pads, dilation=dilation, groups=int(groups),
                        activation=activation)


# ------------------------------------------------------------------------------------------------- pooling


class Pool2dFunction(Function):
    def forward(self, x, mode, window, stride, padding):
        self.x, self.args = x, (mode, window, stride, padding)
        self.y, self.ctx = self.xp.pool2d_forward(x, mode, window, stride, padding)
        return self.y

    def backward(self, g):
        return (self.xp.pool2d_backward(g, self.x, self.y, self.ctx, *self.args),)


def _pool(fn: str, mode: str, x, window, stride, padding) -> Tensor:
    x = _as_tensor(x)
    _need_ndim(x, 4, fn, "x", "(N, C, H, W)")
    window = geometry.int_pair(window, "window", fn)
    stride = window if stride is None else geometry.int_pair(stride, "stride", fn)
    pads = conv2d_padding(x.shape[2:], window, stride, padding, 1)
    if max(pads[0]) >= window[0] or max(pads[1]) >= window[1]:
        raise ValueError(f"{fn}: padding {pads} must be smaller than the window {window}")
    ho, wo = geometry.output_hw(x.shape[2:], window, stride, pads, (1, 1))
    if ho < 1 or wo < 1:
        raise ValueError(f"{fn}: input of spatial size {x.shape[2:]} is smaller than the window {window}")
    _same_dtype(fn, x=x)
    return Pool2dFunction.apply(x, mode=mode, window=window, stride=stride, padding=pads)


def max_pool2d(x, window, stride=None, padding=0) -> Tensor:
    """Max pooling over (H, W); stride defaults to the window; padding int | pair | "same" | "valid"."""
    return _pool("max_pool2d", "max", x, window, stride, padding)


def avg_pool2d(x, window, stride=None, padding=0) -> Tensor:
    """Average pooling over (H, W); padded positions are not counted in the average."""
    return _pool("avg_pool2d", "avg", x, window, stride, padding)


def global_avg_pool2d(x) -> Tensor:
    """(N, C, H, W) -> (N, C): mean over the spatial axes."""
    x = _as_tensor(x)
    _need_ndim(x, 4, "global_avg_pool2d", "x", "(N, C, H, W)")
    return MeanFunction.apply(x, axis=(2, 3), keepdims=False)


# ---------------------------------------------------------------------------------------------- batch norm


class BatchNormTrainFunction(Function):
    def forward(self, x, gamma, beta, running_mean, running_var, momentum, eps):
        self.x, self.gamma = x, gamma
        y, self.ctx = self.xp.batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps)
        return y

    def backward(self, g):
        return self.xp.batch_norm_backward(g, self.x, self.gamma, self.ctx)


class BatchNormInferFunction(Function):
    def forward(self, x, gamma, beta, running_mean, running_var, eps):
        xp = self.xp
        self.x, self.gamma, self.mean = x, gamma, running_mean
        self.inv_std = xp.divide(1.0, xp.sqrt(xp.add(running_var, eps)))
        return xp.batch_norm_infer(x, gamma, beta, running_mean, running_var, eps)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        shape = (1, g.shape[1]) + (1,) * (g.ndim - 2)
        inv = xp.reshape(self.inv_std, shape)
        gx = xp.multiply(g, xp.reshape(xp.multiply(self.gamma, self.inv_std), shape)) if need[0] else None
        gg = None
        if need[1]:
            xhat = xp.multiply(xp.subtract(self.x, xp.reshape(self.mean, shape)), inv)
            gg = xp.channel_sum(xp.multiply(g, xhat))
        return gx, gg, (xp.bias_grad(g) if need[2] else None)


_SYNC_BATCH_NORM = None  # the synchronized batch norm's Function, registered by magmadnn.distributed.sync_batchnorm


def register_sync_batch_norm(function) -> None:
    """Called by :mod:`magmadnn.distributed.sync_batchnorm`: the Function ``batch_norm(sync=group)`` applies."""
    global _SYNC_BATCH_NORM
    _SYNC_BATCH_NORM = function


def batch_norm(x, gamma, beta, running_mean, running_var, training, momentum=0.9, eps=1e-5, sync=None) -> Tensor:
    """Batch normalisation over N (2-D) or N, H, W (4-D); running stats (backend arrays) update in place.

    ``sync`` (training only): a data-parallel group (``magmadnn.distributed.BatchNormGroup``, or anything with
    its ``weight``, ``moments`` and ``sum``) whose ranks normalise with the statistics of the global batch and
    exchange the matching gradient sums, as one process with the whole batch would (every rank must call it)."""
    fn = "batch_norm"
    x, gamma, beta = _as_tensor(x), _as_tensor(gamma), _as_tensor(beta)
    if x.ndim not in (2, 4):
        raise ValueError(f"{fn}: x must be 2-D (N, F) or 4-D (N, C, H, W), got shape {x.shape}")
    c = x.shape[1]
    for what, arr in (("gamma", gamma.data), ("beta", beta.data), ("running_mean", running_mean),
                      ("running_var", running_var)):  # fmt: skip
        if tuple(arr.shape) != (c,):
            raise ValueError(f"{fn}: {what} has shape {tuple(arr.shape)}, expected ({c},) for x of shape {x.shape}")
    _same_dtype(fn, x=x, gamma=gamma, beta=beta)
    if training and sync is not None:
        if _SYNC_BATCH_NORM is None:  # pragma: no cover - magmadnn's __init__ imports magmadnn.distributed
            raise RuntimeError(f"{fn}(sync=...) needs magmadnn.distributed: import it first")
        return _SYNC_BATCH_NORM.apply(x, gamma, beta, running_mean=running_mean, running_var=running_var,
                                      momentum=momentum, eps=eps, sync=sync)
    if training:
        if x.size // c < 2:
            raise ValueError(f"{fn}: training needs more than one value per channel, got x of shape {x.shape}")
        return BatchNormTrainFunction.apply(
            x, gamma, beta, running_mean=running_mean, running_var=running_var, momentum=momentum, eps=eps
        )
    return BatchNormInferFunction.apply(x, gamma, beta, running_mean=running_mean, running_var=running_var, eps=eps)


# ------------------------------------------------------------------------------------------------- dropout


class DropoutFunction(Function):
    def forward(self, x, rate, rng):
        y, self.mask = self.xp.dropout_forward(x, rate, rng)
        return y

    def backward(self, g):
        return (self.xp.dropout_backward(g, self.mask),)


def dropout(x, rate, training, rng) -> Tensor:
    """Inverted dropout when training (mask 0 or 1/(1-rate)); identity otherwise."""
    x = _as_tensor(x)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    if not training or rate == 0.0:
        return x
    return DropoutFunction.apply(x, rate=float(rate), rng=rng)


# --------------------------------------------------------------------------------------------------- losses


def _reduce(loss: Tensor, reduction: str, fn: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


class SoftmaxCrossEntropyFunction(Function):
    def forward(self, logits, labels):
        self.labels = labels
        loss, self.probs = self.xp.softmax_cross_entropy(logits, labels)
        return loss

    def backward(self, g):
        return (self.xp.softmax_cross_entropy_backward(self.probs, self.labels, g),)


def _labels_array(labels, logits: Tensor, fn: str, check_values: bool = True):
    """The labels as a backend array after checking shape and dtype; ``check_values`` also checks the class range
    (a host read of device labels: callers that validated the whole target array once, as ``Model.fit`` does, pass
    False so that no batch is read back)."""
    xp = logits.xp
    data = labels.data if isinstance(labels, Tensor) else labels
    if not hasattr(data, "dtype") or not hasattr(data, "shape"):
        data = np.asarray(data)
    n, c = logits.shape
    shape, dtype = tuple(data.shape), np.dtype(data.dtype)
    kind = dtype.kind
    if len(shape) == 1:
        if kind not in "iu":
            raise TypeError(f"{fn}: labels of shape {shape} must be integer class indices, got dtype {dtype}")
        if shape[0] != n:
            raise ValueError(f"{fn}: labels have shape {shape}, expected ({n},) for logits of shape {logits.shape}")
        arr = None
        if check_values:
            arr = data if isinstance(data, np.ndarray) else np.asarray(xp.to_numpy(data))
        if arr is not None and n and (arr.min() < 0 or arr.max() >= c):
            raise ValueError(
                f"{fn}: labels must be in [0, {c}) for logits of shape {logits.shape}, "
                f"got values in [{arr.min()}, {arr.max()}]"
            )
        return xp.asarray(data)
    if len(shape) == 2:
        if shape != (n, c):
            raise ValueError(f"{fn}: one-hot labels have shape {shape}, expected {(n, c)} like the logits")
        if kind not in "iufb":
            raise TypeError(f"{fn}: one-hot labels must be numeric, got dtype {dtype}")
        return xp.asarray(data, dtype=logits.dtype)
    raise ValueError(
        f"{fn}: labels must be (N,) int or (N, C) one-hot, got shape {shape} for logits of shape {logits.shape}"
    )


def softmax_cross_entropy(logits, labels, reduction="mean", check_labels: bool = True) -> Tensor:
    """Cross entropy of softmax(logits) (N, C) with int labels (N,) or one-hot/soft labels (N, C); stable.

    ``check_labels=False`` skips the class-range check of int labels (it reads device labels back to the host); only
    for labels validated already, as ``Model.fit``/``evaluate`` do once per call."""
    fn = "softmax_cross_entropy"
    logits = _as_tensor(logits)
    _need_ndim(logits, 2, fn, "logits", "(N, C)")
    _same_dtype(fn, logits=logits)
    lab = _labels_array(labels, logits, fn, check_values=check_labels)
    return _reduce(SoftmaxCrossEntropyFunction.apply(logits, labels=lab), reduction, fn)


def mse(pred, target, reduction="mean") -> Tensor:
    """Mean squared error; ``target`` is a constant array or Tensor of the same shape as ``pred``."""
    pred = _as_tensor(pred)
    target = _as_tensor(target, pred)
    if pred.shape != target.shape:
        raise ValueError(f"mse: pred has shape {pred.shape} but target has shape {target.shape}; they must match")
    diff = subtract(pred, target)
    return _reduce(multiply(diff, diff), reduction, "mse")


# --------------------------------------------------------------------------------------- attention
__all__ += ["matmul_nt", "masked_softmax", "scaled_dot_product_attention", "check_key_mask_values"]


class MatMulNTFunction(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return self.xp.matmul(a, b, transpose_b=True)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        return (xp.matmul(g, self.b) if need[0] else None,
                xp.matmul(g, self.a, transpose_a=True) if need[1] else None)


def matmul_nt(a, b) -> Tensor:
    """a (..., m, k) @ b (..., n, k) transposed, for stacks of the same leading shape (no copy of b)."""
    a, b = _pair_of(a, b)
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"matmul_nt: expected a (..., m, k) and b (..., n, k) with the same leading axes, got shapes "
                         f"{a.shape} and {b.shape}")
    _same_dtype("matmul_nt", a=a, b=b)
    return MatMulNTFunction.apply(a, b)


class MaskedSoftmaxFunction(Function):
    def forward(self, x, mask=None, scale=1.0, causal=False):
        self.scale = scale
        self.y = self.xp.masked_softmax(x, mask, scale, causal)
        return self.y

    def backward(self, g):
        return (self.xp.masked_softmax_backward(g, self.y, self.scale),)


def _key_mask(key_mask, like: Tensor, fn: str):
    """The key mask as a backend array of ``like``'s dtype, checked against scores ``like`` (B, H, Tq, Tk)."""
    if key_mask is None:
        return None
    data = key_mask.data if isinstance(key_mask, Tensor) else key_mask
    if not hasattr(data, "shape"):
        data = np.asarray(data)
    want = (like.shape[0], like.shape[-1])
    if tuple(data.shape) != want:
        raise ValueError(f"{fn}: key_mask must have shape (batch, key_time) = {want}, got {tuple(data.shape)}")
    if isinstance(data, np.ndarray):
        check_key_mask_values(data, fn)
    if np.dtype(data.dtype) != np.dtype(like.dtype):
        data = like.xp.asarray(data, dtype=like.dtype)  # a backend array is cast where it lives (no host copy)
    return data


def check_key_mask_values(mask: np.ndarray, who: str) -> None:
    """A key mask holds booleans or the numbers 1 (attend) and 0 (padding): anything else (0.5, NaN, PyTorch's
    additive 0/-inf masks, which would read inverted) is a ValueError naming ``who``."""
    mask = np.asarray(mask)
    if mask.dtype.kind == "b":
        return
    if mask.dtype.kind not in "iuf":
        raise TypeError(f"{who}: a key mask must be bool or numeric (1: attend, 0: padding), got dtype {mask.dtype}")
    bad = (mask != 0) & (mask != 1)
    if bad.any():
        raise ValueError(f"{who}: a key mask holds 1 (attend) or 0 (padding) or booleans, got "
                         f"{mask[bad].flat[0].item()!r}; for PyTorch's key_padding_mask pass its negation, an additive "
                         "mask (0/-inf) is not a mask")


def masked_softmax(x, key_mask=None, scale=1.0, causal=False) -> Tensor:
    """Attention probabilities from scores x (B, H, Tq, Tk): softmax of ``scale * x`` over the keys, key j masked
    when ``causal`` and j > i, or where ``key_mask`` (B, Tk) is 0; a row with no key left is zeros."""
    fn = "masked_softmax"
    x = _as_tensor(x)
    _need_ndim(x, 4, fn, "x", "(batch, heads, query_time, key_time)")
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"{fn}: x needs at least one query and one key (batch, heads, query_time, key_time), got "
                         f"shape {x.shape}")
    _same_dtype(fn, x=x)
    return MaskedSoftmaxFunction.apply(x, mask=_key_mask(key_mask, x, fn), scale=float(scale), causal=bool(causal))


def scaled_dot_product_attention(q, k, v, key_mask=None, causal=False, scale=None, dropout_rate=0.0,
                                 training=False, rng=None) -> Tensor:
    """softmax(q k^T * scale, masked) v for q (B, H, Tq, dk), k (B, H, Tk, dk), v (B, H, Tk, dv) -> (B, H, Tq, dv);
    ``scale`` defaults to 1/sqrt(dk); dropout on the probabilities while training (as PyTorch's function)."""
    fn = "scaled_dot_product_attention"
    q, k, v = _as_tensor(q), _as_tensor(k), _as_tensor(v)
    for what, t in (("q", q), ("k", k), ("v", v)):
        _need_ndim(t, 4, fn, what, "(batch, heads, time, features)")
    if k.shape[:2] != q.shape[:2] or v.shape[:3] != k.shape[:3] or k.shape[3] != q.shape[3]:
        raise ValueError(f"{fn}: expected q (B, H, Tq, dk), k (B, H, Tk, dk) and v (B, H, Tk, dv), got shapes "
                         f"{q.shape}, {k.shape} and {v.shape}")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    p = masked_softmax(matmul_nt(q, k), key_mask, scale, causal)
    p = dropout(p, dropout_rate, training, rng)
    return matmul(p, v)



# ------------------------------------------------------------- shape, routing, transposed convolution

__all__ += ["concatenate", "upsample_nearest2d", "global_max_pool2d", "conv_transpose2d",
            "conv_transpose2d_geometry"]


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


def global_max_pool2d(x) -> Tensor:
    """(N, C, H, W) -> (N, C): the maximum over each channel's spatial extent (max pooling with the whole window)."""
    x = _as_tensor(x)
    _need_ndim(x, 4, "global_max_pool2d", "x", "(N, C, H, W)")
    n, c, h, w = x.shape
    return reshape(max_pool2d(x, (h, w)), (n, c))


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

# ---------------------------------------------------------------- normalization, embeddings, token losses
__all__ += ["layer_norm", "rms_norm", "group_norm", "embedding", "cross_entropy", "binary_cross_entropy_with_logits"]


class LayerNormFunction(Function):
    """Rows normalised over the last axis; inputs ``x``, then optionally ``gamma`` and ``beta``."""

    def forward(self, x, *params, eps=1e-5, rms=False):
        self.x, self.rms = x, rms
        self.gamma = params[0] if params else None
        y, self.ctx = self.xp.layer_norm_forward(x, self.gamma, params[1] if len(params) > 1 else None, eps, rms)
        self.count = len(params)
        return y

    def backward(self, g):
        dx, dgamma, dbeta = self.xp.layer_norm_backward(g, self.x, self.gamma, self.ctx, self.rms)
        return (dx, dgamma, dbeta)[: 1 + self.count]


def _norm_params(fn: str, x: Tensor, size: int, **params) -> list[Tensor]:
    given = {}
    for what, p in params.items():
        if p is None:
            continue
        p = given[what] = _as_tensor(p, x)
        if p.shape != (size,):
            raise ValueError(f"{fn}: {what} has shape {p.shape}, expected ({size},) for x of shape {x.shape}")
    _same_dtype(fn, x=x, **given)
    return list(given.values())


def _check_eps(fn: str, eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"{fn}: eps must be a finite number > 0, got {eps!r}")
    return float(eps)


def layer_norm(x, gamma=None, beta=None, eps=1e-5) -> Tensor:
    """Layer normalisation over the last axis (biased variance, ``eps`` added to it), then ``* gamma + beta``."""
    fn = "layer_norm"
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"{fn}: x must have at least one axis, got shape {x.shape}")
    if beta is not None and gamma is None:
        raise ValueError(f"{fn}: beta needs gamma (pass ones for no scaling)")
    params = _norm_params(fn, x, x.shape[-1], gamma=gamma, beta=beta)
    return LayerNormFunction.apply(x, *params, eps=_check_eps(fn, eps), rms=False)


def rms_norm(x, gamma=None, eps=1e-6) -> Tensor:
    """RMS normalisation over the last axis: ``x / sqrt(mean(x^2) + eps) * gamma`` (no centring)."""
    fn = "rms_norm"
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"{fn}: x must have at least one axis, got shape {x.shape}")
    params = _norm_params(fn, x, x.shape[-1], gamma=gamma)
    return LayerNormFunction.apply(x, *params, eps=_check_eps(fn, eps), rms=True)


def group_norm(x, groups, gamma=None, beta=None, eps=1e-5) -> Tensor:
    """Group normalisation of x (N, C, ...): the channels split into ``groups`` consecutive groups, each sample's group
    normalised over its channels and positions, then ``* gamma + beta`` per channel (PyTorch's GroupNorm)."""
    fn = "group_norm"
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{fn}: x must be (N, C, ...), got shape {x.shape}")
    n, c = x.shape[:2]
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1 or c % groups:
        raise ValueError(f"{fn}: groups must be a positive int dividing the {c} channels of x {x.shape}, "
                         f"got {groups!r}")
    params = _norm_params(fn, x, c, gamma=gamma, beta=beta)
    rows = reshape(x, (n * int(groups), -1))
    y = reshape(LayerNormFunction.apply(rows, eps=_check_eps(fn, eps), rms=False), x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    if params:
        y = multiply(y, reshape(params[0], per_channel))
    if len(params) > 1:
        y = add(y, reshape(params[1], per_channel))
    return y


class EmbeddingFunction(Function):
    def forward(self, table, indices):
        self.indices, self.rows = indices, table.shape[0]
        return self.xp.embedding_forward(table, indices)

    def backward(self, g):
        return self.xp.embedding_backward(g, self.indices, self.rows), None


def embedding(table, indices) -> Tensor:
    """Rows of ``table`` (V, D) picked by integer ``indices`` of any shape -> ``indices.shape + (D,)``; the gradient
    is a deterministic scatter-add. NumPy indices are checked on the host (an index outside [0, V) is a ValueError);
    device indices are not read back (see ``embedding_forward`` in the op set)."""
    fn = "embedding"
    table = _as_tensor(table)
    _need_ndim(table, 2, fn, "table", "(input_dim, output_dim)")
    _same_dtype(fn, table=table)
    data = indices.data if isinstance(indices, Tensor) else indices
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    if np.dtype(data.dtype).kind not in "iu":
        raise TypeError(f"{fn}: indices must be integers (token ids), got dtype {data.dtype}")
    if isinstance(data, np.ndarray):
        rows = table.shape[0]
        if data.size and (data.min() < 0 or data.max() >= rows):
            bad = data[(data < 0) | (data >= rows)].flat[0]
            raise ValueError(f"{fn}: index {bad} is out of range for a table of {rows} rows; expected indices in "
                             f"[0, {rows})")
        data = data.astype(np.int64, copy=False)
    return EmbeddingFunction.apply(table, table.xp.asarray(data))


def _host_labels(xp, data) -> np.ndarray:
    """Labels as a host array: NumPy ones as they are (what Model passes); backend ones read back (one copy)."""
    return data if isinstance(data, np.ndarray) else np.asarray(xp.to_numpy(data))


def cross_entropy(logits, labels, reduction="mean", label_smoothing=0.0, ignore_index=None,
                  check_labels: bool = True) -> Tensor:
    """PyTorch's ``cross_entropy`` for logits (N, C) or (N, T, C) (classes last, as Keras) and integer labels (N,) /
    (N, T) or probabilities shaped like the logits. ``label_smoothing`` e mixes the target with the uniform
    distribution, ``(1 - e) target + e / C``; labels equal to ``ignore_index`` count for nothing and "mean" divides
    by the labels counted (NaN when none is). Labels may be NumPy or backend arrays: the mask of counted labels is
    computed on the backend, so nothing is read back unless ``check_labels`` (the class range of a user's call)."""
    fn = "cross_entropy"
    logits = _as_tensor(logits)
    if logits.ndim not in (2, 3):
        raise ValueError(f"{fn}: logits must be (N, C) or (N, T, C), got shape {logits.shape}")
    _same_dtype(fn, logits=logits)
    smoothing = label_smoothing
    if isinstance(smoothing, bool) or not isinstance(smoothing, numbers.Real) or not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral)):
        raise TypeError(f"{fn}: ignore_index must be an int or None, got {ignore_index!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    xp, classes = logits.xp, logits.shape[-1]
    data = labels.data if isinstance(labels, Tensor) else labels
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    shape = tuple(data.shape)
    flat = reshape(logits, (-1, classes)) if logits.ndim == 3 else logits
    if shape == logits.shape:  # probabilities
        if ignore_index is not None:
            raise ValueError(f"{fn}: ignore_index needs integer labels, got probabilities of shape {shape}")
        if np.dtype(data.dtype).kind not in "iufb":
            raise TypeError(f"{fn}: probability labels must be numeric, got dtype {data.dtype}")
        target = xp.reshape(xp.asarray(data, dtype=logits.dtype), flat.shape)
        if smoothing:
            target = xp.add(xp.multiply(target, 1.0 - smoothing), smoothing / classes)
        per_row = SoftmaxCrossEntropyFunction.apply(flat, labels=target)
        return _reduce(per_row if logits.ndim == 2 else reshape(per_row, shape[:-1]), reduction, fn)
    if shape != logits.shape[:-1]:
        raise ValueError(f"{fn}: labels have shape {shape}; expected {logits.shape[:-1]} (class indices) or "
                         f"{logits.shape} (probabilities) for logits of shape {logits.shape}")
    if np.dtype(data.dtype).kind not in "iu":
        raise TypeError(f"{fn}: labels of shape {shape} must be integer class indices, got dtype {data.dtype}")
    if check_labels:  # a user's call; Model validates its targets once per call and passes check_labels=False
        host = _host_labels(xp, data)
        counted = host if ignore_index is None else host[host != ignore_index]
        if counted.size and (counted.min() < 0 or counted.max() >= classes):
            extra = "" if ignore_index is None else f" (or ignore_index={ignore_index})"
            raise ValueError(f"{fn}: labels must be in [0, {classes}){extra} for logits of shape {logits.shape}, got "
                             f"values in [{counted.min()}, {counted.max()}]")
    labels_flat = xp.reshape(xp.asarray(data), (-1,))
    weights = None
    if ignore_index is not None:  # on the backend, from the labels alone: nothing is read back
        weights, labels_flat = _counted(xp, labels_flat, ignore_index, logits.dtype)
    per_row = SoftmaxCrossEntropyFunction.apply(flat, labels=labels_flat)
    if smoothing:  # (1 - e) nll + e mean_c(-log p_c): PyTorch's label smoothing, through the fused op and log_softmax
        uniform = negative(mean(log_softmax(flat, axis=-1), axis=-1))
        per_row = add(multiply(per_row, 1.0 - smoothing), multiply(uniform, float(smoothing)))
    if weights is None:
        return _reduce(per_row if logits.ndim == 2 else reshape(per_row, shape), reduction, fn)
    nan_if_none = None
    if reduction == "mean":  # as PyTorch: NaN when no label counts, yet zero gradients (0 / 0 only in the value)
        count = xp.sum(weights, 0, True)  # (1,): activations need an axis on the device
        weights = xp.divide(weights, xp.add(count, xp.activation_forward(xp.subtract(1.0, count), "relu")))
        nan_if_none = Tensor(xp.reshape(xp.divide(xp.subtract(count, count), count), ()), backend=xp)
    weighted = multiply(per_row, Tensor(weights, backend=xp))
    if reduction == "none":
        return reshape(weighted, shape)
    return sum(weighted) if nan_if_none is None else add(sum(weighted), nan_if_none)


def _counted(xp, labels, ignore_index: int, dtype):
    """``(mask, safe labels)`` of int labels on the backend: mask (dtype) 1 where a label is not ``ignore_index``
    (min((label - ignore)^2, 1), exact for integers), safe labels with 0 in the ignored places (int64)."""
    as_float = xp.asarray(labels, dtype=dtype)
    d = xp.subtract(as_float, float(ignore_index))
    mask = xp.subtract(1.0, xp.activation_forward(xp.subtract(1.0, xp.multiply(d, d)), "relu"))
    return mask, xp.asarray(xp.multiply(as_float, mask), dtype=np.int64)


def binary_cross_entropy_with_logits(logits, targets, reduction="mean") -> Tensor:
    """Binary cross entropy of sigmoid(logits) against ``targets`` in [0, 1] of the same shape, stable for any logits:
    each element is a two-class softmax cross entropy of the logits (0, x) against (1 - t, t), the fused op."""
    fn = "binary_cross_entropy_with_logits"
    logits = _as_tensor(logits)
    _same_dtype(fn, logits=logits)
    data = targets.data if isinstance(targets, Tensor) else targets
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    if tuple(data.shape) != logits.shape:
        raise ValueError(f"{fn}: targets have shape {tuple(data.shape)}, expected the logits' shape {logits.shape}")
    if np.dtype(data.dtype).kind not in "iufb":
        raise TypeError(f"{fn}: targets must be numbers in [0, 1], got dtype {data.dtype}")
    xp, m = logits.xp, math.prod(logits.shape)
    lift = xp.asarray(np.array([[0.0, 1.0]], dtype=logits.dtype))  # x -> (0, x)
    pair = matmul(reshape(logits, (m, 1)), Tensor(lift, backend=xp))
    t = xp.reshape(xp.asarray(data, dtype=logits.dtype), (m, 1))
    both = xp.add(xp.matmul(t, xp.asarray(np.array([[-1.0, 1.0]], dtype=logits.dtype))),
                  xp.asarray(np.array([1.0, 0.0], dtype=logits.dtype)))  # t -> (1 - t, t)
    per_element = SoftmaxCrossEntropyFunction.apply(pair, labels=both)
    return _reduce(reshape(per_element, logits.shape) if reduction == "none" else per_element, reduction, fn)

# --------------------------------------------------------------------------------- recurrent layers
# One Function per layer call over the whole sequence: the input projection of every step is one matrix product,
# the recurrence and its backpropagation through time are one op each (``lstm_forward``/``lstm_backward``, ...).

__all__ += ["lstm", "gru"]


class _RecurrentFunction(Function):
    """x (N, T, F) @ kernel (F, G u) + bias, then the backend's recurrence ``forward_op``/``backward_op``."""

    forward_op = backward_op = ""

    def forward(self, x, kernel, recurrent_kernel, bias, *extra, return_sequences=False):
        xp = self.xp
        n, steps, features = x.shape
        self.flat_x, self.kernel, self.recurrent_kernel = xp.reshape(x, (n * steps, features)), kernel, recurrent_kernel
        proj = xp.bias_add(xp.matmul(self.flat_x, kernel), bias)
        y, self.ctx = getattr(xp, self.forward_op)(xp.reshape(proj, (n, steps, kernel.shape[1])), recurrent_kernel,
                                                   *extra, return_sequences)
        self.x_shape = x.shape
        return y

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        dproj, drec, *dextra = getattr(xp, self.backward_op)(g, self.recurrent_kernel, self.ctx)
        n, steps, features = self.x_shape
        flat = xp.reshape(dproj, (n * steps, dproj.shape[2]))
        dx = xp.reshape(xp.matmul(flat, self.kernel, transpose_b=True), self.x_shape) if need[0] else None
        dk = xp.matmul(self.flat_x, flat, transpose_a=True) if need[1] else None
        return (dx, dk, drec, xp.bias_grad(flat) if need[3] else None, *dextra)


class LSTMFunction(_RecurrentFunction):
    forward_op, backward_op = "lstm_forward", "lstm_backward"


class GRUFunction(_RecurrentFunction):
    forward_op, backward_op = "gru_forward", "gru_backward"


def _recurrent_args(fn: str, gates: int, x, weights: dict) -> list:
    """The Tensors of a recurrent call, checked: x (N, T, F), kernel (F, gates u), the others (u, gates u) or
    (gates u,)."""
    x = _as_tensor(x)
    _need_ndim(x, 3, fn, "x", "(batch, time, features)")
    tensors = {name: _as_tensor(w) for name, w in weights.items()}
    kernel = tensors["kernel"]
    _need_ndim(kernel, 2, fn, "kernel", f"(features, {gates} * units)")
    width = kernel.shape[1]
    if width % gates or width == 0:
        raise ValueError(f"{fn}: kernel has shape {kernel.shape}; its columns must be {gates} * units")
    units = width // gates
    expected = {"kernel": (x.shape[2], width), "recurrent_kernel": (units, width), "bias": (width,),
                "recurrent_bias": (width,)}
    for name, t in tensors.items():
        if t.shape != expected[name]:
            raise ValueError(f"{fn}: {name} has shape {t.shape}, expected {expected[name]} for x of shape "
                             f"{x.shape} and {units} units")
    if x.shape[1] < 1:
        raise ValueError(f"{fn}: x must hold at least one time step, got shape {x.shape}")
    _same_dtype(fn, x=x, **tensors)
    return [x, *tensors.values()]


def lstm(x, kernel, recurrent_kernel, bias, return_sequences=False) -> Tensor:
    """LSTM over x (N, T, F) from a zero state: kernel (F, 4u), recurrent_kernel (u, 4u), bias (4u,), gates in the
    order i, f, g, o; every step's hidden state (N, T, u) or the last one (N, u)."""
    args = _recurrent_args("lstm", 4, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias})
    return LSTMFunction.apply(*args, return_sequences=bool(return_sequences))


def gru(x, kernel, recurrent_kernel, bias, recurrent_bias, return_sequences=False) -> Tensor:
    """GRU over x (N, T, F) from a zero state: kernel (F, 3u), recurrent_kernel (u, 3u), bias and recurrent_bias
    (3u,), gates r, z, n with the reset gate on the recurrent product plus its bias (cuDNN, PyTorch)."""
    args = _recurrent_args("gru", 3, x, {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias,
                                         "recurrent_bias": recurrent_bias})
    return GRUFunction.apply(*args, return_sequences=bool(return_sequences))
