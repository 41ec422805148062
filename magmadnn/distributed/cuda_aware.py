"""Whether the MPI library reads and writes CUDA device memory (a CUDA-aware MPI), and what said so.

On the GPU backend a CUDA-aware MPI reduces the gradient buckets in device memory; otherwise they are staged through
page-locked host buffers (see :mod:`.buckets`). ``Options(cuda_aware=...)`` overrides the answer.
"""

from __future__ import annotations

import os

from .environment import _mpi, init

__all__ = ["cuda_aware_mpi"]

_CUDA_AWARE_VAR = "MAGMADNN_CUDA_AWARE_MPI"


def _alloc_kinds_have_cuda_device(kinds: str) -> bool:
    """Whether an MPI 4.1 ``mpi_memory_alloc_kinds`` value (``"mpi,system,cuda:device"``) admits CUDA device memory:
    a ``cuda`` kind without restrictors admits every CUDA memory, ``cuda:...`` the restrictors it names."""
    for kind in kinds.split(","):
        name, *restrictors = kind.strip().lower().split(":")
        if name == "cuda" and (not restrictors or "device" in restrictors):
            return True
    return False


def cuda_aware_mpi(world=None) -> tuple[bool, str]:
    """Whether the MPI library takes CUDA device buffers, and what said so.

    In order: ``MAGMADNN_CUDA_AWARE_MPI`` (``1``/``0``: you know better than the library); the MPI 4.1 info key
    ``mpi_memory_alloc_kinds`` of the communicator (MPICH 4.2+, Open MPI 6: a ``cuda`` kind); the
    ``MPIX_Query_cuda_support()`` extension (MPICH 4+, Open MPI); else False."""
    value = os.environ.get(_CUDA_AWARE_VAR, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True, f"{_CUDA_AWARE_VAR}={value}"
    if value in ("0", "false", "no", "off"):
        return False, f"{_CUDA_AWARE_VAR}={value}"
    MPI = _mpi()  # noqa: N806
    world = world or init()
    try:
        info = world.Get_info()
        try:
            kinds = info.Get("mpi_memory_alloc_kinds")
        finally:
            info.Free()
    except Exception:  # noqa: BLE001  (an MPI before 4.1: no such key)
        kinds = None
    if kinds is not None and _alloc_kinds_have_cuda_device(kinds):
        return True, f"mpi_memory_alloc_kinds={kinds}"
    try:
        import ctypes

        query = ctypes.CDLL(MPI.__file__).MPIX_Query_cuda_support  # found in the MPI library the module links
        query.restype = ctypes.c_int
        if query() == 1:
            return True, "MPIX_Query_cuda_support()=1"
        return False, "MPIX_Query_cuda_support()=0" + (f", mpi_memory_alloc_kinds={kinds}" if kinds else "")
    except (OSError, AttributeError):
        pass
    return False, f"mpi_memory_alloc_kinds={kinds}" if kinds else "the MPI library reports no CUDA support"
