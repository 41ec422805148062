"""Hybrid SVD: the bidiagonal reduction on the device (:func:`gebrd`), the bidiagonal SVD on the host
(:func:`~pymagma.hybrid.bdsdc`), the back-transformations on the device."""

from __future__ import annotations

import numpy as np

from .. import runtime
from .._colmajor import C, N, empty, gemm, gemv, to_device
from ..array import DeviceArray
from . import _block_size
from ._host_solvers import bdsdc
from ._host_time import on_host
from ._lookahead import download, staging, upload
from ._reflectors import back_transform, larfg

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
    nb = min(nb or _block_size.block_size("gebrd", dtype, m, n, GEBRD_NB), n)
    cj = np.conj if np.iscomplexobj(vq) else (lambda x: x)
    q = w.queue
    dv, dy = empty(m, 1, dtype, w.device), empty(n, 1, dtype, w.device)  # gemv operands

    def product(trans, a, x, dx, dout, stage):
        """Enqueue ``op(a) x`` on the device and its copy into the pinned ``stage`` (read after q.synchronize)."""
        upload(x[:, None], dx, q)
        gemv(trans, 1.0, a, dx, 0.0, dout, q)
        runtime.memcpy_2d_dtoh(stage[None, :len(dout)], dout.ptr, len(dout) * dout.itemsize, stream=q.stream)
        return stage[:len(dout)]

    with staging(dtype, n, m) as (ystage, xstage):
        try:
            for i0 in range(0, n, nb):
                jb, mt, nt = min(nb, n - i0), m - i0, n - i0  # the panel's width; the trailing matrix A: mt x nt
                cols, rows = download(w[i0:, i0:i0 + jb], q), download(w[i0:i0 + jb, i0:], q)  # A's panel
                # [V X] and [Y U] with columns interleaved (v_0, x_0, v_1, ...; y_0, u_0, y_1, ...): the first 2j
                # columns hold the panel's first j steps, and A - V Y^H - X U^H = A - VX YU^H
                vx, yu = np.zeros((mt, 2 * jb), dtype, order="F"), np.zeros((nt, 2 * jb), dtype, order="F")
                for j in range(jb):
                    i, k = i0 + j, 2 * j
                    with on_host():  # column j of A - VX YU^H
                        beta, tau, v = larfg(cols[j:, j] - vx[j:, :k] @ cj(yu[j, :k]))
                    d[i], tauq[i], vq[i:, i], vx[j:, k] = np.real(beta), tau, v, v
                    if i == n - 1:
                        break
                    y = product(C, w[i:, i + 1:], v, dv[:mt - j], dy[:nt - j - 1], ystage)  # A^H v on the device
                    with on_host():  # meanwhile the panel's share: (VX YU^H)^H v = YU (VX^H v)
                        share = yu[j + 1:, :k] @ (cj(vx[j:, :k].T) @ v)
                    q.synchronize()
                    with on_host():
                        yu[j + 1:, k] = tau * (y - share)
                        row = rows[j, j + 1:] - cj(yu[j + 1:, :k + 1]) @ vx[j, :k + 1]  # left reflector j applied
                        beta, tau, u = larfg(cj(row))
                    e[i], taup[i], vp[i:, i], yu[j + 1:, k + 1] = np.real(beta), tau, u, u
                    x = product(N, w[i + 1:, i + 1:], u, dy[:nt - j - 1], dv[:mt - j - 1], xstage)  # A u
                    with on_host():
                        share = vx[j + 1:, :k + 1] @ (cj(yu[j + 1:, :k + 1].T) @ u)
                    q.synchronize()
                    with on_host():
                        vx[j + 1:, k + 1] = tau * (x - share)
                if nt > jb:  # the trailing matrix beyond the panel: A -= [V X] [Y U]^H
                    left, right = (to_device(h[jb:], w.device) for h in (vx, yu))
                    gemm(N, C, -1.0, left, right, 1.0, w[i0 + jb:, i0 + jb:], q)
        finally:
            q.synchronize()
    return d, e, vq, tauq, vp, taup


def gesvd(w: DeviceArray, full_matrices: bool = True, compute_uv: bool = True, nb: int | None = None):
    """SVD of column-major ``w`` (m >= n; destroyed): :func:`gebrd` on the device, the bidiagonal SVD on the host
    (:func:`bdsdc`: LAPACK's divide and conquer with SciPy, else a dense SVD of B), ``U = Q U_B`` and
    ``conj(V) = conj(P V_B)`` back-transformed on the device.  Returns ``s`` (host, descending) or
    ``(U, s, conj(V))`` as column-major device matrices: ``Vh`` is the transposed view of the last.  (For a wide
    ``A``, pass ``w = A^T``: ``A = conj(V) S U^T``.)"""
    m, n = w.shape
    d, e, vq, tauq, vp, taup = gebrd(w)
    with on_host():
        if not compute_uv:
            return bdsdc(d, e, compute_uv=False)
        ub, s, vbh = bdsdc(d, e)
    nb = nb or _block_size.block_size("geqrf", w.dtype, m, n)
    uz = np.eye(m, m if full_matrices else n, dtype=ub.dtype)
    uz[:n, :n] = ub
    u = back_transform(uz, vq, tauq, 0, w.dtype, w.device, False, nb)
    conj_v = back_transform(np.conj(vbh.T), vp, taup, 1, w.dtype, w.device, True, nb)
    return u, s, conj_v
