"""The two BLAS calls NumPy has no spelling for, from the OpenBLAS that NumPy itself loaded: a GEMM that accumulates
into its output (``C = A^T B + beta C``) and ``axpy`` (``y += alpha x``).

They run on the thread pool of NumPy's own GEMMs (a second BLAS, SciPy's, would bring a second pool whose spinning
threads fight the first for the cores). SGD's momentum uses them (:mod:`magmadnn._momentum_fold`): the weight
gradient's GEMM writes ``momentum v + g`` straight into the velocity (OpenBLAS scales C by beta, then adds the
product: the same roundings as ``v *= momentum; v += g``), and ``p -= lr v`` is one ``axpy``, a fused multiply-add
per element as PyTorch's update rounds it.

:func:`available` is False where NumPy's BLAS is not an OpenBLAS found in this process (other BLAS builds, other
systems) or ``MAGMADNN_HOST_BLAS=0`` is set: callers then keep their NumPy path. The library is looked up on first
use, not at import. The arrays' data addresses are read by one compiled numba call where the host's kernels are
(``_host_jit``; a call then costs about a third of what reading each ``__array_interface__`` did), else from NumPy."""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

__all__ = ["available", "gemm_tn_into", "axpy"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
#: (symbol prefix, suffix, integer type) of the CBLAS builds NumPy's wheels ship: scipy-openblas (64-bit indices,
#: NumPy 2), openblas64_ (NumPy 1.22+), a plain LP64 OpenBLAS
_BUILDS = (("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64), ("cblas_", "", ctypes.c_int))


def _openblas_paths() -> list[str]:
    """The OpenBLAS shared libraries mapped into this process (Linux), NumPy's (under its install) first."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps if "openblas" in line.lower()
                     and len(line.split(None, 5)) == 6}
    except OSError:
        return []
    return sorted((p for p in paths if p.startswith("/") and ".so" in p), key=lambda p: ("numpy" not in p, p))


def _bind(path):
    """``{float dtype: (gemm, axpy)}`` of the library at ``path``, or None without the symbols of a known build."""
    try:
        lib = ctypes.CDLL(path)  # mapped already: the same library, and thread pool, as NumPy's
    except OSError:
        return None
    for prefix, suffix, index in _BUILDS:
        try:
            found = {np.dtype(dtype): (getattr(lib, f"{prefix}{c}gemm{suffix}"),
                                       getattr(lib, f"{prefix}{c}axpy{suffix}"))
                     for dtype, c in ((np.float32, "s"), (np.float64, "d"))}
        except AttributeError:
            continue
        for dtype, (gemm, axpy_) in found.items():
            real = ctypes.c_float if dtype == np.float32 else ctypes.c_double
            ptr, enum = ctypes.c_void_p, ctypes.c_int
            gemm.argtypes = [enum, enum, enum, index, index, index, real, ptr, index, ptr, index, real, ptr, index]
            axpy_.argtypes = [index, real, ptr, index, ptr, index]
            gemm.restype = axpy_.restype = None
        return found
    return None


def _load():
    if os.environ.get("MAGMADNN_HOST_BLAS", "1").strip().lower() in ("0", "false", "no", "off") \
            or not sys.platform.startswith("linux"):
        return None
    config = getattr(np.__config__, "CONFIG", None)  # (NumPy 1.25+; older ones: the symbols alone decide)
    if isinstance(config, dict):
        blas = config.get("Build Dependencies", {}).get("blas", {}).get("name") or ""
        if "openblas" not in str(blas).lower():
            return None
    for path in _openblas_paths():
        found = _bind(path)
        if found is not None:
            return found
    return None


_ROUTINES = None
_LOADED = False
#: the data addresses of two / three arrays: compiled numba functions where the ``jit`` extra is there (a third of a
#: microsecond for three arrays, against one and a half for each ``__array_interface__``)
_addresses2 = _addresses3 = None


def _routines():
    global _ROUTINES, _LOADED, _addresses2, _addresses3
    if not _LOADED:
        _ROUTINES, _LOADED = _load(), True
        if _ROUTINES is not None:
            _addresses2, _addresses3 = _address_readers()
    return _ROUTINES


def _interface_addresses(*arrays):
    return tuple(a.__array_interface__["data"][0] for a in arrays)  # (no Python frame, as a.ctypes.data has)


def _address_readers():
    """The data addresses of two and of three arrays, compiled by numba where the host's kernels are
    (``_host_jit``), else read from NumPy's ``__array_interface__``."""
    from .. import _host_jit  # noqa: PLC0415 (numba loads with the kernels, not with this module)

    if _host_jit.kernels is None:
        return _interface_addresses, _interface_addresses
    import numba  # noqa: PLC0415

    @numba.njit(cache=True)
    def two(x, y):
        return x.ctypes.data, y.ctypes.data

    @numba.njit(cache=True)
    def three(x, y, z):
        return x.ctypes.data, y.ctypes.data, z.ctypes.data

    return two, three


def available() -> bool:
    """Whether NumPy's OpenBLAS was found (looked up once)."""
    return _routines() is not None


def gemm_tn_into(a, b, c, beta) -> bool:
    """In place ``c = a.T @ b + beta c`` for 2-D a (K, M), b (K, N), c (M, N) of one float dtype, C-contiguous, c
    writeable and apart from a and b; False (nothing written) where these do not fit or BLAS is not available."""
    routines = _ROUTINES if _LOADED else _routines()
    if routines is None or type(a) is not np.ndarray or type(b) is not np.ndarray or type(c) is not np.ndarray:
        return False
    calls = routines.get(c.dtype)
    if (calls is None or a.dtype != c.dtype or b.dtype != c.dtype or a.ndim != 2 or b.ndim != 2 or c.ndim != 2
            or not (a.flags.c_contiguous and b.flags.c_contiguous and c.flags.c_contiguous and c.flags.writeable)):
        return False
    k, m = a.shape
    n = b.shape[1]
    if b.shape[0] != k or c.shape != (m, n):
        return False
    if m and n:
        pa, pb, pc = _addresses3(a, b, c)
        calls[0](_ROW_MAJOR, _TRANS, _NO_TRANS, m, n, k, 1.0, pa, m, pb, n, float(beta), pc, n)
    return True


def axpy(alpha, x, y) -> bool:
    """In place ``y += alpha x`` for x, y of one float dtype and shape, C-contiguous, y writeable (one rounding per
    element in OpenBLAS's vector kernels, a fused multiply-add); False (nothing written) where these do not fit or
    BLAS is not available."""
    routines = _ROUTINES if _LOADED else _routines()
    if routines is None or type(x) is not np.ndarray or type(y) is not np.ndarray:
        return False
    calls = routines.get(y.dtype)
    if (calls is None or x.dtype != y.dtype or x.shape != y.shape
            or not (x.flags.c_contiguous and y.flags.c_contiguous and y.flags.writeable)):
        return False
    if y.size:
        px, py = _addresses2(x, y)
        calls[1](y.size, float(alpha), px, 1, py, 1)
    return True
