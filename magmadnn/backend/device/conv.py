"""Device convolution: cuDNN through ``pymagma.dnn``, adapted to the op set's conventions."""

from __future__ import annotations

from pymagma import _checks, _layouts, _native
from pymagma import _cudnn as _cd
from pymagma import _dnn_plans as _plans
from pymagma import array as _array
from pymagma import dnn as _dnn
from pymagma import kernels as _k
from pymagma import memory as _memory
from pymagma.memory import _Given

from .. import geometry as _geometry
from . import kernels as _dk
from ._common import (
    _contiguous,
    _same_dtype,
)

FUSED_ACTIVATIONS = _geometry.FUSED_ACTIVATIONS

# ---------------------------------------------------------------------------------------------------------------
# Adapters: where cuDNN's conventions differ from the op set, the op set wins, here and only here.
#
# - Padding: the op set pads ((top, bottom), (left, right)), cuDNN only symmetrically. cuDNN gets the symmetric part
#   min(top, bottom), min(left, right); the rest is padded explicitly (zeros, one launch of kernels.pad2d) for
#   convolution and average pooling. Gradients are computed on the padded input; the interior is a view for the
#   convolution's input gradient (a copy for average pooling's). The forward's ``saved`` dict keeps the padded input
#   for backward-filter.
# - Average pooling excludes padding from the count: cuDNN's AVERAGE_COUNT_EXCLUDE_PADDING when the padding is
#   symmetric; otherwise cuDNN's include-padding average over the explicitly padded input (sum / window area) times
#   area / (real elements of each window), a (Ho, Wo) factor computed from the geometry alone.
# - Max pooling is not cuDNN's: the op set gives a tied window's gradient to its first maximum, and cuDNN does not
#   document which tied maximum its backward picks. kernels.max_pool2d (device/kernels/pool.cu) saves the offset of
#   each window's first maximum (asymmetric padding handled in the kernel, never read) and max_pool2d_backward gathers
#   the gradient from those offsets, one thread per input element: the convention holds on any GPU by construction, and
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


@_checks.once_per_arguments
def _conv_plan(stride, padding, dilation, groups) -> tuple:
    """(stride pair, cuDNN's symmetric pads, the extra pads, dilation pair, groups) of a convolution's arguments,
    worked out once per distinct arguments (their types included)."""
    sym, extra = _split_pads(padding)
    return _geometry.pair(stride), sym, extra, _geometry.pair(dilation), int(groups)


def _pad(x, extra, value: float = 0.0):
    """``x`` (N, C, H, W) surrounded by ``extra`` (top, bottom, left, right) elements of ``value``, on the device (zeros
    in one launch)."""
    if not any(extra):
        return x
    if value == 0.0:
        return _dk.pad2d(x, extra)
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


@_checks.once_per_arguments
def _planned(x_shape, dtype, device, w_shape, stride, padding, dilation, groups):
    """(the extra pads, the :class:`pymagma.dnn.ConvPlan` of the convolution of the padded input), worked out once
    per distinct arguments (their types included)."""
    stride, sym, extra, dilation, groups = _conv_plan(stride, padding, dilation, groups)
    if any(extra):
        n, c, h, wd = x_shape
        t, b, l, r = extra
        x_shape = (n, c, h + t + b, wd + l + r)
    return extra if any(extra) else _NO_PADS, _plans.conv2d_plan(x_shape, w_shape, dtype, device, stride, sym,
                                                                  dilation, groups)


_NO_PADS = (0, 0, 0, 0)  # the extra pads of a convolution cuDNN pads alone (one object: told by identity)


def _crop_view(x_shape, dtype, extra):
    """(byte offset, shape, strides, C-contiguous) of the interior of shape ``x_shape`` of a C-contiguous gradient
    computed on the input padded by ``extra``, or None without extra pads: worked out once per plan."""
    if not any(extra):
        return None
    t, b, l, r = extra
    n, c, h, wd = x_shape
    padded = (n, c, h + t + b, wd + l + r)
    offset, shape, strides = _layouts.index_view(padded, _layouts.c_strides(padded, dtype.itemsize),
                                                 (slice(None), slice(None), slice(t, t + h), slice(l, l + wd)))
    return offset, shape, strides, _layouts.is_c_contiguous(shape, strides, dtype.itemsize)


#: (x shape, dtype, device, w shape, the ids of the stride, padding, dilation and groups objects) -> (those objects,
#: extra pads, the ConvPlan, the interior view of its input gradient): the convolutions whose geometry objects are
#: those of an earlier call (a layer passes the same checked tuples at every call), found by one look-up, inline in
#: each call (the shapes, dtype and device by value: a DeviceArray's checked values; the geometry by identity, its
#: objects kept alive in the answer so that no other object gets their ids, as ``pymagma._checks.same_objects``)
_SEEN: dict = {}


def _seen(x_shape, dtype, device, w_shape, stride, padding, dilation, groups) -> tuple:
    """The answer :data:`_SEEN` keeps for these arguments, worked out with every check (a miss of the look-up)."""
    extra, plan = _planned(x_shape, dtype, device, w_shape, stride, padding, dilation, groups)
    if plan.direct and plan.libraries() is not _native.current:  # (_planned's answer, made in other libraries)
        plan = plan._elsewhere()
    return _kept(_SEEN, (x_shape, dtype, device, w_shape, id(stride), id(padding), id(dilation), id(groups)),
                 ((stride, padding, dilation, groups), extra, plan, _crop_view(x_shape, plan.dtype, extra)))


def _kept(seen: dict, key: tuple, answer: tuple) -> tuple:
    """``answer`` (the tuple of the geometry objects first) kept in ``seen`` under ``key`` (their ids), unless one of
    them is unhashable: a list, or a tuple holding one, which its owner may change in place, is never kept."""
    try:
        hash(answer[0])
    except TypeError:
        return answer
    if len(seen) >= 256:
        seen.clear()
    seen[key] = answer
    return answer


# The three convolution calls below make the planned call of pymagma's ConvPlan (pymagma._dnn_plans) in their own
# frame: while the plan is bound to the cuDNN object of the native libraries in use at the call
# (pymagma._native.current, read at each call; a library swapped since sends the call through the plan's method, which
# binds again), was made in those libraries and for the value of pymagma.dnn.allow_tf32 now, and the operands have its
# layout (the same checks as the method's), the call takes its output and its workspace from the memory pool (the
# workspace's block back to its free list after the call, as a dying Allocation gives it back) and calls the bound
# cuDNN function; anything else goes through the plan's method, which computes the same.
_DeviceArray, _empty = _array.DeviceArray, _array._empty
_overriding, _override = _memory._overriding, _memory._override
_PAD_LAUNCHES, _THREADS = _dk.pool.LAUNCHES, _dk.pool.THREADS  # kernels.pad2d's kept launches (one dict, shared)


def conv2d_forward(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=None, saved=None,
                   activation=None):
    """Cross-correlation of x (N,C,H,W) with w (K,C/groups,R,S) -> (N,K,Ho,Wo), + bias, then a fused activation."""
    if activation is not None and activation not in FUSED_ACTIVATIONS:
        raise ValueError(f"conv2d_forward: activation {activation!r} cannot be fused; expected one of "
                         f"{FUSED_ACTIVATIONS} or None")
    if w.dtype is not x.dtype or (bias is not None and bias.dtype is not x.dtype):  # (one dtype: no call)
        _same_dtype("conv2d_forward", x, w, bias)
    if bias is not None and bias.shape != w.shape[:1]:
        raise ValueError(f"conv2d_forward: bias must have shape ({w.shape[0]},) (one per filter), got "
                         f"{tuple(bias.shape)}")
    x = x if x.is_c_contiguous else _contiguous(x)
    _, extra, plan, _ = _SEEN.get((x.shape, x.dtype, x.device, w.shape, id(stride), id(padding), id(dilation),
                                   id(groups))) or _seen(x.shape, x.dtype, x.device, w.shape, stride, padding,
                                                         dilation, groups)
    libraries = _native.current
    home = libraries is plan.libraries()
    if not home and plan.direct:  # a plan kept while other native libraries were in use
        plan = _seen(x.shape, x.dtype, x.device, w.shape, stride, padding, dilation, groups)[2]
        home = libraries is plan.libraries()
    if extra is _NO_PADS:
        xin = x
        if saved is not None:  # for backward-filter: the plan (its layouts checked by the call)
            saved["plan"] = plan
    else:  # (_pad of zeros: one launch)
        # kernels.pad2d's kept launch, inline (x C-contiguous by now; its key and its pads' identity as pad2d's)
        launch = _PAD_LAUNCHES.get(("pad", x.shape, x.dtype, id(extra))) if x.__class__ is _DeviceArray else None
        if launch is not None and launch[0] is extra:
            _, shape, expression, grid, g = launch
            device = x.device
            xin = _empty(shape, x.dtype, device)
            if grid:  # (common._run, inline)
                libraries.launcher.launch("pool", expression, device,
                                          (libraries.default_queues.get(device) or x.queue).stream, grid, _THREADS,
                                          [x.ptr, xin.ptr, g])
        else:
            xin = _dk.pad2d(x, extra)
        if saved is not None:  # for backward-filter: the padded input too
            saved["plan"], saved["padded_x"] = plan, xin
    w = w if w.is_c_contiguous else _contiguous(w)
    # ConvPlan.forward, inline (see above conv2d_forward): operands C-contiguous by now; the tf32 flag, classes and
    # layouts in one comparison
    if home and plan.cudnn is libraries.cudnn and (not not _dnn.allow_tf32, xin.__class__, w.__class__, xin.shape,
                                                   w.shape, xin.dtype, w.dtype, xin.device, w.device) \
            == plan.forward_layouts:
        name, d0, d1, d2, d3, algo, size, bucket = plan.forward_call or plan._call("forward")
        device = plan.device
        y = _empty(plan.y_shape, plan.dtype, device)
        if bucket:  # memory.Allocation.trusted and its release, inline
            pool = _overriding and _override.__dict__.get("pool") or libraries.memory_pool
            next(pool._requests)
            blocks = pool.free_blocks.get((device, bucket))
            try:
                space = blocks.pop()
            except (AttributeError, IndexError):
                space = _Given()  # (a free list holds objects whose ptr is the block: pymagma.memory.Pool)
                space.ptr = pool.new_block(device, bucket)
                blocks = pool.free_blocks[device, bucket]
            try:
                status = plan.cudnnConvolutionForward(plan.handle, plan.alpha, d0, xin.ptr, d1, w.ptr, d2, algo,
                                                      space.ptr, size, plan.beta, d3, y.ptr)
            finally:
                blocks.append(space)
                if pool.closed:
                    pool._sweep()
        else:
            status = plan.cudnnConvolutionForward(plan.handle, plan.alpha, d0, xin.ptr, d1, w.ptr, d2, algo, None,
                                                  0, plan.beta, d3, y.ptr)
        if status:
            _cd.check(status, name)
    else:
        y = plan.forward(xin, w)
    if bias is None:
        if activation is not None:
            _dnn.activation_forward(y, activation, out=y)
        return y
    if activation is not None:  # bias + activation in one launch (kernels/epilogue.cu)
        return _dk.bias_activation(y, bias, activation)[0]
    _dnn.add_tensor(bias.reshape(1, bias.shape[0], 1, 1), y)
    return y


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    if w.dtype is not dy.dtype:
        _same_dtype("conv2d_backward_data", dy, w)
    shape = x_shape if x_shape.__class__ is tuple else tuple(map(int, x_shape))  # (equal values plan alike)
    hit = _SEEN.get((shape, dy.dtype, dy.device, w.shape, id(stride), id(padding), id(dilation), id(groups)))
    if hit is None:
        hit = _seen(tuple(map(int, shape)), dy.dtype, dy.device, w.shape, stride, padding, dilation, groups)
    _, _, plan, crop = hit
    libraries = _native.current
    home = libraries is plan.libraries()
    if not home and plan.direct:  # a plan kept while other native libraries were in use
        _, _, plan, crop = _seen(tuple(map(int, shape)), dy.dtype, dy.device, w.shape, stride, padding, dilation,
                                 groups)
        home = libraries is plan.libraries()
    dy, w = dy if dy.is_c_contiguous else _contiguous(dy), w if w.is_c_contiguous else _contiguous(w)
    # ConvPlan.backward_data, inline (see above conv2d_forward; as the forward, one comparison)
    if home and plan.cudnn is libraries.cudnn and (not not _dnn.allow_tf32, dy.__class__, w.__class__, dy.shape,
                                                   w.shape, dy.dtype, w.dtype, dy.device, w.device) \
            == plan.backward_data_layouts:
        name, d0, d1, d2, d3, algo, size, bucket = plan.backward_data_call or plan._call("backward_data")
        device = plan.device
        dxp = _empty(plan.x_shape, plan.dtype, device)
        if bucket:  # memory.Allocation.trusted and its release, inline
            pool = _overriding and _override.__dict__.get("pool") or libraries.memory_pool
            next(pool._requests)
            blocks = pool.free_blocks.get((device, bucket))
            try:
                space = blocks.pop()
            except (AttributeError, IndexError):
                space = _Given()  # (a free list holds objects whose ptr is the block: pymagma.memory.Pool)
                space.ptr = pool.new_block(device, bucket)
                blocks = pool.free_blocks[device, bucket]
            try:
                status = plan.cudnnConvolutionBackwardData(plan.handle, plan.alpha, d0, w.ptr, d1, dy.ptr, d2, algo,
                                                           space.ptr, size, plan.beta, d3, dxp.ptr)
            finally:
                blocks.append(space)
                if pool.closed:
                    pool._sweep()
        else:
            status = plan.cudnnConvolutionBackwardData(plan.handle, plan.alpha, d0, w.ptr, d1, dy.ptr, d2, algo,
                                                       None, 0, plan.beta, d3, dxp.ptr)
        if status:
            _cd.check(status, name)
    else:
        dxp = plan.backward_data(dy, w)
    if crop is None:
        return dxp
    # the interior, a view: whoever needs it dense copies it (a gradient sum reads it as it is)
    offset, shape, strides, contiguous = crop
    view = dxp._view(offset, shape, strides)
    view.is_c_contiguous = contiguous  # (known: kept as the array would keep it on first use)
    return view


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, saved=None):
    if x.dtype is not dy.dtype:
        _same_dtype("conv2d_backward_filter", dy, x)
    x = x if x.is_c_contiguous else _contiguous(x)
    plan = saved.get("plan") if saved else None
    if plan is not None and plan.w_shape == tuple(w_shape):
        xin = saved.get("padded_x", x)
    else:
        extra, plan = _planned(x.shape, x.dtype, x.device, tuple(w_shape), stride, padding, dilation, groups)
        xin = saved.get("padded_x") if saved else None
        if xin is None:
            xin = _pad(x, extra, 0.0) if any(extra) else x
    dy = dy if dy.is_c_contiguous else _contiguous(dy)
    libraries = _native.current
    home = libraries is plan.libraries()
    if not home and plan.direct:  # a plan kept while other native libraries were in use
        plan = plan._elsewhere()
        home = libraries is plan.libraries()
    # ConvPlan.backward_filter, inline (see above conv2d_forward; as the forward, one comparison): xin C-contiguous
    # (x made so, or the padded copy)
    if home and xin.is_c_contiguous and plan.cudnn is libraries.cudnn and (
            not not _dnn.allow_tf32, xin.__class__, dy.__class__, xin.shape, dy.shape, xin.dtype, dy.dtype,
            xin.device, dy.device) == plan.backward_filter_layouts:
        name, d0, d1, d2, d3, algo, size, bucket = plan.backward_filter_call or plan._call("backward_filter")
        device = plan.device
        dw = _empty(plan.w_shape, plan.dtype, device)
        if bucket:  # memory.Allocation.trusted and its release, inline
            pool = _overriding and _override.__dict__.get("pool") or libraries.memory_pool
            next(pool._requests)
            blocks = pool.free_blocks.get((device, bucket))
            try:
                space = blocks.pop()
            except (AttributeError, IndexError):
                space = _Given()  # (a free list holds objects whose ptr is the block: pymagma.memory.Pool)
                space.ptr = pool.new_block(device, bucket)
                blocks = pool.free_blocks[device, bucket]
            try:
                status = plan.cudnnConvolutionBackwardFilter(plan.handle, plan.alpha, d0, xin.ptr, d1, dy.ptr, d2,
                                                             algo, space.ptr, size, plan.beta, d3, dw.ptr)
            finally:
                blocks.append(space)
                if pool.closed:
                    pool._sweep()
        else:
            status = plan.cudnnConvolutionBackwardFilter(plan.handle, plan.alpha, d0, xin.ptr, d1, dy.ptr, d2, algo,
                                                         None, 0, plan.beta, d3, dw.ptr)
        if status:
            _cd.check(status, name)
        return dw
    return plan.backward_filter(xin, dy)


def conv2d_backward_bias(dy):
    return _dnn.conv2d_backward_bias(_contiguous(dy))
