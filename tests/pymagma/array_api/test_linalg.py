"""pymagma.array_api's linalg extension on the simulator: the GPU tests of test_linalg_gpu.py (MAGMA's
routines simulated, every one exported), and the hybrid drivers a partial MAGMA falls back to."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import simulator
from tests.pymagma.array_api.test_linalg_gpu import (  # noqa: F401  (collected here, without the gpu mark)
    TOL,
    dev,
    host,
    test_cholesky_equals_numpy,
    test_det_slogdet_inv_solve_equal_numpy,
    test_diagonal_and_trace_equal_numpy,
    test_eigh_and_eigvalsh_equal_numpy,
    test_factorizations_name_what_they_take,
    test_matmul_and_the_operator_equal_numpy,
    test_matmul_promotes_and_refuses_what_the_standard_leaves_out,
    test_matrix_norm_equals_numpy,
    test_matrix_power_equals_numpy,
    test_pinv_and_matrix_rank_equal_numpy,
    test_qr_reconstructs_with_numpys_shapes,
    test_svd_and_svdvals_equal_numpy,
    test_tensordot_checks_its_axes,
    test_tensordot_equals_numpy,
    test_transposes_outer_and_cross_equal_numpy,
    test_vecdot_equals_numpy,
    test_vector_norm_equals_numpy,
    xp,
)


@pytest.fixture(scope="module", autouse=True)
def simulated():
    from pymagma.simulator import kernels as simulated_kernels

    if simulated_kernels.compiler() is None:
        pytest.skip("no host C++ compiler (g++ or clang++) to build the kernel emulation")
    with simulator.simulated("full"):
        yield


def test_the_extension_is_present_with_the_standards_names():
    names = {"cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
             "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
             "svdvals", "tensordot", "trace", "vecdot", "vector_norm"}
    assert set(xp().linalg.__all__) == names and all(callable(getattr(xp().linalg, n)) for n in names)
    assert {"linalg", "matmul", "tensordot", "vecdot", "matrix_transpose"} <= set(xp().__all__)


def test_the_hybrid_drivers_of_a_partial_magma():
    """Without MAGMA's svd/eigh/qr/potrf drivers the hybrid ones run: same results (a float32 matrix near the
    overflow threshold is scaled as LAPACK's gesdd scales it)."""
    from pymagma import linalg as magma_linalg

    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 4, 3))
    sym = a[0] @ a[0].T + 4 * np.eye(4)
    huge = (rng.normal(size=(4, 3)) * 1e37).astype(np.float32)
    with simulator.simulated("partial"):
        paths = magma_linalg.paths()
        close = dict(TOL[np.dtype(np.float64)])
        np.testing.assert_allclose(host(xp().linalg.svdvals(dev(a))), np.linalg.svd(a, compute_uv=False), **close)
        np.testing.assert_allclose(host(xp().linalg.eigvalsh(dev(sym))), np.linalg.eigvalsh(sym), **close)
        np.testing.assert_allclose(host(xp().linalg.cholesky(dev(sym))), np.linalg.cholesky(sym), **close)
        q, r = (host(x) for x in xp().linalg.qr(dev(a)))
        np.testing.assert_allclose(q @ r, a, **close)
        expected = np.linalg.svd(huge.astype(np.float64), compute_uv=False)
        np.testing.assert_allclose(host(xp().linalg.svdvals(dev(huge))), expected, rtol=1e-5)
        u, s, vh = (host(x).astype(np.float64) for x in xp().linalg.svd(dev(huge), full_matrices=False))
        np.testing.assert_allclose(s, expected, rtol=1e-5)
        np.testing.assert_allclose((u * s) @ vh, huge, rtol=1e-5, atol=1e-5 * np.abs(huge).max())
    if paths["svd"] == "native":
        pytest.skip("this provider exports gesdd: the partial simulator ran MAGMA's own svd")


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3)])
def test_norms_that_take_a_largest_value_are_0_over_nothing_as_numpys(shape):
    """A max of non-negative values (|x|, sums of |x|, singular values) over no elements is 0, as NumPy's norms
    give it; a min over nothing stays an error."""
    a = np.zeros(shape)
    for ord_ in ("fro", "nuc", 1, 2, np.inf):
        expected = np.linalg.matrix_norm(a, ord=ord_)
        np.testing.assert_array_equal(host(xp().linalg.matrix_norm(dev(a), ord=ord_)), expected)
    for axis in (None, -1, 0):
        expected = np.linalg.vector_norm(a, ord=np.inf, axis=axis)
        np.testing.assert_array_equal(host(xp().linalg.vector_norm(dev(a), ord=np.inf, axis=axis)), expected)
    with pytest.raises(ValueError):
        np.linalg.vector_norm(a, ord=-np.inf)
    with pytest.raises(ValueError, match="min over an empty axis"):
        xp().linalg.vector_norm(dev(a), ord=-np.inf)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_integer_matrix_power_equals_numpys(dtype, n):
    """Integer matrices to a power n >= 0: exact products that wrap as NumPy's do (no LAPACK needed); a negative
    power, which needs an inverse, stays a TypeError naming the function."""
    info = np.iinfo(dtype)
    a = np.random.default_rng(n).integers(info.min, info.max, size=(2, 3, 3), endpoint=True).astype(dtype)
    got = host(xp().linalg.matrix_power(dev(a), n))
    expected = np.linalg.matrix_power(a, n)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(TypeError, match="matrix_power"):
        xp().linalg.matrix_power(dev(a), -1)
    with pytest.raises(ValueError, match="square"):
        xp().linalg.matrix_power(dev(a[..., :2]), n)


def test_the_hybrid_drivers_keep_tiny_entries_accurate():
    """Entries near 1e-161, whose squares are subnormal, leave the other singular values and eigenvalues exact:
    the hybrid drivers' reflectors take scaled norms as LAPACK's do (an unscaled sqrt(x.x) moved 1 to 1.006)."""
    a = np.array([[0.0, 1.0], [1e-161, 0.0]])
    b = np.array([[1.0, 0.0, 0.0], [0.0, 3e-160, 0.0], [0.0, 4e-160, 2.0]])
    sym = np.array([[1.0, 1e-161, 0.0], [1e-161, 2.0, 3e-161], [0.0, 3e-161, 0.5]])
    with simulator.simulated("partial"):
        for m in (a, b, b.T):
            np.testing.assert_allclose(host(xp().linalg.svdvals(dev(m))), np.linalg.svdvals(m), rtol=1e-12)
            u, s, vh = (host(x) for x in xp().linalg.svd(dev(m)))
            np.testing.assert_allclose((u * s) @ vh, m, rtol=0, atol=1e-15)
        np.testing.assert_allclose(host(xp().linalg.eigvalsh(dev(sym))), np.linalg.eigvalsh(sym), rtol=1e-12)
