"""The argument checks of each simulated MAGMA routine: against pymagma's table (:func:`table_check`: arity, types,
enum values, ranges), then as MAGMA 2.7's sources write them.

A LAPACK-style routine (``magma_?getrf_gpu``, ``magma_?potrf_batched``, ...) and MAGMA's own kernels
(``magmablas_?laswp``, ``?transpose``, ``?laset``, ``?gemm_batched``, ``?trsm_batched``) test their arguments in a
"Check arguments" block, call ``magma_xerbla(func, -info)`` for the first bad one (the last one in ``potrs``, which
tests with plain ``if``\\ s) and return without computing anything: ``info = -k`` for the routines that report one.
MAGMA's BLAS wrappers (``magma_?gemm``, ``?trsm``, ...) check nothing and pass the call to cuBLAS, which answers
``CUBLAS_STATUS_INVALID_VALUE`` for the conditions of the reference BLAS (its ``xerbla`` conditions) and computes
nothing; the wrapper drops that status.  Level-1 BLAS has no invalid values (``n <= 0`` returns at once).

:func:`check` gives ``(k, name)`` of the argument MAGMA or cuBLAS rejects (k is MAGMA's 1-based number, which is
not always the argument's position: ``magmablas_?gemm_batched_strided`` reports its core's numbers), or None.
Workspace sizes (``lwork``) come with the routine's query answer from :func:`workspace`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .. import _magma as M
from ..errors import PymagmaError

TRANS = (M.MagmaNoTrans, M.MagmaTrans, M.MagmaConjTrans)
UPLO = (M.MagmaUpper, M.MagmaLower)
SIDE = (M.MagmaLeft, M.MagmaRight)
DIAG = (M.MagmaNonUnit, M.MagmaUnit)
#: MAGMA's magma_get_?sytrd_nb (64 for every size) and magma_get_?gehrd_nb (32 below n = 1024 here)
SYTRD_NB = 64
#: the block size the simulated magma_get_?geqrf_nb / ?potrf_nb answer, and gels's workspace uses
NB = 32


ENUMS = frozenset({M.MagmaNoTrans, M.MagmaTrans, M.MagmaConjTrans, M.MagmaUpper, M.MagmaLower, M.MagmaFull,
                   M.MagmaUnit, M.MagmaNonUnit, M.MagmaLeft, M.MagmaRight, M.MagmaNoVec, M.MagmaVec, M.MagmaIVec,
                   M.MagmaAllVec, M.MagmaSomeVec, M.MagmaOverwriteVec})
INT_RANGE = (-(1 << (8 * ctypes.sizeof(M.MAGMA_INT) - 1)), 1 << (8 * ctypes.sizeof(M.MAGMA_INT) - 1))


class MagmaCallError(PymagmaError, ValueError):
    """A call the native MAGMA would reject or that the simulator does not model (bad arity, type, enum, size)."""


def table_check(name: str, sig: M.Signature):
    """``check(args)``: the call's arguments against pymagma's table before they reach the native seam (arity, an
    int for every size and enum, MAGMA's enum values, magma_int_t's range, the scalars' exact ctypes type), else
    :class:`MagmaCallError`."""
    scalars = {t: M.ctype_of(t, sig.precision) for t in ("S", "R") if sig.precision}
    checks = tuple((i, arg, token, scalars.get(token)) for i, (token, arg) in enumerate(sig.args)
                   if token in ("I", "E", "S", "R"))
    arity = len(sig.args)

    def check(args) -> None:
        if len(args) != arity:
            raise MagmaCallError(f"{name}: {len(args)} arguments, the table has {arity}")
        for i, arg, token, scalar in checks:
            v = args[i]
            if scalar is not None:
                if type(v) is not scalar:
                    raise MagmaCallError(f"{name}({arg}) got {type(v).__name__}, expected {scalar.__name__}")
            elif not (type(v) is int or isinstance(v, np.integer)):
                raise MagmaCallError(f"{name}({arg}) got {type(v).__name__}, expected an int")
            elif token == "E" and v not in ENUMS:
                raise MagmaCallError(f"{name}({arg}) = {v} is not a MAGMA enum value")
            elif not INT_RANGE[0] <= v < INT_RANGE[1]:
                raise MagmaCallError(f"{name}({arg}) = {v} does not fit magma_int_t "
                                     f"({8 * ctypes.sizeof(M.MAGMA_INT)}-bit)")

    return check


def gehrd_nb(n: int) -> int:
    return 32 if n < 1024 else 64


def first(*tests):
    """MAGMA's ``if ... else if ...`` chain: the first ``(k, name, bad)`` that is bad."""
    for k, name, bad in tests:
        if bad:
            return k, name
    return None


def last(*tests):
    """A chain of plain ``if``\\ s (``potrs``): the last bad one wins."""
    found = None
    for k, name, bad in tests:
        if bad:
            found = k, name
    return found


def _rows(trans, no_trans_rows, trans_rows):
    return no_trans_rows if trans == M.MagmaNoTrans else trans_rows


# ----------------------------------------------------------------------------------------------------- MAGMA
def laswp(a):  # magmablas/zlaswp.cu
    return first((1, "n", a["n"] < 0), (3, "ldda", a["n"] > a["ldda"]), (4, "k1", a["k1"] < 1),
                 (5, "k2", a["k2"] < 1), (7, "inci", a["inci"] <= 0))


def transpose(a):  # magmablas/ztranspose.cu (also the batched one)
    return first((1, "m", a["m"] < 0), (2, "n", a["n"] < 0), (4, "ldda", a["ldda"] < a["m"]),
                 (6, "lddat", a["lddat"] < a["n"]))


def laset(a):  # magmablas/zlaset.cu
    return first((1, "uplo", a["uplo"] not in (*UPLO, M.MagmaFull)), (2, "m", a["m"] < 0), (3, "n", a["n"] < 0),
                 (7, "ldda", a["ldda"] < max(1, a["m"])))


def gemm_batched(a):  # magmablas/zgemm_batched_core.cu (the strided one reports these numbers too)
    ta, tb = a["transA"], a["transB"]
    return first((1, "transA", ta not in TRANS), (2, "transB", tb not in TRANS), (3, "m", a["m"] < 0),
                 (4, "n", a["n"] < 0), (5, "k", a["k"] < 0),
                 (8, "ldda", a["ldda"] < _rows(ta, a["m"], a["k"])),
                 (10, "lddb", a["lddb"] < _rows(tb, a["k"], a["n"])),
                 (13, "lddc", a["lddc"] < a["m"]))


def gemm_strided(a):  # magmablas/zgemm_batched.cpp: the core checks each chunk of the batch (none: no check)
    return gemm_batched(a) if a["batchCount"] > 0 else None


def trsm_batched(a):  # magmablas/ztrsm_batched_core.cpp
    nrowa = a["m"] if a["side"] == M.MagmaLeft else a["n"]
    return first((1, "side", a["side"] not in SIDE), (2, "uplo", a["uplo"] not in UPLO),
                 (3, "transA", a["transA"] not in TRANS), (4, "diag", a["diag"] not in DIAG), (5, "m", a["m"] < 0),
                 (6, "n", a["n"] < 0), (9, "ldda", a["ldda"] < max(1, nrowa)), (11, "lddb", a["lddb"] < max(1, a["m"])),
                 (12, "batchCount", a["batchCount"] < 0))


def getrf(a, ld="ldda"):  # src/zgetrf_gpu.cpp, src/zgetrf_batched.cpp (whose lda is MAGMA's ldda)
    return first((1, "m", a["m"] < 0), (2, "n", a["n"] < 0), (4, ld, a[ld] < max(1, a["m"])))


def potrf(a, ld="ldda"):  # src/zpotrf_gpu.cpp, src/zpotrf_batched.cpp
    return first((1, "uplo", a["uplo"] not in UPLO), (2, "n", a["n"] < 0), (4, ld, a[ld] < max(1, a["n"])))


def potrs(a):  # src/zpotrs_gpu.cpp, src/zpotrs_batched.cpp: plain ifs
    n = a["n"]
    return last((1, "uplo", a["uplo"] not in UPLO), (2, "n", n < 0), (3, "nrhs", a["nrhs"] < 0),
                (5, "ldda", a["ldda"] < max(1, n)), (7, "lddb", a["lddb"] < max(1, n)))


def geqrf2(a):  # src/zgeqrf2_gpu.cpp
    return first((1, "m", a["m"] < 0), (2, "n", a["n"] < 0), (4, "ldda", a["ldda"] < max(1, a["m"])))


def orgqr2(a):  # src/zungqr2.cpp
    m, n, k = a["m"], a["n"], a["k"]
    return first((1, "m", m < 0), (2, "n", n < 0 or n > m), (3, "k", k < 0 or k > n),
                 (5, "lda", a["lda"] < max(1, m)))


def gels(a):  # src/zgels_gpu.cpp: only trans = NoTrans and m >= n
    m, n, nrhs = a["m"], a["n"], a["nrhs"]
    return first((1, "trans", a["trans"] != M.MagmaNoTrans), (2, "m", m < 0), (3, "n", n < 0 or m < n),
                 (4, "nrhs", nrhs < 0), (6, "ldda", a["ldda"] < max(1, m)), (8, "lddb", a["lddb"] < max(1, m)),
                 (10, "lwork", a["lwork"] < workspace("magma_?gels_gpu", a)["work"] and a["lwork"] != -1))


def syevd(a, complex_: bool):  # src/dsyevd_gpu.cpp (no ldwa check), src/zheevd_gpu.cpp
    n = a["n"]
    head = first((1, "jobz", a["jobz"] not in (M.MagmaVec, M.MagmaNoVec)), (2, "uplo", a["uplo"] not in UPLO),
                 (3, "n", n < 0), (5, "ldda", a["ldda"] < max(1, n)),
                 (8, "ldwa", complex_ and a["ldwa"] < max(1, n)))
    if head:
        return head
    need, query = workspace("magma_?syevd_gpu", a, complex_), syevd_query(a)
    tests = [(10, "lwork", a["lwork"] < need["work"])]
    if complex_:
        tests.append((12, "lrwork", a["lrwork"] < need["rwork"]))
    tests.append((14 if complex_ else 12, "liwork", a["liwork"] < need["iwork"]))
    return None if query else first(*tests)


def syevd_query(a) -> bool:
    return -1 in (a["lwork"], a["liwork"], a.get("lrwork", 0))


def gesdd(a):  # src/zgesdd.cpp
    jobz, m, n = a["jobz"], a["m"], a["n"]
    qa, qs, qo = jobz == M.MagmaAllVec, jobz == M.MagmaSomeVec, jobz == M.MagmaOverwriteVec
    ldu, ldvt = a["ldu"], a["ldvt"]
    return first((1, "jobz", jobz not in (M.MagmaAllVec, M.MagmaSomeVec, M.MagmaOverwriteVec, M.MagmaNoVec)),
                 (2, "m", m < 0), (3, "n", n < 0), (5, "lda", a["lda"] < max(1, m)),
                 (8, "ldu", ldu < 1 or ((qa or qs) and ldu < m) or (qo and m < n and ldu < m)),
                 (10, "ldvt", ldvt < 1 or (qa and ldvt < n) or (qs and ldvt < min(m, n))
                  or (qo and m >= n and ldvt < n)),
                 (12, "lwork", a["lwork"] >= 0 and a["lwork"] < workspace("magma_?gesdd", a)["work"]))


def geev(a, complex_: bool):  # src/dgeev.cpp, src/zgeev.cpp
    n, shift = a["n"], 1 if complex_ else 0
    wantvl, wantvr = a["jobvl"] == M.MagmaVec, a["jobvr"] == M.MagmaVec
    return first((1, "jobvl", not wantvl and a["jobvl"] != M.MagmaNoVec),
                 (2, "jobvr", not wantvr and a["jobvr"] != M.MagmaNoVec), (3, "n", n < 0),
                 (5, "lda", a["lda"] < max(1, n)), (9 - shift, "ldvl", a["ldvl"] < 1 or (wantvl and a["ldvl"] < n)),
                 (11 - shift, "ldvr", a["ldvr"] < 1 or (wantvr and a["ldvr"] < n)),
                 (13 - shift, "lwork", a["lwork"] != -1 and a["lwork"] < (2 - shift + gehrd_nb(n)) * n))


def workspace(family: str, a, complex_: bool = False) -> dict[str, int]:
    """The minimum workspace sizes MAGMA asks for (and answers to a query with ``lwork = -1``)."""
    n = a.get("n", 0)
    if family == "magma_?gels_gpu":
        m, nrhs = a["m"], a["nrhs"]
        return {"work": (m - n + NB) * (nrhs + NB) + nrhs * NB}
    if family == "magma_?syevd_gpu":
        want = a["jobz"] == M.MagmaVec
        if n <= 1:
            return {"work": 1, "iwork": 1, **({"rwork": 1} if complex_ else {})}
        if complex_:
            return {"work": max(n + n * SYTRD_NB, 2 * n + n * n) if want else n + n * SYTRD_NB,
                    "rwork": 1 + 5 * n + 2 * n * n if want else n, "iwork": 3 + 5 * n if want else 1}
        return {"work": max(2 * n + n * SYTRD_NB, 1 + 6 * n + 2 * n * n) if want else 2 * n + n * SYTRD_NB,
                "iwork": 3 + 5 * n if want else 1}
    if family == "magma_?gesdd":  # simplified: one bound above MAGMA's paths (it asks for its "maxwrk")
        m, k = a["m"], min(a["m"], n)
        return {"work": max(1, 3 * k + max(m, n) + 5 * k * k)}
    if family == "magma_?geev":
        return {"work": max(1, (2 - complex_ + 2 * gehrd_nb(n)) * n)}
    raise KeyError(family)


# ----------------------------------------------------------------------------------------------------- cuBLAS
def gemm(a):
    ta, tb, m, n, k = a["transA"], a["transB"], a["m"], a["n"], a["k"]
    return first((1, "transA", ta not in TRANS), (2, "transB", tb not in TRANS), (3, "m", m < 0), (4, "n", n < 0),
                 (5, "k", k < 0), (8, "ldda", a["ldda"] < max(1, _rows(ta, m, k))),
                 (10, "lddb", a["lddb"] < max(1, _rows(tb, k, n))), (13, "lddc", a["lddc"] < max(1, m)))


def gemv(a):
    return first((1, "transA", a["transA"] not in TRANS), (2, "m", a["m"] < 0), (3, "n", a["n"] < 0),
                 (6, "ldda", a["ldda"] < max(1, a["m"])), (8, "incx", a["incx"] == 0), (11, "incy", a["incy"] == 0))


def triangular(a):  # trsm, trmm
    nrowa = a["m"] if a["side"] == M.MagmaLeft else a["n"]
    return first((1, "side", a["side"] not in SIDE), (2, "uplo", a["uplo"] not in UPLO),
                 (3, "trans", a["trans"] not in TRANS), (4, "diag", a["diag"] not in DIAG), (5, "m", a["m"] < 0),
                 (6, "n", a["n"] < 0), (9, "ldda", a["ldda"] < max(1, nrowa)), (11, "lddb", a["lddb"] < max(1, a["m"])))


def rank_k(transes, two: bool):
    """syrk / herk (``two``: syr2k / her2k): ``transes`` are the trans values the routine accepts."""
    def check(a):
        n, k, t = a["n"], a["k"], a["trans"]
        rows = max(1, _rows(t, n, k))
        tests = [(1, "uplo", a["uplo"] not in UPLO), (2, "trans", t not in transes), (3, "n", n < 0), (4, "k", k < 0),
                 (7, "ldda", a["ldda"] < rows)]
        tests += [(9, "lddb", a["lddb"] < rows), (12, "lddc", a["lddc"] < max(1, n))] if two else \
            [(10, "lddc", a["lddc"] < max(1, n))]
        return first(*tests)

    return check


def symv(a):  # symv, hemv
    return first((1, "uplo", a["uplo"] not in UPLO), (2, "n", a["n"] < 0), (5, "ldda", a["ldda"] < max(1, a["n"])),
                 (7, "incx", a["incx"] == 0), (10, "incy", a["incy"] == 0))


_REAL_TRANS, _SYMMETRIC_TRANS = TRANS, (M.MagmaNoTrans, M.MagmaTrans)
_HERMITIAN_TRANS = (M.MagmaNoTrans, M.MagmaConjTrans)

#: family -> (who reports: "magma" (magma_xerbla) or "cublas" (a status the wrapper drops), the check)
CHECKS = {
    "magmablas_?laswp": ("magma", laswp), "magmablas_?transpose": ("magma", transpose),
    "magmablas_?transpose_batched": ("magma", transpose), "magmablas_?laset": ("magma", laset),
    "magmablas_?gemm_batched": ("magma", gemm_batched), "magmablas_?gemm_batched_strided": ("magma", gemm_strided),
    "magmablas_?trsm_batched": ("magma", trsm_batched),
    "magma_?getrf_gpu": ("magma", getrf), "magma_?getrf_batched": ("magma", lambda a: getrf(a, "lda")),
    "magma_?potrf_gpu": ("magma", potrf), "magma_?potrf_batched": ("magma", lambda a: potrf(a, "lda")),
    "magma_?potrs_gpu": ("magma", potrs), "magma_?potrs_batched": ("magma", potrs),
    "magma_?geqrf2_gpu": ("magma", geqrf2), "magma_?orgqr2": ("magma", orgqr2), "magma_?gels_gpu": ("magma", gels),
    "magma_?syevd_gpu": ("magma", syevd), "magma_?gesdd": ("magma", gesdd), "magma_?geev": ("magma", geev),
    "magma_?gemm": ("cublas", gemm), "magma_hgemmx": ("cublas", gemm),
    "magma_?gemv": ("cublas", gemv), "magma_?trsm": ("cublas", triangular),
    "magma_?trmm": ("cublas", triangular), "magma_?symv": ("cublas", symv), "magma_?hemv": ("cublas", symv),
    "magma_?herk": ("cublas", rank_k(_HERMITIAN_TRANS, two=False)),
    "magma_?her2k": ("cublas", rank_k(_HERMITIAN_TRANS, two=True)),
}
#: precision-dependent: real syrk/syr2k take N, T and C; complex ones N and T
_SYRK = {False: ("cublas", rank_k(_REAL_TRANS, two=False)), True: ("cublas", rank_k(_SYMMETRIC_TRANS, two=False))}
_SYR2K = {False: ("cublas", rank_k(_REAL_TRANS, two=True)), True: ("cublas", rank_k(_SYMMETRIC_TRANS, two=True))}


def checker(family: str, dtype):
    """``(who, check)`` for a family in a precision (None: the routine checks nothing)."""
    complex_ = dtype is not None and np.issubdtype(dtype, np.complexfloating)
    if family == "magma_?syrk":
        return _SYRK[complex_]
    if family == "magma_?syr2k":
        return _SYR2K[complex_]
    if family in ("magma_?syevd_gpu", "magma_?geev"):
        fn = syevd if family == "magma_?syevd_gpu" else geev
        return "magma", lambda a: fn(a, complex_)
    return CHECKS.get(family)


# ----------------------------------------------------------------------------------------------------- rejected calls
@dataclass(frozen=True)
class Rejected:
    """A call MAGMA rejected: ``magma_xerbla`` was called (``by="magma"``) or cuBLAS answered
    CUBLAS_STATUS_INVALID_VALUE, which MAGMA's BLAS wrapper drops (``by="cublas"``).  Nothing was computed."""

    routine: str
    arg: int  #: MAGMA's (or BLAS's) 1-based number of the bad argument
    name: str
    value: object
    by: str

    def __str__(self) -> str:
        who = "magma_xerbla" if self.by == "magma" else "cuBLAS (status dropped by MAGMA's wrapper)"
        return f"{self.routine}: argument {self.arg} ({self.name} = {self.value!r}) rejected by {who}"
