"""SVD (MAGMA ?gesdd or hybrid) and what is derived from it: ``svd``, ``pinv``, ``matrix_rank``, ``cond``."""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _magma, blas, hybrid
from .._colmajor import copy as colmajor_copy
from .._colmajor import magma
from ..array import DeviceArray, asarray, on_arrays_device
from ..errors import LinAlgError
from ._common import (
    SVDResult,
    _as_operand,
    _empty_stack,
    _host_int_array,
    _host_matrices,
    _keeps_subclass,
    _native,
    _real,
    _square,
    _stack_device,
    _stack_map,
    _to_device,
    check_info,
)
from .eigen import eigh
from .lu import inv


def _svd_hermitian(a, on_host: bool, compute_uv: bool, method: str):
    """NumPy's ``svd(hermitian=True)`` from :func:`eigh`: |eigenvalues| descending, signs moved into ``Vh``."""
    w, v = (x if on_host else x.get() for x in eigh(a, method=method))
    sgn, s = np.copysign(1.0, w).astype(w.dtype), np.abs(w)  # a zero eigenvalue keeps its vector (unitary Vh)
    order = np.argsort(s, axis=-1)[..., ::-1]
    s = np.take_along_axis(s, order, -1)
    if not compute_uv:
        return s if on_host else asarray(np.ascontiguousarray(s), device=a.device)
    sgn = np.take_along_axis(sgn, order, -1)
    u = np.take_along_axis(v, order[..., None, :], -1)
    vt = np.conj(np.swapaxes(u * sgn[..., None, :], -1, -2))
    res = SVDResult(u, s, vt)
    return res if on_host else SVDResult(*(asarray(np.ascontiguousarray(x), device=a.device) for x in res))


def _svd_empty(host: np.ndarray, on_host: bool, device, full_matrices: bool, compute_uv: bool):
    """svd with nothing to compute (an empty stack, or m or n zero) as NumPy gives it: no singular values and, for
    ``full_matrices``, identities in ``U`` (n == 0) or ``Vh`` (m == 0)."""
    *batch, m, n = host.shape
    k = min(m, n)
    s = np.zeros((*batch, k), _real(host.dtype))
    if not compute_uv:
        return s if on_host else asarray(s, device=device)
    ucols, vtrows = (m, n) if full_matrices else (k, k)
    u, vh = (np.ascontiguousarray(np.broadcast_to(np.eye(rows, cols, dtype=host.dtype), (*batch, rows, cols)))
             for rows, cols in ((m, ucols), (vtrows, n)))
    return SVDResult(u, s, vh) if on_host else SVDResult(*(asarray(x, device=device) for x in (u, s, vh)))


def _svd_scale(w: DeviceArray) -> float:
    """LAPACK's ?gesdd scaling: a power of two bringing the largest |entry| of a real ``w`` into
    [sqrt(tiny) / eps, eps / sqrt(tiny)] when it lies outside (so the host reflectors neither overflow nor
    underflow), else 1.  One device max-reduction and one scalar read; complex matrices are not scaled."""
    if w.dtype.kind != "f" or not w.size:
        return 1.0
    from .. import kernels

    anrm = float(kernels.reduce("max", kernels.unary("abs", w.T)).get())
    fi = np.finfo(w.dtype)
    small = float(np.sqrt(fi.tiny)) / float(fi.eps)
    if not np.isfinite(anrm) or anrm == 0 or small <= anrm <= 1 / small:
        return 1.0
    return float(2.0 ** np.round(np.log2((1 / small if anrm > 1 / small else small) / anrm)))


def _svd_hybrid(dev: DeviceArray, on_host: bool, full_matrices: bool, compute_uv: bool):
    """svd through :func:`pymagma.hybrid.gesvd`, one matrix at a time (a wide matrix through its transpose)."""
    *batch, m, n = dev.shape
    if _empty_stack(batch) or min(m, n) == 0:
        return _svd_empty(np.empty(dev.shape, dev.dtype), on_host, dev.device, full_matrices, compute_uv)
    wide = m < n

    def one(mat):
        w = colmajor_copy(mat.T if wide else mat)
        factor = _svd_scale(w)
        if factor != 1:
            blas.scal(factor, w.T)  # (w.T is C-contiguous)
        res = hybrid.gesvd(w, full_matrices, compute_uv)
        if not compute_uv:
            return (res / res.dtype.type(factor),)
        u, s, conj_v = res
        s = s / s.dtype.type(factor)
        return (conj_v, s, u.T) if wide else (u, s, conj_v.T)

    batch, results = _stack_map(one, dev)
    s = np.stack([r[1 if compute_uv else 0] for r in results]).reshape(*batch, min(m, n))
    if not compute_uv:
        return s if on_host else asarray(s, device=dev.device)
    u, vh = (_stack_device(batch, [r[i] for r in results]) if batch else results[0][i] for i in (0, 2))
    if on_host:
        return SVDResult(u.get(), s, vh.get())
    return SVDResult(u, asarray(s, device=dev.device), vh)


@on_arrays_device
@_keeps_subclass("a", 0, whole=False)
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, *, method: str = "auto"):
    """Singular value decomposition like ``numpy.linalg.svd``: ``SVDResult(U, S, Vh)``, or ``S`` alone.

    Native: magma_?gesdd (MAGMA's CPU interface: the matrix goes through host memory and MAGMA moves panels to the
    GPU itself); ``method="hybrid"`` (and "auto" without gesdd): :func:`pymagma.hybrid.gesvd` (bidiagonal reduction
    on the device, bidiagonal SVD on the host, back-transformation on the device).
    ``hermitian=True`` takes the eigen-decomposition of :func:`eigh` as NumPy does."""
    operand, operand_host = _as_operand(a, "a")
    if operand.ndim < 2:
        raise LinAlgError("svd needs at least two dimensions")
    if hermitian:
        _square(operand)
        return _svd_hermitian(operand, operand_host, compute_uv, method)
    if not _native(method, operand.dtype, "magma_?gesdd"):
        return _svd_hybrid(_to_device(operand, operand_host), operand_host, full_matrices, compute_uv)
    host, on_host, device = _host_matrices(a, "a")
    if _empty_stack(host.shape[:-2]) or min(host.shape[-2:]) == 0:
        return _svd_empty(host, on_host, device, full_matrices, compute_uv)

    def one(mat):
        m, n = mat.shape
        k = min(m, n)
        p = _magma.precision_of(mat.dtype)
        real = np.dtype(_magma.PRECISIONS[p][1])
        A = np.asfortranarray(mat.copy())
        s = np.zeros(max(k, 1), real)
        if not compute_uv:
            job, ucols, vtrows = _magma.MagmaNoVec, 1, 1
        elif full_matrices:
            job, ucols, vtrows = _magma.MagmaAllVec, m, n
        else:
            job, ucols, vtrows = _magma.MagmaSomeVec, k, k
        U = np.zeros((max(m, 1), max(ucols, 1)), mat.dtype, order="F")
        VT = np.zeros((max(vtrows, 1), max(n, 1)), mat.dtype, order="F")
        iwork = _host_int_array(8 * k)
        lrwork = max(1, 7 * k if job == _magma.MagmaNoVec else k * max(5 * k + 7, 2 * max(m, n) + 2 * k + 1))
        rwork = np.zeros(lrwork, real)
        info = _magma.MAGMA_INT(0)
        name = f"magma_{p}gesdd"
        fn = getattr(magma(), name)

        def call(work, lwork):
            args = [job, m, n, A.ctypes.data, max(m, 1), s.ctypes.data, U.ctypes.data, U.shape[0], VT.ctypes.data,
                    VT.shape[0], work.ctypes.data, lwork]
            if p in "cz":
                args.append(rwork.ctypes.data)
            fn(*args, iwork, ctypes.byref(info))

        query = np.zeros(1, mat.dtype)
        call(query, -1)
        check_info(int(info.value), name)
        call(np.zeros(max(int(query[0].real), 1), mat.dtype), max(int(query[0].real), 1))
        check_info(int(info.value), name, "the SVD did not converge ({info})")
        return np.ascontiguousarray(U[:m, :ucols]), s[:k], np.ascontiguousarray(VT[:vtrows, :n])

    batch = host.shape[:-2]
    results = [one(host[idx]) for idx in np.ndindex(*batch)] if batch else [one(host)]
    u, s, vt = (np.stack([r[i] for r in results]).reshape(*batch, *results[0][i].shape) for i in range(3))
    if not compute_uv:
        return s if on_host else asarray(s, device=device)
    return SVDResult(u, s, vt) if on_host else SVDResult(*(asarray(x, device=device) for x in (u, s, vt)))


_UNSET = object()


def _svd_host(a, **kwargs):
    return tuple(x if isinstance(x, np.ndarray) else x.get() for x in svd(a, **kwargs))


@on_arrays_device
@_keeps_subclass("a", 0)
def pinv(a, rcond=None, hermitian: bool = False, *, rtol=_UNSET, method: str = "auto"):
    """Moore-Penrose pseudo-inverse like ``numpy.linalg.pinv`` (same ``rcond``/``rtol`` rules): the SVD by
    :func:`svd` (native or hybrid), the small-value cut and the product ``V S^+ U^H`` on the host.  A NumPy
    array for NumPy input, else a DeviceArray."""
    operand, on_host = _as_operand(a, "a")
    if operand.ndim < 2:
        raise LinAlgError(f"pinv needs at least two dimensions, got shape {operand.shape}")
    *batch, m, n = operand.shape
    if rcond is not None and rtol is not _UNSET:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if rcond is None:
        rcond = 1e-15 if rtol is _UNSET else (max(m, n) * np.finfo(operand.dtype).eps if rtol is None else rtol)
    if _empty_stack(batch) or min(m, n) == 0:
        out = np.zeros((*batch, n, m), operand.dtype)
    else:
        u, s, vh = _svd_host(operand, full_matrices=False, hermitian=hermitian, method=method)
        large = s > np.asarray(rcond)[..., None] * np.max(s, axis=-1, keepdims=True)
        inv_s = np.where(large, 1 / np.where(large, s, 1), 0).astype(s.dtype)
        out = (np.conj(np.swapaxes(vh, -1, -2)) * inv_s[..., None, :]) @ np.conj(np.swapaxes(u, -1, -2))
    return out if on_host else asarray(np.ascontiguousarray(out), device=operand.device)


@on_arrays_device
def matrix_rank(A, tol=None, hermitian: bool = False, *, rtol=None, method: str = "auto"):
    """Rank by the SVD like ``numpy.linalg.matrix_rank``: singular values above ``tol`` (default
    ``S.max() * rtol``, ``rtol`` defaulting to ``max(m, n) * eps``).  Always NumPy integers."""
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    operand, on_host = _as_operand(A, "A")
    if operand.ndim < 2:
        host = operand if on_host else operand.get()
        return int(not np.all(host == 0))
    m, n = operand.shape[-2:]
    s = svd(operand, compute_uv=False, hermitian=hermitian, method=method)
    s = s if isinstance(s, np.ndarray) else s.get()
    if tol is None:
        rtol = max(m, n) * np.finfo(s.dtype).eps if rtol is None else np.asarray(rtol)[..., None]
        tol = np.max(s, axis=-1, keepdims=True, initial=0) * rtol
    else:
        tol = np.asarray(tol)[..., None]
    return np.count_nonzero(s > tol, axis=-1)


@on_arrays_device
def cond(x, p=None, *, method: str = "auto"):
    """Condition number like ``numpy.linalg.cond`` (NumPy values): ``p`` None, 2 or -2 from the singular values of
    :func:`svd`; any other norm as ``norm(x, p) * norm(inv(x), p)`` (:func:`inv` of the whole stack, or matrix by
    matrix when one is singular).  As in NumPy, a singular matrix (a NaN ratio, or a failed inverse) gives inf
    unless it holds NaNs, and empty matrices raise LinAlgError."""
    operand, on_host = _as_operand(x, "x")
    if operand.ndim < 2:
        raise LinAlgError(f"{operand.ndim}-dimensional array given. Array must be at least two-dimensional")
    if operand.size == 0 and 0 in operand.shape[-2:]:
        raise LinAlgError("cond is not defined on empty arrays")
    host = operand if on_host else operand.get()
    if p is None or p in (2, -2):
        s = svd(operand, compute_uv=False, method=method)
        s = s if isinstance(s, np.ndarray) else s.get()
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        _square(operand)
        r = _cond_by_inverse(host, p)
    nan = np.isnan(r) & ~np.isnan(host).any(axis=(-2, -1))
    if np.ndim(r):
        r[nan] = np.inf
    elif nan:
        r = r.dtype.type(np.inf)
    return r


def _cond_by_inverse(host: np.ndarray, p):
    """``norm(a, p) * norm(inv(a), p)`` per matrix of a non-empty stack (NaN where the inverse fails)."""
    real = _real(host.dtype)
    with np.errstate(all="ignore"):
        try:
            return (np.linalg.norm(host, p, axis=(-2, -1)) * np.linalg.norm(inv(host), p, axis=(-2, -1))).astype(real)
        except LinAlgError:
            pass
        flat = host.reshape(-1, *host.shape[-2:])
        out = np.empty(len(flat), real)
        for i, mat in enumerate(flat):
            try:
                out[i] = np.linalg.norm(mat, p) * np.linalg.norm(inv(mat), p)
            except LinAlgError:
                out[i] = np.nan
    return out.reshape(host.shape[:-2]) if host.ndim > 2 else out[0]
