"""pymagma.linalg where it used to differ from numpy.linalg, with numpy.linalg as the reference in each test:
ndarray subclasses kept, ``cond`` of singular and empty matrices, ``svd(hermitian=True)`` of singular matrices,
``svd`` of empty matrices, the tolerance pairs of ``pinv``/``matrix_rank``, ``lstsq`` shapes and float32 accuracy,
unsupported dtypes and ``multi_dot``'s ``out``.  Every path: simulator "full" (MAGMA's drivers), "partial" (what
the found provider exports: the hybrid drivers or the host where it lacks them) and ``method="hybrid"``; NumPy and
DeviceArray input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pymagma
from pymagma import linalg, simulator

from .helpers import random_values as values

#: (simulator mode, method) of the paths: native, the provider's own (hybrid/host where it lacks a driver), hybrid.
PATHS = [("full", "auto"), ("partial", "auto"), ("full", "hybrid")]
TAKES_METHOD = {"cholesky", "qr", "eigh", "svd", "eig", "pinv", "matrix_rank", "cond"}


class ArraySubclass(np.ndarray):
    pass


@pytest.fixture(params=PATHS, ids=["-".join(p) for p in PATHS])
def method(request):
    """Runs the test on one path; yields the ``method`` to pass where a function takes one."""
    mode, method = request.param
    with simulator.simulated(mode):
        yield method


def call(name: str, method: str, *args, **kwargs):
    if name in TAKES_METHOD:
        kwargs["method"] = method
    return getattr(linalg, name)(*args, **kwargs)


def host(x):
    return pymagma.to_numpy(x) if isinstance(x, pymagma.DeviceArray) else x


# ----------------------------------------------------------------------------------------------------- subclasses
def _subclass_calls(n: int, batch: tuple):
    """(name, args, kwargs) of every function NumPy wraps, on ``batch`` stacks of n x n matrices (a subclass)."""
    rng = np.random.default_rng(n)
    g = values(rng, (*batch, n, n), np.float64)
    spd = (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).view(ArraySubclass)
    b = values(rng, (*batch, n, 2), np.float64).view(ArraySubclass)
    calls = [("solve", (np.asarray(spd), b), {}), ("inv", (spd,), {}), ("cholesky", (spd,), {}),
             ("eigh", (spd,), {}), ("svd", (spd,), {}), ("svd", (spd,), {"compute_uv": False}),
             ("svd", (spd,), {"hermitian": True}), ("eig", (spd,), {}), ("pinv", (spd,), {}),
             ("matrix_power", (spd, 3), {}), ("matrix_power", (spd, 0), {})]
    calls += [("qr", (spd,), {"mode": mode}) for mode in ("reduced", "complete", "r", "raw")]
    calls += [("eigvals", (spd,), {}), ("eigvalsh", (spd,), {}), ("det", (spd,), {}), ("cond", (spd, 1), {}),
              ("norm", (spd,), {"axis": (-2, -1)})] * (bool(batch) and n > 0)  # never wrapped
    calls += [("multi_dot", ([np.asarray(spd), spd, np.asarray(spd)],), {})] * (not batch)
    if not batch:
        calls.append(("lstsq", (np.asarray(spd), b), {"rcond": None}))
    return calls


@pytest.mark.parametrize(("n", "batch"), [(3, ()), (3, (2,)), (0, (2,)), (2, (0,))])
def test_subclasses_are_kept_where_numpy_keeps_them(method, n, batch):
    """numpy.linalg passes results through the input's ``__array_wrap__`` (``b``'s for solve and lstsq): the same
    results have the subclass here, also for empty stacks."""
    for name, args, kwargs in _subclass_calls(n, batch):
        if name == "qr" and method == "hybrid" and not n:
            continue
        want = getattr(np.linalg, name)(*args, **kwargs)
        got = call(name, method, *args, **kwargs)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        assert [type(x) for x in got] == [type(x) for x in want], (name, kwargs)
        for g, w in zip(got, want, strict=True):
            if isinstance(w, np.ndarray) and name not in ("eig", "eigh", "svd", "qr", "eigvals"):  # up to signs
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=name)


def test_device_results_are_never_wrapped():
    with simulator.simulated("full"):
        a = pymagma.asarray(np.eye(2) * 2)
        b = np.ones((2, 1)).view(ArraySubclass)
        assert isinstance(linalg.solve(a, b), pymagma.DeviceArray)
        assert type(linalg.inv(np.eye(2).view(ArraySubclass))) is ArraySubclass


# ----------------------------------------------------------------------------------------------------- cond
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own, for 0/0
@pytest.mark.parametrize("on_device", [False, True])
def test_cond_of_singular_matrices_is_infinite_like_numpy(method, on_device):
    wrap = pymagma.asarray if on_device else (lambda x: x)
    for a, p in itertools.product([np.zeros((2, 2)), np.ones((2, 2))], [None, 1, 2, "fro", np.inf]):
        assert np.linalg.cond(a, p) > 1e15
        assert call("cond", method, wrap(a), p) > 1e15, (a, p)
    for a, p in itertools.product([np.zeros((2, 2)), np.ones((2, 2))], [-1, -2, -np.inf]):
        want, got = np.linalg.cond(a, p), call("cond", method, wrap(a), p)  # no exception
        assert np.isinf(got) == np.isinf(want) or min(got, want) < 1e-15, (a, p, got, want)
    stack = np.random.default_rng(1234).random((2, 2, 2, 2))
    stack[0, 0] = 0
    stack[1, 1] = 0
    for p in (None, 1, 2, "fro", -1, -2):
        got, want = call("cond", method, wrap(stack), p), np.linalg.cond(stack, p)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-9)
    nan = np.array([[np.nan, 0.0], [0.0, 1.0]])  # NaN from NaN input stays NaN (NumPy's svd refuses NaN)
    for p in (1, "fro"):
        assert np.isnan(np.linalg.cond(nan, p)) and np.isnan(call("cond", method, wrap(nan), p))


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 2), (2, 0, 3), (0, 2, 2)])
@pytest.mark.parametrize("p", [None, 1, -2, "fro"])
def test_cond_of_empty_matrices_like_numpy(method, shape, p):
    a = np.zeros(shape)
    if 0 not in shape[-2:]:  # an empty stack of non-empty matrices: an empty result
        want, got = np.linalg.cond(a, p), call("cond", method, a, p)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        return
    if p in (None, -2):  # NumPy refuses empty matrices before looking at p
        with pytest.raises(np.linalg.LinAlgError, match="cond is not defined on empty arrays"):
            np.linalg.cond(a, p)
    with pytest.raises(np.linalg.LinAlgError, match="cond is not defined on empty arrays"):
        call("cond", method, pymagma.asarray(a), p)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cond_matches_numpy(method, dtype):
    a = values(np.random.default_rng(5), (3, 4, 4), dtype)
    for p in (None, 1, -1, 2, -2, "fro", np.inf, -np.inf, "nuc"):
        got, want = call("cond", method, pymagma.asarray(a), p), np.linalg.cond(a, p)
        assert (type(got), got.dtype) == (type(want), want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-3 if np.dtype(dtype).itemsize <= 8 else 1e-9)
    assert type(call("cond", method, a[0])) is type(np.linalg.cond(a[0]))


# ----------------------------------------------------------------------------------------------------- svd
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("on_device", [False, True])
def test_hermitian_svd_of_singular_matrices_is_unitary(method, dtype, on_device):
    """NumPy's recipe: eigh, then the eigenvalues' signs (copysign: +1 for a zero) folded into ``Vh``."""
    single = np.dtype(dtype) in (np.float32, np.complex64)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    for a in (np.array([[1, 0], [0, 0]], dtype), np.zeros((3, 3), dtype), np.array([[0, 1j], [-1j, 0]]).astype(
            dtype) if np.iscomplexobj(dtype(0)) else np.array([[-2, 0], [0, 0]], dtype)):
        want = np.linalg.svd(a, hermitian=True)
        u, s, vh = (host(x) for x in call("svd", method, wrap(a), hermitian=True))
        for x in (u, vh):
            np.testing.assert_allclose(x @ x.T.conj(), np.eye(len(a)), rtol=1e-6 if single else 1e-14,
                                       atol=1e-6 if single else 1e-14)
        np.testing.assert_allclose((u * s) @ vh, a, atol=1e-6 if single else 1e-14)
        np.testing.assert_allclose(s, want.S)
        assert (u.dtype, s.dtype, vh.dtype) == (want.U.dtype, want.S.dtype, want.Vh.dtype)


@pytest.mark.parametrize("shape", [(4, 0), (0, 4), (2, 3, 0), (2, 0, 3), (0, 0), (0, 2, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("on_device", [False, True])
def test_svd_of_empty_matrices_puts_identities_where_numpy_does(method, shape, full_matrices, on_device):
    a = np.empty(shape)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    want = np.linalg.svd(a, full_matrices=full_matrices)
    got = call("svd", method, wrap(a), full_matrices=full_matrices)
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, pymagma.DeviceArray) == on_device
        g = host(g)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_array_equal(g, w)
    s = call("svd", method, wrap(a), compute_uv=False)
    assert host(s).shape == np.linalg.svd(a, compute_uv=False).shape


# ----------------------------------------------------------------------------------------------------- messages
@pytest.mark.parametrize(("fn", "kwargs", "match"), [
    ("pinv", {"rcond": 1e-3, "rtol": 1e-3}, "`rtol` and `rcond` can't be both set."),
    ("matrix_rank", {"tol": 1.5, "rtol": 1.5}, "`tol` and `rtol` can't be both set."),
])
def test_tolerance_pairs_are_refused_with_numpys_text(method, fn, kwargs, match):
    for f in (getattr(np.linalg, fn), lambda *a, **k: call(fn, method, *a, **k)):
        with pytest.raises(ValueError, match=match):
            f(np.eye(3), **kwargs)


@pytest.mark.parametrize(("a", "b", "match"), [
    ((4, 3), (5,), "Incompatible dimensions"), ((4, 3), (3, 2), "Incompatible dimensions"),
    ((4, 3), (4, 1, 1), "3-dimensional array given"), ((2, 4, 3), (4,), "3-dimensional array given"),
])
@pytest.mark.parametrize("lstsq_method", ["svd", "qr"])
def test_lstsq_shape_errors_are_numpys(a, b, match, lstsq_method):
    with simulator.simulated("full"):
        for f in (np.linalg.lstsq, lambda *x: linalg.lstsq(*x, method=lstsq_method)):
            with pytest.raises(np.linalg.LinAlgError, match=match):
                f(np.ones(a), np.ones(b))


@pytest.mark.parametrize("dtype", [np.float16, np.longdouble, np.clongdouble, object, "U2", "M8[s]"])
@pytest.mark.parametrize("fn", ["solve", "inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "svd", "eig",
                                "eigvals", "pinv", "cond", "matrix_rank", "lstsq"])
def test_unsupported_dtypes_are_type_errors_like_numpy(fn, dtype):
    a = np.eye(2).astype(dtype)
    args = (a, a) if fn in ("solve", "lstsq") else (a,)
    with pytest.raises(TypeError):
        getattr(np.linalg, fn)(*args)
    with simulator.simulated("full"), pytest.raises(TypeError, match=r"array type \S+ is unsupported in linalg"):
        getattr(linalg, fn)(*args)
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize == 2:  # float16: NumPy's own text, and on the device
        with pytest.raises(TypeError, match="array type float16 is unsupported in linalg"):
            getattr(np.linalg, fn)(*args)
        with simulator.simulated("full"), pytest.raises(TypeError, match="array type float16 is unsupported"):
            getattr(linalg, fn)(*(pymagma.asarray(x) for x in args))


# ----------------------------------------------------------------------------------------------------- lstsq
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("on_device", [False, True])
def test_single_precision_lstsq_is_as_accurate_as_numpys(method, dtype, n, on_device):
    """NumPy solves float32 in double (dgelsd) and rounds: ``b = a @ x`` to 6 decimals, and rank decisions with
    double's epsilon."""
    rng = np.random.default_rng(n)
    a, b = values(rng, (n, n), dtype), values(rng, (n, 3), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    x, res, rank, s = (host(v) for v in linalg.lstsq(wrap(a), wrap(b)))
    ex, eres, erank, es = np.linalg.lstsq(a, b)
    np.testing.assert_almost_equal(a @ ex, b, decimal=6)
    np.testing.assert_almost_equal(a @ x, b, decimal=6)
    assert rank == erank and (x.dtype, s.dtype, res.dtype) == (ex.dtype, es.dtype, eres.dtype)
    np.testing.assert_allclose(s, es, rtol=1e-6)
    tiny = np.diag(np.array([1.0, 1e-9], dtype))  # above double's cut, far below float32's epsilon
    assert linalg.lstsq(wrap(tiny), wrap(np.ones(2, dtype)))[2] == np.linalg.lstsq(tiny, np.ones(2, dtype))[2] == 2


# ----------------------------------------------------------------------------------------------------- products
@pytest.mark.parametrize("count", [2, 3, 4])
def test_multi_dot_returns_the_out_it_was_given(count):
    rng = np.random.default_rng(count)
    arrays = [values(rng, (3 + i, 4 + i), np.float64) for i in range(count)]
    arrays = [x[:, : arrays[i + 1].shape[0]] if i + 1 < count else x for i, x in enumerate(arrays)]
    out, want_out = (np.empty((arrays[0].shape[0], arrays[-1].shape[1])) for _ in range(2))
    assert np.linalg.multi_dot(arrays, out=want_out) is want_out
    with simulator.simulated("full"):
        assert linalg.multi_dot(arrays, out=out) is out
        dout = pymagma.empty(out.shape, np.float64)
        assert linalg.multi_dot([pymagma.asarray(x) for x in arrays], out=dout) is dout
        np.testing.assert_allclose(dout.get(), want_out)
    np.testing.assert_allclose(out, want_out)


def test_norm_of_strided_blocks_is_rounded_once():
    """A block that is every k-th element of memory is one nrm2 call, so its float32 norm is the one of the same
    elements copied (NumPy's test_axis compares them to 6 decimals)."""
    b = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    with simulator.simulated("full"):
        got = linalg.norm(b, axis=(0, 1))
        each = [linalg.norm(np.ascontiguousarray(b[:, :, k])) for k in range(4)]
    np.testing.assert_almost_equal(got, each, decimal=6)
    np.testing.assert_almost_equal(got, np.linalg.norm(b, axis=(0, 1)), decimal=6)
