"""MAGMA 2.x prototype tables, written as data exactly as MAGMA's headers declare them.

Each routine is described once, in a small signature language, and expanded to the precisions it exists in
(``s``/``d``/``c``/``z``).  An argument is ``"TOKEN name"``; a leading ``c:`` (``r:``) keeps it only in the complex
(real) precisions, as MAGMA's ``#ifdef MAGMA_COMPLEX`` does.  Tokens:

``I`` magma_int_t · ``E`` enum (magma_trans_t, magma_uplo_t, ...) · ``S`` scalar of the precision (by value) ·
``R`` real scalar of the precision · ``D`` device data pointer · ``H`` host data pointer · ``DA`` device array of
device pointers · ``IH`` host magma_int_t* · ``ID`` device magma_int_t* · ``IDA`` device array of magma_int_t* ·
``F`` C float (by value) ·
``Q`` magma_queue_t · ``QP`` magma_queue_t* · ``V`` void* · ``VP`` void** · ``Z`` size_t · ``ZP`` size_t* ·
``STR`` const char* · ``CINT`` C int · ``STREAM``/``HANDLE`` CUDA stream / cuBLAS or cuSPARSE handle.

MAGMA's macros (queue create/destroy/sync, free, set/get matrix) are bound to their ``*_internal`` symbols, which
take three extra arguments (func, file, line); :func:`internal_args` supplies them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from . import _libs, _native
from ._ffi import NativeLibrary
from .errors import MagmaError

MAGMA_INT = ctypes.c_int64 if _libs.magma_ilp64() else ctypes.c_int32


class c_complex64(ctypes.Structure):
    """magmaFloatComplex (cuFloatComplex) by value."""

    _fields_ = [("real", ctypes.c_float), ("imag", ctypes.c_float)]


class c_complex128(ctypes.Structure):
    """magmaDoubleComplex (cuDoubleComplex) by value."""

    _fields_ = [("real", ctypes.c_double), ("imag", ctypes.c_double)]


#: precision letter -> (scalar ctype, real ctype, is complex, numpy dtype name)
PRECISIONS = {
    "s": (ctypes.c_float, ctypes.c_float, False, "float32"),
    "d": (ctypes.c_double, ctypes.c_double, False, "float64"),
    "c": (c_complex64, ctypes.c_float, True, "complex64"),
    "z": (c_complex128, ctypes.c_double, True, "complex128"),
}
#: name fragments that differ by precision: {p} the letter, {rp} the real-result prefix (nrm2, asum),
#: {sy} "sy" or "he" (hermitian in complex), {or} "or" or "un" (orthogonal / unitary).
FRAGMENTS = {
    "s": {"p": "s", "rp": "s", "sy": "sy", "or": "or"},
    "d": {"p": "d", "rp": "d", "sy": "sy", "or": "or"},
    "c": {"p": "c", "rp": "sc", "sy": "he", "or": "un"},
    "z": {"p": "z", "rp": "dz", "sy": "he", "or": "un"},
}

_FIXED_TOKENS = {
    "I": MAGMA_INT, "E": ctypes.c_int, "D": ctypes.c_void_p, "H": ctypes.c_void_p, "DA": ctypes.c_void_p,
    "IH": ctypes.c_void_p, "ID": ctypes.c_void_p, "IDA": ctypes.c_void_p, "Q": ctypes.c_void_p,
    "QP": ctypes.c_void_p, "V": ctypes.c_void_p, "VP": ctypes.c_void_p, "Z": ctypes.c_size_t,
    "ZP": ctypes.c_void_p, "STR": ctypes.c_char_p, "CINT": ctypes.c_int, "STREAM": ctypes.c_void_p,
    "HANDLE": ctypes.c_void_p, "F": ctypes.c_float, "void": None,
}


def ctype_of(token: str, precision: str | None):
    """The ctypes type of a signature token in a precision."""
    if token == "S":
        return PRECISIONS[precision][0]
    if token == "R":
        return PRECISIONS[precision][1]
    return _FIXED_TOKENS[token]


@dataclass(frozen=True)
class Signature:
    """One native routine: its exported ``symbol``, return token and ``(token, name)`` arguments."""

    name: str
    symbol: str
    restype: str
    args: tuple[tuple[str, str], ...]
    precision: str | None = None
    family: str = ""

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(n for _, n in self.args)

    def prototype(self):
        return ctype_of(self.restype, self.precision), tuple(ctype_of(t, self.precision) for t, _ in self.args)


def _parse_args(spec: str, precision: str | None) -> tuple[tuple[str, str], ...]:
    complex_ = precision is not None and PRECISIONS[precision][2]
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item.startswith(("c:", "r:")):
            if (item[0] == "c") != complex_:
                continue
            item = item[2:]
        token, name = item.split()
        out.append((token, name))
    return tuple(out)


SIGNATURES: dict[str, Signature] = {}
INTERNAL_EXTRA = "STR func, STR file, CINT line"


def _add(name: str, restype: str, args: str, precision: str | None = None, family: str = "",
         symbol: str | None = None) -> None:
    if name in SIGNATURES:
        raise RuntimeError(f"duplicate MAGMA table entry {name}")
    SIGNATURES[name] = Signature(name, symbol or name, restype, _parse_args(args, precision), precision, family)


def aux(name: str, restype: str, args: str = "", internal: bool = False) -> None:
    """A precision-free routine; ``internal`` binds the macro ``name`` to ``name_internal``."""
    if internal:
        _add(name, restype, f"{args}, {INTERNAL_EXTRA}" if args else INTERNAL_EXTRA,
             family=name, symbol=f"{name}_internal")
    else:
        _add(name, restype, args, family=name)


def routine(template: str, restype: str, args: str, precisions: str = "sdcz", restype_complex: str | None = None):
    """A routine in several precisions, e.g. ``routine("magma_{p}gemm", "void", "E transA, ...")``."""
    family = template.format(p="?", rp="?", sy="sy", **{"or": "or"})
    for p in precisions:
        rt = restype_complex if (restype_complex and PRECISIONS[p][2]) else restype
        _add(template.format(**FRAGMENTS[p]), rt, args, p, family)


# ----------------------------------------------------------------------------------------------------- auxiliary
aux("magma_init", "I")
aux("magma_finalize", "I")
aux("magma_version", "void", "IH major, IH minor, IH micro")
aux("magma_print_environment", "void")
aux("magma_strerror", "STR", "I error")
aux("magma_xerbla", "void", "STR name, I info")
aux("magma_num_gpus", "I")
aux("magma_getdevice", "void", "IH dev")
aux("magma_setdevice", "void", "I dev")
aux("magma_is_devptr", "I", "V ptr")
aux("magma_mem_info", "I", "ZP freeMem, ZP totalMem")
aux("magma_malloc", "I", "VP ptr_ptr, Z bytes")
aux("magma_malloc_pinned", "I", "VP ptr_ptr, Z bytes")
aux("magma_malloc_cpu", "I", "VP ptr_ptr, Z bytes")
aux("magma_free_cpu", "I", "V ptr")
aux("magma_free", "I", "V ptr", internal=True)
aux("magma_free_pinned", "I", "V ptr", internal=True)
aux("magma_memset", "I", "V ptr, CINT value, Z count")
aux("magma_memset_async", "I", "V ptr, CINT value, Z count, Q queue")
aux("magma_queue_create", "void", "I device, QP queue_ptr", internal=True)
aux("magma_queue_create_from_cuda", "void",
    "I device, STREAM stream, HANDLE cublas, HANDLE cusparse, QP queue_ptr", internal=True)
aux("magma_queue_destroy", "void", "Q queue", internal=True)
aux("magma_queue_sync", "void", "Q queue", internal=True)
aux("magma_queue_get_device", "I", "Q queue")
aux("magma_queue_get_cuda_stream", "STREAM", "Q queue")
aux("magma_queue_get_cublas_handle", "HANDLE", "Q queue")
aux("magma_event_create", "void", "VP event_ptr")
aux("magma_event_destroy", "void", "V event")
aux("magma_event_record", "void", "V event, Q queue")
aux("magma_event_sync", "void", "V event")
aux("magma_queue_wait_event", "void", "Q queue, V event")
for _dir, _src, _dst in (("set", "H hx_src", "D dy_dst"), ("get", "D dx_src", "H hy_dst"),
                         ("copy", "D dx_src", "D dy_dst")):
    for _mode in ("", "_async"):
        aux(f"magma_{_dir}vector{_mode}", "void",
            f"I n, I elemSize, {_src}, I incx, {_dst}, I incy, Q queue", internal=True)
        _msrc, _mdst = _src.replace("x_src", "A_src"), _dst.replace("y_dst", "B_dst")
        _lsrc = "lda" if _msrc.startswith("H") else "ldda"
        _ldst = "ldb" if _mdst.startswith("H") else "lddb"
        aux(f"magma_{_dir}matrix{_mode}", "void",
            f"I m, I n, I elemSize, {_msrc}, I {_lsrc}, {_mdst}, I {_ldst}, Q queue", internal=True)

# ----------------------------------------------------------------------------------------------------- BLAS 1
_X = "D dx, I incx"
_Y = "D dy, I incy"
routine("magma_{p}axpy", "void", f"I n, S alpha, {_X}, {_Y}, Q queue")
routine("magma_{p}scal", "void", f"I n, S alpha, {_X}, Q queue")
routine("magma_csscal", "void", f"I n, R alpha, {_X}, Q queue", precisions="c")
routine("magma_zdscal", "void", f"I n, R alpha, {_X}, Q queue", precisions="z")
routine("magma_{p}copy", "void", f"I n, {_X}, {_Y}, Q queue")
routine("magma_{p}swap", "void", f"I n, {_X}, {_Y}, Q queue")
routine("magma_{p}dot", "S", f"I n, {_X}, {_Y}, Q queue", precisions="sd")
routine("magma_{p}dotc", "S", f"I n, {_X}, {_Y}, Q queue", precisions="cz")
routine("magma_{p}dotu", "S", f"I n, {_X}, {_Y}, Q queue", precisions="cz")
routine("magma_{rp}nrm2", "R", f"I n, {_X}, Q queue")
routine("magma_{rp}asum", "R", f"I n, {_X}, Q queue")
routine("magma_i{p}amax", "I", f"I n, {_X}, Q queue")

# ----------------------------------------------------------------------------------------------------- BLAS 2
routine("magma_{p}gemv", "void", f"E transA, I m, I n, S alpha, D dA, I ldda, {_X}, S beta, {_Y}, Q queue")
routine("magma_{p}ger", "void", f"I m, I n, S alpha, {_X}, {_Y}, D dA, I ldda, Q queue", precisions="sd")
routine("magma_{p}geru", "void", f"I m, I n, S alpha, {_X}, {_Y}, D dA, I ldda, Q queue", precisions="cz")
routine("magma_{p}gerc", "void", f"I m, I n, S alpha, {_X}, {_Y}, D dA, I ldda, Q queue", precisions="cz")
routine("magma_{p}symv", "void", f"E uplo, I n, S alpha, D dA, I ldda, {_X}, S beta, {_Y}, Q queue")
routine("magma_{p}hemv", "void", f"E uplo, I n, S alpha, D dA, I ldda, {_X}, S beta, {_Y}, Q queue",
        precisions="cz")
routine("magma_{p}trsv", "void", f"E uplo, E trans, E diag, I n, D dA, I ldda, {_X}, Q queue")

# ----------------------------------------------------------------------------------------------------- BLAS 3
_ABC = "D dA, I ldda, D dB, I lddb, S beta, D dC, I lddc, Q queue"
routine("magma_{p}gemm", "void", f"E transA, E transB, I m, I n, I k, S alpha, {_ABC}")
# float16 operands, float32 alpha, beta, C and compute (magmablas_h.h); MAGMA has no bfloat16 gemm
aux("magma_hgemmx", "void", "E transA, E transB, I m, I n, I k, F alpha, D dA, I ldda, D dB, I lddb, F beta, "
    "D dC, I lddc, Q queue")
routine("magma_{p}symm", "void", f"E side, E uplo, I m, I n, S alpha, {_ABC}")
routine("magma_{p}hemm", "void", f"E side, E uplo, I m, I n, S alpha, {_ABC}", precisions="cz")
routine("magma_{p}syrk", "void", "E uplo, E trans, I n, I k, S alpha, D dA, I ldda, S beta, D dC, I lddc, Q queue")
routine("magma_{p}herk", "void", "E uplo, E trans, I n, I k, R alpha, D dA, I ldda, R beta, D dC, I lddc, Q queue",
        precisions="cz")
routine("magma_{p}syr2k", "void", f"E uplo, E trans, I n, I k, S alpha, {_ABC}")
routine("magma_{p}her2k", "void",
        "E uplo, E trans, I n, I k, S alpha, D dA, I ldda, D dB, I lddb, R beta, D dC, I lddc, Q queue",
        precisions="cz")
_TRI = "E side, E uplo, E trans, E diag, I m, I n, S alpha, D dA, I ldda, D dB, I lddb, Q queue"
routine("magma_{p}trmm", "void", _TRI)
routine("magma_{p}trsm", "void", _TRI)

# ----------------------------------------------------------------------------------------------------- batched BLAS
_GEMM_HEAD = "E transA, E transB, I m, I n, I k, S alpha"
_GEMM_ARRAYS = "DA dA_array, I ldda, DA dB_array, I lddb, S beta, DA dC_array, I lddc, I batchCount, Q queue"
routine("magma_{p}gemm_batched", "void", f"{_GEMM_HEAD}, {_GEMM_ARRAYS}")
routine("magmablas_{p}gemm_batched", "void", f"{_GEMM_HEAD}, {_GEMM_ARRAYS}")
routine("magmablas_{p}gemm_batched_strided", "void",
        f"{_GEMM_HEAD}, D dA, I ldda, I strideA, D dB, I lddb, I strideB, S beta, D dC, I lddc, I strideC, "
        "I batchCount, Q queue")
routine("magmablas_{p}trsm_batched", "void",
        "E side, E uplo, E transA, E diag, I m, I n, S alpha, DA dA_array, I ldda, DA dB_array, I lddb, "
        "I batchCount, Q queue")

# ----------------------------------------------------------------------------------------------------- auxiliary BLAS
routine("magmablas_{p}laswp", "void", "I n, D dAT, I ldda, I k1, I k2, IH ipiv, I inci, Q queue")
routine("magmablas_{p}laswp2", "void", "I n, D dAT, I ldda, I k1, I k2, ID d_ipiv, I inci, Q queue")
routine("magmablas_{p}transpose", "void", "I m, I n, D dA, I ldda, D dAT, I lddat, Q queue")
routine("magmablas_{p}transpose_batched", "void",
        "I m, I n, DA dA_array, I ldda, DA dAT_array, I lddat, I batchCount, Q queue")
routine("magmablas_{p}transpose_inplace", "void", "I n, D dA, I ldda, Q queue")
routine("magmablas_{p}lacpy", "void", "E uplo, I m, I n, D dA, I ldda, D dB, I lddb, Q queue")
routine("magmablas_{p}laset", "void", "E uplo, I m, I n, S offdiag, S diag, D dA, I ldda, Q queue")

# ----------------------------------------------------------------------------------------------------- LAPACK (GPU)
routine("magma_get_{p}geqrf_nb", "I", "I m, I n")
routine("magma_get_{p}potrf_nb", "I", "I n")
routine("magma_{p}getrf_gpu", "I", "I m, I n, D dA, I ldda, IH ipiv, IH info")
routine("magma_{p}getrf_native", "I", "I m, I n, D dA, I ldda, IH ipiv, IH info")
routine("magma_{p}getrs_gpu", "I", "E trans, I n, I nrhs, D dA, I ldda, IH ipiv, D dB, I lddb, IH info")
routine("magma_{p}gesv_gpu", "I", "I n, I nrhs, D dA, I ldda, IH ipiv, D dB, I lddb, IH info")
routine("magma_{p}getri_gpu", "I", "I n, D dA, I ldda, IH ipiv, D dwork, I lwork, IH info")
routine("magma_{p}potrf_gpu", "I", "E uplo, I n, D dA, I ldda, IH info")
routine("magma_{p}potrs_gpu", "I", "E uplo, I n, I nrhs, D dA, I ldda, D dB, I lddb, IH info")
routine("magma_{p}posv_gpu", "I", "E uplo, I n, I nrhs, D dA, I ldda, D dB, I lddb, IH info")
routine("magma_{p}geqrf_gpu", "I", "I m, I n, D dA, I ldda, H tau, D dT, IH info")
routine("magma_{p}geqrf2_gpu", "I", "I m, I n, D dA, I ldda, H tau, IH info")
routine("magma_{p}{or}gqr2", "I", "I m, I n, I k, H A, I lda, H tau, IH info")
routine("magma_{p}{or}gqr_gpu", "I", "I m, I n, I k, D dA, I ldda, H tau, D dT, I nb, IH info")
routine("magma_{p}{or}mqr_gpu", "I",
        "E side, E trans, I m, I n, I k, D dA, I ldda, H tau, D dC, I lddc, H hwork, I lwork, D dT, I nb, IH info")
routine("magma_{p}gels_gpu", "I", "E trans, I m, I n, I nrhs, D dA, I ldda, D dB, I lddb, H hwork, I lwork, IH info")
routine("magma_{p}{sy}evd_gpu", "I",
        "E jobz, E uplo, I n, D dA, I ldda, H w, H wA, I ldwa, H work, I lwork, c:H rwork, c:I lrwork, "
        "IH iwork, I liwork, IH info")
routine("magma_{p}{sy}trf_gpu", "I", "E uplo, I n, D dA, I ldda, IH ipiv, IH info")
# LAPACK (CPU interface: host matrices, MAGMA moves them to the GPU itself)
routine("magma_{p}gesvd", "I",
        "E jobu, E jobvt, I m, I n, H A, I lda, H s, H U, I ldu, H VT, I ldvt, H work, I lwork, c:H rwork, IH info")
routine("magma_{p}gesdd", "I",
        "E jobz, I m, I n, H A, I lda, H s, H U, I ldu, H VT, I ldvt, H work, I lwork, c:H rwork, IH iwork, IH info")
routine("magma_{p}geev", "I",
        "E jobvl, E jobvr, I n, H A, I lda, c:H w, r:H wr, r:H wi, H VL, I ldvl, H VR, I ldvr, H work, I lwork, "
        "c:H rwork, IH info")

# ----------------------------------------------------------------------------------------------------- LAPACK batched
routine("magma_{p}getrf_batched", "I",
        "I m, I n, DA dA_array, I lda, IDA ipiv_array, ID info_array, I batchCount, Q queue")
routine("magma_{p}getrs_batched", "I",
        "E trans, I n, I nrhs, DA dA_array, I ldda, IDA dipiv_array, DA dB_array, I lddb, I batchCount, Q queue")
routine("magma_{p}gesv_batched", "I",
        "I n, I nrhs, DA dA_array, I ldda, IDA dipiv_array, DA dB_array, I lddb, ID dinfo_array, I batchCount, "
        "Q queue")
routine("magma_{p}potrf_batched", "I", "E uplo, I n, DA dA_array, I lda, ID info_array, I batchCount, Q queue")
routine("magma_{p}potrs_batched", "I",
        "E uplo, I n, I nrhs, DA dA_array, I ldda, DA dB_array, I lddb, I batchCount, Q queue")
routine("magma_{p}posv_batched", "I",
        "E uplo, I n, I nrhs, DA dA_array, I ldda, DA dB_array, I lddb, ID dinfo_array, I batchCount, Q queue")

# ----------------------------------------------------------------------------------------------------- enums
MagmaNoTrans, MagmaTrans, MagmaConjTrans = 111, 112, 113
MagmaUpper, MagmaLower, MagmaFull = 121, 122, 123
MagmaNonUnit, MagmaUnit = 131, 132
MagmaLeft, MagmaRight = 141, 142
MagmaNoVec, MagmaVec, MagmaIVec, MagmaAllVec, MagmaSomeVec, MagmaOverwriteVec = 301, 302, 303, 304, 305, 306

#: Names in our tables that PyTorch's bundled MAGMA (2.6.1, libtorch_cuda_linalg) does not export; the tests check
#: that every other name resolves there.
TORCH_MISSING_FAMILIES = frozenset({
    "magma_?getrs_gpu", "magma_?gesv_gpu", "magma_?getri_gpu", "magma_?potrf_gpu", "magma_?potrs_gpu",
    "magma_?posv_gpu", "magma_?geqrf_gpu", "magma_?orgqr_gpu", "magma_?ormqr_gpu", "magma_?gels_gpu",
    "magma_?syevd_gpu", "magma_?gesvd", "magma_?gesdd", "magma_?geev", "magma_?getrs_batched",
    "magma_?gesv_batched", "magma_?potrf_batched", "magma_?potrs_batched", "magma_?posv_batched",
    "magmablas_?lacpy", "magma_?geqrf2_gpu", "magma_?orgqr2",
})
TORCH_MISSING_NAMES = frozenset({"magmablas_claset", "magmablas_zlaset", "magma_hgemmx"})


def torch_missing() -> frozenset[str]:
    """Every table name PyTorch's bundled MAGMA lacks."""
    return frozenset(n for n, s in SIGNATURES.items() if s.family in TORCH_MISSING_FAMILIES) | TORCH_MISSING_NAMES


def internal_args() -> tuple[bytes, bytes, int]:
    """The (func, file, line) triple MAGMA's ``*_internal`` symbols take (used only in MAGMA's debug messages)."""
    return b"pymagma", b"pymagma", 0


def remedy() -> str:
    provider = ""
    try:
        p = _libs.magma_provider()
        if p.partial:
            provider = f"the MAGMA in use ({p.path}) is partial: {p.note}; "
    except Exception:  # noqa: BLE001 - discovery errors are reported elsewhere; the remedy stays useful
        pass
    return provider + "for the full library: " + _libs.FULL_MAGMA_REMEDY


def _real_library() -> NativeLibrary:
    """The MAGMA library with every table entry, loaded and bound lazily."""
    return NativeLibrary(
        "MAGMA", _libs.load_magma, {n: s.prototype() for n, s in SIGNATURES.items()}, remedy(),
        aliases={n: s.symbol for n, s in SIGNATURES.items() if s.symbol != n},
    )


_native.register("magma", _real_library, lambda: tuple(SIGNATURES))


def library() -> NativeLibrary:
    """The MAGMA library in use (the simulator's when it is on); nothing is called on it."""
    return _native.current.magma


@_native.resource("magma_initialized")
def _initialize(libraries) -> NativeLibrary:
    lib = libraries.magma
    status = lib.magma_init()
    if status != 0:
        raise MagmaError(status, strerror(status), "magma_init")
    return lib


def initialized() -> NativeLibrary:
    """The MAGMA library in use after ``magma_init()`` (once per set of native libraries)."""
    return _native.current.magma_initialized


def strerror(code: int) -> str:
    text = library().magma_strerror(int(code))
    return text.decode() if text else ""


def version() -> tuple[int, int, int]:
    parts = [MAGMA_INT() for _ in range(3)]
    library().magma_version(*(ctypes.byref(p) for p in parts))
    return tuple(p.value for p in parts)


def names_for(family: str) -> list[str]:
    """Table names of a routine family, e.g. ``names_for("magma_?gemm")``."""
    return [n for n, s in SIGNATURES.items() if s.family == family]


def precision_of(dtype) -> str:
    """MAGMA precision letter of a NumPy dtype (float32 s, float64 d, complex64 c, complex128 z)."""
    name = np.dtype(dtype).name
    for letter, (_, _, _, dname) in PRECISIONS.items():
        if dname == name:
            return letter
    raise TypeError(f"MAGMA has no routines for dtype {name}; expected float32, float64, complex64 or complex128")
