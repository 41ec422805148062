"""The public API end to end on the simulated device (:mod:`pymagma.simulator`, mode "full"): device memory is
host memory, the CUDA runtime calls are memmove/memset, and each MAGMA routine is a NumPy model of its documented
column-major semantics, called with the arguments our code passes (checked against our tables: arity, integer
sizes, enum values, scalar ctypes).  This exercises every executor's argument order on the CPU; the real device runs
are the ``gpu`` tests.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _magma as M
from pymagma import blas, linalg, memory, simulator
from pymagma import runtime as rt
from pymagma.simulator.magma import SimulatedMagma
from tests.conftest import examples
from tests.pymagma.helpers import BF16_CASE, pivoting_matrices
from tests.pymagma.helpers import random_values as values


@pytest.fixture
def device():
    """The simulator in mode "full" for one test; yields its simulated MAGMA (``calls``, ``hidden``).

    Request it before ``monkeypatch`` (``def test(device, monkeypatch)``) when the test patches the runtime
    further: fixtures are torn down in reverse order, so the test's patches are undone first."""
    with simulator.simulated("full") as simulation:
        yield simulation.magma
        simulation.magma.reset()


def simulate_device(monkeypatch) -> SimulatedMagma:
    """Install the simulator (mode "full") with ``monkeypatch`` (undone with it); returns the simulated MAGMA."""
    return simulator.install(monkeypatch, "full").magma


# ----------------------------------------------------------------------------------------------------- tests
REUSE = [HealthCheck.function_scoped_fixture]  # the simulated device is stateless between examples
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype):
    return {"rtol": 1e-3, "atol": 1e-3} if np.dtype(dtype) in (np.float32, np.complex64) else \
        {"rtol": 1e-9, "atol": 1e-9}


def test_arrays_round_trip_through_simulated_memory(device):
    host = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    d = pymagma.asarray(host)
    np.testing.assert_array_equal(d.get(), host)
    np.testing.assert_array_equal(d.T.get(), host.T)
    np.testing.assert_array_equal(d[:, 1:, ::2].copy().get(), host[:, 1:, ::2])
    np.testing.assert_array_equal(pymagma.zeros((2, 2)).get(), 0)
    np.testing.assert_array_equal(pymagma.ones(3, np.complex64).get(), 1)
    assert memory.pool_stats()["in_use_bytes"] > 0


def test_bfloat16_arrays_convert_and_round_trip(device):
    pytest.importorskip("ml_dtypes")
    host = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    bf16 = pymagma.asarray(host).astype("bfloat16")
    assert bf16.dtype == pymagma.dtypes.bfloat16() and bf16.nbytes == host.size * 2
    np.testing.assert_array_equal(bf16.T.get(), host.T.astype(bf16.dtype))
    np.testing.assert_array_equal(bf16.astype(np.float32).get(), host)  # small integers are exact in bfloat16


def test_zero_dim_and_reversed_arrays(device):
    assert pymagma.asarray(3.5).shape == () and pymagma.asarray(3.5).get().shape == ()
    assert pymagma.ones((), np.float64).get().shape == ()
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = pymagma.asarray(host)
    for key in ((slice(None), slice(None, None, -1)), (slice(None, None, -1), slice(None), slice(1, None)),
                (Ellipsis, slice(None, None, -2))):
        np.testing.assert_array_equal(d[key].copy().get(), host[key])


@pytest.mark.parametrize("dtype", [*DTYPES, np.int32, np.float16, BF16_CASE])
def test_column_major_copies_transpose_on_the_device(device, dtype):
    host = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(dtype)
    d = pymagma.asarray(host)
    device.calls.clear()
    part = host[:, :2, 1:]
    for view, expected in ((d.mT, np.swapaxes(host, -1, -2)), (d[1].T, host[1].T),
                           (d[:, :2, 1:].mT, np.swapaxes(part, -1, -2))):
        np.testing.assert_array_equal(view.copy().get(), expected)
    transposed = [c for c in device.calls if c.startswith("magmablas_") and c.endswith("transpose")]
    assert len(transposed) == (5 if np.dtype(dtype) in DTYPES else 0)  # one per matrix; other dtypes via the host


@settings(max_examples=examples(20), deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 6), k=st.integers(0, 6), n=st.integers(1, 6), ta=st.booleans(), tb=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_gemm_gemv(device, m, k, n, ta, tb, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (k, m) if ta else (m, k), dtype)
    b = values(rng, (n, k) if tb else (k, n), dtype)
    ea, eb = (a.T if ta else a), (b.T if tb else b)
    got = blas.gemm(pymagma.asarray(a), pymagma.asarray(b), trans_a=ta, trans_b=tb).get()
    np.testing.assert_allclose(got, ea @ eb, **tol(dtype))
    out = pymagma.asarray(np.ones((m, n), dtype)).T.copy().T  # a column-major output
    blas.gemm(pymagma.asarray(ea), pymagma.asarray(eb), out=out, alpha=2.0, beta=1.0)
    np.testing.assert_allclose(out.get(), 2 * ea @ eb + 1, **tol(dtype))
    if k:
        x = values(rng, (k,), dtype)
        np.testing.assert_allclose(blas.gemv(pymagma.asarray(ea), pymagma.asarray(x)).get(), ea @ x, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_views_into_bigger_arrays_pass_their_own_leading_dimensions_and_increments(device, layout, dtype):
    """gemm and gemv on blocks of bigger arrays (rows contiguous, or columns: transposed views) and on vectors with
    an element stride: lda, ldb, ldc and incx, incy are the views' own, and what lies around the output block
    stays as it was."""
    rng = np.random.default_rng(11)
    m, k, n, pad = 3, 4, 5, 2

    def block(whole, rows, cols):  # the same rows x cols block of a host or device array
        return whole[:rows, :cols] if layout == "rows" else whole[:cols, :rows].T

    def padded(rows, cols):
        host = values(rng, (rows + pad, cols + pad) if layout == "rows" else (cols + pad, rows + pad), dtype)
        return host, pymagma.asarray(host)

    (a, da), (b, db), (c, dc) = padded(m, k), padded(k, n), padded(m, n)
    blas.gemm(block(da, m, k), block(db, k, n), out=block(dc, m, n), alpha=2.0, beta=-1.0)
    expected = c.copy()
    block(expected, m, n)[...] = 2 * block(a, m, k) @ block(b, k, n) - block(c, m, n)
    np.testing.assert_allclose(dc.get(), expected, **tol(dtype))

    x, y = values(rng, (2 * k,), dtype), values(rng, (2 * m,), dtype)
    dy = pymagma.asarray(y)
    blas.gemv(block(da, m, k), pymagma.asarray(x)[::2], dy[1::2], alpha=1.0, beta=0.5)
    expected = y.copy()
    expected[1::2] = block(a, m, k) @ x[::2] + 0.5 * y[1::2]
    np.testing.assert_allclose(dy.get(), expected, **tol(dtype))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2), m=st.integers(1, 4), k=st.integers(1, 4),
       n=st.integers(1, 4), method=st.sampled_from(["auto", "pointers"]), bcast=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_batched_and_matmul(device, batch, m, k, n, method, bcast, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (*batch, m, k), dtype)
    b = values(rng, (k, n) if bcast else (*batch, k, n), dtype)
    got = blas.gemm_batched(pymagma.asarray(a), pymagma.asarray(b), method=method).get()
    np.testing.assert_allclose(got, a @ b, **tol(dtype))
    expected_routine = f"magmablas_{M.precision_of(dtype)}gemm_batched" + ("_strided" if method == "auto" else "")
    assert device.calls[-1] == expected_routine
    np.testing.assert_allclose((pymagma.asarray(a) @ pymagma.asarray(b)).get(), a @ b, **tol(dtype))
    v = values(rng, (k,), dtype)
    np.testing.assert_allclose(blas.matmul(pymagma.asarray(a), pymagma.asarray(v)).get(), a @ v, **tol(dtype))
    np.testing.assert_allclose(blas.matmul(pymagma.asarray(v), pymagma.asarray(b)).get(), v @ b, **tol(dtype))


@pytest.mark.parametrize("rcond", [None, -1, 0.5])
@pytest.mark.parametrize("on_device", [False, True])
def test_lstsq_rcond_follows_numpy_including_negative(device, rcond, on_device):
    a = np.zeros((4, 3))
    a[[0, 1], [0, 1]] = 3.0, 1.0  # singular values 3, 1, 0 exactly; rcond=0.5 also drops the 1
    b = np.arange(1.0, 5.0)
    wrap = pymagma.asarray if on_device else (lambda v: v)
    x, res, rank, s = (pymagma.to_numpy(v) if isinstance(v, pymagma.DeviceArray) else v
                       for v in linalg.lstsq(wrap(a), wrap(b), rcond))
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond)
    assert rank == erank == (1 if rcond == 0.5 else 2)
    np.testing.assert_allclose(x, ex, atol=1e-12)
    assert res.shape == eres.shape == (0,)
    np.testing.assert_allclose(s, es)


def test_magma_calls_run_on_the_arrays_device_when_there_are_several(device, monkeypatch):
    """Two GPUs, device 0 current, arrays on device 1: each MAGMA call runs with device 1 current (its queue and
    cuBLAS handle belong there) and device 0 is current again afterwards."""
    current = {"device": 0}
    monkeypatch.setattr(rt, "device_count", lambda: 2)
    monkeypatch.setattr(rt, "require_device", lambda: 2)
    monkeypatch.setattr(rt, "get_device", lambda: current["device"])
    monkeypatch.setattr(rt, "set_device", lambda d: current.update(device=int(d)))

    class DeviceLog(list):
        def append(self, name):
            super().append((name, current["device"]))

    rng = np.random.default_rng(0)
    a, b = values(rng, (4, 4), np.float64) + 4 * np.eye(4), values(rng, (4, 2), np.float64)
    da, db = pymagma.asarray(a, device=1), pymagma.asarray(b, device=1)
    device.calls = DeviceLog()
    np.testing.assert_allclose((da @ db).get(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(linalg.solve(da, db).get(), np.linalg.solve(a, b), rtol=1e-10)
    assert device.calls and {d for _, d in device.calls} == {1}, device.calls
    assert current["device"] == 0


def test_huge_strided_batches_are_split_below_magmas_offset_range(device, monkeypatch):
    """MAGMA forms i * stride in 32-bit magma_int_t; with the limit shrunk to 50 elements, a batch of 7 (3, 4) @
    (4, 2) products (largest stride 12) runs as calls of at most 4 matrices, with the same result."""
    monkeypatch.setattr(blas, "MAX_BATCH_OFFSET", 50)
    rng = np.random.default_rng(0)
    a, b = values(rng, (7, 3, 4), np.float64), values(rng, (7, 4, 2), np.float64)
    device.calls.clear()
    np.testing.assert_allclose(blas.gemm_batched(pymagma.asarray(a), pymagma.asarray(b)).get(), a @ b, rtol=1e-12)
    assert [c for c in device.calls if c.endswith("strided")] == ["magmablas_dgemm_batched_strided"] * 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_level1(device, dtype):
    rng = np.random.default_rng(0)
    x, y = values(rng, (9,), dtype), values(rng, (9,), dtype)
    dy = pymagma.asarray(y)
    blas.axpy(2.0, pymagma.asarray(x), dy)
    np.testing.assert_allclose(dy.get(), y + 2 * x, **tol(dtype))
    dx = pymagma.asarray(x)
    blas.scal(3.0, dx)
    np.testing.assert_allclose(dx.get(), 3 * x, **tol(dtype))
    np.testing.assert_allclose(blas.dot(pymagma.asarray(x), pymagma.asarray(y)), np.dot(x, y), **tol(dtype))
    np.testing.assert_allclose(blas.dot(pymagma.asarray(x), pymagma.asarray(y), conjugate=True), np.vdot(x, y),
                               **tol(dtype))
    np.testing.assert_allclose(blas.nrm2(pymagma.asarray(x)), np.linalg.norm(x), **tol(dtype))
    np.testing.assert_allclose(blas.asum(pymagma.asarray(x)), np.sum(np.abs(x.real) + np.abs(x.imag)), **tol(dtype))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), k=st.integers(1, 4), side=st.sampled_from(["left", "right"]), lower=st.booleans(),
       trans=st.booleans(), unit=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_trsm_syrk(device, n, k, side, lower, trans, unit, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (n, n), dtype) + 4 * np.eye(n, dtype=dtype)
    b = values(rng, (n, k) if side == "left" else (k, n), dtype)
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        np.fill_diagonal(tri, 1)
    opa = tri.T if trans else tri
    db = pymagma.asarray(b)
    blas.trsm(pymagma.asarray(a), db, side=side, lower=lower, trans=trans, unit_diagonal=unit)
    expected = np.linalg.solve(opa, b) if side == "left" else b @ np.linalg.inv(opa)
    np.testing.assert_allclose(db.get(), expected, **tol(dtype))
    c = blas.syrk(pymagma.asarray(b), lower=lower).get()
    t = np.tril if lower else np.triu
    np.testing.assert_allclose(t(c), t(b @ b.T), **tol(dtype))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 2), max_size=2), n=st.integers(1, 6), k=st.integers(1, 3),
       vector=st.booleans(), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999),
       batched=st.booleans())
def test_lu_family(device, batch, n, k, vector, on_device, dtype, seed, batched):
    device.hidden = set() if batched else {"magma_?getrf_batched", "magmablas_?trsm_batched"}
    device.calls.clear()
    rng = np.random.default_rng(seed)
    a = pivoting_matrices(rng, (*batch, n, n), dtype)
    b = values(rng, (n,) if vector else (*batch, n, k), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    x = linalg.solve(wrap(a), wrap(b))
    assert isinstance(x, pymagma.DeviceArray) == on_device
    expected = np.linalg.solve(a, b[..., None])[..., 0] if vector else np.linalg.solve(a, b)
    np.testing.assert_allclose(pymagma.to_numpy(x), expected, **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.inv(wrap(a))), np.linalg.inv(a), **tol(dtype))
    np.testing.assert_allclose(linalg.det(wrap(a)), np.linalg.det(a), rtol=1e-3 if tol(dtype)["rtol"] > 1e-6
                               else 1e-9)
    sign, logdet = linalg.slogdet(a)
    esign, elogdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, esign, **tol(dtype))
    np.testing.assert_allclose(logdet, elogdet, **tol(dtype))
    lu, piv = linalg.lu_factor(wrap(a))
    lu = pymagma.to_numpy(lu)
    assert piv.dtype == np.int32 and piv.shape == (*batch, n) and piv.min() >= 0
    assert n < 2 or (piv[..., 0] != 0).all()  # the matrices need pivoting, and the factorization did pivot
    for idx in np.ndindex(*batch):  # P A = L U for every matrix
        perm = np.arange(n)
        for i, p in enumerate(piv[idx]):
            perm[[i, p]] = perm[[p, i]]
        lower, upper = np.tril(lu[idx], -1) + np.eye(n), np.triu(lu[idx])
        np.testing.assert_allclose(lower @ upper, a[idx][perm], **tol(dtype))
    if batch:
        assert any(c.endswith("getrf_batched") for c in device.calls) == batched
        assert any(c.endswith("trsm_batched") for c in device.calls) == batched


def test_singular_matrix_names_the_pivot(device):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match="pivot 2"):
        linalg.solve(a, np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(1,\) is singular: pivot 2"):
        linalg.solve(np.stack([np.eye(2), a]), np.ones((2, 2, 1)))
    assert linalg.det(a) == 0
    sign, logdet = linalg.slogdet(a)
    assert sign == 0 and logdet == -np.inf


@settings(max_examples=examples(10), deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_cholesky_family(device, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (n, n), dtype)
    a = (g @ np.conj(g.T) + n * np.eye(n)).astype(dtype)
    b = values(rng, (n, 2), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    c = linalg.cholesky(wrap(a))
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.cho_solve((c, True), wrap(b))), np.linalg.solve(a, b),
                               **tol(dtype))
    with pytest.raises(np.linalg.LinAlgError, match="leading minor of order 2"):
        linalg.cholesky(np.array([[1, 2], [2, 1]], dtype))


@settings(max_examples=examples(10), deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2), n=st.integers(1, 5), on_device=st.booleans(),
       batched=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_stacked_cholesky_and_cho_solve_use_batched_routines(device, batch, n, on_device, batched, dtype, seed):
    device.hidden = set() if batched else {"magma_?potrf_batched", "magma_?potrs_batched"}
    device.calls.clear()
    rng = np.random.default_rng(seed)
    g = values(rng, (*batch, n, n), dtype)
    a = (g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)).astype(dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    c = linalg.cholesky(wrap(a))
    assert isinstance(c, pymagma.DeviceArray) == on_device
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    for b in (values(rng, (*batch, n, 2), dtype), values(rng, (n, 1), dtype)):  # a stack, and one b broadcast
        x = linalg.cho_solve((c, True), wrap(b))
        np.testing.assert_allclose(pymagma.to_numpy(x), np.linalg.solve(a, b), **tol(dtype))
    assert any(name.endswith("potrf_batched") for name in device.calls) == batched
    assert any(name.endswith("potrs_batched") for name in device.calls) == batched
    bad = np.array(a)
    bad[(0,) * len(batch)] = np.diag(np.r_[1.0, -1.0, np.ones(n)][:n]) if n > 1 else -1
    with pytest.raises(np.linalg.LinAlgError, match=f"leading minor of order {min(n, 2)}"):
        linalg.cholesky(bad)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 6), n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_qr(device, m, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (m, n), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    q, r = linalg.qr(wrap(a))
    q, r = pymagma.to_numpy(q), pymagma.to_numpy(r)
    np.testing.assert_allclose(q @ r, a, **tol(dtype))
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(min(m, n)), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.qr(wrap(a), mode="r")), r, **tol(dtype))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 7), n=st.integers(1, 7), rank=st.integers(0, 7), cols=st.sampled_from([None, 3, 40]),
       on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_lstsq_matches_numpy_for_every_shape_and_rank(device, m, n, rank, cols, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    rank = min(rank, m, n)
    u, v = np.linalg.qr(values(rng, (m, m), np.complex128 if np.iscomplexobj(dtype(0)) else np.float64))[0], \
        np.linalg.qr(values(rng, (n, n), np.complex128 if np.iscomplexobj(dtype(0)) else np.float64))[0]
    sigma = np.zeros((m, n))
    sigma[range(rank), range(rank)] = rng.uniform(1.0, 2.0, rank)  # exactly `rank` singular values, well apart
    a = (u @ sigma @ v).astype(dtype)
    b = values(rng, (m,) if cols is None else (m, cols), dtype)  # 40 columns: more than MAGMA's block size
    rcond = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    wrap = pymagma.asarray if on_device else (lambda v: v)
    x, res, r, s = linalg.lstsq(wrap(a), wrap(b), rcond=rcond)
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond=rcond)
    assert isinstance(x, pymagma.DeviceArray) == on_device
    assert r == erank == rank
    for got, want in ((x, ex), (res, eres), (s, es)):
        got = pymagma.to_numpy(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **tol(dtype))
    if rank == n <= m:  # full column rank: MAGMA's gels gives the same answer on the device
        x, res, r, s = linalg.lstsq(wrap(a), wrap(b), method="qr")
        assert (r, s) == (n, None)
        for got, want in ((x, ex), (res, eres)):
            got = pymagma.to_numpy(got)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, **tol(dtype))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_eigh_svd_eig(device, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (n, n), dtype)
    h = (g + np.conj(g.T)).astype(dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    w, v = linalg.eigh(wrap(h))
    w, v = pymagma.to_numpy(w), pymagma.to_numpy(v)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), **tol(dtype))
    np.testing.assert_allclose(h @ v, v * w, **tol(dtype))
    t = values(rng, (n + 1, n), dtype)
    for full in (True, False):
        u, s, vt = (pymagma.to_numpy(x) for x in linalg.svd(wrap(t), full_matrices=full))
        assert u.shape == ((n + 1, n + 1) if full else (n + 1, n))
        np.testing.assert_allclose((u[:, :n] * s) @ vt, t, **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.svd(wrap(t), compute_uv=False)),
                               np.linalg.svd(t, compute_uv=False), **tol(dtype))
    w, v = (pymagma.to_numpy(x) for x in linalg.eig(wrap(g)))
    np.testing.assert_allclose(g @ v, v * w, **tol(dtype))
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.linalg.eigvals(g)), **tol(dtype))


@pytest.mark.parametrize("on_device", [False, True])
def test_empty_stacks_give_empty_results_like_numpy(device, on_device):
    wrap = pymagma.asarray if on_device else (lambda x: x)
    a, b, v = np.zeros((0, 3, 3)), np.zeros((0, 3, 2)), np.zeros(3)
    expected = {
        "solve vector": (linalg.solve(wrap(a), wrap(v)), np.linalg.solve(a, v)),
        "cho_solve vector": (linalg.cho_solve((wrap(a), True), wrap(v)), np.linalg.solve(a, v)),
        "solve": (linalg.solve(wrap(a), wrap(b)), np.linalg.solve(a, b)),
        "inv": (linalg.inv(wrap(a)), np.linalg.inv(a)),
        "det": (linalg.det(wrap(a)), np.linalg.det(a)),
        "cholesky": (linalg.cholesky(wrap(a)), np.linalg.cholesky(a)),
        "cho_solve": (linalg.cho_solve((wrap(a), True), wrap(b)), np.linalg.solve(a, b)),
        "qr": (linalg.qr(wrap(b)), np.linalg.qr(b)),
        "qr r": (linalg.qr(wrap(b), mode="r"), np.linalg.qr(b, mode="r")),
        "eigh": (linalg.eigh(wrap(a)), np.linalg.eigh(a)),
        "svd": (linalg.svd(wrap(b)), np.linalg.svd(b)),
        "svd reduced": (linalg.svd(wrap(b), full_matrices=False), np.linalg.svd(b, full_matrices=False)),
        "svd values": (linalg.svd(wrap(b), compute_uv=False), np.linalg.svd(b, compute_uv=False)),
        "eig": (linalg.eig(wrap(a)), np.linalg.eig(a)),
    }
    lu, piv = linalg.lu_factor(wrap(a))
    assert lu.shape == (0, 3, 3) and piv.shape == (0, 3)
    expected["lu_solve"] = (linalg.lu_solve((lu, piv), wrap(b)), np.linalg.solve(a, b))
    for name, (got, want) in expected.items():
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, pymagma.DeviceArray) == (on_device and name != "det"), name
            g = pymagma.to_numpy(g)
            assert (g.shape, g.dtype) == (w.shape, w.dtype), name
