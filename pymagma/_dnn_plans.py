"""cuDNN calls planned once: a convolution, a batch normalisation or an activation of one layout, every check and
every descriptor, algorithm and scaling factor decided when the plan is made; each later call checks only that its
operands have the planned layout, then makes its one cuDNN call through the native seam.

What the calls of :mod:`pymagma.dnn` decide per call (descriptor keys, argument checks, the algorithm's cache), a plan
decides once: a layer's training step calls the same few cuDNN functions on the same layouts at every step.
:func:`conv2d_plan`, :func:`batch_norm_plan` and :func:`activation_plan` make the plans (with the checks of the
matching :mod:`pymagma.dnn` function, kept per set of native libraries); a plan made under other native libraries
(the simulator turned on or off since) hands its call to its twin made for the libraries in use, and with several
GPUs (one device current per call) to the :mod:`pymagma.dnn` function, which computes the same. The device backend
of magmadnn calls these plans; this module builds on :mod:`pymagma.dnn` (which does not import it).

Operands must be C-contiguous DeviceArrays of the planned shape, dtype and device: anything else is a ``ValueError``
(or ``TypeError``) naming what was planned, before any native call.
"""

from __future__ import annotations

import weakref
from ctypes import addressof
from itertools import chain

import numpy as np

from . import _checks, _native, dnn, memory, runtime
from . import _cudnn as cd
from . import array as _array

__all__ = ["ActivationPlan", "BatchNormPlan", "ConvPlan", "activation_plan", "activation_plan_of", "batch_norm_plan",
           "batch_norm_plan_of", "conv2d_plan"]

_native.resource("cudnn_plans")(lambda libraries: {})  # (kind, arguments, their types) -> plan
# cuDNN function name -> (the cuDNN object it was bound from, its function): one bind per function and cuDNN object
# in use, shared by every plan (a swapped library, such as a meter's, is bound again once, not once per plan)
_native.resource("cudnn_bound")(lambda libraries: {})
_empty = _array._empty
_DeviceArray = _array.DeviceArray
_trusted = memory.Allocation.trusted


def _refuse(plan, what: str, a, shape) -> None:
    """The error of an operand that does not fit ``plan`` (the slow path of every planned call's check)."""
    if not isinstance(a, _DeviceArray):
        raise TypeError(f"{type(plan).__name__}: {what} must be a pymagma.DeviceArray, got {type(a).__name__}")
    raise ValueError(f"{type(plan).__name__}: {what} must be a C-contiguous {plan.dtype} array of shape "
                     f"{tuple(shape)} on device {plan.device}, got {a.dtype} {a.shape} on device {a.device}"
                     f"{'' if a.is_c_contiguous else ' (strided)'}")


def _planner(make):
    """``make(*args)`` (a plan's class) made once per distinct arguments, their types too (2.0 and 2 are planned, and
    refused, apart), and kept in the current native libraries' cache; unhashable arguments are planned each time."""

    def plan(*args):
        plans = _native.current.cudnn_plans
        try:  # the types in the arguments: one tuple level without a call (shapes), deeper by _kind
            kinds = tuple(map(type, args))
            if tuple in kinds:
                inner = tuple(map(type, chain.from_iterable(filter(_is_tuple, args))))
                key = (make, args, kinds, inner) if tuple not in inner else (make, args, _kind(args))
            else:
                key = (make, args, kinds)
            made = plans.get(key)
        except TypeError:  # an unhashable argument (a list)
            return make(*args)
        if made is None:
            made = make(*args)
            if len(plans) >= 4096:
                plans.clear()
            plans[key] = made
        return made

    return plan


_kind = _checks._kind
_is_tuple = _checks._is_tuple


def _of_array(make, x, options: tuple):
    """``make``'s plan (a planner made by :func:`_planner`) of DeviceArray ``x``'s shape, dtype and device and
    ``options``, looked up by those values alone: a DeviceArray's shape, dtype and device are checked values, and
    the callers' options are strings and floats (or None), types their values tell apart; any other ``x`` or option
    goes through the planner (every check, the types in the key).  (Inline in the two functions below, and in the
    device backend's ops of magmadnn, which look this key up in ``_native.current.cudnn_plans`` themselves.)"""
    if x.__class__ is _DeviceArray:
        plans = _native.current.cudnn_plans
        key = (make, x.shape, x.dtype, x.device, options)
        plan = plans.get(key)
        if plan is None:
            plan = make(x.shape, x.dtype, x.device, *options)
            if len(plans) >= 4096:
                plans.clear()
            plans[key] = plan
        return plan
    return make(x.shape, x.dtype, x.device, *options)


def batch_norm_plan_of(x):
    """``batch_norm_plan(x.shape, x.dtype, x.device)`` (spatial mode) of an array ``x``: the device backend's
    look-up at each call (by x's values alone; see :func:`_of_array`)."""
    plan = _native.current.cudnn_plans.get((batch_norm_plan, x.shape, x.dtype, x.device, ())) \
        if x.__class__ is _DeviceArray else None
    return _of_array(batch_norm_plan, x, ()) if plan is None else plan


def activation_plan_of(x, mode: str = "relu", coef=None):
    """``activation_plan(x.shape, x.dtype, x.device, mode, coef)`` of an array ``x``: the device backend's look-up
    at each call (by values alone for a str ``mode`` and a float or None ``coef``; see :func:`_of_array`)."""
    if mode.__class__ is str and (coef is None or coef.__class__ is float):
        plan = _native.current.cudnn_plans.get((activation_plan, x.shape, x.dtype, x.device, (mode, coef))) \
            if x.__class__ is _DeviceArray else None
        return _of_array(activation_plan, x, (mode, coef)) if plan is None else plan
    return activation_plan(x.shape, x.dtype, x.device, mode, coef)


class _Plan:
    """What every plan keeps: its native libraries, device, dtype, cuDNN handle and alpha/beta (1, 0)."""

    def __init__(self, args: tuple, dtype, device: int):
        dnn.data_type(dtype)  # a TypeError for a dtype cuDNN does not take
        self.args = args  # what made it: the same plan in other native libraries (:meth:`_elsewhere`)
        # the libraries it was made with, weakly: a plan is kept in their own cache, and a strong reference would
        # make a cycle that keeps a swapped-out simulator (its memory, its handles) alive until a garbage collection
        self.libraries = weakref.ref(_native.current)
        self.dtype, self.device = np.dtype(dtype), _checks.count(device, "device")
        self._handle = dnn.handle(self.device)  # alive as long as the plan
        self.handle = self._handle.value
        self.one, self.zero = dnn._one_zero(self.dtype)  # kept alive by the plan (and by dnn, for the process)
        self.alpha, self.beta = addressof(self.one), addressof(self.zero)  # their addresses: passed as they are
        self.direct = runtime.device_count() <= 1  # several GPUs: each call through dnn (its device made current)
        self.cudnn = None  # the cuDNN library object the plan's functions were bound from (:meth:`_bind`)

    def _bind(self, cudnn) -> None:
        """The plan's cuDNN functions (its class's ``FUNCTIONS``, as attributes of the same names) bound from
        ``cudnn``, the library in use: bound again whenever another cuDNN object is in use (the simulator swapped,
        a library wrapped), so a planned call always goes through the library :mod:`pymagma._native` holds now
        (``cudnn`` is its ``cudnn``); each function bound once per cuDNN object for every plan."""
        bound = _native.current.cudnn_bound
        for name in self.FUNCTIONS:
            kept = bound.get(name)
            if kept is None or kept[0] is not cudnn:
                kept = bound[name] = (cudnn, cudnn.bind(name))
            setattr(self, name, kept[1])
        self.cudnn = cudnn

    def _elsewhere(self):
        """This plan made for the current native libraries (the simulator turned on or off since), or None with
        several GPUs (each call then through :mod:`pymagma.dnn`, which makes the operands' device current)."""
        return self._made(*self.args) if self.direct else None

    def _fits(self, a, shape) -> bool:
        return a.__class__ is _DeviceArray and a.shape == shape and a.dtype == self.dtype and \
            a.device == self.device and a.is_c_contiguous

    # the planned calls check their operands inline, as _fits does (no call per operand on the hot path):
    # ``a.__class__ is _DeviceArray and a.is_c_contiguous and (a.shape, a.dtype, a.device) == (shape, dtype, device)``;
    # then, with the libraries the plan was made with in use, they call their bound cuDNN function (bound again by
    # _bind when another cuDNN object is in use) and check its status as _cudnn.call does



# ----------------------------------------------------------------------------------------------- convolution
class ConvPlan(_Plan):
    """A convolution of x ``x_shape`` with w ``w_shape`` (:func:`pymagma.dnn.conv2d_forward`'s geometry): its
    forward, backward-data and backward-filter calls, each algorithm chosen on its first call.  ``tf32``: the value
    of ``bool(pymagma.dnn.allow_tf32)`` it is made for (its math type when ``math`` is None); a call made while the
    flag says otherwise is handed to the plan made for the flag's value now, as :func:`pymagma.dnn.conv2d_forward`
    reads the flag at each call."""

    FUNCTIONS = tuple(dnn._CONV_CALLS.values())

    def __init__(self, x_shape, w_shape, dtype, device, stride=1, padding=0, dilation=1, groups=1, math=None,
                 workspace_limit=None, tf32=None):
        super().__init__((x_shape, w_shape, dtype, device, stride, padding, dilation, groups, math, workspace_limit),
                         dtype, device)
        self.tf32 = not not dnn.allow_tf32  # (what dnn._problem below reads)
        if tf32 is not None and tf32 is not self.tf32:
            raise ValueError(f"ConvPlan: made for allow_tf32={tf32}, but pymagma.dnn.allow_tf32 is {self.tf32} now")
        self.problem = problem = dnn._problem(x_shape, w_shape, self.dtype, stride, padding, dilation, groups, math)
        self.x_shape, self.w_shape, self.y_shape = problem.x_shape, problem.w_shape, problem.y_shape
        at = (self.dtype, self.dtype, self.device, self.device)
        self.xw, self.yw, self.xy = (self.x_shape, self.w_shape, *at), (self.y_shape, self.w_shape, *at), \
            (self.x_shape, self.y_shape, *at)
        # what the device backend's inline calls compare in one comparison: (the tf32 flag, the operands' classes,
        # shapes, dtypes and devices) (magmadnn.backend.device.conv)
        self.forward_layouts, self.backward_data_layouts, self.backward_filter_layouts = (
            (self.tf32, _DeviceArray, _DeviceArray, *pair) for pair in (self.xw, self.yw, self.xy))
        self.geometry = {"stride": problem.stride, "padding": problem.padding, "dilation": problem.dilation,
                         "groups": problem.groups, "math": math, "workspace_limit": workspace_limit}
        self.limit = workspace_limit
        self._calls: dict = {}
        # each kind's call once chosen (the value _call gives): one attribute read for the device backend's inline calls
        self.forward_call = self.backward_data_call = self.backward_filter_call = None

    def _call(self, kind: str) -> tuple:
        """(cuDNN function, its four descriptors' handles, algorithm, workspace bytes, their size class in the
        memory pool) of ``kind``, chosen once."""
        made = self._calls.get(kind)
        if made is None:
            choice = dnn.choose_algorithm(kind, self.problem, device=self.device, workspace_limit=self.limit)
            # (the problem, which the plan keeps, keeps its descriptors alive)
            made = self._calls[kind] = (dnn._CONV_CALLS[kind], *(d.value for d in self.problem.ordered[kind]),
                                        choice.algo, choice.workspace, memory._bucket(choice.workspace))
            setattr(self, kind + "_call", made)
        return made

    # each call inline (no call per call): its cuDNN function, descriptors, algorithm and workspace bytes (chosen on
    # its first call), a workspace from the pool, then the call in cuDNN's argument order

    def forward(self, x, w):
        """y = x ⋆ w, a new (N, K, Ho, Wo) array."""
        if not (x.__class__ is _DeviceArray and w.__class__ is _DeviceArray and x.is_c_contiguous and
                w.is_c_contiguous and (x.shape, w.shape, x.dtype, w.dtype, x.device, w.device) == self.xw):
            self._refuse_pair(("x", x, self.x_shape), ("w", w, self.w_shape))
        libraries = _native.current
        if not (self.direct and libraries is self.libraries() and self.tf32 is (not not dnn.allow_tf32)):
            plan = self._elsewhere()
            return dnn.conv2d_forward(x, w, **self.geometry) if plan is None else plan.forward(x, w)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        y = _empty(self.y_shape, self.dtype, self.device)
        name, d0, d1, d2, d3, algo, size, _ = self._calls.get("forward") or self._call("forward")
        space = _trusted(size, self.device) if size else None
        status = self.cudnnConvolutionForward(self.handle, self.alpha, d0, x.ptr, d1, w.ptr, d2, algo,
                                              space.ptr if size else None, size, self.beta, d3, y.ptr)
        if status:
            cd.check(status, name)
        return y

    def backward_data(self, dy, w):
        """dx of the convolution, a new array of ``x_shape``."""
        if not (dy.__class__ is _DeviceArray and w.__class__ is _DeviceArray and dy.is_c_contiguous and
                w.is_c_contiguous and (dy.shape, w.shape, dy.dtype, w.dtype, dy.device, w.device) == self.yw):
            self._refuse_pair(("dy", dy, self.y_shape), ("w", w, self.w_shape))
        libraries = _native.current
        if not (self.direct and libraries is self.libraries() and self.tf32 is (not not dnn.allow_tf32)):
            plan = self._elsewhere()
            return dnn.conv2d_backward_data(dy, w, self.x_shape, **self.geometry) if plan is None else \
                plan.backward_data(dy, w)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        dx = _empty(self.x_shape, self.dtype, self.device)
        name, d0, d1, d2, d3, algo, size, _ = self._calls.get("backward_data") or self._call("backward_data")
        space = _trusted(size, self.device) if size else None
        status = self.cudnnConvolutionBackwardData(self.handle, self.alpha, d0, w.ptr, d1, dy.ptr, d2, algo,
                                                   space.ptr if size else None, size, self.beta, d3, dx.ptr)
        if status:
            cd.check(status, name)
        return dx

    def backward_filter(self, x, dy):
        """dw of the convolution, a new array of ``w_shape``."""
        if not (x.__class__ is _DeviceArray and dy.__class__ is _DeviceArray and x.is_c_contiguous and
                dy.is_c_contiguous and (x.shape, dy.shape, x.dtype, dy.dtype, x.device, dy.device) == self.xy):
            self._refuse_pair(("x", x, self.x_shape), ("dy", dy, self.y_shape))
        libraries = _native.current
        if not (self.direct and libraries is self.libraries() and self.tf32 is (not not dnn.allow_tf32)):
            plan = self._elsewhere()
            return dnn.conv2d_backward_filter(x, dy, self.w_shape, **self.geometry) if plan is None else \
                plan.backward_filter(x, dy)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        dw = _empty(self.w_shape, self.dtype, self.device)
        name, d0, d1, d2, d3, algo, size, _ = self._calls.get("backward_filter") or self._call("backward_filter")
        space = _trusted(size, self.device) if size else None
        status = self.cudnnConvolutionBackwardFilter(self.handle, self.alpha, d0, x.ptr, d1, dy.ptr, d2, algo,
                                                     space.ptr if size else None, size, self.beta, d3, dw.ptr)
        if status:
            cd.check(status, name)
        return dw

    def _refuse_pair(self, *operands) -> None:
        for what, a, shape in operands:
            if not self._fits(a, shape):
                _refuse(self, what, a, shape)


_conv2d_plan = _planner(ConvPlan)


def conv2d_plan(*args):
    """conv2d_plan(x_shape, w_shape, dtype, device, stride=1, padding=0, dilation=1, groups=1, math=None,
    workspace_limit=None): the ConvPlan of a convolution (the geometry as pymagma.dnn.conv2d_forward takes it,
    positional), checked and made once per distinct arguments and value of ``pymagma.dnn.allow_tf32`` in the current
    native libraries."""
    if not 4 <= len(args) <= 10:
        raise TypeError(f"conv2d_plan takes 4 to 10 positional arguments (x_shape, w_shape, dtype, device, stride, "
                        f"padding, dilation, groups, math, workspace_limit), got {len(args)}")
    return _conv2d_plan(*args, *_CONV_DEFAULTS[len(args) - 4:], not not dnn.allow_tf32)


_CONV_DEFAULTS = (1, 0, 1, 1, None, None)  # stride, padding, dilation, groups, math, workspace_limit
ConvPlan._made = staticmethod(conv2d_plan)


# ------------------------------------------------------------------------------------------------ batch norm
class BatchNormPlan(_Plan):
    """Training-mode batch normalisation of x ``x_shape`` (:func:`pymagma.dnn.batch_norm_forward_training` and
    :func:`pymagma.dnn.batch_norm_backward`)."""

    FUNCTIONS = ("cudnnBatchNormalizationForwardTraining", "cudnnBatchNormalizationBackward")

    def __init__(self, x_shape, dtype, device, mode="spatial"):
        super().__init__((x_shape, dtype, device, mode), dtype, device)
        if mode not in dnn.BN_MODES:
            raise ValueError(f"batch-norm mode must be 'spatial' (per channel) or 'per_activation', got {mode!r}")
        self.x_shape, self.mode = _checks.sizes(x_shape, "x shape"), mode
        if len(self.x_shape) < 2:
            raise ValueError(f"batch norm needs x of shape (N, C, ...), got {self.x_shape}")
        key = (self.x_shape + (1,) * max(0, 4 - len(self.x_shape)),
               cd.contiguous_strides(self.x_shape + (1,) * max(0, 4 - len(self.x_shape))), dnn.data_type(dtype))
        descriptors = dnn.tensor_descriptor(*key), dnn._bn_descriptor(key, dnn.BN_MODES[mode])
        self._descriptors = descriptors  # alive as long as the plan (the caches may drop theirs)
        self.xd, self.bn = (d.value for d in descriptors)
        self.param_shape = (self.x_shape[1],) if mode == "spatial" else self.x_shape[1:]
        self.param_dtype = np.dtype(np.float64 if self.dtype == np.float64 else np.float32)
        self.mode_value = int(dnn.BN_MODES[mode])
        self.x_at = (self.x_shape, self.dtype, self.device)
        self.param_at = (self.param_shape, self.param_dtype, self.device)
        # what a caller that inlines a call compares its operands with, as one tuple (magmadnn's device backend):
        # forward, the classes of x and the four parameters, the parameters' contiguity, their (shape, dtype, device)
        # and x's; backward, the classes of x, dy, scale and the two saved statistics, the last three's contiguity,
        # the layouts of x and dy, then of the three
        self.forward_layouts = (_DeviceArray,) * 5 + (True,) * 4 + self.param_at * 4 + self.x_at
        self.backward_layouts = (_DeviceArray,) * 5 + (True,) * 3 + self.x_at * 2 + self.param_at * 3

    def _params(self, **params) -> None:
        shape, dtype, device = self.param_shape, self.param_dtype, self.device
        for name, a in params.items():
            if a is not None and not (a.__class__ is _DeviceArray and a.shape == shape and a.dtype == dtype and
                                      a.device == device and a.is_c_contiguous):
                if not isinstance(a, _DeviceArray):
                    raise TypeError(f"BatchNormPlan: {name} must be a pymagma.DeviceArray, got {type(a).__name__}")
                raise ValueError(f"BatchNormPlan: {name} must be a contiguous {dtype} array of shape {shape} on "
                                 f"device {device}, got {a.dtype} {a.shape} on device {a.device}")

    def forward_training(self, x, scale, bias, running_mean=None, running_var=None, *, momentum: float = 0.1,
                         eps: float = 1e-5):
        """(y, save_mean, save_inv_std), the running statistics updated in place (as the dnn function)."""
        if not (x.__class__ is _DeviceArray and x.is_c_contiguous and (x.shape, x.dtype, x.device) == self.x_at):
            _refuse(self, "x", x, self.x_shape)
        at, m, v = self.param_at, running_mean, running_var
        if not (scale.__class__ is _DeviceArray and bias.__class__ is _DeviceArray and m.__class__ is _DeviceArray
                and v.__class__ is _DeviceArray and scale.is_c_contiguous and bias.is_c_contiguous and
                m.is_c_contiguous and v.is_c_contiguous and (scale.shape, scale.dtype, scale.device) == at ==
                (bias.shape, bias.dtype, bias.device) == (m.shape, m.dtype, m.device) == (v.shape, v.dtype, v.device)):
            # (the common case above, inline: four parameters that fit; else each checked, no running statistics
            # allowed)
            self._params(scale=scale, bias=bias, running_mean=running_mean, running_var=running_var)
            if (running_mean is None) != (running_var is None):
                raise ValueError("give both running_mean and running_var, or neither")
        libraries = _native.current
        if not (self.direct and libraries is self.libraries()):
            plan = self._elsewhere()
            if plan is not None:
                return plan.forward_training(x, scale, bias, running_mean, running_var, momentum=momentum, eps=eps)
            return dnn.batch_norm_forward_training(x, scale, bias, running_mean, running_var, momentum=momentum,
                                                   eps=eps, mode=self.mode)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        shape, dtype, device = self.param_shape, self.param_dtype, self.device
        y, mean, inv = _empty(self.x_shape, self.dtype, device), _empty(shape, dtype, device), _empty(shape, dtype,
                                                                                                      device)
        status = self.cudnnBatchNormalizationForwardTraining(
            self.handle, self.mode_value, self.alpha, self.beta,
            self.xd, x.ptr, self.xd, y.ptr, self.bn, scale.ptr, bias.ptr, float(momentum),
            None if running_mean is None else running_mean.ptr, None if running_var is None else running_var.ptr,
            float(max(eps, cd.BN_MIN_EPSILON)), mean.ptr, inv.ptr)
        if status:
            cd.check(status, "cudnnBatchNormalizationForwardTraining")
        return y, mean, inv

    def backward(self, x, dy, scale, save_mean=None, save_inv_std=None, *, eps: float = 1e-5):
        """(dx, dscale, dbias) from the forward's saved statistics."""
        if not (x.__class__ is _DeviceArray and dy.__class__ is _DeviceArray and x.is_c_contiguous and
                dy.is_c_contiguous and (x.shape, x.dtype, x.device) == self.x_at == (dy.shape, dy.dtype, dy.device)):
            for what, a in (("x", x), ("dy", dy)):
                if not self._fits(a, self.x_shape):
                    _refuse(self, what, a, self.x_shape)
        at, m, v = self.param_at, save_mean, save_inv_std
        if not (scale.__class__ is _DeviceArray and m.__class__ is _DeviceArray and v.__class__ is _DeviceArray and
                scale.is_c_contiguous and m.is_c_contiguous and v.is_c_contiguous and
                (scale.shape, scale.dtype, scale.device) == at == (m.shape, m.dtype, m.device) ==
                (v.shape, v.dtype, v.device)):  # (the common case, inline; else each checked)
            self._params(scale=scale, save_mean=save_mean, save_inv_std=save_inv_std)
        libraries = _native.current
        if not (self.direct and libraries is self.libraries()):
            plan = self._elsewhere()
            if plan is not None:
                return plan.backward(x, dy, scale, save_mean, save_inv_std, eps=eps)
            return dnn.batch_norm_backward(x, dy, scale, save_mean, save_inv_std, eps=eps, mode=self.mode)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        shape, dtype, device = self.param_shape, self.param_dtype, self.device
        dx, dscale, dbias = _empty(self.x_shape, self.dtype, device), _empty(shape, dtype, device), \
            _empty(shape, dtype, device)
        one, zero = self.alpha, self.beta
        status = self.cudnnBatchNormalizationBackward(
            self.handle, self.mode_value, one, zero, one, zero, self.xd,
            x.ptr, self.xd, dy.ptr, self.xd, dx.ptr, self.bn, scale.ptr, dscale.ptr, dbias.ptr, float(eps),
            None if save_mean is None else save_mean.ptr, None if save_inv_std is None else save_inv_std.ptr)
        if status:
            cd.check(status, "cudnnBatchNormalizationBackward")
        return dx, dscale, dbias


batch_norm_plan = _planner(BatchNormPlan)
batch_norm_plan.__doc__ = (
    "batch_norm_plan(x_shape, dtype, device, mode='spatial'): the BatchNormPlan of x's shape, dtype, device and "
    "mode, checked and made once in the current native libraries.")
BatchNormPlan._made = staticmethod(batch_norm_plan)


# ------------------------------------------------------------------------------------------------ activation
class ActivationPlan(_Plan):
    """cuDNN's activation ``mode`` (coefficient ``coef``) of x ``x_shape``: forward and backward."""

    FUNCTIONS = ("cudnnActivationForward", "cudnnActivationBackward")

    def __init__(self, x_shape, dtype, device, mode="relu", coef=None):
        super().__init__((x_shape, dtype, device, mode, coef), dtype, device)
        self.x_shape, self.mode, self.coef = _checks.sizes(x_shape, "x shape"), mode, coef
        if not 1 <= len(self.x_shape) <= 8:
            raise ValueError(f"cuDNN tensors have 1 to 8 dimensions, got shape {self.x_shape}")
        shape = self.x_shape + (1,) * max(0, 4 - len(self.x_shape))
        descriptors = (dnn._activation_desc(mode, coef),
                       dnn.tensor_descriptor(shape, cd.contiguous_strides(shape), dnn.data_type(dtype)))
        self._descriptors = descriptors  # alive as long as the plan (the caches may drop theirs)
        self.desc, self.xd = (d.value for d in descriptors)
        self.x_at = (self.x_shape, self.dtype, self.device)
        #: (y's and dy's classes, then their layouts): what the device backend's inline backward compares at once
        self.backward_layouts = (_DeviceArray, _DeviceArray, *self.x_at, *self.x_at)

    def forward(self, x):
        if not (x.__class__ is _DeviceArray and x.is_c_contiguous and (x.shape, x.dtype, x.device) == self.x_at):
            _refuse(self, "x", x, self.x_shape)
        libraries = _native.current
        if not (self.direct and libraries is self.libraries()):
            plan = self._elsewhere()
            return dnn.activation_forward(x, self.mode, self.coef) if plan is None else plan.forward(x)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        y = _empty(self.x_shape, self.dtype, self.device)
        status = self.cudnnActivationForward(self.handle, self.desc, self.alpha, self.xd, x.ptr,
                                             self.beta, self.xd, y.ptr)
        if status:
            cd.check(status, "cudnnActivationForward")
        return y

    def backward(self, y, dy, x):
        """dx = f'(x) dy from the forward's input ``x`` and output ``y``."""
        shape = self.x_shape
        at = self.x_at
        if not (y.__class__ is _DeviceArray and dy.__class__ is _DeviceArray and x.__class__ is _DeviceArray and
                y.is_c_contiguous and dy.is_c_contiguous and x.is_c_contiguous and
                (y.shape, y.dtype, y.device) == at == (dy.shape, dy.dtype, dy.device) == (x.shape, x.dtype, x.device)):
            for what, a in (("y", y), ("dy", dy), ("x", x)):
                if not self._fits(a, shape):
                    _refuse(self, what, a, shape)
        libraries = _native.current
        if not (self.direct and libraries is self.libraries()):
            plan = self._elsewhere()
            return dnn.activation_backward(y, dy, x, self.mode, self.coef) if plan is None else \
                plan.backward(y, dy, x)
        if libraries.cudnn is not self.cudnn:
            self._bind(libraries.cudnn)
        dx, xd = _empty(shape, self.dtype, self.device), self.xd
        status = self.cudnnActivationBackward(self.handle, self.desc, self.alpha, xd, y.ptr, xd, dy.ptr, xd,
                                              x.ptr, self.beta, xd, dx.ptr)
        if status:
            cd.check(status, "cudnnActivationBackward")
        return dx


activation_plan = _planner(ActivationPlan)
activation_plan.__doc__ = (
    "activation_plan(x_shape, dtype, device, mode='relu', coef=None): the ActivationPlan of x's shape, dtype and "
    "device, mode and coef (as pymagma.dnn.activation_forward's), checked and made once in the current native "
    "libraries.")
ActivationPlan._made = staticmethod(activation_plan)
