"""Atomic file writes for pymagma's on-disk caches (compiled kernels): a temporary file in the same folder, flushed
and fsync'ed, then ``os.replace``d over the destination; on any failure the temporary file is removed and the file
that was there is untouched. (magmadnn keeps the same guarantee in ``magmadnn/_atomic.py``; pymagma sits below it and
never imports it.)"""

from __future__ import annotations

import os
import tempfile

__all__ = ["write_bytes"]


def write_bytes(path, data: bytes) -> str:
    """Atomically make ``path`` (in an existing folder) hold exactly ``data``; returns the path."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=f".{os.path.basename(path)}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
