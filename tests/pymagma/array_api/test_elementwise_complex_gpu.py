"""pymagma.array_api's complex64 and complex128 on a GPU against NumPy: arithmetic, every complex function (general
values, strided views, and the special values of C99 Annex G that NumPy follows), parts, tests, casts, reductions,
scans, data movement and the linalg extension through MAGMA's c/z routines.  Results come back through
``numpy.from_dlpack(x, device="cpu")``.  The same tests run on the simulator from test_kernels_emulated.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import examples

pytestmark = pytest.mark.gpu
FEW = settings(max_examples=examples(10), deadline=None)
COMPLEX = [np.complex64, np.complex128]
REALS = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float32,
         np.float64]
#: the namespace's name -> NumPy's
UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "expm1": "expm1", "log1p": "log1p", "log2": "log2",
         "log10": "log10", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh", "cosh": "cosh",
         "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
         "atanh": "arctanh", "negative": "negative", "positive": "positive", "square": "square",
         "reciprocal": "reciprocal", "conj": "conj", "round": "round"}


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x) -> np.ndarray:
    return np.from_dlpack(x, device="cpu")


def tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if np.dtype(dtype) == np.complex64 else dict(rtol=1e-12, atol=1e-14)


@st.composite
def complex_arrays(draw, dtype, shape=None, bound=4.0):
    width = 32 if np.dtype(dtype) == np.complex64 else 64
    shape = shape if shape is not None else draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    parts = st.floats(-bound, bound, width=width)
    return draw(hnp.arrays(dtype, shape, elements=st.builds(complex, parts, parts)))


LAYOUTS = ["c", "reversed", "T", "step"]


def strided(draw, a):
    """A device view of ``a`` (reversed, transposed or stepped) and the host array it equals."""
    return laid_out(a, draw(st.sampled_from(LAYOUTS)))


def laid_out(a, layout: str):
    """A device view of ``a`` in ``layout`` (one of LAYOUTS) and the host array it equals."""
    if a.ndim == 0 or layout == "c":
        return xp().asarray(a, copy=True), a
    if layout == "reversed":
        return xp().asarray(a, copy=True)[::-1], a[::-1]
    if layout == "T":
        return xp().asarray(a, copy=True).T, a.T
    big = np.repeat(a, 2, axis=0)
    return xp().asarray(big, copy=True)[::2], big[::2]


@FEW
@given(dtype=st.sampled_from(COMPLEX), name=st.sampled_from(sorted(UNARY)), data=st.data())
def test_complex_functions_equal_numpy(dtype, name, data):
    a = data.draw(complex_arrays(dtype))
    d, a = strided(data.draw, a)
    got = host(getattr(xp(), name)(d))
    with np.errstate(all="ignore"):
        expected = getattr(np, UNARY[name])(a)
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_allclose(got, expected, equal_nan=True, **tol(dtype))


@FEW
@given(a=st.sampled_from(COMPLEX).flatmap(complex_arrays), layout=st.sampled_from(LAYOUTS))
@example(a=np.array(5e-324j), layout="c")  # a random draw: NumPy's z / |z| gives nan+infj, the sign is 1j
def test_complex_parts_sign_and_tests(a, layout):
    dtype = a.dtype
    d, a = laid_out(a, layout)
    real = np.finfo(dtype).dtype
    for name, expected in (("abs", np.abs(a)), ("real", a.real), ("imag", a.imag)):
        got = host(getattr(xp(), name)(d))
        assert got.dtype == real
        np.testing.assert_allclose(got, expected, **tol(dtype))
    np.testing.assert_allclose(host(xp().sign(d)), exact_sign(a), **tol(dtype))
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(host(getattr(xp(), name)(d)), getattr(np, name)(a))


def exact_sign(a):
    """The standard's sign, z / |z| (0 at 0), computed exactly in double precision: NumPy's own z / |z| scales by
    1 / |z|, which overflows for a subnormal |z| (5e-324j gives nan+infj, the sign is 1j), and a subnormal |z| has
    too few bits; so both parts are first scaled by the same power of two (exact) to put the larger near 1."""
    wide = np.asarray(a, np.complex128)
    re, im = wide.real, wide.imag
    big = np.maximum(np.abs(re), np.abs(im))
    _, exponent = np.frexp(np.where(big > 0, big, 1.0))
    re, im = np.ldexp(re, -exponent), np.ldexp(im, -exponent)
    with np.errstate(all="ignore"):
        size = np.hypot(re, im)
        sign = np.where(big > 0, (re / size) + 1j * (im / size), 0)
    return sign.astype(a.dtype)


@st.composite
def mixed_operands(draw):
    """Two broadcastable operands, at least one complex, of the promotions the standard defines."""
    dtypes = draw(st.sampled_from([(np.complex64, np.complex64), (np.complex128, np.complex64),
                                   (np.complex64, np.float64), (np.float32, np.complex64),
                                   (np.complex128, np.float32)]))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    arrays = []
    for dt, shape in zip(dtypes, shapes.input_shapes):
        if np.dtype(dt).kind == "c":
            arrays.append(draw(complex_arrays(dt, shape, bound=3.0)))
        else:
            arrays.append(draw(hnp.arrays(dt, shape, elements=st.floats(-3, 3, width=8 * np.dtype(dt).itemsize))))
    return arrays


@FEW
@given(arrays=mixed_operands(),
       name=st.sampled_from(["add", "subtract", "multiply", "divide", "pow", "equal", "not_equal"]))
@example(arrays=[np.array(1 + 2j, np.complex64), np.array(0.5 - 1j, np.complex64)], name="divide")  # 0-d operands
def test_complex_binary_promotes_and_equals_numpy(arrays, name):
    dtypes = [a.dtype for a in arrays]
    got = host(getattr(xp(), name)(*(xp().asarray(a, copy=True) for a in arrays)))
    with np.errstate(all="ignore"):
        expected = np.asarray(getattr(np, {"pow": "power"}.get(name, name))(*arrays))
    if name == "divide":
        expected = exact_where_numpy_overflows(*arrays, expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if name == "pow":  # exp(y log x): a few ulps of log near the origin become relative errors of the power
        finite = np.isfinite(expected) & (np.abs(expected) < 1e6)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-3 if dtypes[0] == np.complex64 else 1e-9,
                                   atol=1e-5)
    else:
        np.testing.assert_allclose(got, expected, equal_nan=True, **tol(got.dtype))


def exact_where_numpy_overflows(a, b, quotient):
    """NumPy's complex ``a / b`` with Python's complex division (Smith's, in double) where NumPy's is not finite but
    the exact quotient is: NumPy scales by ``1 / b``, which overflows for a subnormal divisor (0 / 2e-311 gives
    nan+nanj, the quotient is 0)."""
    a, b = np.broadcast_arrays(np.asarray(a, np.complex128), np.asarray(b, np.complex128))
    out = np.array(quotient)  # a copy, 0-d for 0-d operands
    suspect = ~np.isfinite(out) & np.isfinite(a) & np.isfinite(b) & (b != 0)
    for i in map(tuple, np.argwhere(suspect)):  # (np.nonzero refuses 0-d arrays)
        exact = complex(a[i]) / complex(b[i])
        if np.isfinite(exact):
            out[i] = exact
    return out


def test_complex_divided_by_a_subnormal_is_the_exact_quotient():
    """The example a random draw found: a divisor too small for ``1 / b`` gives the finite quotient, not NumPy's
    nan+nanj (both complex64 / float64 -> complex128, and complex128 / complex128)."""
    tiny = np.float64(2.2e-311)
    for a, b in ((np.zeros(2, np.complex64), np.array([tiny, -tiny])),
                 (np.array([0, 1e-300 + 2e-300j], np.complex128), np.array([tiny + 0j, tiny * 1j]))):
        got = host(xp().divide(xp().asarray(a), xp().asarray(b)))
        with np.errstate(all="ignore"):
            expected = exact_where_numpy_overflows(a, b, np.divide(a, b))
        assert np.isfinite(expected).all()
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -0.5, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("name", ["sqrt", "exp", "log", "log1p", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                                  "expm1", "sin", "cos", "tan", "asin", "acos", "atan"])
def test_complex_special_values_equal_numpys_c99(name):
    """Every pair of special components against NumPy (whose complex functions follow C99 Annex G, as the standard
    does): values and infinities must match, NaN where NumPy has NaN.  The standard leaves the sign of an infinity
    beside a NaN unspecified ("±infinity + NaN j"), so those infinities compare by magnitude; and NumPy's expm1 is
    not C99's at a non-finite real part (NaN parts where the standard gives inf + 0j, -1 + 0j, NaN + 0j ...):
    those are left out (the conformance suite checks them against the standard's own list)."""
    z = np.array([complex(a, b) for a, b in itertools.product(SPECIAL, SPECIAL)])
    got = host(getattr(xp(), name)(xp().asarray(z)))
    with np.errstate(all="ignore"):
        expected = getattr(np, UNARY[name])(z)
    skip = ~np.isfinite(z.real) if name == "expm1" else np.zeros(z.shape, bool)
    for part, other in (("real", "imag"), ("imag", "real")):
        g, e = getattr(got, part), getattr(expected, part)
        beside_nan = np.isnan(getattr(got, other)) & np.isnan(getattr(expected, other))
        same = (g == e) | (np.isnan(g) & np.isnan(e)) | np.isclose(g, e, rtol=1e-12, atol=1e-15)
        same |= beside_nan & np.isinf(g) & np.isinf(e)
        bad = ~(same | skip)
        assert not bad.any(), f"{name}({z[bad]}).{part}: got {g[bad]}, NumPy {e[bad]}"


@pytest.mark.parametrize("source", REALS + COMPLEX)
@pytest.mark.parametrize("target", COMPLEX)
def test_casts_to_complex_equal_numpy(source, target):
    a = (np.arange(-3, 5) % 3).astype(source) if np.dtype(source).kind != "c" else \
        np.array([1 + 2j, -0.5j, 3, np.inf - 1j, 0, 2, -4 + 1j, 1j], source)
    d = xp().asarray(a, copy=True)[::-1]
    got = host(xp().astype(d, target))
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got, a[::-1].astype(target))


def test_complex_to_bool_and_refused_real_casts():
    z = np.array([0j, 1j, -0.0 + 0j, 2 + 0j, complex(np.nan, 0)], np.complex128)
    for dtype in COMPLEX:
        d = xp().asarray(z.astype(dtype))
        np.testing.assert_array_equal(host(xp().astype(d, xp().bool)), z.astype(bool))
        w = z.astype(dtype)[::-1]  # equality of complex numbers: both parts (NaN never equal)
        np.testing.assert_array_equal(host(d == xp().asarray(w)), z.astype(dtype) == w)
        np.testing.assert_array_equal(host(xp().not_equal(d, d)), z != z)
        with pytest.raises(TypeError, match="real"):
            xp().astype(d, xp().float64)
    assert complex(xp().asarray(1 - 2j)) == 1 - 2j and xp().asarray(3j).dtype == np.complex128


@FEW
@given(dtype=st.sampled_from(COMPLEX), data=st.data(), keepdims=st.booleans())
def test_complex_sum_prod_mean_and_scans_equal_numpy(dtype, data, keepdims):
    a = data.draw(complex_arrays(dtype, data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)), bound=1.5))
    d, a = strided(data.draw, a)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    for name in ("sum", "prod", "mean"):
        got = host(getattr(xp(), name)(d, axis=axis, keepdims=keepdims))
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(a.astype(np.complex128), axis=axis, keepdims=keepdims)
        assert got.dtype == a.dtype
        np.testing.assert_allclose(got, expected, equal_nan=True, rtol=1e-4 if dtype == np.complex64 else 1e-12,
                                   atol=1e-5 if dtype == np.complex64 else 1e-13)
    along = axis if axis is not None else (0 if a.ndim == 1 else None)
    if along is not None:
        for name, ref in (("cumulative_sum", np.cumsum), ("cumulative_prod", np.cumprod)):
            got = host(getattr(xp(), name)(d, axis=along, include_initial=True))
            expected = ref(a, axis=along)
            first = np.ones_like(np.take(a, [0], axis=along)) * (1 if name == "cumulative_prod" else 0)
            np.testing.assert_allclose(got, np.concatenate([first, expected], axis=along), **tol(dtype))


def test_complex_data_movement_equals_numpy():
    a = (np.arange(24).reshape(2, 3, 4) * (1 - 0.5j)).astype(np.complex64)
    for dtype in COMPLEX:
        x = a.astype(dtype)
        d = xp().asarray(x, copy=True)
        np.testing.assert_array_equal(host(xp().tril(d, k=1)), np.tril(x, k=1))
        np.testing.assert_array_equal(host(xp().triu(d.mT)), np.triu(x.transpose(0, 2, 1)))
        idx = np.array([2, 0, 3])
        np.testing.assert_array_equal(host(xp().take(d, xp().asarray(idx), axis=2)), np.take(x, idx, axis=2))
        mask = x.real > 7
        np.testing.assert_array_equal(host(d[xp().asarray(mask)]), x[mask])
        e, y = xp().asarray(x, copy=True), x.copy()
        e[xp().asarray(mask)] = xp().asarray(np.array(5 + 5j, dtype))
        y[mask] = 5 + 5j
        np.testing.assert_array_equal(host(e), y)
        view = e.mT[::-1, ::2]  # in place through a strided view
        view *= 2j
        y.transpose(0, 2, 1)[::-1, ::2] *= 2j
        np.testing.assert_array_equal(host(e), y)
        cond = x.imag < -3
        np.testing.assert_array_equal(host(xp().where(xp().asarray(cond), d, 1j)), np.where(cond, x, 1j))
        np.testing.assert_array_equal(host(xp().concat([d, d[:1]], axis=0)), np.concatenate([x, x[:1]]))
        np.testing.assert_array_equal(host(xp().count_nonzero(d, axis=1)), np.count_nonzero(x, axis=1))


@FEW
@given(dtype=st.sampled_from(COMPLEX), data=st.data())
def test_complex_unique_equals_numpy(dtype, data):
    """unique_* sort complex values as NumPy does (real part first); repeated values and NaNs included."""
    pool = [complex(r, i) for r in (-1.0, 0.0, 2.0) for i in (-1.0, 0.0, 3.0)] + [complex(np.nan, 1.0)]
    a = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12)), dtype)
    got = xp().unique_all(xp().asarray(a))
    finite = ~np.isnan(a)
    values, index, inverse, counts = np.unique(a[finite], return_index=True, return_inverse=True, return_counts=True)
    n = len(values)
    np.testing.assert_array_equal(host(got.values)[:n], values)
    assert np.isnan(host(got.values)[n:]).all() and len(host(got.values)) == n + (~finite).sum()
    np.testing.assert_array_equal(host(got.counts)[:n], counts)
    np.testing.assert_array_equal(a[host(got.indices)], host(got.values))
    np.testing.assert_array_equal(host(got.values)[host(got.inverse_indices)][finite], a[finite])


def test_complex_is_not_ordered():
    z = xp().asarray([1 + 1j, 2j])
    for fn in ("sort", "argsort", "max", "min", "argmax", "argmin"):
        with pytest.raises(TypeError, match="complex128"):
            getattr(xp(), fn)(z)
    for fn in ("less", "greater_equal", "maximum", "floor_divide"):
        with pytest.raises(TypeError, match="complex128"):
            getattr(xp(), fn)(z, z)
    for fn in ("floor", "ceil", "trunc", "signbit"):
        with pytest.raises(TypeError, match="complex128"):
            getattr(xp(), fn)(z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_linalg_through_magma_equals_numpy(dtype):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))).astype(dtype)
    h = (a @ a.conj().transpose(0, 2, 1) + 4 * np.eye(4)).astype(dtype)  # Hermitian positive definite
    b = (rng.standard_normal((2, 4, 3)) + 1j * rng.standard_normal((2, 4, 3))).astype(dtype)
    d, dh, db = (xp().asarray(v) for v in (a, h, b))
    t = dict(rtol=2e-3, atol=2e-4) if dtype == np.complex64 else dict(rtol=1e-9, atol=1e-10)
    la = xp().linalg
    np.testing.assert_allclose(host(la.solve(d, db)), np.linalg.solve(a, b), **t)
    np.testing.assert_allclose(host(la.inv(d)), np.linalg.inv(a), **t)
    np.testing.assert_allclose(host(la.det(d)), np.linalg.det(a), **t)
    sign, logabs = la.slogdet(d)
    assert host(logabs).dtype == np.finfo(dtype).dtype
    np.testing.assert_allclose(host(sign) * np.exp(host(logabs)), np.linalg.det(a), **t)
    np.testing.assert_allclose(host(la.cholesky(dh)), np.linalg.cholesky(h), **t)
    w, v = la.eigh(dh)
    np.testing.assert_allclose(host(w), np.linalg.eigvalsh(h), **t)
    np.testing.assert_allclose(h @ host(v), host(v) * host(w)[:, None, :], **t)
    q, r = la.qr(d)
    np.testing.assert_allclose(host(q) @ host(r), a, **t)
    u, s, vh = la.svd(d, full_matrices=False)
    np.testing.assert_allclose(host(s), np.linalg.svd(a, compute_uv=False), **t)
    np.testing.assert_allclose((host(u) * host(s)[:, None, :]) @ host(vh), a, **t)
    np.testing.assert_allclose(host(la.pinv(d)), np.linalg.pinv(a), **t)
    np.testing.assert_allclose(host(la.matrix_norm(d)), np.linalg.norm(a, axis=(1, 2)), **t)
    np.testing.assert_allclose(host(la.matrix_norm(d, ord=2)), np.linalg.norm(a, 2, axis=(1, 2)), **t)
    np.testing.assert_allclose(host(la.vector_norm(d, axis=-1, ord=1)), np.linalg.norm(a, 1, axis=-1), **t)
    np.testing.assert_allclose(host(la.trace(d)), np.trace(a, axis1=1, axis2=2), **t)
    np.testing.assert_allclose(host(xp().vecdot(d, db[..., :1], axis=-2)), np.vecdot(a, b[..., :1], axis=-2), **t)
    np.testing.assert_allclose(host(xp().matmul(d, db)), a @ b, **t)
