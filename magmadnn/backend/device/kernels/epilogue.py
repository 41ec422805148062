"""Launchers of epilogue.cu: bias + activation over the channels of a dense or convolution output in one launch,
and its backward (the activation's gradient and the bias gradient) in one launch."""

from __future__ import annotations

import math
from ctypes import c_double, c_int, c_longlong

from pymagma import _checks, _native
from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import NULL, _float_dtype, _run, _same
from pymagma.kernels.elementwise import _ACTIVATION_READS, ACTIVATION_GRADS, UNARY_OPS, contiguous
from pymagma.kernels.loader import MAX_BLOCKS as _MAX_BLOCKS
from pymagma.kernels.loader import THREADS

from ...geometry import ACTIVATIONS, check_activation
from .._common import _same_dtype

_DeviceArray = _array.DeviceArray
#: the unary code of each activation kind (elementwise.cu's ``unary_op``)
_FORWARD = {kind: UNARY_OPS["exp" if kind == "exponential" else kind] for kind in ACTIVATION_GRADS}


def reads_input(kind: str) -> bool:
    """Whether the gradient of ``kind`` reads the activation's input z (else the output y alone)."""
    return "x" in _ACTIVATION_READS[kind] and kind != "relu"


def _kind(kind: str, what: str) -> str:
    if kind not in ACTIVATION_GRADS:
        raise ValueError(f"{what}: unknown activation {kind!r}; expected one of {sorted(ACTIVATION_GRADS)}")
    return kind


def _geometry(shape, what: str) -> tuple[int, int, int]:
    if len(shape) < 2:
        raise ValueError(f"{what}: x must be (N, C, ...) with the channels on axis 1, got shape {tuple(shape)}")
    return int(shape[0]), int(shape[1]), math.prod(int(d) for d in shape[2:])


def _float_name(dtype, what: str) -> str:
    """The kernels' name of a floating ``dtype`` (``_float_dtype``'s check, from the dtype alone)."""
    name = programs.dtype_name(dtype)
    if name not in programs.FLOAT_DTYPES:
        raise TypeError(f"{what} needs a floating dtype ({', '.join(programs.FLOAT_DTYPES)}), got {name}")
    return name


#: The plans of the calls made (what _forward_launch and _backward_launch answered), by the arguments of a call of
#: DeviceArrays (shapes: tuples of ints; dtypes; the activation's name): found without the checked memo's key.
_FORWARD_PLANS: dict = {}
_BACKWARD_PLANS: dict = {}


def _plan(plans: dict, key, make):
    """``make(*key)``, kept in ``plans`` (its checks' errors are never kept; an unhashable argument is never kept)."""
    try:
        plan = plans.get(key)
    except TypeError:
        return make(*key)
    if plan is None:
        if len(plans) >= 1024:
            plans.clear()
        plan = plans[key] = make(*key)
    return plan


def _grid(n_items: int) -> int:
    """:func:`pymagma.kernels.common._run`'s grid for ``n_items`` (> 0) items, one per thread."""
    return min(-(-n_items // THREADS), _MAX_BLOCKS)


@_checks.once_per_arguments
def _forward_plan(shape, dtype, bias_shape, bias_dtype, kind) -> tuple:
    """(kernel expression, channels, inner size, the activation's code, whether z is kept) of a call's layouts, checked
    once per distinct arguments (the operands' devices are compared per call)."""
    what = "bias_activation"
    name = _float_name(dtype, what)
    if bias_dtype != dtype and programs.dtype_name(bias_dtype) != name:
        raise TypeError(f"{what}: dtypes differ ({dtype} and {bias_dtype})")
    _, channels, inner = _geometry(shape, what)
    if tuple(bias_shape) != (channels,):
        raise ValueError(f"{what}: bias must have shape ({channels},) for x of shape {shape}, got {bias_shape}")
    return programs.expression("bias_act", name), channels, inner, _FORWARD[_kind(kind, what)], reads_input(kind)


def _forward_launch(shape, dtype, bias_shape, bias_dtype, kind) -> tuple:
    """:func:`_forward_plan`'s answer as the launch takes it: (expression, the grid (0: no launch), the size, channels,
    inner size, code and keep flag as the kernel's never-modified scalar arguments, whether z is kept)."""
    expression, channels, inner, code, keep = _forward_plan(shape, dtype, bias_shape, bias_dtype, kind)
    size = math.prod(shape)
    return (expression, _grid(size) if size else 0, c_longlong(size), c_longlong(channels), c_longlong(inner),
            c_int(code), c_int(int(keep)), keep)


def bias_activation(x, b, kind, alpha=0.0):
    """``(y, z)``: ``z = x + b`` over axis 1 of ``x`` (N, C, ...) rounded to the dtype, ``y = kind(z)``, one
    launch (the op set's ``bias_activation`` on the device). ``z`` is written over ``x`` (C-contiguous; another
    layout is copied first), which is given up, when the gradient of ``kind`` reads it, else ``z`` is None and ``x``
    is left as it was.  A call whose arguments (C-contiguous DeviceArrays of one dtype object on one device; shapes,
    dtypes, kind) were planned before launches in this one frame."""
    if x.__class__ is _DeviceArray and b.__class__ is _DeviceArray and x.dtype is b.dtype and \
            x.is_c_contiguous and b.is_c_contiguous and x.device == b.device:
        try:
            plan = _FORWARD_PLANS[(x.shape, x.dtype, b.shape, b.dtype, kind)]
        except (KeyError, TypeError):  # a new call (or an unhashable argument): checked, then kept
            pass
        else:
            expression, grid, size, channels, inner, code, keep_c, keep = plan
            device = x.device
            y = _array._empty(x.shape, x.dtype, device)
            if grid:  # (pymagma.kernels.common._run, inline: the op's one frame between the model and the launch)
                libraries = _native.current
                libraries.launcher.launch("epilogue", expression, device,
                                          (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
                                          [x.ptr, b.ptr, y.ptr, size, channels, inner, code,
                                           c_double(float(alpha)), keep_c])
            return y, (x if keep else None)
    return _bias_activation_checked(x, b, kind, alpha)


def _bias_activation_checked(x, b, kind, alpha):
    what = "bias_activation"
    if kind not in ACTIVATIONS:
        check_activation(kind, what)
    if not (x.__class__ is _array.DeviceArray and b.__class__ is _array.DeviceArray):
        _float_dtype(x, what)  # the TypeError naming the operand that is not a DeviceArray
        _same([x, b], what)
    if x.dtype is not b.dtype:
        _same_dtype(what, x, b)
    alpha = float(alpha)
    plan = _plan(_FORWARD_PLANS, (x.shape, x.dtype, b.shape, b.dtype, kind), _forward_launch)
    expression, grid, size, channels, inner, code, keep_c, keep = plan
    if b.device != x.device:
        raise ValueError(f"{what}: arrays live on different devices ({x.device} and {b.device})")
    x = x if x.is_c_contiguous else contiguous(x)
    y = _array._empty(x.shape, x.dtype, x.device)
    _run("epilogue", expression, x, x.size,
         [x.ptr, (b if b.is_c_contiguous else contiguous(b)).ptr, y.ptr, size, channels, inner, code,
          c_double(alpha), keep_c])
    return y, (x if keep else None)


@_checks.once_per_arguments
def _backward_plan(shape, dtype, kind, has_z, has_y) -> tuple:
    """(kernel expression, outer, channels, inner, the gradient's code) of a call's layouts, checked once per distinct
    arguments."""
    what = "bias_activation_backward"
    name = _float_name(dtype, what)
    reads = _ACTIVATION_READS[_kind(kind, what)]
    if (not has_z and reads_input(kind)) or (not has_y and "y" in reads):
        raise ValueError(f"{what}: the gradient of {kind} needs {reads.replace('x', 'z')}")
    outer, channels, inner = _geometry(shape, what)
    return programs.expression("bias_act_backward", name), outer, channels, inner, ACTIVATION_GRADS[kind]


def _backward_launch(shape, dtype, kind, has_z, has_y) -> tuple:
    """:func:`_backward_plan`'s answer as the launch takes it: (expression, the grid (0: no launch), channels, outer,
    channels and inner size and code as the kernel's never-modified scalar arguments)."""
    expression, outer, channels, inner, code = _backward_plan(shape, dtype, kind, has_z, has_y)
    return (expression, max(1, min(channels, 65535)) if channels else 0, channels, c_longlong(outer),
            c_longlong(channels), c_longlong(inner), c_int(code))


def bias_activation_backward(dy, z, y, kind, alpha=0.0, bias=True):
    """``(dx, db)`` of :func:`bias_activation`: ``dx`` the activation's gradient from ``dy`` and ``z`` and/or ``y``
    (what ``kind`` reads), ``db`` the sum of ``dx`` over every axis but 1 (None unless ``bias``), one launch (the op
    set's ``bias_activation_backward`` on the device).  A call whose arguments (C-contiguous DeviceArrays of one
    dtype object and shape on one device; kind, which of z and y are given) were planned before launches in this one
    frame."""
    if kind == "relu" and z is None:  # its gradient code reads the input's sign: the output's is the same
        z = y
    if dy.__class__ is _DeviceArray and dy.is_c_contiguous:
        dtype, device, shape = dy.dtype, dy.device, dy.shape
        if (z is None or (z.__class__ is _DeviceArray and z.dtype is dtype and z.shape == shape and
                          z.device == device and z.is_c_contiguous)) and \
                (y is None or (y.__class__ is _DeviceArray and y.dtype is dtype and y.shape == shape and
                               y.device == device and y.is_c_contiguous)):
            try:
                plan = _BACKWARD_PLANS[(shape, dtype, kind, z is not None, y is not None)]
            except (KeyError, TypeError):  # a new call (or an unhashable argument): checked, then kept
                pass
            else:
                expression, grid, n_channels, outer, channels, inner, code = plan
                dx = _array._empty(shape, dtype, device)
                db = _array._empty((n_channels,), dtype, device) if bias else None
                if grid:  # (pymagma.kernels.common._run, inline)
                    libraries = _native.current
                    libraries.launcher.launch(
                        "epilogue", expression, device, (libraries.default_queues.get(device) or dy.queue).stream,
                        grid, THREADS, [dy.ptr, NULL if z is None else z.ptr, NULL if y is None else y.ptr, dx.ptr,
                                        NULL if db is None else db.ptr, outer, channels, inner, code,
                                        c_double(float(alpha))])
                return dx, db
    return _bias_activation_backward_checked(dy, z, y, kind, alpha, bias)


def _bias_activation_backward_checked(dy, z, y, kind, alpha, bias):
    what = "bias_activation_backward"
    if kind not in ACTIVATIONS:
        check_activation(kind, what)
    if dy.__class__ is not _array.DeviceArray:
        _float_dtype(dy, what)  # the TypeError naming dy
    _same([dy, z, y], what)
    alpha, bias = float(alpha), bool(bias)
    plan = _plan(_BACKWARD_PLANS, (dy.shape, dy.dtype, kind, z is not None, y is not None), _backward_launch)
    expression, grid, n_channels, outer, channels, inner, code = plan
    for a in (z, y):
        if a is not None and a.shape != dy.shape:
            raise ValueError(f"{what}: z and y must have dy's shape {dy.shape}, got {a.shape}")
    if not dy.is_c_contiguous:
        dy = contiguous(dy)
    if z is not None and not z.is_c_contiguous:
        z = contiguous(z)
    if y is not None and not y.is_c_contiguous:
        y = contiguous(y)
    dx = _array._empty(dy.shape, dy.dtype, dy.device)
    db = _array._empty((n_channels,), dy.dtype, dy.device) if bias else None
    _run("epilogue", expression, dy, n_channels,  # (pointers as ints: the launcher packs them)
         [dy.ptr, NULL if z is None else z.ptr, NULL if y is None else y.ptr, dx.ptr, NULL if db is None else db.ptr,
          outer, channels, inner, code, c_double(alpha)], grid=grid or None)
    return dx, db
