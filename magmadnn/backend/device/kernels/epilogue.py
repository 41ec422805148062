"""Launchers of epilogue.cu: bias + activation over the channels of a dense or convolution output in one launch,
and its backward (the activation's gradient and the bias gradient) in one launch."""

from __future__ import annotations

import math
from ctypes import c_double, c_int, c_longlong

from pymagma.kernels import programs
from pymagma.kernels.common import _float_dtype, _out_for, _ptr, _run, _same
from pymagma.kernels.elementwise import _ACTIVATION_READS, ACTIVATION_GRADS, UNARY_OPS, contiguous

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


def bias_activation(x, bias, kind: str, alpha: float = 0.0):
    """``(y, z)``: ``z = x + bias`` over axis 1 of ``x`` (N, C, ...) rounded to the dtype, ``y = kind(z)``, one
    launch. ``z`` is written over ``x`` (which must be C-contiguous and is given up) when the gradient of ``kind``
    reads it, else ``z`` is None and ``x`` is left as it was."""
    what = "bias_activation"
    dtype = _float_dtype(x, what)
    _same([x, bias], what)
    _, channels, inner = _geometry(x.shape, what)
    if tuple(bias.shape) != (channels,):
        raise ValueError(f"{what}: bias must have shape ({channels},) for x of shape {x.shape}, got {bias.shape}")
    if not x.is_c_contiguous:
        raise ValueError(f"{what}: x must be C-contiguous (its memory receives x + bias)")
    keep = reads_input(_kind(kind, what))
    y = _out_for(None, x.shape, x.dtype, x.device, what)
    _run("epilogue", programs.expression("bias_act", dtype), x, x.size,
         [_ptr(x), _ptr(contiguous(bias)), _ptr(y), c_longlong(x.size), c_longlong(channels), c_longlong(inner),
          c_int(_FORWARD[kind]), c_double(alpha), c_int(int(keep))])
    return y, (x if keep else None)


def bias_activation_backward(dy, z, y, kind: str, alpha: float = 0.0, bias: bool = True):
    """``(dx, db)`` of :func:`bias_activation`: ``dx`` the activation's gradient from ``dy`` and ``z`` and/or ``y``
    (what ``kind`` reads), ``db`` the sum of ``dx`` over every axis but 1 (None unless ``bias``), one launch."""
    what = "bias_activation_backward"
    dtype = _float_dtype(dy, what)
    _kind(kind, what)
    reads = _ACTIVATION_READS[kind]
    if kind == "relu" and z is None:  # its gradient code reads the input's sign: the output's is the same
        z = y
    if (z is None and reads_input(kind)) or (y is None and "y" in reads):
        raise ValueError(f"{what}: the gradient of {kind} needs {reads.replace('x', 'z')}")
    _same([dy, z, y], what)
    for a in (z, y):
        if a is not None and tuple(a.shape) != tuple(dy.shape):
            raise ValueError(f"{what}: z and y must have dy's shape {dy.shape}, got {a.shape}")
    outer, channels, inner = _geometry(dy.shape, what)
    dy, z, y = (None if a is None else contiguous(a) for a in (dy, z, y))
    dx = _out_for(None, dy.shape, dy.dtype, dy.device, what)
    db = _out_for(None, (channels,), dy.dtype, dy.device, what) if bias else None
    _run("epilogue", programs.expression("bias_act_backward", dtype), dy, channels,
         [_ptr(dy), _ptr(z), _ptr(y), _ptr(dx), _ptr(db), c_longlong(outer), c_longlong(channels),
          c_longlong(inner), c_int(ACTIVATION_GRADS[kind]), c_double(alpha)], grid=max(1, min(channels, 65535)))
    return dx, db
