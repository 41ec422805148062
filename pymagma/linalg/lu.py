"""LU family on MAGMA: ``lu_factor``, ``lu_solve``, ``solve``, ``inv``, ``det``, ``slogdet``."""

from __future__ import annotations

import numpy as np

from .. import _colmajor, _magma, blas
from .._colmajor import copy as colmajor_copy
from .._colmajor import magma, pointer_array
from ..array import DeviceArray, asarray, empty, on_arrays_device
from ..errors import LinAlgError
from ._common import (
    SlogdetResult,
    _as_operand,
    _empties,
    _empty_stack,
    _getrf,
    _keeps_subclass,
    _lib_has,
    _matrix,
    _result,
    _solve_lu_batched,
    _solve_lu_device,
    _square,
    _stack_device,
    _stack_map,
    _to_device,
    check_info,
)


@on_arrays_device
def lu_factor(a, *, check_singular: bool = True):
    """LU with partial pivoting, ``P A = L U`` (like ``scipy.linalg.lu_factor``): returns ``(lu, piv)``, ``piv``
    0-based row interchanges (a NumPy int32 array, ``(..., min(m, n))``).  ``lu`` is NumPy for NumPy input, else a
    DeviceArray with column-major strides.  A singular matrix raises ``LinAlgError`` unless ``check_singular`` is
    False."""
    a, on_host = _as_operand(a, "a")
    if a.ndim < 2:
        raise LinAlgError(f"a is {a.ndim}-dimensional; at least two dimensions are needed")
    dev = _to_device(a, on_host)
    if _empty_stack(dev.shape[:-2]):
        m, n = dev.shape[-2:]
        return _empties(on_host, dev.device, (dev.shape, dev.dtype)), np.zeros((*dev.shape[:-2], min(m, n)), np.int32)

    def one(m):
        w = colmajor_copy(m)
        piv, info = _getrf(w)
        name = f"magma_{blas.precision(m)}getrf_gpu"
        check_info(min(info, 0), name)
        if check_singular:
            check_info(info, name, "the matrix is singular: pivot {info} (U[{info}-1, {info}-1]) is exactly zero")
        return w, piv

    if dev.ndim > 2 and dev.size and _lib_has(f"magma_{blas.precision(dev)}getrf_batched"):
        lu, piv, infos = _getrf_batched(dev)
        for idx in np.ndindex(*infos.shape):
            check_info(min(int(infos[idx]), 0), f"magma_{blas.precision(dev)}getrf_batched")
            if check_singular and infos[idx] > 0:
                raise LinAlgError(f"magma_{blas.precision(dev)}getrf_batched: matrix {idx} is singular: pivot "
                                  f"{int(infos[idx])} is exactly zero")
        return _result(lu, on_host), piv
    batch, results = _stack_map(one, dev)
    lu = _stack_device(batch, [w for w, _ in results]) if batch else results[0][0]
    piv = np.stack([p for _, p in results]).reshape(*batch, -1) - 1
    return _result(lu, on_host), piv.astype(np.int32)


def _getrf_batched(stack: DeviceArray):
    """LU of every matrix of a stack with MAGMA's batched routines: one batched transpose into column-major work
    copies, then magma_?getrf_batched.  Returns (lu view with column-major strides, 0-based pivots, infos)."""
    batch, (m, n) = stack.shape[:-2], stack.shape[-2:]
    k, p, q = min(m, n), blas.precision(stack), stack.queue.handle
    lu, w_ptrs, count = _colmajor.copy_stack(stack)
    lib = magma()
    int_dtype = np.dtype(_magma.MAGMA_INT)
    ipiv = empty((count, max(k, 1)), int_dtype, device=stack.device)
    ipiv_ptrs = pointer_array([ipiv.ptr + i * max(k, 1) * int_dtype.itemsize for i in range(count)], stack.device)
    infos = empty((count,), int_dtype, device=stack.device)
    status = getattr(lib, f"magma_{p}getrf_batched")(m, n, w_ptrs.ptr, m, ipiv_ptrs.ptr, infos.ptr, count, q)
    check_info(int(status), f"magma_{p}getrf_batched")
    stack.queue.synchronize()
    piv = (ipiv.get()[:, :k] - 1).astype(np.int32).reshape(*batch, k)
    return lu, piv, infos.get().reshape(batch)


@on_arrays_device
def lu_solve(lu_and_piv, b):
    """Solve ``A x = b`` from ``lu_factor(A)``; ``b`` is ``(..., n)`` or ``(..., n, k)``."""
    lu, piv = lu_and_piv
    lu, on_host = _as_operand(lu, "lu")
    b, b_host = _as_operand(b, "b")
    _square(lu, "lu")
    piv = np.asarray(piv)
    n = lu.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"b has shape {b.shape}; expected ({n},) or (..., {n}, k) to match lu {lu.shape}")
    if piv.shape[-1] != n:
        raise ValueError(f"piv has shape {piv.shape}; expected (..., {n})")
    dlu = _to_device(lu, on_host)
    db = _to_device(b, b_host)
    if vector:
        db = db.reshape(n, 1)
    batch = np.broadcast_shapes(dlu.shape[:-2], db.shape[:-2], piv.shape[:-1])
    if _empty_stack(batch):
        return _empties(on_host and b_host, db.device, ((*batch, *((n,) if vector else db.shape[-2:])), db.dtype))
    if batch and _lib_has(f"magmablas_{blas.precision(dlu)}trsm_batched"):
        x = _solve_lu_batched(dlu, piv, db, batch)
    else:
        xs = [_solve_lu_device(_matrix(dlu, idx, batch), _matrix(piv, idx, batch, core=1) + 1,
                               _matrix(db, idx, batch)) for idx in np.ndindex(*batch)]
        x = _stack_device(batch, xs)
    if vector:
        x = x.reshape(x.shape[:-1])
    return _result(x, on_host and b_host)


@on_arrays_device
@_keeps_subclass("b", 1)
def solve(a, b):
    """Solve ``a x = b`` (``numpy.linalg.solve`` semantics: ``b`` is a vector only when 1-D)."""
    a, a_host = _as_operand(a, "a")
    b, b_host = _as_operand(b, "b")
    _square(a)
    if a.dtype != b.dtype:
        raise TypeError(f"a and b have different dtypes ({a.dtype}, {b.dtype})")
    n = a.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"solve: b has shape {b.shape}, incompatible with a {a.shape}")
    lu, piv = lu_factor(_to_device(a, a_host))
    x = lu_solve((lu, piv), _to_device(b, b_host))
    return _result(x, a_host and b_host)


@on_arrays_device
@_keeps_subclass("a", 0)
def inv(a):
    """Inverse of square matrices (``solve(a, I)``)."""
    a, on_host = _as_operand(a, "a")
    _square(a)
    eye = np.ascontiguousarray(np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape))
    return solve(a, eye if on_host else asarray(eye, device=a.device))


def _lu_diag_and_sign(a):
    a, on_host = _as_operand(a, "a")
    _square(a)
    lu, piv = lu_factor(_to_device(a, on_host), check_singular=False)
    diag = np.diagonal(lu.get() if isinstance(lu, DeviceArray) else lu, axis1=-2, axis2=-1)
    swaps = np.count_nonzero(piv != np.arange(piv.shape[-1]), axis=-1)
    return diag, np.where(swaps % 2, -1, 1).astype(a.dtype), a.dtype


@on_arrays_device
def det(a):
    """Determinant (from the LU factors; a NumPy value)."""
    diag, sign, dtype = _lu_diag_and_sign(a)
    return (sign * np.prod(diag, axis=-1)).astype(dtype)


@on_arrays_device
def slogdet(a):
    """``SlogdetResult(sign, logabsdet)`` like ``numpy.linalg.slogdet``.  The phase of a complex determinant is
    accumulated in double precision and renormalized, so ``|sign|`` is 1 to the dtype's rounding."""
    diag, sign, dtype = _lu_diag_and_sign(a)
    wide = diag.astype(np.complex128 if np.iscomplexobj(diag) else np.float64)
    absd = np.abs(wide)
    phase = np.prod(np.where(absd == 0, 0, wide / np.where(absd == 0, 1, absd)), axis=-1)
    if np.iscomplexobj(phase):
        mod = np.abs(phase)
        phase = np.where(mod == 0, 0, phase / np.where(mod == 0, 1, mod))
    with np.errstate(divide="ignore"):  # a zero pivot gives log|det| = -inf, as in NumPy
        logdet = np.sum(np.log(absd), axis=-1)
    return SlogdetResult((sign * phase).astype(dtype), logdet.astype(np.finfo(dtype).dtype))
