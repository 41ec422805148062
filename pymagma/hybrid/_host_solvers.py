"""The host solvers of the hybrid eigh and svd: LAPACK's divide and conquer through SciPy when it is installed
(:func:`stedc`: ``?stevd``; :func:`bdsdc`: ``?bdsdc`` through ``scipy.linalg.cython_lapack``), else a dense NumPy
eigh/svd of the n x n tridiagonal/bidiagonal matrix (O(n^3)); :func:`host_solvers` says which."""

from __future__ import annotations

import re

import numpy as np


def _scipy_lapack():
    """SciPy's LAPACK wrappers (``scipy.linalg.lapack``), or None without SciPy."""
    try:
        from scipy.linalg import lapack
    except ImportError:
        return None
    return lapack


#: the arguments of cython_lapack's ?bdsdc as its capsule names them: two chars, n, then pointers (int is 32-bit)
_BDSDC_ARGS = ("char *", "char *", "int *", "R *", "R *", "R *", "int *", "R *", "int *", "R *", "int *", "R *",
               "int *", "int *")


def _cython_lapack(name: str, args: tuple[str, ...]):
    """The LAPACK routine ``name`` from SciPy's ``scipy.linalg.cython_lapack`` (its exported function pointers: every
    LAPACK routine, also those ``scipy.linalg.lapack`` does not wrap, such as ?bdsdc) as a ctypes function, or None
    without SciPy or when the capsule's signature is not ``args`` (``R`` stands for the real type)."""
    try:
        from scipy.linalg import cython_lapack
        capsule = cython_lapack.__pyx_capi__[name]
    except (ImportError, AttributeError, KeyError):
        return None
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    signature = get_name(capsule)
    c_real = {"s": "float", "d": "double"}
    got = re.sub(r"\b\w*cython_lapack_([sd])\b", lambda t: c_real[t[1]],
                 (signature or b"").decode())  # Cython names the typedefs of cython_lapack.pxd after the module
    if got != f"void ({', '.join(a.replace('R *', c_real[name[0]] + ' *') for a in args)})":
        return None
    return ctypes.CFUNCTYPE(None, *(ctypes.c_void_p,) * len(args))(get_pointer(capsule, signature))


def host_solvers() -> dict[str, str]:
    """Which host solvers :func:`stedc` (tridiagonal eigenproblem) and :func:`bdsdc` (bidiagonal SVD) use here."""
    lapack = _scipy_lapack()
    return {
        "tridiagonal": "SciPy ?stevd (LAPACK divide and conquer, ?stedc)" if lapack is not None and
                       hasattr(lapack, "dstevd") else "numpy.linalg.eigh of the dense matrix (O(n^3))",
        "bidiagonal": "SciPy cython_lapack ?bdsdc (LAPACK divide and conquer)" if _cython_lapack("dbdsdc", _BDSDC_ARGS)
                      else "numpy.linalg.svd of the dense matrix (O(n^3))",
    }


def stedc(d: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the real symmetric tridiagonal (d, e) on the host.

    With SciPy: LAPACK's divide and conquer, ``scipy.linalg.lapack.?stevd`` (``?stedc`` after scaling; SciPy's
    Python wrappers do not export ``?stedc`` itself), O(n^2) work when deflation is strong and BLAS-3 merges
    otherwise.  Without SciPy, or where it reports a failure: ``numpy.linalg.eigh`` of the dense matrix (LAPACK
    ``?syevd``: a dense tridiagonal reduction first, O(n^3))."""
    n = len(d)
    if n == 0:
        return np.zeros(0, d.dtype), np.zeros((0, 0), d.dtype)
    lapack = _scipy_lapack()
    if n > 1 and lapack is not None and hasattr(lapack, "dstevd"):
        routine = lapack.sstevd if d.dtype == np.float32 else lapack.dstevd
        vals, vecs, info = routine(d, e, compute_v=1)
        if info == 0:
            return vals, vecs
    return np.linalg.eigh(np.diag(d) + np.diag(e, -1) + np.diag(e, 1))


def bdsdc(d: np.ndarray, e: np.ndarray, compute_uv: bool = True):
    """SVD of the real upper bidiagonal B (diagonal ``d``, superdiagonal ``e``) on the host: ``(U, s, Vh)`` with
    ``B = U diag(s) Vh`` and ``s`` descending, or ``s`` alone.

    With SciPy: LAPACK's divide and conquer ``?bdsdc`` (COMPQ='I'; 'N' for the values alone, by dqds), called
    through ``scipy.linalg.cython_lapack``'s function pointer since ``scipy.linalg.lapack`` does not wrap it.
    Without SciPy, or where it reports a failure: ``numpy.linalg.svd`` of the dense n x n B (LAPACK ``?gesdd``: a
    dense bidiagonal reduction first, O(n^3))."""
    n = len(d)
    real = d.dtype
    routine = _cython_lapack(("s" if real == np.float32 else "d") + "bdsdc", _BDSDC_ARGS) if n > 1 else None
    if routine is not None:
        ints = np.array([n, n, 0, 0], np.int32)  # n, ldu (= ldvt), info, a dummy for iq
        dd, ee = np.array(d, real), np.zeros(n, real)
        ee[:n - 1] = e
        shape = (n, n) if compute_uv else (1, 1)
        u, vt = np.zeros(shape, real, order="F"), np.zeros(shape, real, order="F")
        if not compute_uv:
            ints[1] = 1
        work = np.zeros(3 * n * n + 4 * n if compute_uv else 4 * n, real)
        iwork, q = np.zeros(8 * n, np.int32), np.zeros(1, real)
        addr = ints.ctypes.data
        routine(b"U", b"I" if compute_uv else b"N", addr, dd.ctypes.data, ee.ctypes.data, u.ctypes.data, addr + 4,
                vt.ctypes.data, addr + 4, q.ctypes.data, addr + 12, work.ctypes.data, iwork.ctypes.data, addr + 8)
        if ints[2] == 0:
            order = np.argsort(-dd, kind="stable")  # ?bdsdc sorts them already; kept exact if it did not
            if not compute_uv:
                return dd[order]
            return u[:, order], dd[order], vt[order]
    b = np.diag(d) + np.diag(e, 1) if n > 1 else np.diag(d)
    return np.linalg.svd(b, compute_uv=compute_uv)
