"""Eigenvalues: ``eigh``/``eigvalsh`` (MAGMA ?syevd/?heevd or the hybrid driver), ``eig``/``eigvals`` (MAGMA ?geev
or the host's LAPACK)."""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _magma, blas, hybrid
from .._colmajor import copy as colmajor_copy
from .._colmajor import ld as _ld
from .._colmajor import magma
from ..array import DeviceArray, asarray, on_arrays_device
from ._common import (
    EighResult,
    EigResult,
    _as_operand,
    _empties,
    _empty_stack,
    _host_int_array,
    _host_matrices,
    _keeps_subclass,
    _native,
    _real,
    _square,
    _stack_device,
    _stack_map,
    _sync,
    _to_device,
    check_info,
)


def _host_lapack(fn, a, on_host: bool, *args):
    """Run a ``numpy.linalg`` function on the host (the fallback where the provider lacks MAGMA's driver): NumPy
    results for NumPy input, DeviceArrays on ``a``'s device otherwise; the result type is NumPy's."""
    res = fn(a if on_host else a.get(), *args)
    if on_host:
        return res
    up = [asarray(np.ascontiguousarray(r), device=a.device) for r in (res if isinstance(res, tuple) else (res,))]
    return type(res)(*up) if isinstance(res, tuple) else up[0]


def _uplo(UPLO) -> str:
    up = UPLO.upper() if isinstance(UPLO, str) else UPLO
    if up not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U' (either case), got {UPLO!r}")
    return up


@on_arrays_device
@_keeps_subclass("a", 0)
def eigh(a, UPLO: str = "L", *, method: str = "auto"):
    """``EighResult(eigenvalues, eigenvectors)`` of Hermitian matrices like ``numpy.linalg.eigh`` (eigenvalues
    ascending, eigenvectors in columns): magma_?syevd/heevd_gpu natively; ``method="hybrid"`` (and "auto" without
    syevd): :func:`pymagma.hybrid.syevd` (tridiagonal reduction with device symv/syr2k, tridiagonal eigensolver on
    the host, back-transformation on the device)."""
    UPLO = _uplo(UPLO)
    a, on_host = _as_operand(a, "a")
    _square(a)
    dev = _to_device(a, on_host)
    if not _native(method, a.dtype, "magma_?{sy}evd_gpu"):
        return _eigh_hybrid(dev, on_host, UPLO)
    if _empty_stack(dev.shape[:-2]):
        return EighResult(*_empties(on_host, dev.device, (dev.shape[:-1], _real(dev.dtype)), (dev.shape, dev.dtype)))

    def one(mat):
        n = mat.shape[0]
        w = colmajor_copy(mat)
        p = blas.precision(w)
        real = np.dtype(_magma.PRECISIONS[p][1])
        vals = np.zeros(max(n, 1), real)
        if n == 0:
            return vals[:0], w
        name = f"magma_{p}{'he' if p in 'cz' else 'sy'}evd_gpu"
        fn = getattr(magma(), name)
        uplo = _magma.MagmaLower if UPLO == "L" else _magma.MagmaUpper
        wa = np.zeros((n, n), w.dtype)
        info = _magma.MAGMA_INT(0)
        qwork, qrwork, qiwork = np.zeros(1, w.dtype), np.zeros(1, real), _host_int_array(1)

        def call(work, lwork, rwork, lrwork, iwork, liwork):
            args = [_magma.MagmaVec, uplo, n, w.ptr, _ld(w), vals.ctypes.data, wa.ctypes.data, n,
                    work.ctypes.data, lwork]
            if p in "cz":
                args += [rwork.ctypes.data, lrwork]
            fn(*args, iwork, liwork, ctypes.byref(info))

        _sync(w)
        call(qwork, -1, qrwork, -1, qiwork, -1)  # workspace query
        check_info(int(info.value), name)
        lwork, lrwork, liwork = int(qwork[0].real), int(qrwork[0]), int(qiwork[0])
        work, rwork = np.zeros(max(lwork, 1), w.dtype), np.zeros(max(lrwork, 1), real)
        call(work, lwork, rwork, lrwork, _host_int_array(liwork), liwork)
        check_info(int(info.value), name, "the eigenvalue algorithm failed to converge ({info})")
        return vals[:n], w

    batch, results = _stack_map(one, dev)
    vals = np.stack([v for v, _ in results]).reshape(*batch, a.shape[-1])
    vecs = _stack_device(batch, [v for _, v in results]) if batch else results[0][1]
    return EighResult(vals, vecs.get()) if on_host else EighResult(asarray(vals, device=dev.device), vecs)


def _eigh_hybrid(dev: DeviceArray, on_host: bool, UPLO: str):
    """eigh through :func:`pymagma.hybrid.syevd`, one matrix at a time.  ``UPLO='U'`` reduces the lower triangle of
    the transpose, which defines ``conj(A)``: same eigenvalues, conjugate eigenvectors (undone in the reflectors)."""
    if _empty_stack(dev.shape[:-2]):
        return EighResult(*_empties(on_host, dev.device, (dev.shape[:-1], _real(dev.dtype)), (dev.shape, dev.dtype)))
    flip = UPLO == "U"
    cplx = np.iscomplexobj(np.zeros(0, dev.dtype))
    batch, results = _stack_map(lambda m: hybrid.syevd(colmajor_copy(m.T if flip else m), conj=flip and cplx), dev)
    vals = np.stack([v for v, _ in results]).reshape(dev.shape[:-1])
    vecs = _stack_device(batch, [v for _, v in results]) if batch else results[0][1]
    return EighResult(vals, vecs.get()) if on_host else EighResult(asarray(vals, device=dev.device), vecs)


@on_arrays_device
@_keeps_subclass("a", 0)
def eig(a, *, method: str = "auto"):
    """``EigResult(eigenvalues, eigenvectors)`` of general square matrices like ``numpy.linalg.eig`` (magma_?geev,
    CPU interface; ``method="hybrid"`` and "auto" without geev: ``numpy.linalg.eig`` on the host).  Real input gives
    complex results when any eigenvalue is complex, as in NumPy."""
    operand, operand_host = _as_operand(a, "a")
    _square(operand)
    if not _native(method, operand.dtype, "magma_?geev"):
        return _host_lapack(np.linalg.eig, operand, operand_host)
    host, on_host, device = _host_matrices(a, "a")
    if _empty_stack(host.shape[:-2]):  # NumPy: real results for real input when no eigenvalue is complex
        return EigResult(*_empties(on_host, device, (host.shape[:-1], host.dtype), (host.shape, host.dtype)))

    def one(mat):
        n = mat.shape[0]
        p = _magma.precision_of(mat.dtype)
        real = np.dtype(_magma.PRECISIONS[p][1])
        A = np.asfortranarray(mat.copy())
        VR = np.zeros((max(n, 1), max(n, 1)), mat.dtype, order="F")
        VL = np.zeros((1, 1), mat.dtype)
        info = _magma.MAGMA_INT(0)
        name = f"magma_{p}geev"
        fn = getattr(magma(), name)
        if p in "cz":
            w = np.zeros(max(n, 1), mat.dtype)
            rwork = np.zeros(max(2 * n, 1), real)
            head = [w.ctypes.data]
        else:
            wr, wi = np.zeros(max(n, 1), real), np.zeros(max(n, 1), real)
            head = [wr.ctypes.data, wi.ctypes.data]

        def call(work, lwork):
            args = [_magma.MagmaNoVec, _magma.MagmaVec, n, A.ctypes.data, max(n, 1), *head, VL.ctypes.data, 1,
                    VR.ctypes.data, max(n, 1), work.ctypes.data, lwork]
            if p in "cz":
                args.append(rwork.ctypes.data)
            fn(*args, ctypes.byref(info))

        query = np.zeros(1, mat.dtype)
        call(query, -1)
        check_info(int(info.value), name)
        lwork = max(int(query[0].real), 1)
        call(np.zeros(lwork, mat.dtype), lwork)
        check_info(int(info.value), name, "the QR algorithm failed to compute all eigenvalues ({info})")
        if p in "cz":
            return w[:n], np.ascontiguousarray(VR[:n, :n])
        return real_eigvecs(wr[:n], wi[:n], VR[:n, :n])

    batch = host.shape[:-2]
    results = [one(host[idx]) for idx in np.ndindex(*batch)] if batch else [one(host)]
    w = np.stack([r[0] for r in results]).reshape(*batch, host.shape[-1])
    v = np.stack([r[1] for r in results]).reshape(host.shape[:-2] + (host.shape[-1],) * 2)
    if np.iscomplexobj(w) and not np.iscomplexobj(host) and not np.any(w.imag):
        w, v = w.real, v.real
    return EigResult(w, v) if on_host else EigResult(asarray(w, device=device), asarray(v, device=device))


def real_eigvecs(wr: np.ndarray, wi: np.ndarray, vr: np.ndarray):
    """LAPACK's real geev output (pairs of columns for complex-conjugate eigenvalues) as NumPy returns it."""
    w = wr + 1j * wi
    if not np.any(wi):
        return wr.copy(), vr.copy()
    v = vr.astype(np.result_type(vr.dtype, np.complex64))
    j = 0
    while j < len(wr):
        if wi[j] != 0 and j + 1 < len(wr):
            v[:, j] = vr[:, j] + 1j * vr[:, j + 1]
            v[:, j + 1] = vr[:, j] - 1j * vr[:, j + 1]
            j += 2
        else:
            j += 1
    return w, v


@on_arrays_device
def eigvalsh(a, UPLO: str = "L", *, method: str = "auto"):
    """Eigenvalues of Hermitian matrices, ascending, like ``numpy.linalg.eigvalsh`` (through :func:`eigh`)."""
    return eigh(a, UPLO, method=method).eigenvalues


@on_arrays_device
def eigvals(a, *, method: str = "auto"):
    """Eigenvalues of general square matrices like ``numpy.linalg.eigvals`` (through :func:`eig`)."""
    return eig(a, method=method).eigenvalues
