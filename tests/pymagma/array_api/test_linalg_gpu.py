"""pymagma.array_api's linalg extension and products on a GPU against NumPy (hypothesis-drawn stacks, float32 and
float64, integer products); inputs made by ``xp.asarray(numpy_array, dtype=..., copy=True)`` and every result read
back with ``numpy.from_dlpack(x, device="cpu")``.  test_linalg.py beside it runs the same tests on the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(10), deadline=None)
FLOATS = [np.float32, np.float64]
TOL = {np.dtype(np.float32): dict(rtol=3e-4, atol=3e-4), np.dtype(np.float64): dict(rtol=1e-9, atol=1e-9)}
STACKS = [(), (2,), (1, 2)]


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x) -> np.ndarray:
    return np.from_dlpack(x, device="cpu")


def dev(a: np.ndarray):
    return xp().asarray(a, dtype=a.dtype, copy=True)


def close(got, expected, dtype):
    got = host(got)
    assert got.dtype == np.dtype(dtype) and got.shape == np.shape(expected)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(expected, np.float64), **TOL[np.dtype(dtype)])


@st.composite
def matrices(draw, kind: str = "general", square: bool = True):
    """(dtype, a stack of matrices): general values in [-2, 2], or "invertible" (diagonally dominant), "spd"
    (a a^T + n I), "symmetric"."""
    dtype = np.dtype(draw(st.sampled_from(FLOATS)))
    m = draw(st.integers(1, 4))
    n = m if square else draw(st.integers(1, 4))
    a = draw(hnp.arrays(np.float64, (*draw(st.sampled_from(STACKS)), m, n), elements=st.floats(-2, 2, width=32)))
    if kind == "invertible":
        a = a + 4 * n * np.eye(n)
    elif kind == "spd":
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    elif kind == "symmetric":
        a = (a + np.swapaxes(a, -1, -2)) / 2
    return dtype, a.astype(dtype)


def ints(dtype):
    info = np.iinfo(dtype)
    return st.integers(max(info.min, -50), min(info.max, 50))


@FEW
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.int8, np.int32, np.int64]))
def test_matmul_and_the_operator_equal_numpy(data, dtype):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)", max_dims=4,
                                                         max_side=4))
    elements = st.floats(-2, 2, width=32) if np.dtype(dtype).kind == "f" else ints(dtype)
    a, b = (data.draw(hnp.arrays(dtype, s, elements=elements)) for s in shapes.input_shapes)
    expected = np.matmul(a, b)
    transposed = data.draw(st.booleans()) and b.ndim >= 2  # a column-major (transposed view) operand
    db = dev(np.ascontiguousarray(np.swapaxes(b, -1, -2))).mT if transposed else dev(b)
    for got in (xp().matmul(dev(a), db), dev(a) @ db, xp().linalg.matmul(dev(a), db)):
        if np.dtype(dtype).kind == "f":
            close(got, expected, dtype)
        else:  # exact, wrapping on overflow as NumPy's
            assert host(got).dtype == dtype and np.array_equal(host(got), expected)


def test_matmul_promotes_and_refuses_what_the_standard_leaves_out():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    close(xp().matmul(dev(a.astype(np.float32)), dev(b)), a @ b, np.float64)
    with pytest.raises(ValueError, match="not aligned"):
        xp().matmul(dev(a), dev(a))
    with pytest.raises(ValueError, match="at least one dimension"):
        xp().matmul(dev(a), xp().asarray(1.0))
    with pytest.raises(TypeError, match="numeric"):
        xp().matmul(dev(a > 1), dev(a > 1).mT)
    with pytest.raises(TypeError, match="promotion"):
        xp().matmul(dev(a), dev(np.arange(3)))
    assert host(xp().matmul(dev(np.ones((2, 0))), dev(np.ones((0, 3))))).tolist() == [[0.0] * 3] * 2


@FEW
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.int32]))
def test_tensordot_equals_numpy(data, dtype):
    ndim1, ndim2 = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    n = data.draw(st.integers(0, min(ndim1, ndim2)))
    shared = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    s1 = data.draw(st.lists(st.integers(1, 3), min_size=ndim1 - n, max_size=ndim1 - n)) + shared
    s2 = shared + data.draw(st.lists(st.integers(1, 3), min_size=ndim2 - n, max_size=ndim2 - n))
    elements = st.floats(-2, 2, width=32) if np.dtype(dtype).kind == "f" else ints(dtype)
    a, b = (data.draw(hnp.arrays(dtype, s, elements=elements)) for s in (s1, s2))
    if data.draw(st.booleans()):  # explicit axes, permuted and counted from the end
        p1, p2 = data.draw(st.permutations(range(ndim1))), data.draw(st.permutations(range(ndim2)))
        a, b = np.transpose(a, p1), np.transpose(b, p2)
        axes = ([p1.index(ndim1 - n + i) - ndim1 for i in range(n)], [p2.index(i) for i in range(n)])
    else:
        axes = n
    got = xp().tensordot(dev(a), dev(b), axes=axes)
    expected = np.tensordot(a, b, axes=axes)
    if np.dtype(dtype).kind == "f":
        close(got, expected, dtype)
    else:
        assert np.array_equal(host(got), expected)


def test_tensordot_checks_its_axes():
    a, b = np.arange(18.0).reshape(2, 3, 3), np.arange(18.0).reshape(3, 3, 2) % 5
    for axes in (([1, 2], [1, 0]), ([2, 1], [0, 1]), ([-1, -2], [1, 0])):  # pairs in the order given
        close(xp().tensordot(dev(a), dev(b), axes=axes), np.tensordot(a, b, axes=axes), np.float64)
    a = dev(np.ones((2, 3)))
    with pytest.raises(ValueError, match="sizes 2 and 3"):
        xp().tensordot(a, a, axes=([0], [1]))
    with pytest.raises(ValueError, match="must be in"):
        xp().tensordot(a, a, axes=3)
    with pytest.raises(TypeError, match="int or a pair"):
        xp().tensordot(a, a, axes=1.5)


@FEW
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.int64]))
def test_vecdot_equals_numpy(data, dtype):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3, max_side=3))
    s1, s2 = shapes.input_shapes
    axis = data.draw(st.integers(-min(len(s1), len(s2)), -1))
    k = data.draw(st.integers(1, 4))
    s1, s2 = (tuple(k if i == len(s) + axis else n for i, n in enumerate(s)) for s in (s1, s2))
    elements = st.floats(-2, 2, width=32) if np.dtype(dtype).kind == "f" else ints(dtype)
    a, b = (data.draw(hnp.arrays(dtype, s, elements=elements)) for s in (s1, s2))
    expected = np.vecdot(a, b, axis=axis)
    for got in (xp().vecdot(dev(a), dev(b), axis=axis), xp().linalg.vecdot(dev(a), dev(b), axis=axis)):
        if np.dtype(dtype).kind == "f":
            close(got, expected, dtype)
        else:
            assert np.array_equal(host(got), expected)
    with pytest.raises(ValueError):
        xp().vecdot(dev(a), dev(np.ones((*a.shape[:-1], a.shape[-1] + 1), dtype)))


@FEW
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.int32]))
def test_transposes_outer_and_cross_equal_numpy(data, dtype):
    elements = st.floats(-2, 2, width=32) if np.dtype(dtype).kind == "f" else ints(dtype)
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=2, max_dims=4, max_side=3), elements=elements))
    for got in (xp().matrix_transpose(dev(a)), xp().linalg.matrix_transpose(dev(a)), dev(a).mT):
        assert np.array_equal(host(got), np.swapaxes(a, -1, -2))
    u, v = (data.draw(hnp.arrays(dtype, data.draw(st.integers(0, 4)), elements=elements)) for _ in range(2))
    if dtype == np.int32:
        assert np.array_equal(host(xp().linalg.outer(dev(u), dev(v))), np.outer(u, v))
    else:
        close(xp().linalg.outer(dev(u), dev(v)), np.outer(u, v), dtype)
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3, max_side=3))
    axis = data.draw(st.integers(-min(len(s) for s in shapes.input_shapes), -1))
    x1, x2 = (data.draw(hnp.arrays(dtype, tuple(3 if i == len(s) + axis else n for i, n in enumerate(s)),
                                   elements=elements)) for s in shapes.input_shapes)
    expected = np.linalg.cross(x1, x2, axis=axis) if x1.ndim == x2.ndim else np.cross(x1, x2, axis=axis)
    got = xp().linalg.cross(dev(x1), dev(x2), axis=axis)
    if dtype == np.int32:
        assert np.array_equal(host(got), expected)
    else:
        close(got, expected, dtype)


@FEW
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.uint8, np.int8, np.int16, np.uint32, np.int64,
                                              np.uint64]))
def test_diagonal_and_trace_equal_numpy(data, dtype):
    elements = st.floats(-2, 2, width=32) if np.dtype(dtype).kind == "f" else ints(dtype)
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=4),
                             elements=elements))
    offset = data.draw(st.integers(-5, 5))
    assert np.array_equal(host(xp().linalg.diagonal(dev(a), offset=offset)),
                          np.diagonal(a, offset, axis1=-2, axis2=-1))
    out_dtype = data.draw(st.sampled_from([None, dtype]))
    # the standard's rule (NumPy's too): int64 for the signed integers, uint64 for the unsigned ones
    want = np.dtype(out_dtype or {"i": np.int64, "u": np.uint64}.get(np.dtype(dtype).kind, dtype))
    expected = np.trace(a, offset, axis1=-2, axis2=-1, dtype=want)
    got = xp().linalg.trace(dev(a), offset=offset, dtype=out_dtype)
    if want.kind == "f":
        close(got, expected, want)
    else:
        assert host(got).dtype == want and np.array_equal(host(got), expected)


@FEW
@given(data=st.data(), dtype=st.sampled_from(FLOATS))
def test_vector_norm_equals_numpy(data, dtype):
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                             elements=st.floats(-3, 3, width=32)))
    axis = data.draw(st.sampled_from([None, *range(-a.ndim, a.ndim)]) | st.just(tuple(range(a.ndim))[::-1]) |
                     (st.lists(st.integers(0, max(a.ndim - 1, 0)), unique=True, min_size=1).map(tuple)
                      if a.ndim else st.none()))
    ord_ = data.draw(st.sampled_from([2, 1, np.inf, -np.inf, 0, 3, 0.5]))
    keepdims = data.draw(st.booleans())
    got = xp().linalg.vector_norm(dev(a), axis=axis, keepdims=keepdims, ord=ord_)
    close(got, np.linalg.vector_norm(a, axis=axis, keepdims=keepdims, ord=ord_), dtype)


@FEW
@given(m=matrices(square=False), ord_=st.sampled_from(["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]),
       keepdims=st.booleans())
def test_matrix_norm_equals_numpy(m, ord_, keepdims):
    dtype, a = m
    close(xp().linalg.matrix_norm(dev(a), ord=ord_, keepdims=keepdims),
          np.linalg.matrix_norm(a, ord=ord_, keepdims=keepdims), dtype)


@FEW
@given(m=matrices("invertible"), k=st.integers(1, 3), vector=st.booleans())
def test_det_slogdet_inv_solve_equal_numpy(m, k, vector):
    dtype, a = m
    close(xp().linalg.det(dev(a)), np.linalg.det(a), dtype)
    sign, logabsdet = xp().linalg.slogdet(dev(a))
    ref = np.linalg.slogdet(a)
    close(sign, ref.sign, dtype)
    close(logabsdet, ref.logabsdet, dtype)
    close(xp().linalg.inv(dev(a)), np.linalg.inv(a), dtype)
    b = np.linspace(-1, 1, a.shape[-1] * (1 if vector else k)).reshape((a.shape[-1],) if vector else
                                                                          (a.shape[-1], k)).astype(dtype)
    close(xp().linalg.solve(dev(a), dev(b)), np.linalg.solve(a, b), dtype)


@FEW
@given(m=matrices("spd"), upper=st.booleans())
def test_cholesky_equals_numpy(m, upper):
    dtype, a = m
    close(xp().linalg.cholesky(dev(a), upper=upper), np.linalg.cholesky(a, upper=upper), dtype)


@FEW
@given(m=matrices("symmetric"))
def test_eigh_and_eigvalsh_equal_numpy(m):
    dtype, a = m
    res = xp().linalg.eigh(dev(a))
    assert res._fields == ("eigenvalues", "eigenvectors")
    w, v = host(res.eigenvalues).astype(np.float64), host(res.eigenvectors).astype(np.float64)
    close(res.eigenvalues, np.linalg.eigvalsh(a), dtype)
    close(xp().linalg.eigvalsh(dev(a)), np.linalg.eigvalsh(a), dtype)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], **TOL[dtype])  # eigenvectors: A v = w v, orthonormal
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(np.eye(a.shape[-1]), a.shape),
                               **TOL[dtype])


@FEW
@given(m=matrices(square=False), mode=st.sampled_from(["reduced", "complete"]))
def test_qr_reconstructs_with_numpys_shapes(m, mode):
    dtype, a = m
    res = xp().linalg.qr(dev(a), mode=mode)
    ref = np.linalg.qr(a, mode=mode)
    assert res._fields == ("Q", "R")
    q, r = host(res.Q).astype(np.float64), host(res.R).astype(np.float64)
    assert q.shape == ref.Q.shape and r.shape == ref.R.shape
    np.testing.assert_allclose(q @ r, a, **TOL[dtype])
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]),
                                                                            (*a.shape[:-2], *q.shape[-1:] * 2)),
                               **TOL[dtype])
    assert np.array_equal(np.triu(r), r)


@FEW
@given(m=matrices(square=False), full=st.booleans())
def test_svd_and_svdvals_equal_numpy(m, full):
    dtype, a = m
    res = xp().linalg.svd(dev(a), full_matrices=full)
    ref = np.linalg.svd(a, full_matrices=full)
    assert res._fields == ("U", "S", "Vh") and host(res.U).shape == ref.U.shape
    close(res.S, ref.S, dtype)
    close(xp().linalg.svdvals(dev(a)), ref.S, dtype)
    k = ref.S.shape[-1]
    u, s, vh = (host(x).astype(np.float64) for x in res)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, **TOL[dtype])


@FEW
@given(m=matrices(square=False), deficient=st.booleans(), rtol=st.sampled_from([None, 0.1]))
def test_pinv_and_matrix_rank_equal_numpy(m, deficient, rtol):
    dtype, a = m
    if deficient and a.shape[-1] > 1:  # a repeated column: rank one less
        a = a.copy()
        a[..., -1] = a[..., 0]
    close(xp().linalg.pinv(dev(a), rtol=rtol), np.linalg.pinv(a, rtol=rtol), dtype)
    rank = xp().linalg.matrix_rank(dev(a), rtol=rtol)
    assert host(rank).dtype == np.int64
    assert np.array_equal(host(rank), np.linalg.matrix_rank(a, rtol=rtol))


@FEW
@given(m=matrices("invertible"), n=st.integers(-2, 4))
def test_matrix_power_equals_numpy(m, n):
    dtype, a = m
    a = (a / (4 * a.shape[-1])).astype(dtype)  # powers stay of moderate size
    close(xp().linalg.matrix_power(dev(a), n), np.linalg.matrix_power(a, n), dtype)


def test_factorizations_name_what_they_take():
    ints = dev(np.eye(3, dtype=np.int64))
    for name in ("det", "inv", "cholesky", "eigh", "qr", "svd", "pinv", "matrix_norm", "vector_norm"):
        with pytest.raises(TypeError, match=f"{name} takes floating arrays .*not int64"):
            getattr(xp().linalg, name)(ints)
    with pytest.raises(ValueError, match="square"):
        xp().linalg.det(dev(np.ones((2, 3))))
    with pytest.raises(ValueError, match="mode"):
        xp().linalg.qr(dev(np.eye(2)), mode="r")
    with pytest.raises(ValueError, match="ord"):
        xp().linalg.matrix_norm(dev(np.eye(2)), ord=3)
    with pytest.raises(np.linalg.LinAlgError):
        xp().linalg.inv(dev(np.zeros((2, 2))))
