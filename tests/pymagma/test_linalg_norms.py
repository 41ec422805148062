"""pymagma.linalg.norm, matrix_power and multi_dot on the simulated device against numpy.linalg as the oracle: every
shape (stacks, empty, 1-D, 0-d), dtype and keyword combination, NumPy and DeviceArray input; where NumPy raises, the
same exception type.  Both simulator modes: "partial" exports what the found MAGMA provider exports (2/-2/'nuc' then
take the hybrid SVD where it lacks gesdd), "full" every modelled routine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _magma, linalg, simulator
from tests.conftest import examples

from .helpers import pivoting_matrices
from .helpers import random_values as values

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
ORDS = [None, "fro", "f", "nuc", 0, 1, -1, 2, -2, np.inf, -np.inf, 3, 0.5, "bad"]
cases = settings(max_examples=examples(40), deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(params=["full", "partial"])
def sim(request):
    with simulator.simulated(request.param) as simulation:
        yield simulation.magma
        simulation.magma.reset()


def tolerance(dtype) -> dict:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    return {"rtol": 2e-3, "atol": 2e-4} if single else {"rtol": 1e-9, "atol": 1e-12}


def wrapper(on_device: bool):
    return pymagma.asarray if on_device else (lambda x: x)


def check_like_numpy(got, want, on_device: bool, **tol) -> None:
    """Same kind (NumPy scalar, NumPy array, or DeviceArray for device input), shape, dtype and values."""
    if isinstance(want, np.ndarray) and want.ndim:
        assert isinstance(got, pymagma.DeviceArray if on_device else np.ndarray), type(got)
        got = pymagma.to_numpy(got)
    else:
        assert isinstance(got, np.generic) and type(got) is type(np.asarray(want)[()]), (type(got), type(want))
    assert (np.shape(got), np.asarray(got).dtype) == (np.shape(want), np.asarray(want).dtype)
    np.testing.assert_allclose(got, want, **tol)


def outcome(fn):
    """(result, None) or (None, the exception NumPy's function raised)."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - the oracle's exception type is what is compared
        return None, exc


@st.composite
def norm_cases(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    nd = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1) if nd else st.none(),
                          st.tuples(st.integers(-nd, nd - 1), st.integers(-nd, nd - 1)) if nd else st.none(),
                          st.just(nd), st.just((0, 1, 2)) if nd >= 3 else st.none()))
    return shape, axis, draw(st.sampled_from(ORDS)), draw(st.booleans())


# ----------------------------------------------------------------------------------------------------- norm
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # NumPy's own, for negative p and zeros
@cases
@given(case=norm_cases(), dtype=st.sampled_from(DTYPES), on_device=st.booleans(), seed=st.integers(0, 999))
def test_norm_matches_numpy(sim, case, dtype, on_device, seed):
    shape, axis, ord, keepdims = case
    x = values(np.random.default_rng(seed), shape, dtype)
    want, error = outcome(lambda: np.linalg.norm(x, ord, axis, keepdims))
    if error is not None:
        with pytest.raises(type(error)):
            linalg.norm(wrapper(on_device)(x), ord, axis, keepdims)
        return
    got = linalg.norm(wrapper(on_device)(x), ord, axis, keepdims)
    check_like_numpy(got, want, on_device, **tolerance(dtype))


@settings(max_examples=examples(15), deadline=None)
@given(m=st.integers(1, 5), n=st.integers(1, 5), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_norm_of_strided_views_and_its_device_routines(m, n, dtype, seed):
    """Transposed and sliced DeviceArrays (no contiguous block) reduce like NumPy; the vector 2-norm, Frobenius and
    real 1/inf norms are MAGMA nrm2/asum calls on the strided data, no copies."""
    x = values(np.random.default_rng(seed), (3, m, 2 * n), dtype)
    with simulator.simulated("full") as simulation:
        view = pymagma.asarray(x)[:, :, ::2].mT
        host = x[:, :, ::2].swapaxes(-1, -2)
        pymagma.default_queue()  # its magma_queue_create is not one of the norms' routines
        simulation.magma.reset()
        for ord, axis in [(None, None), ("fro", (1, 2)), (None, 0), (2, -1)] + \
                [(1, (1, 2)), (-np.inf, (2, 1)), (1, 1)] * (np.dtype(dtype).kind == "f"):
            check_like_numpy(linalg.norm(view, ord, axis), np.linalg.norm(host, ord, axis), True, **tolerance(dtype))
        called = {_magma.SIGNATURES[name].family for name in simulation.magma.calls}
        assert called <= {"magma_?nrm2", "magma_?asum"}, called


def test_norm_keeps_numpys_dtypes_for_other_host_input(sim):
    for x in (np.arange(6).reshape(2, 3), np.ones(4, np.float16), np.array([3, 4], ">f8"), [[1, 2], [3, 4]]):
        for ord in (None, 1, np.inf):
            want = np.linalg.norm(x, ord)
            got = linalg.norm(x, ord)
            assert type(got) is type(want) and got == pytest.approx(want, rel=1e-3)
    assert linalg.norm(np.ones((2, 2), np.float16), axis=0).dtype == np.float16


# ----------------------------------------------------------------------------------------------------- matrix_power
@cases
@given(batch=st.lists(st.integers(0, 2), max_size=2), n=st.integers(0, 5), power=st.integers(-4, 11),
       dtype=st.sampled_from(DTYPES), on_device=st.booleans(), seed=st.integers(0, 999))
def test_matrix_power_matches_numpy(sim, batch, n, power, dtype, on_device, seed):
    a = pivoting_matrices(np.random.default_rng(seed), (*batch, n, n), dtype) / max(2 * n, 1)  # spectral radius ~1
    a = a.astype(dtype)
    want = np.linalg.matrix_power(a, power)
    got = linalg.matrix_power(wrapper(on_device)(a), power)
    t = tolerance(dtype)
    scale = float(np.max(np.abs(want), initial=1))
    check_like_numpy(got, want, on_device, rtol=t["rtol"], atol=t["rtol"] * scale)


def test_matrix_power_errors_and_dtypes_like_numpy(sim):
    ints = np.array([[1, 2], [3, 4]], np.int32)
    for a, n in ((ints, 3), (ints, 0), (ints, -1), (ints.astype(bool), 2), (ints.astype(np.float16), 2)):
        want, got = np.linalg.matrix_power(a, n), linalg.matrix_power(a, n)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-3)
    for bad, error in ((np.ones((2, 3)), np.linalg.LinAlgError), (np.ones(3), np.linalg.LinAlgError)):
        with pytest.raises(error):
            np.linalg.matrix_power(bad, 2)
        with pytest.raises(error):
            linalg.matrix_power(pymagma.asarray(bad), 2)
    for n in (2.0, "2", None, np.float64(1)):
        with pytest.raises(TypeError, match="exponent must be an integer"):
            linalg.matrix_power(np.eye(2), n)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        linalg.matrix_power(np.zeros((2, 2)), -1)
    a = pymagma.asarray(np.eye(2))
    assert linalg.matrix_power(a, 1) is not a
    assert linalg.matrix_power(np.eye(3), np.int64(2)).shape == (3, 3)


# ----------------------------------------------------------------------------------------------------- multi_dot
@st.composite
def chains(draw):
    count = draw(st.integers(2, 5))
    dims = draw(st.lists(st.integers(0, 5), min_size=count + 1, max_size=count + 1))
    shapes = [(dims[i], dims[i + 1]) for i in range(count)]
    if draw(st.booleans()):
        shapes[0] = (dims[1],)
    if draw(st.booleans()):
        shapes[-1] = (dims[-2],)
    return shapes


@cases
@given(shapes=chains(), dtypes=st.lists(st.sampled_from(DTYPES), min_size=5, max_size=5),
       devices=st.lists(st.booleans(), min_size=5, max_size=5), use_out=st.booleans(), seed=st.integers(0, 999))
def test_multi_dot_matches_numpy(sim, shapes, dtypes, devices, use_out, seed):
    rng = np.random.default_rng(seed)
    arrays = [values(rng, s, dtypes[i]) for i, s in enumerate(shapes)]
    want = np.linalg.multi_dot(arrays)
    on_device = any(devices[: len(arrays)])
    args = [pymagma.asarray(x) if d else x for x, d in zip(arrays, devices, strict=False)]
    out = None
    if use_out and np.ndim(want):
        out = (pymagma.empty if on_device else np.empty)(np.shape(want), np.asarray(want).dtype)
    got = linalg.multi_dot(args, out=out)
    if out is not None:
        assert pymagma.to_numpy(got).shape == want.shape
        np.testing.assert_array_equal(pymagma.to_numpy(out).reshape(want.shape), pymagma.to_numpy(got))
    single = [d for d in dtypes[: len(arrays)] if np.dtype(d) in (np.float32, np.complex64)]
    tol = tolerance(single[0] if single else np.float64)  # NumPy multiplies float32 pairs in float32, we don't
    scale = float(np.prod([max(np.max(np.abs(x), initial=1), 1) * max(x.shape) for x in arrays]))
    check_like_numpy(got, want, on_device, rtol=tol["rtol"], atol=tol["rtol"] * scale)


@settings(max_examples=examples(30), deadline=None)
@given(dims=st.lists(st.integers(1, 60), min_size=3, max_size=8))
def test_chain_order_is_numpys(dims):
    arrays = [np.empty((dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    want = np.linalg._linalg._multi_dot_matrix_chain_order(arrays)
    got = linalg._chain_order(dims)
    count = len(arrays)
    assert all(got[i][j] == want[i, j] for i in range(count) for j in range(i + 1, count))


def test_multi_dot_vectors_out_and_numpy_dtypes(sim):
    rng = np.random.default_rng(0)
    v, a, w = rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal(4)
    got = linalg.multi_dot([pymagma.asarray(v), a, w])
    assert isinstance(got, np.float64) and got == pytest.approx(v @ a @ w)
    out = pymagma.empty((1, 4), np.float64)  # the 2-D product's shape is accepted, as in NumPy
    row = linalg.multi_dot([v, pymagma.asarray(a), np.eye(4)], out=out)
    assert row.shape == (4,) and row.ptr == out.ptr
    np.testing.assert_allclose(out.get()[0], v @ a)
    ints = [np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4), np.ones((4, 2), np.int8)]
    assert linalg.multi_dot(ints).dtype == np.linalg.multi_dot(ints).dtype == np.int64
    np.testing.assert_array_equal(linalg.multi_dot(ints), np.linalg.multi_dot(ints))
    with pytest.raises(ValueError, match="at least two"):
        linalg.multi_dot([a])
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        linalg.multi_dot([a, np.ones((4, 2, 2)), a])
    with pytest.raises(ValueError, match="not aligned"):
        linalg.multi_dot([a, a, a])
    with pytest.raises(ValueError, match="not acceptable"):
        linalg.multi_dot([a.T, a, a.T], out=np.empty((4, 3), np.float32))
    with pytest.raises(TypeError, match="DeviceArray"):
        linalg.multi_dot([pymagma.asarray(a.T), a], out=np.empty((4, 4)))
