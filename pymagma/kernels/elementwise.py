"""Launchers of elementwise.cu: unary and binary math with broadcasting, select, activation gradients, channel
bias, fill, casts and strided copies."""

from __future__ import annotations

import math
from ctypes import c_double, c_int, c_longlong

import numpy as np

from .. import _native
from .. import array as _array
from . import programs
from .common import (
    _FLOAT_NAMES,
    MAX_DIMS,
    _device_array,
    _elem_strides,
    _float_dtype,
    _out_for,
    _ptr,
    _run,
    _same,
    geometry,
    make_strides3,
)
from .loader import MAX_BLOCKS, THREADS

_DeviceArray = _array.DeviceArray

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


# ------------------------------------------------------------------------------------------------ elementwise
def unary(op: str, x, p: float = 0.0, q: float = 0.0, out=None):
    """``out = op(x)`` elementwise; ``p``, ``q`` parameterise affine (p*x+q), power (x**p), clip ([p, q]), elu
    (alpha p) and leaky_relu (slope p).  ``gelu`` is exact, 0.5 x (1 + erf(x / sqrt 2)); ``gelu_tanh`` the tanh
    approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); ``hard_sigmoid`` is relu6(x + 3) / 6."""
    if op not in UNARY_OPS:
        raise ValueError(f"unknown unary op {op!r}; known: {sorted(UNARY_OPS)}")
    dtype = _float_dtype(x, op)
    x = x if x.is_c_contiguous else copy(x)  # (contiguous and _out_for's common cases, inline)
    out = _array._empty(x.shape, x.dtype, x.device) if out is None else _out_for(out, x.shape, x.dtype, x.device, op)
    _run("elementwise", programs.expression("unary", dtype), x, x.size,
         [c_int(UNARY_OPS[op]), x.ptr, out.ptr, c_longlong(x.size), c_double(p), c_double(q)])
    return out



def _broadcast_strides(a, shape) -> tuple[int, ...]:
    strides = (0,) * (len(shape) - a.ndim) + _elem_strides(a)
    dims = (1,) * (len(shape) - a.ndim) + tuple(a.shape)
    return tuple(0 if n == 1 else s for n, s in zip(dims, strides))


def _broadcast_geometry(shape: tuple, a, b=None):
    """The Strides3 of ``a`` (and ``b``) broadcast to ``shape`` and of a C-contiguous result of ``shape``, made once
    per layout (``geometry``; its stride where a size is 1 is 0, read nowhere)."""
    size = a.itemsize
    out = (shape, _array._c_strides_cached(shape, size), size)
    if b is None:
        return geometry(shape, (a.shape, a.strides, size), out)
    return geometry(shape, (a.shape, a.strides, size), (b.shape, b.strides, b.itemsize), out)


_BROADCASTING: set = set()  # (x shape, shape) pairs broadcast_divide found to broadcast
_BROADCAST_SHAPES: dict = {}  # {(a shape, b shape): their broadcast shape} of binary's DeviceArray operands


def _is_scalar(v) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def _binary_scalar(op: str, x, s, scalar_first: bool, out):
    dtype = _float_dtype(x, op)
    x = x if x.is_c_contiguous else copy(x)  # (contiguous and _out_for's common cases, inline)
    out = _array._empty(x.shape, x.dtype, x.device) if out is None else _out_for(out, x.shape, x.dtype, x.device, op)
    _run("elementwise", programs.expression("binary_scalar", dtype), x, x.size,
         [c_int(BINARY_OPS[op]), x.ptr, out.ptr, c_longlong(x.size), c_double(float(s)),
          c_int(int(scalar_first))])
    return out


def binary(op: str, a, b, out=None):
    """``out = a op b`` elementwise with NumPy broadcasting (any strides on the inputs).

    One operand may be a Python (or NumPy) scalar: it is rounded to the array's dtype first, as NumPy does.  A call
    into a new output on two DeviceArrays of one dtype object on one device whose layouts were checked before
    launches in this one frame."""
    if out is None and a.__class__ is _DeviceArray and b.__class__ is _DeviceArray and a.dtype is b.dtype and \
            a.device == b.device:
        try:
            plan = _BINARY_LAUNCHES[(op, a.shape, a.strides, b.shape, b.strides, a.dtype)]
        except (KeyError, TypeError):  # a new call (or an unhashable op): checked, then kept
            pass
        else:
            shape, expression, n, code, size, geometry = plan
            device = a.device
            out = _array._empty(shape, a.dtype, device)
            if n:  # (common._run, inline)
                grid = -(-n // THREADS)
                libraries = _native.current
                libraries.launcher.launch(
                    "elementwise", expression, device, (libraries.default_queues.get(device) or a.queue).stream,
                    grid if grid < MAX_BLOCKS else MAX_BLOCKS, THREADS,
                    [code, a.ptr, b.ptr, out.ptr, size] if geometry is None else
                    [code, a.ptr, b.ptr, out.ptr, size, geometry])
            return out
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}; known: {sorted(BINARY_OPS)}")
    if b.__class__ is not _DeviceArray and _is_scalar(b):
        return _binary_scalar(op, a, b, False, out)
    if a.__class__ is not _DeviceArray and _is_scalar(a):
        return _binary_scalar(op, b, a, True, out)
    # two arrays of one float dtype object on one device (_float_dtype's and _same's common case, inline)
    dtype = _FLOAT_NAMES.get(a.dtype) if a.__class__ is b.__class__ is _DeviceArray and a.dtype is b.dtype and \
        a.device == b.device else None
    if dtype is None:
        dtype = _float_dtype(a, op)
        _same([a, b], op)
    if a.shape == b.shape and a.__class__ is _DeviceArray:  # one shape: broadcast to itself (no call)
        shape = a.shape
    else:  # two shapes: their broadcast shape looked up once worked out (no call per binary)
        pair = (a.shape, b.shape) if a.__class__ is b.__class__ is _DeviceArray else None  # (tuples of ints)
        shape = None if pair is None else _BROADCAST_SHAPES.get(pair)
        if shape is None:
            try:
                shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
            except ValueError:
                raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from None
            if pair is not None:
                if len(_BROADCAST_SHAPES) >= 1024:
                    _BROADCAST_SHAPES.clear()
                _BROADCAST_SHAPES[pair] = shape
    plain = out is None and type(shape) is tuple
    out = _array._empty(shape, a.dtype, a.device) if plain else \
        _out_for(out, shape, a.dtype, a.device, op)  # (_out_for's common case, inline)
    n = math.prod(shape)
    if a.shape == b.shape == shape and a.is_c_contiguous and b.is_c_contiguous:
        launch = (shape, programs.expression("binary", dtype), n, c_int(BINARY_OPS[op]), c_longlong(n), None)
    else:
        launch = (shape, programs.expression("binary_strided", dtype), n, c_int(BINARY_OPS[op]), c_longlong(n),
                  _broadcast_geometry(shape, a, b))
    if plain and a.__class__ is b.__class__ is _DeviceArray and a.dtype is b.dtype and a.device == b.device:
        if len(_BINARY_LAUNCHES) >= 1024:
            _BINARY_LAUNCHES.clear()
        _BINARY_LAUNCHES[(op, a.shape, a.strides, b.shape, b.strides, a.dtype)] = launch
    _, expression, _, code, size, geometry = launch
    _run("elementwise", expression, a, n, [code, a.ptr, b.ptr, out.ptr, size] + ([] if geometry is None else
                                                                                  [geometry]))
    return out


#: (op, a's shape and strides, b's shape and strides, their one dtype) of a checked :func:`binary` of two DeviceArrays
#: on one device into a new output -> its launch: (output shape, expression, items, the op's code and the size as
#: the kernel's never-modified scalar arguments, the broadcast Strides3 or None for two C-contiguous operands)
_BINARY_LAUNCHES: dict = {}


def planned_binary(op: str, checked):
    """A framework's op ``checked(a, b)``, :func:`binary` with ``op`` into a new output: a call on two DeviceArrays
    of one dtype object on one device whose layouts :func:`binary` saw before launches in this one frame (grid and
    arguments as :func:`binary`'s); any other call is ``checked``'s (which must compute it as :func:`binary` does)."""
    launches, device_array, empty_, threads, max_blocks = _BINARY_LAUNCHES, _DeviceArray, _array._empty, THREADS, \
        MAX_BLOCKS

    def binary_op(a, b):
        if a.__class__ is device_array and b.__class__ is device_array and a.dtype is b.dtype and \
                a.device == b.device:
            plan = launches.get((op, a.shape, a.strides, b.shape, b.strides, a.dtype))
            if plan is not None:
                shape, expression, n, code, size, geometry = plan
                device = a.device
                out = empty_(shape, a.dtype, device)
                if n:  # (common._run, inline)
                    grid = -(-n // threads)
                    libraries = _native.current
                    libraries.launcher.launch(
                        "elementwise", expression, device, (libraries.default_queues.get(device) or a.queue).stream,
                        grid if grid < max_blocks else max_blocks, threads,
                        [code, a.ptr, b.ptr, out.ptr, size] if geometry is None else
                        [code, a.ptr, b.ptr, out.ptr, size, geometry])
                return out
        return checked(a, b)

    binary_op.__doc__, binary_op.__wrapped__, binary_op.__name__ = checked.__doc__, checked, checked.__name__
    return binary_op


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
         [cond.ptr, a.ptr, b.ptr, out.ptr, c_longlong(out.size), s])
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


#: One function a op without parameters (``relu(x)``, ``add(a, b)``), re-exported by :mod:`pymagma.kernels`.
NAMED = {**{op: _unary_function(op) for op in UNARY_OPS if op not in ("affine", "power", "clip", "elu", "leaky_relu")},
         **{op: _binary_function(op) for op in BINARY_OPS if op != "power"}}
globals().update(NAMED)


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


#: (x's shape, dtype, the bias' shape) -> a bias_add's launch: (expression, grid (0: no launch), the size, channels
#: and inner size as the kernel's never-modified scalar arguments), kept by its checked call
_BIAS_PLANS: dict = {}


def bias_add(x, bias, out=None):
    """``x + bias`` with ``bias`` of shape (C,) over axis 1 of ``x`` (N, C, ...) -- NCHW channels or dense rows.  A
    call into a new output whose operands (C-contiguous DeviceArrays of one dtype object on one device; shapes) were
    seen before launches in this one frame."""
    if out is None and x.__class__ is bias.__class__ is _DeviceArray and x.dtype is bias.dtype and \
            x.device == bias.device and x.is_c_contiguous and bias.is_c_contiguous:
        plan = _BIAS_PLANS.get((x.shape, x.dtype, bias.shape))
        if plan is not None:
            expression, grid, size, channels, inner = plan
            device = x.device
            out = _array._empty(x.shape, x.dtype, device)
            if grid:  # (common._run, inline: the op's one frame between the caller and the launch)
                libraries = _native.current
                libraries.launcher.launch("elementwise", expression, device,
                                          (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
                                          [x.ptr, bias.ptr, out.ptr, size, channels, inner])
            return out
    dtype = _FLOAT_NAMES.get(x.dtype) if x.__class__ is bias.__class__ is _DeviceArray and x.dtype is bias.dtype \
        and x.device == bias.device else None  # (_float_dtype's and _same's common case, inline)
    if dtype is None:
        dtype = _float_dtype(x, "bias_add")
        _same([x, bias], "bias_add")
    if x.ndim < 2 or tuple(bias.shape) != (x.shape[1],):
        raise ValueError(f"bias_add: bias must have shape ({x.shape[1] if x.ndim > 1 else 'C'},) for x {x.shape}")
    if out is None and x.is_c_contiguous and bias.is_c_contiguous and x.__class__ is bias.__class__ is _DeviceArray:
        if len(_BIAS_PLANS) >= 1024:
            _BIAS_PLANS.clear()
        _BIAS_PLANS[x.shape, x.dtype, bias.shape] = (
            programs.expression("bias_channels", dtype), min(-(-x.size // THREADS), MAX_BLOCKS) if x.size else 0,
            c_longlong(x.size), c_longlong(x.shape[1]), c_longlong(math.prod(x.shape[2:])))
    x, bias = x if x.is_c_contiguous else copy(x), bias if bias.is_c_contiguous else copy(bias)
    out = _array._empty(x.shape, x.dtype, x.device) if out is None else \
        _out_for(out, x.shape, x.dtype, x.device, "bias_add")  # (contiguous and _out_for's common cases, inline)
    inner = math.prod(x.shape[2:])
    _run("elementwise", programs.expression("bias_channels", dtype), x, x.size,
         [x.ptr, bias.ptr, out.ptr, c_longlong(x.size), c_longlong(x.shape[1]), c_longlong(inner)])
    return out


def planned_bias_add(checked):
    """A framework's op ``checked(x, b)``, :func:`bias_add` into a new output: a call whose operands (C-contiguous
    DeviceArrays of one dtype object on one device; shapes) :func:`bias_add` saw before launches in this one frame;
    any other call is ``checked``'s (which must compute it as :func:`bias_add` does)."""
    plans, device_array, empty_ = _BIAS_PLANS, _DeviceArray, _array._empty

    def bias_add_op(x, b):
        if x.__class__ is device_array and b.__class__ is device_array and x.dtype is b.dtype and \
                x.device == b.device and x.is_c_contiguous and b.is_c_contiguous:
            plan = plans.get((x.shape, x.dtype, b.shape))
            if plan is not None:
                expression, grid, size, channels, inner = plan
                device = x.device
                out = empty_(x.shape, x.dtype, device)
                if grid:  # (common._run, inline)
                    libraries = _native.current
                    libraries.launcher.launch("elementwise", expression, device,
                                              (libraries.default_queues.get(device) or x.queue).stream, grid,
                                              THREADS, [x.ptr, b.ptr, out.ptr, size, channels, inner])
                return out
        return checked(x, b)

    bias_add_op.__doc__, bias_add_op.__wrapped__, bias_add_op.__name__ = checked.__doc__, checked, checked.__name__
    return bias_add_op


def fill(x, value: float):
    """Set every element of contiguous ``x`` to ``value`` (in place); returns ``x``."""
    dtype = _float_dtype(x, "fill")
    if not x.is_c_contiguous:
        raise ValueError("fill needs a C-contiguous array")
    _run("elementwise", programs.expression("fill", dtype), x, x.size, [x.ptr, c_longlong(x.size), c_double(value)])
    return x


def cast(x, dtype, out=None):
    """A contiguous copy of ``x`` converted to ``dtype`` (float <-> float/int; float -> int truncates)."""
    src, dst = programs.dtype_name(_device_array(x, "cast").dtype), programs.dtype_name(dtype)
    if src not in programs.CAST_SOURCES or dst not in programs.CAST_TARGETS:
        raise TypeError(f"cast from {src} to {dst} is not available; sources {programs.CAST_SOURCES}, "
                        f"targets {programs.CAST_TARGETS}")
    x = contiguous(x)
    out = _out_for(out, x.shape, dtype, x.device, "cast")
    _run("elementwise", programs.expression("cast", src, dst), x, x.size, [x.ptr, out.ptr, c_longlong(x.size)])
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
         [x.ptr, out.ptr, c_longlong(x.size), s])
    return out


def broadcast_divide(x, shape, divisor: float = 1.0):
    """A new C-contiguous array of ``shape``: ``x`` broadcast to it (NumPy's rules) with every element divided by
    ``divisor``, in one launch (a reduction's gradient: the sum's with divisor 1, the mean's with the count)."""
    dtype = _float_dtype(x, "broadcast_divide")
    shape = tuple(map(int, shape))
    if (x.shape, shape) not in _BROADCASTING:  # (checked once per pair of shapes)
        if len(shape) < x.ndim or any(n not in (1, m) for n, m in zip(x.shape[::-1], shape[::-1])):
            raise ValueError(f"broadcast_divide: shape {x.shape} does not broadcast to {shape}")
        if len(_BROADCASTING) >= 1024:
            _BROADCASTING.clear()
        _BROADCASTING.add((x.shape, shape))
    out = _array._empty(shape, x.dtype, x.device)  # (a tuple of ints, checked above: x's dtype and device)
    launch = (shape, programs.expression("divide_strided", dtype), out.size, c_longlong(out.size),
              _broadcast_geometry(shape, x))
    if x.__class__ is _DeviceArray:
        if len(_DIVIDE_LAUNCHES) >= 1024:
            _DIVIDE_LAUNCHES.clear()
        _DIVIDE_LAUNCHES[(x.shape, x.strides, x.dtype, shape)] = launch
    _, expression, n, size, geometry = launch
    _run("elementwise", expression, x, n, [x.ptr, out.ptr, size, geometry, c_double(float(divisor))])
    return out


#: (x's shape, strides and dtype, the shape as a tuple of ints) of a checked :func:`broadcast_divide` of a DeviceArray
#: -> its launch: (the shape, expression, items, the size as the kernel's never-modified argument, the Strides3)
_DIVIDE_LAUNCHES: dict = {}


def planned_broadcast_divide(checked):
    """A framework's op ``checked(a, shape, divisor=1)``, :func:`broadcast_divide`: a call on a DeviceArray whose
    layout, dtype and shape (a tuple equal to the ints :func:`broadcast_divide` took) were seen before launches in this
    one frame; any other call is ``checked``'s (which must compute it as :func:`broadcast_divide` does)."""
    launches, device_array, empty_, threads, max_blocks = _DIVIDE_LAUNCHES, _DeviceArray, _array._empty, THREADS, \
        MAX_BLOCKS

    def broadcast_divide_op(a, shape, divisor=1):
        if a.__class__ is device_array:
            try:
                plan = launches.get((a.shape, a.strides, a.dtype, shape))
            except TypeError:  # an unhashable shape: the checked path takes it
                plan = None
            if plan is not None:
                out_shape, expression, n, size, geometry = plan
                device = a.device
                out = empty_(out_shape, a.dtype, device)
                if n:  # (common._run, inline)
                    grid = -(-n // threads)
                    libraries = _native.current
                    libraries.launcher.launch(
                        "elementwise", expression, device, (libraries.default_queues.get(device) or a.queue).stream,
                        grid if grid < max_blocks else max_blocks, threads,
                        [a.ptr, out.ptr, size, geometry, c_double(float(divisor))])
                return out
        return checked(a, shape, divisor)

    broadcast_divide_op.__doc__, broadcast_divide_op.__wrapped__ = checked.__doc__, checked
    broadcast_divide_op.__name__ = checked.__name__
    return broadcast_divide_op


def contiguous(x):
    """``x`` itself when it is C-contiguous, else a C-contiguous copy (:func:`copy`)."""
    return x if x.is_c_contiguous else copy(x)


def copy_any(x):
    """A C-contiguous copy of a device array of any dtype, on the device: :func:`copy`'s dtypes as they are, the
    others (bool, complex, the smaller and unsigned integers) as the same bytes seen as uint8 (bool element for
    element, wider items as a trailing axis of their bytes); more axes than a kernel takes copy through
    ``DeviceArray.copy``."""
    dtype = _array.require_device_array(x, "copy_any").dtype
    if programs.dtype_name(dtype) in programs.COPY_DTYPES:
        return copy(x) if x.ndim <= MAX_DIMS else x.copy()
    k = dtype.itemsize
    shape, strides = (x.shape, x.strides) if k == 1 else (x.shape + (k,), x.strides + (1,))
    if len(shape) > MAX_DIMS:
        return x.copy()
    raw = copy(_array.DeviceArray(shape, np.uint8, x.ptr, strides, owner=x, device=x.device))
    return _array.DeviceArray(x.shape, dtype, raw.ptr, owner=raw, device=x.device)


_array.UPPER["copy"] = copy  # in-place operators writing into strided views (DeviceArray.__iadd__, ...)
_array.UPPER["copy_any"] = copy_any  # DeviceArray.reshape of a view that is not C-contiguous
