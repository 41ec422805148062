"""Our argument order against the real MAGMA library: an invalid value in argument k must make MAGMA answer -k.

MAGMA checks its arguments before any GPU work, so this runs on a CPU.  The list of checked arguments per routine
comes from MAGMA's own argument checks (its sources' "Check arguments" blocks); the expected k is the 1-based
position of that argument in *our* table.  Routines report through ``info`` (a pointer or the return value) or,
for the void ``magmablas_*`` kernels, through ``magma_xerbla`` ("parameter k had an illegal value" on stderr).
"""

from __future__ import annotations

import ctypes
import re

import pytest

from pymagma import _libs, _magma
from pymagma.errors import LibraryNotFoundError

M = _magma
#: a valid value for each size/enum argument: 4x4 problems, two matrices in a batch
VALID = {
    "m": 4, "n": 4, "k": 4, "nrhs": 4, "lda": 4, "ldda": 4, "lddb": 4, "lddc": 4, "lddat": 4, "batchCount": 2,
    "incx": 1, "incy": 1, "inci": 1, "k1": 1, "k2": 4, "lwork": 1 << 20,
    "trans": M.MagmaNoTrans, "transA": M.MagmaNoTrans, "transB": M.MagmaNoTrans, "uplo": M.MagmaLower,
    "side": M.MagmaLeft, "diag": M.MagmaNonUnit,
}
_BAD_TRANS, _NEG, _LD = 0, -1, 1  # not an enum value; a negative size; a leading dimension < 4

#: routine family -> {argument MAGMA validates: a value that violates only that check}
CHECKS = {
    "magma_?getrf_gpu": {"m": _NEG, "n": _NEG, "ldda": _LD},
    "magma_?getrf_native": {"m": _NEG, "n": _NEG, "ldda": _LD},
    "magma_?sytrf_gpu": {"uplo": _BAD_TRANS, "n": _NEG, "ldda": _LD},
    "magma_?getrf_batched": {"m": _NEG, "n": _NEG, "lda": _LD},
    "magma_?getrs_gpu": {"trans": _BAD_TRANS, "n": _NEG, "nrhs": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?gesv_gpu": {"n": _NEG, "nrhs": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?getri_gpu": {"n": _NEG, "ldda": _LD},
    "magma_?potrf_gpu": {"uplo": _BAD_TRANS, "n": _NEG, "ldda": _LD},
    "magma_?potrs_gpu": {"uplo": _BAD_TRANS, "n": _NEG, "nrhs": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?posv_gpu": {"uplo": _BAD_TRANS, "n": _NEG, "nrhs": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?geqrf_gpu": {"m": _NEG, "n": _NEG, "ldda": _LD},
    "magmablas_?gemm_batched": {"transA": _BAD_TRANS, "transB": _BAD_TRANS, "m": _NEG, "n": _NEG, "k": _NEG,
                                "ldda": _LD, "lddb": _LD, "lddc": _LD},
    "magmablas_?trsm_batched": {"side": _BAD_TRANS, "uplo": _BAD_TRANS, "transA": _BAD_TRANS, "diag": _BAD_TRANS,
                                "m": _NEG, "n": _NEG, "ldda": _LD, "lddb": _LD, "batchCount": _NEG},
    "magmablas_?laswp": {"n": _NEG, "ldda": _LD, "k1": 0, "k2": 0, "inci": 0},
    "magmablas_?laswp2": {"n": _NEG, "k1": _NEG, "k2": _NEG, "inci": 0},
    "magmablas_?transpose": {"m": _NEG, "n": _NEG, "ldda": _LD, "lddat": _LD},
    "magmablas_?transpose_batched": {"m": _NEG, "n": _NEG, "ldda": _LD, "lddat": _LD},
    "magmablas_?transpose_inplace": {"n": _NEG, "ldda": _LD},
    "magmablas_?laset": {"uplo": _BAD_TRANS, "m": _NEG, "n": _NEG, "ldda": _LD},
}

#: bound routines that cannot be checked without a GPU, and why (read in MAGMA 2.6.1's sources)
UNCHECKABLE = {
    "BLAS 1-3 (magma_?gemm, ?axpy, ...)": "thin wrappers that pass arguments straight to cuBLAS through the queue's "
                                          "handle, with no MAGMA-side check; cuBLAS needs a GPU",
    "magma_?gemm_batched": "dispatches to cuBLAS or magmablas through the queue before any check",
    "magmablas_?gemm_batched_strided": "reads the queue's pointer arrays before delegating the check",
    "magma_?set/get/copy matrix/vector": "call cuBLAS/cudaMemcpy through the queue without a MAGMA-side check",
}


def _scalar(token: str, precision: str):
    ctype = _magma.ctype_of(token, precision)
    return ctype(1.0, 0.0) if issubclass(ctype, ctypes.Structure) else ctype(1.0)


def build_call(sig: _magma.Signature, overrides: dict, valid: dict = VALID):
    """Arguments for ``sig`` (``valid`` sizes, NULL device pointers) with ``overrides``, and the info cell."""
    info = _magma.MAGMA_INT(0)
    host_ints = (_magma.MAGMA_INT * 64)()
    args = []
    for token, name in sig.args:
        if name in overrides:
            args.append(overrides[name])
        elif token in ("I", "E"):
            args.append(valid[name])
        elif token in ("S", "R"):
            args.append(_scalar(token, sig.precision))
        elif token == "F":
            args.append(ctypes.c_float(1.0))
        elif token == "IH":
            args.append(ctypes.byref(info) if name == "info" else host_ints)
        else:
            args.append(None)
    return args, info


def _reported_by_xerbla(text: str) -> int | None:
    found = re.findall(r"parameter (-?\d+) had an illegal value", text)
    return -int(found[-1]) if found else None


def _provider_names():
    try:
        lib = _magma.library()
        lib.cdll  # noqa: B018 - load now so collection knows what the provider exports
    except LibraryNotFoundError:
        return None
    return {n for n in _magma.SIGNATURES if lib.has(n)}


EXPORTED = _provider_names()
CASES = [(family, arg) for family, bad in CHECKS.items() for arg in bad
         if EXPORTED is None or any(n in EXPORTED for n in _magma.names_for(family))]


def test_check_table_names_real_families_and_arguments():
    for family, bad in CHECKS.items():
        names = _magma.names_for(family)
        assert names, f"{family} is not a table family"
        for name in names:
            assert set(bad) <= set(_magma.SIGNATURES[name].arg_names), (name, set(bad))


@pytest.mark.native
def test_families_not_exported_by_the_provider_are_the_listed_ones():
    """A family we cannot check here is one the provider lacks, which must be on the test-visible missing list."""
    if EXPORTED is None:
        pytest.skip("no MAGMA provider")
    unchecked = {f for f in CHECKS if not any(n in EXPORTED for n in _magma.names_for(f))}
    if _libs.magma_provider().source == "torch":
        assert unchecked <= _magma.TORCH_MISSING_FAMILIES
        assert {f for f, _ in CASES} >= {"magma_?getrf_gpu", "magmablas_?gemm_batched", "magmablas_?trsm_batched"}


@pytest.mark.native
@pytest.mark.parametrize(("family", "arg"), CASES, ids=[f"{f}-{a}" for f, a in CASES])
def test_invalid_argument_is_reported_at_its_position(family, arg, capfd):
    if EXPORTED is None:
        pytest.skip("no MAGMA provider")
    lib = _magma.initialized()
    checked = 0
    for name in _magma.names_for(family):
        if name not in EXPORTED:
            continue
        sig = _magma.SIGNATURES[name]
        expected = -(sig.arg_names.index(arg) + 1)
        args, info = build_call(sig, {arg: CHECKS[family][arg]})
        capfd.readouterr()
        result = lib.bind(name)(*args)
        stderr = capfd.readouterr().err
        if sig.restype == "I":
            assert result == expected, f"{name}({arg}=bad) returned {result}, expected {expected}"
        if "info" in sig.arg_names:
            assert info.value == expected, f"{name}({arg}=bad) set info={info.value}, expected {expected}"
        if sig.restype == "void":
            assert _reported_by_xerbla(stderr) == expected, f"{name}({arg}=bad): magma_xerbla said {stderr!r}"
        checked += 1
    assert checked, f"no member of {family} is exported"
