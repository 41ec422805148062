"""GPU kernels no library provides, written in CUDA C++, compiled with NVRTC on first use and run on DeviceArrays.

Every function runs on the default queue's stream of its operands' device.  Float kernels exist for float32,
float64, float16 and bfloat16 (half types compute in float32; bfloat16 arrays need ``ml_dtypes``, see
:mod:`pymagma.dtypes`).  Operands must be DeviceArrays (NumPy input is a TypeError).
Example::

    from pymagma import array, kernels
    x = array.asarray(np.random.rand(4, 3).astype(np.float32))
    y = kernels.add(kernels.relu(x), array.asarray(np.ones(3, np.float32)))   # broadcasting
    s = kernels.reduce("sum", y, axis=0)

Compilation: :func:`compile_program` (explicit arch and output kind, no device needed) and the caches in
:mod:`pymagma.kernels.compiler`.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from ctypes import c_double, c_int, c_longlong, c_ulonglong, c_void_p

import numpy as np

from .. import _checks, _native
from .. import array as _array
from ..errors import KernelCompileError
from . import compiler, programs
from .compiler import CompiledProgram, compile_source, nvrtc_version
from .loader import MAX_BLOCKS as _MAX_BLOCKS
from .loader import THREADS, compile_program, grid_for, launch  # noqa: F401 (kernels.launch is public)
from .programs import FLOAT_DTYPES, PROGRAMS

UNARY_OPS = {
    "negative": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "square": 5, "relu": 6, "sigmoid": 7, "tanh": 8,
    "sign": 9, "reciprocal": 10, "affine": 11, "power": 12, "clip": 13, "elu": 14, "leaky_relu": 15, "rsqrt": 16,
    "gelu_tanh": 17, "gelu": 18, "silu": 19, "softplus": 20, "softsign": 21, "selu": 22, "hard_sigmoid": 23,
}
BINARY_OPS = {
    "add": 0, "subtract": 1, "multiply": 2, "divide": 3, "maximum": 4, "minimum": 5, "power": 6,
    "relu_backward": 7, "sigmoid_backward": 8, "tanh_backward": 9, "equal": 10, "greater": 11, "less": 12,
    "squared_difference": 13, "greater_equal": 14, "less_equal": 15, "not_equal": 16,
}
#: Activation kinds of :func:`activation_backward` (codes of ``activation_grad`` in elementwise.cu).
ACTIVATION_GRADS = {"relu": 0, "sigmoid": 1, "tanh": 2, "leaky_relu": 3, "elu": 4, "gelu_tanh": 5, "gelu": 6,
                    "silu": 7, "softplus": 8, "softsign": 9, "selu": 10, "hard_sigmoid": 11, "exponential": 12}
REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3, "prod": 4, "sum_squares": 5}
MAX_DIMS = 8

__all__ = [
    "UNARY_OPS", "BINARY_OPS", "REDUCE_OPS", "PROGRAMS", "FLOAT_DTYPES", "CompiledProgram", "KernelCompileError",
    "compile_program", "compile_source", "nvrtc_version", "compiler", "programs",
    "ACTIVATION_GRADS", "unary", "binary", "where", "activation_backward", "bias_add", "fill", "cast", "copy",
    "contiguous",
    "reduce", "argmax", "argmin", "softmax_cross_entropy", "softmax_cross_entropy_backward", "dropout",
    "sgd_update", "adam_update", "adamw_update", "rmsprop_update", "adagrad_update", "uniform", "normal",
    "max_pool2d", "max_pool2d_backward",
    "masked_softmax", "masked_softmax_backward",
    "layer_norm", "layer_norm_backward", "layer_norm_param_grads", "embedding", "embedding_backward",
    "check_range", "check_binary", "FAULT_RECORD", "CHECK_DTYPES",
    *UNARY_OPS, *(k for k in BINARY_OPS if k not in UNARY_OPS),
]


class Strides3(ctypes.Structure):
    """Mirror of the ``Strides3`` struct in common.cuh: a shape and three stride sets in elements."""

    _fields_ = [("ndim", c_int), ("shape", c_longlong * MAX_DIMS), ("s0", c_longlong * MAX_DIMS),
                ("s1", c_longlong * MAX_DIMS), ("s2", c_longlong * MAX_DIMS)]


def make_strides3(shape, *stride_sets) -> Strides3:
    if len(shape) > MAX_DIMS:
        raise ValueError(f"kernels handle at most {MAX_DIMS} dimensions, got shape {tuple(shape)}")
    s = Strides3()
    s.ndim = len(shape)
    for d, n in enumerate(shape):
        s.shape[d] = int(n)
    for field, strides in zip(("s0", "s1", "s2"), stride_sets):
        target = getattr(s, field)
        for d, v in enumerate(strides):
            target[d] = int(v)
    return s


class PoolGeometry(ctypes.Structure):
    """Mirror of the ``PoolGeometry`` struct in pool.cu."""

    _fields_ = [("planes", c_longlong), ("h", c_longlong), ("w", c_longlong), ("ho", c_longlong), ("wo", c_longlong),
                ("kh", c_int), ("kw", c_int), ("sh", c_int), ("sw", c_int), ("top", c_int), ("left", c_int)]


# ------------------------------------------------------------------------------------------------------ helpers
def _elem_strides(a) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def _c_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    return _array.c_strides(tuple(shape), 1)


_device_array = _array.require_device_array  # a DeviceArray, or a TypeError naming the argument


def _float_dtype(a, what: str) -> str:
    name = programs.dtype_name(_device_array(a, what).dtype)
    if name not in FLOAT_DTYPES:
        raise TypeError(f"{what} needs a floating dtype ({', '.join(FLOAT_DTYPES)}), got {name}")
    return name


def _same(arrays, what: str):
    first = arrays[0]
    for other in arrays[1:]:
        if other is None:
            continue
        _device_array(other, what)
        if other.dtype != first.dtype and programs.dtype_name(other.dtype) != programs.dtype_name(first.dtype):
            raise TypeError(f"{what}: dtypes differ ({first.dtype} and {other.dtype})")
        if other.device != first.device:
            raise ValueError(f"{what}: arrays live on different devices ({first.device} and {other.device})")


def _run(program: str, expression: str, like, n_items: int, args, grid: int | None = None) -> None:
    if n_items == 0:
        return
    if grid is None:  # grid_for(n_items), inline: every kernel launch passes here
        grid = max(1, min(_MAX_BLOCKS, -(-n_items // THREADS)))
    _native.current.launcher.launch(program, expression, like.device, like.queue.stream, grid, THREADS, args)


def contiguous(x):
    """``x`` itself when it is C-contiguous, else a C-contiguous copy (:func:`copy`)."""
    return x if x.is_c_contiguous else copy(x)


def _out_for(out, shape, dtype, device, what: str):
    if out is None:
        if isinstance(dtype, np.dtype) and type(shape) is tuple:  # an operand's own (checked) shape and dtype
            return _array._empty(shape, dtype, device)
        return _array.empty(shape, dtype, device=device)
    _device_array(out, f"{what} out")
    if tuple(out.shape) != tuple(shape) or programs.dtype_name(out.dtype) != programs.dtype_name(dtype):
        raise ValueError(f"{what}: out has shape {out.shape} and dtype {out.dtype}, expected {tuple(shape)} {dtype}")
    if not out.is_c_contiguous:
        raise ValueError(f"{what}: out must be C-contiguous")
    return out


def _ptr(a) -> c_void_p:
    return c_void_p(a.ptr if a is not None else None)


# ------------------------------------------------------------------------------------------------ elementwise
def unary(op: str, x, p: float = 0.0, q: float = 0.0, out=None):
    """``out = op(x)`` elementwise; ``p``, ``q`` parameterise affine (p*x+q), power (x**p), clip ([p, q]), elu
    (alpha p) and leaky_relu (slope p).  ``gelu`` is exact, 0.5 x (1 + erf(x / sqrt 2)); ``gelu_tanh`` the tanh
    approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); ``hard_sigmoid`` is relu6(x + 3) / 6."""
    if op not in UNARY_OPS:
        raise ValueError(f"unknown unary op {op!r}; known: {sorted(UNARY_OPS)}")
    dtype = _float_dtype(x, op)
    x = contiguous(x)
    out = _out_for(out, x.shape, x.dtype, x.device, op)
    _run("elementwise", programs.expression("unary", dtype), x, x.size,
         [c_int(UNARY_OPS[op]), _ptr(x), _ptr(out), c_longlong(x.size), c_double(p), c_double(q)])
    return out


def _broadcast_strides(a, shape) -> tuple[int, ...]:
    strides = (0,) * (len(shape) - a.ndim) + _elem_strides(a)
    dims = (1,) * (len(shape) - a.ndim) + tuple(a.shape)
    return tuple(0 if n == 1 else s for n, s in zip(dims, strides))


def _is_scalar(v) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def _binary_scalar(op: str, x, s, scalar_first: bool, out):
    dtype = _float_dtype(x, op)
    x = contiguous(x)
    out = _out_for(out, x.shape, x.dtype, x.device, op)
    _run("elementwise", programs.expression("binary_scalar", dtype), x, x.size,
         [c_int(BINARY_OPS[op]), _ptr(x), _ptr(out), c_longlong(x.size), c_double(float(s)),
          c_int(int(scalar_first))])
    return out


def binary(op: str, a, b, out=None):
    """``out = a op b`` elementwise with NumPy broadcasting (any strides on the inputs).

    One operand may be a Python (or NumPy) scalar: it is rounded to the array's dtype first, as NumPy does."""
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}; known: {sorted(BINARY_OPS)}")
    if _is_scalar(b):
        return _binary_scalar(op, a, b, False, out)
    if _is_scalar(a):
        return _binary_scalar(op, b, a, True, out)
    dtype = _float_dtype(a, op)
    _same([a, b], op)
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from None
    out = _out_for(out, shape, a.dtype, a.device, op)
    n = math.prod(shape)
    if a.shape == b.shape == shape and a.is_c_contiguous and b.is_c_contiguous:
        _run("elementwise", programs.expression("binary", dtype), a, n,
             [c_int(BINARY_OPS[op]), _ptr(a), _ptr(b), _ptr(out), c_longlong(n)])
        return out
    s = make_strides3(shape, _broadcast_strides(a, shape), _broadcast_strides(b, shape), _c_strides(shape))
    _run("elementwise", programs.expression("binary_strided", dtype), a, n,
         [c_int(BINARY_OPS[op]), _ptr(a), _ptr(b), _ptr(out), c_longlong(n), s])
    return out


def where(cond, a, b, out=None):
    """``cond != 0 ? a : b`` elementwise with broadcasting; ``cond`` has the dtype of ``a`` and ``b`` (cast
    boolean masks first).  The result is C-contiguous."""
    dtype = _float_dtype(a, "where")
    _same([a, b, cond], "where")
    try:
        shape = np.broadcast_shapes(tuple(cond.shape), tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise ValueError(f"where: shapes {tuple(cond.shape)}, {tuple(a.shape)} and {tuple(b.shape)} do not "
                         "broadcast") from None
    out = _out_for(out, shape, a.dtype, a.device, "where")
    s = make_strides3(shape, *(_broadcast_strides(v, shape) for v in (cond, a, b)))
    _run("elementwise", programs.expression("select", dtype), a, out.size,
         [_ptr(cond), _ptr(a), _ptr(b), _ptr(out), c_longlong(out.size), s])
    return out


#: What each kind of :func:`activation_backward` reads besides dy.
_ACTIVATION_READS = {"relu": "x or y", "sigmoid": "y", "tanh": "y", "leaky_relu": "x", "elu": "x and y",
                     "gelu_tanh": "x", "gelu": "x", "silu": "x", "softplus": "x", "softsign": "x", "selu": "x and y",
                     "hard_sigmoid": "x", "exponential": "y"}


def activation_backward(kind: str, dy, x=None, y=None, alpha: float = 0.0, out=None):
    """dx of an activation from ``dy`` and the forward input ``x`` and/or output ``y``: relu (x or y), sigmoid (y),
    tanh (y), leaky_relu (x, slope ``alpha``), elu (x and y, ``alpha``), gelu and gelu_tanh (x), silu, softplus,
    softsign, hard_sigmoid (x), selu (x and y), exponential (y)."""
    if kind not in ACTIVATION_GRADS:
        raise ValueError(f"unknown activation {kind!r}; known: {sorted(ACTIVATION_GRADS)}")
    reads = _ACTIVATION_READS[kind]
    if kind == "relu" and x is None:
        x = y
    if (x is None and "x" in reads) or (y is None and "y" in reads and kind != "relu"):
        raise ValueError(f"activation_backward of {kind} needs {reads}")
    dtype = _float_dtype(dy, "activation_backward")
    _same([dy, x, y], "activation_backward")
    for name, v in (("x", x), ("y", y)):
        if v is not None and tuple(v.shape) != tuple(dy.shape):
            raise ValueError(f"activation_backward: {name} has shape {v.shape}, dy has {dy.shape}")
    dy, x, y = (None if v is None else contiguous(v) for v in (dy, x, y))
    out = _out_for(out, dy.shape, dy.dtype, dy.device, "activation_backward")
    _run("elementwise", programs.expression("activation_backward", dtype), dy, dy.size,
         [c_int(ACTIVATION_GRADS[kind]), _ptr(dy), _ptr(x), _ptr(y), _ptr(out), c_longlong(dy.size),
          c_double(alpha)])
    return out


def _unary_function(op: str):
    def function(x, out=None):
        return unary(op, x, out=out)

    function.__name__ = op
    function.__doc__ = f"Elementwise {op} of a DeviceArray."
    return function


def _binary_function(op: str):
    def function(a, b, out=None):
        return binary(op, a, b, out=out)

    function.__name__ = op
    function.__doc__ = f"Elementwise {op} of two DeviceArrays with broadcasting."
    return function


for _op in UNARY_OPS:
    if _op not in ("affine", "power", "clip", "elu", "leaky_relu"):
        globals()[_op] = _unary_function(_op)
for _op in BINARY_OPS:
    if _op != "power":
        globals()[_op] = _binary_function(_op)


def affine(x, scale: float, shift: float = 0.0, out=None):
    return unary("affine", x, scale, shift, out)


def clip(x, low: float, high: float, out=None):
    return unary("clip", x, low, high, out)


def elu(x, alpha: float = 1.0, out=None):
    return unary("elu", x, alpha, 0.0, out)


def leaky_relu(x, slope: float = 0.01, out=None):
    return unary("leaky_relu", x, slope, 0.0, out)


def power(x, exponent, out=None):
    """``x ** exponent`` for a float exponent or an array exponent (broadcast)."""
    if isinstance(exponent, int | float):
        return unary("power", x, float(exponent), 0.0, out)
    return binary("power", x, exponent, out)


def bias_add(x, bias, out=None):
    """``x + bias`` with ``bias`` of shape (C,) over axis 1 of ``x`` (N, C, ...) -- NCHW channels or dense rows."""
    dtype = _float_dtype(x, "bias_add")
    _same([x, bias], "bias_add")
    if x.ndim < 2 or tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"bias_add: bias must have shape ({x.shape[1] if x.ndim > 1 else 'C'},) for x {x.shape}")
    x, bias = contiguous(x), contiguous(bias)
    out = _out_for(out, x.shape, x.dtype, x.device, "bias_add")
    inner = math.prod(x.shape[2:])
    _run("elementwise", programs.expression("bias_channels", dtype), x, x.size,
         [_ptr(x), _ptr(bias), _ptr(out), c_longlong(x.size), c_longlong(x.shape[1]), c_longlong(inner)])
    return out


def fill(x, value: float):
    """Set every element of contiguous ``x`` to ``value`` (in place); returns ``x``."""
    dtype = _float_dtype(x, "fill")
    if not x.is_c_contiguous:
        raise ValueError("fill needs a C-contiguous array")
    _run("elementwise", programs.expression("fill", dtype), x, x.size, [_ptr(x), c_longlong(x.size), c_double(value)])
    return x


def cast(x, dtype, out=None):
    """A contiguous copy of ``x`` converted to ``dtype`` (float <-> float/int; float -> int truncates)."""
    src, dst = programs.dtype_name(_device_array(x, "cast").dtype), programs.dtype_name(dtype)
    if src not in programs.CAST_SOURCES or dst not in programs.CAST_TARGETS:
        raise TypeError(f"cast from {src} to {dst} is not available; sources {programs.CAST_SOURCES}, "
                        f"targets {programs.CAST_TARGETS}")
    x = contiguous(x)
    out = _out_for(out, x.shape, dtype, x.device, "cast")
    _run("elementwise", programs.expression("cast", src, dst), x, x.size, [_ptr(x), _ptr(out), c_longlong(x.size)])
    return out


def copy(x, out=None):
    """A C-contiguous copy of any strided view ``x`` (transposes, slices, negative strides, broadcasts); ``out``
    may be any non-overlapping strided view (e.g. the interior of a padded array)."""
    name = programs.dtype_name(_device_array(x, "copy").dtype)
    if name not in programs.COPY_DTYPES:
        raise TypeError(f"copy does not handle dtype {name}; supported: {programs.COPY_DTYPES}")
    if out is None:
        out = _array.empty(x.shape, x.dtype, device=x.device)
    elif tuple(_device_array(out, "copy out").shape) != tuple(x.shape) or out.dtype != x.dtype:
        raise ValueError(f"copy: out has shape {out.shape} and dtype {out.dtype}, expected {x.shape} {x.dtype}")
    elif out.device != x.device:
        raise ValueError(f"copy: out is on device {out.device}, x on {x.device}")
    s = make_strides3(x.shape, _elem_strides(x), _elem_strides(out))
    _run("elementwise", programs.expression("copy_strided", name), x, x.size,
         [_ptr(x), _ptr(out), c_longlong(x.size), s])
    return out


# ------------------------------------------------------------------------------------------------- reductions
def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = _checks.sizes(axis, "axis")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for an array of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return tuple(sorted(out))


@_checks.once_per_arguments
def _reduce_plan(op: str, shape: tuple, strides: tuple, itemsize: int, axis, keepdims: bool) -> tuple:
    """(output shape, outputs, elements reduced per output, kept strides, reduced strides) of a reduction."""
    ndim = len(shape)
    axes = _axes(axis, ndim)
    kept = [d for d in range(ndim) if d not in axes]
    n_red = math.prod(shape[d] for d in axes)
    if n_red == 0:
        raise ValueError(f"{op} over an empty set of elements (shape {shape}, axis {axis})")
    strides = tuple(s // itemsize for s in strides)
    kept_shape = tuple(shape[d] for d in kept)
    out_shape = tuple(1 if d in axes else shape[d] for d in range(ndim)) if keepdims else kept_shape
    s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))
    r = make_strides3(tuple(shape[d] for d in axes), [strides[d] for d in axes])
    return out_shape, math.prod(kept_shape), n_red, s, r


def reduce(op: str, x, axis=None, keepdims: bool = False):
    """Reduce ``x`` over ``axis`` (int, tuple or None = all) with sum, mean, max, min, prod or sum_squares."""
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; known: {sorted(REDUCE_OPS)}")
    dtype = _float_dtype(x, op)
    out_shape, n_out, n_red, s, r = _reduce_plan(op, x.shape, x.strides, x.itemsize, axis, keepdims)
    out = _array._empty(out_shape, x.dtype, x.device)
    _run("reduce", programs.expression("reduce_axes", dtype), x, n_out,
         [c_int(REDUCE_OPS[op]), _ptr(x), _ptr(out), c_longlong(n_out), c_longlong(n_red), s, r],
         grid=min(n_out, 65535))
    return out


def _arg_reduce(want_max: bool, x, axis: int):
    what = "argmax" if want_max else "argmin"
    dtype = _float_dtype(x, what)
    (axis,) = _axes(_checks.integer(axis, f"{what} axis"), x.ndim)
    if x.shape[axis] == 0:
        raise ValueError(f"{what} of an empty axis (shape {x.shape}, axis {axis})")
    strides = _elem_strides(x)
    kept = [d for d in range(x.ndim) if d != axis]
    kept_shape = tuple(x.shape[d] for d in kept)
    out = _array.empty(kept_shape, np.int64, device=x.device)
    s = make_strides3(kept_shape, [strides[d] for d in kept], _c_strides(kept_shape))
    n_out = math.prod(kept_shape)
    _run("reduce", programs.expression("arg_reduce", dtype), x, n_out,
         [c_int(int(want_max)), _ptr(x), _ptr(out), c_longlong(n_out), c_longlong(x.shape[axis]),
          c_longlong(strides[axis]), s], grid=min(n_out, 65535))
    return out


def argmax(x, axis: int = -1):
    """Index of the largest element along ``axis`` (int64; first on ties; NaN counts as largest, like NumPy)."""
    return _arg_reduce(True, x, axis)


def argmin(x, axis: int = -1):
    return _arg_reduce(False, x, axis)


# ------------------------------------------------------------------------------------------------------- loss
def softmax_cross_entropy(logits, labels, reduction: str = "mean", grad: bool = True, probs: bool = False):
    """Softmax over the last axis of (rows, classes) ``logits`` and cross-entropy against ``labels``.

    ``labels``: int64 class indices of shape (rows,) or per-class probabilities shaped like ``logits``.
    Returns ``(loss, dlogits)``: loss per row (reduction "none") or its "mean"/"sum" as a 0-d array, and the
    gradient of that loss w.r.t. the logits (``None`` when ``grad`` is False).  With ``probs=True`` the second
    result is the softmax itself, for :func:`softmax_cross_entropy_backward` later.
    """
    dtype = _float_dtype(logits, "softmax_cross_entropy")
    if logits.ndim != 2:
        raise ValueError(f"softmax_cross_entropy needs 2-D (rows, classes) logits, got shape {logits.shape}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    rows, classes = logits.shape
    logits = contiguous(logits)
    if programs.dtype_name(_device_array(labels, "softmax_cross_entropy labels").dtype) == "int64":
        if tuple(labels.shape) != (rows,):
            raise ValueError(f"class-index labels must have shape ({rows},), got {labels.shape}")
        kernel = "softmax_xent_index"
    else:
        _same([logits, labels], "softmax_cross_entropy")
        if tuple(labels.shape) != (rows, classes):
            raise ValueError(f"probability labels must have the logits' shape {logits.shape}, got {labels.shape}")
        kernel = "softmax_xent_prob"
    labels = contiguous(labels)
    arr = _array
    per_row = arr.empty((rows,), logits.dtype, device=logits.device)
    dlogits = arr.empty(logits.shape, logits.dtype, device=logits.device) if grad or probs else None
    scale = 1.0 / rows if reduction == "mean" and rows else 1.0
    _run("loss", programs.expression(kernel, dtype), logits, rows,
         [_ptr(logits), _ptr(labels), _ptr(per_row), _ptr(dlogits), c_longlong(rows), c_longlong(classes),
          c_double(scale), c_int(int(probs))], grid=min(rows, 65535))
    if reduction == "none":
        return per_row, dlogits
    return reduce(reduction, per_row), dlogits


def softmax_cross_entropy_backward(probs, labels, dloss, out=None):
    """dlogits from saved softmax ``probs`` (rows, classes), the labels given to :func:`softmax_cross_entropy` and a
    per-row upstream gradient ``dloss`` (rows,): ``(probs - onehot) * dloss`` for class indices,
    ``(probs * sum(target) - target) * dloss`` for probability targets."""
    dtype = _float_dtype(probs, "softmax_cross_entropy_backward")
    if probs.ndim != 2:
        raise ValueError(f"softmax_cross_entropy_backward needs 2-D probs, got shape {probs.shape}")
    rows, classes = probs.shape
    _same([probs, dloss], "softmax_cross_entropy_backward")
    if tuple(dloss.shape) != (rows,):
        raise ValueError(f"softmax_cross_entropy_backward: dloss must have shape ({rows},), got {dloss.shape}")
    if programs.dtype_name(_device_array(labels, "softmax_cross_entropy_backward labels").dtype) == "int64":
        if tuple(labels.shape) != (rows,):
            raise ValueError(f"class-index labels must have shape ({rows},), got {labels.shape}")
        kernel, grid = "softmax_xent_index_backward", None
    else:
        _same([probs, labels], "softmax_cross_entropy_backward")
        if tuple(labels.shape) != (rows, classes):
            raise ValueError(f"probability labels must have the probs' shape {probs.shape}, got {labels.shape}")
        kernel, grid = "softmax_xent_prob_backward", min(rows, 65535)
    probs, labels, dloss = contiguous(probs), contiguous(labels), contiguous(dloss)
    out = _out_for(out, probs.shape, probs.dtype, probs.device, "softmax_cross_entropy_backward")
    _run("loss", programs.expression(kernel, dtype), probs, rows if grid else probs.size,
         [_ptr(probs), _ptr(labels), _ptr(dloss), _ptr(out), c_longlong(rows), c_longlong(classes)], grid=grid)
    return out


# ------------------------------------------------------------------------------------------------- optimizers
def _check_hyper(what: str, **values) -> None:
    """Optimizer hyperparameters are finite real numbers (a NaN or infinite rate would spoil every parameter)."""
    for name, v in values.items():
        if type(v) is float or type(v) is int:  # the common case, without an abstract-class check
            if math.isfinite(v):
                continue
        elif not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(v):
            continue
        raise ValueError(f"{what}: {name} must be a finite real number, got {v!r}")


def _check_update(what: str, param, grad, *states):
    dtype = _float_dtype(param, what)
    _same([param, grad, *states], what)
    for a in (param, grad, *states):
        if a is not None and (tuple(a.shape) != tuple(param.shape) or not a.is_c_contiguous):
            raise ValueError(f"{what}: every buffer must be C-contiguous with the parameter's shape {param.shape}; "
                             f"got {a.shape}")
    return dtype


#: The ``keras`` flag of the update kernels (optim.cu's PM_KERAS).
_KERAS = 2


def sgd_update(param, grad, velocity=None, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
               nesterov: bool = False, keras: bool = False) -> None:
    """In-place SGD step; ``velocity`` (needed when momentum > 0) is updated in place too. ``keras``: the weight
    decay is decoupled (``p -= lr wd p`` first), as Keras 3 applies it; else L2 (added to the gradient)."""
    _check_hyper("sgd_update", lr=lr, momentum=momentum, weight_decay=weight_decay)
    if momentum and velocity is None:
        raise ValueError("sgd_update with momentum needs a velocity buffer")
    dtype = _check_update("sgd_update", param, grad, velocity)
    _run("optim", programs.expression("sgd", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(velocity if momentum else None), c_longlong(param.size), c_double(lr),
          c_double(momentum), c_double(weight_decay), c_int(int(nesterov) | (_KERAS if keras else 0))])


def adam_update(param, grad, m, v, *, step: int, lr: float, beta1: float = 0.9, beta2: float = 0.999,
                eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False, keras: bool = False) -> None:
    """In-place Adam step number ``step`` (1-based); ``decoupled`` weight decay makes it AdamW. ``keras``: Keras'
    epsilon, ``p -= lr sqrt(bc2)/bc1 m / (sqrt(v) + eps)``, else ``p -= lr (m/bc1) / (sqrt(v/bc2) + eps)``."""
    step = _checks.count(step, "adam step", minimum=1, maximum=2**63 - 1)
    _check_hyper("adam_update", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adam_update", param, grad, m, v)
    _run("optim", programs.expression("adam", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(m), _ptr(v), c_longlong(param.size), c_double(lr), c_double(beta1),
          c_double(beta2), c_double(eps), c_double(weight_decay), c_int(int(decoupled) | (_KERAS if keras else 0)),
          c_double(1.0 - beta1 ** step), c_double(1.0 - beta2 ** step)])


def adamw_update(param, grad, m, v, *, step: int, lr: float, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
    adam_update(param, grad, m, v, step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                decoupled=True)


def rmsprop_update(param, grad, square_avg, *, lr: float, rho: float = 0.9, eps: float = 1e-8,
                   weight_decay: float = 0.0, keras: bool = False) -> None:
    """In-place RMSProp: ``p -= lr g / (sqrt(s) + eps)`` with L2 decay, or (``keras``) ``lr g / sqrt(s + eps)`` with
    decoupled decay."""
    _check_hyper("rmsprop_update", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("rmsprop_update", param, grad, square_avg)
    _run("optim", programs.expression("rmsprop", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(square_avg), c_longlong(param.size), c_double(lr), c_double(rho),
          c_double(eps), c_double(weight_decay), c_int(_KERAS if keras else 0)])


def adagrad_update(param, grad, sum_squares, *, lr: float, eps: float = 1e-10, weight_decay: float = 0.0,
                   keras: bool = False) -> None:
    """In-place Adagrad: as :func:`rmsprop_update` with ``s += g^2``."""
    _check_hyper("adagrad_update", lr=lr, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adagrad_update", param, grad, sum_squares)
    _run("optim", programs.expression("adagrad", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(sum_squares), c_longlong(param.size), c_double(lr), c_double(eps),
          c_double(weight_decay), c_int(_KERAS if keras else 0)])


# ----------------------------------------------------------------------------------------------------- random
def _seed_and_offset(seed, offset) -> tuple[int, int]:
    """Philox key and stream: integers in [0, 2**64) (a float such as 1.5 is a TypeError, not truncated)."""
    return (_checks.count(seed, "seed", maximum=2**64 - 1), _checks.count(offset, "offset", maximum=2**64 - 1))


def _random(kernel: str, shape, a: float, b: float, seed: int, offset: int, dtype, out, device):
    arr = _array
    if out is None:
        out = arr.empty(shape, dtype, device=device)
    name = _float_dtype(out, kernel)
    if not out.is_c_contiguous:
        raise ValueError(f"{kernel}: out must be C-contiguous")
    seed, offset = _seed_and_offset(seed, offset)
    n = out.size
    _run("random", programs.expression(kernel, name), out, (n + 1) // 2,
         [_ptr(out), c_longlong(n), c_ulonglong(int(seed)), c_ulonglong(int(offset)), c_double(a), c_double(b)])
    return out


def uniform(shape=None, low: float = 0.0, high: float = 1.0, *, seed: int, offset: int = 0, dtype=np.float32,
            out=None, device=None):
    """Uniform numbers in [low, high] from Philox4x32-10 keyed by ``seed``; ``offset`` selects another stream.

    The underlying doubles lie in (0, 1] (1.0 with probability 2^-53), and rounding to the output dtype can reach
    either end (for float32 about once in 3e7 draws): do not rely on an open interval."""
    return _random("uniform", shape, low, high, seed, offset, dtype, out, device)


def dropout(x, rate: float, *, seed: int, offset: int = 0):
    """Inverted dropout of ``x`` on the :func:`uniform` stream of (seed, offset): returns ``(y, mask)`` with
    u rounded to x's dtype, mask = (u >= rate) * (1 / (1 - rate)) and y = x * mask, all in x's dtype."""
    dtype = _float_dtype(x, "dropout")
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {rate!r}")
    seed, offset = _seed_and_offset(seed, offset)
    x = contiguous(x)
    arr = _array
    y, mask = arr.empty(x.shape, x.dtype, device=x.device), arr.empty(x.shape, x.dtype, device=x.device)
    _run("random", programs.expression("dropout", dtype), x, (x.size + 1) // 2,
         [_ptr(x), _ptr(y), _ptr(mask), c_longlong(x.size), c_ulonglong(int(seed)), c_ulonglong(int(offset)),
          c_double(float(rate))])
    return y, mask


def normal(shape=None, mean: float = 0.0, std: float = 1.0, *, seed: int, offset: int = 0, dtype=np.float32,
           out=None, device=None):
    """Normal numbers (Box-Muller on Philox4x32-10 uniforms) with ``mean`` and ``std``."""
    return _random("normal", shape, mean, std, seed, offset, dtype, out, device)


# ------------------------------------------------------------------------------------------------------ pooling
_INT32 = np.dtype(np.int32)


@_checks.once_per_arguments
def _pool_geometry(shape, window, stride, padding, what: str) -> PoolGeometry:
    """The geometry of 2-D pooling over NCHW ``shape``: ``window`` and ``stride`` pairs of positive ints, ``padding``
    ``((top, bottom), (left, right))`` of non-negative ints smaller than the window."""
    if len(shape) != 4:
        raise ValueError(f"{what}: expected an (N, C, H, W) array, got shape {tuple(shape)}")
    (kh, kw), (sh, sw) = _two(window, "window", what), _two(stride, "stride", what)
    if len(padding) != 2:
        raise ValueError(f"{what}: padding must be ((top, bottom), (left, right)), got {padding!r}")
    (top, bottom), (left, right) = (_two(p, "padding", what) for p in padding)
    if min(kh, kw, sh, sw) < 1 or not (top < kh and bottom < kh and left < kw and right < kw):
        raise ValueError(f"{what}: window {(kh, kw)} and stride {(sh, sw)} must be positive and each padding "
                         f"{tuple(padding)} smaller than the window")
    n, c, h, w = (int(d) for d in shape)
    ho, wo = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    if ho < 1 or wo < 1:
        padded = (h + top + bottom, w + left + right)
        raise ValueError(f"{what}: window {(kh, kw)} does not fit the padded input {padded}")
    return PoolGeometry(n * c, h, w, ho, wo, kh, kw, sh, sw, top, left)


def _two(value, name: str, what: str) -> tuple[int, int]:
    pair = _checks.sizes(value, name)
    if len(pair) != 2:
        raise ValueError(f"{what}: {name} must be a pair of integers, got {value!r}")
    return pair


def max_pool2d(x, window, stride, padding=((0, 0), (0, 0))):
    """Max pooling of the NCHW array ``x`` -> ``(y, offsets)``: ``offsets`` (int32, y's shape) holds the row-major
    window offset of each window's first maximum (padding is never a maximum; a window holding NaN has NaN as its
    maximum, at its last offset, as NumPy's ``maximum`` chain gives).  :func:`max_pool2d_backward` sends the gradient
    there, so the gradient convention does not depend on a library's undocumented tie rule."""
    dtype = _float_dtype(x, "max_pool2d")
    g = _pool_geometry(x.shape, window, stride, padding, "max_pool2d")
    x = contiguous(x)
    y = _array._empty((x.shape[0], x.shape[1], g.ho, g.wo), x.dtype, x.device)
    offsets = _array._empty(y.shape, _INT32, x.device)
    _run("pool", programs.expression("max_pool_forward", dtype), x, y.size, [_ptr(x), _ptr(y), _ptr(offsets), g])
    return y, offsets


def max_pool2d_backward(dy, offsets, x_shape, window, stride, padding=((0, 0), (0, 0))):
    """dx of :func:`max_pool2d`: each input element gets the sum of ``dy`` over the windows whose maximum it is,
    summed in a fixed order by one thread (deterministic)."""
    dtype = _float_dtype(dy, "max_pool2d_backward")
    g = _pool_geometry(x_shape, window, stride, padding, "max_pool2d_backward")
    expected = (int(x_shape[0]), int(x_shape[1]), g.ho, g.wo)
    if tuple(dy.shape) != expected or tuple(offsets.shape) != expected:
        raise ValueError(f"max_pool2d_backward: dy {dy.shape} and offsets {offsets.shape} must have the pooled shape "
                         f"{expected}")
    if programs.dtype_name(_device_array(offsets, "max_pool2d_backward offsets").dtype) != "int32":
        raise TypeError(f"max_pool2d_backward: offsets must be the int32 array max_pool2d returned, got "
                        f"{offsets.dtype}")
    if offsets.device != dy.device:
        raise ValueError(f"max_pool2d_backward: dy and offsets live on different devices ({dy.device} and "
                         f"{offsets.device})")
    dy, offsets = contiguous(dy), contiguous(offsets)
    dx = _array.empty(tuple(int(d) for d in x_shape), dy.dtype, device=dy.device)
    _run("pool", programs.expression("max_pool_backward", dtype), dy, dx.size, [_ptr(dy), _ptr(offsets), _ptr(dx), g])
    return dx


# ---------------------------------------------------------------------------------------------------- attention
def _attention_scores(x, what: str) -> str:
    dtype = _float_dtype(x, what)
    if x.ndim != 4:
        raise ValueError(f"{what} needs 4-D (batch, heads, tq, tk) scores, got shape {x.shape}")
    return dtype


def masked_softmax(x, mask=None, scale: float = 1.0, causal: bool = False):
    """Softmax over the last axis of ``scale * x`` for attention scores ``x`` (batch, heads, tq, tk), in one kernel:
    ``causal`` masks key j > query i, ``mask`` (batch, tk) of x's dtype masks the keys where it is 0. A row with no
    key left is all zeros."""
    dtype = _attention_scores(x, "masked_softmax")
    b, h, tq, tk = (int(d) for d in x.shape)
    if mask is not None:
        _same([x, mask], "masked_softmax")
        if tuple(mask.shape) != (b, tk):
            raise ValueError(f"masked_softmax: mask must have shape {(b, tk)} for scores {x.shape}, got {mask.shape}")
        mask = contiguous(mask)
    x = contiguous(x)
    y = _array.empty(x.shape, x.dtype, device=x.device)
    rows = b * h * tq
    _run("attention", programs.expression("masked_softmax", dtype), x, rows,
         [_ptr(x), _ptr(mask), _ptr(y), c_longlong(rows), c_longlong(tq), c_longlong(tk), c_longlong(h * tq),
          c_double(scale), c_int(int(bool(causal)))], grid=min(rows, 65535))
    return y


def masked_softmax_backward(dy, y, scale: float = 1.0):
    """dx of :func:`masked_softmax` from its output ``y``: ``scale * y * (dy - sum(dy * y))`` along the last axis."""
    dtype = _attention_scores(y, "masked_softmax_backward")
    _same([y, dy], "masked_softmax_backward")
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"masked_softmax_backward: dy has shape {dy.shape}, expected y's {y.shape}")
    dy, y = contiguous(dy), contiguous(y)
    dx = _array.empty(y.shape, y.dtype, device=y.device)
    rows, tk = math.prod(y.shape[:-1]), int(y.shape[-1])
    _run("attention", programs.expression("masked_softmax_backward", dtype), y, rows,
         [_ptr(dy), _ptr(y), _ptr(dx), c_longlong(rows), c_longlong(tk), c_double(scale)], grid=min(rows, 65535))
    return dx


# ------------------------------------------------------------------------------- normalization and embeddings
def _rows_of(x, what: str) -> tuple[int, int]:
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"{what}: expected an array with a non-empty last axis, got shape {x.shape}")
    return x.size // x.shape[-1], int(x.shape[-1])


def _norm_params(x, gamma, beta, what: str) -> None:
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p is not None and tuple(p.shape) != (x.shape[-1],):
            raise ValueError(f"{what}: {name} must have shape ({x.shape[-1]},) for x of shape {x.shape}, got "
                             f"{p.shape}")


def layer_norm(x, gamma=None, beta=None, *, eps: float = 1e-5, rms: bool = False):
    """Each row of ``x`` normalised over its last axis -> ``(y, mean, rstd)``: y = (x - mean) * rstd * gamma + beta
    with rstd = 1 / sqrt(var + eps) (biased variance); ``rms``: no centring (mean 0, var = mean(x^2)).  ``gamma`` and
    ``beta`` (cols,) may be None; ``mean`` and ``rstd`` (one per row, x's dtype) are what the backward needs."""
    dtype = _float_dtype(x, "layer_norm")
    _same([x, gamma, beta], "layer_norm")
    _check_hyper("layer_norm", eps=eps)
    rows, cols = _rows_of(x, "layer_norm")
    _norm_params(x, gamma, beta, "layer_norm")
    x = contiguous(x)
    gamma, beta = (None if p is None else contiguous(p) for p in (gamma, beta))
    y = _array.empty(x.shape, x.dtype, device=x.device)
    mean = _array.empty(x.shape[:-1], x.dtype, device=x.device)
    rstd = _array.empty(x.shape[:-1], x.dtype, device=x.device)
    _run("norm", programs.expression("norm_forward", dtype), x, rows,
         [_ptr(x), _ptr(gamma), _ptr(beta), _ptr(y), _ptr(mean), _ptr(rstd), c_longlong(rows), c_longlong(cols),
          c_double(eps), c_int(int(rms))], grid=min(rows, 65535))
    return y, mean, rstd


def layer_norm_backward(dy, x, gamma, mean, rstd, *, rms: bool = False):
    """dx of :func:`layer_norm` from its saved ``mean`` and ``rstd`` (one block per row)."""
    dtype = _float_dtype(dy, "layer_norm_backward")
    _same([dy, x, gamma, mean, rstd], "layer_norm_backward")
    rows, cols = _rows_of(x, "layer_norm_backward")
    if tuple(dy.shape) != tuple(x.shape) or mean.size != rows or rstd.size != rows:
        raise ValueError(f"layer_norm_backward: dy {dy.shape} must match x {x.shape}, mean and rstd hold one value "
                         f"per row ({rows})")
    _norm_params(x, gamma, None, "layer_norm_backward")
    dy, x, mean, rstd = contiguous(dy), contiguous(x), contiguous(mean), contiguous(rstd)
    gamma = None if gamma is None else contiguous(gamma)
    dx = _array.empty(x.shape, x.dtype, device=x.device)
    _run("norm", programs.expression("norm_backward", dtype), x, rows,
         [_ptr(dy), _ptr(x), _ptr(gamma), _ptr(mean), _ptr(rstd), _ptr(dx), c_longlong(rows), c_longlong(cols),
          c_int(int(rms))], grid=min(rows, 65535))
    return dx


def layer_norm_param_grads(dy, x, mean, rstd):
    """``(dgamma, dbeta)`` of :func:`layer_norm`: the column sums of dy * xhat and of dy in two deterministic
    stages (parts of rows summed in order, then the parts in order)."""
    dtype = _float_dtype(dy, "layer_norm_param_grads")
    _same([dy, x, mean, rstd], "layer_norm_param_grads")
    rows, cols = _rows_of(x, "layer_norm_param_grads")
    if tuple(dy.shape) != tuple(x.shape) or mean.size != rows or rstd.size != rows:
        raise ValueError(f"layer_norm_param_grads: dy {dy.shape} must match x {x.shape}, mean and rstd hold one "
                         f"value per row ({rows})")
    dy, x, mean, rstd = contiguous(dy), contiguous(x), contiguous(mean), contiguous(rstd)
    dgamma = _array.empty((cols,), x.dtype, device=x.device)
    dbeta = _array.empty((cols,), x.dtype, device=x.device)
    parts = max(1, min(_NORM_PARTS, rows // _NORM_PART_ROWS))  # stage 1: parts of >= _NORM_PART_ROWS rows
    part_rows = -(-rows // parts)
    pg = _array.empty((parts, cols), x.dtype, device=x.device)
    pb = _array.empty((parts, cols), x.dtype, device=x.device)
    blocks = parts * -(-cols // THREADS)
    _run("norm", programs.expression("norm_param_grad", dtype), x, blocks,
         [_ptr(dy), _ptr(x), _ptr(mean), _ptr(rstd), _ptr(pg), _ptr(pb), c_longlong(rows), c_longlong(cols),
          c_longlong(part_rows), c_longlong(parts)], grid=min(blocks, 65535))
    _run("norm", programs.expression("norm_param_sum", dtype), x, cols,
         [_ptr(pg), _ptr(pb), _ptr(dgamma), _ptr(dbeta), c_longlong(parts), c_longlong(cols)])
    return dgamma, dbeta


#: The parameter sums of :func:`layer_norm_param_grads` split the rows into at most this many parts of at least
#: _NORM_PART_ROWS rows each (a fixed split for a shape: the same bits on every run).
_NORM_PARTS, _NORM_PART_ROWS = 64, 32


def _indices(indices, what: str):
    if programs.dtype_name(_device_array(indices, f"{what} indices").dtype) != "int64":
        raise TypeError(f"{what}: indices must be an int64 DeviceArray, got {indices.dtype}")
    return contiguous(indices)


def embedding(table, indices):
    """Rows of ``table`` (rows, dim) picked by the int64 ``indices`` (any shape) -> ``indices.shape + (dim,)``.  An
    index outside [0, rows) is never read: its output row is NaN."""
    dtype = _float_dtype(table, "embedding")
    if table.ndim != 2:
        raise ValueError(f"embedding: the table must be 2-D (rows, dim), got shape {table.shape}")
    indices = _indices(indices, "embedding")
    if indices.device != table.device:
        raise ValueError(f"embedding: table and indices live on different devices ({table.device} and "
                         f"{indices.device})")
    table = contiguous(table)
    rows, dim = table.shape
    out = _array.empty(tuple(indices.shape) + (dim,), table.dtype, device=table.device)
    _run("embedding", programs.expression("embedding_gather", dtype), table, out.size,
         [_ptr(table), _ptr(indices), _ptr(out), c_longlong(indices.size), c_longlong(rows), c_longlong(dim)])
    return out


def embedding_backward(dy, indices, rows: int):
    """The table gradient (rows, dim) of :func:`embedding`: each row the sum of the rows of ``dy`` whose index it is,
    added in the order of the indices (deterministic: one block per table row, no atomics)."""
    dtype = _float_dtype(dy, "embedding_backward")
    indices = _indices(indices, "embedding_backward")
    rows = _checks.count(rows, "rows", minimum=1, maximum=2**63 - 1)
    if tuple(dy.shape[:-1]) != tuple(indices.shape) or dy.ndim < 1:
        raise ValueError(f"embedding_backward: dy {dy.shape} must be the indices' shape {indices.shape} + (dim,)")
    if indices.device != dy.device:
        raise ValueError(f"embedding_backward: dy and indices live on different devices ({dy.device} and "
                         f"{indices.device})")
    dy = contiguous(dy)
    dim = int(dy.shape[-1])
    dtable = _array.empty((rows, dim), dy.dtype, device=dy.device)
    _run("embedding", programs.expression("embedding_scatter_add", dtype), dy, rows,
         [_ptr(dy), _ptr(indices), _ptr(dtable), c_longlong(indices.size), c_longlong(rows), c_longlong(dim)],
         grid=min(rows, 65535))
    return dtable

# -------------------------------------------------------------------------------- checks through a fault record
#: The length of a fault record (int64): site (0: none), low and high 32 bits of the value's 64 bits, flat index.
FAULT_RECORD = 4
#: The dtypes :func:`check_range` and :func:`check_binary` take (bools need no check).
CHECK_DTYPES = FLOAT_DTYPES + ("int64", "int32")


def _check_operands(x, record, site, what: str):
    name = programs.dtype_name(_device_array(x, what).dtype)
    if name not in CHECK_DTYPES:
        raise TypeError(f"{what} takes {', '.join(CHECK_DTYPES)} values, got {name}")
    _device_array(record, f"{what} record")
    if programs.dtype_name(record.dtype) != "int64" or tuple(record.shape) != (FAULT_RECORD,) \
            or not record.is_c_contiguous:
        raise ValueError(f"{what}: the record must be a contiguous int64 DeviceArray of shape ({FAULT_RECORD},), got "
                         f"{record.dtype} {record.shape}")
    if record.device != x.device:
        raise ValueError(f"{what}: x and the record live on different devices ({x.device} and {record.device})")
    site = _checks.count(site, "site", minimum=1, maximum=2**53)
    return name, contiguous(x), site


def check_range(x, low, high, record, site: int) -> None:
    """Flag the first element of ``x`` (in C order) outside ``[low, high)`` (NaN included) into the fault
    ``record`` unless it holds a fault already: ``record = [site, low 32 bits, high 32 bits, flat index]`` of the
    value's 64 bits (an integer's two's complement, a float's double).  Integer values and bounds compare exactly.
    One block on ``x``'s queue; nothing is read back."""
    name, x, site = _check_operands(x, record, site, "check_range")
    bound = c_longlong if name in ("int64", "int32") else c_double
    _run("check", programs.expression("check_range", name), x, x.size,
         [_ptr(x), c_longlong(x.size), bound(low), bound(high), c_longlong(site), _ptr(record)], grid=1)


def check_binary(x, record, site: int) -> None:
    """Flag the first element of ``x`` that is neither 0 nor 1 (NaN included) into the fault ``record``, as
    :func:`check_range` does."""
    name, x, site = _check_operands(x, record, site, "check_binary")
    _run("check", programs.expression("check_binary", name), x, x.size,
         [_ptr(x), c_longlong(x.size), c_longlong(site), _ptr(record)], grid=1)


# ------------------------------------------------------------------ per-step values in device memory (graph replay)
# The updates and dropout above with what changes from step to step read from device memory when the kernel runs
# (step.cu), so that a step captured as a CUDA graph replays with the values the host writes there before each
# launch.  ``values``: float64 device vector {lr, bc1 = 1 - beta1^t, bc2 = 1 - beta2^t} (the last two for Adam);
# ``offsets``: int64 device vector holding the bits of uint64 Philox offsets, ``offsets[slot]`` that of the draw.
def _step_values(values, needed: int, what: str):
    _device_array(values, f"{what} values")
    if values.dtype != np.float64 or values.size < needed or not values.is_c_contiguous:
        raise ValueError(f"{what}: values must be a C-contiguous float64 device vector of at least {needed} "
                         f"elements, got {values.dtype} {values.shape}")
    return values


def sgd_update_at(param, grad, velocity=None, *, values, momentum: float = 0.0, weight_decay: float = 0.0,
                  nesterov: bool = False, keras: bool = False) -> None:
    """:func:`sgd_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("sgd_update_at", momentum=momentum, weight_decay=weight_decay)
    if momentum and velocity is None:
        raise ValueError("sgd_update_at with momentum needs a velocity buffer")
    dtype = _check_update("sgd_update_at", param, grad, velocity)
    _run("step", programs.expression("sgd_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(velocity if momentum else None), c_longlong(param.size),
          _ptr(_step_values(values, 1, "sgd_update_at")), c_double(momentum), c_double(weight_decay),
          c_int(int(nesterov) | (_KERAS if keras else 0))])


def adam_update_at(param, grad, m, v, *, values, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   weight_decay: float = 0.0, decoupled: bool = False, keras: bool = False) -> None:
    """:func:`adam_update` with lr and the bias corrections read from ``values[0:3]`` on the device."""
    _check_hyper("adam_update_at", beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adam_update_at", param, grad, m, v)
    _run("step", programs.expression("adam_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(m), _ptr(v), c_longlong(param.size),
          _ptr(_step_values(values, 3, "adam_update_at")), c_double(beta1), c_double(beta2), c_double(eps),
          c_double(weight_decay), c_int(int(decoupled) | (_KERAS if keras else 0))])


def rmsprop_update_at(param, grad, square_avg, *, values, rho: float = 0.9, eps: float = 1e-8,
                      weight_decay: float = 0.0, keras: bool = False) -> None:
    """:func:`rmsprop_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("rmsprop_update_at", rho=rho, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("rmsprop_update_at", param, grad, square_avg)
    _run("step", programs.expression("rmsprop_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(square_avg), c_longlong(param.size),
          _ptr(_step_values(values, 1, "rmsprop_update_at")), c_double(rho), c_double(eps),
          c_double(weight_decay), c_int(_KERAS if keras else 0)])


def adagrad_update_at(param, grad, sum_squares, *, values, eps: float = 1e-10, weight_decay: float = 0.0,
                      keras: bool = False) -> None:
    """:func:`adagrad_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("adagrad_update_at", eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adagrad_update_at", param, grad, sum_squares)
    _run("step", programs.expression("adagrad_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(sum_squares), c_longlong(param.size),
          _ptr(_step_values(values, 1, "adagrad_update_at")), c_double(eps), c_double(weight_decay),
          c_int(_KERAS if keras else 0)])


def dropout_at(x, rate: float, *, seed: int, offsets, slot: int):
    """:func:`dropout` with the offset read from ``offsets[slot]`` (an int64 device vector holding uint64 bits)
    when the kernel runs."""
    dtype = _float_dtype(x, "dropout_at")
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {rate!r}")
    seed = _checks.count(seed, "seed", maximum=2**64 - 1)
    _device_array(offsets, "dropout_at offsets")
    slot = _checks.count(slot, "slot", maximum=offsets.size - 1)
    if offsets.dtype != np.int64 or not offsets.is_c_contiguous:
        raise ValueError(f"dropout_at: offsets must be a C-contiguous int64 device vector, got {offsets.dtype}")
    x = contiguous(x)
    y, mask = _array.empty(x.shape, x.dtype, device=x.device), _array.empty(x.shape, x.dtype, device=x.device)
    _run("step", programs.expression("dropout_at", dtype), x, (x.size + 1) // 2,
         [_ptr(x), _ptr(y), _ptr(mask), c_longlong(x.size), c_ulonglong(int(seed)), _ptr(offsets),
          c_longlong(slot), c_double(float(rate))])
    return y, mask

# ---------------------------------------------------------------------------------- recurrent gates
# One launch per time step of an LSTM/GRU, one thread per (batch row, unit); recurrent.cu says the layouts. The
# state buffers are written in place; the caller runs the recurrent gemm of each step between the launches.
__all__ += ["lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward", "gru_gates_backward"]


def _check_recurrent(what: str, step: int, x_shape, arrays: dict):
    """``x_shape`` = (N, T, G u); each named array must be a C-contiguous DeviceArray of the shape given with it,
    all of one float dtype and device; ``step`` in [0, T). Returns the dtype name."""
    items = [(name, a, shape) for name, (a, shape) in arrays.items() if a is not None]
    dtype = _float_dtype(items[0][1], what)
    _same([a for _, a, _ in items], what)
    for name, a, shape in items:
        if tuple(a.shape) != tuple(shape) or not a.is_c_contiguous:
            raise ValueError(f"{what}: {name} must be a C-contiguous array of shape {tuple(shape)}, got "
                             f"{tuple(a.shape)}{'' if a.is_c_contiguous else ' (strided)'}")
    if not 0 <= step < x_shape[1]:
        raise ValueError(f"{what}: step {step} is outside the sequence of {x_shape[1]} steps")
    return dtype


def _recurrent_geometry(x_proj, gates: int, what: str):
    if _device_array(x_proj, what).ndim != 3 or x_proj.shape[2] % gates:
        raise ValueError(f"{what}: x_proj must be (N, T, {gates} units), got shape {tuple(x_proj.shape)}")
    n, steps, width = (int(d) for d in x_proj.shape)
    return n, steps, width // gates


def lstm_gates_forward(x_proj, rec, cs, hs, gates, y, step: int) -> None:
    """LSTM step ``step``: gates of x_proj[:, step] + rec (N, 4u) into ``gates`` (T, N, 4u), cell and hidden state
    step + 1 into ``cs``/``hs`` (T + 1, N, u), and h into ``y`` (N, T, u) unless y is None."""
    n, steps, u = _recurrent_geometry(x_proj, 4, "lstm_gates_forward")
    dtype = _check_recurrent("lstm_gates_forward", step, x_proj.shape, {
        "x_proj": (x_proj, x_proj.shape), "rec": (rec, (n, 4 * u)), "cs": (cs, (steps + 1, n, u)),
        "hs": (hs, (steps + 1, n, u)), "gates": (gates, (steps, n, 4 * u)), "y": (y, (n, steps, u))})
    _run("recurrent", programs.expression("lstm_gates_forward", dtype), x_proj, n * u,
         [_ptr(x_proj), _ptr(rec), _ptr(cs), _ptr(hs), _ptr(gates), _ptr(y), c_longlong(n), c_longlong(steps),
          c_longlong(u), c_longlong(step), c_int(int(y is not None))])


def lstm_gates_backward(dy, dh, dc, gates, cs, dgates, dx_proj, step: int) -> None:
    """LSTM backward step ``step``: from dh (N, u, the recurrent part), dy ((N, T, u), or (N, u) for the last
    step only) and the carried cell gradient dc (N, u, updated in place), the gate gradients into ``dgates``
    (T, N, 4u) and ``dx_proj`` (N, T, 4u)."""
    n, steps, u = _recurrent_geometry(dx_proj, 4, "lstm_gates_backward")
    dy_seq = getattr(dy, "ndim", 0) == 3
    dtype = _check_recurrent("lstm_gates_backward", step, dx_proj.shape, {
        "dy": (dy, (n, steps, u) if dy_seq else (n, u)), "dh": (dh, (n, u)), "dc": (dc, (n, u)),
        "gates": (gates, (steps, n, 4 * u)), "cs": (cs, (steps + 1, n, u)), "dgates": (dgates, (steps, n, 4 * u)),
        "dx_proj": (dx_proj, dx_proj.shape)})
    _run("recurrent", programs.expression("lstm_gates_backward", dtype), dx_proj, n * u,
         [_ptr(dy), _ptr(dh), _ptr(dc), _ptr(gates), _ptr(cs), _ptr(dgates), _ptr(dx_proj), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(dy_seq))])


def gru_gates_forward(x_proj, rec, bias, hs, gates, qn, y, step: int) -> None:
    """GRU step ``step``: from x_proj[:, step] and rec = h U (N, 3u) plus ``bias`` (3u,), the gates r, z, n into
    ``gates`` (T, N, 3u), q_n into ``qn`` (T, N, u), state step + 1 into ``hs`` and h into ``y`` unless None."""
    n, steps, u = _recurrent_geometry(x_proj, 3, "gru_gates_forward")
    dtype = _check_recurrent("gru_gates_forward", step, x_proj.shape, {
        "x_proj": (x_proj, x_proj.shape), "rec": (rec, (n, 3 * u)), "bias": (bias, (3 * u,)),
        "hs": (hs, (steps + 1, n, u)), "gates": (gates, (steps, n, 3 * u)), "qn": (qn, (steps, n, u)),
        "y": (y, (n, steps, u))})
    _run("recurrent", programs.expression("gru_gates_forward", dtype), x_proj, n * u,
         [_ptr(x_proj), _ptr(rec), _ptr(bias), _ptr(hs), _ptr(gates), _ptr(qn), _ptr(y), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(y is not None))])


def gru_gates_backward(dy, dh, gates, qn, hs, dq, dx_proj, step: int) -> None:
    """GRU backward step ``step``: from dh (N, u, in place: replaced by its direct part z dh) and dy, the gate
    gradients into ``dx_proj`` (N, T, 3u) and the recurrent product's into ``dq`` (T, N, 3u)."""
    n, steps, u = _recurrent_geometry(dx_proj, 3, "gru_gates_backward")
    dy_seq = getattr(dy, "ndim", 0) == 3
    dtype = _check_recurrent("gru_gates_backward", step, dx_proj.shape, {
        "dy": (dy, (n, steps, u) if dy_seq else (n, u)), "dh": (dh, (n, u)), "gates": (gates, (steps, n, 3 * u)),
        "qn": (qn, (steps, n, u)), "hs": (hs, (steps + 1, n, u)), "dq": (dq, (steps, n, 3 * u)),
        "dx_proj": (dx_proj, dx_proj.shape)})
    _run("recurrent", programs.expression("gru_gates_backward", dtype), dx_proj, n * u,
         [_ptr(dy), _ptr(dh), _ptr(gates), _ptr(qn), _ptr(hs), _ptr(dq), _ptr(dx_proj), c_longlong(n),
          c_longlong(steps), c_longlong(u), c_longlong(step), c_int(int(dy_seq))])
