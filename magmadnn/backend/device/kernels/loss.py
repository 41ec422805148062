"""Launchers of loss.cu: softmax cross-entropy over the last axis, forward and backward; Keras' cross entropy of
probabilities (clip, log and the weighted mean in one launch, its gradient in one more)."""

from __future__ import annotations

from ctypes import c_double, c_int, c_longlong

import numpy as np

from pymagma import _native
from pymagma import array as _array
from pymagma._checks import Plans
from pymagma.kernels import programs
from pymagma.kernels.common import _FLOAT_NAMES, NULL, _device_array, _float_dtype, _out_for, _ptr, _run, _same
from pymagma.kernels.elementwise import cast, contiguous
from pymagma.kernels.loader import MAX_BLOCKS, THREADS
from pymagma.kernels.reductions import reduce


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
    kernel = _labels_kernel(logits, labels, rows, classes)
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


def _labels_kernel(logits, labels, rows: int, classes: int) -> str:
    """The kernel family for ``labels``: class indices (int64, one per row) or per-class probabilities (the logits'
    shape and dtype); a clear error for anything else."""
    if programs.dtype_name(_device_array(labels, "softmax_cross_entropy labels").dtype) == "int64":
        if tuple(labels.shape) != (rows,):
            raise ValueError(f"class-index labels must have shape ({rows},), got {labels.shape}")
        return "softmax_xent_index"
    _same([logits, labels], "softmax_cross_entropy")
    if tuple(labels.shape) != (rows, classes):
        raise ValueError(f"probability labels must have the logits' shape {logits.shape}, got {labels.shape}")
    return "softmax_xent_prob"


_DeviceArray = _array.DeviceArray
_INT64 = np.dtype(np.int64)  # class-index labels of this dtype object: the common case, checked inline

#: The most elements (rows * classes) :func:`softmax_cross_entropy_mean` computes in one launch of one block.
MEAN_IN_ONE_LAUNCH = 1 << 16


def softmax_cross_entropy_mean(logits, labels):
    """``(loss, probs)``: the mean over the rows of :func:`softmax_cross_entropy`'s per-row loss (0-d) and the
    softmax, in one launch (one block, each thread whole rows) up to MEAN_IN_ONE_LAUNCH elements, else the per-row
    kernel and a mean.  ``labels`` as :func:`softmax_cross_entropy` takes them (int64 class indices: integer labels
    of another dtype are refused as there; :func:`softmax_cross_entropy_mean_op` casts them)."""
    if labels.__class__ is _DeviceArray and labels.dtype is not _INT64 and labels.dtype.kind in "iu":
        softmax_cross_entropy(logits, labels, reduction="none", grad=False, probs=True)  # (raises, naming them)
    return softmax_cross_entropy_mean_op(logits, labels)


def softmax_cross_entropy_mean_op(logits, labels):
    """The device backend's op ``softmax_cross_entropy_mean`` (no wrapper): :func:`softmax_cross_entropy_mean` of
    class indices of any integer dtype (cast to int64 first) in one frame from the autograd node to the launch."""
    if labels.__class__ is _DeviceArray and labels.dtype is not _INT64 and labels.dtype.kind in "iu":
        labels = cast(labels, np.int64)
    rows, classes = logits.shape if logits.ndim == 2 else (0, 0)
    if not 0 < rows * classes <= MEAN_IN_ONE_LAUNCH:
        loss, probs = softmax_cross_entropy(logits, labels, reduction="none", grad=False, probs=True)
        return reduce("mean", loss), probs
    dtype = _FLOAT_NAMES.get(logits.dtype) if logits.__class__ is _DeviceArray else None  # (_float_dtype's
    if dtype is None:  # common case inline, as the class-index labels' below: the checks without their frames)
        dtype = _float_dtype(logits, "softmax_cross_entropy")
    if not logits.is_c_contiguous:
        logits = contiguous(logits)
    if labels.__class__ is _DeviceArray and labels.dtype is _INT64 and labels.shape == (rows,):
        kernel = "softmax_xent_index_mean"
    else:
        kernel = _labels_kernel(logits, labels, rows, classes) + "_mean"
    if not labels.is_c_contiguous:
        labels = contiguous(labels)
    device = logits.device
    loss = _array._empty((), logits.dtype, device)  # (a checked array's dtype, device and shape)
    probs = _array._empty(logits.shape, logits.dtype, device)
    libraries = _native.current  # (common._run, inline: rows >= 1; pointers as ints: the launcher packs them)
    libraries.launcher.launch("loss", programs.expression(kernel, dtype), device,
                              (libraries.default_queues.get(device) or logits.queue).stream, 1, THREADS,
                              [logits.ptr, labels.ptr, loss.ptr, probs.ptr, c_longlong(rows), c_longlong(classes)])
    return loss, probs


def softmax_cross_entropy_backward(probs, labels, dloss, out=None, mean: bool = False):
    """dlogits from saved softmax ``probs`` (rows, classes), the labels given to :func:`softmax_cross_entropy` and a
    per-row upstream gradient ``dloss`` (rows,): ``(probs - onehot) * dloss`` for class indices,
    ``(probs * sum(target) - target) * dloss`` for probability targets. ``mean``: the gradient of the mean over the
    rows, ``dloss`` 0-d or None for 1 (every row's upstream gradient ``dloss / rows``, rounded to the dtype), in one
    launch."""
    what = "softmax_cross_entropy_backward"
    dtype = _FLOAT_NAMES.get(probs.dtype) if probs.__class__ is _DeviceArray else None  # (as in the forward)
    if dtype is None:
        dtype = _float_dtype(probs, what)
    if probs.ndim != 2:
        raise ValueError(f"{what} needs 2-D probs, got shape {probs.shape}")
    rows, classes = probs.shape
    if dloss is not None or not mean:  # (the mean's None: the kernel's upstream gradient 1)
        _same([probs, dloss], what)
    if (dloss is None and not mean) or (dloss is not None and tuple(dloss.shape) != (() if mean else (rows,))):
        raise ValueError(f"{what}: dloss must have shape {() if mean else (rows,)}, got "
                         f"{None if dloss is None else dloss.shape}")
    tail = "_mean_backward" if mean else "_backward"
    if (labels.__class__ is _DeviceArray and labels.dtype is _INT64) or \
            programs.dtype_name(_device_array(labels, f"{what} labels").dtype) == "int64":
        if tuple(labels.shape) != (rows,):
            raise ValueError(f"class-index labels must have shape ({rows},), got {labels.shape}")
        kernel, grid = "softmax_xent_index" + tail, None
    else:
        _same([probs, labels], what)
        if tuple(labels.shape) != (rows, classes):
            raise ValueError(f"probability labels must have the probs' shape {probs.shape}, got {labels.shape}")
        kernel, grid = "softmax_xent_prob" + tail, min(rows, 65535)
    if not probs.is_c_contiguous:
        probs = contiguous(probs)
    if not labels.is_c_contiguous:
        labels = contiguous(labels)
    if dloss is not None and not dloss.is_c_contiguous:
        dloss = contiguous(dloss)
    if out is None and probs.__class__ is _DeviceArray:  # (_out_for's common case inline)
        out = _array._empty(probs.shape, probs.dtype, probs.device)
    else:
        out = _out_for(out, probs.shape, probs.dtype, probs.device, what)
    _run("loss", programs.expression(kernel, dtype), probs, rows if grid else probs.size,  # (pointers as ints)
         [probs.ptr, labels.ptr, NULL if dloss is None else dloss.ptr, out.ptr, c_longlong(rows),
          c_longlong(classes)], grid=grid)
    return out


#: {(probs', labels' and dloss' class, shape, dtype and device): the launch (expression, rows, classes, grid; 0: no
#: launch)} of a :func:`softmax_cross_entropy_mean_backward` whose checks passed; errors are never kept
_MEAN_BACKWARD = Plans()


def softmax_cross_entropy_mean_backward(probs, labels, dloss):
    """The device backend's op ``softmax_cross_entropy_mean_backward`` (no wrapper):
    :func:`softmax_cross_entropy_backward` with ``mean=True`` of class indices of any integer dtype (cast to int64
    first).  A call whose operands' signature was checked before launches in this one frame."""
    if labels.__class__ is _DeviceArray and labels.dtype is not _INT64 and labels.dtype.kind in "iu":
        labels = cast(labels, np.int64)
    try:
        key = (probs.__class__, probs.shape, probs.dtype, probs.device, labels.__class__, labels.shape, labels.dtype,
               labels.device, None if dloss is None else (dloss.__class__, dloss.shape, dloss.dtype, dloss.device))
        decided = _MEAN_BACKWARD.get(key)
    except (AttributeError, TypeError):  # not arrays (or unhashable): the checked path names what is wrong
        key = decided = None
    if decided is None:
        out = softmax_cross_entropy_backward(probs, labels, dloss, mean=True)
        if key is not None and probs.__class__ is labels.__class__ is _DeviceArray:
            rows, classes = probs.shape
            index = labels.dtype is _INT64 or programs.dtype_name(labels.dtype) == "int64"
            n = probs.size if index else rows
            _MEAN_BACKWARD.keep(key, (programs.expression(
                ("softmax_xent_index" if index else "softmax_xent_prob") + "_mean_backward", _float_dtype(probs, "")),
                c_longlong(rows), c_longlong(classes),
                (min(-(-n // THREADS), MAX_BLOCKS) if index else min(rows, 65535)) if n else 0))
        return out
    expression, rows, classes, grid = decided
    if not probs.is_c_contiguous:
        probs = contiguous(probs)
    if not labels.is_c_contiguous:
        labels = contiguous(labels)
    if dloss is not None and not dloss.is_c_contiguous:
        dloss = contiguous(dloss)
    device = probs.device
    out = _array._empty(probs.shape, probs.dtype, device)
    if grid:  # (common._run, inline)
        libraries = _native.current
        libraries.launcher.launch("loss", expression, device,
                                  (libraries.default_queues.get(device) or probs.queue).stream, grid, THREADS,
                                  [probs.ptr, labels.ptr, NULL if dloss is None else dloss.ptr, out.ptr, rows,
                                   classes])
    return out


def _keras_checked(p, packed, what: str):
    dtype = _float_dtype(p, what)
    if p.ndim != 2:
        raise ValueError(f"{what} needs 2-D (rows, cols) probabilities, got shape {p.shape}")
    _same([p, packed], what)
    rows, cols = p.shape
    if tuple(packed.shape) != (rows, cols + 1):
        raise ValueError(f"{what}: packed targets must have shape ({rows}, {cols + 1}) (the targets, then each "
                         f"sample's weight), got {packed.shape}")
    return dtype, contiguous(p), contiguous(packed), rows, cols


def keras_prob_xent(p, packed, binary: bool, smoothing: float, eps: float, scale: float):
    """``scale * sum_r w_r loss_r`` (0-d): Keras' binary (``binary``) or categorical cross entropy of probabilities
    ``p`` (rows, cols), clipped to ``[eps, 1 - eps]``, against the targets of ``packed`` (rows, cols + 1: the
    targets then each row's weight ``w_r``), label smoothing ``smoothing``; one launch of one block."""
    dtype, p, packed, rows, cols = _keras_checked(p, packed, "keras_prob_xent")
    if rows == 0:
        return _array.zeros((), p.dtype, device=p.device)
    loss = _array.empty((), p.dtype, device=p.device)
    _run("loss", programs.expression("keras_prob_xent", dtype), p, rows,
         [_ptr(p), _ptr(packed), _ptr(loss), c_longlong(rows), c_longlong(cols), c_int(int(binary)),
          c_double(smoothing), c_double(eps), c_double(scale)], grid=1)
    return loss


def keras_prob_xent_backward(p, packed, dloss, binary: bool, smoothing: float, eps: float, scale: float, out=None):
    """dp of :func:`keras_prob_xent`'s loss for its 0-d upstream gradient ``dloss`` (None: 1); one launch."""
    what = "keras_prob_xent_backward"
    dtype, p, packed, rows, cols = _keras_checked(p, packed, what)
    if dloss is not None:
        _same([p, dloss], what)
        if tuple(dloss.shape) != ():
            raise ValueError(f"{what}: dloss must be 0-d, got shape {dloss.shape}")
        dloss = contiguous(dloss)
    out = _out_for(out, p.shape, p.dtype, p.device, what)
    _run("loss", programs.expression("keras_prob_xent_backward", dtype), p, rows,
         [_ptr(p), _ptr(packed), _ptr(dloss), _ptr(out), c_longlong(rows), c_longlong(cols), c_int(int(binary)),
          c_double(smoothing), c_double(eps), c_double(scale)])
    return out
