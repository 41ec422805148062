"""Device normalization: batch norm by cuDNN (the op set's momentum mapped to cuDNN's exponentialAverageFactor), its
running-statistics rule by the SGD kernel, layer / RMS norm by the backend's own kernels (device/kernels/norm.cu: one
block per row)."""

from __future__ import annotations

from pymagma import _cudnn as _cd
from pymagma import _dnn_plans as _plans
from pymagma import _native
from pymagma import dnn as _dnn
from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray
from pymagma.array import _empty

from . import kernels as _dk
from ._common import (
    _contiguous,
    _same_dtype,
)
from .core import zeros_like
from .elementwise import subtract

_BATCH_NORM_PLAN = _plans.batch_norm_plan  # what keys a batch norm's plan (pymagma._dnn_plans._of_array's key)
_BN_MIN_EPSILON = _cd.BN_MIN_EPSILON


def _check_bn_input(x) -> None:
    if x.ndim not in (2, 4):
        raise ValueError(f"batch_norm: expected a 2-D (N, F) or 4-D (N, C, H, W) input, got shape {x.shape}")


def batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
    """Normalise with batch statistics; running stats updated in place (op-set momentum; cuDNN's running variance
    takes the unbiased variance: for the biased one it updates a zeroed scratch, ``(1 - momentum) var_u``, which
    becomes the batch term ``(n - 1)/n var_u`` of the op set's update)."""
    if len(x.shape) != 4 and len(x.shape) != 2:
        _check_bn_input(x)
    x = x if x.is_c_contiguous else _contiguous(x)
    # pymagma._dnn_plans.batch_norm_plan_of, inline: the plan of x's values, one look-up in the current native
    # libraries' plans
    libraries = _native.current
    plan = libraries.cudnn_plans.get((_BATCH_NORM_PLAN, x.shape, x.dtype, x.device, ())) \
        if x.__class__ is _DeviceArray else None
    if plan is None:
        plan = _plans.batch_norm_plan_of(x)
    momentum, eps = float(momentum), float(eps)
    scratch = running_var if unbiased else zeros_like(running_var)
    # BatchNormPlan.forward_training, inline (one frame for the op): with the plan bound to the cuDNN object of the
    # native libraries in use (pymagma._native.current, read now; else the plan's method, which binds again) and made
    # in them, x of its layout (its key: x's values, x made C-contiguous above) and the four parameters of its
    # parameters' layout (the method's checks), one cuDNN call
    try:  # (the plan's forward_layouts: classes, contiguity, then layouts; an operand without them: the method)
        fits = plan.cudnn is libraries.cudnn and libraries is plan.libraries() and (
            x.__class__, gamma.__class__, beta.__class__, running_mean.__class__, scratch.__class__,
            gamma.is_c_contiguous, beta.is_c_contiguous, running_mean.is_c_contiguous, scratch.is_c_contiguous,
            gamma.shape, gamma.dtype, gamma.device, beta.shape, beta.dtype, beta.device, running_mean.shape,
            running_mean.dtype, running_mean.device, scratch.shape, scratch.dtype, scratch.device, x.shape, x.dtype,
            x.device) == plan.forward_layouts
    except AttributeError:
        fits = False
    if fits:
        shape, dtype, device = plan.param_at
        y, mean_, inv_std = _empty(plan.x_shape, plan.dtype, device), _empty(shape, dtype, device), \
            _empty(shape, dtype, device)
        xd = plan.xd
        status = plan.cudnnBatchNormalizationForwardTraining(
            plan.handle, plan.mode_value, plan.alpha, plan.beta, xd, x.ptr, xd, y.ptr, plan.bn, gamma.ptr, beta.ptr,
            1.0 - momentum, running_mean.ptr, scratch.ptr, float(max(eps, _BN_MIN_EPSILON)),
            mean_.ptr, inv_std.ptr)
        if status:
            _cd.check(status, "cudnnBatchNormalizationForwardTraining")
    else:
        y, mean_, inv_std = plan.forward_training(x, gamma, beta, running_mean, scratch, momentum=1.0 - momentum,
                                                  eps=eps)
    if not unbiased:
        n = x.size // x.shape[1]
        batch = _k.affine(scratch, (n - 1) / (n * (1.0 - momentum)))
        running_stat_update(running_var, batch, momentum)
    return y, (mean_, inv_std, eps, plan)


def batch_norm_infer(x, gamma, beta, running_mean, running_var, eps):
    _check_bn_input(x)
    return _dnn.batch_norm_forward_inference(_contiguous(x), gamma, beta, running_mean, running_var, eps=float(eps))


def batch_norm_backward(dy, x, gamma, ctx):
    """(dx, dgamma, dbeta) of ``batch_norm_train``."""
    mean_, inv_std, eps, plan = ctx  # the forward's plan (its layout checked again by the call)
    x, dy = x if x.is_c_contiguous else _contiguous(x), dy if dy.is_c_contiguous else _contiguous(dy)
    # BatchNormPlan.backward, inline (as batch_norm_train's forward; x and dy C-contiguous by now)
    libraries = _native.current
    try:  # (the plan's backward_layouts, as the forward's)
        fits = plan.cudnn is libraries.cudnn and libraries is plan.libraries() and (
            x.__class__, dy.__class__, gamma.__class__, mean_.__class__, inv_std.__class__, gamma.is_c_contiguous,
            mean_.is_c_contiguous, inv_std.is_c_contiguous, x.shape, x.dtype, x.device, dy.shape, dy.dtype,
            dy.device, gamma.shape, gamma.dtype, gamma.device, mean_.shape, mean_.dtype, mean_.device,
            inv_std.shape, inv_std.dtype, inv_std.device) == plan.backward_layouts
    except AttributeError:
        fits = False
    if fits:
        shape, dtype, device = plan.param_at
        dx, dscale, dbias = _empty(plan.x_shape, plan.dtype, device), _empty(shape, dtype, device), \
            _empty(shape, dtype, device)
        one, zero, xd = plan.alpha, plan.beta, plan.xd
        status = plan.cudnnBatchNormalizationBackward(
            plan.handle, plan.mode_value, one, zero, one, zero, xd, x.ptr, xd, dy.ptr, xd, dx.ptr, plan.bn, gamma.ptr,
            dscale.ptr, dbias.ptr, eps, mean_.ptr, inv_std.ptr)
        if status:
            _cd.check(status, "cudnnBatchNormalizationBackward")
        return dx, dscale, dbias
    return plan.backward(x, dy, gamma, mean_, inv_std, eps=eps)


def running_stat_update(running, batch, momentum):
    """In place: running -= (1 - momentum) (running - batch) (the SGD kernel's ``p -= lr g`` step)."""
    _same_dtype("running_stat_update", running, batch)
    _dk.sgd_update(running, subtract(running, batch), None, lr=1.0 - float(momentum), momentum=0.0,
                   weight_decay=0.0, nesterov=False)


# The ops layer_norm_forward(x, gamma, beta, eps, rms=False) -> (y, (mean, rstd)) and layer_norm_backward(dy, x,
# gamma, ctx, rms=False) -> (dx, dgamma, dbeta) are the launchers themselves (one block per row; the parameter sums
# over the rows in order, in the rows' launch where they are few): each checks a signature's operands (dtypes, shapes,
# eps) once, then launches.
layer_norm_forward = _dk.layer_norm_forward
layer_norm_backward = _dk.layer_norm_backward_op
