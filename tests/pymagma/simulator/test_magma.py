"""The simulated MAGMA is as strict as MAGMA: each routine's argument checks (``info = -k``, ``magma_xerbla``, or
cuBLAS's invalid values that MAGMA's BLAS wrappers drop; nothing computed, the call recorded, and a test that leaves
such a record fails), LAPACK's compact QR storage, pivots by ``|Re| + |Im|``, inf/NaN from a singular ``trsm``.

The numerical checks run on the simulator and, as ``gpu`` twins, the same on a real device.  The argument numbers
are MAGMA's (read in its sources); ``test_magma_args.py`` checks the same table against the real library.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pymagma
from pymagma import _magma, blas, linalg, simulator
from pymagma.simulator import magma as sim_magma
from pymagma.simulator import magma_args
from tests.pymagma.helpers import q_from_reflectors, random_values
from tests.pymagma.test_magma_args import CHECKS as REAL_LIBRARY_CHECKS
from tests.pymagma.test_magma_args import build_call

M = _magma
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
_BAD_ENUM, _NEG, _LD = "bad enum", -1, 1

#: a valid value for every size/enum/workspace argument of the modelled routines (4 x 4 problems, batches of 2)
VALID = {
    "m": 4, "n": 4, "k": 4, "nrhs": 4, "lda": 4, "ldda": 4, "lddb": 4, "lddc": 4, "lddat": 4, "ldu": 4, "ldvt": 4,
    "ldvl": 4, "ldvr": 4, "ldwa": 4, "batchCount": 2, "incx": 1, "incy": 1, "inci": 1, "k1": 1, "k2": 4,
    "strideA": 16, "strideB": 16, "strideC": 16, "lwork": 1 << 20, "lrwork": 1 << 20, "liwork": 1 << 20,
    "trans": M.MagmaNoTrans, "transA": M.MagmaNoTrans, "transB": M.MagmaNoTrans, "uplo": M.MagmaLower,
    "side": M.MagmaLeft, "diag": M.MagmaNonUnit, "jobz": M.MagmaVec, "jobvl": M.MagmaNoVec, "jobvr": M.MagmaVec,
}
FAMILY_VALID = {"magma_?gesdd": {"jobz": M.MagmaSomeVec}}

#: the families test_magma_args checks against the real library, and the rest of the modelled ones
EXTRA_CHECKS = {
    "magma_?gemm": {"transA": _BAD_ENUM, "transB": _BAD_ENUM, "m": _NEG, "n": _NEG, "k": _NEG, "ldda": _LD,
                    "lddb": _LD, "lddc": _LD},
    "magma_hgemmx": {"transA": _BAD_ENUM, "transB": _BAD_ENUM, "m": _NEG, "n": _NEG, "k": _NEG, "ldda": _LD,
                     "lddb": _LD, "lddc": _LD},
    "magma_?gemv": {"transA": _BAD_ENUM, "m": _NEG, "n": _NEG, "ldda": _LD, "incx": 0, "incy": 0},
    "magma_?trsm": {"side": _BAD_ENUM, "uplo": _BAD_ENUM, "trans": _BAD_ENUM, "diag": _BAD_ENUM, "m": _NEG,
                    "n": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?trmm": {"side": _BAD_ENUM, "m": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?syrk": {"uplo": _BAD_ENUM, "trans": _BAD_ENUM, "n": _NEG, "k": _NEG, "ldda": _LD, "lddc": _LD},
    "magma_?herk": {"uplo": _BAD_ENUM, "trans": M.MagmaTrans, "n": _NEG, "k": _NEG, "ldda": _LD, "lddc": _LD},
    "magma_?symv": {"uplo": _BAD_ENUM, "n": _NEG, "ldda": _LD, "incx": 0, "incy": 0},
    "magma_?hemv": {"uplo": _BAD_ENUM, "n": _NEG, "ldda": _LD, "incx": 0, "incy": 0},
    "magma_?syr2k": {"uplo": _BAD_ENUM, "trans": _BAD_ENUM, "n": _NEG, "k": _NEG, "ldda": _LD, "lddb": _LD,
                     "lddc": _LD},
    "magma_?her2k": {"trans": M.MagmaTrans, "ldda": _LD, "lddb": _LD, "lddc": _LD},
    "magmablas_?gemm_batched_strided": {"transA": _BAD_ENUM, "m": _NEG, "k": _NEG, "ldda": _LD, "lddb": _LD,
                                        "lddc": _LD},
    "magma_?potrf_batched": {"uplo": _BAD_ENUM, "n": _NEG, "lda": _LD},
    "magma_?potrs_batched": {"uplo": _BAD_ENUM, "n": _NEG, "nrhs": _NEG, "ldda": _LD, "lddb": _LD},
    "magma_?geqrf2_gpu": {"m": _NEG, "n": _NEG, "ldda": _LD},
    "magma_?orgqr2": {"m": _NEG, "n": 5, "k": 5, "lda": _LD},
    "magma_?gels_gpu": {"trans": M.MagmaTrans, "m": _NEG, "n": 5, "nrhs": _NEG, "ldda": _LD, "lddb": _LD,
                        "lwork": 1},
    "magma_?syevd_gpu": {"jobz": _BAD_ENUM, "uplo": _BAD_ENUM, "n": _NEG, "ldda": _LD, "ldwa": _LD, "lwork": 1,
                         "lrwork": 1, "liwork": 1},
    "magma_?gesdd": {"jobz": _BAD_ENUM, "m": _NEG, "n": _NEG, "lda": _LD, "ldu": _LD, "ldvt": _LD, "lwork": 1},
    "magma_?geev": {"jobvl": _BAD_ENUM, "jobvr": _BAD_ENUM, "n": _NEG, "lda": _LD, "ldvl": 0, "ldvr": _LD,
                    "lwork": 1},
}
#: MAGMA's number where it is not the argument's position (the strided gemm reports its core's numbers)
NUMBER = {("magmablas_?gemm_batched_strided", "lddb"): 10, ("magmablas_?gemm_batched_strided", "lddc"): 13}


#: arguments MAGMA does not check in some precisions
UNCHECKED = {("magma_ssyevd_gpu", "ldwa"), ("magma_dsyevd_gpu", "ldwa")}


def _cases():
    out = []
    for family, bad in [*REAL_LIBRARY_CHECKS.items(), *EXTRA_CHECKS.items()]:
        if family not in sim_magma.MODEL:
            continue
        for arg, value in bad.items():
            out += [(name, arg, _BAD_ENUM if value == 0 and arg in ("uplo", "trans", "transA", "transB", "side",
                                                                   "diag") else value)
                    for name in M.names_for(family) if arg in M.SIGNATURES[name].arg_names
                    and (name, arg) not in UNCHECKED]
    return out


CASES = _cases()


def _bad_enum(arg: str) -> int:
    """A MAGMA enum value of the wrong kind (MAGMA's check rejects it; a value that is no enum at all never
    reaches the models: the simulator raises MagmaCallError for it)."""
    return M.MagmaNoTrans if arg == "side" else M.MagmaLeft


def _call_args(sig, overrides):
    """test_magma_args' call builder with the sizes this family's model needs to be valid."""
    return build_call(sig, overrides, {**VALID, **FAMILY_VALID.get(sig.family, {})})


def test_every_modelled_family_with_arguments_has_magmas_checks():
    checked = {f for f in sim_magma.MODEL if magma_args.checker(f, np.dtype(np.float64)) is not None}
    unchecked = set(sim_magma.MODEL) - checked
    assert unchecked == {"magma_get_?geqrf_nb", "magma_get_?potrf_nb", "magma_?axpy", "magma_?scal", "magma_?copy",
                         "magma_?dot", "magma_?dotu", "magma_?dotc", "magma_?nrm2", "magma_?asum"}
    assert {f for f, _, _ in ((M.SIGNATURES[n].family, a, v) for n, a, v in CASES)} == checked


@pytest.mark.parametrize(("name", "arg", "bad"), CASES, ids=[f"{n}-{a}" for n, a, _ in CASES])
def test_a_bad_argument_is_rejected_with_magmas_number(name, arg, bad):
    sig = M.SIGNATURES[name]
    expected = NUMBER.get((sig.family, arg), sig.arg_names.index(arg) + 1)
    value = _bad_enum(arg) if bad == _BAD_ENUM else bad
    with simulator.simulated("full"):
        args, info = _call_args(sig, {arg: value})
        result = M.initialized().bind(name)(*args)
        rejected = sim_magma.take_rejected()
    who = magma_args.checker(sig.family, np.dtype(M.PRECISIONS[sig.precision][3]) if sig.precision else None)[0]
    assert [(r.routine, r.arg, r.name, r.value, r.by) for r in rejected] == [(name, expected, arg, value, who)]
    if sig.restype == "I":
        assert result == -expected
    if "info" in sig.arg_names:
        assert info.value == -expected


def test_real_syevd_does_not_check_ldwa_as_magma():
    """MAGMA's dsyevd_gpu has no ldwa test (its zheevd_gpu does): a short ldwa runs."""
    sig = M.SIGNATURES["magma_dsyevd_gpu"]
    a = np.asfortranarray(np.diag([3.0, 1.0, 2.0, 4.0]))
    w, work, iwork = np.zeros(4), np.zeros(1 << 10), (M.MAGMA_INT * 64)()
    with simulator.simulated("full"):
        args, info = _call_args(sig, {"ldwa": 1, "dA": a.ctypes.data, "w": w.ctypes.data, "work": work.ctypes.data,
                                      "lwork": 1 << 10, "iwork": iwork, "liwork": 64})
        M.initialized().magma_dsyevd_gpu(*args)
    assert info.value == 0
    np.testing.assert_allclose(w, [1, 2, 3, 4])


def test_laswp_with_a_zero_based_k1_swaps_nothing():
    """The review's example: a 0-based k1 makes MAGMA call magma_xerbla(-4) and swap no row (an LU solve would
    silently skip every interchange)."""
    rows = np.arange(12.0).reshape(4, 3)  # row-wise storage, ldda = 3
    ipiv = (M.MAGMA_INT * 4)(2, 3, 4, 4)
    with simulator.simulated("full"):
        M.initialized().magmablas_dlaswp(3, rows.ctypes.data, 3, 0, 4, ipiv, 1, None)
        rejected = sim_magma.take_rejected()
        np.testing.assert_array_equal(rows, np.arange(12.0).reshape(4, 3))
        M.initialized().magmablas_dlaswp(3, rows.ctypes.data, 3, 1, 4, ipiv, 1, None)
    assert [(r.routine, r.arg, r.name) for r in rejected] == [("magmablas_dlaswp", 4, "k1")]
    np.testing.assert_array_equal(rows[:, 0], [3, 6, 9, 0])


def test_a_rejected_call_left_behind_fails_the_test(tmp_path):
    """tests/conftest.py fails a test that leaves a rejected call (nothing computed, nobody told)."""
    (tmp_path / "test_leak.py").write_text(
        "import numpy as np\nfrom pymagma import _magma, simulator\n\n"
        "def test_leaks():\n    with simulator.simulated('full'):\n"
        "        _magma.initialized().magmablas_dtranspose(2, 2, None, 1, None, 2, None)\n")
    shutil.copy(Path(__file__).parents[2] / "conftest.py", tmp_path / "conftest.py")
    env = {k: v for k, v in os.environ.items() if k not in ("MAGMADNN_REQUIRE", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[3]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "1 passed, 1 error" in proc.stdout, proc.stdout + proc.stderr
    assert "magmablas_dtranspose: argument 4 (ldda = 1) rejected by magma_xerbla" in proc.stdout


# ----------------------------------------------------------------------------------------------------- numerics
@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    """The simulator (full MAGMA), or the real device (the gpu twin)."""
    if request.param == "simulator":
        with simulator.simulated("full") as sim:
            yield sim
        return
    if simulator.is_enabled():
        pytest.skip("the simulator is on for the whole session")
    yield None


def needs(family: str, dtype=np.float64) -> None:
    name = linalg._routine(family, _magma.precision_of(dtype))
    if not _magma.library().has(name):
        pytest.skip(f"the MAGMA provider does not export {name}")


def tol(dtype):
    return {"rtol": 1e-3, "atol": 1e-3} if np.dtype(dtype) in (np.float32, np.complex64) else \
        {"rtol": 1e-10, "atol": 1e-10}


def _permutation(piv, m):
    perm = np.arange(m)
    for i, p in enumerate(piv):
        perm[[i, p]] = perm[[p, i]]
    return perm


def _check_plu(a, lu, piv, dtype):
    m, n = a.shape
    k = min(m, n)
    lower = np.tril(lu, -1)[:, :k] + np.eye(m, k)
    upper = np.triu(lu)[:k, :]
    np.testing.assert_allclose(lower @ upper, a[_permutation(piv, m)], **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 3), (3, 6)], ids=["tall", "wide"])
def test_non_square_lu_is_p_l_u(device, shape, dtype):
    rng = np.random.default_rng(1)
    a = random_values(rng, shape, dtype)
    lu, piv = linalg.lu_factor(a, check_singular=False)
    _check_plu(a, lu, piv, dtype)
    stack = random_values(rng, (3, *shape), dtype)  # getrf_batched after a non-square batched transpose
    lus, pivs = linalg.lu_factor(stack, check_singular=False)
    for i in range(3):
        _check_plu(stack[i], lus[i], pivs[i], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_square_batched_transposes(device, dtype):
    rng = np.random.default_rng(2)
    x = random_values(rng, (2, 5, 3), dtype)
    d = pymagma.asarray(x)
    np.testing.assert_array_equal(d.mT.copy().get(), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(pymagma.asarray(np.ascontiguousarray(x.transpose(0, 2, 1))).mT.copy().get(), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_into_a_column_major_out(device, dtype):
    rng = np.random.default_rng(3)
    a, b = random_values(rng, (4, 3), dtype), random_values(rng, (3, 5), dtype)
    store = pymagma.zeros((5, 4), dtype)
    out = blas.gemm(pymagma.asarray(a), pymagma.asarray(b), out=store.T)  # a Fortran-ordered 4 x 5 view
    np.testing.assert_allclose(out.get(), a @ b, **tol(dtype))
    np.testing.assert_allclose(store.get(), (a @ b).T, **tol(dtype))


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_pivots_by_abs_real_plus_abs_imag(device, dtype, batched):
    """Column 0 holds 3 (modulus 3, |Re|+|Im| 3) and 2+2j (modulus 2.83, |Re|+|Im| 4): i?amax picks row 1."""
    a = np.array([[3, 1, 0], [2 + 2j, 0, 1], [0.5, 1, 1]], dtype)
    lu, piv = linalg.lu_factor(np.stack([a, a]) if batched else a)
    assert (np.asarray(piv)[..., 0] == 1).all()
    _check_plu(a, lu[0] if batched else lu, piv[0] if batched else piv, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_trsm_on_a_singular_triangle_gives_inf_or_nan(device, dtype):
    """cuBLAS divides by the zero diagonal entry: no error, non-finite values."""
    t = np.triu(np.ones((3, 3), dtype))
    t[1, 1] = 0
    x = blas.trsm(pymagma.asarray(t), pymagma.asarray(np.ones((3, 2), dtype))).get()
    assert not np.isfinite(x).all()
    assert np.isfinite(x[2]).all()  # the rows solved before the zero pivot are finite
    lu = np.stack([np.tril(np.ones((3, 3)), -1) + t] * 2).astype(dtype)  # lu_solve: batched triangular solves
    y = linalg.lu_solve((pymagma.asarray(lu), np.zeros((2, 3), np.int32)), pymagma.asarray(np.ones((2, 3, 1), dtype)))
    assert not np.isfinite(y.get()).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 4), (3, 5)])
def test_geqrf2_and_orgqr2_with_lapacks_compact_reflectors(device, shape, dtype):
    needs("magma_?geqrf2_gpu", dtype)
    needs("magma_?{or}gqr2", dtype)
    rng = np.random.default_rng(4)
    a = random_values(rng, shape, dtype)
    m, n = shape
    k = min(m, n)
    p = _magma.precision_of(dtype)
    lib = _magma.initialized()
    w = pymagma.asarray(np.asfortranarray(a).T.copy()).T  # column-major on the device, ld = m
    tau, info = np.zeros(k, dtype), _magma.MAGMA_INT(0)
    lib.bind(f"magma_{p}geqrf2_gpu")(m, n, w.ptr, m, tau.ctypes.data, ctypes.byref(info))
    assert info.value == 0
    h_ref, tau_ref = np.linalg.qr(a, mode="raw")
    h = w.get()
    np.testing.assert_allclose(h, h_ref.T, **tol(dtype))  # R above, the reflectors below the diagonal
    np.testing.assert_allclose(tau, tau_ref, **tol(dtype))
    reflectors = np.asfortranarray(h[:, :k])
    reflectors[np.triu_indices(k, 0, k)] = 99  # orgqr reads only below the diagonal (and tau)
    lib.bind(f"magma_{p}{'un' if p in 'cz' else 'or'}gqr2")(m, k, k, reflectors.ctypes.data, m, tau.ctypes.data,
                                                            ctypes.byref(info))
    assert info.value == 0
    np.testing.assert_allclose(reflectors, q_from_reflectors(h, tau)[:, :k], **tol(dtype))
    np.testing.assert_allclose(reflectors @ np.triu(h[:k, :]), a, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_raw_hand_off_matches_numpy_and_scipy(device, dtype):
    needs("magma_?geqrf2_gpu", dtype)
    needs("magma_?{or}gqr2", dtype)
    rng = np.random.default_rng(5)
    a = random_values(rng, (7, 4), dtype)
    h, tau = linalg.qr(a, mode="raw")
    h_ref, tau_ref = np.linalg.qr(a, mode="raw")
    np.testing.assert_allclose(h, h_ref, **tol(dtype))
    np.testing.assert_allclose(tau, tau_ref, **tol(dtype))
    q, r = linalg.qr(a)
    np.testing.assert_allclose(q, q_from_reflectors(h.T, tau)[:, :4], **tol(dtype))
    lapack = pytest.importorskip("scipy.linalg.lapack")
    orgqr = lapack.get_lapack_funcs("ungqr" if np.iscomplexobj(a) else "orgqr", (a,))
    q_ref, _, _ = orgqr(np.asfortranarray(h_ref.T), tau_ref)
    np.testing.assert_allclose(q, q_ref, **tol(dtype))
    ormqr = lapack.get_lapack_funcs("unmqr" if np.iscomplexobj(a) else "ormqr", (a,))
    c = random_values(rng, (7, 2), dtype)
    qhc, _, _ = ormqr("L", "C" if np.iscomplexobj(a) else "T", np.asfortranarray(h.T), tau, c, max(1, 2 * 64))
    np.testing.assert_allclose(np.conj(q.T) @ c, qhc[:4], **tol(dtype))
