"""The MPI environment: mpi4py found or not, the world communicator, ranks and threads per rank, and aborting the
whole job when one rank fails.

Without mpi4py importing this module still works; ``is_available()`` is False and anything that needs MPI raises
:class:`MPIUnavailableError` naming ``pip install magmadnn[mpi]``.
"""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np

__all__ = ["MPIUnavailableError", "is_available", "launched", "ranks_on_this_node", "limit_threads_per_rank", "init",
           "comm", "rank", "size", "is_root", "barrier", "install_abort_hook", "abort_if_several_ranks"]

_INSTALL = "pip install magmadnn[mpi] (mpi4py with an MPICH wheel), or mpi4py built against your cluster's MPI"


class MPIUnavailableError(ImportError):
    """mpi4py (or an MPI library under it) is not installed."""


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise MPIUnavailableError(f"distributed training needs mpi4py: {_INSTALL} ({exc})") from None
    return MPI


def is_available() -> bool:
    """Whether mpi4py and an MPI library load here."""
    try:
        _mpi()
    except (MPIUnavailableError, RuntimeError):
        return False
    return True


_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def launched() -> bool:
    """Whether an MPI launcher (mpiexec, srun) started this process, from its environment (MPI stays untouched)."""
    return any(name in os.environ for name in _LAUNCHER_VARS)


_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def ranks_on_this_node(default: int = 1) -> int:
    """How many ranks share this node, as the launcher says (``default`` when it does not)."""
    for name in _LOCAL_SIZE_VARS:
        if os.environ.get(name, "").isdigit():
            return max(1, int(os.environ[name]))
    return default


def limit_threads_per_rank(local_ranks: int | None = None) -> int | None:
    """Give each rank ``cores // ranks on the node`` BLAS/OpenMP threads (oversubscribed BLAS threads can make
    data-parallel runs an order of magnitude slower). Nothing is changed when the user set ``OMP_NUM_THREADS``,
    ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS``, or without threadpoolctl; returns the limit set, or None."""
    if any(name in os.environ for name in _THREAD_VARS):
        return None
    try:
        import threadpoolctl
    except ImportError:
        return None
    threads = max(1, (os.cpu_count() or 1) // (local_ranks or ranks_on_this_node()))
    threadpoolctl.threadpool_limits(threads)
    return threads


def init():
    """Initialize MPI (through mpi4py), install the abort-on-exception hook when there are several ranks; returns
    ``COMM_WORLD``."""
    world = _mpi().COMM_WORLD
    if world.Get_size() > 1:
        install_abort_hook()
    return world


def comm():
    """The world communicator (``init`` first)."""
    return init()


def rank() -> int:
    """This process's rank (0 without MPI installed)."""
    return init().Get_rank() if is_available() else 0


def size() -> int:
    """The number of ranks (1 without MPI installed)."""
    return init().Get_size() if is_available() else 1


def is_root() -> bool:
    return rank() == 0


def barrier() -> None:
    init().Barrier()


_hook_installed = False


def install_abort_hook() -> None:
    """An uncaught exception prints ``[rank r]`` and the traceback on stderr, then aborts every rank (exit 1)."""
    global _hook_installed
    if _hook_installed:
        return
    MPI = _mpi()  # noqa: N806
    previous = sys.excepthook

    def hook(kind, value, tb):
        world = MPI.COMM_WORLD
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[rank {world.Get_rank()} of {world.Get_size()}] uncaught exception, aborting the job:\n"
                         f"{text}")
        sys.stderr.flush()
        if kind is KeyboardInterrupt or world.Get_size() == 1:
            previous(kind, value, tb)
            return
        world.Abort(1)

    sys.excepthook = hook
    _hook_installed = True


def abort_if_several_ranks(status: int) -> None:
    """When this process is one of several MPI ranks (mpi4py imported, MPI running): ``Abort(status)`` the whole
    job. For an error handled on one rank (a one-line message instead of a traceback): leaving alone, that rank
    would leave the others waiting in their next collective call for ever. Nothing happens without MPI."""
    MPI = sys.modules.get("mpi4py.MPI")  # noqa: N806  (never imported here)
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() == 1:
        return
    sys.stderr.flush()
    sys.stdout.flush()
    MPI.COMM_WORLD.Abort(status)


def _float_type(MPI, dtype):  # noqa: N803
    """The MPI datatype of a float32 or float64 NumPy dtype."""
    return {np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE}[np.dtype(dtype)]


_COMMS: dict = {}


def _dup(world, purpose: str):
    """A duplicate of ``world`` for one purpose, made once per process (a collective call the first time), so that
    the gradient buckets, the batch-norm statistics and fit's own collectives never share a message context."""
    key = (world.py2f(), purpose)
    if key not in _COMMS:
        _COMMS[key] = world.Dup()
    return _COMMS[key]
