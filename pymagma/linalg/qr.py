"""QR and least squares: ``qr`` (geqrf2 + or/ungqr2 or hybrid), ``lstsq`` (gels, gesdd or hybrid)."""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _colmajor, _magma, blas, hybrid
from .._colmajor import copy as colmajor_copy
from .._colmajor import ld as _ld
from .._colmajor import magma
from ..array import DeviceArray, asarray, on_arrays_device
from ..errors import LinAlgError
from ._common import (
    QRResult,
    _as_operand,
    _empties,
    _empty_stack,
    _keeps_subclass,
    _native,
    _real,
    _result,
    _stack_device,
    _stack_map,
    _sync,
    _to_device,
    check_info,
)
from .svd import svd


@on_arrays_device
@_keeps_subclass("a", 0)
def qr(a, mode: str = "reduced", *, method: str = "auto"):
    """QR decomposition like ``numpy.linalg.qr``: ``mode`` 'reduced' / 'complete' -> ``QRResult(Q, R)``, 'r' -> R,
    'raw' -> ``(h, tau)`` (LAPACK's reflectors, ``h`` transposed as NumPy returns it).

    Native path: R from magma_?geqrf2_gpu (the LAPACK-compatible variant: R whole in the matrix, unlike geqrf_gpu
    which keeps R's diagonal blocks inverted in its T workspace); Q from magma_?orgqr2/ungqr2 (CPU interface, on the
    reflectors copied to the host).  Hybrid path (``method="hybrid"``, "auto" without those routines, and 'complete'
    with m > n): :func:`pymagma.hybrid.geqrf` / :func:`~pymagma.hybrid.orgqr`, Q built on the device."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    a, on_host = _as_operand(a, "a")
    if a.ndim < 2:
        raise LinAlgError("qr needs at least two dimensions")
    native = _native(method, a.dtype, "magma_?geqrf2_gpu", *(() if mode in ("r", "raw") else ("magma_?{or}gqr2",)))
    dev = _to_device(a, on_host)
    *batch, m, n = dev.shape
    k = min(m, n)
    qcols = m if mode == "complete" else k
    rrows = m if mode == "complete" else k
    if _empty_stack(batch) or (mode == "raw" and k == 0):
        if mode == "raw":
            return _empties(on_host, dev.device, ((*batch, n, m), dev.dtype), ((*batch, k), dev.dtype))
        r = ((*batch, rrows, n), dev.dtype)
        return _empties(on_host, dev.device, r) if mode == "r" else \
            QRResult(*_empties(on_host, dev.device, ((*batch, m, qcols), dev.dtype), r))

    def one(mat):
        w = colmajor_copy(mat)
        if native and not (mode == "complete" and m > n):
            return _qr_native(w, mode, on_host)
        f = hybrid.geqrf(w)
        if mode == "raw":
            return w.T.get() if on_host else w.T.copy(), f.tau
        q = None if mode == "r" else hybrid.orgqr(f, qcols)
        r = np.triu(w[:rrows, :].get())
        return (r if on_host else asarray(r, device=mat.device)), \
            (None if q is None else (q.get() if on_host else q))

    batch_, results = _stack_map(one, dev)
    if mode == "raw":
        hs = _stack_any(batch_, [h for h, _ in results], on_host)
        return hs, np.stack([t for _, t in results]).reshape(*batch_, k) if on_host else \
            asarray(np.stack([t for _, t in results]).reshape(*batch_, k), device=dev.device)
    rs = _stack_any(batch_, [r for r, _ in results], on_host)
    if mode == "r":
        return rs
    return QRResult(_stack_any(batch_, [q for _, q in results], on_host), rs)


def _stack_any(batch, mats, on_host: bool):
    if on_host:
        return np.stack(mats).reshape(*batch, *mats[0].shape)
    return _stack_device(batch, mats) if batch else mats[0]


def _qr_native(w: DeviceArray, mode: str, on_host: bool):
    """One matrix through magma_?geqrf2_gpu (+ magma_?orgqr2): (R, Q) or, for 'raw', (h, tau)."""
    m, n = w.shape
    k = min(m, n)
    p = blas.precision(w)
    tau = np.zeros(max(k, 1), w.dtype)
    info = _magma.MAGMA_INT(0)
    if k:
        _sync(w)
        getattr(magma(), f"magma_{p}geqrf2_gpu")(m, n, w.ptr, _ld(w), tau.ctypes.data, ctypes.byref(info))
        check_info(int(info.value), f"magma_{p}geqrf2_gpu")
    if mode == "raw":
        return (w.T.get() if on_host else w.T.copy()), tau[:k]
    r = colmajor_copy(w[:k, :])
    if on_host:
        r_out = np.triu(r.get())
    else:
        r_out = r
        _colmajor.zero_strict_triangle(r[:, :k], upper=False)
    if mode == "r":
        return r_out, None
    reflectors = np.asfortranarray(w[:, :k].get())
    if k:
        name = f"magma_{p}{'un' if p in 'cz' else 'or'}gqr2"
        getattr(magma(), name)(m, k, k, reflectors.ctypes.data, max(m, 1), tau.ctypes.data, ctypes.byref(info))
        check_info(int(info.value), name)
    q = np.ascontiguousarray(reflectors)
    return r_out, (q if on_host else asarray(q, device=w.device))


@on_arrays_device
@_keeps_subclass("b", 1, tuple_fields=(0, 1))
def lstsq(a, b, rcond=None, *, method: str = "svd"):
    """Least squares ``min ||a x - b||_2`` like ``numpy.linalg.lstsq``: returns ``(x, residuals, rank, s)``.

    ``method="svd"`` (default, NumPy's semantics): any shape and rank, through :func:`svd` (magma_?gesdd, or the
    hybrid SVD where the provider lacks it); singular values ``<= rcond * s.max()`` count as zero (``rcond=None``:
    machine epsilon times ``max(m, n)``; a negative ``rcond``: LAPACK's relative machine precision ``eps / 2``) and
    ``x`` is the minimum-norm solution.  As in NumPy, float32 and complex64 are solved in double precision (with
    double's epsilon) and rounded.  ``method="qr"``: magma_?gels_gpu, all on the device and cheaper, for ``a``
    of full column rank with ``m >= n`` only: the rank is checked on R's diagonal (``|R_ii| > max(m, n) * eps *
    max|R_ii|``, NumPy's matrix_rank tolerance; with gels this costs one more QR, as gels keeps R's diagonal blocks
    in a workspace it frees) and a rank-deficient ``a`` is a LinAlgError naming the rank (no silent fallback: use
    ``method="svd"``); it takes no ``rcond`` and reports rank ``n`` and ``s = None``.  Where
    the provider lacks gels, and with ``method="hybrid"``, the same is computed by :func:`pymagma.hybrid.geqrf` +
    ``Q^H b`` on the device + a device ``trsm``.  Incompatible shapes raise LinAlgError, as in NumPy.  ``residuals``
    holds the squared 2-norm of each column of ``b - a x`` when the rank is ``n`` and ``m > n``, and is empty
    otherwise.
    """
    if method not in ("svd", "qr", "hybrid"):
        raise ValueError(f"method must be 'svd', 'qr' or 'hybrid', got {method!r}")
    a, a_host = _as_operand(a, "a")
    b, b_host = _as_operand(b, "b")
    for what, v in (("a", a), ("b", b)):
        if v.ndim != 2 and not (what == "b" and v.ndim == 1):
            raise LinAlgError(f"{v.ndim}-dimensional array given. Array must be two-dimensional ({what} has shape "
                              f"{v.shape})")
    m, n = a.shape
    if b.shape[0] != m:
        raise LinAlgError(f"Incompatible dimensions: b has shape {b.shape}, incompatible with a of shape {a.shape} "
                          f"(b needs {m} rows)")
    if a.dtype != b.dtype:
        raise TypeError(f"lstsq: a and b have different dtypes ({a.dtype}, {b.dtype}); convert one of them")
    on_host = a_host and b_host
    device = None if on_host else (b if a_host else a).device
    if method in ("qr", "hybrid"):
        if rcond is not None:
            raise ValueError("rcond applies to method='svd' only (gels assumes full column rank)")
        if m < n:
            raise ValueError(f"method={method!r} (QR, like MAGMA's gels) solves only m >= n, got a of shape "
                             f"{a.shape}; use method='svd' for the minimum-norm solution")
        da, db = _to_device(a, a_host), _to_device(b, b_host)
        if method == "qr" and _native("auto", a.dtype, "magma_?gels_gpu"):
            # gels factors with geqrf_gpu, which keeps R's diagonal blocks (inverted) in a workspace it frees: the
            # rank is read from R of a separate factorization (geqrf2, or the hybrid one), before solving
            if min(m, n):
                _check_rank(qr(da, mode="r"), a.shape)
            x, residuals = _lstsq_gels(da, db)
        else:
            x, residuals = _lstsq_hybrid(da, db)
        x, rank, s = _result(x, on_host), n, None
    else:
        a_h, b_h = (v if host else v.get() for v, host in ((a, a_host), (b, b_host)))
        x, residuals, rank, s = _lstsq_svd(a_h, b_h, rcond)
        if not on_host:
            x, s = asarray(x, device=device), asarray(s, device=device)
    if not on_host:
        residuals = asarray(residuals, device=device)
    return x, residuals, np.int32(rank), s  # NumPy's rank is an int32 too


def _residuals(a: np.ndarray, x: np.ndarray, b: np.ndarray, rank: int) -> np.ndarray:
    """NumPy's residuals: squared column norms of ``b - a x`` when rank == n < m, else an empty array."""
    m, n = a.shape
    real = _real(a.dtype)
    if rank != n or m <= n:
        return np.zeros(0, real)
    r = b - a @ x
    return np.sum((r * np.conj(r)).real, axis=0, dtype=real).reshape(-1)


def _lstsq_svd(a: np.ndarray, b: np.ndarray, rcond):
    """NumPy's lstsq by the SVD of ``a`` (:func:`svd`).  Single precision is solved in double and rounded, as
    numpy.linalg does (its dgelsd/zgelsd runs in double for every dtype): the same default cut (double ``eps *
    max(m, n)``), rank decisions and accuracy."""
    dtype, real = a.dtype, _real(a.dtype)
    wide = np.result_type(dtype, np.float64)  # float32 -> float64, complex64 -> complex128
    a, b = a.astype(wide, copy=False), b.astype(wide, copy=False)
    m, n = a.shape
    if min(m, n) == 0:
        x = np.zeros((n, *b.shape[1:]), dtype)
        return x, _residuals(a, x, b, 0).astype(real), 0, np.zeros(0, real)
    u, s, vt = svd(a, full_matrices=False)
    eps = np.finfo(_real(wide)).eps
    relative = eps * max(m, n) if rcond is None else (eps / 2 if rcond < 0 else float(rcond))  # LAPACK's dlamch('E')
    keep = s > relative * s.max()
    coeffs = np.conj(u[:, keep].T) @ b
    coeffs = coeffs / (s[keep] if b.ndim == 1 else s[keep, None])
    x = np.conj(vt[keep].T) @ coeffs
    rank = int(keep.sum())
    return x.astype(dtype), _residuals(a, x, b, rank).astype(real), rank, s.astype(real)


def _lstsq_gels(a: DeviceArray, b: DeviceArray):
    m, n = a.shape
    vector = b.ndim == 1
    if vector:
        b = b.reshape(m, 1)
    nrhs = b.shape[1]
    w, x = colmajor_copy(a), colmajor_copy(b)
    name = f"magma_{blas.precision(w)}gels_gpu"
    gels, info = getattr(magma(), name), _magma.MAGMA_INT(0)

    def call(work: np.ndarray, lwork: int) -> None:
        gels(_magma.MagmaNoTrans, m, n, nrhs, w.ptr, _ld(w), x.ptr, _ld(x), work.ctypes.data, lwork,
             ctypes.byref(info))
        check_info(int(info.value), name)

    if min(m, n, nrhs):
        query = np.zeros(1, w.dtype)
        call(query, -1)  # MAGMA's own workspace size: its formula changed across versions
        lwork = max(1, int(query[0].real))
        _sync(w)
        call(np.zeros(lwork, w.dtype), lwork)
    tail = x[n:, :].get()  # rows n.. of the overwritten b: the residual in Q's coordinates
    residuals = np.sum(np.abs(tail) ** 2, axis=0, dtype=_real(w.dtype)) if m > n else np.zeros(0, _real(w.dtype))
    sol = x[:n, :].copy()
    return (sol.reshape(n) if vector else sol), residuals


def _check_rank(w, shape) -> None:
    """LinAlgError when the QR factor in ``w`` (R in its upper n x n triangle) shows ``a`` rank-deficient: rank =
    the count of ``|R_ii| > max(m, n) * eps * max|R_ii|`` (NumPy's matrix_rank tolerance, on R's diagonal)."""
    m, n = shape
    diagonal = np.abs(np.diagonal(w[:n, :n].get()))
    top = float(diagonal.max()) if diagonal.size else 0.0
    tol = max(m, n) * float(np.finfo(_real(w.dtype)).eps) * top
    rank = int(np.count_nonzero(diagonal > tol))
    if rank < n:
        raise LinAlgError(f"lstsq(method='qr'): a of shape {shape} has rank {rank} < {n} columns (|R_ii| <= {tol:.3g} "
                          f"on R's diagonal); QR least squares needs full column rank: use method='svd' for the "
                          "minimum-norm solution")


def _lstsq_hybrid(a: DeviceArray, b: DeviceArray):
    """Full-column-rank least squares by the hybrid QR: ``R x = (Q^H b)[:n]``; residuals from the rest."""
    m, n = a.shape
    vector = b.ndim == 1
    x = colmajor_copy(b.reshape(m, 1) if vector else b)
    real = _real(a.dtype)
    if min(m, n, x.shape[1]):
        f = hybrid.geqrf(colmajor_copy(a))
        _check_rank(f.w, a.shape)
        hybrid.ormqr_h(f, x)
        _colmajor.trsm(_colmajor.LEFT, _colmajor.UPPER, _colmajor.N, 1.0, f.w[:n, :n], x[:n, :])
    tail = x[n:, :].get()
    residuals = np.sum(np.abs(tail) ** 2, axis=0, dtype=real) if m > n else np.zeros(0, real)
    sol = x[:n, :].copy()
    return (sol.reshape(n) if vector else sol), residuals
