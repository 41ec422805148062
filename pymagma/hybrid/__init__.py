"""Hybrid CPU+GPU LAPACK drivers built only from what a partial MAGMA exports (PyTorch's bundled 2.6.1 has the BLAS,
``laswp``, ``transpose`` and ``getrf`` but no ``potrf``/``potrs``/``geqrf``/``orgqr``/``gels``/``syevd``/``gesdd``).

As in MAGMA's own drivers, each small diagonal block or panel is factored on the host by NumPy's LAPACK and the
large trailing updates run on the device with BLAS-3: ``trsm`` + ``syrk``/``herk`` for Cholesky, ``gemm`` + ``trmm``
applying compact-WY block reflectors ``I - V T V^H`` for QR.  One driver a module:

- ``_cholesky``: :func:`potrf`, :func:`potrs` (and :func:`zero_upper`);
- ``_qr``: :func:`geqrf`, :func:`orgqr`, :func:`ormqr_h` (``Q^H b`` for least squares), :class:`QRFactors`;
- ``_eigh``: :func:`sytrd` and :func:`syevd`; ``_svd``: :func:`gebrd` and :func:`gesvd`;

and what they share: ``_lookahead`` (staging through pinned memory on a second queue), ``_reflectors`` (host
reflectors, device block reflectors), ``_host_solvers`` (:func:`stedc`, :func:`bdsdc`), ``_host_time``
(:func:`host_seconds`, :func:`host_time`), ``_block_size`` (:func:`block_size`).  Their device calls go through
the column-major face :mod:`pymagma._colmajor`, which :mod:`pymagma.linalg` uses as well.

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

from .._colmajor import (  # noqa: F401  (the column-major BLAS the drivers call, importable from here as before)
    LEFT,
    LOWER,
    NONUNIT,
    RIGHT,
    UPPER,
    C,
    N,
    T,
    gemm,
    gemv,
    hemv_lower,
    her2k_lower,
    herk_lower,
    trmm,
    trsm,
)
from .._colmajor import empty as colmajor_empty  # noqa: F401
from .._colmajor import to_device as to_device_colmajor  # noqa: F401
from ._block_size import DEFAULT_NB, block_size
from ._cholesky import host_potrf, potrf, potrs, zero_upper  # noqa: F401
from ._eigh import SYTRD_NB, syevd, sytrd
from ._host_solvers import bdsdc, host_solvers, stedc
from ._host_time import HostTime, host_seconds, host_time, reset_host_seconds
from ._qr import QRFactors, geqrf, orgqr, ormqr_h
from ._reflectors import larfg, larft  # noqa: F401
from ._svd import GEBRD_NB, gebrd, gesvd

__all__ = ["DEFAULT_NB", "SYTRD_NB", "GEBRD_NB", "block_size", "potrf", "potrs", "geqrf", "orgqr", "ormqr_h",
           "QRFactors", "sytrd", "stedc", "syevd", "gebrd", "bdsdc", "gesvd", "host_solvers", "host_seconds",
           "reset_host_seconds", "host_time", "HostTime"]
