"""MAGMA on the simulator: each routine pymagma binds is checked against pymagma's own prototype tables
(:data:`pymagma._magma.SIGNATURES`: arity, integer sizes, enum values, scalar ctypes), passed through a real ctypes
function pointer built from its prototype (so ctypes converts the arguments exactly as for the native library),
then checked as MAGMA checks it (:mod:`.magma_args`: a bad argument k computes nothing and is recorded in
``xerbla_calls``, with ``info = -k`` where the routine reports one), then run by a NumPy model of MAGMA's documented
column-major semantics on the simulated device memory.

:class:`SimulatedMagma` stands in for the :class:`~pymagma._ffi.NativeLibrary` of ``_magma.library()``: ``has``,
``bind``, ``missing`` and attribute calls.  It exports what the MAGMA provider pymagma found exports (mode
``"partial"``) or every modelled routine (mode ``"full"``); ``hidden`` families are reported as not exported too
(tests use it to exercise pymagma's fallbacks).
"""

from __future__ import annotations

import collections
import ctypes
import functools
import itertools
import threading
import weakref

import numpy as np

from .. import _magma as M
from .._ffi import Bindings
from ..errors import MissingSymbolError, NotSimulatedError
from . import magma_args
from . import plans as _plans
from .cudnn.numerics import tf32
from .exports import HiddenFamilies, provider_exports  # noqa: F401 - (provider_exports: its home before)
from .magma_args import ENUMS, INT_RANGE, MagmaCallError, Rejected  # noqa: F401 - (their home before; still here)

LIBRARY_NAME = "pymagma's simulated MAGMA"


def require(ok: bool, message: str) -> None:
    if not ok:
        raise MagmaCallError(message)


# ----------------------------------------------------------------------------------------------------- memory model
def view(ptr, shape, strides, dtype):
    """A writable NumPy view of simulated device memory (shape and strides in elements)."""
    dtype = np.dtype(dtype)
    if 0 in shape:
        return np.zeros(shape, dtype)
    if not ptr:
        raise MagmaCallError(f"a null pointer for a {shape} {dtype.name} operand")
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(ptr)
    return np.ndarray(shape, dtype, buffer=buf, strides=tuple(s * dtype.itemsize for s in strides))


def cm(ptr, rows, cols, ld, dtype):
    """A column-major ``rows x cols`` matrix with leading dimension ``ld`` (the argument checks rejected a short
    ``ld`` before any model runs: here it is the simulator's own guard)."""
    if rows and cols and ld < rows:
        raise MagmaCallError(f"leading dimension {ld} < rows {rows}: MAGMA would reject this")
    return view(ptr, (rows, cols), (1, ld), dtype)


def op(x, trans):
    """``x``, its transpose or its conjugate transpose, as MAGMA's ``trans`` says."""
    return {M.MagmaNoTrans: x, M.MagmaTrans: x.T, M.MagmaConjTrans: np.conj(x.T)}[trans]


def address(x) -> int:
    """The address behind a pointer argument: an int, None, a ctypes object or ``ctypes.byref(...)``."""
    if x is None or isinstance(x, int):
        return x or 0
    if type(x).__name__ == "CArgObject":
        return ctypes.addressof(x._obj)
    return ctypes.addressof(x)


def value(x):
    """The Python value of a scalar argument (complex for MAGMA's complex structures)."""
    return complex(x.real, x.imag) if isinstance(x, ctypes.Structure) else getattr(x, "value", x)


# ----------------------------------------------------------------------------------------------------- MAGMA model
def _ints(ptr, n):
    return view(address(ptr), (n,), (1,), M.MAGMA_INT)


def gemm(k, dt):  # as in BLAS, beta = 0 means C is not read (it may hold NaNs)
    A = cm(k["dA"], *((k["m"], k["k"]) if k["transA"] == M.MagmaNoTrans else (k["k"], k["m"])), k["ldda"], dt)
    B = cm(k["dB"], *((k["k"], k["n"]) if k["transB"] == M.MagmaNoTrans else (k["n"], k["k"])), k["lddb"], dt)
    if k.get("math_mode", 0) & 0xF == CUBLAS_TF32_TENSOR_OP_MATH:  # cublasSgemm on a TF32 handle
        A, B = tf32(A), tf32(B)
    C = cm(k["dC"], k["m"], k["n"], k["lddc"], dt)
    C[...] = k["alpha"] * (op(A, k["transA"]) @ op(B, k["transB"])) + (k["beta"] * C if k["beta"] else 0)


def hgemmx(k):  # float16 operands (exact in float32), float32 products, sums, alpha, beta and C
    A = cm(k["dA"], *((k["m"], k["k"]) if k["transA"] == M.MagmaNoTrans else (k["k"], k["m"])), k["ldda"], np.float16)
    B = cm(k["dB"], *((k["k"], k["n"]) if k["transB"] == M.MagmaNoTrans else (k["n"], k["k"])), k["lddb"], np.float16)
    C = cm(k["dC"], k["m"], k["n"], k["lddc"], np.float32)
    product = op(A.astype(np.float32), k["transA"]) @ op(B.astype(np.float32), k["transB"])
    C[...] = np.float32(k["alpha"]) * product + (np.float32(k["beta"]) * C if k["beta"] else 0)


def gemm_batched(k, dt):
    ptrs = [view(k[f"d{x}_array"], (k["batchCount"],), (1,), np.int64) for x in "ABC"]
    for a, b, c in zip(*ptrs):
        gemm(dict(k, dA=int(a), dB=int(b), dC=int(c)), dt)


def gemm_strided(k, dt):
    item = np.dtype(dt).itemsize
    for i in range(k["batchCount"]):
        gemm(dict(k, dA=k["dA"] + i * k["strideA"] * item, dB=k["dB"] + i * k["strideB"] * item,
                  dC=k["dC"] + i * k["strideC"] * item), dt)


def gemv(k, dt):
    A = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    lx, ly = (k["n"], k["m"]) if k["transA"] == M.MagmaNoTrans else (k["m"], k["n"])
    x = view(k["dx"], (lx,), (k["incx"],), dt).copy()
    y = view(k["dy"], (ly,), (k["incy"],), dt)
    y[...] = k["alpha"] * (op(A, k["transA"]) @ x) + (k["beta"] * y if k["beta"] else 0)


def triangle(k, dt):
    """The triangular operand of trsm/trmm as a dense copy (``uplo``'s triangle, unit diagonal when ``diag`` says)."""
    na = k["m"] if k["side"] == M.MagmaLeft else k["n"]
    A = cm(k["dA"], na, na, k["ldda"], dt).copy()
    A = np.tril(A) if k["uplo"] == M.MagmaLower else np.triu(A)
    if k["diag"] == M.MagmaUnit:
        np.fill_diagonal(A, 1)
    return A


def solve_triangular(T, B, lower: bool):
    """``T X = B`` by substitution, as cuBLAS: a zero on the diagonal gives inf/NaN, no error."""
    X = np.array(B, dtype=np.result_type(T, B))
    rows = range(T.shape[0]) if lower else range(T.shape[0] - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in rows:
            done = slice(0, i) if lower else slice(i + 1, None)
            X[i] = (X[i] - T[i, done] @ X[done]) / T[i, i]
    return X


def trsm(k, dt):
    A = triangle(k, dt)
    B = cm(k["dB"], k["m"], k["n"], k["lddb"], dt)
    opA = op(A, k["trans"])
    lower = (k["uplo"] == M.MagmaLower) == (k["trans"] == M.MagmaNoTrans)  # op(A)'s triangle
    if k["side"] == M.MagmaLeft:
        B[...] = solve_triangular(opA, k["alpha"] * B, lower)
    else:  # X op(A) = alpha B  <=>  op(A)^T X^T = alpha B^T
        B[...] = solve_triangular(opA.T, (k["alpha"] * B).T, not lower).T


def syrk(k, dt):
    n = k["n"]
    A = cm(k["dA"], *((n, k["k"]) if k["trans"] == M.MagmaNoTrans else (k["k"], n)), k["ldda"], dt)
    C = cm(k["dC"], n, n, k["lddc"], dt)
    full = k["alpha"] * (A @ A.T if k["trans"] == M.MagmaNoTrans else A.T @ A) + (k["beta"] * C if k["beta"] else 0)
    mask = np.tril(np.ones((n, n), bool)) if k["uplo"] == M.MagmaLower else np.triu(np.ones((n, n), bool))
    C[mask] = full[mask]


def trmm(k, dt):
    A = triangle(k, dt)
    B = cm(k["dB"], k["m"], k["n"], k["lddb"], dt)
    B[...] = k["alpha"] * (op(A, k["trans"]) @ B if k["side"] == M.MagmaLeft else B @ op(A, k["trans"]))


def herk(k, dt):  # C = alpha op(A) op(A)^H + beta C on one triangle; the diagonal's imaginary part is set to zero
    n = k["n"]
    A = cm(k["dA"], *((n, k["k"]) if k["trans"] == M.MagmaNoTrans else (k["k"], n)), k["ldda"], dt)
    opA = A if k["trans"] == M.MagmaNoTrans else np.conj(A.T)
    C = cm(k["dC"], n, n, k["lddc"], dt)
    full = k["alpha"] * (opA @ np.conj(opA.T)) + (k["beta"] * C if k["beta"] else 0)
    np.fill_diagonal(full, full.diagonal().real)
    mask = np.tril(np.ones((n, n), bool)) if k["uplo"] == M.MagmaLower else np.triu(np.ones((n, n), bool))
    C[mask] = full[mask]


def _from_triangle(k, n, dt, hermitian: bool):
    """The full symmetric (or Hermitian: conjugated mirror, real diagonal) matrix stored in one triangle of dA."""
    A = cm(k["dA"], n, n, k["ldda"], dt)
    tri = np.tril(A) if k["uplo"] == M.MagmaLower else np.triu(A)
    mirror = np.conj(tri.T) if hermitian else tri.T
    full = tri + mirror - np.diag(np.diag(tri))
    if hermitian:
        np.fill_diagonal(full, np.diag(tri).real)
    return full


def symv(k, dt, hermitian: bool = False):
    n = k["n"]
    x = view(k["dx"], (n,), (k["incx"],), dt).copy()
    y = view(k["dy"], (n,), (k["incy"],), dt)
    y[...] = k["alpha"] * (_from_triangle(k, n, dt, hermitian) @ x) + (k["beta"] * y if k["beta"] else 0)


def syr2k(k, dt, hermitian: bool = False):
    n = k["n"]
    shape = (n, k["k"]) if k["trans"] == M.MagmaNoTrans else (k["k"], n)
    A, B = cm(k["dA"], *shape, k["ldda"], dt), cm(k["dB"], *shape, k["lddb"], dt)
    if k["trans"] != M.MagmaNoTrans:
        A, B = (np.conj(A.T), np.conj(B.T)) if hermitian else (A.T, B.T)
    adj = (lambda x: np.conj(x.T)) if hermitian else (lambda x: x.T)
    alpha = k["alpha"]
    C = cm(k["dC"], n, n, k["lddc"], dt)
    full = alpha * (A @ adj(B)) + (np.conj(alpha) if hermitian else alpha) * (B @ adj(A)) + \
        (k["beta"] * C if k["beta"] else 0)
    if hermitian:
        np.fill_diagonal(full, full.diagonal().real)
    mask = np.tril(np.ones((n, n), bool)) if k["uplo"] == M.MagmaLower else np.triu(np.ones((n, n), bool))
    C[mask] = full[mask]


def transpose(k, dt):
    src = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    cm(k["dAT"], k["n"], k["m"], k["lddat"], dt)[...] = src.T


def laswp(k, dt):  # the matrix is stored row-wise: row i starts at dAT + i * ldda
    require(k["inci"] == 1, f"laswp: inci {k['inci']} != 1 is not modelled")
    piv = view(address(k["ipiv"]), (k["k2"],), (1,), M.MAGMA_INT)
    rows = view(k["dAT"], (k["k2"], k["n"]), (k["ldda"], 1), dt)
    for i in range(k["k1"] - 1, k["k2"]):
        j = piv[i] - 1
        if j >= rows.shape[0]:
            rows = view(k["dAT"], (j + 1, k["n"]), (k["ldda"], 1), dt)
        rows[[i, j]] = rows[[j, i]]


def getrf(k, dt):
    m, n = k["m"], k["n"]
    A = cm(k["dA"], m, n, k["ldda"], dt)
    ipiv, info = _ints(k["ipiv"], min(m, n)), _ints(k["info"], 1)
    info[0] = 0
    for j in range(min(m, n)):  # the pivot as i?amax picks it: the largest |Re| + |Im| (the first of equals)
        p = j + int(np.argmax(np.abs(A[j:, j].real) + np.abs(A[j:, j].imag)))
        ipiv[j] = p + 1
        A[[j, p]] = A[[p, j]]
        if A[j, j] == 0:
            info[0] = info[0] or j + 1
            continue
        A[j + 1:, j] /= A[j, j]
        A[j + 1:, j + 1:] -= np.outer(A[j + 1:, j], A[j, j + 1:])
    return int(info[0])


def trsm_batched(k, dt):
    a = view(k["dA_array"], (k["batchCount"],), (1,), np.int64)
    b = view(k["dB_array"], (k["batchCount"],), (1,), np.int64)
    for pa, pb in zip(a, b):
        trsm(dict(k, dA=int(pa), dB=int(pb), trans=k["transA"]), dt)


def transpose_batched(k, dt):
    src = view(k["dA_array"], (k["batchCount"],), (1,), np.int64)
    dst = view(k["dAT_array"], (k["batchCount"],), (1,), np.int64)
    for a, at in zip(src, dst):
        transpose(dict(k, dA=int(a), dAT=int(at)), dt)


def getrf_batched(k, dt):
    count, item = k["batchCount"], np.dtype(M.MAGMA_INT).itemsize
    mats = view(k["dA_array"], (count,), (1,), np.int64)
    pivs = view(k["ipiv_array"], (count,), (1,), np.int64)
    for i in range(count):
        getrf(dict(k, dA=int(mats[i]), ldda=k["lda"], ipiv=int(pivs[i]), info=k["info_array"] + i * item), dt)
    return 0


def potrf(k, dt):
    require(k["uplo"] == M.MagmaLower, "only the lower triangle is modelled (uplo = MagmaLower)")
    n = k["n"]
    A = cm(k["dA"], n, n, k["ldda"], dt)
    info = _ints(k["info"], 1)
    for order in range(1, n + 1):
        try:
            np.linalg.cholesky(A[:order, :order])
        except np.linalg.LinAlgError:
            info[0] = order
            return order
    A[...] = np.where(np.tril(np.ones((n, n), bool)), np.linalg.cholesky(A), A)
    info[0] = 0
    return 0


def potrf_batched(k, dt):
    count, item = k["batchCount"], np.dtype(M.MAGMA_INT).itemsize
    for i, ptr in enumerate(view(k["dA_array"], (count,), (1,), np.int64)):
        potrf(dict(k, dA=int(ptr), ldda=k["lda"], info=k["info_array"] + i * item), dt)
    return 0


def potrs(k, dt):
    require(k["uplo"] == M.MagmaLower, "only the lower triangle is modelled (uplo = MagmaLower)")
    n = k["n"]
    L = np.tril(cm(k["dA"], n, n, k["ldda"], dt))
    B = cm(k["dB"], n, k["nrhs"], k["lddb"], dt)
    B[...] = np.linalg.solve(L @ np.conj(L.T), B)
    _ints(k["info"], 1)[0] = 0
    return 0


def potrs_batched(k, dt):
    pairs = zip(*(view(k[f"d{x}_array"], (k["batchCount"],), (1,), np.int64) for x in "AB"))
    for a, b in pairs:
        potrs(dict(k, dA=int(a), dB=int(b), info=ctypes.byref(M.MAGMA_INT())), dt)
    return 0


def laset(k, dt):
    A = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    r, c = np.indices(A.shape)
    part = {M.MagmaLower: r > c, M.MagmaUpper: r < c, M.MagmaFull: r != c}[k["uplo"]]
    A[part] = k["offdiag"]
    np.fill_diagonal(A, k["diag"])


# LAPACK drivers
NB = magma_args.NB


def _set_info(k, v):
    _ints(k["info"], 1)[0] = v
    return v


def _real(dt):
    return np.float32 if np.dtype(dt) in (np.float32, np.complex64) else np.float64


def geqrf2(k, dt):
    """LAPACK's geqrf: R on and above the diagonal, the Householder vectors (unit first entry implied) below it,
    their scalars in ``tau`` (a host array)."""
    m, n = k["m"], k["n"]
    kk = min(m, n)
    if kk:
        A = cm(k["dA"], m, n, k["ldda"], dt)
        h, tau = np.linalg.qr(A, mode="raw")  # LAPACK's geqrf output, h transposed
        A[...] = h.T
        view(address(k["tau"]), (kk,), (1,), dt)[...] = tau[:kk]
    return _set_info(k, 0)


def orgqr2(k, dt):
    """LAPACK's orgqr/ungqr: the first ``n`` columns of ``Q = H(1) ... H(k)``, each ``H(i) = I - tau[i] v v^H``
    read from column ``i`` of ``A`` below the diagonal and from ``tau`` (nothing else is read)."""
    m, n, kk = k["m"], k["n"], k["k"]
    if n <= 0:
        return _set_info(k, 0)
    A = cm(address(k["A"]), m, n, k["lda"], dt)
    tau = view(address(k["tau"]), (kk,), (1,), dt).copy()
    V = np.tril(A[:, :kk], -1) + np.eye(m, kk, dtype=dt)
    Q = np.eye(m, n, dtype=dt)
    for i in range(kk - 1, -1, -1):
        v = V[i:, i]
        Q[i:, :] -= tau[i] * np.outer(v, np.conj(v) @ Q[i:, :])
    A[...] = Q
    return _set_info(k, 0)


def gels(k, dt):
    m, n = k["m"], k["n"]
    view(address(k["hwork"]), (1,), (1,), dt)[0] = magma_args.workspace("magma_?gels_gpu", k)["work"]
    if k["lwork"] == -1 or min(m, n, k["nrhs"]) == 0:
        return _set_info(k, 0)
    A = cm(k["dA"], m, n, k["ldda"], dt)
    B = cm(k["dB"], m, k["nrhs"], k["lddb"], dt)
    q, r = np.linalg.qr(A, mode="complete")
    qb = np.conj(q.T) @ B
    with np.errstate(all="ignore"):  # a singular R gives what a triangular solve gives: huge or non-finite entries
        B[:n] = _triangular_solve(r[:n, :n], qb[:n])
    B[n:] = qb[n:]
    _geqrf_gpu_factor(A, dt)
    return _set_info(k, 0)


#: the block size of the simulated geqrf_gpu (MAGMA's depends on the size and the GPU; any value models the layout)
GEQRF_NB = 32


def _geqrf_gpu_factor(A, dt) -> None:
    """``A`` as magma_?geqrf_gpu (inside gels_gpu) leaves it: LAPACK's factor, except that each nb x nb diagonal
    block holds only its reflectors (0 above, 1 on the diagonal): R's diagonal blocks go, inverted, to the dT
    workspace (freed by gels). Code reading R's diagonal from dA after gels reads ones."""
    factor = np.linalg.qr(A, mode="raw")[0].T
    k = min(A.shape)
    for start in range(0, k, GEQRF_NB):
        stop = min(start + GEQRF_NB, k)
        block = factor[start:stop, start:stop]
        block[np.triu_indices(stop - start, 1)] = 0
        np.fill_diagonal(block, 1)
    A[...] = factor.astype(dt, copy=False)


def _triangular_solve(r, b):
    """``r x = b`` for upper triangular ``r`` by back substitution (no pivoting, no singularity check)."""
    x = np.zeros_like(b)
    for i in range(r.shape[0] - 1, -1, -1):
        x[i] = (b[i] - r[i, i + 1:] @ x[i + 1:]) / r[i, i]
    return x


def _answer_query(k, dt, sizes) -> None:
    """A workspace query's answer in ``work[0]`` (``rwork[0]``, ``iwork[0]``)."""
    types = {"work": dt, "rwork": _real(dt), "iwork": M.MAGMA_INT}
    for name, size in sizes.items():
        view(address(k[name]), (1,), (1,), types[name])[0] = size


def syevd(k, dt):
    n = k["n"]
    complex_ = np.issubdtype(dt, np.complexfloating)
    _answer_query(k, dt, magma_args.workspace("magma_?syevd_gpu", k, complex_))
    if magma_args.syevd_query(k) or n == 0:
        return _set_info(k, 0)
    A = cm(k["dA"], n, n, k["ldda"], dt)
    uplo = "L" if k["uplo"] == M.MagmaLower else "U"
    if k["jobz"] == M.MagmaNoVec:
        w = np.linalg.eigvalsh(A, UPLO=uplo)
    else:
        w, v = np.linalg.eigh(A, UPLO=uplo)
        A[...] = v
    view(address(k["w"]), (n,), (1,), _real(dt))[...] = w
    return _set_info(k, 0)


def gesdd(k, dt):
    m, n = k["m"], k["n"]
    kk = min(m, n)
    if k["lwork"] < 0:
        _answer_query(k, dt, magma_args.workspace("magma_?gesdd", k))
        return _set_info(k, 0)
    require(k["jobz"] != M.MagmaOverwriteVec, "gesdd: jobz = MagmaOverwriteVec is not modelled")
    if kk == 0:
        return _set_info(k, 0)
    A = cm(address(k["A"]), m, n, k["lda"], dt)
    u, s, vt = np.linalg.svd(A, full_matrices=k["jobz"] == M.MagmaAllVec)
    view(address(k["s"]), (kk,), (1,), _real(dt))[...] = s
    if k["jobz"] != M.MagmaNoVec:
        cm(address(k["U"]), m, u.shape[1], k["ldu"], dt)[...] = u
        cm(address(k["VT"]), vt.shape[0], n, k["ldvt"], dt)[...] = vt
    return _set_info(k, 0)


def geev(k, dt):
    n = k["n"]
    if k["lwork"] == -1:
        _answer_query(k, dt, magma_args.workspace("magma_?geev", k, "w" in k))
        return _set_info(k, 0)
    if n == 0:
        return _set_info(k, 0)
    require(k["jobvl"] == M.MagmaNoVec, "geev: only right eigenvectors are modelled")
    A = cm(address(k["A"]), n, n, k["lda"], dt)
    w, v = np.linalg.eig(A)
    VR = cm(address(k["VR"]), n, n, k["ldvr"], dt) if k["jobvr"] == M.MagmaVec else None
    if "w" in k:
        view(address(k["w"]), (n,), (1,), dt)[...] = w
        if VR is not None:
            VR[...] = v
        return _set_info(k, 0)
    view(address(k["wr"]), (n,), (1,), dt)[...] = w.real
    view(address(k["wi"]), (n,), (1,), dt)[...] = w.imag
    j = 0
    while VR is not None and j < n:  # LAPACK's real layout: a conjugate pair stores Re and Im of the first vector
        if w[j].imag != 0:
            VR[:, j], VR[:, j + 1] = v[:, j].real, v[:, j].imag
            j += 2
        else:
            VR[:, j] = v[:, j].real
            j += 1
    return _set_info(k, 0)


def vec(k, name, dt, n_key="n"):
    return view(k[f"d{name}"], (k[n_key],), (k[f"inc{name}"],), dt)


MODEL = {
    "magma_?gemm": gemm, "magma_hgemmx": lambda k, dt: hgemmx(k),
    "magmablas_?gemm_batched": gemm_batched, "magmablas_?gemm_batched_strided": gemm_strided,
    "magma_?gemv": gemv, "magma_?trsm": trsm, "magma_?syrk": syrk, "magmablas_?transpose": transpose,
    "magmablas_?laswp": laswp, "magma_?getrf_gpu": getrf, "magmablas_?transpose_batched": transpose_batched,
    "magma_?getrf_batched": getrf_batched, "magmablas_?trsm_batched": trsm_batched, "magma_?potrf_gpu": potrf,
    "magma_?potrf_batched": potrf_batched, "magma_?potrs_batched": potrs_batched,
    "magma_?potrs_gpu": potrs,
    "magmablas_?laset": laset, "magma_?geqrf2_gpu": geqrf2, "magma_?orgqr2": orgqr2, "magma_?gels_gpu": gels,
    "magma_get_?geqrf_nb": lambda k, dt: NB, "magma_get_?potrf_nb": lambda k, dt: NB,
    "magma_?trmm": trmm, "magma_?herk": herk, "magma_?symv": symv, "magma_?syr2k": syr2k,
    "magma_?hemv": functools.partial(symv, hermitian=True), "magma_?her2k": functools.partial(syr2k, hermitian=True),
    "magma_?syevd_gpu": syevd, "magma_?gesdd": gesdd, "magma_?geev": geev,
    "magma_?axpy": lambda k, dt: vec(k, "y", dt).__setitem__(Ellipsis, vec(k, "y", dt) + k["alpha"] * vec(k, "x", dt)),
    "magma_?scal": lambda k, dt: vec(k, "x", dt).__setitem__(Ellipsis, k["alpha"] * vec(k, "x", dt)),
    "magma_?copy": lambda k, dt: vec(k, "y", dt).__setitem__(Ellipsis, vec(k, "x", dt).copy()),
    "magma_?dot": lambda k, dt: np.dot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?dotu": lambda k, dt: np.dot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?dotc": lambda k, dt: np.vdot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?nrm2": lambda k, dt: float(np.linalg.norm(vec(k, "x", dt))),
    "magma_?asum": lambda k, dt: float(np.sum(np.abs(vec(k, "x", dt).real)) + np.sum(np.abs(vec(k, "x", dt).imag))),
}


# ----------------------------------------------------------------------------------------------------- rejected calls
_LIBRARIES: weakref.WeakSet = weakref.WeakSet()  # every SimulatedMagma made (their records, for the tests)


def take_rejected() -> list[Rejected]:
    """Every rejected call recorded by any simulated MAGMA since the last take, oldest first; the records are
    cleared (tests check that none was left unexpected)."""
    out = []
    for library in list(_LIBRARIES):
        out += library.xerbla_calls
        library.xerbla_calls.clear()
    return out


# ----------------------------------------------------------------------------------------------------- auxiliary
_queue_handles = itertools.count(0x7100)
#: the auxiliary routines, modelled by :class:`SimulatedMagma` itself (queues live on its simulated runtime)
AUX_FAMILIES = frozenset({"magma_init", "magma_finalize", "magma_strerror", "magma_queue_create",
                          "magma_queue_create_from_cuda", "magma_queue_destroy", "magma_queue_sync",
                          "magma_queue_get_device", "magma_queue_get_cuda_stream",
                          "magma_queue_get_cublas_handle"})
CUBLAS_HANDLE_OFFSET = 1 << 32  #: a queue's simulated cuBLAS handle is the queue's handle plus this
CUBLAS_TF32_TENSOR_OP_MATH = 3  #: the math mode with which cublasSgemm (MAGMA's sgemm) reads operands as TF32


# ----------------------------------------------------------------------------------------------------- the library
_ADDRESS_TOKENS = frozenset({"D", "H", "DA", "IH", "ID", "IDA", "Q", "QP", "V", "VP", "ZP", "STREAM", "HANDLE"})


def _plan_key(sig, argtypes):
    """A call's plan key (:mod:`.plans`): every argument's value (what MAGMA's checks read), or whether it is null for
    a pointer; None for a routine with a complex scalar (a structure: no value to compare)."""
    if any(isinstance(t, type) and issubclass(t, ctypes.Structure) for t in argtypes):
        return None
    return _plans.key_function([f"not args[{i}]" if token in _ADDRESS_TOKENS else f"args[{i}]"
                                for i, (token, _) in enumerate(sig.args)])


def _kwargs(sig, values_):
    """The model's view of a call: argument name -> Python value (scalars, ints) or address (pointers)."""
    out = {}
    for (token, arg), v in zip(sig.args, values_):
        if token in ("S", "R"):
            out[arg] = value(v)
        elif token in _ADDRESS_TOKENS:
            out[arg] = address(v)
        else:
            out[arg] = v
    return out


class SimulatedMagma:
    """The simulated MAGMA library: looks a routine up in pymagma's tables, checks each call against its
    signature, runs the NumPy model.  ``exports`` (table names) limits what it exports (None: every modelled
    routine); ``calls`` keeps the names of the latest calls (tests read it)."""

    def __init__(self, exports: frozenset[str] | None = None, source: str = "every modelled routine", streams=None):
        self._wrappers: dict[str, object] = {}  # name -> its checked callable, made once
        self._bound = Bindings(self._bind)  # name -> its callable while it is exported (cleared when that may change)
        self.bind = self._bound.__getitem__  # (a C-level look-up once bound; see Bindings)
        self.exports, self.source = exports, source
        self.streams = streams  #: the simulated CUDA runtime whose streams queues run on (None: work runs at once)
        self.queues: dict[int, tuple[int, int]] = {}  # simulated magma_queue_t -> (device, cudaStream_t)
        self._own_stream: set[int] = set()  # the queues whose stream magma_queue_create made (destroyed with them)
        self._failure = threading.local()
        self.xerbla_calls: list[Rejected] = []  #: the calls MAGMA or cuBLAS rejected (nothing computed)
        self.cublas_math_modes: dict[int, int] = {}  #: cuBLAS handle -> math mode (set by the simulated cuBLAS)
        #: on the null device, a routine's argument values (and which pointers are null) that passed MAGMA's checks
        #: once are not checked again (:mod:`pymagma.simulator.plans`); False: checked at every call
        self.planning = _plans.enabled_from_environment()
        self.plans = _plans.Plans()
        _LIBRARIES.add(self)
        self._aux = {
            "magma_init": lambda k, dt: 0,
            "magma_finalize": lambda k, dt: 0,
            "magma_strerror": lambda k, dt: f"MAGMA error {k['error']} (simulated: the simulator has no error "
                                            "texts)".encode(),
            "magma_queue_create": self._queue_create,
            "magma_queue_create_from_cuda": lambda k, dt: self._queue_create(k, dt, address(k["stream"])),
            "magma_queue_destroy": lambda k, dt: self.destroy_queue(address(k["queue"])),
            "magma_queue_sync": lambda k, dt: self._queue_sync(address(k["queue"])),
            "magma_queue_get_device": lambda k, dt: self._queue(k)[0],
            "magma_queue_get_cuda_stream": lambda k, dt: self._queue(k)[1] or None,
            "magma_queue_get_cublas_handle": lambda k, dt: (address(k["queue"]) + CUBLAS_HANDLE_OFFSET
                                                            if address(k["queue"]) in self.queues else None),
        }
        self.reset()

    # ------------------------------------------------------------------------------------------------- queues
    def _queue_create(self, k, dt, stream: int | None = None):
        """magma_queue_create makes a new stream (its work waits until ordered, see the simulated runtime);
        magma_queue_create_from_cuda uses the given one."""
        handle = next(_queue_handles)
        if stream is None:
            stream = self.streams.create_stream() if self.streams is not None else 0
            self._own_stream.add(handle)
        self.queues[handle] = (k["device"], stream)
        view(address(k["queue_ptr"]), (1,), (1,), np.uintp)[0] = handle

    def destroy_queue(self, handle: int) -> None:
        """Enqueued work still runs; the stream magma_queue_create made goes with the queue."""
        self._queue_sync(handle)
        stream = self.queues.pop(handle, (0, 0))[1]
        if handle in self._own_stream:
            self._own_stream.discard(handle)
            if self.streams is not None:
                self.streams.destroy_stream(stream)

    def _queue_sync(self, handle: int) -> None:
        stream = self.queues.get(handle, (0, 0))[1]
        if self.streams is not None and stream:
            self.streams.flush(stream)

    def _queue(self, k) -> tuple[int, int]:
        return self.queues.get(address(k["queue"]), (0, 0))

    def queue_of_cublas_handle(self, handle: int) -> int | None:
        """The live queue whose cuBLAS handle ``handle`` is (None: none), for the simulated cuBLAS."""
        queue = handle - CUBLAS_HANDLE_OFFSET
        return queue if queue in self.queues else None

    def reset(self) -> None:
        """Forget the recorded calls and hide nothing."""
        self.calls: collections.deque[str] = collections.deque(maxlen=100_000)
        self.hidden: set[str] = set()  # families to report as not exported (exercises fallbacks)

    # ------------------------------------------------------------------------------------------------- lookup
    @property
    def hidden(self) -> set[str]:
        """Families reported as not exported (a set: assigned or changed in place, every routine bound since is
        looked up again)."""
        return self._hidden

    @hidden.setter
    def hidden(self, families) -> None:
        self._hidden = HiddenFamilies(families, self._bound.clear)
        self._bound.clear()

    @property
    def exports(self) -> frozenset[str] | None:
        """The table names exported (None: every modelled routine); a new value: every routine looked up again."""
        return self._exports

    @exports.setter
    def exports(self, names) -> None:
        self._exports = names
        self._bound.clear()

    @property
    def path(self) -> str:
        return LIBRARY_NAME

    def symbol_name(self, name: str) -> str:
        return M.SIGNATURES[name].symbol if name in M.SIGNATURES else name

    def modelled(self, name: str) -> bool:
        return name in M.SIGNATURES and (M.SIGNATURES[name].family in MODEL or M.SIGNATURES[name].family in self._aux)

    def has(self, name: str) -> bool:
        return self.modelled(name) and (self.exports is None or name in self.exports) and \
            M.SIGNATURES[name].family not in self.hidden

    def missing(self) -> list[str]:
        return sorted(n for n in M.SIGNATURES if not self.has(n))

    def exported(self) -> list[str]:
        return sorted(n for n in M.SIGNATURES if self.has(n))

    def bind(self, name: str):
        """The checked callable of routine ``name``; an instance's ``bind`` is its :class:`~pymagma._ffi.Bindings`'
        look-up (a routine bound before, while nothing hidden or exported changed since, found without a frame)."""
        return self._bound[name]

    def _bind(self, name: str):
        if name not in M.SIGNATURES:
            raise AttributeError(f"MAGMA has no prototype for {name!r} in pymagma's tables")
        if not self.modelled(name):
            raise NotSimulatedError(f"{name} is not simulated: pymagma.simulator.magma has no NumPy model of "
                                    f"{M.SIGNATURES[name].family}")
        if not self.has(name):
            raise MissingSymbolError(self.symbol_name(name), LIBRARY_NAME, self._why_missing(name))
        call = self._wrappers.get(name) or self._wrappers.setdefault(name, self._wrap(name))
        self._bound[name] = call  # (found at once until hidden or exports change: HiddenFamilies, the setters)
        return call

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.bind(name)

    def _why_missing(self, name: str) -> str:
        family = M.SIGNATURES[name].family
        if family in self.hidden:
            return f"{family} is hidden (SimulatedMagma.hidden)"
        if not self.modelled(name):
            return f"the simulator has no NumPy model of {family}"
        return (f"the simulator in mode 'partial' exports what {self.source} exports; mode 'full' "
                "(PYMAGMA_SIMULATOR=full or pymagma.simulator.enable('full')) simulates every modelled routine")

    # ------------------------------------------------------------------------------------------------- calls
    def _wrap(self, name: str):
        """The callable for ``name``: checks, then the model behind a ctypes function pointer of the prototype."""
        sig = M.SIGNATURES[name]
        model = self._aux.get(sig.family) or MODEL[sig.family]
        dtype = np.dtype(M.PRECISIONS[sig.precision][3]) if sig.precision else None
        who, arguments = magma_args.checker(sig.family, dtype) or (None, None)
        has_info = "info" in sig.arg_names
        records = self.xerbla_calls
        restype, argtypes = sig.prototype()
        check = magma_args.table_check(name, sig)
        failure, streams = self._failure, self.streams
        null, aux = bool(getattr(streams, "null", False)), sig.family in AUX_FAMILIES
        structure = isinstance(restype, type) and issubclass(restype, ctypes.Structure)
        on_queue = sig.family not in AUX_FAMILIES and any(token == "Q" for token, _ in sig.args)
        # BLAS-like: no result for the host and no host array MAGMA reads at the call (laswp's pivots): enqueued
        reads_math_mode = name == "magma_sgemm"  # MAGMA's sgemm is cublasSgemm on the queue's handle
        deferrable = on_queue and restype is None and not any(token in ("H", "IH") for token, _ in sig.args)
        reads = getattr(streams, "host_reads", None) if restype is not None and not aux else None  # a host value

        def run(k, key=None):
            """The model, in queue order: on a queue of a created stream, a deferrable routine is enqueued there;
            any other (a LAPACK driver's info, a dot product, host pivots) first runs the queue's work.  A call
            whose arguments MAGMA (or cuBLAS) rejects computes nothing: recorded, info = -k where there is one.
            ``key``: the call's plan key, remembered when the checks pass on the null device."""
            bad = arguments(k) if arguments is not None else None
            if bad is not None:
                records.append(Rejected(name, bad[0], bad[1], k[bad[1]], who))
                if has_info:
                    _set_info(k, -bad[0])
                return -bad[0] if sig.restype == "I" else None
            if reads is not None:
                reads.note(name)
            if null and not aux:  # the null device: checked, then nothing computed (info and results stay as given)
                if key is not None:
                    plans.remember(key, True)
                return 0 if restype is not None else None
            if reads_math_mode:  # cuBLAS chooses its kernel at the call: the handle's math mode now
                k["math_mode"] = self.cublas_math_modes.get(address(k["queue"]) + CUBLAS_HANDLE_OFFSET, 0)
            stream = self._queue(k)[1] if on_queue else 0
            if stream and streams is not None and not deferrable and streams.capturing(stream):
                streams.refuse_in_capture(stream, name)
            if stream and streams is not None and streams.capturing(stream):
                streams.submit(stream, functools.partial(model, k, dtype))  # captured: a node of the graph
                return None
            if stream and streams is not None and streams.position(stream) is not None:
                if deferrable:
                    streams.submit(stream, functools.partial(model, k, dtype))
                    return None
                streams.flush(stream)
            return model(k, dtype)

        if structure or restype is ctypes.c_char_p:  # a callback cannot return these: call the model directly
            def call(*args):
                check(args)
                self.calls.append(name)
                result = run(_kwargs(sig, args))
                return restype(result.real, result.imag) if structure else result

            return call

        planned = _plan_key(sig, argtypes) if null and not aux else None
        plans = self.plans

        def native(*converted):
            key = planned(converted) if planned is not None and self.planning else None
            if key is not None and key in plans:  # these values passed MAGMA's checks: nothing computed
                if reads is not None:
                    reads.note(name)
                return 0 if restype is not None else None
            try:
                return run(_kwargs(sig, converted), key)
            except BaseException as exc:  # ctypes would print and swallow it: keep it for the caller
                failure.exc = exc
                return None if restype is None else restype().value

        pointer = ctypes.CFUNCTYPE(restype, *argtypes)(native)

        def call(*args):
            check(args)
            self.calls.append(name)
            failure.exc = None
            result = pointer(*args)
            exc, failure.exc = failure.exc, None
            if exc is not None:
                raise exc
            return result

        call.__name__ = call.__qualname__ = name
        call.pointer = pointer  # keeps the callback alive as long as the wrapper
        return call
