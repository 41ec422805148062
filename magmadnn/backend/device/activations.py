"""Device activations and softmax: cuDNN for sigmoid, tanh, ReLU, ELU and softmax / log-softmax, pymagma kernels
for the others and for gradients from the output only."""

from __future__ import annotations

import math
import operator

from pymagma import _cudnn as _cd
from pymagma import _dnn_plans as _plans
from pymagma import _native
from pymagma import dnn as _dnn
from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray
from pymagma.array import _empty

from .. import geometry as _geometry
from ._common import (
    _contiguous,
    _same_dtype,
)
from .conv import FUSED_ACTIVATIONS

#: Kinds cuDNN computes (forward, and backward when x is given); the others are pymagma kernels.
_CUDNN_ACTIVATIONS = ("relu", "sigmoid", "tanh", "elu")
#: what keys an activation's plan in pymagma's plans (pymagma._dnn_plans._of_array's key)
_ACTIVATION_PLAN = _plans.activation_plan
#: Kernel kinds whose gradient reads the forward output y.
_GRAD_READS_Y = ("selu", "exponential")


def activation_forward(x, kind, alpha=0.0):
    """y = act(x); ``alpha`` is the leaky-ReLU slope / ELU scale."""
    if kind in _CUDNN_ACTIVATIONS:
        x = x if x.is_c_contiguous else _contiguous(x)
        options = (kind, float(alpha)) if kind == "elu" else (kind, None)
        # pymagma._dnn_plans.activation_plan_of, inline: the plan of x's values and the options (a str and a float
        # or None), one look-up in the current native libraries' plans
        libraries = _native.current
        plan = libraries.cudnn_plans.get((_ACTIVATION_PLAN, x.shape, x.dtype, x.device, options)) \
            if x.__class__ is _DeviceArray else None
        if plan is None:
            return _plans.activation_plan_of(x, *options).forward(x)
        # ActivationPlan.forward, inline (one frame for the op): with the plan bound to the cuDNN object of the native
        # libraries in use (pymagma._native.current, read now; else the plan's method, which binds again) and made
        # in them, x of its layout (its key: x's values; x made C-contiguous above), one cuDNN call
        if plan.cudnn is not libraries.cudnn or libraries is not plan.libraries():
            return plan.forward(x)
        y = _empty(plan.x_shape, plan.dtype, plan.device)
        status = plan.cudnnActivationForward(plan.handle, plan.desc, plan.alpha, plan.xd, x.ptr, plan.beta, plan.xd,
                                             y.ptr)
        if status:
            _cd.check(status, "cudnnActivationForward")
        return y
    if kind not in _geometry.ACTIVATIONS:
        _geometry.check_activation(kind, "activation_forward")
    if kind == "leaky_relu":
        return _k.leaky_relu(x, float(alpha))
    return _k.unary("exp" if kind == "exponential" else kind, x)


def activation_backward(dy, x, y, kind, alpha=0.0):
    """dx of ``activation_forward``. Without x (relu, sigmoid, tanh after a fused convolution) the gradient comes
    from y alone with a kernel: cuDNN may derive it from x."""
    if kind not in _geometry.ACTIVATIONS:
        _geometry.check_activation(kind, "activation_backward")
    if x is None:
        if kind not in FUSED_ACTIVATIONS:
            raise ValueError(f"activation_backward: {kind} needs the forward input x")
        return _k.activation_backward(kind, dy, None, y)
    if x.dtype is not dy.dtype or (y is not None and y.dtype is not dy.dtype):  # (one dtype: no call)
        _same_dtype("activation_backward", dy, x, y)
    if kind in _CUDNN_ACTIVATIONS:
        x = x if x.is_c_contiguous else _contiguous(x)
        if y is None:
            y = activation_forward(x, kind, alpha)
        options = (kind, float(alpha)) if kind == "elu" else (kind, None)
        libraries = _native.current
        plan = libraries.cudnn_plans.get((_ACTIVATION_PLAN, x.shape, x.dtype, x.device, options)) \
            if x.__class__ is _DeviceArray else None  # (activation_plan_of, inline: as activation_forward)
        y, dy = y if y.is_c_contiguous else _contiguous(y), dy if dy.is_c_contiguous else _contiguous(dy)
        if plan is None:
            return _plans.activation_plan_of(x, *options).backward(y, dy, x)
        # ActivationPlan.backward, inline (as activation_forward; x, y and dy C-contiguous by now; their classes and
        # layouts in one comparison)
        if plan.cudnn is not libraries.cudnn or libraries is not plan.libraries() or (
                y.__class__, dy.__class__, y.shape, y.dtype, y.device, dy.shape, dy.dtype, dy.device) \
                != plan.backward_layouts:
            return plan.backward(y, dy, x)
        dx, xd = _empty(plan.x_shape, plan.dtype, plan.device), plan.xd
        status = plan.cudnnActivationBackward(plan.handle, plan.desc, plan.alpha, xd, y.ptr, xd, dy.ptr, xd, x.ptr,
                                              plan.beta, xd, dx.ptr)
        if status:
            _cd.check(status, "cudnnActivationBackward")
        return dx
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
