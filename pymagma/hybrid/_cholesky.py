"""Hybrid Cholesky: diagonal blocks on the host, ``trsm`` + ``syrk``/``herk`` on the device, with look-ahead."""

from __future__ import annotations

import numpy as np

from .._colmajor import LEFT, LOWER, RIGHT, C, N, gemm, herk_lower, trsm
from ..array import DeviceArray, on_arrays_device
from . import _block_size
from ._block_size import DEFAULT_NB
from ._host_time import on_host
from ._lookahead import fetch, finish, queues_for, staging, upload


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
    nb = min(nb or _block_size.block_size("potrf", w.dtype, n, n), n)
    main, side = queues_for(w, lookahead, queues)
    with staging(w.dtype, nb * nb) as (stage,):
        try:
            block, ready = fetch(w[:nb, :nb], stage, main, side)
            for j in range(0, n, nb):
                jb = min(nb, n - j)
                ready.synchronize()
                with on_host():
                    factor, info = host_potrf(block)
                    if info:
                        return j + info
                    block[...] = np.tril(factor) + np.triu(block, 1)
                diag = w[j:j + jb, j:j + jb]
                upload(block, diag, main)
                nxt = j + jb
                if nxt == n:
                    break
                panel = w[nxt:, j:j + jb]
                trsm(RIGHT, LOWER, C, 1.0, diag, panel, queue=main)  # panel <- panel L_jj^{-H}
                nb2 = min(nb, n - nxt)
                if lookahead:  # the next diagonal block first, then the rest while the host factors it
                    herk_lower(-1.0, panel[:nb2], 1.0, w[nxt:nxt + nb2, nxt:nxt + nb2], queue=main)
                    block, ready = fetch(w[nxt:nxt + nb2, nxt:nxt + nb2], stage, main, side)
                    gemm(N, C, -1.0, panel[nb2:], panel[:nb2], 1.0, w[nxt + nb2:, nxt:nxt + nb2], queue=main)
                    herk_lower(-1.0, panel[nb2:], 1.0, w[nxt + nb2:, nxt + nb2:], queue=main)
                else:
                    herk_lower(-1.0, panel, 1.0, w[nxt:, nxt:], queue=main)
                    block, ready = fetch(w[nxt:nxt + nb2, nxt:nxt + nb2], stage, main, side)
            return 0
        finally:
            finish(main, side)


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
