"""Hybrid CPU+GPU LAPACK drivers built only from what a partial MAGMA exports (PyTorch's bundled 2.6.1 has the BLAS,
``laswp``, ``transpose`` and ``getrf`` but no ``potrf``/``potrs``/``geqrf``/``orgqr``/``gels``/``syevd``/``gesdd``).

As in MAGMA's own drivers, each small diagonal block or panel is factored on the host by NumPy's LAPACK and the
large trailing updates run on the device with BLAS-3: ``trsm`` + ``syrk``/``herk`` for Cholesky, ``gemm`` + ``trmm``
applying compact-WY block reflectors ``I - V T V^H`` for QR.

Look-ahead (:func:`potrf`, :func:`geqrf`, as MAGMA's potrf_gpu/geqrf_gpu): after panel ``j`` the device updates
the next panel first, a second queue (:func:`pymagma.queue.transfer_queue`, ordered by events) copies it into
pinned host memory, and the rest of the trailing update runs on the main queue while the host factors that next
panel.  Panels go back to the device with asynchronous copies from pinned memory.  Correctness does not depend on
timing: every dependency is an event or stream order (the simulator runs queued work as late as those allow).
``lookahead=False`` runs the same steps on one queue.

eigh and svd (:func:`syevd`, :func:`gesvd`) reduce on the device, solve on the host and back-transform on the
device.  The reductions are blocked as LAPACK's: :func:`sytrd` (?latrd panels: per column a host reflector and a
device ``symv``, per panel a device ``syr2k``) and :func:`gebrd` (?labrd panels: per column two host reflectors
and two device ``gemv``, per panel one rank-2nb ``gemm``); per column the host computes the panel's share of each
product while the device runs it, but there is no look-ahead across panels.  The host solvers are LAPACK's divide
and conquer when SciPy is installed (:func:`stedc`: ``?stevd``; :func:`bdsdc`: ``?bdsdc`` through
``scipy.linalg.cython_lapack``), else a dense NumPy eigh/svd of the n x n tridiagonal/bidiagonal matrix (O(n^3),
about 6x slower at n = 4096); :func:`host_solvers` says which.  The back-transformations apply block reflectors
(``gemm`` + ``trmm``).

:func:`host_seconds` / :func:`host_time` report the seconds spent in host-side work (panels, reflectors, the
tridiagonal and bidiagonal solvers) across all drivers: compared with a driver's wall time it shows how host-bound
it is.

Every routine works in place on a column-major 2-D :class:`~pymagma.array.DeviceArray` view (``x.T`` C-ordered,
as ``linalg.colmajor_copy`` makes them).  ``nb`` is the block size: by default the provider's ``magma_get_?*_nb``
answer when it exports one, else :data:`DEFAULT_NB` (:data:`SYTRD_NB`, :data:`GEBRD_NB` for the reductions).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from dataclasses import dataclass

import numpy as np

from . import _magma, memory, runtime
from . import queue as queues_
from .array import DeviceArray, empty, on_arrays_device

DEFAULT_NB = 64
N, T, C = _magma.MagmaNoTrans, _magma.MagmaTrans, _magma.MagmaConjTrans
LEFT, RIGHT, LOWER, UPPER = _magma.MagmaLeft, _magma.MagmaRight, _magma.MagmaLower, _magma.MagmaUpper
NONUNIT = _magma.MagmaNonUnit

__all__ = ["DEFAULT_NB", "SYTRD_NB", "GEBRD_NB", "block_size", "potrf", "potrs", "geqrf", "orgqr", "ormqr_h",
           "QRFactors", "sytrd", "stedc", "syevd", "gebrd", "bdsdc", "gesvd", "host_solvers", "host_seconds",
           "reset_host_seconds", "host_time", "HostTime"]


# ----------------------------------------------------------------------------------------------------- host time
_host_total = 0.0  # seconds of host-side work since import (never reset: host_time() measures differences)
_host_reset_at = 0.0
_host_lock = threading.Lock()


@contextlib.contextmanager
def _on_host():
    """Count the block as host-side work of a driver (its panel factorizations, reflectors, small solvers)."""
    global _host_total
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        with _host_lock:
            _host_total += dt


def host_seconds() -> float:
    """Seconds the hybrid drivers have spent in host-side work since import or the last :func:`reset_host_seconds`,
    over all drivers and threads: NumPy's LAPACK on panels and diagonal blocks, building reflectors and their
    triangular factors, the tridiagonal and bidiagonal solvers.  Transfers and waits for the device are not
    counted; with look-ahead most of this time overlaps device work, without it all of it adds to the wall time."""
    return _host_total - _host_reset_at


def reset_host_seconds() -> None:
    """Start :func:`host_seconds` again from zero."""
    global _host_reset_at
    with _host_lock:
        _host_reset_at = _host_total


class HostTime:
    """What :func:`host_time` yields: ``seconds`` is the host-side work counted since the block began (frozen when
    it ends); resets of :func:`host_seconds` do not affect it."""

    def __init__(self):
        self._start, self._end = _host_total, None

    @property
    def seconds(self) -> float:
        return (_host_total if self._end is None else self._end) - self._start


@contextlib.contextmanager
def host_time():
    """``with hybrid.host_time() as t: ...`` then ``t.seconds``: the hybrid drivers' host-side seconds (as
    :func:`host_seconds` counts them) spent inside the block."""
    t = HostTime()
    try:
        yield t
    finally:
        t._end = _host_total


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


def gemm(ta: int, tb: int, alpha, a: DeviceArray, b: DeviceArray, beta, c: DeviceArray, queue=None) -> None:
    """``c = alpha op(a) op(b) + beta c`` on column-major views (on ``queue``, by default ``c``'s default queue;
    likewise for the other device calls here)."""
    m, n = c.shape
    k = a.shape[1] if ta == N else a.shape[0]
    if m == 0 or n == 0:
        return
    p = _p(c)
    (pa, la), (pb, lb), (pc, lc) = _cm(a), _cm(b), _cm(c)
    getattr(_lib(), f"magma_{p}gemm")(ta, tb, m, n, k, _scalar(alpha, p), pa, la, pb, lb, _scalar(beta, p), pc, lc,
                                      (queue or c.queue).handle)


def _triangular(routine: str, side: int, uplo: int, trans: int, alpha, a, b, diag: int, queue) -> None:
    m, n = b.shape
    if m == 0 or n == 0:
        return
    p = _p(b)
    (pa, la), (pb, lb) = _cm(a), _cm(b)
    getattr(_lib(), f"magma_{p}{routine}")(side, uplo, trans, diag, m, n, _scalar(alpha, p), pa, la, pb, lb,
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
    (pa, la), (pc, lc) = _cm(a), _cm(c)
    getattr(_lib(), f"magma_{p}{'herk' if cplx else 'syrk'}")(
        LOWER, N, n, k, _scalar(alpha, p, cplx), pa, la, _scalar(beta, p, cplx), pc, lc, (queue or c.queue).handle)


def hemv_lower(alpha, a: DeviceArray, x: DeviceArray, y: DeviceArray) -> None:
    """``y = alpha a x`` for Hermitian ``a`` given by its lower triangle (``symv``/``hemv``); x, y are n x 1 views."""
    n = a.shape[0]
    p = _p(a)
    (pa, la), (px, _), (py, _) = _cm(a), _cm(x), _cm(y)
    getattr(_lib(), f"magma_{p}{'hemv' if p in 'cz' else 'symv'}")(
        LOWER, n, _scalar(alpha, p), pa, la, px, 1, _scalar(0.0, p), py, 1, a.queue.handle)


def gemv(trans: int, alpha, a: DeviceArray, x: DeviceArray, beta, y: DeviceArray, queue=None) -> None:
    """``y = alpha op(a) x + beta y`` (``gemv``); x, y are column vectors (k x 1 column-major views)."""
    m, n = a.shape
    if m == 0 or n == 0:
        return
    p = _p(a)
    (pa, la), (px, _), (py, _) = _cm(a), _cm(x), _cm(y)
    getattr(_lib(), f"magma_{p}gemv")(trans, m, n, _scalar(alpha, p), pa, la, px, 1, _scalar(beta, p), py, 1,
                                      (queue or a.queue).handle)


def her2k_lower(alpha, a: DeviceArray, b: DeviceArray, c: DeviceArray) -> None:
    """Lower triangle of ``c += alpha a b^H + conj(alpha) b a^H`` (``syr2k``/``her2k``)."""
    n, k = a.shape
    p = _p(c)
    cplx = p in "cz"
    (pa, la), (pb, lb), (pc, lc) = _cm(a), _cm(b), _cm(c)
    getattr(_lib(), f"magma_{p}{'her2k' if cplx else 'syr2k'}")(
        LOWER, N, n, k, _scalar(alpha, p), pa, la, pb, lb, _scalar(1.0, p, cplx), pc, lc, c.queue.handle)


def colmajor_empty(rows: int, cols: int, dtype, device: int) -> DeviceArray:
    """A new column-major ``rows x cols`` device matrix (a transposed view of a C-ordered one)."""
    return empty((cols, rows), dtype, device=device).T


def to_device_colmajor(host: np.ndarray, device: int) -> DeviceArray:
    out = colmajor_empty(*host.shape, host.dtype, device)
    if host.size:
        out.set(host)
    return out


def block_size(kind: str, dtype, m: int, n: int, default: int = DEFAULT_NB) -> int:
    """MAGMA's block size for ``kind`` ("potrf", "geqrf", "sytrd") from the provider's ``magma_get_?{kind}_nb``,
    or ``default`` where it exports none (or pymagma's tables have no prototype)."""
    p = _magma.precision_of(dtype)
    name = f"magma_get_{p}{kind}_nb"
    lib = _lib()
    if name in _magma.SIGNATURES and lib.has(name):
        args = (m, n) if kind == "geqrf" else (n,)
        return max(int(getattr(lib, name)(*args)), 1)
    return default


# ----------------------------------------------------------------------------------------------------- look-ahead
def _queues(w: DeviceArray, lookahead: bool, queues) -> tuple:
    """(main, side): the queue of the device work and the queue of the panel copies to the host.  With
    look-ahead, ``queues`` or (``w``'s default queue, the device's transfer queue); without, one queue for both."""
    main = queues[0] if queues else w.queue
    if main is not w.queue:  # work still pending on w's queue (e.g. the copy that made w) comes first
        main.wait_event(w.queue.record_event())
    if not lookahead:
        return main, main
    return main, queues[1] if queues else queues_.transfer_queue(w.device)


@contextlib.contextmanager
def _staging(dtype, *sizes: int):
    """Pinned host buffers of ``sizes`` elements of ``dtype`` for the block (from the pool's cache), for column-major
    blocks of up to that many elements."""
    dtype = np.dtype(dtype)
    ends = np.cumsum([0, *(max(n, 1) for n in sizes)])
    with memory.pinned_buffer(int(ends[-1]) * dtype.itemsize) as raw:
        flat = raw.view(dtype)
        yield [flat[a:b] for a, b in zip(ends[:-1], ends[1:])]


def _host_view(stage: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A column-major ``rows x cols`` host matrix at the start of ``stage`` (the transpose of a C-ordered
    ``cols x rows`` array: one column per row, as the 2-D copies move them)."""
    return stage[:rows * cols].reshape(cols, rows).T


def _finish(main, side) -> None:
    """Wait for both queues: the pinned stages go back to the pool, and the caller gets finished results."""
    main.synchronize()
    if side is not main:
        side.synchronize()


def _upload(host: np.ndarray, x: DeviceArray, queue) -> None:
    """Enqueue on ``queue`` the copy of ``host`` (a :func:`_host_view` of pinned memory) into the column-major
    ``x``; ``host`` must not change until ``queue`` has run it."""
    ptr, ld = _cm(x)
    runtime.memcpy_2d_htod(ptr, ld * x.itemsize, host.T, stream=queue.stream)


def _download(x: DeviceArray, queue) -> np.ndarray:
    """A host copy (column-major) of the column-major ``x`` once ``queue``'s work so far is done: one 2-D copy of
    the block alone (``DeviceArray.get`` of a strided view copies its whole span)."""
    host = np.empty(x.shape[::-1], x.dtype)
    if host.size:
        ptr, ld = _cm(x)
        runtime.memcpy_2d_dtoh(host, ptr, ld * x.itemsize, stream=queue.stream)
        queue.synchronize()
    return host.T


def _fetch(x: DeviceArray, stage: np.ndarray, main, side) -> tuple[np.ndarray, object]:
    """Copy the column-major ``x`` into ``stage`` on ``side`` once ``main``'s work so far is done; returns the host
    view and an event that completes with the copy (read the view after synchronizing it)."""
    if side is not main:
        side.wait_event(main.record_event())
    host = _host_view(stage, *x.shape)
    ptr, ld = _cm(x)
    runtime.memcpy_2d_dtoh(host.T, ptr, ld * x.itemsize, stream=side.stream)
    return host, side.record_event()


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


@on_arrays_device
def potrf(w: DeviceArray, nb: int | None = None, *, lookahead: bool = True, queues=None) -> int:
    """Blocked right-looking lower Cholesky of column-major ``w`` in place; returns ``info`` (0, or the order of the
    leading minor that is not positive).  The strict upper triangle is left as it was.

    Each diagonal block is factored on the host, the panel below it solved (``trsm``) and the trailing matrix
    updated (``syrk``/``herk``, ``gemm``) on the device.  With ``lookahead`` (as MAGMA's potrf_gpu) the next
    diagonal block is updated first and copied to the host on a second queue while the rest of the trailing update
    runs, so the host factors it meanwhile.  ``queues``: (main, copies) instead of ``w``'s default queue and the
    device's :func:`~pymagma.queue.transfer_queue`.  Returns once the device work is done."""
    n = w.shape[0]
    if n == 0:
        return 0
    nb = min(nb or block_size("potrf", w.dtype, n, n), n)
    main, side = _queues(w, lookahead, queues)
    with _staging(w.dtype, nb * nb) as (stage,):
        try:
            block, ready = _fetch(w[:nb, :nb], stage, main, side)
            for j in range(0, n, nb):
                jb = min(nb, n - j)
                ready.synchronize()
                with _on_host():
                    factor, info = host_potrf(block)
                    if info:
                        return j + info
                    block[...] = np.tril(factor) + np.triu(block, 1)
                diag = w[j:j + jb, j:j + jb]
                _upload(block, diag, main)
                nxt = j + jb
                if nxt == n:
                    break
                panel = w[nxt:, j:j + jb]
                trsm(RIGHT, LOWER, C, 1.0, diag, panel, queue=main)  # panel <- panel L_jj^{-H}
                nb2 = min(nb, n - nxt)
                if lookahead:  # the next diagonal block first, then the rest while the host factors it
                    herk_lower(-1.0, panel[:nb2], 1.0, w[nxt:nxt + nb2, nxt:nxt + nb2], queue=main)
                    block, ready = _fetch(w[nxt:nxt + nb2, nxt:nxt + nb2], stage, main, side)
                    gemm(N, C, -1.0, panel[nb2:], panel[:nb2], 1.0, w[nxt + nb2:, nxt:nxt + nb2], queue=main)
                    herk_lower(-1.0, panel[nb2:], 1.0, w[nxt + nb2:, nxt + nb2:], queue=main)
                else:
                    herk_lower(-1.0, panel, 1.0, w[nxt:, nxt:], queue=main)
                    block, ready = _fetch(w[nxt:nxt + nb2, nxt:nxt + nb2], stage, main, side)
            return 0
        finally:
            _finish(main, side)


def potrs(factor: DeviceArray, b: DeviceArray) -> None:
    """Solve ``L L^H x = b`` in place of the column-major ``b`` from the lower factor ``L`` (two ``trsm``)."""
    trsm(LEFT, LOWER, N, 1.0, factor, b)
    trsm(LEFT, LOWER, C, 1.0, factor, b)


def zero_upper(w: DeviceArray, nb: int = DEFAULT_NB) -> None:
    """Zero the strict upper triangle of a column-major square ``w`` (for dtypes without ``laset``): per block
    column, zeros above the diagonal block and the diagonal block's lower triangle put back."""
    n = w.shape[0]
    for j in range(0, n, nb):
        jb = min(nb, n - j)
        if j:
            w[:j, j:j + jb].set(np.zeros((j, jb), w.dtype))
        diag = w[j:j + jb, j:j + jb]
        diag.set(np.tril(diag.get()))


# ----------------------------------------------------------------------------------------------------- QR
def larft(v: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The upper triangular ``T`` of the compact-WY form ``H_1 ... H_k = I - V T V^H`` (forward, columnwise): the
    products ``V^H v_i`` of all columns at once (one ``gemm``), then LAPACK's recurrence on k x k blocks."""
    k = v.shape[1]
    g = np.conj(v.T) @ v
    t = np.zeros((k, k), v.dtype)
    for i in range(k):
        t[i, i] = tau[i]
        if i:
            t[:i, i] = -tau[i] * (t[:i, :i] @ g[:i, i])
    return t


@dataclass
class QRFactors:
    """The output of :func:`geqrf`: ``w`` holds R above and LAPACK's reflectors below the diagonal; ``tau`` the
    scalars; ``blocks`` the device copies ``(row, V, T)`` of each block reflector for ``orgqr``/``ormqr_h``."""

    w: DeviceArray
    tau: np.ndarray
    blocks: list


def _apply(v: DeviceArray, t: DeviceArray, c: DeviceArray, conj: bool, work: DeviceArray | None = None,
           queue=None) -> None:
    """``c <- (I - V T V^H) c`` (or with ``T^H`` when ``conj``: the adjoint of the block reflector); ``work``: a
    column-major ``k x cols`` scratch matrix (``k`` reflectors; allocated when None)."""
    if c.shape[1] == 0:
        return
    if work is None:
        work = colmajor_empty(v.shape[1], c.shape[1], c.dtype, c.device)
    gemm(C, N, 1.0, v, c, 0.0, work, queue=queue)
    trmm(LEFT, UPPER, C if conj else N, 1.0, t, work, queue=queue)
    gemm(N, N, -1.0, v, work, 1.0, c, queue=queue)


@on_arrays_device
def geqrf(w: DeviceArray, nb: int | None = None, *, lookahead: bool = True, queues=None) -> QRFactors:
    """Blocked Householder QR of column-major ``w`` in place (LAPACK's layout): each panel by the host's
    ``geqrf``, the trailing matrix updated on the device with ``gemm`` + ``trmm``.

    With ``lookahead`` (as MAGMA's geqrf_gpu) the block reflector is applied to the next panel first, which is
    copied to the host on a second queue while the rest of the trailing matrix is updated, so the host factors it
    meanwhile.  ``queues`` as for :func:`potrf`.  Returns once the device work is done."""
    m, n = w.shape
    k = min(m, n)
    if k == 0:
        return QRFactors(w, np.zeros(0, w.dtype), [])
    nb = min(nb or block_size("geqrf", w.dtype, m, n), k)
    main, side = _queues(w, lookahead, queues)
    v_all = colmajor_empty(m, k, w.dtype, w.device)  # the block reflectors' V, one block column per panel
    t_all = colmajor_empty(nb, k, w.dtype, w.device)  # and their triangular factors T
    work = colmajor_empty(nb, n, w.dtype, w.device)
    taus, blocks = [], []
    with _staging(w.dtype, m * nb, m * nb, nb * nb) as (panel_stage, v_stage, t_stage):
        try:
            panel, ready = _fetch(w[:, :nb], panel_stage, main, side)
            for j in range(0, k, nb):
                jb = min(nb, k - j)
                ready.synchronize()
                with _on_host():
                    h, tau = np.linalg.qr(panel, mode="raw")
                    panel[...] = h.T  # R above, the reflectors below the diagonal
                    tau = tau.astype(w.dtype)
                    v = _host_view(v_stage, m - j, jb)
                    v[...] = np.tril(panel, -1)
                    v[np.arange(jb), np.arange(jb)] = 1
                    t = _host_view(t_stage, jb, jb)
                    t[...] = larft(v, tau)
                taus.append(tau)
                vd, td = v_all[j:, j:j + jb], t_all[:jb, j:j + jb]
                for host, dev in ((panel, w[j:, j:j + jb]), (v, vd), (t, td)):
                    _upload(host, dev, main)
                blocks.append((j, vd, td))
                nxt = j + jb
                nb2 = min(nb, k - nxt)  # the next panel's width; 0: none
                first = nxt + nb2 if lookahead else n  # columns updated before the next panel is copied
                _apply(vd, td, w[j:, nxt:first], True, work[:jb, :first - nxt], main)
                if nb2:
                    panel, ready = _fetch(w[nxt:, nxt:nxt + nb2], panel_stage, main, side)
                _apply(vd, td, w[j:, first:], True, work[:jb, :n - first], main)
        finally:
            _finish(main, side)
    return QRFactors(w, np.concatenate(taus), blocks)


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


def _block_reflectors(v: np.ndarray, tau: np.ndarray, nb: int, offset: int, device: int) -> list:
    """Device ``(row, V, T)`` blocks of ``nb`` reflectors from the unit lower trapezoidal host ``v`` (reflector
    ``i`` in column ``i`` from row ``i``), acting on rows ``offset + i`` onwards."""
    blocks = []
    for j in range(0, v.shape[1], nb):
        jb = min(nb, v.shape[1] - j)
        vj = v[j:, j:j + jb]
        with _on_host():
            tj = larft(vj, tau[j:j + jb])
        blocks.append((offset + j, to_device_colmajor(vj, device), to_device_colmajor(tj, device)))
    return blocks


# ----------------------------------------------------------------------------------------------------- eigen
def larfg(x: np.ndarray) -> tuple[complex, complex, np.ndarray]:
    """LAPACK's elementary reflector for ``x``: ``(beta, tau, v)`` with ``v[0] = 1`` and
    ``(I - tau v v^H)^H x = beta e_1``, ``beta`` real."""
    alpha, rest = x[0], x[1:]
    xnorm = float(np.linalg.norm(rest))
    v = np.zeros_like(x)
    v[0] = 1
    if xnorm == 0 and np.imag(alpha) == 0:
        return np.real(alpha), 0.0, v
    beta = -np.copysign(float(np.linalg.norm([np.real(alpha), np.imag(alpha), xnorm])), np.real(alpha))
    if np.iscomplexobj(x):
        tau = (beta - np.real(alpha)) / beta - 1j * np.imag(alpha) / beta
    else:
        tau = (beta - alpha) / beta
    v[1:] = rest / (alpha - beta)
    return beta, tau, v


#: columns per panel of :func:`sytrd` (MAGMA's ``magma_get_?sytrd_nb`` answers 32)
SYTRD_NB = 32


def sytrd(w: DeviceArray, nb: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reduce the Hermitian column-major ``w`` (lower triangle referenced, destroyed) to real tridiagonal form
    ``Q^H A Q = T``, blocked as LAPACK's ?sytrd/?hetrd with ?latrd panels of ``nb`` columns (default
    :data:`SYTRD_NB`): per panel the host fetches its columns once; per column it corrects the column and builds
    the reflector, and the device multiplies the trailing matrix, as it was when the panel began, by it
    (``symv``/``hemv``, one round trip) while the host computes the panel's share of that product; per panel one
    rank-2nb update ``A -= V W^H + W V^H`` on the device (``syr2k``/``her2k``).  Returns ``(d, e, v, tau)``: T's
    diagonal and subdiagonal, and the reflectors (``v`` unit lower trapezoidal, ``(n-1) x (n-1)``) with
    ``Q = H_1 ... H_{n-1}`` acting on rows 1..."""
    n = w.shape[0]
    dtype, real = w.dtype, np.finfo(w.dtype).dtype
    d, e = np.zeros(n, real), np.zeros(max(n - 1, 0), real)
    v_all = np.zeros((max(n - 1, 0), max(n - 1, 0)), dtype)
    taus = np.zeros(max(n - 1, 0), dtype)
    nb = nb or block_size("sytrd", dtype, n, n, SYTRD_NB)
    cj = np.conj if np.iscomplexobj(v_all) else (lambda x: x)
    q = w.queue
    dv, dy = colmajor_empty(n, 1, dtype, w.device), colmajor_empty(n, 1, dtype, w.device)  # hemv operands
    with _staging(dtype, n) as (stage,):
        try:
            for i in range(0, n - 1, nb):
                jb, m = min(nb, n - 1 - i), n - i  # the panel's columns; the order of the trailing matrix A
                panel = _download(w[i:, i:i + jb], q)  # A's panel (lower triangle), unchanged by the panel's steps
                # [V W] and [W V] with columns interleaved (v_0, w_0, v_1, ...; w_0, v_0, w_1, ...): the first 2c
                # columns hold the panel's first c steps, and A - V W^H - W V^H = A - VW WV^H
                vw, wv = np.zeros((m, 2 * jb), dtype, order="F"), np.zeros((m, 2 * jb), dtype, order="F")
                for c in range(jb):
                    k = 2 * c
                    with _on_host():  # column c of A - VW WV^H from its diagonal
                        col = panel[c:, c] - vw[c:, :k] @ cj(wv[c, :k])
                        beta, tau, v = larfg(col[1:])
                    d[i + c], e[i + c], taus[i + c], v_all[i + c:, i + c] = np.real(col[0]), np.real(beta), tau, v
                    vw[c + 1:, k], wv[c + 1:, k + 1] = v, v
                    if tau == 0:
                        continue
                    size = m - c - 1
                    _upload(v[:, None], dv[:size], q)
                    hemv_lower(1.0, w[i + c + 1:, i + c + 1:], dv[:size], dy[:size])  # A v on the device
                    runtime.memcpy_2d_dtoh(stage[None, :size], dy.ptr, size * dy.itemsize, stream=q.stream)
                    with _on_host():  # meanwhile the panel's share: (V W^H + W V^H) v = VW (WV^H v)
                        share = vw[c + 1:, :k] @ (cj(wv[c + 1:, :k].T) @ v)
                    q.synchronize()
                    with _on_host():  # w = tau (A - V W^H - W V^H) v, then w -= tau/2 (w^H v) v
                        y = tau * (stage[:size] - share)
                        y = y - 0.5 * tau * np.vdot(y, v) * v
                    vw[c + 1:, k + 1], wv[c + 1:, k] = y, y
                if m > jb:
                    her2k_lower(-1.0, to_device_colmajor(vw[jb:, 0::2], w.device),
                                to_device_colmajor(vw[jb:, 1::2], w.device), w[i + jb:, i + jb:])
            if n:
                d[n - 1] = np.real(_download(w[n - 1:, n - 1:], q)[0, 0])
        finally:
            q.synchronize()
    return d, e, v_all, taus


# ----------------------------------------------------------------------------------------------------- host solvers
def _scipy_lapack():
    """SciPy's LAPACK wrappers (``scipy.linalg.lapack``), or None without SciPy."""
    try:
        from scipy.linalg import lapack
    except ImportError:
        return None
    return lapack


#: the arguments of cython_lapack's ?bdsdc as its capsule names them: two chars, n, then pointers (int is 32-bit)
_BDSDC_ARGS = ("char *", "char *", "int *", "R *", "R *", "R *", "int *", "R *", "int *", "R *", "int *", "R *",
               "int *", "int *")


def _cython_lapack(name: str, args: tuple[str, ...]):
    """The LAPACK routine ``name`` from SciPy's ``scipy.linalg.cython_lapack`` (its exported function pointers: every
    LAPACK routine, also those ``scipy.linalg.lapack`` does not wrap, such as ?bdsdc) as a ctypes function, or None
    without SciPy or when the capsule's signature is not ``args`` (``R`` stands for the real type)."""
    try:
        from scipy.linalg import cython_lapack
        capsule = cython_lapack.__pyx_capi__[name]
    except (ImportError, AttributeError, KeyError):
        return None
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    signature = get_name(capsule)
    c_real = {"s": "float", "d": "double"}
    got = re.sub(r"\b\w*cython_lapack_([sd])\b", lambda t: c_real[t[1]],
                 (signature or b"").decode())  # Cython names the typedefs of cython_lapack.pxd after the module
    if got != f"void ({', '.join(a.replace('R *', c_real[name[0]] + ' *') for a in args)})":
        return None
    return ctypes.CFUNCTYPE(None, *(ctypes.c_void_p,) * len(args))(get_pointer(capsule, signature))


def host_solvers() -> dict[str, str]:
    """Which host solvers :func:`stedc` (tridiagonal eigenproblem) and :func:`bdsdc` (bidiagonal SVD) use here."""
    lapack = _scipy_lapack()
    return {
        "tridiagonal": "SciPy ?stevd (LAPACK divide and conquer, ?stedc)" if lapack is not None and
                       hasattr(lapack, "dstevd") else "numpy.linalg.eigh of the dense matrix (O(n^3))",
        "bidiagonal": "SciPy cython_lapack ?bdsdc (LAPACK divide and conquer)" if _cython_lapack("dbdsdc", _BDSDC_ARGS)
                      else "numpy.linalg.svd of the dense matrix (O(n^3))",
    }


def stedc(d: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the real symmetric tridiagonal (d, e) on the host.

    With SciPy: LAPACK's divide and conquer, ``scipy.linalg.lapack.?stevd`` (``?stedc`` after scaling; SciPy's
    Python wrappers do not export ``?stedc`` itself), O(n^2) work when deflation is strong and BLAS-3 merges
    otherwise.  Without SciPy, or where it reports a failure: ``numpy.linalg.eigh`` of the dense matrix (LAPACK
    ``?syevd``: a dense tridiagonal reduction first, O(n^3))."""
    n = len(d)
    if n == 0:
        return np.zeros(0, d.dtype), np.zeros((0, 0), d.dtype)
    lapack = _scipy_lapack()
    if n > 1 and lapack is not None and hasattr(lapack, "dstevd"):
        routine = lapack.sstevd if d.dtype == np.float32 else lapack.dstevd
        vals, vecs, info = routine(d, e, compute_v=1)
        if info == 0:
            return vals, vecs
    return np.linalg.eigh(np.diag(d) + np.diag(e, -1) + np.diag(e, 1))


def bdsdc(d: np.ndarray, e: np.ndarray, compute_uv: bool = True):
    """SVD of the real upper bidiagonal B (diagonal ``d``, superdiagonal ``e``) on the host: ``(U, s, Vh)`` with
    ``B = U diag(s) Vh`` and ``s`` descending, or ``s`` alone.

    With SciPy: LAPACK's divide and conquer ``?bdsdc`` (COMPQ='I'; 'N' for the values alone, by dqds), called
    through ``scipy.linalg.cython_lapack``'s function pointer since ``scipy.linalg.lapack`` does not wrap it.
    Without SciPy, or where it reports a failure: ``numpy.linalg.svd`` of the dense n x n B (LAPACK ``?gesdd``: a
    dense bidiagonal reduction first, O(n^3))."""
    n = len(d)
    real = d.dtype
    routine = _cython_lapack(("s" if real == np.float32 else "d") + "bdsdc", _BDSDC_ARGS) if n > 1 else None
    if routine is not None:
        ints = np.array([n, n, 0, 0], np.int32)  # n, ldu (= ldvt), info, a dummy for iq
        dd, ee = np.array(d, real), np.zeros(n, real)
        ee[:n - 1] = e
        shape = (n, n) if compute_uv else (1, 1)
        u, vt = np.zeros(shape, real, order="F"), np.zeros(shape, real, order="F")
        if not compute_uv:
            ints[1] = 1
        work = np.zeros(3 * n * n + 4 * n if compute_uv else 4 * n, real)
        iwork, q = np.zeros(8 * n, np.int32), np.zeros(1, real)
        addr = ints.ctypes.data
        routine(b"U", b"I" if compute_uv else b"N", addr, dd.ctypes.data, ee.ctypes.data, u.ctypes.data, addr + 4,
                vt.ctypes.data, addr + 4, q.ctypes.data, addr + 12, work.ctypes.data, iwork.ctypes.data, addr + 8)
        if ints[2] == 0:
            order = np.argsort(-dd, kind="stable")  # ?bdsdc sorts them already; kept exact if it did not
            if not compute_uv:
                return dd[order]
            return u[:, order], dd[order], vt[order]
    b = np.diag(d) + np.diag(e, 1) if n > 1 else np.diag(d)
    return np.linalg.svd(b, compute_uv=compute_uv)


def syevd(w: DeviceArray, nb: int | None = None, conj: bool = False) -> tuple[np.ndarray, DeviceArray]:
    """Eigenvalues (ascending, host) and eigenvectors (a new column-major device matrix) of the Hermitian ``w``
    (lower triangle; destroyed): :func:`sytrd` on the device, :func:`stedc` on the host, ``Q Z`` back-transformed on
    the device with block reflectors (``gemm`` + ``trmm``).  ``conj``: return the conjugate eigenvectors (of
    ``conj(A)``)."""
    n = w.shape[0]
    d, e, v, tau = sytrd(w)
    with _on_host():
        vals, z = stedc(d, e)
    vecs = to_device_colmajor(z.astype(w.dtype), w.device)
    if conj:
        v, tau = np.conj(v), np.conj(tau)
    nb = nb or block_size("geqrf", w.dtype, n, n)
    for row, vd, td in reversed(_block_reflectors(v, tau, nb, 1, w.device)):
        _apply(vd, td, vecs[row:, :], conj=False)
    return vals.astype(np.finfo(w.dtype).dtype), vecs


# ----------------------------------------------------------------------------------------------------- SVD
#: columns (and rows) per panel of :func:`gebrd` (MAGMA's ``magma_get_?gebrd_nb`` answers 32)
GEBRD_NB = 32


def gebrd(w: DeviceArray, nb: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                          np.ndarray, np.ndarray]:
    """Reduce column-major ``w`` (m >= n, overwritten) to real upper bidiagonal ``B = Q^H A P``, blocked as LAPACK's
    ?gebrd with ?labrd panels of ``nb`` columns and rows (default :data:`GEBRD_NB`).

    Per panel the host fetches its columns and rows once.  Per column it corrects the column (then the row) with
    the panel's reflectors, builds the left (right) reflector, and the device multiplies the trailing matrix, as it
    was when the panel began, by it (``gemv``: ``A^H v``, then ``A u``; one round trip each), while the host
    computes the panel's share of that product (as MAGMA's labrd overlaps them).  After the panel the device
    updates the trailing matrix with ``A -= V Y^H + X U^H``: one rank-2nb ``gemm`` (LAPACK's two, with ``[V X]``
    and ``[Y U]`` kept side by side).  Returns ``(d, e, vq, tauq, vp, taup)``: B's diagonal and superdiagonal;
    ``Q = H_1 ... H_n`` (``vq`` unit lower trapezoidal, m x n) and ``P = G_1 ... G_{n-1}`` (``vp``,
    (n-1) x (n-1), acting on rows 1...)."""
    m, n = w.shape
    dtype, real = w.dtype, np.finfo(w.dtype).dtype
    d, e = np.zeros(n, real), np.zeros(max(n - 1, 0), real)
    vq, tauq = np.zeros((m, n), dtype), np.zeros(n, dtype)
    vp, taup = np.zeros((max(n - 1, 0),) * 2, dtype), np.zeros(max(n - 1, 0), dtype)
    if n == 0:
        return d, e, vq, tauq, vp, taup
    nb = min(nb or block_size("gebrd", dtype, m, n, GEBRD_NB), n)
    cj = np.conj if np.iscomplexobj(vq) else (lambda x: x)
    q = w.queue
    dv, dy = colmajor_empty(m, 1, dtype, w.device), colmajor_empty(n, 1, dtype, w.device)  # gemv operands

    def product(trans, a, x, dx, dout, stage):
        """Enqueue ``op(a) x`` on the device and its copy into the pinned ``stage`` (read after q.synchronize)."""
        _upload(x[:, None], dx, q)
        gemv(trans, 1.0, a, dx, 0.0, dout, q)
        runtime.memcpy_2d_dtoh(stage[None, :len(dout)], dout.ptr, len(dout) * dout.itemsize, stream=q.stream)
        return stage[:len(dout)]

    with _staging(dtype, n, m) as (ystage, xstage):
        try:
            for i0 in range(0, n, nb):
                jb, mt, nt = min(nb, n - i0), m - i0, n - i0  # the panel's width; the trailing matrix A: mt x nt
                cols, rows = _download(w[i0:, i0:i0 + jb], q), _download(w[i0:i0 + jb, i0:], q)  # A's panel
                # [V X] and [Y U] with columns interleaved (v_0, x_0, v_1, ...; y_0, u_0, y_1, ...): the first 2j
                # columns hold the panel's first j steps, and A - V Y^H - X U^H = A - VX YU^H
                vx, yu = np.zeros((mt, 2 * jb), dtype, order="F"), np.zeros((nt, 2 * jb), dtype, order="F")
                for j in range(jb):
                    i, k = i0 + j, 2 * j
                    with _on_host():  # column j of A - VX YU^H
                        beta, tau, v = larfg(cols[j:, j] - vx[j:, :k] @ cj(yu[j, :k]))
                    d[i], tauq[i], vq[i:, i], vx[j:, k] = np.real(beta), tau, v, v
                    if i == n - 1:
                        break
                    y = product(C, w[i:, i + 1:], v, dv[:mt - j], dy[:nt - j - 1], ystage)  # A^H v on the device
                    with _on_host():  # meanwhile the panel's share: (VX YU^H)^H v = YU (VX^H v)
                        share = yu[j + 1:, :k] @ (cj(vx[j:, :k].T) @ v)
                    q.synchronize()
                    with _on_host():
                        yu[j + 1:, k] = tau * (y - share)
                        row = rows[j, j + 1:] - cj(yu[j + 1:, :k + 1]) @ vx[j, :k + 1]  # left reflector j applied
                        beta, tau, u = larfg(cj(row))
                    e[i], taup[i], vp[i:, i], yu[j + 1:, k + 1] = np.real(beta), tau, u, u
                    x = product(N, w[i + 1:, i + 1:], u, dy[:nt - j - 1], dv[:mt - j - 1], xstage)  # A u
                    with _on_host():
                        share = vx[j + 1:, :k + 1] @ (cj(yu[j + 1:, :k + 1].T) @ u)
                    q.synchronize()
                    with _on_host():
                        vx[j + 1:, k + 1] = tau * (x - share)
                if nt > jb:  # the trailing matrix beyond the panel: A -= [V X] [Y U]^H
                    left, right = (to_device_colmajor(h[jb:], w.device) for h in (vx, yu))
                    gemm(N, C, -1.0, left, right, 1.0, w[i0 + jb:, i0 + jb:], q)
        finally:
            q.synchronize()
    return d, e, vq, tauq, vp, taup


def _back_transform(z: np.ndarray, v: np.ndarray, tau: np.ndarray, offset: int, dtype, device: int,
                    conj: bool, nb: int) -> DeviceArray:
    """``Q z`` (or ``conj(Q) z``) on the device for ``Q`` given by reflectors ``(v, tau)`` acting from row
    ``offset``; ``z`` a host matrix (conjugated first when ``conj``)."""
    out = to_device_colmajor((np.conj(z) if conj else z).astype(dtype), device)
    if conj:
        v, tau = np.conj(v), np.conj(tau)
    for row, vd, td in reversed(_block_reflectors(v, tau, nb, offset, device)):
        _apply(vd, td, out[row:, :], conj=False)
    return out


def gesvd(w: DeviceArray, full_matrices: bool = True, compute_uv: bool = True, nb: int | None = None):
    """SVD of column-major ``w`` (m >= n; destroyed): :func:`gebrd` on the device, the bidiagonal SVD on the host
    (:func:`bdsdc`: LAPACK's divide and conquer with SciPy, else a dense SVD of B), ``U = Q U_B`` and
    ``conj(V) = conj(P V_B)`` back-transformed on the device.  Returns ``s`` (host, descending) or
    ``(U, s, conj(V))`` as column-major device matrices: ``Vh`` is the transposed view of the last.  (For a wide
    ``A``, pass ``w = A^T``: ``A = conj(V) S U^T``.)"""
    m, n = w.shape
    d, e, vq, tauq, vp, taup = gebrd(w)
    with _on_host():
        if not compute_uv:
            return bdsdc(d, e, compute_uv=False)
        ub, s, vbh = bdsdc(d, e)
    nb = nb or block_size("geqrf", w.dtype, m, n)
    uz = np.eye(m, m if full_matrices else n, dtype=ub.dtype)
    uz[:n, :n] = ub
    u = _back_transform(uz, vq, tauq, 0, w.dtype, w.device, False, nb)
    conj_v = _back_transform(np.conj(vbh.T), vp, taup, 1, w.dtype, w.device, True, nb)
    return u, s, conj_v
