"""How the host keeps the memory NumPy frees, under glibc (Linux): freed blocks stay in the process for the next
arrays instead of going back to the system.

glibc serves a block above its mmap threshold (128 KiB at start, raised by the frees it sees) with fresh pages from
the system and returns it on free, and it trims the heap's top beyond a trim threshold: an inference or a training
step that makes and frees the same large arrays batch after batch then faults every page of them in again, zeroed
by the kernel (measured on a transformer encoder's host predict, 32 x 32 x 64 activations: 1,500 page faults and
5 ms of system time a batch, a third of its time, on a busy machine). Raising both thresholds (``mallopt``) once,
when the host backend loads, keeps those blocks: 0 page faults a batch after the first. The process holds on to up
to ``TRIM`` bytes it freed at the heap's top (what it peaked at, at most, as before for small blocks).

``MAGMADNN_HOST_MALLOC=0`` leaves glibc's settings alone; other C libraries (musl, macOS, Windows) are left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory", "MMAP", "TRIM"]

#: blocks up to MMAP bytes come from the heap (larger ones are still mapped and returned on free)
MMAP = 256 << 20
#: the heap's free top is returned to the system only beyond TRIM bytes
TRIM = 1 << 30

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_done: list = []


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once (see the module); whether they are set."""
    if _done:
        return _done[0]
    ok = False
    if sys.platform.startswith("linux") and os.environ.get("MAGMADNN_HOST_MALLOC", "1").strip().lower() not in (
            "0", "false", "no", "off"):
        try:
            mallopt = ctypes.CDLL(None).mallopt  # glibc's; musl has none
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM))
        except (OSError, AttributeError):
            ok = False
    _done.append(ok)
    return ok
