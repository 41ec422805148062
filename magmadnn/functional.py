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

from .autograd import Function, Tensor
from .backend import geometry

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
    """x (N, in) @ w (in, out) + b (out,) through the backend's matmul and bias_add."""
    x, w = _as_tensor(x), _as_tensor(w)
    _need_ndim(x, 2, "dense", "x", "(N, in_features)")
    _need_ndim(w, 2, "dense", "w", "(in_features, out_features)")
    if x.shape[1] != w.shape[0]:
        raise ValueError(
            f"dense: x has shape {x.shape} but w has shape {w.shape}; expected x of shape (N, {w.shape[0]})"
        )
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


# --------------------------------------------------------------------------------- recurrent layers (group R)
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
