"""pymagma.hybrid and the paths of pymagma.linalg on the simulated device: the hybrid drivers (host panels, device
BLAS-3) against NumPy's LAPACK for every shape around the block size, stacks, empty matrices and all four dtypes,
both simulator modes ("partial" exports what the found MAGMA provider exports, e.g. PyTorch's 2.6.1 without
potrf/geqrf/gels/syevd/gesdd/geev; "full" exports every modelled routine), and NumPy 2 conformance of the results."""

from __future__ import annotations

import collections
import ctypes
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import hybrid, linalg, simulator
from pymagma.errors import MissingSymbolError

from .helpers import q_from_reflectors
from .helpers import random_values as values

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
REUSE = [HealthCheck.function_scoped_fixture]
cases = settings(max_examples=20, deadline=None, suppress_health_check=REUSE)


@pytest.fixture(params=["full", "partial"])
def sim(request):
    """The simulator in one mode; yields its simulated MAGMA."""
    with simulator.simulated(request.param) as simulation:
        yield simulation.magma
        simulation.magma.reset()


@pytest.fixture
def full():
    with simulator.simulated("full") as simulation:
        yield simulation.magma
        simulation.magma.reset()


def eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def rel(x, y) -> float:
    """‖x - y‖_F / max(‖y‖_F, tiny)."""
    return float(np.linalg.norm(np.asarray(x, np.complex128) - y) / max(np.linalg.norm(y), 1e-300))


def spd(rng, shape, dtype, graded: bool = False):
    g = values(rng, shape, dtype)
    a = g @ np.conj(np.swapaxes(g, -1, -2)) + shape[-1] * np.eye(shape[-1])
    if graded:  # entries spanning ~6 orders of magnitude: D A D stays positive definite
        d = np.logspace(0, 3, shape[-1])
        a = a * d[:, None] * d[None, :]
    return a.astype(dtype)


def device_colmajor(host):
    return hybrid.to_device_colmajor(np.asarray(host), 0)


def wrapper(on_device):
    return pymagma.asarray if on_device else (lambda x: x)


# ----------------------------------------------------------------------------------------------------- drivers
@cases
@given(n=st.integers(0, 11), nb=st.integers(1, 5), graded=st.booleans(), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_blocked_cholesky_backward_error(full, n, nb, graded, dtype, seed):
    a = spd(np.random.default_rng(seed), (n, n), dtype, graded)
    w = device_colmajor(a)
    assert hybrid.potrf(w, nb) == 0
    low = np.tril(w.get())
    np.testing.assert_array_equal(np.triu(w.get(), 1), np.triu(a, 1))  # the upper triangle is left alone
    if n:
        assert rel(low @ np.conj(low.T), a) < 10 * n * eps(dtype)
    b = values(np.random.default_rng(seed + 1), (n, 3), dtype)
    x = device_colmajor(b)
    hybrid.potrs(w, x)
    if n:
        assert rel(a @ x.get(), b) < 100 * n * eps(dtype) * np.linalg.cond(a)


@cases
@given(n=st.integers(1, 9), bad=st.integers(1, 9), nb=st.integers(1, 4), dtype=st.sampled_from(DTYPES))
def test_blocked_cholesky_names_the_first_minor_that_is_not_positive(full, n, bad, nb, dtype):
    bad = min(bad, n)
    a = np.eye(n, dtype=dtype) * 2
    a[bad - 1, bad - 1] = -1  # leading minors 1..bad-1 positive, minor `bad` not
    assert hybrid.potrf(device_colmajor(a), nb) == bad
    with pytest.raises(np.linalg.LinAlgError, match=f"leading minor of order {bad} is not positive"):
        linalg.cholesky(a, method="hybrid")


@cases
@given(m=st.integers(0, 11), n=st.integers(0, 11), nb=st.integers(1, 4), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_blocked_qr_orthogonality_and_backward_error(full, m, n, nb, dtype, seed):
    a = values(np.random.default_rng(seed), (m, n), dtype)
    f = hybrid.geqrf(device_colmajor(a), nb)
    k = min(m, n)
    h = f.w.get()
    r = np.triu(h[:k])
    for cols in {k, m}:
        q = hybrid.orgqr(f, cols).get()
        assert q.shape == (m, cols)
        np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(cols), atol=20 * max(m, 1) * eps(dtype))
        if k:
            assert rel(q[:, :k] @ r, a) < 20 * max(m, n) * eps(dtype)
    # LAPACK's layout: reflectors below the diagonal, so Q from (h, tau) alone equals orgqr's
    np.testing.assert_allclose(q_from_reflectors(h, f.tau)[:, :k], hybrid.orgqr(f, k).get(),
                               atol=50 * max(m, 1) * eps(dtype))
    b = values(np.random.default_rng(seed + 1), (m, 2), dtype)
    x = device_colmajor(b)
    hybrid.ormqr_h(f, x)
    np.testing.assert_allclose(x.get(), np.conj(q_from_reflectors(h, f.tau).T) @ b, atol=50 * max(m, 1) * eps(dtype))


# ----------------------------------------------------------------------------------------------------- look-ahead
def created_queues():
    """Two queues made with magma_queue_create: on the simulator both run their work as late as events and stream
    order allow, so a missing dependency shows up as a wrong result."""
    return pymagma.Queue(0), pymagma.Queue(0)


def factor(kind, a, nb, **kwargs):
    """(device result as host arrays, info) of hybrid potrf ("chol") or geqrf ("qr") on a column-major copy of a."""
    w = device_colmajor(a)
    if kind == "chol":
        info = hybrid.potrf(w, nb, **kwargs)
        return w.get(), info
    f = hybrid.geqrf(w, nb, **kwargs)
    return np.concatenate([w.get().ravel(), f.tau]), f


@cases
@given(kind=st.sampled_from(["chol", "qr"]), m=st.integers(1, 14), n=st.integers(1, 14), nb=st.integers(1, 6),
       created=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_lookahead_matches_the_single_queue_path(full, kind, m, n, nb, created, dtype, seed):
    rng = np.random.default_rng(seed)
    a = spd(rng, (n, n), dtype) if kind == "chol" else values(rng, (m, n), dtype)
    queues = created_queues() if created else None
    got, extra = factor(kind, a, nb, lookahead=True, queues=queues)
    want, _ = factor(kind, a, nb, lookahead=False)
    # the same operations, with the trailing update split in two: equal up to rounding
    np.testing.assert_allclose(got, want, rtol=0, atol=20 * n * eps(dtype) * max(np.abs(want).max(), 1))
    if kind == "chol":
        assert extra == 0
        low = np.tril(got)
        assert rel(low @ np.conj(low.T), a) < 10 * n * eps(dtype)
        np.testing.assert_array_equal(np.triu(got, 1), np.triu(a, 1))
    else:
        k = min(m, n)
        q = hybrid.orgqr(extra, k).get()
        assert rel(q @ np.triu(extra.w.get()[:k]), a) < 20 * max(m, n) * eps(dtype)


@cases
@given(n=st.integers(1, 13), bad=st.integers(1, 13), nb=st.integers(1, 5), lookahead=st.booleans(),
       created=st.booleans(), dtype=st.sampled_from(DTYPES))
def test_lookahead_cholesky_info_is_exact(full, n, bad, nb, lookahead, created, dtype):
    bad = min(bad, n)
    a = spd(np.random.default_rng(bad), (n, n), dtype)
    a[bad - 1, bad - 1] = -abs(a).sum()  # leading minors 1..bad-1 positive, minor `bad` not
    queues = created_queues() if created else None
    assert hybrid.potrf(device_colmajor(a), nb, lookahead=lookahead, queues=queues) == bad


@pytest.mark.parametrize("kind", ["chol", "qr"])
def test_the_simulator_catches_a_missing_dependency(full, monkeypatch, kind):
    """The look-ahead is right because of its events, not because of timing: drop the wait of the copy queue for
    the main queue, or the host's wait for the copy, and the simulated device hands the host a stale panel."""
    from pymagma import runtime

    rng = np.random.default_rng(7)
    a = spd(rng, (12, 12), np.float64) if kind == "chol" else values(rng, (12, 10), np.float64)
    want, _ = factor(kind, a, 3, lookahead=False)
    np.testing.assert_allclose(factor(kind, a, 3, queues=created_queues())[0], want, atol=1e-12)
    with monkeypatch.context() as mp:
        mp.setattr(pymagma.Queue, "wait_event", lambda self, event: None)
        assert not np.allclose(factor(kind, a, 3, queues=created_queues())[0], want)
    with monkeypatch.context() as mp:
        mp.setattr(runtime.Event, "synchronize", lambda self: None)
        assert not np.allclose(factor(kind, a, 3, queues=created_queues())[0], want)


@pytest.mark.parametrize("kind", ["chol", "qr"])
@pytest.mark.parametrize("lookahead", [True, False])
def test_given_queues_first_wait_for_the_work_pending_on_the_arrays_queue(full, kind, lookahead, monkeypatch):
    """A copy that made ``w`` may still run on its default queue: the caller's main queue waits for it before the
    driver's first device call (the simulated default queue runs at once, so this is checked on the waits)."""
    waits, real = [], pymagma.Queue.wait_event
    monkeypatch.setattr(pymagma.Queue, "wait_event", lambda self, event: (waits.append(self), real(self, event)))
    main, side = created_queues()
    a = spd(np.random.default_rng(3), (8, 8), np.float64)
    factor(kind, a, 3, lookahead=lookahead, queues=(main, side))
    assert waits and waits[0] is main


def test_host_seconds_accumulate_over_drivers_and_reset(full):
    a = spd(np.random.default_rng(0), (9, 9), np.float64)
    hybrid.reset_host_seconds()
    assert hybrid.host_seconds() == 0
    with hybrid.host_time() as outer:
        hybrid.potrf(device_colmajor(a), 2)
        after_potrf = hybrid.host_seconds()
        assert after_potrf > 0
        hybrid.reset_host_seconds()  # resets the counter, not the blocks measuring with host_time
        with hybrid.host_time() as inner:
            hybrid.geqrf(device_colmajor(a), 2)
            hybrid.syevd(device_colmajor(a))
            hybrid.gesvd(device_colmajor(a))
        assert 0 < inner.seconds == pytest.approx(hybrid.host_seconds())
    assert outer.seconds == pytest.approx(after_potrf + inner.seconds)
    frozen = outer.seconds
    hybrid.potrf(device_colmajor(a), 2)
    assert outer.seconds == frozen and hybrid.host_seconds() > inner.seconds
    hybrid.reset_host_seconds()
    assert hybrid.host_seconds() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_lookahead_on_the_gpu(dtype):
    """The look-ahead drivers on a real device (two streams truly concurrent) against the single-queue path and
    NumPy, for sizes around and across the block size."""
    rng = np.random.default_rng(0)
    for n in (1, 31, 32, 33, 100, 257):
        a = spd(rng, (n, n), dtype)
        got, info = factor("chol", a, 32)
        want, _ = factor("chol", a, 32, lookahead=False)
        assert info == 0
        np.testing.assert_allclose(got, want, rtol=0, atol=50 * n * eps(dtype) * np.abs(want).max())
        assert rel(np.tril(got) @ np.conj(np.tril(got).T), a) < 10 * n * eps(dtype)
        g = values(rng, (n + 7, n), dtype)
        got, f = factor("qr", g, 32)
        want, _ = factor("qr", g, 32, lookahead=False)
        np.testing.assert_allclose(got, want, rtol=0, atol=50 * n * eps(dtype) * np.abs(want).max())
        q = hybrid.orgqr(f, n).get()
        assert rel(q @ np.triu(f.w.get()[:n]), g) < 20 * n * eps(dtype)


def test_block_size_comes_from_the_provider_when_exported(full):
    assert hybrid.block_size("potrf", np.float64, 100, 100) == 32  # the simulator's magma_get_dpotrf_nb
    full.hidden = {"magma_get_?geqrf_nb"}
    assert hybrid.block_size("geqrf", np.float32, 100, 100) == hybrid.DEFAULT_NB


@cases
@given(n=st.integers(0, 10), uplo=st.sampled_from("LUlu"), clustered=st.booleans(), on_device=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_hybrid_eigh_residual_and_orthogonality(full, small_blocks, n, uplo, clustered, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (n, n), dtype)
    h = g + np.conj(g.T)
    if clustered:  # a double eigenvalue and a tiny gap: eigenvectors are ill-determined, the residual is not
        q = np.linalg.qr(g + 3 * np.eye(n))[0] if n else g
        h = q @ np.diag(np.r_[1.0, 1.0, 1 + 1e-6, np.arange(n)][:n]) @ np.conj(q.T)
    h = h.astype(dtype)
    stored = np.tril(h) if uplo in "Ll" else np.triu(h)
    junk = stored + (np.triu(g, 1) if uplo in "Ll" else np.tril(g, -1)).astype(dtype)  # ignored triangle: garbage
    w, v = linalg.eigh(wrapper(on_device)(junk), UPLO=uplo, method="hybrid")
    w, v = pymagma.to_numpy(w), pymagma.to_numpy(v)
    assert (w.dtype, v.dtype, v.shape) == (np.finfo(dtype).dtype, np.dtype(dtype), (n, n))
    if n:
        norm = max(np.linalg.norm(h), 1)
        assert np.linalg.norm(h @ v - v * w) / norm < 30 * n * eps(dtype)
        np.testing.assert_allclose(np.conj(v.T) @ v, np.eye(n), atol=30 * n * eps(dtype))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(h.astype(np.complex128)), atol=30 * n * eps(dtype) * norm)


@cases
@given(batch=st.lists(st.integers(0, 2), max_size=1), m=st.integers(0, 9), n=st.integers(0, 9),
       kind=st.sampled_from(["random", "rank-deficient", "graded"]), full_matrices=st.booleans(),
       on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_hybrid_svd_backward_error_and_orthogonality(full, small_blocks, batch, m, n, kind, full_matrices, on_device,
                                                     dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (*batch, m, n), dtype)
    if kind == "rank-deficient" and min(m, n) > 1:
        a = values(rng, (*batch, m, 1), dtype) @ values(rng, (*batch, 1, n), dtype)
    elif kind == "graded":
        a = a * np.logspace(0, 4, n).astype(np.finfo(dtype).dtype)
    a = a.astype(dtype)
    wrap = wrapper(on_device)
    got = linalg.svd(wrap(a), full_matrices=full_matrices, method="hybrid")
    want = np.linalg.svd(a, full_matrices=full_matrices)
    assert isinstance(got, np.linalg._linalg.SVDResult)
    u, s, vh = (pymagma.to_numpy(x) for x in got)
    for g, w in zip((u, s, vh), want, strict=True):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    tol = 30 * max(m, n, 1) * eps(dtype)
    k = min(m, n)
    for idx in np.ndindex(*batch):
        norm = max(np.linalg.norm(a[idx]), 1e-30)
        np.testing.assert_allclose(s[idx], want.S[idx], atol=tol * norm)
        assert np.linalg.norm((u[idx][:, :k] * s[idx]) @ vh[idx][:k] - a[idx]) <= tol * norm
        np.testing.assert_allclose(np.conj(u[idx].T) @ u[idx], np.eye(u.shape[-1]), atol=tol)
        np.testing.assert_allclose(vh[idx] @ np.conj(vh[idx].T), np.eye(vh.shape[-2]), atol=tol)
    np.testing.assert_allclose(pymagma.to_numpy(linalg.svd(wrap(a), compute_uv=False, method="hybrid")), want.S,
                               atol=tol * max(np.linalg.norm(a), 1))


@cases
@given(n=st.integers(1, 13), nb=st.integers(1, 5), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_tridiagonal_reduction_is_a_similarity(full, n, nb, dtype, seed):
    g = values(np.random.default_rng(seed), (n, n), dtype)
    a = (g + np.conj(g.T)).astype(dtype)
    d, e, v, tau = hybrid.sytrd(device_colmajor(np.tril(a) + np.triu(g, 1)), nb)  # the upper triangle: ignored
    q = np.eye(n, dtype=np.complex128)
    q[1:, 1:] = q_from_reflectors(v, tau)
    t = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
    assert (d.dtype, e.dtype) == (np.finfo(dtype).dtype,) * 2
    np.testing.assert_allclose(np.conj(q.T) @ a @ q, t, atol=10 * n * eps(dtype) * max(np.abs(a).max(), 1))


def bidiagonal_factors(a, nb):
    """(Q, B, P, d, e) of hybrid gebrd on a copy of ``a`` (m >= n): Q and P from the reflectors by the oracle."""
    m, n = a.shape
    d, e, vq, tauq, vp, taup = hybrid.gebrd(device_colmajor(a), nb)
    p = np.eye(n, dtype=np.complex128)
    if n > 1:
        p[1:, 1:] = q_from_reflectors(vp, taup)
    b = np.zeros((m, n))
    b[np.arange(n), np.arange(n)] = d
    b[np.arange(n - 1), np.arange(1, n)] = e
    return q_from_reflectors(vq, tauq), b, p, d, e


@cases
@given(m=st.integers(1, 14), n=st.integers(1, 14), nb=st.integers(1, 6), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_bidiagonal_reduction_is_a_similarity(full, m, n, nb, dtype, seed):
    m, n = max(m, n), min(m, n)
    a = values(np.random.default_rng(seed), (m, n), dtype)
    q, b, p, d, e = bidiagonal_factors(a, nb)
    assert (d.dtype, e.dtype) == (np.finfo(dtype).dtype,) * 2
    tol = 10 * m * eps(dtype) * max(np.abs(a).max(), 1)
    np.testing.assert_allclose(np.conj(q.T) @ a @ p, b, atol=tol)  # Q^H A P = B: zeros off the two diagonals too
    np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(m), atol=tol)
    np.testing.assert_allclose(np.conj(p.T) @ p, np.eye(n), atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(31, 31), (32, 32), (33, 33), (64, 40), (70, 65), (97, 96)])
def test_bidiagonal_reduction_across_the_default_block_size(full, shape, dtype):
    """With the default block size (32 columns) the panels are full, split or single: the reduction is a
    similarity, and B keeps A's singular values (B itself is not a well-conditioned function of A, so blocked and
    unblocked B differ by more than rounding at these sizes in float32)."""
    m, n = shape
    a = values(np.random.default_rng(m * n), shape, dtype)
    q, b, p, d, e = bidiagonal_factors(a, None)
    scale = max(np.abs(a).max(), 1)
    np.testing.assert_allclose(np.conj(q.T) @ a @ p, b, atol=10 * m * eps(dtype) * scale)
    np.testing.assert_allclose(np.linalg.svd(b, compute_uv=False),
                               np.linalg.svd(a.astype(np.complex128), compute_uv=False),
                               atol=10 * m * eps(dtype) * np.linalg.norm(a))


@pytest.mark.parametrize("m, n, nb", [(12, 12, 4), (20, 13, 5), (9, 9, 9), (9, 9, 1), (30, 7, 3)])
def test_bidiagonal_reduction_is_blocked(full, m, n, nb):
    """Device calls of gebrd: per column two gemv (A^H v, A u; none for the last column), per panel with columns
    beyond it one rank-2nb gemm (A -= [V X] [Y U]^H), nothing else."""
    pymagma.default_queue()  # made before counting: its magma_queue_create is not the reduction's
    full.calls.clear()
    bidiagonal_factors(values(np.random.default_rng(0), (m, n), np.complex128), nb)
    panels_with_trailing = len([j for j in range(0, n, nb) if n - j > nb])
    want = collections.Counter({"magma_zgemv": 2 * (n - 1), "magma_zgemm": panels_with_trailing})
    assert collections.Counter(full.calls) == want


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(33, 33), (65, 40), (40, 65), (64, 64)])
def test_hybrid_svd_across_the_default_block_size_matches_numpy(full, shape, dtype):
    a = values(np.random.default_rng(sum(shape)), shape, dtype)
    u, s, vh = (pymagma.to_numpy(x) for x in linalg.svd(a, full_matrices=False, method="hybrid"))
    want = np.linalg.svd(a.astype(np.complex128), compute_uv=False)
    tol = 30 * max(shape) * eps(dtype)
    norm = np.linalg.norm(a)
    np.testing.assert_allclose(s, want, atol=tol * norm)
    assert np.linalg.norm((u * s) @ vh - a) <= tol * norm
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(min(shape)), atol=tol)
    np.testing.assert_allclose(vh @ np.conj(vh.T), np.eye(min(shape)), atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_and_hybrid_eigh_svd_on_the_gpu(dtype):
    """The blocked sytrd/gebrd on a real device (pinned copies on the device's stream, gemv/symv while the host
    computes the panel's share) for sizes around and across their 32-column panels, and eigh/svd against NumPy."""
    rng = np.random.default_rng(0)
    for m, n in ((31, 31), (33, 33), (100, 70), (257, 257)):
        a = values(rng, (m, n), dtype)
        tol = 30 * m * eps(dtype)
        q, b, p, _, _ = bidiagonal_factors(a, None)
        np.testing.assert_allclose(np.conj(q.T) @ a @ p, b, atol=tol * max(np.abs(a).max(), 1))
        h = (a[:n] + np.conj(a[:n].T)).astype(dtype)
        d, e, v, tau = hybrid.sytrd(device_colmajor(h))
        qt = np.eye(n, dtype=np.complex128)
        qt[1:, 1:] = q_from_reflectors(v, tau)
        np.testing.assert_allclose(np.conj(qt.T) @ h @ qt, np.diag(d) + np.diag(e, -1) + np.diag(e, 1),
                                   atol=tol * max(np.abs(h).max(), 1))
        w, vecs = (pymagma.to_numpy(x) for x in linalg.eigh(h, method="hybrid"))
        assert np.linalg.norm(h @ vecs - vecs * w) <= tol * np.linalg.norm(h)
        u, s, vh = (pymagma.to_numpy(x) for x in linalg.svd(a, full_matrices=False, method="hybrid"))
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol * np.linalg.norm(a))
        assert np.linalg.norm((u * s) @ vh - a) <= tol * np.linalg.norm(a)


# ----------------------------------------------------------------------------------------------------- host solvers
@pytest.fixture(params=["scipy", "numpy"])
def solvers(request, monkeypatch):
    """The host solvers with SciPy (LAPACK's divide and conquer) and with SciPy hidden (dense NumPy fallback)."""
    if request.param == "numpy":
        for name in [k for k in sys.modules if k == "scipy" or k.startswith("scipy.")] + ["scipy"]:
            monkeypatch.setitem(sys.modules, name, None)
    else:
        pytest.importorskip("scipy.linalg")
    kinds = hybrid.host_solvers()
    assert all(("SciPy" in kind) == (request.param == "scipy") for kind in kinds.values()), kinds
    return request.param


def tridiagonal_cases(rng, n, dtype):
    """(d, e) of a GOE-like tridiagonal, one with a zero off-diagonal (split) and one with equal diagonals."""
    e = np.sqrt(rng.chisquare(np.arange(n - 1, 0, -1) + 1.0)) if n > 1 else np.zeros(0)
    yield rng.standard_normal(n).astype(dtype), e.astype(dtype)
    if n > 2:
        split = e.copy()
        split[n // 2] = 0
        yield rng.standard_normal(n).astype(dtype), split.astype(dtype)
        yield np.ones(n, dtype), np.full(n - 1, 1e-8, dtype)  # clustered eigenvalues


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 40, 130])
def test_tridiagonal_solver_with_and_without_scipy(solvers, n, dtype):
    for d, e in tridiagonal_cases(np.random.default_rng(n), n, dtype):
        t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
        vals, vecs = hybrid.stedc(d, e)
        assert (vals.dtype, vecs.dtype, vecs.shape) == (np.dtype(dtype), np.dtype(dtype), (n, n))
        if n:
            tol = 30 * n * eps(dtype) * max(np.abs(t).max(), 1)
            assert np.all(np.diff(vals) >= 0)
            np.testing.assert_allclose(vals, np.linalg.eigvalsh(t.astype(np.float64)), atol=tol)
            np.testing.assert_allclose(t @ vecs, vecs * vals, atol=tol)
            np.testing.assert_allclose(vecs.T @ vecs, np.eye(n), atol=tol)


def bidiagonal_cases(rng, n, dtype):
    """(d, e) of a Gaussian matrix's bidiagonal form, one with zeros on the diagonal (rank-deficient), one graded."""
    d = np.sqrt(rng.chisquare(np.arange(n, 0, -1) + 1.0))
    e = np.sqrt(rng.chisquare(np.arange(n - 1, 0, -1) + 1.0)) if n > 1 else np.zeros(0)
    yield d.astype(dtype), e.astype(dtype)
    if n > 2:
        yield np.where(np.arange(n) % 3 == 1, 0, d).astype(dtype), e.astype(dtype)
        yield (d * np.logspace(0, -6, n)).astype(dtype), (e * np.logspace(0, -6, n - 1)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 40, 130])
def test_bidiagonal_svd_with_and_without_scipy(solvers, n, dtype):
    for d, e in bidiagonal_cases(np.random.default_rng(n), n, dtype):
        b = np.diag(d) + np.diag(e, 1) if n else np.zeros((0, 0), dtype)
        u, s, vh = hybrid.bdsdc(d, e)
        assert (u.dtype, s.dtype, vh.dtype, u.shape, vh.shape) == ((np.dtype(dtype),) * 3 + ((n, n),) * 2)
        if n:
            tol = 30 * n * eps(dtype) * max(np.linalg.norm(b), 1)
            assert np.all(np.diff(s) <= 0) and np.all(s >= 0)
            np.testing.assert_allclose(s, np.linalg.svd(b.astype(np.float64), compute_uv=False), atol=tol)
            np.testing.assert_allclose(hybrid.bdsdc(d, e, compute_uv=False), s, atol=tol)
            np.testing.assert_allclose((u * s) @ vh, b, atol=tol)
            np.testing.assert_allclose(u.T @ u, np.eye(n), atol=30 * n * eps(dtype))
            np.testing.assert_allclose(vh @ vh.T, np.eye(n), atol=30 * n * eps(dtype))


def test_scipy_solvers_replace_the_dense_ones(monkeypatch):
    """With SciPy the dense NumPy solvers are not called; a reported failure (info > 0) falls back to them."""
    pytest.importorskip("scipy.linalg")
    d, e = next(bidiagonal_cases(np.random.default_rng(1), 30, np.float64))

    def refuse(*args, **kwargs):
        raise AssertionError("the dense solver was called")

    with monkeypatch.context() as mp:
        mp.setattr(np.linalg, "svd", refuse)
        mp.setattr(np.linalg, "eigh", refuse)
        hybrid.bdsdc(d, e)
        hybrid.bdsdc(d, e, compute_uv=False)
        hybrid.stedc(d, e)

    def failing(routine):
        def run(*args):
            routine(*args)
            ctypes.c_int.from_address(args[-1]).value = 1  # info: "failed to converge"
        return run

    module = hybrid._host_solvers
    assert module._cython_lapack("dbdsdc", module._BDSDC_ARGS[:-1]) is None  # another signature: not called
    assert module._cython_lapack("dnosuch", module._BDSDC_ARGS) is None
    real = module._cython_lapack
    monkeypatch.setattr(module, "_cython_lapack", lambda *args: failing(real(*args)))
    u, s, vh = hybrid.bdsdc(d, e)
    np.testing.assert_allclose((u * s) @ vh, np.diag(d) + np.diag(e, 1), atol=1e-12 * np.linalg.norm(d))


@pytest.mark.parametrize("dtype", DTYPES)
def test_hybrid_eigh_and_svd_without_scipy(full, solvers, dtype):
    rng = np.random.default_rng(3)
    g = values(rng, (37, 35), dtype)
    h = (g[:35] + np.conj(g[:35].T)).astype(dtype)
    tol = 30 * 37 * eps(dtype)
    w, v = linalg.eigh(h, method="hybrid")
    np.testing.assert_allclose(h @ v, v * w, atol=tol * np.linalg.norm(h))
    u, s, vh = linalg.svd(g, full_matrices=True, method="hybrid")
    np.testing.assert_allclose(s, np.linalg.svd(g, compute_uv=False), atol=tol * np.linalg.norm(g))
    np.testing.assert_allclose((u[:, :35] * s) @ vh, g, atol=tol * np.linalg.norm(g))
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(37), atol=tol)


@pytest.mark.parametrize("n, nb", [(12, 4), (13, 5), (9, 9), (9, 1), (2, 3)])
def test_tridiagonal_reduction_is_blocked(full, n, nb):
    """Device calls of sytrd: one symv per reflector (n - 2 of them: the last real one is the identity), one syr2k
    per panel (every panel has rows below it)."""
    g = values(np.random.default_rng(0), (n, n), np.float64)
    pymagma.default_queue()  # made before counting: its magma_queue_create is not the reduction's
    full.calls.clear()
    hybrid.sytrd(device_colmajor(g + g.T), nb)
    want = collections.Counter({"magma_dsymv": n - 2, "magma_dsyr2k": len(range(0, n - 1, nb))})
    assert collections.Counter(full.calls) == want


# ----------------------------------------------------------------------------------------------------- linalg paths
@pytest.fixture
def small_blocks(monkeypatch):
    """Block size 3 so that the small matrices of the tests have several blocks."""
    monkeypatch.setattr(hybrid._block_size, "block_size", lambda *args: 3)


@cases
@given(batch=st.lists(st.integers(0, 2), max_size=2), n=st.integers(0, 8), upper=st.booleans(),
       on_device=st.booleans(), method=st.sampled_from(["auto", "hybrid"]), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_cholesky_and_cho_solve_on_every_path(sim, small_blocks, batch, n, upper, on_device, method, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = spd(rng, (*batch, n, n), dtype), values(rng, (*batch, n, 2), dtype)
    wrap = wrapper(on_device)
    c = linalg.cholesky(wrap(a), upper=upper, method=method)
    assert isinstance(c, pymagma.DeviceArray) == on_device
    want = np.linalg.cholesky(a, upper=upper)
    got = pymagma.to_numpy(c)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=50 * n * eps(dtype), atol=50 * n * eps(dtype) * max(n, 1))
    low = linalg.cholesky(wrap(a), method=method)
    x = pymagma.to_numpy(linalg.cho_solve((low, True), wrap(b), method=method))
    np.testing.assert_allclose(x, np.linalg.solve(a, b) if a.size else x, rtol=1e-3 if eps(dtype) > 1e-10 else 1e-9,
                               atol=1e-3 if eps(dtype) > 1e-10 else 1e-9)


@cases
@given(batch=st.lists(st.integers(1, 2), max_size=1), m=st.integers(0, 8), n=st.integers(0, 8),
       mode=st.sampled_from(["reduced", "complete", "r", "raw"]), on_device=st.booleans(),
       method=st.sampled_from(["auto", "hybrid"]), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_qr_modes_match_numpy_shapes_and_factor(sim, small_blocks, batch, m, n, mode, on_device, method, dtype, seed):
    a = values(np.random.default_rng(seed), (*batch, m, n), dtype)
    got = linalg.qr(wrapper(on_device)(a), mode=mode, method=method)
    want = np.linalg.qr(a, mode=mode)
    assert type(got) is type(want) if isinstance(want, tuple) else not isinstance(got, tuple)  # QRResult, raw tuple
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    got = tuple(pymagma.to_numpy(g) for g in got)
    for g, w in zip(got, want, strict=True):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    tol = 50 * max(m, n, 1) * eps(dtype)
    for idx in np.ndindex(*batch):
        if mode in ("reduced", "complete"):
            q, r = got[0][idx], got[1][idx]
            np.testing.assert_array_equal(np.tril(r, -1), 0)
            np.testing.assert_allclose(q @ r, a[idx], atol=tol * max(1, np.abs(a[idx]).max(initial=0)))
            np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(q.shape[1]), atol=tol)
        elif mode == "r":  # R is unique up to the signs (phases) of its rows
            np.testing.assert_allclose(np.abs(got[0][idx]), np.abs(want[0][idx]), atol=tol * max(m, n, 1))
        elif min(m, n) and (method == "hybrid" or sim.exports is not None and not sim.has("magma_dgeqrf2_gpu")):
            # raw: the simulator's native geqrf2 model keeps Q aside (no real reflectors), so check the hybrid's
            h, tau = got[0][idx].T, got[1][idx]
            q = q_from_reflectors(h, tau)
            np.testing.assert_allclose(q[:, :min(m, n)] @ np.triu(h[:min(m, n)]), a[idx], atol=tol * 4)


@cases
@given(m=st.integers(1, 9), n=st.integers(1, 9), cols=st.sampled_from([None, 2]), on_device=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_lstsq_by_hybrid_qr_matches_numpy(sim, small_blocks, m, n, cols, on_device, dtype, seed):
    m, n = max(m, n), min(m, n)
    rng = np.random.default_rng(seed)
    a = (values(rng, (m, n), dtype) + 3 * np.eye(m, n)).astype(dtype)  # full column rank, well conditioned
    b = values(rng, (m,) if cols is None else (m, cols), dtype)
    wrap = wrapper(on_device)
    ex, eres, _, _ = np.linalg.lstsq(a, b, rcond=None)
    t = {"rtol": 2e-3, "atol": 2e-3} if eps(dtype) > 1e-10 else {"rtol": 1e-9, "atol": 1e-9}
    for method in ("qr", "hybrid", "svd"):
        x, res, rank, _ = linalg.lstsq(wrap(a), wrap(b), method=method)
        assert rank == n and isinstance(x, pymagma.DeviceArray) == on_device
        for g, w in ((x, ex), (res, eres)):
            g = pymagma.to_numpy(g)
            assert (g.shape, g.dtype) == (w.shape, w.dtype)
            np.testing.assert_allclose(g, w, **t)


@settings(max_examples=12, deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(0, 2), max_size=1), n=st.integers(0, 6), on_device=st.booleans(),
       method=st.sampled_from(["auto", "hybrid"]), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_eigh_svd_eig_results_are_numpys_types(sim, batch, n, on_device, method, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (*batch, n, n), dtype)
    h = (g + np.conj(np.swapaxes(g, -1, -2))).astype(dtype)
    wrap = wrapper(on_device)
    t = {"rtol": 2e-3, "atol": 2e-3} if eps(dtype) > 1e-10 else {"rtol": 1e-9, "atol": 1e-9}
    res = linalg.eigh(wrap(h), UPLO="l", method=method)
    assert isinstance(res, np.linalg._linalg.EighResult)
    np.testing.assert_allclose(pymagma.to_numpy(res.eigenvalues), np.linalg.eigvalsh(h), **t)
    v = pymagma.to_numpy(res.eigenvectors)
    np.testing.assert_allclose(h @ v, v * pymagma.to_numpy(res.eigenvalues)[..., None, :], **t)
    s = linalg.svd(wrap(g), method=method)
    assert isinstance(s, np.linalg._linalg.SVDResult)
    np.testing.assert_allclose(pymagma.to_numpy(s.S), np.linalg.svd(g, compute_uv=False), **t)
    sh = linalg.svd(wrap(h), hermitian=True, method=method)
    wh = np.linalg.svd(h, hermitian=True)
    for got, want in zip(sh, wh, strict=True):
        assert pymagma.to_numpy(got).shape == want.shape
    np.testing.assert_allclose(pymagma.to_numpy(sh.S), wh.S, **t)
    u, sv, vh = (pymagma.to_numpy(x) for x in sh)
    np.testing.assert_allclose((u * sv[..., None, :]) @ vh, h, **t)
    np.testing.assert_allclose(pymagma.to_numpy(linalg.svd(wrap(h), compute_uv=False, hermitian=True)), wh.S, **t)
    e = linalg.eig(wrap(g), method=method)
    assert isinstance(e, np.linalg._linalg.EigResult)
    w, vr = (pymagma.to_numpy(x) for x in e)
    np.testing.assert_allclose(g @ vr, vr * w[..., None, :], **t)


# ----------------------------------------------------------------------------------------------------- conformance
def test_partial_provider_paths_and_native_requests(sim):
    paths = linalg.paths(np.float64)
    for fn, (needs, fallback) in linalg.NATIVE_NEEDS.items():
        native = all(sim.has(linalg._routine(f, "d")) for f in needs)
        assert paths[fn] == ("native" if native else fallback), fn
    if not sim.has("magma_dpotrf_gpu"):
        with pytest.raises(MissingSymbolError, match="magma_dpotrf_gpu"):
            linalg.cholesky(np.eye(2), method="native")
    with pytest.raises(ValueError, match="method must be one of"):
        linalg.cholesky(np.eye(2), method="gpu")


def test_numpy2_api_details(full):
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    swapped = a.astype(">f8")
    np.testing.assert_allclose(linalg.cholesky(swapped), np.linalg.cholesky(a))
    np.testing.assert_allclose(linalg.solve(swapped, np.ones(2)), np.linalg.solve(a, np.ones(2)))
    with pytest.raises(np.linalg.LinAlgError, match="incompatible"):
        linalg.lstsq(a, np.ones(3))
    with pytest.raises(ValueError, match="UPLO"):
        linalg.eigh(a, UPLO="x")
    assert isinstance(linalg.slogdet(a), np.linalg._linalg.SlogdetResult)
    assert isinstance(linalg.qr(a), np.linalg._linalg.QRResult)


@pytest.mark.parametrize("seed", range(5))
def test_complex64_slogdet_sign_has_unit_modulus(full, seed):
    rng = np.random.default_rng(seed)
    a = (values(rng, (40, 40), np.complex64) + 0).astype(np.complex64)
    sign, logdet = linalg.slogdet(a)
    assert sign.dtype == np.complex64
    assert abs(abs(complex(sign)) - 1) <= np.finfo(np.float32).eps
    esign, elogdet = np.linalg.slogdet(a.astype(np.complex128))
    np.testing.assert_allclose(complex(sign), esign, atol=1e-4)
    np.testing.assert_allclose(logdet, elogdet, rtol=1e-4)


def test_lstsq_negative_rcond_cuts_at_half_eps(full):
    # singular values 1 and 0.75 eps: kept with LAPACK's eps/2 cutoff, dropped with eps
    e = np.finfo(np.float64).eps
    a = np.diag([1.0, 0.75 * e])
    b = np.array([1.0, 1.0])
    x, _, rank, _ = linalg.lstsq(a, b, rcond=-1)
    ex, _, erank, _ = np.linalg.lstsq(a, b, rcond=-1)
    assert rank == erank == 2
    np.testing.assert_allclose(x, ex)


@pytest.mark.parametrize("nb", [1, 2, 4, 64])
def test_zero_upper_keeps_the_lower_triangle(full, nb):
    a = values(np.random.default_rng(nb), (7, 7), np.complex64)
    w = device_colmajor(a)
    hybrid.zero_upper(w, nb)
    np.testing.assert_array_equal(w.get(), np.tril(a))


# ----------------------------------------------------------------------------------------------------- derived
@cases
@given(batch=st.lists(st.integers(0, 2), max_size=1), m=st.integers(0, 6), n=st.integers(0, 6),
       rank=st.integers(0, 6), hermitian=st.booleans(), on_device=st.booleans(),
       method=st.sampled_from(["auto", "hybrid"]), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
@example(batch=[], m=4, n=4, rank=4, hermitian=True, on_device=False, method="hybrid", dtype=np.float32, seed=72)
def test_pinv_matrix_rank_cond_eigvals_match_numpy(sim, batch, m, n, rank, hermitian, on_device, method, dtype,
                                                    seed):
    rng = np.random.default_rng(seed)
    if hermitian:
        m = n
    rank = min(rank, m, n)
    left, right = values(rng, (*batch, m, rank), dtype), values(rng, (*batch, rank, n), dtype)
    a = (left @ right if not hermitian else left @ np.conj(np.swapaxes(left, -1, -2))).astype(dtype)
    wrap = wrapper(on_device)
    t = {"rtol": 5e-3, "atol": 5e-3} if eps(dtype) > 1e-10 else {"rtol": 1e-8, "atol": 1e-8}
    got = linalg.pinv(wrap(a), hermitian=hermitian, rtol=None, method=method)
    assert isinstance(got, pymagma.DeviceArray) == on_device
    want = np.linalg.pinv(a, hermitian=hermitian, rtol=None)
    got = pymagma.to_numpy(got)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    # a pseudo-inverse is as accurate as its conditioning allows: kappa * eps of the pinv's own size, where kappa is
    # the ratio of the largest to the smallest singular value kept (the two float32 answers may differ by that much)
    s = np.linalg.svd(a.astype(np.complex128), compute_uv=False) if a.size else np.zeros((*batch, 0))
    kept = s[s > s.max(initial=0.0) * max(m, n) * eps(dtype)] if s.size else s
    kappa = kept.max() / kept.min() if kept.size else 1.0
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    pinv_tol = max(t["rtol"], 100 * eps(dtype) * kappa)
    np.testing.assert_allclose(got, want, rtol=pinv_tol, atol=pinv_tol * scale)
    np.testing.assert_array_equal(linalg.matrix_rank(wrap(a), hermitian=hermitian, method=method),
                                  np.linalg.matrix_rank(a, hermitian=hermitian))
    if m == n and n and rank == n and 0 not in batch:
        for p in (None, -2, 1, "fro", np.inf):
            np.testing.assert_allclose(linalg.cond(wrap(a), p, method=method), np.linalg.cond(a, p), rtol=0.05)
        np.testing.assert_allclose(pymagma.to_numpy(linalg.eigvalsh(wrap(a), method=method)) if hermitian else 0,
                                   np.linalg.eigvalsh(a) if hermitian else 0, **t)
        np.testing.assert_allclose(np.sort_complex(pymagma.to_numpy(linalg.eigvals(wrap(a), method=method))),
                                   np.sort_complex(np.linalg.eigvals(a)), rtol=0.05, atol=0.05)


def test_cond_of_a_singular_matrix_is_inf(full):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert linalg.cond(a, 1) == np.inf == np.linalg.cond(a, 1)
    assert linalg.matrix_rank(np.zeros(3)) == 0 and linalg.matrix_rank(np.ones(3)) == 1
