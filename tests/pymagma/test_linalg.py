"""pymagma.linalg: error mapping and input checks (CPU, before any native call), and every function against NumPy
on a GPU (skipping routines the MAGMA provider does not export, with the reason)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _magma, linalg
from pymagma.errors import LibraryNotFoundError, LinAlgError, MagmaError
from tests.conftest import examples

from .helpers import pivoting_matrices, q_from_reflectors
from .helpers import random_values as random_matrix

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


# ----------------------------------------------------------------------------------------------------- CPU
def test_negative_info_names_magmas_argument():
    with pytest.raises(ValueError, match=r"argument 4 \(ldda\)"):
        linalg.check_info(-4, "magma_dgetrf_gpu")
    with pytest.raises(ValueError, match=r"argument 1 \(uplo\)"):
        linalg.check_info(-1, "magma_zpotrf_gpu")
    linalg.check_info(0, "magma_dgetrf_gpu")


def test_positive_info_is_a_numpy_linalg_error():
    with pytest.raises(np.linalg.LinAlgError, match="pivot 3"):
        linalg.check_info(3, "magma_sgetrf_gpu", "singular: pivot {info}")
    assert issubclass(LinAlgError, np.linalg.LinAlgError)


@pytest.mark.native
def test_magma_error_codes_become_magma_errors_with_their_text():
    try:
        _magma.library().cdll  # noqa: B018
    except LibraryNotFoundError:
        pytest.skip("no MAGMA provider")
    with pytest.raises(MagmaError, match="memory") as err:
        linalg.check_info(-113, "magma_dgetrf_gpu")  # MAGMA_ERR_DEVICE_ALLOC, beyond the argument count
    assert err.value.info == -113


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: linalg.solve(np.ones((2, 3)), np.ones(2)), LinAlgError, "square"),
    (lambda: linalg.solve(np.ones((3, 3)), np.ones(4)), ValueError, "incompatible"),
    (lambda: linalg.solve(np.ones((3, 3), np.float32), np.ones(3)), TypeError, "different dtypes"),
    (lambda: linalg.inv(np.ones(3)), LinAlgError, "two dimensions"),
    (lambda: linalg.det(np.array([["a"]])), TypeError, "dtype"),
    (lambda: linalg.cholesky(np.ones((2, 3))), LinAlgError, "square"),
    (lambda: linalg.cho_solve((np.eye(2), False), np.ones(2)), ValueError, "lower"),
    (lambda: linalg.lu_solve((np.eye(3), np.zeros(2, np.int32)), np.ones(3)), ValueError, "piv"),
    (lambda: linalg.lstsq(np.ones((2, 3)), np.ones(2), method="qr"), ValueError, "m >= n"),
    (lambda: linalg.lstsq(np.ones((3, 2)), np.ones(4)), ValueError, "b has shape"),
    (lambda: linalg.lstsq(np.ones((3, 2)), np.ones((3, 1, 1))), ValueError, "b has shape"),
    (lambda: linalg.lstsq(np.ones((3, 2)), np.ones(3), method="lu"), ValueError, "'svd', 'qr' or 'hybrid'"),
    (lambda: linalg.lstsq(np.ones((3, 2), np.float32), np.ones(3)), TypeError, "different dtypes"),
    (lambda: linalg.lstsq(np.ones((3, 2)), np.ones(3), 1e-3, method="qr"), ValueError, "rcond"),
    (lambda: linalg.qr(np.ones((2, 2)), mode="economic"), ValueError, "mode"),
    (lambda: linalg.eigh(np.eye(2), UPLO="X"), ValueError, "UPLO"),
    (lambda: linalg.eig(np.ones((2, 3))), LinAlgError, "square"),
    (lambda: linalg.svd(np.ones(3)), LinAlgError, "two dimensions"),
])
def test_bad_input_is_rejected_before_any_native_call(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_real_geev_pairs_become_complex_eigenvectors():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 5))
    w, v = np.linalg.eig(a)
    # LAPACK's real layout: a complex pair (w, conj w) stores Re v and Im v of the first in two real columns
    order = np.argsort(-w.imag)  # put each +imag partner first
    wr, wi, vr = [], [], []
    used = set()
    for j in order:
        if j in used:
            continue
        if w[j].imag > 0:
            k = next(i for i in range(5) if i not in used and i != j and np.isclose(w[i], np.conj(w[j])))
            used |= {j, k}
            wr += [w[j].real, w[j].real]
            wi += [w[j].imag, -w[j].imag]
            vr += [v[:, j].real, v[:, j].imag]
        elif w[j].imag == 0:
            used.add(j)
            wr.append(w[j].real)
            wi.append(0.0)
            vr.append(v[:, j].real)
    got_w, got_v = linalg.real_eigvecs(np.array(wr), np.array(wi), np.stack(vr, axis=1))
    np.testing.assert_allclose(a @ got_v, got_v * got_w, atol=1e-10)
    assert np.iscomplexobj(got_v) == bool(np.any(np.array(wi)))


# ----------------------------------------------------------------------------------------------------- GPU
def needs(family: str, dtype) -> None:
    """Skip (with the reason) when the MAGMA provider lacks the routine this function is built on."""
    p = _magma.precision_of(dtype)
    name = family.replace("?", p).replace("{sy}", "he" if p in "cz" else "sy").replace(
        "{or}", "un" if p in "cz" else "or")
    if not _magma.library().has(name):
        pytest.skip(f"the MAGMA provider lacks {name} ({_magma.library().path})")


def well_conditioned(rng, shape, dtype):
    """Square matrices that are well conditioned but need row swaps in LU (not diagonally dominant as given)."""
    return pivoting_matrices(rng, shape, dtype)


def spd(rng, shape, dtype):
    x = random_matrix(rng, shape, dtype)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def tol(dtype):
    return {"rtol": 2e-3, "atol": 2e-3} if np.dtype(dtype) in (np.float32, np.complex64) else \
        {"rtol": 1e-8, "atol": 1e-8}


def check_device_lstsq(a, b, method):
    """lstsq of a tall, full-rank ``a`` on the device by ``method`` against NumPy's."""
    expected, eres, _, _ = np.linalg.lstsq(a, b, rcond=None)
    x, res, rank, _ = linalg.lstsq(pymagma.asarray(a), pymagma.asarray(b), method=method)
    np.testing.assert_allclose(x.get(), expected, **tol(a.dtype))
    np.testing.assert_allclose(res.get(), eres, **tol(a.dtype))
    assert rank == a.shape[1]


gpu_cases = settings(max_examples=examples(15), deadline=None)
shapes = st.tuples(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 24))


@pytest.mark.gpu
@gpu_cases
@given(shape=shapes, k=st.integers(1, 4), dtype=st.sampled_from(DTYPES), device=st.booleans(),
       seed=st.integers(0, 999))
def test_solve_inv_det_match_numpy(shape, k, dtype, device, seed):
    rng = np.random.default_rng(seed)
    batch, n = shape
    a = well_conditioned(rng, (*batch, n, n), dtype)
    b = random_matrix(rng, (*batch, n, k), dtype)
    wrap = pymagma.asarray if device else (lambda x: x)
    x = linalg.solve(wrap(a), wrap(b))
    assert isinstance(x, pymagma.DeviceArray) == device
    np.testing.assert_allclose(pymagma.to_numpy(x), np.linalg.solve(a, b), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.inv(wrap(a))), np.linalg.inv(a), **tol(dtype))
    np.testing.assert_allclose(linalg.det(a), np.linalg.det(a), rtol=1e-2 if tol(dtype)["rtol"] > 1e-6 else 1e-8)
    sign, logdet = linalg.slogdet(a)
    esign, elogdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, esign, **tol(dtype))
    np.testing.assert_allclose(logdet, elogdet, **tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_factor_and_solve_vector(dtype):
    rng = np.random.default_rng(0)
    a, b = well_conditioned(rng, (7, 7), dtype), random_matrix(rng, (7,), dtype)
    lu, piv = linalg.lu_factor(a)
    perm = np.arange(7)
    for i, p in enumerate(piv):
        perm[[i, p]] = perm[[p, i]]
    lower, upper = np.tril(lu, -1) + np.eye(7), np.triu(lu)
    np.testing.assert_allclose(lower @ upper, a[perm], **tol(dtype))
    np.testing.assert_allclose(linalg.lu_solve((lu, piv), b), np.linalg.solve(a, b), **tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_singular_matrix_raises_linalg_error(dtype):
    a = np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], dtype)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        linalg.solve(a, np.ones(3, dtype))
    assert linalg.det(np.zeros((3, 3), dtype)) == 0


@pytest.mark.gpu
@gpu_cases
@given(n=st.integers(1, 20), dtype=st.sampled_from(DTYPES), device=st.booleans(), seed=st.integers(0, 999))
def test_cholesky_and_cho_solve(n, dtype, device, seed):
    needs("magma_?potrf_gpu", dtype)
    rng = np.random.default_rng(seed)
    a, b = spd(rng, (n, n), dtype), random_matrix(rng, (n, 2), dtype)
    wrap = pymagma.asarray if device else (lambda x: x)
    c = linalg.cholesky(wrap(a))
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.cho_solve((c, True), wrap(b))), np.linalg.solve(a, b),
                               **tol(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_not_positive_definite_raises(dtype):
    needs("magma_?potrf_gpu", dtype)
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        linalg.cholesky(np.array([[1, 2], [2, 1]], dtype))


@pytest.mark.gpu
@gpu_cases
@given(m=st.integers(1, 20), n=st.integers(1, 20), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_qr_and_lstsq(m, n, dtype, seed):
    needs("magma_?geqrf2_gpu", dtype)
    needs("magma_?{or}gqr2", dtype)
    rng = np.random.default_rng(seed)
    a = random_matrix(rng, (m, n), dtype)
    q, r = linalg.qr(a)
    np.testing.assert_allclose(q @ r, a, **tol(dtype))
    np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(min(m, n)), **tol(dtype))
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    a = (a + max(m, n) * np.eye(m, n)).astype(dtype)  # well conditioned, so float32 answers agree to tol
    b = random_matrix(rng, (m,), dtype)
    expected, eres, erank, es = np.linalg.lstsq(a, b, rcond=None)
    needs("magma_?gesdd", dtype)
    x, res, rank, s = linalg.lstsq(a, b)
    np.testing.assert_allclose(x, expected, **tol(dtype))
    np.testing.assert_allclose(res, eres, **tol(dtype))
    np.testing.assert_allclose(s, es, **tol(dtype))
    assert rank == erank
    if m >= n:
        needs("magma_?gels_gpu", dtype)
        check_device_lstsq(a, b, "qr")


@pytest.mark.gpu
@gpu_cases
@given(n=st.integers(1, 20), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_eigh_svd_eig(n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = spd(rng, (n, n), dtype)
    needs("magma_?{sy}evd_gpu", dtype)
    w, v = linalg.eigh(a)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), **tol(dtype))
    np.testing.assert_allclose(a @ v, v * w, **tol(dtype))
    needs("magma_?gesdd", dtype)
    g = random_matrix(rng, (n + 2, n), dtype)
    u, s, vt = linalg.svd(g, full_matrices=False)
    np.testing.assert_allclose(s, np.linalg.svd(g, compute_uv=False), **tol(dtype))
    np.testing.assert_allclose((u * s) @ vt, g, **tol(dtype))
    needs("magma_?geev", dtype)
    h = random_matrix(rng, (n, n), dtype)
    w, v = linalg.eig(h)
    np.testing.assert_allclose(h @ v, v * w, **tol(dtype))


@pytest.mark.gpu
@gpu_cases
@given(n=st.integers(1, 300), dtype=st.sampled_from(DTYPES), device=st.booleans(), seed=st.integers(0, 999))
def test_hybrid_cholesky_and_cho_solve(n, dtype, device, seed):
    rng = np.random.default_rng(seed)
    a, b = spd(rng, (n, n), dtype), random_matrix(rng, (n, 2), dtype)
    wrap = pymagma.asarray if device else (lambda x: x)
    c = linalg.cholesky(wrap(a), method="hybrid")
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    x = linalg.cho_solve((c, True), wrap(b), method="hybrid")
    np.testing.assert_allclose(pymagma.to_numpy(x), np.linalg.solve(a, b), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.cholesky(wrap(a), upper=True, method="hybrid")),
                               np.linalg.cholesky(a, upper=True), **tol(dtype))


@pytest.mark.gpu
@gpu_cases
@given(m=st.integers(1, 200), n=st.integers(1, 200), dtype=st.sampled_from(DTYPES),
       method=st.sampled_from(["auto", "hybrid"]), seed=st.integers(0, 999))
def test_qr_every_mode_and_hybrid_lstsq(m, n, dtype, method, seed):
    if method == "auto":
        needs("magma_?geqrf2_gpu", dtype)
        needs("magma_?{or}gqr2", dtype)
    rng = np.random.default_rng(seed)
    a = random_matrix(rng, (m, n), dtype)
    k = min(m, n)
    for mode in ("reduced", "complete"):
        q, r = linalg.qr(a, mode=mode, method=method)
        assert (q.shape, r.shape) == tuple(x.shape for x in np.linalg.qr(a, mode=mode))
        np.testing.assert_allclose(q @ r, a, **tol(dtype))
        np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(q.shape[1]), **tol(dtype))
    h, tau = linalg.qr(a, mode="raw", method=method)
    np.testing.assert_allclose(q_from_reflectors(h.T, tau)[:, :k] @ np.triu(h.T[:k]), a, **tol(dtype))
    if m >= n:
        a = (a + max(m, n) * np.eye(m, n)).astype(dtype)
        check_device_lstsq(a, random_matrix(rng, (m, 3), dtype), "hybrid")


@pytest.mark.gpu
@gpu_cases
@given(n=st.integers(1, 150), dtype=st.sampled_from(DTYPES), uplo=st.sampled_from("LU"), seed=st.integers(0, 999))
def test_hybrid_eigh_and_hermitian_svd(n, dtype, uplo, seed):
    rng = np.random.default_rng(seed)
    g = random_matrix(rng, (n, n), dtype)
    h = (g + np.conj(g.T)).astype(dtype)
    w, v = linalg.eigh(pymagma.asarray(h), UPLO=uplo, method="hybrid")
    w, v = w.get(), v.get()
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), **tol(dtype))
    np.testing.assert_allclose(h @ v, v * w, **tol(dtype))
    np.testing.assert_allclose(linalg.svd(h, compute_uv=False, hermitian=True, method="hybrid"),
                               np.linalg.svd(h, compute_uv=False), **tol(dtype))


@pytest.mark.gpu
@gpu_cases
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=3), dtype=st.sampled_from(DTYPES),
       device=st.booleans(), keepdims=st.booleans(), seed=st.integers(0, 999))
def test_norm_matches_numpy(shape, dtype, device, keepdims, seed):
    x = random_matrix(np.random.default_rng(seed), tuple(shape), dtype)
    wrap = pymagma.asarray if device else (lambda v: v)
    nd = len(shape)
    cases = [(None, None), (2, -1), (1, 0), (np.inf, -1)]
    if nd >= 2:
        cases += [(p, (nd - 2, nd - 1)) for p in ("fro", "nuc", 1, 2, np.inf)]
        cases += [(-1, (nd - 2, nd - 1)), (-2, (nd - 1, nd - 2))] * (min(shape[-2:]) > 0)  # NumPy: no min of nothing
    for ord, axis in cases:
        want = np.linalg.norm(x, ord, axis, keepdims)
        got = linalg.norm(wrap(x), ord, axis, keepdims)
        assert isinstance(got, pymagma.DeviceArray) == (device and np.ndim(want) > 0)
        got = pymagma.to_numpy(got) if isinstance(got, pymagma.DeviceArray) else got
        assert (np.shape(got), np.asarray(got).dtype) == (np.shape(want), np.asarray(want).dtype)
        np.testing.assert_allclose(got, want, **tol(dtype))


@pytest.mark.gpu
@gpu_cases
@given(shape=shapes, power=st.integers(-3, 9), dtype=st.sampled_from(DTYPES), device=st.booleans(),
       seed=st.integers(0, 999))
def test_matrix_power_matches_numpy(shape, power, dtype, device, seed):
    batch, n = shape
    a = (well_conditioned(np.random.default_rng(seed), (*batch, n, n), dtype) / (2 * n)).astype(dtype)
    wrap = pymagma.asarray if device else (lambda v: v)
    got = linalg.matrix_power(wrap(a), power)
    assert isinstance(got, pymagma.DeviceArray) == device
    want = np.linalg.matrix_power(a, power)
    np.testing.assert_allclose(pymagma.to_numpy(got), want, rtol=tol(dtype)["rtol"],
                               atol=tol(dtype)["atol"] * float(np.max(np.abs(want), initial=1)))


@pytest.mark.gpu
@gpu_cases
@given(dims=st.lists(st.integers(1, 64), min_size=3, max_size=6), vector_ends=st.booleans(),
       dtype=st.sampled_from(DTYPES), device=st.booleans(), seed=st.integers(0, 999))
def test_multi_dot_matches_numpy(dims, vector_ends, dtype, device, seed):
    rng = np.random.default_rng(seed)
    arrays = [random_matrix(rng, (dims[i], dims[i + 1]), dtype) / np.sqrt(dims[i]) for i in range(len(dims) - 1)]
    if vector_ends:
        arrays[0], arrays[-1] = arrays[0][0], arrays[-1][:, 0]
    arrays = [x.astype(dtype) for x in arrays]
    wrap = pymagma.asarray if device else (lambda v: v)
    got = linalg.multi_dot([wrap(x) for x in arrays])
    want = np.linalg.multi_dot(arrays)
    if np.ndim(want):
        assert isinstance(got, pymagma.DeviceArray) == device
    np.testing.assert_allclose(pymagma.to_numpy(got) if isinstance(got, pymagma.DeviceArray) else got, want,
                               **tol(dtype))
