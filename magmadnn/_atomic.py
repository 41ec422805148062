"""Atomic file writes: the one way magmadnn writes a file (models, checkpoints, ONNX exports, CSV logs, plots, JSON).

The bytes go to a temporary file in the destination's folder (``.<name>.<random>.tmp``), are flushed and fsync'ed,
and the temporary file is then moved over the destination with ``os.replace``. A failure at any point (disk full, a
file-size limit, an exception while producing the content) removes the temporary file and leaves whatever was at the
destination untouched: a reader sees the old file or the complete new one, never a truncated one.

The destination's folder must exist (FileNotFoundError naming it otherwise); callers that create folders do so
themselves. The new file gets the usual permissions (``0o666`` less the umask), not ``mkstemp``'s ``0o600``.
(pymagma, which never imports magmadnn, keeps the same routine for its kernel cache in ``pymagma/_atomic.py``.)
"""

from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["atomic_write", "write_bytes", "write_text"]


def _temporary(path: str) -> tuple[str, int]:
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path!r}: the folder {directory!r} does not exist")
    base = os.path.basename(path)
    if not base:
        raise IsADirectoryError(f"cannot write {path!r}: it names a folder, not a file")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file next to {path!r}")


def _sync_folder(path: str) -> None:
    """Make the rename itself durable where the platform allows opening a folder (POSIX)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb", **open_kwargs):
    """``with atomic_write(path, "w", newline="") as f: ...`` -- a file object on a temporary file that replaces
    ``path`` when the block ends without an exception; otherwise ``path`` is untouched and the temporary file is
    removed. ``mode`` is ``"wb"`` or ``"w"`` (text; ``open_kwargs`` such as ``encoding``/``newline`` apply)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write opens files for writing only ('w' or 'wb'), got mode {mode!r}")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path!r}: it is a folder")
    tmp, fd = _temporary(path)
    try:
        with open(fd, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_folder(path)


def write_bytes(path, data: bytes) -> str:
    """Atomically make ``path`` hold exactly ``data``; returns the path."""
    with atomic_write(path, "wb") as handle:
        handle.write(data)
    return os.fspath(path)


def write_text(path, text: str, encoding: str = "utf-8") -> str:
    """Atomically make ``path`` hold ``text`` (encoded with ``encoding``); returns the path."""
    return write_bytes(path, text.encode(encoding))
