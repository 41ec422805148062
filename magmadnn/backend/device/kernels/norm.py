"""Launchers of norm.cu: rows normalised over their last axis (layer and RMS norm), backward and parameter
gradients."""

from __future__ import annotations

from ctypes import c_double, c_int, c_longlong

from pymagma import _native
from pymagma import array as _array
from pymagma._checks import Plans
from pymagma.kernels import programs
from pymagma.kernels.common import NULL, THREADS, _float_dtype, _ptr, _run, _same
from pymagma.kernels.elementwise import contiguous
from pymagma.kernels.loader import MAX_BLOCKS

from .optim import _check_hyper


def _rows_of(x, what: str) -> tuple[int, int]:
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"{what}: expected an array with a non-empty last axis, got shape {x.shape}")
    return x.size // x.shape[-1], int(x.shape[-1])


def _norm_params(x, gamma, beta, what: str) -> None:
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p is not None and tuple(p.shape) != (x.shape[-1],):
            raise ValueError(f"{what}: {name} must have shape ({x.shape[-1]},) for x of shape {x.shape}, got "
                             f"{p.shape}")


#: {(kernel, operands' signature, scalars): what its checks decided}: a call with a signature seen before skips its
#: checks (they hold for every call with it); errors are never kept
_CHECKED = Plans()


def layer_norm(x, gamma=None, beta=None, *, eps: float = 1e-5, rms: bool = False):
    """Each row of ``x`` normalised over its last axis -> ``(y, mean, rstd)``: y = (x - mean) * rstd * gamma + beta
    with rstd = 1 / sqrt(var + eps) (biased variance); ``rms``: no centring (mean 0, var = mean(x^2)).  ``gamma`` and
    ``beta`` (cols,) may be None; ``mean`` and ``rstd`` (one per row, x's dtype) are what the backward needs."""
    y, (mean, rstd) = layer_norm_forward(x, gamma, beta, eps, rms)
    return y, mean, rstd


def layer_norm_forward(x, gamma, beta, eps, rms=False):
    """The op ``layer_norm_forward`` (the device backend's own, no wrapper): :func:`layer_norm` as ``(y, (mean,
    rstd))``, one frame from the autograd node to the launch."""
    key = ("layer_norm", x.__class__, x.shape, x.dtype, x.device,
           None if gamma is None else (gamma.__class__, gamma.shape, gamma.dtype, gamma.device),
           None if beta is None else (beta.__class__, beta.shape, beta.dtype, beta.device),
           eps.__class__, eps, rms.__class__, rms)
    decided = _CHECKED.get(key)
    if decided is None:  # every check, once per signature
        dtype = _float_dtype(x, "layer_norm")
        _same([x, gamma, beta], "layer_norm")
        _check_hyper("layer_norm", eps=eps)
        rows, cols = _rows_of(x, "layer_norm")
        _norm_params(x, gamma, beta, "layer_norm")
        decided = _CHECKED.keep(key, (programs.expression("norm_forward", dtype), rows, cols, int(rms),
                                      min(rows, 65535)))
    expression, rows, cols, flag, grid = decided
    if not x.is_c_contiguous:
        x = contiguous(x)
    if gamma is not None and not gamma.is_c_contiguous:
        gamma = contiguous(gamma)
    if beta is not None and not beta.is_c_contiguous:
        beta = contiguous(beta)
    shape, dtype, device = x.shape, x.dtype, x.device
    y = _array._empty(shape, dtype, device)
    mean = _array._empty(shape[:-1], dtype, device)
    rstd = _array._empty(shape[:-1], dtype, device)
    if rows:  # (common._run, inline: one frame from the autograd node to the launch)
        libraries = _native.current
        libraries.launcher.launch(
            "norm", expression, device, (libraries.default_queues.get(device) or x.queue).stream, grid, THREADS,
            [x.ptr, NULL if gamma is None else gamma.ptr, NULL if beta is None else beta.ptr, y.ptr, mean.ptr,
             rstd.ptr, c_longlong(rows), c_longlong(cols), c_double(eps), c_int(flag)])
    return y, (mean, rstd)


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


def layer_norm_backward_params(dy, x, gamma, mean, rstd, *, rms: bool = False):
    """``(dx, dgamma, dbeta)``: :func:`layer_norm_backward` and :func:`layer_norm_param_grads` (the same sums, in
    the same order) with the rows and the first stage of the parameter sums in one launch; the second stage only
    where the rows make more than one part (at least 2 * _NORM_PART_ROWS rows). Without ``gamma``: the two apart."""
    if gamma is None:
        return (layer_norm_backward(dy, x, None, mean, rstd, rms=rms), *layer_norm_param_grads(dy, x, mean, rstd))
    return layer_norm_backward_op(dy, x, gamma, (mean, rstd), rms)


def layer_norm_backward_op(dy, x, gamma, ctx, rms=False):
    """The op ``layer_norm_backward`` (the device backend's own, no wrapper): ``(dx, dgamma, dbeta)`` from the
    forward's ``ctx`` = (mean, rstd) as :func:`layer_norm_backward_params` computes them (one frame from the autograd
    node to the launch); without ``gamma``, ``(dx, None, None)`` by :func:`layer_norm_backward`."""
    mean, rstd = ctx
    if gamma is None:
        return layer_norm_backward(dy, x, None, mean, rstd, rms=bool(rms)), None, None
    what = "layer_norm_backward"
    key = (what, dy.__class__, dy.shape, dy.dtype, dy.device, x.__class__, x.shape, x.dtype, x.device,
           gamma.__class__, gamma.shape, gamma.dtype, gamma.device,
           mean.__class__, mean.shape, mean.dtype, mean.device, rstd.__class__, rstd.shape, rstd.dtype, rstd.device,
           rms.__class__, rms)
    decided = _CHECKED.get(key)
    if decided is None:  # every check, once per signature
        dtype = _float_dtype(dy, what)
        _same([dy, x, gamma, mean, rstd], what)
        rows, cols = _rows_of(x, what)
        if tuple(dy.shape) != tuple(x.shape) or mean.size != rows or rstd.size != rows:
            raise ValueError(f"{what}: dy {dy.shape} must match x {x.shape}, mean and rstd hold one value per row "
                             f"({rows})")
        _norm_params(x, gamma, None, what)
        parts = max(1, min(_NORM_PARTS, rows // _NORM_PART_ROWS))
        param_blocks = parts * -(-cols // THREADS)
        row_blocks = max(1, min(rows, 65535 - param_blocks))
        decided = _CHECKED.keep(key, (programs.expression("norm_backward_params", dtype),
                              programs.expression("norm_param_sum", dtype), rows, cols, parts, -(-rows // parts),
                              row_blocks, row_blocks + param_blocks, int(rms)))
    expression, sum_expression, rows, cols, parts, part_rows, row_blocks, grid, flag = decided
    if not dy.is_c_contiguous:
        dy = contiguous(dy)
    if not x.is_c_contiguous:
        x = contiguous(x)
    if not mean.is_c_contiguous:
        mean = contiguous(mean)
    if not rstd.is_c_contiguous:
        rstd = contiguous(rstd)
    if not gamma.is_c_contiguous:
        gamma = contiguous(gamma)
    dtype, device = x.dtype, x.device
    dx = _array._empty(x.shape, dtype, device)
    dgamma = _array._empty((cols,), dtype, device)
    dbeta = _array._empty((cols,), dtype, device)
    if parts == 1:
        pg, pb = dgamma, dbeta
    else:
        pg, pb = _array._empty((parts, cols), dtype, device), _array._empty((parts, cols), dtype, device)
    # (common._run, inline: one frame from the autograd node to the launches; grid >= 1, cols >= 1)
    libraries = _native.current
    stream = (libraries.default_queues.get(device) or x.queue).stream
    libraries.launcher.launch(
        "norm", expression, device, stream, grid, THREADS,
        [dy.ptr, x.ptr, gamma.ptr, mean.ptr, rstd.ptr, dx.ptr, pg.ptr, pb.ptr, c_longlong(rows), c_longlong(cols),
         c_int(flag), c_longlong(row_blocks), c_longlong(part_rows), c_longlong(parts)])
    if parts > 1:
        libraries.launcher.launch("norm", sum_expression, device, stream, min(-(-cols // THREADS), MAX_BLOCKS),
                                  THREADS, [pg.ptr, pb.ptr, dgamma.ptr, dbeta.ptr, c_longlong(parts), c_longlong(cols)])
    return dx, dgamma, dbeta


#: The parameter sums of :func:`layer_norm_param_grads` split the rows into at most this many parts of at least
#: _NORM_PART_ROWS rows each (a fixed split for a shape: the same bits on every run).
_NORM_PARTS, _NORM_PART_ROWS = 64, 32
