"""Hybrid Hermitian eigensolver: the tridiagonal reduction on the device (:func:`sytrd`), the tridiagonal
eigenproblem on the host (:func:`~pymagma.hybrid.stedc`), the back-transformation on the device."""

from __future__ import annotations

import numpy as np

from .. import runtime
from .._colmajor import empty, hemv_lower, her2k_lower, to_device
from ..array import DeviceArray
from . import _block_size
from ._host_solvers import stedc
from ._host_time import on_host
from ._lookahead import download, staging, upload
from ._reflectors import back_transform, larfg

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
    nb = nb or _block_size.block_size("sytrd", dtype, n, n, SYTRD_NB)
    cj = np.conj if np.iscomplexobj(v_all) else (lambda x: x)
    q = w.queue
    dv, dy = empty(n, 1, dtype, w.device), empty(n, 1, dtype, w.device)  # hemv operands
    with staging(dtype, n) as (stage,):
        try:
            for i in range(0, n - 1, nb):
                jb, m = min(nb, n - 1 - i), n - i  # the panel's columns; the order of the trailing matrix A
                panel = download(w[i:, i:i + jb], q)  # A's panel (lower triangle), unchanged by the panel's steps
                # [V W] and [W V] with columns interleaved (v_0, w_0, v_1, ...; w_0, v_0, w_1, ...): the first 2c
                # columns hold the panel's first c steps, and A - V W^H - W V^H = A - VW WV^H
                vw, wv = np.zeros((m, 2 * jb), dtype, order="F"), np.zeros((m, 2 * jb), dtype, order="F")
                for c in range(jb):
                    k = 2 * c
                    with on_host():  # column c of A - VW WV^H from its diagonal
                        col = panel[c:, c] - vw[c:, :k] @ cj(wv[c, :k])
                        beta, tau, v = larfg(col[1:])
                    d[i + c], e[i + c], taus[i + c], v_all[i + c:, i + c] = np.real(col[0]), np.real(beta), tau, v
                    vw[c + 1:, k], wv[c + 1:, k + 1] = v, v
                    if tau == 0:
                        continue
                    size = m - c - 1
                    upload(v[:, None], dv[:size], q)
                    hemv_lower(1.0, w[i + c + 1:, i + c + 1:], dv[:size], dy[:size])  # A v on the device
                    runtime.memcpy_2d_dtoh(stage[None, :size], dy.ptr, size * dy.itemsize, stream=q.stream)
                    with on_host():  # meanwhile the panel's share: (V W^H + W V^H) v = VW (WV^H v)
                        share = vw[c + 1:, :k] @ (cj(wv[c + 1:, :k].T) @ v)
                    q.synchronize()
                    with on_host():  # w = tau (A - V W^H - W V^H) v, then w -= tau/2 (w^H v) v
                        y = tau * (stage[:size] - share)
                        y = y - 0.5 * tau * np.vdot(y, v) * v
                    vw[c + 1:, k + 1], wv[c + 1:, k] = y, y
                if m > jb:
                    her2k_lower(-1.0, to_device(vw[jb:, 0::2], w.device),
                                to_device(vw[jb:, 1::2], w.device), w[i + jb:, i + jb:])
            if n:
                d[n - 1] = np.real(download(w[n - 1:, n - 1:], q)[0, 0])
        finally:
            q.synchronize()
    return d, e, v_all, taus


def syevd(w: DeviceArray, nb: int | None = None, conj: bool = False) -> tuple[np.ndarray, DeviceArray]:
    """Eigenvalues (ascending, host) and eigenvectors (a new column-major device matrix) of the Hermitian ``w``
    (lower triangle; destroyed): :func:`sytrd` on the device, :func:`stedc` on the host, ``Q Z`` back-transformed on
    the device with block reflectors (``gemm`` + ``trmm``).  ``conj``: return the conjugate eigenvectors (of
    ``conj(A)``)."""
    n = w.shape[0]
    d, e, v, tau = sytrd(w)
    with on_host():
        vals, z = stedc(d, e)
    nb = nb or _block_size.block_size("geqrf", w.dtype, n, n)
    vecs = back_transform(z, v, tau, 1, w.dtype, w.device, conj, nb)  # z is real: conj(Q) z when conj
    return vals.astype(np.finfo(w.dtype).dtype), vecs
