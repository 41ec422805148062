"""Half-precision gemm: cuBLAS GemmEx (float16/bfloat16 operands, float32 accumulation) behind the native seam.

The simulated cuBLAS is checked against NumPy references written here (operands read column-major with their
leading dimensions, exact float32 sums of small integers, one rounding to the output type through ml_dtypes, TF32
rounding by frexp); the row-major face of ``pymagma.blas`` is checked over shapes, transposes and output types with
hypothesis; the real libcublas is loaded on the CPU for its symbols; ``gpu`` twins run the same checks on a device.
"""

from __future__ import annotations

import ctypes
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _cublas, _magma, blas, simulator
from pymagma.errors import CublasError

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
HALVES = [np.dtype(np.float16), BF16]
REUSE = [HealthCheck.function_scoped_fixture]


@pytest.fixture
def sim():
    with simulator.simulated("full") as simulation:
        yield simulation


def ints(rng, shape, dtype, high=9):
    """Small integers: exact in every type here, their products and float32 sums exact too."""
    return rng.integers(-high, high + 1, size=shape).astype(dtype)


def reference(a, b, out_dtype, alpha=1.0, beta=0.0, c=None):
    """alpha a @ b + beta c in float64 (exact for the integer data used), rounded once to ``out_dtype``."""
    r = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta:
        r = r + beta * c.astype(np.float64)
    return r.astype(np.float32).astype(out_dtype) if out_dtype != np.float32 else r.astype(np.float32)


# ------------------------------------------------------------------------------------- the simulated GemmEx model
def _handle():
    return _magma.initialized().magma_queue_get_cublas_handle(pymagma.default_queue().handle)


def _colmajor(buffer: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    """The rows x cols column-major matrix with leading dimension ld held in a flat host buffer."""
    return np.lib.stride_tricks.as_strided(buffer, (rows, cols), (buffer.itemsize, ld * buffer.itemsize))


def _gemm_ex(transa, transb, m, n, k, alpha, A, atype, lda, B, ldb, beta, C, ctype, ldc):
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    return _cublas.library().cublasGemmEx(_handle(), transa, transb, m, n, k, ctypes.byref(al), A.ptr, atype, lda,
                                          B.ptr, atype, ldb, ctypes.byref(be), C.ptr, ctype, ldc,
                                          _cublas.ComputeType.COMPUTE_32F, _cublas.GEMM_DEFAULT)


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("out", ["half", "float32"])
@pytest.mark.parametrize("transa,transb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_ex_reads_operands_as_stored_and_rounds_once(sim, dtype, out, transa, transb):
    """Column-major operands with padded leading dimensions and each transpose: C = alpha op(A) op(B) + beta C,
    summed exactly in float32 and rounded once to Ctype (a per-product rounding to bfloat16 would differ)."""
    rng = np.random.default_rng(transa * 2 + transb)
    m, n, k = 5, 4, 6
    ar, ac = (m, k) if transa == 0 else (k, m)
    br, bc = (k, n) if transb == 0 else (n, k)
    lda, ldb, ldc = ar + 2, br + 3, m + 1
    ctype = dtype if out == "half" else np.dtype(np.float32)
    A_host, B_host = ints(rng, lda * ac, dtype, 60), ints(rng, ldb * bc, dtype, 60)
    C_host = ints(rng, ldc * n, ctype)
    A, B, C = pymagma.asarray(A_host), pymagma.asarray(B_host), pymagma.asarray(C_host)
    status = _gemm_ex(transa, transb, m, n, k, 0.5, A, _cublas.data_type(dtype), lda, B, ldb, 2.0, C,
                      _cublas.data_type(ctype), ldc)
    assert status == 0
    opA = _colmajor(A_host, ar, ac, lda)
    opB = _colmajor(B_host, br, bc, ldb)
    opA, opB = (opA if transa == 0 else opA.T), (opB if transb == 0 else opB.T)
    expected = reference(opA, opB, ctype, 0.5, 2.0, _colmajor(C_host, m, n, ldc))
    got = C.get()
    np.testing.assert_array_equal(_colmajor(got, m, n, ldc).astype(np.float64), expected.astype(np.float64))
    padding = np.ones(ldc * n, bool)
    padding[(np.arange(m)[:, None] + ldc * np.arange(n)[None, :]).ravel()] = False
    np.testing.assert_array_equal(got[padding], C_host[padding])  # rows m..ldc-1 are not written


def test_gemm_ex_rounds_the_float32_sum_once_to_bfloat16(sim):
    """48 products 1 * (1 + 2**-7) sum exactly in float32 to 48.375 (9 significant bits); bfloat16 (8 bits) gets
    it rounded once, a tie to even: 48.5.  Partial sums kept in bfloat16 (3.0234375 already needs 9 bits) would
    drift elsewhere."""
    k = 48
    a = np.full((1, k), 1.0, BF16)
    b = np.full((k, 1), 1 + 2.0 ** -7, BF16)
    A, B, C = pymagma.asarray(a.ravel()), pymagma.asarray(b.ravel()), pymagma.zeros(1, BF16)
    assert _gemm_ex(0, 0, 1, 1, k, 1.0, A, _cublas.DataType.R_16BF, 1, B, k, 0.0, C, _cublas.DataType.R_16BF,
                    1) == 0
    assert float(C.get()[0]) == 48.5 == float(np.float32(48.375).astype(BF16))
    F = pymagma.zeros(1, np.float32)
    _gemm_ex(0, 0, 1, 1, k, 1.0, A, _cublas.DataType.R_16BF, 1, B, k, 0.0, F, _cublas.DataType.R_32F, 1)
    assert F.get()[0] == np.float32(48.375)


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
def test_an_overflowing_gemm_gives_inf_and_nan_silently_as_cublas(sim, dtype):
    """Sums past the output type's range round to inf and inf * 0 is NaN; cuBLAS reports neither (nor does the
    simulated cuDNN): no NumPy RuntimeWarning leaks from the model."""
    big = float(np.finfo(dtype).max)
    A = pymagma.asarray(np.array([big, np.inf, 1.0] * 2, dtype))  # 3 x 2, both columns [big, inf, 1]
    B = pymagma.asarray(np.array([big, 0.0], dtype))  # 2 x 1
    for ctype in (dtype, np.dtype(np.float32)):
        C = pymagma.zeros(3, ctype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _gemm_ex(0, 0, 3, 1, 2, 1.0, A, _cublas.data_type(dtype), 3, B, 2, 0.0, C,
                            _cublas.data_type(ctype), 3) == 0
            got = C.get().astype(np.float64)  # the queue runs the gemm by here
        with np.errstate(over="ignore"):  # the reference: inf past the output type's range
            assert got[0] == float(np.float32(big * big).astype(ctype))
        assert np.isnan(got[1]) and got[2] == big


def test_beta_zero_does_not_read_c(sim):
    A, B = pymagma.asarray(np.ones(4, np.float16)), pymagma.asarray(np.ones(4, np.float16))
    C = pymagma.asarray(np.full(4, np.nan, np.float32))
    assert _gemm_ex(0, 0, 2, 2, 1, 1.0, A, _cublas.DataType.R_16F, 2, B, 1, 0.0, C, _cublas.DataType.R_32F, 2) == 0
    np.testing.assert_array_equal(C.get(), np.ones(4))


def _tf32(x: np.ndarray) -> np.ndarray:
    """float32 to TF32 (11 significant bits, ties to even) by frexp: an independent reference."""
    m, e = np.frexp(x.astype(np.float64))
    return (np.round(m * 2.0 ** 11) / 2.0 ** 11 * 2.0 ** e).astype(np.float32)


def test_tf32_math_mode_rounds_float32_operands(sim):
    rng = np.random.default_rng(5)
    a = (1 + rng.integers(1, 2 ** 12, (3, 4)) * 2.0 ** -22).astype(np.float32)  # below TF32's precision
    b = rng.standard_normal((4, 2)).astype(np.float32)
    lib, handle = _cublas.library(), _handle()
    for mode, expected in ((_cublas.Math.DEFAULT, a.astype(np.float64) @ b),
                           (_cublas.Math.TF32_TENSOR_OP, _tf32(a).astype(np.float64) @ _tf32(b))):
        assert lib.cublasSetMathMode(handle, mode) == 0
        got = ctypes.c_int(-1)
        assert lib.cublasGetMathMode(handle, ctypes.byref(got)) == 0 and got.value == mode
        A, B, C = pymagma.asarray(a.T.ravel()), pymagma.asarray(b.T.ravel()), pymagma.zeros(6, np.float32)
        assert _gemm_ex(0, 0, 3, 2, 4, 1.0, A, 0, 3, B, 4, 0.0, C, 0, 3) == 0
        np.testing.assert_allclose(C.get().reshape(2, 3).T, expected, rtol=2e-7)
    assert not np.allclose(a.astype(np.float64) @ b, _tf32(a).astype(np.float64) @ _tf32(b), rtol=2e-7, atol=0)
    lib.cublasSetMathMode(handle, _cublas.Math.DEFAULT)


@pytest.mark.parametrize("change,why", [
    ({"m": -1}, "negative"), ({"k": -2}, "negative"), ({"transa": 5}, "CUBLAS_OP"), ({"lda": 2}, "lda"),
    ({"transa": 1, "lda": 3}, "lda"), ({"ldb": 3}, "ldb"), ({"transb": 1, "ldb": 1}, "ldb"), ({"ldc": 2}, "ldc")])
def test_invalid_arguments_are_invalid_value_and_compute_nothing(sim, change, why):
    args = dict(transa=0, transb=0, m=3, n=2, k=4, lda=3, ldb=4, ldc=3)
    args.update(change)
    A, B = pymagma.asarray(np.ones(64, np.float16)), pymagma.asarray(np.ones(64, np.float16))
    C = pymagma.asarray(np.full(64, 7, np.float32))
    sim.cublas.rejected.clear()
    status = _gemm_ex(args["transa"], args["transb"], args["m"], args["n"], args["k"], 1.0, A, 2, args["lda"], B,
                      args["ldb"], 0.0, C, 0, args["ldc"])
    assert status == _cublas.Status.INVALID_VALUE
    np.testing.assert_array_equal(C.get(), 7)
    assert sim.cublas.rejected and why in sim.cublas.rejected[-1][2]
    sim.cublas.rejected.clear()


def test_unsupported_type_combinations_are_not_supported(sim):
    A, B, C = (pymagma.asarray(np.ones(4, np.float16)) for _ in range(3))
    # float16 operands into a bfloat16 C: not in GemmEx's CUBLAS_COMPUTE_32F table
    assert _gemm_ex(0, 0, 2, 2, 1, 1.0, A, 2, 2, B, 1, 0.0, C, 14, 2) == _cublas.Status.NOT_SUPPORTED
    np.testing.assert_array_equal(C.get(), 1)
    with pytest.raises(CublasError, match="CUBLAS_STATUS_NOT_SUPPORTED"):
        _cublas.check(15, "cublasGemmEx")
    sim.cublas.rejected.clear()


def test_strided_batched_model_steps_each_operand_by_its_stride(sim):
    rng = np.random.default_rng(2)
    m, n, k, count = 3, 2, 4, 3
    sa, sb, sc = m * k + 5, k * n + 1, m * n + 2
    a, b = ints(rng, sa * count, BF16), ints(rng, sb * count, BF16)
    A, B, C = pymagma.asarray(a), pymagma.asarray(b), pymagma.zeros(sc * count, np.float32)
    al, be = ctypes.c_float(1.0), ctypes.c_float(0.0)
    status = _cublas.library().cublasGemmStridedBatchedEx(
        _handle(), 0, 0, m, n, k, ctypes.byref(al), A.ptr, 14, m, sa, B.ptr, 14, k, sb, ctypes.byref(be), C.ptr, 0,
        m, sc, count, _cublas.ComputeType.COMPUTE_32F, _cublas.GEMM_DEFAULT)
    assert status == 0
    got = C.get()
    for i in range(count):
        expected = reference(_colmajor(a[i * sa:], m, k, m), _colmajor(b[i * sb:], k, n, k), np.float32)
        np.testing.assert_array_equal(_colmajor(got[i * sc:], m, n, m), expected)


# ------------------------------------------------------------------------------------- the row-major face
@settings(max_examples=40, deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(0, 6), n=st.integers(0, 6), k=st.integers(0, 6), ta=st.booleans(), tb=st.booleans(),
       tc=st.booleans(), pad=st.integers(0, 2), dtype=st.sampled_from(HALVES), f32=st.booleans(),
       beta=st.sampled_from([0.0, -1.5]), seed=st.integers(0, 2 ** 16))
def test_gemm_row_major_face(sim, m, n, k, ta, tb, tc, pad, dtype, f32, beta, seed):
    """out = alpha op(a) op(b) + beta out for every layout (transposed views, a transposed out: the C^T = B^T A^T
    call, an out with padded rows: its own leading dimension), each output type, against the rounded NumPy
    reference; the padding is not written."""
    rng = np.random.default_rng(seed)
    a = ints(rng, (k, m) if ta else (m, k), dtype)
    b = ints(rng, (n, k) if tb else (k, n), dtype)
    out_dtype = np.dtype(np.float32) if f32 else dtype
    c = ints(rng, (m, n), out_dtype)
    wide = ints(rng, (n, m + pad) if tc else (m, n + pad), out_dtype)
    (wide.T[:m] if tc else wide[:, :n])[...] = c
    d_wide = pymagma.asarray(wide)
    d_out = d_wide[:, :m].T if tc else d_wide[:, :n]
    got = blas.gemm(pymagma.asarray(a), pymagma.asarray(b), d_out, alpha=2.0, beta=beta, trans_a=ta, trans_b=tb)
    assert got is d_out and got.dtype == out_dtype
    expected = reference(a.T if ta else a, b.T if tb else b, out_dtype, 2.0, beta, c)
    np.testing.assert_array_equal(got.get().astype(np.float64), expected.astype(np.float64))
    after = d_wide.get()
    np.testing.assert_array_equal(after[:, m:] if tc else after[:, n:], wide[:, m:] if tc else wide[:, n:])


@settings(max_examples=25, deadline=None, suppress_health_check=REUSE)
@given(batch_a=st.sampled_from([(), (1,), (3,), (2, 3)]), batch_b=st.sampled_from([(), (3,), (2, 1)]),
       m=st.integers(1, 4), n=st.integers(1, 4), k=st.integers(1, 4), dtype=st.sampled_from(HALVES),
       f32=st.booleans(), method=st.sampled_from(["auto", "pointers"]), transposed=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_matmul_batched_row_major_face(sim, batch_a, batch_b, m, n, k, dtype, f32, method, transposed, seed):
    try:
        batch = np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        return
    rng = np.random.default_rng(seed)
    a, b = ints(rng, (*batch_a, m, k), dtype), ints(rng, (*batch_b, k, n), dtype)
    da = pymagma.asarray(np.ascontiguousarray(np.swapaxes(a, -1, -2))).mT if transposed else \
        pymagma.asarray(a)
    out_dtype = np.dtype(np.float32) if f32 else dtype
    if batch:
        got = blas.gemm_batched(da, pymagma.asarray(b), method=method, out_dtype=out_dtype)
    else:
        got = blas.matmul(da, pymagma.asarray(b), out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == (*batch, m, n)
    np.testing.assert_array_equal(got.get().astype(np.float64), reference(a, b, out_dtype).astype(np.float64))


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: d.name)
@pytest.mark.parametrize("shapes", [((4, 2, 6), (4, 6, 2)), ((3, 3, 2), (2, 5)), ((1, 3, 4), (3, 4, 2))])
def test_strided_batched_half_into_float32(sim, dtype, shapes):
    """Half operands, a float32 out: each operand's batch stride counted in its own elements."""
    rng = np.random.default_rng(3)
    a, b = ints(rng, shapes[0], dtype), ints(rng, shapes[1], dtype)
    sim.cublas.calls.clear()
    got = blas.matmul(pymagma.asarray(a), pymagma.asarray(b), out_dtype=np.float32)
    assert sim.cublas.calls[-1] == "cublasGemmStridedBatchedEx"
    np.testing.assert_array_equal(got.get(), reference(a, b, np.float32))


def test_matmul_vectors_and_out(sim):
    rng = np.random.default_rng(1)
    a, v = ints(rng, (3, 4), np.float16), ints(rng, 4, np.float16)
    got = blas.matmul(pymagma.asarray(a), pymagma.asarray(v))
    np.testing.assert_array_equal(got.get(), reference(a, v[:, None], np.float16)[:, 0])
    out = pymagma.zeros(3, np.float32)
    assert blas.matmul(pymagma.asarray(a), pymagma.asarray(v), out) is out
    np.testing.assert_array_equal(out.get(), reference(a, v[:, None], np.float32)[:, 0])


def test_half_gemm_goes_through_cublas_on_the_queue_handle(sim):
    a = pymagma.ones((2, 3), np.float16)
    sim.cublas.calls.clear()
    blas.gemm(a, a.T)
    assert list(sim.cublas.calls) == ["cublasGemmEx"]
    blas.matmul(pymagma.ones((4, 2, 3), BF16), pymagma.ones((4, 3, 2), BF16))
    assert sim.cublas.calls[-1] == "cublasGemmStridedBatchedEx"


def test_half_gemm_argument_errors(sim):
    h, f = pymagma.ones((2, 2), np.float16), pymagma.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="different dtypes float16 and float32"):
        blas.gemm(h, f)
    with pytest.raises(TypeError, match="out_dtype float64 for float16 operands"):
        blas.gemm(h, h, out_dtype=np.float64)
    with pytest.raises(TypeError, match="out_dtype bfloat16 for float16"):
        blas.matmul(h, h, out_dtype=BF16)
    with pytest.raises(TypeError, match="out has dtype float16, but out_dtype is float32"):
        blas.gemm(h, h, pymagma.zeros((2, 2), np.float16), out_dtype=np.float32)
    with pytest.raises(TypeError, match="a float32 result is for float16/bfloat16"):
        blas.gemm(f, f, out_dtype=np.float16)
    with pytest.raises(TypeError, match="real numbers"):
        blas.gemm(h, h, alpha=1j)
    with pytest.raises(ValueError, match="inner dimensions"):
        blas.gemm(h, pymagma.ones((3, 2), np.float16))


# ------------------------------------------------------------------------------------- the real library
@pytest.mark.native
def test_the_real_cublas_exports_every_prototype():
    try:
        lib = _cublas.lib
        lib.cdll  # noqa: B018 - load it
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"libcublas not loadable here: {exc}")
    assert lib.missing() == []
    for name, (restype, argtypes) in _cublas.PROTOTYPES.items():
        fn = lib.bind(name)
        assert fn.restype is restype and list(fn.argtypes) == list(argtypes)
    assert len(_cublas.PROTOTYPES["cublasGemmEx"][1]) == 19
    assert len(_cublas.PROTOTYPES["cublasGemmStridedBatchedEx"][1]) == 23


# ------------------------------------------------------------------------------------- on a GPU
def _gpu_checks():
    rng = np.random.default_rng(0)
    for dtype in HALVES:
        for out_dtype in (dtype, np.dtype(np.float32)):
            a, b = ints(rng, (37, 19), dtype), ints(rng, (23, 19), dtype)
            got = blas.gemm(pymagma.asarray(a), pymagma.asarray(b), trans_b=True, out_dtype=out_dtype)
            np.testing.assert_array_equal(got.get().astype(np.float64),
                                          reference(a, b.T, out_dtype).astype(np.float64))
            x, y = ints(rng, (4, 8, 16), dtype), ints(rng, (4, 16, 8), dtype)
            got = blas.matmul(pymagma.asarray(x), pymagma.asarray(y), out_dtype=out_dtype)
            np.testing.assert_array_equal(got.get().astype(np.float64),
                                          reference(x, y, out_dtype).astype(np.float64))


@pytest.mark.gpu
def test_half_gemm_on_device():
    _gpu_checks()


# ------------------------------------------------------------------------------------- allow_tf32
def test_allow_tf32_sets_the_queue_handles_math_mode_for_float32_gemm(sim, monkeypatch):
    rng = np.random.default_rng(7)
    a = (1 + rng.integers(1, 2 ** 12, (4, 5)) * 2.0 ** -22).astype(np.float32)  # below TF32's precision
    b = rng.standard_normal((5, 3)).astype(np.float32)
    da, db = pymagma.asarray(a), pymagma.asarray(b)
    exact, rounded = a.astype(np.float64) @ b, _tf32(a).astype(np.float64) @ _tf32(b)
    assert blas.allow_tf32 is False  # PyTorch's default
    np.testing.assert_allclose(blas.gemm(da, db).get(), exact, rtol=2e-7)
    monkeypatch.setattr(blas, "allow_tf32", True)
    np.testing.assert_allclose(blas.matmul(da, db).get(), rounded, rtol=2e-7)
    np.testing.assert_allclose(blas.gemm(db, da, trans_a=True, trans_b=True).get(), rounded.T, rtol=2e-7)
    mode = ctypes.c_int(-1)
    _cublas.library().cublasGetMathMode(_handle(), ctypes.byref(mode))
    assert mode.value == _cublas.Math.TF32_TENSOR_OP
    calls = len([c for c in sim.cublas.calls if c == "cublasSetMathMode"])
    blas.gemm(da, db)
    assert len([c for c in sim.cublas.calls if c == "cublasSetMathMode"]) == calls  # set once per change
    f64 = pymagma.asarray(a.astype(np.float64))
    np.testing.assert_allclose(blas.gemm(f64, pymagma.asarray(b.astype(np.float64))).get(), exact, rtol=1e-12)
    monkeypatch.setattr(blas, "allow_tf32", False)
    np.testing.assert_allclose(blas.gemm(da, db).get(), exact, rtol=2e-7)
    _cublas.library().cublasGetMathMode(_handle(), ctypes.byref(mode))
    assert mode.value == _cublas.Math.DEFAULT
    assert not np.allclose(exact, rounded, rtol=2e-7, atol=0)


def test_allow_tf32_reaches_the_handle_on_a_gemm_of_a_new_signature(sim, monkeypatch):
    rng = np.random.default_rng(8)
    a = (1 + rng.integers(1, 2 ** 12, (3, 6)) * 2.0 ** -22).astype(np.float32)  # below TF32's precision
    b = rng.standard_normal((6, 2)).astype(np.float32)
    monkeypatch.setattr(blas, "allow_tf32", True)
    blas._GEMM_PLANS.clear()  # the checked call (it plans), then the planned one
    for _ in range(2):
        got = blas.gemm(pymagma.asarray(a), pymagma.asarray(b)).get()
        np.testing.assert_allclose(got, _tf32(a).astype(np.float64) @ _tf32(b), rtol=2e-7)
    assert not np.allclose(got, a.astype(np.float64) @ b, rtol=2e-7, atol=0)


@pytest.mark.gpu
def test_allow_tf32_on_device(monkeypatch):
    rng = np.random.default_rng(7)
    a = (1 + rng.integers(1, 2 ** 12, (256, 256)) * 2.0 ** -22).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    exact = a.astype(np.float64) @ b
    np.testing.assert_allclose(blas.gemm(pymagma.asarray(a), pymagma.asarray(b)).get(), exact, rtol=1e-4,
                               atol=1e-4)
    monkeypatch.setattr(blas, "allow_tf32", True)
    tf = blas.gemm(pymagma.asarray(a), pymagma.asarray(b)).get()
    np.testing.assert_allclose(tf, _tf32(a).astype(np.float64) @ _tf32(b), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(blas, "allow_tf32", False)
    blas.gemm(pymagma.asarray(a), pymagma.asarray(b))  # leaves the handle in the default mode


# ------------------------------------------------------------------------------------- CUDA graphs
@pytest.mark.parametrize("device", ["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_half_gemm_replays_as_eager(device):
    """GemmEx on the queue's handle is captured like MAGMA's work: replay with new inputs equals eager bit for bit
    (alpha and beta are read at the call, as cuBLAS's host pointer mode does)."""
    from pymagma import graphs

    def run():
        rng = np.random.default_rng(4)
        w = pymagma.asarray(ints(rng, (5, 3), BF16))
        wb = pymagma.asarray(ints(rng, (2, 5, 3), BF16))
        x = pymagma.asarray(np.zeros((4, 5), BF16))
        xb = pymagma.asarray(np.zeros((2, 4, 5), BF16))
        with graphs.capture() as graph:
            y = blas.matmul(x, w, out_dtype=np.float32)
            yb = blas.matmul(xb, wb)
        for _ in range(3):
            batch, batches = ints(rng, (4, 5), BF16), ints(rng, (2, 4, 5), BF16)
            x.set(batch)
            xb.set(batches)
            graph.launch()
            np.testing.assert_array_equal(y.get(), blas.matmul(pymagma.asarray(batch), w, out_dtype=np.float32).get())
            np.testing.assert_array_equal(yb.get().astype(np.float32),
                                          blas.matmul(pymagma.asarray(batches), wb).get().astype(np.float32))
            np.testing.assert_array_equal(y.get(), reference(batch, w.get(), np.float32))

    if device == "gpu":
        run()
    else:
        with simulator.simulated("full"):
            run()


# ------------------------------------------------------------------------------------- MAGMA's hgemmx
@pytest.mark.parametrize("ta,tb,tc", [(False, False, False), (True, False, False), (False, True, True),
                                      (True, True, True), (False, False, True)])
@pytest.mark.parametrize("exported", [True, False], ids=["hgemmx", "GemmEx"])
def test_float16_into_float32_uses_magmas_hgemmx_where_exported(sim, ta, tb, tc, exported):
    """float16 operands into float32: MAGMA's magma_hgemmx when the provider exports it (PyTorch's MAGMA does not),
    cublasGemmEx otherwise; the same result either way, padded leading dimensions included."""
    if not exported:
        sim.magma.hidden.add("magma_hgemmx")
    rng = np.random.default_rng(11)
    m, n, k = 4, 3, 5
    a, b = ints(rng, (k, m) if ta else (m, k), np.float16), ints(rng, (n, k) if tb else (k, n), np.float16)
    c = ints(rng, (m, n), np.float32)
    wide = ints(rng, (n, m + 2) if tc else (m, n + 2), np.float32)
    (wide.T[:m] if tc else wide[:, :n])[...] = c
    d_wide = pymagma.asarray(wide)
    out = d_wide[:, :m].T if tc else d_wide[:, :n]
    sim.magma.calls.clear()
    sim.cublas.calls.clear()
    blas.gemm(pymagma.asarray(a), pymagma.asarray(b), out, alpha=0.5, beta=-2.0, trans_a=ta, trans_b=tb)
    assert ("magma_hgemmx" in sim.magma.calls) == exported and bool(sim.cublas.calls) != exported
    expected = reference(a.T if ta else a, b.T if tb else b, np.float32, 0.5, -2.0, c)
    np.testing.assert_array_equal(out.get(), expected)
    after = d_wide.get()
    np.testing.assert_array_equal(after[:, m:] if tc else after[:, n:], wide[:, m:] if tc else wide[:, n:])
