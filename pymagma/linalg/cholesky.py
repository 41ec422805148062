"""Cholesky on MAGMA (potrf/potrs, batched for stacks) or the hybrid drivers: ``cholesky``, ``cho_solve``."""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _checks, _colmajor, _magma, blas, hybrid
from .._colmajor import copy as colmajor_copy
from .._colmajor import ld as _ld
from .._colmajor import magma, pointer_array
from ..array import DeviceArray, asarray, empty, on_arrays_device
from ..errors import LinAlgError
from ._common import (
    _as_operand,
    _empties,
    _empty_stack,
    _keeps_subclass,
    _lib_has,
    _matrix,
    _native,
    _result,
    _square,
    _stack_device,
    _stack_map,
    _sync,
    _to_device,
    check_info,
)

_NOT_PD = "the matrix is not positive definite: the leading minor of order {info} is not positive"


def _zero_upper(w: DeviceArray) -> None:
    if _lib_has(f"magmablas_{blas.precision(w)}laset"):
        _colmajor.zero_strict_triangle(w, upper=True)
    else:  # PyTorch's MAGMA has no complex laset
        hybrid.zero_upper(w)


@on_arrays_device
@_keeps_subclass("a", 0)
def cholesky(a, /, *, upper: bool = False, method: str = "auto"):
    """Cholesky factor like ``numpy.linalg.cholesky``: lower ``L`` with ``a = L L^H``, or with ``upper=True``
    ``U = L^H`` (``a = U^H U``).  Not positive definite -> LinAlgError naming the leading minor.

    ``method``: "native" (magma_?potrf_gpu, or potrf_batched for stacks), "hybrid" (:func:`pymagma.hybrid.potrf`:
    diagonal blocks on the host, trsm + syrk/herk on the device), "auto" (native when the provider exports it)."""
    a, on_host = _as_operand(a, "a")
    _square(a)
    native = _native(method, a.dtype, "magma_?potrf_gpu")
    dev = _to_device(a, on_host)
    if _empty_stack(dev.shape[:-2]):
        return _empties(on_host, dev.device, (dev.shape, dev.dtype))

    def one(m):
        w = colmajor_copy(m)
        n = w.shape[0]
        p = blas.precision(w)
        if not native:
            check_info(hybrid.potrf(w) if n else 0, "pymagma.hybrid.potrf", _NOT_PD)
        else:
            info = _magma.MAGMA_INT(0)
            if n:
                _sync(w)
                getattr(magma(), f"magma_{p}potrf_gpu")(_magma.MagmaLower, n, w.ptr, _ld(w), ctypes.byref(info))
            check_info(int(info.value), f"magma_{p}potrf_gpu", _NOT_PD)
        if not on_host:
            _zero_upper(w)
        return w

    if native and dev.ndim > 2 and dev.size and _lib_has(f"magma_{blas.precision(dev)}potrf_batched"):
        out = _potrf_batched(dev)
        if not on_host:
            for idx in np.ndindex(*out.shape[:-2]):
                _zero_upper(out[idx])
    else:
        batch, results = _stack_map(one, dev)
        out = _stack_device(batch, results) if batch else results[0]
    if on_host:
        low = np.tril(out.get())
        return np.conj(np.swapaxes(low, -1, -2)) if upper else low
    if not upper:
        return out
    if np.iscomplexobj(np.zeros(0, out.dtype)):  # no device conjugation here: one round trip through the host
        return asarray(np.ascontiguousarray(np.conj(np.swapaxes(out.get(), -1, -2))), device=out.device)
    return out.mT


def _potrf_batched(stack: DeviceArray) -> DeviceArray:
    """Lower Cholesky factors of a stack with magma_?potrf_batched (a view with column-major strides)."""
    n, name = stack.shape[-1], f"magma_{blas.precision(stack)}potrf_batched"
    factors, ptrs, count = _colmajor.copy_stack(stack)
    infos = empty((count,), _magma.MAGMA_INT, device=stack.device)
    check_info(int(getattr(magma(), name)(_magma.MagmaLower, n, ptrs.ptr, n, infos.ptr, count, stack.queue.handle)),
               name)
    stack.queue.synchronize()  # the pointer array must outlive the kernels
    for i, info in enumerate(infos.get()):
        check_info(min(int(info), 0), name)
        if info > 0:
            where = tuple(map(int, np.unravel_index(i, stack.shape[:-2])))
            raise LinAlgError(f"{name}: matrix {where} is not positive definite: the leading minor of order "
                              f"{int(info)} is not positive")
    return factors


@on_arrays_device
def cho_solve(c_and_lower, b, *, method: str = "auto"):
    """Solve ``a x = b`` from ``c = cholesky(a)`` (``(c, lower)`` like SciPy; ``lower`` must be True: our factors are
    lower) with magma_?potrs_gpu, or magma_?potrs_batched for stacks where the provider has it; ``method="hybrid"``
    (or "auto" without potrs): two device trsm (:func:`pymagma.hybrid.potrs`)."""
    c, lower = c_and_lower if isinstance(c_and_lower, tuple) else (c_and_lower, True)
    if not lower:
        raise ValueError("cho_solve takes the lower factor from pymagma.linalg.cholesky (lower=True)")
    c, c_host = _as_operand(c, "c")
    b, b_host = _as_operand(b, "b")
    _square(c, "c")
    n = c.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"cho_solve: b has shape {b.shape}, incompatible with c {c.shape}")
    native = _native(method, c.dtype, "magma_?potrs_gpu")
    dc, db = _to_device(c, c_host), _to_device(b, b_host)
    if vector:
        db = db.reshape(n, 1)
    batch = np.broadcast_shapes(dc.shape[:-2], db.shape[:-2])
    if _empty_stack(batch):
        return _empties(c_host and b_host, db.device, ((*batch, *((n,) if vector else db.shape[-2:])), db.dtype))

    def one(cm, bm):
        layout = _colmajor.stored(cm)
        w = cm if layout is not None and not layout[1] else colmajor_copy(cm)
        x = colmajor_copy(bm)
        if not native:
            hybrid.potrs(w, x)
            return x.copy()
        info = _magma.MAGMA_INT(0)
        p = blas.precision(w)
        _sync(x)
        getattr(magma(), f"magma_{p}potrs_gpu")(_magma.MagmaLower, n, x.shape[1], w.ptr, _ld(w), x.ptr, _ld(x),
                                               ctypes.byref(info))
        check_info(int(info.value), f"magma_{p}potrs_gpu")
        return x.copy()

    if native and batch and _lib_has(f"magma_{blas.precision(dc)}potrs_batched"):
        x = _potrs_batched(dc, db, batch)
    else:
        batch, xs = _stack_map(one, dc, db)
        x = _stack_device(batch, xs)
    if vector:
        x = x.reshape(x.shape[:-1])
    return _result(x, c_host and b_host)


def _potrs_batched(c: DeviceArray, b: DeviceArray, batch: tuple) -> DeviceArray:
    """Stacked ``cho_solve``: column-major copies of every factor and right-hand side (leading dimensions
    broadcast), then one magma_?potrs_batched for the whole stack."""
    idxs = list(np.ndindex(*batch))
    factors = [colmajor_copy(_matrix(c, i, batch)) for i in idxs]
    xs = [colmajor_copy(_matrix(b, i, batch)) for i in idxs]
    name, q = f"magma_{blas.precision(c)}potrs_batched", b.queue.handle
    a_ptrs, b_ptrs = (pointer_array([m.ptr for m in ms], b.device) for ms in (factors, xs))
    n, nrhs = xs[0].shape
    _checks.native_sizes(name, batch_count=len(xs), n=n, nrhs=nrhs)
    check_info(int(getattr(magma(), name)(_magma.MagmaLower, n, nrhs, a_ptrs.ptr, _ld(factors[0]), b_ptrs.ptr,
                                         _ld(xs[0]), len(xs), q)), name)
    b.queue.synchronize()  # the pointer arrays must outlive the kernels
    return _stack_device(batch, xs)
