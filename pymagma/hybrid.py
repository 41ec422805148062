"""Hybrid CPU+GPU LAPACK drivers built only from what a partial MAGMA exports (PyTorch's bundled 2.6.1 has the BLAS,
``laswp``, ``transpose`` and ``getrf`` but no ``potrf``/``potrs``/``geqrf``/``orgqr``/``gels``).

As in MAGMA's own drivers, each small diagonal block or panel is factored on the host by NumPy's LAPACK and the
large trailing updates run on the device with BLAS-3: ``trsm`` + ``syrk``/``herk`` for Cholesky, ``gemm`` + ``trmm``
applying compact-WY block reflectors ``I - V T V^H`` for QR.  There is no look-ahead (the panel and the trailing
update of one step do not overlap), so these drivers are correct everywhere but slower than MAGMA's for large n.

Every routine works in place on a column-major 2-D :class:`~pymagma.array.DeviceArray` view (``x.T`` C-ordered,
as ``linalg.colmajor_copy`` makes them).  ``nb`` is the block size: by default the provider's ``magma_get_?*_nb``
answer when it exports one, else :data:`DEFAULT_NB`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _magma
from .array import DeviceArray, empty

DEFAULT_NB = 64
N, T, C = _magma.MagmaNoTrans, _magma.MagmaTrans, _magma.MagmaConjTrans
LEFT, RIGHT, LOWER, UPPER = _magma.MagmaLeft, _magma.MagmaRight, _magma.MagmaLower, _magma.MagmaUpper
NONUNIT = _magma.MagmaNonUnit

__all__ = ["DEFAULT_NB", "block_size", "potrf", "potrs", "geqrf", "orgqr", "ormqr_h", "QRFactors"]


# ----------------------------------------------------------------------------------------------------- device calls
def _lib():
    return _magma.initialized()


def _p(x: DeviceArray) -> str:
    return _magma.precision_of(x.dtype)


def _cm(x: DeviceArray) -> tuple[int, int]:
    """(pointer, leading dimension) of a column-major 2-D view."""
    rows, cols = x.shape
    if rows > 1 and x.strides[0] != x.itemsize:
        raise ValueError(f"hybrid drivers need column-major views, got strides {x.strides} for shape {x.shape}")
    ld = x.strides[1] // x.itemsize if cols > 1 else rows
    return x.ptr, max(ld, rows, 1)


def _scalar(value, p: str, real: bool = False):
    ctype = _magma.PRECISIONS[p][1 if real else 0]
    if hasattr(ctype, "_fields_"):
        return ctype(complex(value).real, complex(value).imag)
    return ctype(float(np.real(value)))


def gemm(ta: int, tb: int, alpha, a: DeviceArray, b: DeviceArray, beta, c: DeviceArray) -> None:
    """``c = alpha op(a) op(b) + beta c`` on column-major views."""
    m, n = c.shape
    k = a.shape[1] if ta == N else a.shape[0]
    if m == 0 or n == 0:
        return
    p = _p(c)
    (pa, la), (pb, lb), (pc, lc) = _cm(a), _cm(b), _cm(c)
    getattr(_lib(), f"magma_{p}gemm")(ta, tb, m, n, k, _scalar(alpha, p), pa, la, pb, lb, _scalar(beta, p), pc, lc,
                                      c.queue.handle)


def trsm(side: int, uplo: int, trans: int, alpha, a: DeviceArray, b: DeviceArray, diag: int = NONUNIT) -> None:
    """Solve ``op(a) x = alpha b`` (LEFT) or ``x op(a) = alpha b`` (RIGHT) in place of ``b``."""
    m, n = b.shape
    if m == 0 or n == 0:
        return
    p = _p(b)
    (pa, la), (pb, lb) = _cm(a), _cm(b)
    getattr(_lib(), f"magma_{p}trsm")(side, uplo, trans, diag, m, n, _scalar(alpha, p), pa, la, pb, lb, b.queue.handle)


def trmm(side: int, uplo: int, trans: int, alpha, a: DeviceArray, b: DeviceArray, diag: int = NONUNIT) -> None:
    """``b = alpha op(a) b`` (LEFT) or ``alpha b op(a)`` (RIGHT) for triangular ``a``."""
    m, n = b.shape
    if m == 0 or n == 0:
        return
    p = _p(b)
    (pa, la), (pb, lb) = _cm(a), _cm(b)
    getattr(_lib(), f"magma_{p}trmm")(side, uplo, trans, diag, m, n, _scalar(alpha, p), pa, la, pb, lb, b.queue.handle)


def herk_lower(alpha: float, a: DeviceArray, beta: float, c: DeviceArray) -> None:
    """Lower triangle of ``c = alpha a a^H + beta c`` (``syrk`` for real, ``herk`` for complex dtypes)."""
    n, k = a.shape
    if n == 0:
        return
    p = _p(c)
    cplx = p in "cz"
    (pa, la), (pc, lc) = _cm(a), _cm(c)
    getattr(_lib(), f"magma_{p}{'herk' if cplx else 'syrk'}")(
        LOWER, N, n, k, _scalar(alpha, p, cplx), pa, la, _scalar(beta, p, cplx), pc, lc, c.queue.handle)


def colmajor_empty(rows: int, cols: int, dtype, device: int) -> DeviceArray:
    """A new column-major ``rows x cols`` device matrix (a transposed view of a C-ordered one)."""
    return empty((cols, rows), dtype, device=device).T


def to_device_colmajor(host: np.ndarray, device: int) -> DeviceArray:
    out = colmajor_empty(*host.shape, host.dtype, device)
    if host.size:
        out.set(host)
    return out


def block_size(kind: str, dtype, m: int, n: int) -> int:
    """MAGMA's block size for ``kind`` ("potrf" or "geqrf") from the provider's ``magma_get_?{kind}_nb``, or
    :data:`DEFAULT_NB` where it exports none."""
    p = _magma.precision_of(dtype)
    name = f"magma_get_{p}{kind}_nb"
    lib = _lib()
    if name in _magma.SIGNATURES and lib.has(name):
        args = (m, n) if kind == "geqrf" else (n,)
        return max(int(getattr(lib, name)(*args)), 1)
    return DEFAULT_NB


# ----------------------------------------------------------------------------------------------------- Cholesky
def host_potrf(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Lower Cholesky factor of a small host block and LAPACK's ``info`` (the order of the first leading minor that
    is not positive; found by bisection since leading-minor definiteness is monotone)."""
    try:
        return np.linalg.cholesky(a), 0
    except np.linalg.LinAlgError:
        pass
    good, bad = 0, a.shape[0]
    while bad - good > 1:
        mid = (good + bad) // 2
        try:
            np.linalg.cholesky(a[:mid, :mid])
            good = mid
        except np.linalg.LinAlgError:
            bad = mid
    return a, bad


def potrf(w: DeviceArray, nb: int | None = None) -> int:
    """Blocked right-looking lower Cholesky of column-major ``w`` in place; returns ``info`` (0, or the order of the
    leading minor that is not positive).  The strict upper triangle is left as it was."""
    n = w.shape[0]
    nb = nb or block_size("potrf", w.dtype, n, n)
    for j in range(0, n, nb):
        jb = min(nb, n - j)
        diag = w[j:j + jb, j:j + jb]
        host = diag.get()
        factor, info = host_potrf(host)
        if info:
            return j + info
        diag.set(np.tril(factor) + np.triu(host, 1))
        if j + jb < n:
            panel, trailing = w[j + jb:, j:j + jb], w[j + jb:, j + jb:]
            trsm(RIGHT, LOWER, C, 1.0, diag, panel)  # panel <- panel L_jj^{-H}
            herk_lower(-1.0, panel, 1.0, trailing)
    return 0


def potrs(factor: DeviceArray, b: DeviceArray) -> None:
    """Solve ``L L^H x = b`` in place of the column-major ``b`` from the lower factor ``L`` (two ``trsm``)."""
    trsm(LEFT, LOWER, N, 1.0, factor, b)
    trsm(LEFT, LOWER, C, 1.0, factor, b)


def zero_upper(w: DeviceArray) -> None:
    """Zero the strict upper triangle of a column-major square ``w`` (one upload per block column)."""
    n = w.shape[0]
    for j in range(1, n):
        w[:j, j:j + 1].set(np.zeros((j, 1), w.dtype))


# ----------------------------------------------------------------------------------------------------- QR
def larft(v: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The upper triangular ``T`` of the compact-WY form ``H_1 ... H_k = I - V T V^H`` (forward, columnwise)."""
    k = v.shape[1]
    t = np.zeros((k, k), v.dtype)
    for i in range(k):
        t[i, i] = tau[i]
        if i:
            t[:i, i] = -tau[i] * (t[:i, :i] @ (np.conj(v[:, :i].T) @ v[:, i]))
    return t


@dataclass
class QRFactors:
    """The output of :func:`geqrf`: ``w`` holds R above and LAPACK's reflectors below the diagonal; ``tau`` the
    scalars; ``blocks`` the device copies ``(row, V, T)`` of each block reflector for ``orgqr``/``ormqr_h``."""

    w: DeviceArray
    tau: np.ndarray
    blocks: list


def _apply(v: DeviceArray, t: DeviceArray, c: DeviceArray, conj: bool) -> None:
    """``c <- (I - V T V^H) c`` (or with ``T^H`` when ``conj``: the adjoint of the block reflector)."""
    if c.shape[1] == 0:
        return
    work = colmajor_empty(v.shape[1], c.shape[1], c.dtype, c.device)
    gemm(C, N, 1.0, v, c, 0.0, work)
    trmm(LEFT, UPPER, C if conj else N, 1.0, t, work)
    gemm(N, N, -1.0, v, work, 1.0, c)


def geqrf(w: DeviceArray, nb: int | None = None) -> QRFactors:
    """Blocked Householder QR of column-major ``w`` in place (LAPACK's layout): each panel by the host's
    ``geqrf``, the trailing matrix updated on the device with ``gemm`` + ``trmm``."""
    m, n = w.shape
    k = min(m, n)
    nb = nb or block_size("geqrf", w.dtype, m, n)
    taus, blocks = [], []
    for j in range(0, k, nb):
        jb = min(nb, k - j)
        panel = w[j:, j:j + jb]
        h, tau = np.linalg.qr(panel.get(), mode="raw")
        ref = h.T.astype(w.dtype)
        tau = tau.astype(w.dtype)
        panel.set(ref)
        taus.append(tau)
        v = np.tril(ref, -1)
        v[np.arange(jb), np.arange(jb)] = 1
        vd, td = to_device_colmajor(v, w.device), to_device_colmajor(larft(v, tau), w.device)
        blocks.append((j, vd, td))
        _apply(vd, td, w[j:, j + jb:], conj=True)
    return QRFactors(w, np.concatenate(taus) if taus else np.zeros(0, w.dtype), blocks)


def orgqr(f: QRFactors, cols: int) -> DeviceArray:
    """The first ``cols`` columns of ``Q = H_1 ... H_k`` (``cols`` = min(m, n) or m), built on the device."""
    m = f.w.shape[0]
    q = to_device_colmajor(np.eye(m, cols, dtype=f.w.dtype), f.w.device)
    for j, vd, td in reversed(f.blocks):
        _apply(vd, td, q[j:, j:], conj=False)
    return q


def ormqr_h(f: QRFactors, b: DeviceArray) -> None:
    """``b <- Q^H b`` in place (column-major ``b`` with ``m`` rows)."""
    for j, vd, td in f.blocks:
        _apply(vd, td, b[j:, :], conj=True)
