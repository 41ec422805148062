"""Hybrid QR: panels by the host's LAPACK, the trailing matrix updated on the device with block reflectors
(``gemm`` + ``trmm``), with look-ahead; ``Q`` built or applied on the device."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._colmajor import empty, to_device
from ..array import DeviceArray, on_arrays_device
from . import _block_size
from ._host_time import on_host
from ._lookahead import fetch, finish, host_view, queues_for, staging, upload
from ._reflectors import apply, larft


@dataclass
class QRFactors:
    """The output of :func:`geqrf`: ``w`` holds R above and LAPACK's reflectors below the diagonal; ``tau`` the
    scalars; ``blocks`` the device copies ``(row, V, T)`` of each block reflector for ``orgqr``/``ormqr_h``."""

    w: DeviceArray
    tau: np.ndarray
    blocks: list


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
    nb = min(nb or _block_size.block_size("geqrf", w.dtype, m, n), k)
    main, side = queues_for(w, lookahead, queues)
    v_all = empty(m, k, w.dtype, w.device)  # the block reflectors' V, one block column per panel
    t_all = empty(nb, k, w.dtype, w.device)  # and their triangular factors T
    work = empty(nb, n, w.dtype, w.device)
    taus, blocks = [], []
    with staging(w.dtype, m * nb, m * nb, nb * nb) as (panel_stage, v_stage, t_stage):
        try:
            panel, ready = fetch(w[:, :nb], panel_stage, main, side)
            for j in range(0, k, nb):
                jb = min(nb, k - j)
                ready.synchronize()
                with on_host():
                    h, tau = np.linalg.qr(panel, mode="raw")
                    panel[...] = h.T  # R above, the reflectors below the diagonal
                    tau = tau.astype(w.dtype)
                    v = host_view(v_stage, m - j, jb)
                    v[...] = np.tril(panel, -1)
                    v[np.arange(jb), np.arange(jb)] = 1
                    t = host_view(t_stage, jb, jb)
                    t[...] = larft(v, tau)
                taus.append(tau)
                vd, td = v_all[j:, j:j + jb], t_all[:jb, j:j + jb]
                for host, dev in ((panel, w[j:, j:j + jb]), (v, vd), (t, td)):
                    upload(host, dev, main)
                blocks.append((j, vd, td))
                nxt = j + jb
                nb2 = min(nb, k - nxt)  # the next panel's width; 0: none
                first = nxt + nb2 if lookahead else n  # columns updated before the next panel is copied
                apply(vd, td, w[j:, nxt:first], True, work[:jb, :first - nxt], main)
                if nb2:
                    panel, ready = fetch(w[nxt:, nxt:nxt + nb2], panel_stage, main, side)
                apply(vd, td, w[j:, first:], True, work[:jb, :n - first], main)
        finally:
            finish(main, side)
    return QRFactors(w, np.concatenate(taus), blocks)


def orgqr(f: QRFactors, cols: int) -> DeviceArray:
    """The first ``cols`` columns of ``Q = H_1 ... H_k`` (``cols`` = min(m, n) or m), built on the device."""
    m = f.w.shape[0]
    q = to_device(np.eye(m, cols, dtype=f.w.dtype), f.w.device)
    for j, vd, td in reversed(f.blocks):
        apply(vd, td, q[j:, j:], conj=False)
    return q


def ormqr_h(f: QRFactors, b: DeviceArray) -> None:
    """``b <- Q^H b`` in place (column-major ``b`` with ``m`` rows)."""
    for j, vd, td in f.blocks:
        apply(vd, td, b[j:, :], conj=True)
