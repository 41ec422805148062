"""Householder reflectors of the hybrid drivers: built on the host (:func:`larfg`, the compact-WY factor
:func:`larft`) and applied on the device as block reflectors ``I - V T V^H`` (``gemm`` + ``trmm``)."""

from __future__ import annotations

import numpy as np

from .._colmajor import LEFT, UPPER, C, N, empty, gemm, to_device, trmm
from ..array import DeviceArray
from ._host_time import on_host


def _norm(values: np.ndarray) -> float:
    """The 2-norm with the squares scaled by the largest magnitude, as LAPACK's ?nrm2 and ?lapy3 keep them: an
    unscaled ``sqrt(x.x)`` loses digits when the squares are subnormal (entries near 1e-161) or overflow."""
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    if scale == 0 or not np.isfinite(scale):
        return scale
    return scale * float(np.linalg.norm(values / scale))


def larfg(x: np.ndarray) -> tuple[complex, complex, np.ndarray]:
    """LAPACK's elementary reflector for ``x``: ``(beta, tau, v)`` with ``v[0] = 1`` and
    ``(I - tau v v^H)^H x = beta e_1``, ``beta`` real.  As ?larfg, a ``beta`` below LAPACK's safe minimum is
    computed on ``x`` scaled up (so ``v`` keeps its digits) and scaled back."""
    alpha, rest = x[0], x[1:]
    xnorm = _norm(rest)
    v = np.zeros_like(x)
    v[0] = 1
    if xnorm == 0 and np.imag(alpha) == 0:
        return np.real(alpha), 0.0, v
    beta = -np.copysign(_norm(np.array([np.real(alpha), np.imag(alpha), xnorm])), np.real(alpha))
    info = np.finfo(x.dtype)
    safmin, knt = float(info.tiny) / float(info.epsneg), 0  # LAPACK's dlamch('S') / dlamch('E')
    while abs(beta) < safmin and knt < 20:
        knt += 1
        rest, alpha, beta = rest / safmin, alpha / safmin, beta / safmin
    if knt:
        beta = -np.copysign(_norm(np.array([np.real(alpha), np.imag(alpha), _norm(rest)])), np.real(alpha))
    if np.iscomplexobj(x):
        tau = (beta - np.real(alpha)) / beta - 1j * np.imag(alpha) / beta
    else:
        tau = (beta - alpha) / beta
    v[1:] = rest / (alpha - beta)
    for _ in range(knt):
        beta *= safmin
    return beta, tau, v


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


def apply(v: DeviceArray, t: DeviceArray, c: DeviceArray, conj: bool, work: DeviceArray | None = None,
           queue=None) -> None:
    """``c <- (I - V T V^H) c`` (or with ``T^H`` when ``conj``: the adjoint of the block reflector); ``work``: a
    column-major ``k x cols`` scratch matrix (``k`` reflectors; allocated when None)."""
    if c.shape[1] == 0:
        return
    if work is None:
        work = empty(v.shape[1], c.shape[1], c.dtype, c.device)
    gemm(C, N, 1.0, v, c, 0.0, work, queue=queue)
    trmm(LEFT, UPPER, C if conj else N, 1.0, t, work, queue=queue)
    gemm(N, N, -1.0, v, work, 1.0, c, queue=queue)


def block_reflectors(v: np.ndarray, tau: np.ndarray, nb: int, offset: int, device: int) -> list:
    """Device ``(row, V, T)`` blocks of ``nb`` reflectors from the unit lower trapezoidal host ``v`` (reflector
    ``i`` in column ``i`` from row ``i``), acting on rows ``offset + i`` onwards."""
    blocks = []
    for j in range(0, v.shape[1], nb):
        jb = min(nb, v.shape[1] - j)
        vj = v[j:, j:j + jb]
        with on_host():
            tj = larft(vj, tau[j:j + jb])
        blocks.append((offset + j, to_device(vj, device), to_device(tj, device)))
    return blocks


def back_transform(z: np.ndarray, v: np.ndarray, tau: np.ndarray, offset: int, dtype, device: int,
                    conj: bool, nb: int) -> DeviceArray:
    """``Q z`` (or ``conj(Q) z``) on the device for ``Q`` given by reflectors ``(v, tau)`` acting from row
    ``offset``; ``z`` a host matrix (conjugated first when ``conj``)."""
    out = to_device((np.conj(z) if conj else z).astype(dtype), device)
    if conj:
        v, tau = np.conj(v), np.conj(tau)
    for row, vd, td in reversed(block_reflectors(v, tau, nb, offset, device)):
        apply(vd, td, out[row:, :], conj=False)
    return out
