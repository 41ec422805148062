"""The column-major face: MAGMA's BLAS and LAPACK conventions on column-major device matrices, in one place for
:mod:`pymagma.linalg`, the hybrid drivers (:mod:`pymagma.hybrid`) and the row-major face :mod:`pymagma.blas`.

A column-major ``rows x cols`` matrix is a 2-D DeviceArray whose columns are contiguous (``x.T`` is C-ordered, as
:func:`empty`, :func:`to_device` and :func:`copy` make them).  A block ``x[i:, j:]`` of one is the same storage at an
offset pointer with the same leading dimension, so blocks pass to MAGMA as views; :func:`ptr_ld` gives a matrix's
pointer and leading dimension.  :func:`stored` says how *any* 2-D array is stored for column-major BLAS (as itself or
as its transpose), which is how :mod:`pymagma.blas` maps NumPy's row-major products onto MAGMA without copies.

The BLAS calls here (:func:`gemm`, :func:`trsm`, :func:`trmm`, :func:`gemv`, :func:`herk_lower`, :func:`hemv_lower`,
:func:`her2k_lower`) take MAGMA's own flags (:data:`N`, :data:`T`, :data:`C`, :data:`LEFT`, ...) and run on
``queue``, by default the output's default queue.  :func:`magma` is the MAGMA library every pymagma module calls.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from . import _checks, _magma
from .array import DeviceArray, asarray, copy_into
from .array import empty as _empty

N, T, C = _magma.MagmaNoTrans, _magma.MagmaTrans, _magma.MagmaConjTrans
LEFT, RIGHT, LOWER, UPPER = _magma.MagmaLeft, _magma.MagmaRight, _magma.MagmaLower, _magma.MagmaUpper
NONUNIT, UNIT = _magma.MagmaNonUnit, _magma.MagmaUnit


def magma():
    """The MAGMA library (initialized on first use): the one place pymagma's modules get it from."""
    return _magma.initialized()


def scalar(value, p: str, real: bool = False):
    """``value`` as the ctypes scalar MAGMA takes for precision ``p`` (``real``: the real type, as herk's alpha)."""
    ctype = _magma.PRECISIONS[p][1 if real else 0]
    if issubclass(ctype, ctypes.Structure):
        v = complex(value)
        return ctype(v.real, v.imag)
    return ctype(float(np.real(value)))


# ----------------------------------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class Stored:
    """A matrix as column-major BLAS sees it: ``rows x cols`` at ``ptr`` with leading dimension ``ld``."""

    ptr: int
    rows: int
    cols: int
    ld: int


def stored(x) -> tuple[Stored, bool] | None:
    """How a 2-D array (``ptr``, ``shape``, byte ``strides``, ``dtype``) is stored for BLAS: ``(S, transposed)``
    with ``x == S`` or ``x == S^T``; ``None`` when the layout is not BLAS-compatible (needs a copy)."""
    (r, c), (s0, s1), item = x.shape, x.strides, x.dtype.itemsize
    if s0 % item or s1 % item:
        return None
    e0, e1 = s0 // item, s1 // item
    if e1 == 1 or c <= 1:  # rows are contiguous: column-major storage of x^T
        ld = e0 if r > 1 else max(c, 1)
        if ld >= max(c, 1):
            return Stored(x.ptr, c, r, ld), True
    if e0 == 1 or r <= 1:  # columns are contiguous: column-major storage of x
        ld = e1 if c > 1 else max(r, 1)
        if ld >= max(r, 1):
            return Stored(x.ptr, r, c, ld), False
    return None


def ptr_ld(x: DeviceArray) -> tuple[int, int]:
    """(pointer, leading dimension) of a column-major 2-D view (a ValueError for any other layout)."""
    rows, cols = x.shape
    if rows > 1 and x.strides[0] != x.itemsize:
        raise ValueError(f"column-major views needed, got strides {x.strides} for shape {x.shape}")
    ld = x.strides[1] // x.itemsize if cols > 1 else rows
    return x.ptr, max(ld, rows, 1)


def ld(x: DeviceArray) -> int:
    """The leading dimension of a column-major 2-D view."""
    return ptr_ld(x)[1]


def pointer_array(ptrs, device: int) -> DeviceArray:
    """A device array of device pointers (what MAGMA's batched routines take)."""
    return asarray(np.asarray(ptrs, dtype=np.uint64).view(np.int64), device=device)


# ----------------------------------------------------------------------------------------------------- matrices
def empty(rows: int, cols: int, dtype, device: int) -> DeviceArray:
    """A new column-major ``rows x cols`` device matrix (a transposed view of a C-ordered one)."""
    return _empty((cols, rows), dtype, device=device).T


def to_device(host: np.ndarray, device: int) -> DeviceArray:
    """A column-major device copy of the 2-D host matrix ``host``."""
    out = empty(*host.shape, host.dtype, device)
    if host.size:
        out.set(host)
    return out


def copy(a: DeviceArray) -> DeviceArray:
    """A column-major copy of a 2-D DeviceArray, returned as a view with column-major strides (``x.T`` is
    C-contiguous).  One device transpose (or one copy when ``a`` is already column-major)."""
    m, n = a.shape
    work = _empty((n, m), a.dtype, device=a.device)
    if m == 0 or n == 0:
        return work.T
    layout = stored(a)
    if layout is not None and not layout[1]:
        copy_into(work, a.T)
        return work.T
    src = a if a.is_c_contiguous else a.copy()
    # read column-major, the C-ordered m x n matrix is n x m (= a^T); its transpose is a in column-major order
    getattr(magma(), f"magmablas_{_p(a)}transpose")(n, m, src.ptr, n, work.ptr, m, a.queue.handle)
    return work.T


def copy_stack(stack: DeviceArray):
    """Column-major work copies of every matrix of a stack, made by one magmablas_?transpose_batched: returns
    (the copies as a view of shape ``stack.shape`` with column-major strides, a device array of pointers to them,
    the matrix count).  The caller synchronizes the queue before the pointer arrays die."""
    batch, (m, n) = stack.shape[:-2], stack.shape[-2:]
    count, item = int(np.prod(batch)), stack.itemsize
    _checks.native_sizes("linalg batched routines", batch_count=count, m=m, n=n)
    src = stack if stack.is_c_contiguous else stack.copy()
    work = _empty((count, n, m), stack.dtype, device=stack.device)
    a_ptrs = pointer_array([src.ptr + i * m * n * item for i in range(count)], stack.device)
    w_ptrs = pointer_array([work.ptr + i * m * n * item for i in range(count)], stack.device)
    getattr(magma(), f"magmablas_{_p(stack)}transpose_batched")(n, m, a_ptrs.ptr, n, w_ptrs.ptr, m, count,
                                                                stack.queue.handle)
    stack.queue.synchronize()  # a_ptrs and src may die with this frame
    return work.reshape(*batch, n, m).mT, w_ptrs, count


def zero_strict_triangle(w: DeviceArray, upper: bool) -> None:
    """Zero the strict upper (or lower) triangle of a column-major square ``w`` with ``laset`` (which also sets the
    diagonal, so the diagonal is saved and restored around it)."""
    n = w.shape[0]
    if n < 2:
        return
    p, q, lda = _p(w), w.queue.handle, ld(w)
    diag = _empty((n,), w.dtype, device=w.device)
    lib = magma()
    getattr(lib, f"magma_{p}copy")(n, w.ptr, lda + 1, diag.ptr, 1, q)
    zero = scalar(0, p)
    getattr(lib, f"magmablas_{p}laset")(UPPER if upper else LOWER, n, n, zero, zero, w.ptr, lda, q)
    getattr(lib, f"magma_{p}copy")(n, diag.ptr, 1, w.ptr, lda + 1, q)


# ----------------------------------------------------------------------------------------------------- BLAS
def _p(x: DeviceArray) -> str:
    return _magma.precision_of(x.dtype)


def gemm(ta: int, tb: int, alpha, a: DeviceArray, b: DeviceArray, beta, c: DeviceArray, queue=None) -> None:
    """``c = alpha op(a) op(b) + beta c``."""
    m, n = c.shape
    k = a.shape[1] if ta == N else a.shape[0]
    if m == 0 or n == 0:
        return
    p = _p(c)
    (pa, la), (pb, lb), (pc, lc) = ptr_ld(a), ptr_ld(b), ptr_ld(c)
    getattr(magma(), f"magma_{p}gemm")(ta, tb, m, n, k, scalar(alpha, p), pa, la, pb, lb, scalar(beta, p), pc, lc,
                                       (queue or c.queue).handle)


def _triangular(routine: str, side: int, uplo: int, trans: int, alpha, a, b, diag: int, queue) -> None:
    m, n = b.shape
    if m == 0 or n == 0:
        return
    p = _p(b)
    (pa, la), (pb, lb) = ptr_ld(a), ptr_ld(b)
    getattr(magma(), f"magma_{p}{routine}")(side, uplo, trans, diag, m, n, scalar(alpha, p), pa, la, pb, lb,
                                            (queue or b.queue).handle)


def trsm(side: int, uplo: int, trans: int, alpha, a: DeviceArray, b: DeviceArray, diag: int = NONUNIT,
         queue=None) -> None:
    """Solve ``op(a) x = alpha b`` (LEFT) or ``x op(a) = alpha b`` (RIGHT) in place of ``b``."""
    _triangular("trsm", side, uplo, trans, alpha, a, b, diag, queue)


def trmm(side: int, uplo: int, trans: int, alpha, a: DeviceArray, b: DeviceArray, diag: int = NONUNIT,
         queue=None) -> None:
    """``b = alpha op(a) b`` (LEFT) or ``alpha b op(a)`` (RIGHT) for triangular ``a``."""
    _triangular("trmm", side, uplo, trans, alpha, a, b, diag, queue)


def herk_lower(alpha: float, a: DeviceArray, beta: float, c: DeviceArray, queue=None) -> None:
    """Lower triangle of ``c = alpha a a^H + beta c`` (``syrk`` for real, ``herk`` for complex dtypes)."""
    n, k = a.shape
    if n == 0:
        return
    p = _p(c)
    cplx = p in "cz"
    (pa, la), (pc, lc) = ptr_ld(a), ptr_ld(c)
    getattr(magma(), f"magma_{p}{'herk' if cplx else 'syrk'}")(
        LOWER, N, n, k, scalar(alpha, p, cplx), pa, la, scalar(beta, p, cplx), pc, lc, (queue or c.queue).handle)


def hemv_lower(alpha, a: DeviceArray, x: DeviceArray, y: DeviceArray) -> None:
    """``y = alpha a x`` for Hermitian ``a`` given by its lower triangle (``symv``/``hemv``); x, y are n x 1 views."""
    n = a.shape[0]
    p = _p(a)
    (pa, la), (px, _), (py, _) = ptr_ld(a), ptr_ld(x), ptr_ld(y)
    getattr(magma(), f"magma_{p}{'hemv' if p in 'cz' else 'symv'}")(
        LOWER, n, scalar(alpha, p), pa, la, px, 1, scalar(0.0, p), py, 1, a.queue.handle)


def gemv(trans: int, alpha, a: DeviceArray, x: DeviceArray, beta, y: DeviceArray, queue=None) -> None:
    """``y = alpha op(a) x + beta y`` (``gemv``); x, y are column vectors (k x 1 column-major views)."""
    m, n = a.shape
    if m == 0 or n == 0:
        return
    p = _p(a)
    (pa, la), (px, _), (py, _) = ptr_ld(a), ptr_ld(x), ptr_ld(y)
    getattr(magma(), f"magma_{p}gemv")(trans, m, n, scalar(alpha, p), pa, la, px, 1, scalar(beta, p), py, 1,
                                       (queue or a.queue).handle)


def her2k_lower(alpha, a: DeviceArray, b: DeviceArray, c: DeviceArray) -> None:
    """Lower triangle of ``c += alpha a b^H + conj(alpha) b a^H`` (``syr2k``/``her2k``)."""
    n, k = a.shape
    p = _p(c)
    cplx = p in "cz"
    (pa, la), (pb, lb), (pc, lc) = ptr_ld(a), ptr_ld(b), ptr_ld(c)
    getattr(magma(), f"magma_{p}{'her2k' if cplx else 'syr2k'}")(
        LOWER, N, n, k, scalar(alpha, p), pa, la, pb, lb, scalar(1.0, p, cplx), pc, lc, c.queue.handle)
