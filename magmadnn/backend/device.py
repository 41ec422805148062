"""Device backend: the magmadnn op set (:mod:`magmadnn.backend.ops`) on pymagma DeviceArrays.

Every op runs on the device and returns DeviceArrays; only ``to_numpy`` copies data to the host, and
``isfinite_all`` reads back one scalar. Parameters, gradients and optimizer state stay DeviceArrays, and the
``*_update`` ops change them in place with one fused kernel each.

What runs where:

- matrix products: ``pymagma.blas`` (gemm on the row-major identity, transposes as flags, stacks by gemm_batched);
- convolution (forward, backward data/filter/bias), average pooling, softmax / log-softmax, batch norm, and the
  sigmoid, tanh, ReLU and ELU activations: cuDNN through ``pymagma.dnn``;
- everything else (broadcasting arithmetic, reductions, argmax, bias add, the activations cuDNN lacks, activation
  gradients from the output only, the fused softmax cross-entropy, dropout, optimizer updates, random numbers, max
  pooling): ``pymagma.kernels``.

Dropout is *not* cuDNN's: its generator cannot be reproduced on the host, and host/device parity tests train with
the same seed and need the same masks. It is one fused kernel on the op set's Philox stream
(:mod:`magmadnn.backend.random`): one ``rng.take()``, u rounded to x's dtype, keep = u >= rate in that dtype,
mask = keep * (1 / (1 - rate)), y = x * mask.

Operands: a Python scalar takes the array's dtype (rounded to it first, as in NumPy); two arrays must share a dtype.
Module-level ops create arrays on the current GPU; :func:`for_index` gives the same op set creating them on GPU n.
Ops on existing arrays run on the arrays' device.

Where cuDNN's conventions differ from the op set, the op set wins: see the section "adapters" below.
"""

from __future__ import annotations

import math
import operator
import types

import numpy as np

from pymagma import array as _array
from pymagma import blas as _blas
from pymagma import dnn as _dnn
from pymagma import kernels as _k
from pymagma import runtime as _runtime
from pymagma.array import DeviceArray as _DeviceArray

from . import geometry as _geometry
from . import ops as _ops
from .random import Stream as _Stream

name = "device"
FUSED_ACTIVATIONS = _geometry.FUSED_ACTIVATIONS

# ------------------------------------------------------------------------------------------------------- helpers


def _is_array(a) -> bool:
    return isinstance(a, _DeviceArray)


def _is_scalar(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _contiguous(a):
    return a if a.is_c_contiguous else _copy_any(a)


def _copy_any(a):
    """A C-contiguous device copy of any view (bool arrays copied as bytes)."""
    if a.dtype == np.bool_:
        return _retype(_k.copy(_retype(a, np.uint8)), np.bool_)
    return _k.copy(a)


def _retype(a, dtype):
    """The same memory seen with another dtype of the same item size."""
    return _DeviceArray(a.shape, dtype, a.ptr, a.strides, owner=a, device=a.device)


def _same_dtype(fn: str, *arrays) -> None:
    first = arrays[0].dtype if arrays[0] is not None else None
    for a in arrays:
        if a is not None and a.dtype is not first:
            break
    else:
        return  # one dtype object: the common case, answered without building a set
    dtypes = {a.dtype for a in arrays if a is not None}
    if len(dtypes) > 1:
        raise TypeError(f"{fn}: operands have dtypes {sorted(str(d) for d in dtypes)}; the op set does not promote, "
                        "convert one with asarray(x, dtype)")


def _operand(v, like, fn: str):
    """A binary op's operand: DeviceArrays and scalars as they are, host arrays moved to ``like``'s device."""
    if _is_array(v) or _is_scalar(v):
        return v
    if isinstance(v, (np.ndarray, list, tuple)):
        dtype = like.dtype if _is_array(like) else None
        return _array.asarray(np.asarray(v, dtype=dtype), device=like.device if _is_array(like) else None)
    raise TypeError(f"{fn}: expected a DeviceArray or a scalar, got {type(v).__name__}")


def _binary(op: str, a, b):
    a_array, b_array = isinstance(a, _DeviceArray), isinstance(b, _DeviceArray)
    if not (a_array and b_array):
        a, b = _operand(a, b, op), _operand(b, a, op)
        a_array, b_array = isinstance(a, _DeviceArray), isinstance(b, _DeviceArray)
        if not (a_array or b_array):
            raise TypeError(f"{op}: at least one operand must be a DeviceArray, got {type(a).__name__} and "
                            f"{type(b).__name__}")
    if a_array and b_array and a.dtype is not b.dtype:
        _same_dtype(op, a, b)
    return _k.binary(op, a, b)


_FLOAT: dict = {}  # dtype argument -> whether pymagma's kernels take it as a floating dtype


def _is_float(dtype) -> bool:
    try:
        return _FLOAT[dtype]
    except KeyError:
        found = _FLOAT[dtype] = np.dtype(dtype).name in _k.FLOAT_DTYPES
        return found
    except TypeError:  # an unhashable dtype description
        return np.dtype(dtype).name in _k.FLOAT_DTYPES


def _shape(shape) -> tuple[int, ...]:
    return (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(int(s) for s in shape)


# ------------------------------------------------------------------------------------------- creation/transfer


def _creation_ops(device: int | None) -> dict:
    """The ops that make new arrays, allocating on GPU ``device`` (None: the current GPU)."""

    def asarray(x, dtype=None):
        """``x`` as a DeviceArray; host floats of Python type become float32, NumPy arrays keep their dtype."""
        if isinstance(x, _DeviceArray):
            if dtype is None or np.dtype(dtype) == x.dtype:
                return x
            return _k.cast(x, dtype)
        if dtype is not None:
            host = np.asarray(x, dtype=dtype)
        elif isinstance(x, (np.ndarray, np.generic)):
            host = np.asarray(x)
        else:
            host = np.asarray(x)
            if host.dtype == np.float64:
                host = host.astype(np.float32)
        return _array.asarray(host, device=device)

    def constant(value, dtype=None):
        """``asarray(value, dtype)`` made once per value and device and kept (see ``device_graphs``)."""
        host = np.asarray(value, dtype=dtype)
        if dtype is None and not isinstance(value, (np.ndarray, np.generic)) and host.dtype == np.float64:
            host = host.astype(np.float32)
        return _cached_constant(device, host, lambda h: _array.asarray(h, device=device))

    def zeros(shape, dtype=np.float32):
        return _array.zeros(_shape(shape), dtype, device=device)

    def full(shape, value, dtype=np.float32):
        if _is_float(dtype):
            return _k.fill(_array.empty(_shape(shape), dtype, device=device), float(value))
        return _array.full(_shape(shape), value, dtype, device=device)

    def ones(shape, dtype=np.float32):
        return full(shape, 1.0, dtype)

    def uniform(rng, shape, low=0.0, high=1.0, dtype=np.float32):
        """One draw (``rng.take()``) of the Philox stream: ``low + (high - low) * u`` rounded to ``dtype``."""
        return _k.uniform(_shape(shape), low, high, seed=rng.seed, offset=rng.take(), dtype=dtype, device=device)

    def normal(rng, shape, mean=0.0, std=1.0, dtype=np.float32):
        """One draw (``rng.take()``): ``mean + std * z`` for the stream's Box-Muller normals z."""
        return _k.normal(_shape(shape), mean, std, seed=rng.seed, offset=rng.take(), dtype=dtype, device=device)

    return {"asarray": asarray, "constant": constant, "zeros": zeros, "ones": ones, "full": full, "uniform": uniform,
            "normal": normal}


globals().update(_creation_ops(None))


def to_numpy(a) -> np.ndarray:
    """A host copy of ``a`` (the only op that moves data to the host)."""
    return a.get() if isinstance(a, _DeviceArray) else np.asarray(a)


def zeros_like(a):
    return _array.zeros(a.shape, a.dtype, device=a.device)


def copy(a):
    return _copy_any(a)


# ----------------------------------------------------------------------------------------------------- elementwise


def add(a, b):
    return _binary("add", a, b)


def subtract(a, b):
    return _binary("subtract", a, b)


def multiply(a, b):
    return _binary("multiply", a, b)


def divide(a, b):
    return _binary("divide", a, b)


def negative(a):
    return _k.negative(a)


def power(a, p):
    if not _is_scalar(p):
        raise TypeError(f"power: the exponent must be a scalar, got {type(p).__name__}")
    return _k.unary("power", a, float(p))


def sqrt(a):
    return _k.sqrt(a)


def log(a):
    return _k.log(a)


def clip(a, low, high):
    return _k.clip(a, float(low), float(high))


def isfinite_all(a) -> bool:
    """True when every element of ``a`` is finite: 0 * x is NaN exactly at the non-finite x, their sum is NaN when
    any is; one scalar comes back to the host."""
    if a.size == 0 or a.dtype.name not in _k.FLOAT_DTYPES:
        return True
    probe = _k.reduce("sum", _k.affine(a, 0.0, 0.0))
    return bool(np.isfinite(probe.get()))


# ------------------------------------------------------------------------------------------- reductions and shape


def sum(a, axis=None, keepdims=False):  # noqa: A001
    return _k.reduce("sum", a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False):
    return _k.reduce("mean", a, axis=axis, keepdims=keepdims)


def argmax(a, axis=None):
    if axis is None:
        return _k.argmax(reshape(a, (-1,)), 0)
    return _k.argmax(a, axis)


def reshape(a, shape):
    return _contiguous(a).reshape(shape)


def transpose(a, axes=None):
    return _copy_any(a.transpose() if axes is None else a.transpose(tuple(axes)))


def sum_to_shape(a, shape):
    """Sum ``a`` down to ``shape``: undoes broadcasting (leading axes and axes of size 1)."""
    shape = tuple(shape)
    if tuple(a.shape) == shape:
        return a
    lead = a.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"sum_to_shape: cannot reduce shape {a.shape} to larger rank shape {shape}")
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and a.shape[i + lead] != 1)
    out = _k.reduce("sum", a, axis=axes, keepdims=True) if axes else a
    return reshape(out, shape)


def _blas_operand(a):
    """``a`` when BLAS can address its matrices (contiguous or a transposed view of contiguous), else a copy."""
    if a.is_c_contiguous or (a.ndim >= 2 and a.mT.is_c_contiguous):
        return a
    return _k.copy(a)


def matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)``: gemm for 2-D operands, gemm_batched for stacks; transposes are views BLAS takes as flags."""
    if a.dtype is not b.dtype:
        _same_dtype("matmul", a, b)
    a, b = _blas_operand(a), _blas_operand(b)
    if a.ndim == 2 and b.ndim == 2:
        return _blas.gemm(a, b, trans_a=bool(transpose_a), trans_b=bool(transpose_b))
    a = a.mT if transpose_a else a
    b = b.mT if transpose_b else b
    if a.ndim < 2 or b.ndim < 2:
        return _blas.matmul(a, b)
    return _blas.gemm_batched(a, b)


def bias_add(x, b):
    if x.dtype is not b.dtype:
        _same_dtype("bias_add", x, b)
    return _k.bias_add(x, b)


def channel_sum(a):
    """Sum of ``a`` over every axis but 1."""
    return _k.reduce("sum", a, axis=tuple(d for d in range(a.ndim) if d != 1))


def bias_grad(dy):
    """The gradient of ``bias_add`` with respect to ``b``."""
    return channel_sum(dy)


# ------------------------------------------------------------------------------------------ activations, softmax

#: Kinds cuDNN computes (forward, and backward when x is given); the others are pymagma kernels.
_CUDNN_ACTIVATIONS = ("relu", "sigmoid", "tanh", "elu")
#: Kernel kinds whose gradient reads the forward output y.
_GRAD_READS_Y = ("selu", "exponential")


def activation_forward(x, kind, alpha=0.0):
    """y = act(x); ``alpha`` is the leaky-ReLU slope / ELU scale."""
    _geometry.check_activation(kind, "activation_forward")
    if kind in _CUDNN_ACTIVATIONS:
        return _dnn.activation_forward(_contiguous(x), kind, float(alpha) if kind == "elu" else None)
    if kind == "leaky_relu":
        return _k.leaky_relu(x, float(alpha))
    return _k.unary("exp" if kind == "exponential" else kind, x)


def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx of ``activation_forward``. Without x (relu, sigmoid, tanh after a fused convolution) the gradient comes
    from y alone with a kernel: cuDNN may derive it from x."""
    _geometry.check_activation(kind, "activation_backward")
    if x is None:
        if kind not in FUSED_ACTIVATIONS:
            raise ValueError(f"activation_backward: {kind} needs the forward input x")
        return _k.activation_backward(kind, dy, None, y)
    _same_dtype("activation_backward", dy, x, y)
    if kind in _CUDNN_ACTIVATIONS:
        x = _contiguous(x)
        if y is None:
            y = activation_forward(x, kind, alpha)
        return _dnn.activation_backward(_contiguous(y), _contiguous(dy), x, kind,
                                        float(alpha) if kind == "elu" else None)
    if kind in _GRAD_READS_Y:
        return _k.activation_backward(kind, dy, x, activation_forward(x, kind) if y is None else y, float(alpha))
    return _k.activation_backward(kind, dy, x, None, float(alpha))


def _axis_as_channels(x, axis: int):
    """``x`` seen as (outer, len(axis), inner, 1): cuDNN's CHANNEL mode then works along ``axis``."""
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"softmax: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    return _contiguous(x).reshape(outer, x.shape[axis], inner, 1)


def softmax(x, axis=-1):
    return _dnn.softmax_forward(_axis_as_channels(x, axis), mode="channel").reshape(x.shape)


def log_softmax(x, axis=-1):
    return _dnn.softmax_forward(_axis_as_channels(x, axis), log=True, mode="channel").reshape(x.shape)


def softmax_backward(dy, y, axis=-1):
    _same_dtype("softmax_backward", dy, y)
    return _dnn.softmax_backward(_axis_as_channels(y, axis), _axis_as_channels(dy, axis),
                                 mode="channel").reshape(y.shape)


def log_softmax_backward(dy, y, axis=-1):
    _same_dtype("log_softmax_backward", dy, y)
    return _dnn.softmax_backward(_axis_as_channels(y, axis), _axis_as_channels(dy, axis), log=True,
                                 mode="channel").reshape(y.shape)


def _int64_labels(labels):
    if labels.dtype.kind in "iu" and labels.dtype != np.int64:
        return _k.cast(labels, np.int64)
    return labels


def softmax_cross_entropy(logits, labels):
    """``(loss (N,), probs (N, C))``: one fused kernel, stable for any logits."""
    return _k.softmax_cross_entropy(logits, _int64_labels(labels), reduction="none", grad=False, probs=True)


def softmax_cross_entropy_backward(probs, labels, dloss):
    return _k.softmax_cross_entropy_backward(probs, _int64_labels(labels), dloss)


# ---------------------------------------------------------------------------------------------------------------
# Adapters: where cuDNN's conventions differ from the op set, the op set wins, here and only here.
#
# - Padding: the op set pads ((top, bottom), (left, right)), cuDNN only symmetrically. cuDNN gets the symmetric part
#   min(top, bottom), min(left, right); the rest is padded explicitly (a fill and a strided copy on the device):
#   zeros for convolution and average pooling. Gradients are computed on the padded input and the interior is copied
#   out. The forward's ``saved`` dict keeps the padded input for backward-filter.
# - Average pooling excludes padding from the count: cuDNN's AVERAGE_COUNT_EXCLUDE_PADDING when the padding is
#   symmetric; otherwise cuDNN's include-padding average over the explicitly padded input (sum / window area) times
#   area / (real elements of each window), a (Ho, Wo) factor computed from the geometry alone.
# - Max pooling is not cuDNN's: the op set gives a tied window's gradient to its first maximum, and cuDNN does not
#   document which tied maximum its backward picks. pymagma.kernels.max_pool2d saves the offset of each window's
#   first maximum (asymmetric padding handled in the kernel, never read) and max_pool2d_backward gathers the
#   gradient from those offsets, one thread per input element: the convention holds on any GPU by construction, and
#   the sum is deterministic.
# - Batch norm: op set running = momentum * running + (1 - momentum) * batch; cuDNN's exponentialAverageFactor is the
#   weight of the batch, so it gets 1 - momentum. Both take the unbiased batch variance for the running variance.
#   ctx = (saved mean, saved inverse std, eps) for cudnnBatchNormalizationBackward.
# - Argument order: pymagma.dnn binds cuDNN and keeps cuDNN's orders: conv2d_backward_filter(x, dy, w_shape),
#   pool2d_backward(y, dy, x, ...), activation_backward(y, dy, x, ...), softmax_backward(y, dy, ...),
#   batch_norm_backward(x, dy, scale, ...); the op set puts dy first (conv2d_backward_filter(dy, x, w_shape), ...).
#   This module keeps the op set's orders at its surface and maps them here; the conv calls name their arguments.
# ---------------------------------------------------------------------------------------------------------------


def _split_pads(padding):
    """(symmetric (ph, pw) for cuDNN, extra (top, bottom, left, right) to pad explicitly)."""
    t, b, l, r = _geometry.pads4(padding)
    ph, pw = min(t, b), min(l, r)
    return (ph, pw), (t - ph, b - ph, l - pw, r - pw)


def _pad(x, extra, value: float):
    """``x`` (N, C, H, W) surrounded by ``extra`` (top, bottom, left, right) elements of ``value``, on the device."""
    if not any(extra):
        return x
    t, b, l, r = extra
    n, c, h, w = x.shape
    out = _k.fill(_array.empty((n, c, h + t + b, w + l + r), x.dtype, device=x.device), value)
    _k.copy(x, out=out[:, :, t:t + h, l:l + w])
    return out


def _crop(xp, extra, shape):
    """The interior of shape ``shape`` of a gradient computed on the padded input."""
    if not any(extra):
        return xp
    t, _, l, _ = extra
    return _k.copy(xp[:, :, t:t + shape[2], l:l + shape[3]])



def conv2d_forward(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=None, saved=None,
                   activation=None):
    """Cross-correlation of x (N,C,H,W) with w (K,C/groups,R,S) -> (N,K,Ho,Wo), + bias, then a fused activation."""
    if activation is not None and activation not in FUSED_ACTIVATIONS:
        raise ValueError(f"conv2d_forward: activation {activation!r} cannot be fused; expected one of "
                         f"{FUSED_ACTIVATIONS} or None")
    _same_dtype("conv2d_forward", x, w, bias)
    sym, extra = _split_pads(padding)
    xin = _pad(_contiguous(x), extra, 0.0)
    if saved is not None and any(extra):
        saved["padded_x"] = xin
    y = _dnn.conv2d_forward(xin, _contiguous(w), bias, stride=_geometry.pair(stride), padding=sym,
                            dilation=_geometry.pair(dilation), groups=int(groups))
    if activation is not None:
        _dnn.activation_forward(y, activation, out=y)
    return y


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    sym, extra = _split_pads(padding)
    n, c, h, wd = (int(v) for v in x_shape)
    t, b, l, r = extra
    dxp = _dnn.conv2d_backward_data(dy=_contiguous(dy), w=_contiguous(w), x_shape=(n, c, h + t + b, wd + l + r),
                                    stride=_geometry.pair(stride), padding=sym, dilation=_geometry.pair(dilation),
                                    groups=int(groups))
    return _crop(dxp, extra, (n, c, h, wd))


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    sym, extra = _split_pads(padding)
    xin = saved.get("padded_x") if saved else None
    if xin is None:
        xin = _pad(_contiguous(x), extra, 0.0)
    return _dnn.conv2d_backward_filter(x=xin, dy=_contiguous(dy), w_shape=tuple(w_shape),
                                       stride=_geometry.pair(stride), padding=sym, dilation=_geometry.pair(dilation),
                                       groups=int(groups))


def conv2d_backward_bias(dy):
    return _dnn.conv2d_backward_bias(_contiguous(dy))


def _check_pool_mode(mode, fn: str) -> None:
    if mode not in ("max", "avg"):
        raise ValueError(f"{fn}: unknown mode {mode!r}; expected 'max' or 'avg'")


def _avg_factor(x_shape, window, stride, padding, dtype, device):
    """area / (real elements) of each output window, shape (1, 1, Ho, Wo), from the geometry alone."""
    (wh, ww), (sh, sw) = _geometry.pair(window), _geometry.pair(stride)
    t, b, l, r = _geometry.pads4(padding)
    per_axis = []
    for size, k, s, lo, hi in ((x_shape[2], wh, sh, t, b), (x_shape[3], ww, sw, l, r)):
        starts = np.arange((size + lo + hi - k) // s + 1) * s - lo
        per_axis.append(np.minimum(starts + k, size) - np.maximum(starts, 0))
    counts = np.multiply.outer(per_axis[0], per_axis[1])
    return _array.asarray((wh * ww / counts).astype(dtype)[None, None], device=device)


def pool2d_forward(x, mode, window, stride, padding=(0, 0)):
    """Max (padding ignored) or average (divided by the real elements of each window) pooling -> ``(y, ctx)``."""
    _check_pool_mode(mode, "pool2d_forward")
    window, stride = _geometry.pair(window), _geometry.pair(stride)
    sym, extra = _split_pads(padding)
    x = _contiguous(x)
    if mode == "max":  # our kernel: the op set's first-maximum rule by construction (cuDNN's tie rule is undocumented)
        t, b, l, r = _geometry.pads4(padding)
        return _k.max_pool2d(x, window, stride, ((t, b), (l, r)))
    if not any(extra):
        return _dnn.pool2d_forward(x, window, stride, sym, mode="avg_exclude_pad"), None
    xin = _pad(x, extra, 0.0)
    y_area = _dnn.pool2d_forward(xin, window, stride, sym, mode="avg_include_pad")
    factor = _avg_factor(x.shape, window, stride, padding, x.dtype, x.device)
    return _k.multiply(y_area, factor), (xin, y_area, factor)


def pool2d_backward(dy, x, y, ctx, mode, window, stride, padding=(0, 0)):
    _check_pool_mode(mode, "pool2d_backward")
    window, stride = _geometry.pair(window), _geometry.pair(stride)
    sym, extra = _split_pads(padding)
    dy, x = _contiguous(dy), _contiguous(x)
    if mode == "max":  # ctx: the offsets of the maxima the forward found
        t, b, l, r = _geometry.pads4(padding)
        return _k.max_pool2d_backward(dy, ctx, x.shape, window, stride, ((t, b), (l, r)))
    if ctx is None:
        return _dnn.pool2d_backward(_contiguous(y), dy, x, window, stride, sym, mode="avg_exclude_pad")
    xin, y_area, factor = ctx
    dxp = _dnn.pool2d_backward(y_area, _k.multiply(dy, factor), xin, window, stride, sym, mode="avg_include_pad")
    return _crop(dxp, extra, x.shape)


def _check_bn_input(x) -> None:
    if x.ndim not in (2, 4):
        raise ValueError(f"batch_norm: expected a 2-D (N, F) or 4-D (N, C, H, W) input, got shape {x.shape}")


def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise with batch statistics; running stats updated in place (op-set momentum; cuDNN's running variance
    takes the unbiased variance: for the biased one it updates a zeroed scratch, ``(1 - momentum) var_u``, which
    becomes the batch term ``(n - 1)/n var_u`` of the op set's update)."""
    _check_bn_input(x)
    momentum = float(momentum)
    scratch = running_var if unbiased else zeros_like(running_var)
    y, mean_, inv_std = _dnn.batch_norm_forward_training(_contiguous(x), gamma, beta, running_mean, scratch,
                                                         momentum=1.0 - momentum, eps=float(eps))
    if not unbiased:
        n = x.size // x.shape[1]
        batch = _k.affine(scratch, (n - 1) / (n * (1.0 - momentum)))
        running_stat_update(running_var, batch, momentum)
    return y, (mean_, inv_std, float(eps))


def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    _check_bn_input(x)
    return _dnn.batch_norm_forward_inference(_contiguous(x), gamma, beta, running_mean, running_var, eps=float(eps))


def batch_norm_backward(dy, x, gamma, ctx):
    """(dx, dgamma, dbeta) of ``batch_norm_train``."""
    mean_, inv_std, eps = ctx
    return _dnn.batch_norm_backward(_contiguous(x), _contiguous(dy), gamma, mean_, inv_std, eps=eps)


# -------------------------------------------------------------------------------------------------------- dropout


def dropout_forward(x, rate, rng):
    """Inverted dropout on the op set's Philox stream (one ``rng.take()``), not cuDNN's: see the module docstring."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_forward: rate must be in [0, 1), got {rate}")
    if hasattr(rng, "take_slot"):  # graph capture: the offset is read from device memory (models/graphed.py)
        return _k.dropout_at(x, float(rate), seed=rng.seed, offsets=rng.offsets, slot=rng.take_slot())
    return _k.dropout(x, float(rate), seed=rng.seed, offset=rng.take())


def dropout_backward(dy, mask):
    return multiply(dy, mask)


# ------------------------------------------------------------------------------------ in-place optimizer updates


def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p; v = momentum v + g'; p -= lr (g' + momentum v if nesterov else v)."""
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory (see _k.sgd_update_at)
        return _k.sgd_update_at(p, g, v if momentum else None, values=lr, momentum=float(momentum),
                                weight_decay=float(weight_decay), nesterov=bool(nesterov), keras=bool(keras))
    _k.sgd_update(p, g, v if momentum else None, lr=float(lr), momentum=float(momentum),
                  weight_decay=float(weight_decay), nesterov=bool(nesterov), keras=bool(keras))


def running_stat_update(running, batch, momentum):
    """In place: running -= (1 - momentum) (running - batch) (the SGD kernel's ``p -= lr g`` step)."""
    _same_dtype("running_stat_update", running, batch)
    _k.sgd_update(running, subtract(running, batch), None, lr=1.0 - float(momentum), momentum=0.0,
                  weight_decay=0.0, nesterov=False)


def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled``: AdamW); ``step`` counts from 1."""
    if isinstance(lr, _DeviceArray):  # graph capture: {lr, bias corrections} read from device memory
        return _k.adam_update_at(p, g, m, v, values=lr, beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                                 weight_decay=float(weight_decay), decoupled=bool(decoupled), keras=bool(keras))
    _k.adam_update(p, g, m, v, step=int(step), lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                   weight_decay=float(weight_decay), decoupled=bool(decoupled), keras=bool(keras))


def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory
        return _k.rmsprop_update_at(p, g, s, values=lr, rho=float(rho), eps=float(eps),
                                    weight_decay=float(weight_decay), keras=bool(keras))
    _k.rmsprop_update(p, g, s, lr=float(lr), rho=float(rho), eps=float(eps), weight_decay=float(weight_decay),
                      keras=bool(keras))


def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory
        return _k.adagrad_update_at(p, g, s, values=lr, eps=float(eps), weight_decay=float(weight_decay),
                                    keras=bool(keras))
    _k.adagrad_update(p, g, s, lr=float(lr), eps=float(eps), weight_decay=float(weight_decay), keras=bool(keras))


# ------------------------------------------------------------- normalization, embeddings, gradient clipping
# Kernels of pymagma/kernels/norm.cu and embeddings.cu. The gather never reads outside the table (NaN rows there);
# ids are checked before it by ``functional.embedding`` (a check kernel, reported at the next host read: see
# device_faults.py), and Model checks its host data against every Embedding once per call, before any batch runs.


def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """One block per row: ``(y, (mean, rstd))``."""
    _same_dtype("layer_norm_forward", x, gamma, beta)
    y, mean_, rstd = _k.layer_norm(x, gamma, beta, eps=float(eps), rms=bool(rms))
    return y, (mean_, rstd)


def layer_norm_backward(dy, x, gamma, ctx, rms=False):
    """(dx, dgamma, dbeta) of ``layer_norm_forward``; the parameter sums go over the rows in order."""
    mean_, rstd = ctx
    _same_dtype("layer_norm_backward", dy, x, gamma)
    dx = _k.layer_norm_backward(dy, x, gamma, mean_, rstd, rms=bool(rms))
    if gamma is None:
        return dx, None, None
    dgamma, dbeta = _k.layer_norm_param_grads(dy, x, mean_, rstd)
    return dx, dgamma, dbeta


def embedding_forward(table, indices):
    """The gather kernel (NaN rows for indices outside the table, never a read outside it)."""
    return _k.embedding(table, _int64_labels(indices))


def embedding_backward(dy, indices, num_rows):
    """The deterministic scatter-add kernel (one block per table row, indices in order)."""
    return _k.embedding_backward(dy, _int64_labels(indices), int(num_rows))


def clip_norm_scale(arrays, max_norm):
    """``max_norm / max(norm, max_norm)`` as clip(max_norm * rsqrt(sum of squares), 0, 1): rsqrt(0) = inf clips to
    1, a NaN norm stays NaN; four small kernels per call, nothing read back."""
    _same_dtype("clip_norm_scale", *arrays)
    total = None
    for a in arrays:
        part = _k.reduce("sum_squares", a)
        total = part if total is None else _k.binary("add", total, part)
    scale = _k.unary("affine", _k.unary("rsqrt", total), float(max_norm), 0.0)
    return _k.unary("clip", scale, 0.0, 1.0)


def finite_flag(arrays):
    """1 where ``sum(0 * a)`` of every array is 0, 0 where one is NaN (0 * inf is NaN): two small kernels per array
    and one compare (NaN != NaN), nothing read back."""
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"finite_flag: expected a non-empty list of arrays, got {arrays!r}")
    _same_dtype("finite_flag", *arrays)
    probe = None
    for a in arrays:
        part = _k.reduce("sum", _k.affine(a, 0.0, 0.0))
        probe = part if probe is None else _k.binary("add", probe, part)
    return _k.binary("equal", probe, probe)


def revert_update(a, saved, keep) -> None:
    """``a = keep ? a : saved`` by the select kernel, written into ``a`` (each element reads its own index)."""
    _same_dtype("revert_update", a, saved, keep)
    if a.shape != saved.shape or keep.shape != ():
        raise ValueError(f"revert_update: a {a.shape} and saved {saved.shape} must match and keep be 0-d, got keep "
                         f"{keep.shape}")
    _k.where(keep, a, saved, out=a)


def loss_scale_update(scale, counter, finite, growth_steps) -> None:
    """Keras' rule without a branch: grow = finite * (counter + 1 == growth_steps); counter = finite (counter + 1)
    (1 - grow); scale *= 0.5 + finite (grow + 0.5) (0.5, 1 or 2: exact)."""
    _same_dtype("loss_scale_update", scale, counter, finite)
    if scale.shape != () or counter.shape != () or finite.shape != ():
        raise ValueError("loss_scale_update: scale, counter and finite must be 0-d arrays")
    next_count = _k.binary("add", counter, 1.0)
    grow = _k.binary("multiply", finite, _k.binary("equal", next_count, float(growth_steps)))
    _k.binary("multiply", next_count, _k.binary("multiply", finite, _k.affine(grow, -1.0, 1.0)), out=counter)
    _k.binary("multiply", scale, _k.affine(_k.binary("multiply", finite, _k.affine(grow, 1.0, 0.5)), 1.0, 0.5),
              out=scale)


# --------------------------------------------------------------------------------------------------------- random


def rng(seed=None):
    """A counter-based random stream (:class:`magmadnn.backend.random.Stream`); a fresh random key when None."""
    return _Stream(np.random.SeedSequence().generate_state(1, np.uint64)[0] if seed is None else seed)


# ------------------------------------------------------------------------------------------ attention


def masked_softmax(x, mask=None, scale=1.0, causal=False):
    """Scale, causal and key masks and softmax of attention scores in one kernel."""
    if mask is not None and mask.dtype is not x.dtype:
        _same_dtype("masked_softmax", x, mask)
    return _k.masked_softmax(x, mask, float(scale), bool(causal))


def masked_softmax_backward(dy, y, scale=1.0):
    _same_dtype("masked_softmax_backward", dy, y)
    return _k.masked_softmax_backward(dy, y, float(scale))



# ----------------------------------------------------------------------------- shape and routing
# Strided copies (pymagma.kernels.copy) into and out of views of one array: no new kernel, no host round trip.


def _along(axis: int, start: int, stop: int) -> tuple:
    """The index of ``start:stop`` along ``axis``."""
    return (slice(None),) * axis + (slice(start, stop),)


def concatenate(arrays, axis):
    """The arrays joined along ``axis``: one strided copy of each into its slice of the result."""
    arrays = list(arrays)
    _same_dtype("concatenate", *arrays)
    first = arrays[0]
    axis = _geometry.concat_axis([a.shape for a in arrays], axis)
    total = int(np.sum([a.shape[axis] for a in arrays]))
    shape = tuple(total if d == axis else n for d, n in enumerate(first.shape))
    out = _array.empty(shape, first.dtype, device=first.device)
    offset = 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            _copy_into(a, out[_along(axis, offset, offset + n)])
        offset += n
    return out


def _copy_into(a, view) -> None:
    if a.dtype == np.bool_:
        _k.copy(_retype(a, np.uint8), out=_retype(view, np.uint8))
    else:
        _k.copy(a, out=view)


def split(a, sizes, axis):
    """Contiguous copies of the pieces of ``a`` along ``axis``."""
    sizes, axis = _geometry.split_sizes(a.shape, sizes, axis)
    out, offset = [], 0
    for n in sizes:
        out.append(_copy_any(a[_along(axis, offset, offset + n)]))
        offset += n
    return tuple(out)


def upsample_nearest2d(x, size):
    """One strided copy of x seen as (N, C, H, sh, W, sw) with zero strides along the repeats."""
    sh, sw = _geometry.pair(size)
    n, c, h, w = x.shape
    x6 = _contiguous(x).reshape(n, c, h, 1, w, 1)
    strides = tuple(0 if d in (3, 5) else s for d, s in enumerate(x6.strides))
    repeated = _DeviceArray((n, c, h, sh, w, sw), x.dtype, x6.ptr, strides, owner=x6, device=x.device)
    return _k.copy(repeated).reshape(n, c, h * sh, w * sw)


def upsample_nearest2d_backward(dy, size):
    """One reduction over the repeat axes of dy seen as (N, C, H, sh, W, sw)."""
    sh, sw = _geometry.pair(size)
    n, c, h, w = dy.shape
    return _k.reduce("sum", _contiguous(dy).reshape(n, c, h // sh, sh, w // sw, sw), axis=(3, 5))


# ------------------------------------------------------------------------- data-parallel gradient exchange (optional)
# Not ops: what magmadnn.distributed uses, when a backend has it, to stage gradients through page-locked host memory
# or to hand device buffers to a CUDA-aware MPI (see OPTIONAL in ops.py).


def host_empty(shape, dtype=np.float32) -> np.ndarray:
    """A NumPy array in page-locked host memory (cudaMallocHost): copies to and from it run at full speed."""
    return _runtime.pinned_empty(_shape(shape), dtype)


def copy_to_host(a, out: np.ndarray) -> np.ndarray:
    """Copy ``a`` into the C-contiguous host array ``out`` (same size and dtype) once its queue's work is done."""
    if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.size == a.size and out.dtype == a.dtype):
        raise ValueError(f"copy_to_host: out must be a C-contiguous {a.dtype} host array of {a.size} values")
    if a.size:
        a = _contiguous(a)
        a.queue.synchronize()
        _runtime.memcpy_dtoh(out, a.ptr)
    return out


def flat_pack(arrays, scale, out) -> None:
    """``scale * a`` of each array, flattened, one after the other into the 1-D DeviceArray ``out`` (one kernel
    each); returns once ``out`` is written (its queue synchronized), so that another library (MPI) may read it."""
    offset = 0
    for a in arrays:
        view = out[offset:offset + a.size]
        _k.binary("multiply", _contiguous(a).reshape(a.size), float(scale), out=view)
        offset += a.size
    if offset != out.size:
        raise ValueError(f"flat_pack: the arrays hold {offset} values, out {out.size}")
    out.queue.synchronize()


def flat_unpack(flat, shapes, divisor) -> list:
    """New DeviceArrays of ``shapes`` from consecutive values of ``flat``, each divided by ``divisor``."""
    out, offset = [], 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(_k.binary("divide", flat[offset:offset + n].reshape(tuple(shape)), float(divisor)))
        offset += n
    return out


# ------------------------------------------------------------------------------- graph replay (optional)
# Capture, static buffers fed from page-locked memory, device-to-device copies: magmadnn.models.graphed.

from .device_graphs import cached_constant as _cached_constant  # noqa: E402
from .device_graphs import copy_into, graph_capture, staging_buffer  # noqa: E402, F401

_GRAPH_OPS = ("graph_capture", "staging_buffer", "copy_into")

# ------------------------------------------------------------------------------- device checks (optional)
# Embedding ids and attention key masks checked by a kernel into a fault record, read with the next host read.

from .device_faults import check_binary, check_range, fault_error, fault_record  # noqa: E402, F401

_FAULT_OPS = ("check_range", "check_binary", "fault_record", "fault_error")

# ------------------------------------------------------------------------------------ recurrent layers
# Per time step one gemm (the recurrent product, into a reused buffer) and one fused gate kernel
# (pymagma.kernels.lstm_gates_forward, ...); backpropagation through time runs the backward kernels in reverse with
# one gemm per step for the state gradient, and the recurrent kernel's gradient is one gemm over all steps.
# ctx: the time-major states (T + 1, N, u), state 0 zero, and the saved gates.


def _filled_zeros(shape, dtype, device):
    """Zeros written by a kernel on the queue's stream (ordered with the steps' work, capturable in a graph)."""
    return _k.fill(_array.empty(shape, dtype, device=device), 0.0)


def _recurrent_buffers(x_proj, gates: int, return_sequences):
    n, steps, width = x_proj.shape
    u, dt, dev = width // gates, x_proj.dtype, x_proj.device
    hs = _filled_zeros((steps + 1, n, u), dt, dev)
    y = _array.empty((n, steps, u), dt, device=dev) if return_sequences else None
    return n, steps, u, hs, _array.empty((steps, n, width), dt, device=dev), _array.empty((n, width), dt, device=dev), y


def lstm_forward(x_proj, recurrent_kernel, return_sequences=True):
    _same_dtype("lstm_forward", x_proj, recurrent_kernel)
    x_proj, w = _contiguous(x_proj), _contiguous(recurrent_kernel)
    n, steps, u, hs, gates, rec, y = _recurrent_buffers(x_proj, 4, return_sequences)
    cs = _filled_zeros(hs.shape, hs.dtype, hs.device)
    for t in range(steps):
        _blas.gemm(hs[t], w, out=rec)
        _k.lstm_gates_forward(x_proj, rec, cs, hs, gates, y, t)
    return (y if y is not None else _k.copy(hs[steps])), (hs, cs, gates, bool(return_sequences))


def lstm_backward(dy, recurrent_kernel, ctx):
    hs, cs, gates, _ = ctx
    _same_dtype("lstm_backward", dy, recurrent_kernel, gates)
    dy, w = _contiguous(dy), _contiguous(recurrent_kernel)
    steps, n, four = gates.shape
    dh, dc = (_filled_zeros((n, four // 4), gates.dtype, gates.device) for _ in range(2))
    dgates, dx = _array.empty(gates.shape, gates.dtype, device=gates.device), _array.empty(
        (n, steps, four), gates.dtype, device=gates.device)
    for t in range(steps - 1, -1, -1):
        _k.lstm_gates_backward(dy, dh, dc, gates, cs, dgates, dx, t)
        if t:
            _blas.gemm(dgates[t], w, out=dh, trans_b=True)
    dw = _blas.gemm(hs[0:steps].reshape(steps * n, four // 4), dgates.reshape(steps * n, four), trans_a=True)
    return dx, dw


def gru_forward(x_proj, recurrent_kernel, recurrent_bias, return_sequences=True):
    _same_dtype("gru_forward", x_proj, recurrent_kernel, recurrent_bias)
    x_proj, w, b = _contiguous(x_proj), _contiguous(recurrent_kernel), _contiguous(recurrent_bias)
    n, steps, u, hs, gates, rec, y = _recurrent_buffers(x_proj, 3, return_sequences)
    qn = _array.empty((steps, n, u), hs.dtype, device=hs.device)
    for t in range(steps):
        _blas.gemm(hs[t], w, out=rec)
        _k.gru_gates_forward(x_proj, rec, b, hs, gates, qn, y, t)
    return (y if y is not None else _k.copy(hs[steps])), (hs, gates, qn, bool(return_sequences))


def gru_backward(dy, recurrent_kernel, ctx):
    hs, gates, qn, _ = ctx
    _same_dtype("gru_backward", dy, recurrent_kernel, gates)
    dy, w = _contiguous(dy), _contiguous(recurrent_kernel)
    steps, n, three = gates.shape
    dh = _filled_zeros((n, three // 3), gates.dtype, gates.device)
    dq, dx = _array.empty(gates.shape, gates.dtype, device=gates.device), _array.empty(
        (n, steps, three), gates.dtype, device=gates.device)
    for t in range(steps - 1, -1, -1):
        _k.gru_gates_backward(dy, dh, gates, qn, hs, dq, dx, t)
        if t:
            _blas.gemm(dq[t], w, out=dh, beta=1.0, trans_b=True)
    flat = dq.reshape(steps * n, three)
    dw = _blas.gemm(hs[0:steps].reshape(steps * n, three // 3), flat, trans_a=True)
    return dx, dw, _k.reduce("sum", flat, axis=0)


# ------------------------------------------------------------------------------------------------- several GPUs

_VIEWS: dict[int, types.ModuleType] = {}


def for_index(n):
    """The op set with its creation ops allocating on GPU ``n`` (one cached object per GPU)."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"for_index: a GPU number must be >= 0, got {n}")
    view = _VIEWS.get(n)
    if view is None:
        view = types.ModuleType(f"{__name__}.gpu{n}", f"magmadnn's device backend on GPU {n}")
        for op in _ops.OPS:
            setattr(view, op, globals()[op])
        for op, fn in _creation_ops(n).items():
            setattr(view, op, fn)
        view.name, view.device_index = f"gpu:{n}", n
        view.FUSED_ACTIVATIONS, view.for_index = FUSED_ACTIVATIONS, for_index
        for name_ in ("host_empty", "copy_to_host", "flat_pack", "flat_unpack"):
            setattr(view, name_, globals()[name_])
        for name_ in _GRAPH_OPS + _FAULT_OPS:
            setattr(view, name_, globals()[name_])
        _VIEWS[n] = view
    return view
