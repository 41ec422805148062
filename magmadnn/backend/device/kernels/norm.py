"""Launchers of norm.cu: rows normalised over their last axis (layer and RMS norm), backward and parameter
gradients."""

from __future__ import annotations

from ctypes import c_double, c_int, c_longlong

from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import NULL, THREADS, _float_dtype, _ptr, _run, _same
from pymagma.kernels.elementwise import contiguous

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


def layer_norm_backward_params(dy, x, gamma, mean, rstd, *, rms: bool = False):
    """``(dx, dgamma, dbeta)``: :func:`layer_norm_backward` and :func:`layer_norm_param_grads` (the same sums, in
    the same order) with the rows and the first stage of the parameter sums in one launch; the second stage only
    where the rows make more than one part (at least 2 * _NORM_PART_ROWS rows)."""
    what = "layer_norm_backward"
    dtype = _float_dtype(dy, what)
    _same([dy, x, gamma, mean, rstd], what)
    rows, cols = _rows_of(x, what)
    if tuple(dy.shape) != tuple(x.shape) or mean.size != rows or rstd.size != rows:
        raise ValueError(f"{what}: dy {dy.shape} must match x {x.shape}, mean and rstd hold one value per row "
                         f"({rows})")
    if gamma is not None and gamma.shape != (cols,):
        _norm_params(x, gamma, None, what)  # the ValueError naming gamma's shape
    if not (dy.is_c_contiguous and x.is_c_contiguous and mean.is_c_contiguous and rstd.is_c_contiguous
            and (gamma is None or gamma.is_c_contiguous)):  # (the common case: no call per operand)
        dy, x, mean, rstd = contiguous(dy), contiguous(x), contiguous(mean), contiguous(rstd)
        gamma = None if gamma is None else contiguous(gamma)
    empty, dtype_, device = _array._empty, x.dtype, x.device  # (sizes of checked operands: no check again)
    dx, dgamma, dbeta = empty(x.shape, dtype_, device), empty((cols,), dtype_, device), empty((cols,), dtype_, device)
    parts = max(1, min(_NORM_PARTS, rows // _NORM_PART_ROWS))
    part_rows = -(-rows // parts)
    pg, pb = dgamma, dbeta
    if parts > 1:
        pg, pb = empty((parts, cols), dtype_, device), empty((parts, cols), dtype_, device)
    param_blocks = parts * -(-cols // THREADS)
    row_blocks = max(1, min(rows, 65535 - param_blocks))
    grid = row_blocks + param_blocks
    _run("norm", programs.expression("norm_backward_params", dtype), x, grid,  # (pointers as ints)
         [dy.ptr, x.ptr, NULL if gamma is None else gamma.ptr, mean.ptr, rstd.ptr, dx.ptr, pg.ptr, pb.ptr,
          c_longlong(rows), c_longlong(cols), c_int(int(rms)), c_longlong(row_blocks), c_longlong(part_rows),
          c_longlong(parts)], grid=grid)
    if parts > 1:
        _run("norm", programs.expression("norm_param_sum", dtype), x, cols,
             [_ptr(pg), _ptr(pb), _ptr(dgamma), _ptr(dbeta), c_longlong(parts), c_longlong(cols)])
    return dx, dgamma, dbeta


#: The parameter sums of :func:`layer_norm_param_grads` split the rows into at most this many parts of at least
#: _NORM_PART_ROWS rows each (a fixed split for a shape: the same bits on every run).
_NORM_PARTS, _NORM_PART_ROWS = 64, 32
