"""pymagma.blas: the row-major -> column-major mapping, checked on the CPU by interpreting the planned BLAS call with
a plain NumPy model of column-major BLAS over a flat memory buffer; and every routine against NumPy on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymagma import _magma, blas
from pymagma.array import DeviceArray
from tests.conftest import examples

from .helpers import random_values as values

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


# ----------------------------------------------------------------------------------------------------- memory model
class Memory:
    """A flat host buffer standing in for device memory: arrays placed in it are DeviceArrays with real addresses."""

    def __init__(self, dtype, size=4096):
        self.buf = np.zeros(size, dtype)
        self.item = self.buf.itemsize
        self.base = self.buf.ctypes.data
        self.used = 0

    def place(self, values, layout="c", pad=0, batch_gap=0) -> DeviceArray:
        """Store ``values`` (..., r, c) with ``layout`` 'c' (rows contiguous) or 'f' (columns contiguous), each
        matrix's leading dimension padded by ``pad`` and ``batch_gap`` spare elements between matrices."""
        values = np.asarray(values, self.buf.dtype)
        *batch, r, c = values.shape
        ld = (c if layout == "c" else r) + pad
        mat = max(ld * (r if layout == "c" else c), 1) + batch_gap
        inner = (ld, 1) if layout == "c" else (1, ld)
        strides, step = [], mat
        for n in reversed(batch):
            strides.insert(0, step)
            step *= n
        strides = tuple(s * self.item for s in (*strides, *inner))
        start = self.used
        self.used += step + 8
        assert self.used < self.buf.size, "test buffer too small"
        view = np.lib.stride_tricks.as_strided(self.buf[start:], values.shape, strides)
        view[...] = values
        return DeviceArray(values.shape, self.buf.dtype, self.base + start * self.item, strides, owner=self.buf)

    def read(self, x: DeviceArray) -> np.ndarray:
        off = (x.ptr - self.base) // self.item
        return np.lib.stride_tricks.as_strided(self.buf[off:], x.shape, x.strides).copy()

    def colmajor(self, ptr, rows, cols, ld) -> np.ndarray:
        """The column-major ``rows x cols`` matrix a BLAS routine addresses at ``ptr`` with leading dimension ``ld``
        (a writable view)."""
        assert ld >= max(1, rows), f"BLAS would reject ld={ld} < rows={rows}"
        off = (ptr - self.base) // self.item
        assert 0 <= off and off + (cols - 1) * ld + rows <= self.buf.size
        return np.lib.stride_tricks.as_strided(self.buf[off:], (rows, cols), (self.item, ld * self.item))


def _op(x, trans):
    return x if trans == _magma.MagmaNoTrans else x.T


def blas_gemm(mem, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    A = mem.colmajor(a, *((m, k) if transA == _magma.MagmaNoTrans else (k, m)), lda)
    B = mem.colmajor(b, *((k, n) if transB == _magma.MagmaNoTrans else (n, k)), ldb)
    C = mem.colmajor(c, m, n, ldc)
    C[...] = alpha * (_op(A, transA) @ _op(B, transB)) + beta * C


def blas_gemv(mem, trans, m, n, alpha, a, lda, x, incx, beta, y, incy):
    A = mem.colmajor(a, m, n, lda)
    lx, ly = (n, m) if trans == _magma.MagmaNoTrans else (m, n)
    X = mem.colmajor(x, 1, lx, incx).ravel() if lx else np.zeros(0, mem.buf.dtype)
    Y = mem.colmajor(y, 1, ly, incy)
    Y[0, :] = alpha * (_op(A, trans) @ X) + beta * Y[0, :]


def blas_trsm(mem, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb):
    na = m if side == _magma.MagmaLeft else n
    A = mem.colmajor(a, na, na, lda).copy()
    A = np.tril(A) if uplo == _magma.MagmaLower else np.triu(A)
    if diag == _magma.MagmaUnit:
        np.fill_diagonal(A, 1)
    B = mem.colmajor(b, m, n, ldb)
    opA = _op(A, trans)
    B[...] = np.linalg.solve(opA, alpha * B) if side == _magma.MagmaLeft else \
        np.linalg.solve(opA.T, (alpha * B).T).T


def blas_syrk(mem, uplo, trans, n, k, alpha, a, lda, beta, c, ldc):
    A = mem.colmajor(a, *((n, k) if trans == _magma.MagmaNoTrans else (k, n)), lda)
    C = mem.colmajor(c, n, n, ldc)
    full = alpha * (A @ A.T if trans == _magma.MagmaNoTrans else A.T @ A) + beta * C
    mask = np.tril(np.ones((n, n), bool)) if uplo == _magma.MagmaLower else np.triu(np.ones((n, n), bool))
    C[mask] = full[mask]


# ----------------------------------------------------------------------------------------------------- strategies
layouts = st.sampled_from(["c", "f"])
pads = st.integers(0, 2)
dims = st.integers(1, 5)


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-4} if np.dtype(dtype) in (np.float32, np.complex64) else \
        {"rtol": 1e-10, "atol": 1e-10}


@given(m=dims, k=dims, n=dims, la=layouts, lb=layouts, lc=layouts, pa=pads, pb=pads, pc=pads,
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_gemm_plan_computes_row_major_product(m, k, n, la, lb, lc, pa, pb, pc, dtype, seed):
    rng = np.random.default_rng(seed)
    mem = Memory(dtype)
    av, bv, cv = values(rng, (m, k), dtype), values(rng, (k, n), dtype), values(rng, (m, n), dtype)
    a, b, c = mem.place(av, la, pa), mem.place(bv, lb, pb), mem.place(cv, lc, pc)
    call = blas.plan_gemm(a, b, c)
    blas_gemm(mem, call.transA, call.transB, call.m, call.n, call.k, 2.0, call.A.ptr, call.A.ld,
              call.B.ptr, call.B.ld, 0.5, call.C.ptr, call.C.ld)
    np.testing.assert_allclose(mem.read(c), 2.0 * av @ bv + 0.5 * cv, **tol(dtype))
    np.testing.assert_array_equal(mem.read(a), av)  # inputs untouched


@given(m=dims, k=dims, n=dims, la=layouts, lb=layouts, lc=layouts, gap=st.integers(0, 3),
       batch=st.lists(st.integers(1, 3), min_size=1, max_size=2), bcast=st.sampled_from(["none", "a", "b"]),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_batched_gemm_plan_pointer_arrays_and_strides(m, k, n, la, lb, lc, gap, batch, bcast, dtype, seed):
    rng = np.random.default_rng(seed)
    mem = Memory(dtype, 1 << 14)
    ashape = (m, k) if bcast == "a" else (*batch, m, k)
    bshape = (k, n) if bcast == "b" else (*batch, k, n)
    av, bv = values(rng, ashape, dtype), values(rng, bshape, dtype)
    a, b = mem.place(av, la, batch_gap=gap), mem.place(bv, lb, batch_gap=gap)
    c = mem.place(np.zeros((*batch, m, n), dtype), lc)
    plan = blas.plan_gemm_batched(a, b, c)
    call = plan.call
    assert len(plan.a_ptrs) == len(plan.b_ptrs) == len(plan.c_ptrs) == int(np.prod(batch))
    for pa, pb, pc in zip(plan.a_ptrs, plan.b_ptrs, plan.c_ptrs):  # the pointer-array form
        blas_gemm(mem, call.transA, call.transB, call.m, call.n, call.k, 1.0, pa, call.A.ld, pb, call.B.ld, 0.0,
                  pc, call.C.ld)
    expected = av @ bv
    np.testing.assert_allclose(mem.read(c), expected, **tol(dtype))
    if plan.strides is not None:  # the strided form must address the same matrices
        sa, sb, sc = plan.strides
        c2 = mem.place(np.zeros((*batch, m, n), dtype), lc)
        call2 = blas.plan_gemm_batched(a, b, c2).call
        for i in range(len(plan.c_ptrs)):
            blas_gemm(mem, call2.transA, call2.transB, call2.m, call2.n, call2.k, 1.0,
                      call2.A.ptr + i * sa * mem.item, call2.A.ld, call2.B.ptr + i * sb * mem.item, call2.B.ld,
                      0.0, call2.C.ptr + i * sc * mem.item, call2.C.ld)
        np.testing.assert_allclose(mem.read(c2), expected, **tol(dtype))
    else:
        assert len(set(np.diff(plan.a_ptrs))) > 1 or len(set(np.diff(plan.b_ptrs))) > 1


@given(m=dims, n=dims, la=layouts, pa=pads, xs=st.integers(1, 3), ys=st.integers(1, 3),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_gemv_plan(m, n, la, pa, xs, ys, dtype, seed):
    rng = np.random.default_rng(seed)
    mem = Memory(dtype)
    av, xv, yv = values(rng, (m, n), dtype), values(rng, (n,), dtype), values(rng, (m,), dtype)
    a = mem.place(av, la, pa)
    x = mem.place(xv.reshape(n, 1), "c", xs - 1)[:, 0]  # a strided vector (stride xs elements)
    y = mem.place(yv.reshape(m, 1), "c", ys - 1)[:, 0]
    c = blas.plan_gemv(a, x, y)
    blas_gemv(mem, c.trans, c.m, c.n, 1.5, c.A.ptr, c.A.ld, c.x, c.incx, -1.0, c.y, c.incy)
    np.testing.assert_allclose(mem.read(y), 1.5 * av @ xv - yv, **tol(dtype))


@given(m=dims, n=dims, left=st.booleans(), lower=st.booleans(), trans=st.booleans(), unit=st.booleans(),
       la=layouts, lb=layouts, pa=pads, pb=pads, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_trsm_plan(m, n, left, lower, trans, unit, la, lb, pa, pb, dtype, seed):
    rng = np.random.default_rng(seed)
    mem = Memory(dtype)
    na = m if left else n
    av = values(rng, (na, na), dtype) + 4 * np.eye(na, dtype=dtype)  # well conditioned
    bv = values(rng, (m, n), dtype)
    a, b = mem.place(av, la, pa), mem.place(bv, lb, pb)
    c = blas.plan_trsm(a, b, left, lower, trans, unit)
    blas_trsm(mem, c.side, c.uplo, c.trans, c.diag, c.m, c.n, 2.0, c.A.ptr, c.A.ld, c.B.ptr, c.B.ld)
    tri = np.tril(av) if lower else np.triu(av)
    if unit:
        np.fill_diagonal(tri, 1)
    op = tri.T if trans else tri
    expected = np.linalg.solve(op, 2.0 * bv) if left else 2.0 * bv @ np.linalg.inv(op)
    np.testing.assert_allclose(mem.read(b), expected, **tol(dtype))


@given(n=dims, k=dims, lower=st.booleans(), trans=st.booleans(), la=layouts, lc=layouts, pa=pads,
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_syrk_plan(n, k, lower, trans, la, lc, pa, dtype, seed):
    rng = np.random.default_rng(seed)
    mem = Memory(dtype)
    av = values(rng, (k, n) if trans else (n, k), dtype)
    a, c = mem.place(av, la, pa), mem.place(np.zeros((n, n), dtype), lc)
    call = blas.plan_syrk(a, c, lower, trans)
    blas_syrk(mem, call.uplo, call.trans, call.n, call.k, 1.0, call.A.ptr, call.A.ld, 0.0, call.C.ptr, call.C.ld)
    full = av.T @ av if trans else av @ av.T
    tri = np.tril if lower else np.triu
    np.testing.assert_allclose(tri(mem.read(c)), tri(full), **tol(dtype))
    np.testing.assert_array_equal((np.triu if lower else np.tril)(mem.read(c), 1 if lower else -1), 0)


def test_unaddressable_layout_is_rejected_before_any_call():
    mem = Memory(np.float64)
    a = mem.place(np.ones((4, 4)))[::2, ::2]  # neither rows nor columns contiguous
    b = mem.place(np.ones((2, 2)))
    with pytest.raises(ValueError, match="strides"):
        blas.plan_gemm(a, b, b)


def test_dtype_and_shape_errors_before_any_native_call():
    mem32, mem64 = Memory(np.float32), Memory(np.float64)
    a32, a64 = mem32.place(np.ones((2, 3))), mem64.place(np.ones((3, 2)))
    with pytest.raises(TypeError, match="different dtypes"):
        blas.gemm(a32, a64, out=mem32.place(np.ones((2, 2))))
    with pytest.raises(ValueError, match="inner dimensions"):
        blas.gemm(a32, mem32.place(np.ones((2, 2))))
    with pytest.raises(TypeError, match="DeviceArray"):
        blas.gemm(np.ones((2, 2)), a32)
    ints = DeviceArray((2, 2), np.int32, a32.ptr, owner=a32)
    with pytest.raises(TypeError, match="float32, float64, complex64 or complex128"):
        blas.gemm(ints, ints, out=ints)
    with pytest.raises(ValueError, match="side"):
        blas.trsm(mem64.place(np.eye(2)), mem64.place(np.ones((2, 2))), side="up")


def test_host_outputs_and_mixed_devices_are_rejected_before_any_native_call():
    mem = Memory(np.float64)
    a, x = mem.place(np.ones((2, 2))), mem.place(np.ones((1, 2)))[0]
    for call in (lambda: blas.gemm(a, a, out=np.zeros((2, 2))), lambda: blas.gemv(a, x, np.zeros(2)),
                 lambda: blas.gemm_batched(a, a, out=np.zeros((2, 2))), lambda: blas.syrk(a, np.zeros((2, 2)))):
        with pytest.raises(TypeError, match="DeviceArray"):
            call()
    elsewhere = DeviceArray(x.shape, x.dtype, x.ptr, x.strides, owner=x, device=1)
    for call in (lambda: blas.axpy(1.0, x, elsewhere), lambda: blas.dot(x, elsewhere),
                 lambda: blas.syrk(a, DeviceArray((2, 2), a.dtype, a.ptr, owner=a, device=1))):
        with pytest.raises(ValueError, match="different devices"):
            call()


def test_scalars_follow_precision():
    assert blas.scalar(2, "s").value == 2.0
    z = blas.scalar(1 + 2j, "z")
    assert (z.real, z.imag) == (1.0, 2.0)
    with pytest.raises(TypeError, match="complex scalar"):
        blas.scalar(1j, "d")


# ----------------------------------------------------------------------------------------------------- GPU
def _gpu(x):
    import pymagma

    return pymagma.asarray(x)


@pytest.mark.gpu
@settings(max_examples=examples(25), deadline=None)
@given(m=st.integers(0, 40), k=st.integers(0, 40), n=st.integers(0, 40), ta=st.booleans(), tb=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_gemm_matches_numpy(m, k, n, ta, tb, dtype, seed):
    rng = np.random.default_rng(seed)
    av = values(rng, (k, m) if ta else (m, k), dtype)
    bv = values(rng, (n, k) if tb else (k, n), dtype)
    out = blas.gemm(_gpu(av), _gpu(bv), trans_a=ta, trans_b=tb).get()
    np.testing.assert_allclose(out, (av.T if ta else av) @ (bv.T if tb else bv), **tol(dtype))


@pytest.mark.gpu
@settings(max_examples=examples(25), deadline=None)
@given(batch=st.lists(st.integers(1, 4), min_size=1, max_size=2), m=dims, k=dims, n=dims,
       method=st.sampled_from(["auto", "pointers"]), bcast=st.booleans(), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**16))
def test_gemm_batched_and_matmul_match_numpy(batch, m, k, n, method, bcast, dtype, seed):
    rng = np.random.default_rng(seed)
    av = values(rng, (*batch, m, k), dtype)
    bv = values(rng, (k, n) if bcast else (*batch, k, n), dtype)
    np.testing.assert_allclose(blas.gemm_batched(_gpu(av), _gpu(bv), method=method).get(), av @ bv, **tol(dtype))
    np.testing.assert_allclose((_gpu(av) @ _gpu(bv)).get(), av @ bv, **tol(dtype))
    v = values(rng, (k,), dtype)  # a vector times the stack (NumPy's matmul promotes it to a (1, k) row)
    np.testing.assert_allclose(blas.matmul(_gpu(v), _gpu(bv)).get(), v @ bv, **tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_level1_and_level2_match_numpy(dtype):
    rng = np.random.default_rng(0)
    x, y, a = values(rng, (37,), dtype), values(rng, (37,), dtype), values(rng, (21, 37), dtype)
    dy = _gpu(y)
    blas.axpy(2.0, _gpu(x), dy)
    np.testing.assert_allclose(dy.get(), y + 2 * x, **tol(dtype))
    dx = _gpu(x)
    blas.scal(3.0, dx)
    np.testing.assert_allclose(dx.get(), 3 * x, **tol(dtype))
    np.testing.assert_allclose(blas.dot(_gpu(x), _gpu(y)), np.dot(x, y), **tol(dtype))
    np.testing.assert_allclose(blas.dot(_gpu(x), _gpu(y), conjugate=True), np.vdot(x, y), **tol(dtype))
    np.testing.assert_allclose(blas.nrm2(_gpu(x)), np.linalg.norm(x), **tol(dtype))
    np.testing.assert_allclose(blas.asum(_gpu(x)), np.sum(np.abs(x.real) + np.abs(x.imag)), **tol(dtype))
    np.testing.assert_allclose(blas.asum(_gpu(a)[:, 3]), np.sum(np.abs(a[:, 3].real) + np.abs(a[:, 3].imag)),
                               **tol(dtype))
    np.testing.assert_allclose(blas.gemv(_gpu(a), _gpu(x)).get(), a @ x, **tol(dtype))
    np.testing.assert_allclose(blas.gemv(_gpu(a).T, _gpu(a[:, 0])).get(), a.T @ a[:, 0], **tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("side", "lower", "trans"), [("left", True, False), ("right", False, True),
                                                      ("left", False, True), ("right", True, False)])
def test_trsm_and_syrk_match_numpy(dtype, side, lower, trans):
    rng = np.random.default_rng(1)
    a = values(rng, (6, 6), dtype) + 6 * np.eye(6, dtype=dtype)
    b = values(rng, (6, 4) if side == "left" else (4, 6), dtype)
    tri = np.tril(a) if lower else np.triu(a)
    op = tri.T if trans else tri
    expected = np.linalg.solve(op, b) if side == "left" else b @ np.linalg.inv(op)
    db = _gpu(b)
    blas.trsm(_gpu(a), db, side=side, lower=lower, trans=trans)
    np.testing.assert_allclose(db.get(), expected, **tol(dtype))
    c = blas.syrk(_gpu(b), lower=lower).get()
    tri_fn = np.tril if lower else np.triu
    np.testing.assert_allclose(tri_fn(c), tri_fn(b @ b.T), **tol(dtype))
