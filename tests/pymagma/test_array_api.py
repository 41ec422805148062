"""pymagma.array_api's namespace on the simulator: what it says it supports, the promotion table, creation functions
and DLPack's way back to the host, against NumPy and the standard's tables written out here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pymagma import simulator
from tests.conftest import examples

FEW = settings(max_examples=examples(10), deadline=None)


@pytest.fixture(scope="module", autouse=True)
def simulated():
    from pymagma.simulator import kernels as simulated_kernels

    if simulated_kernels.compiler() is None:
        pytest.skip("no host C++ compiler (g++ or clang++) to build the kernel emulation")
    with simulator.simulated("full"):
        yield


def xp():
    import pymagma.array_api

    return pymagma.array_api


def host(x):
    return np.from_dlpack(x, device="cpu")


def test_the_namespace_and_its_info():
    x = xp().asarray([1.0, 2.0])
    assert x.__array_namespace__() is xp() and x.__array_namespace__(api_version="2024.12") is xp()
    assert xp().__array_api_version__ == "2024.12"
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="2099.01")
    info = xp().__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 8}
    assert info.default_dtypes() == {"real floating": np.float64, "complex floating": np.complex128,
                                     "integral": np.int64, "indexing": np.int64}
    assert list(info.dtypes()) == ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                   "float32", "float64", "complex64", "complex128"]
    assert list(info.dtypes(kind="unsigned integer")) == ["uint8", "uint16", "uint32", "uint64"]
    assert list(info.dtypes(kind=("bool", "real floating"))) == ["bool", "float32", "float64"]
    assert info.devices() == [0] and info.default_device() == 0


@pytest.mark.parametrize("name", ["no_such_function"])
def test_what_is_not_implemented_is_absent_and_named(name):
    assert not hasattr(xp(), name)
    with pytest.raises(AttributeError, match=f"'{name}'.*not implement|does not implement '{name}'"):
        getattr(xp(), name)


def test_the_fft_extension_is_present():
    assert hasattr(xp(), "fft") and "fft" in xp().__all__ and sorted(xp().fft.__all__) == sorted(
        ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq",
         "fftshift", "ifftshift"])


# The standard's promotion table, written out (None: no promotion defined).
B, F32, F64 = "bool", "float32", "float64"
I8, I16, I32, I64 = "int8", "int16", "int32", "int64"
U8, U16, U32, U64 = "uint8", "uint16", "uint32", "uint64"
TABLE = {
    (I8, I16): I16, (I8, I32): I32, (I8, I64): I64, (I16, I32): I32, (I16, I64): I64, (I32, I64): I64,
    (U8, U16): U16, (U8, U32): U32, (U8, U64): U64, (U16, U32): U32, (U16, U64): U64, (U32, U64): U64,
    (I8, U8): I16, (I16, U8): I16, (I32, U8): I32, (I64, U8): I64,
    (I8, U16): I32, (I16, U16): I32, (I32, U16): I32, (I64, U16): I64,
    (I8, U32): I64, (I16, U32): I64, (I32, U32): I64, (I64, U32): I64,
    (I8, U64): None, (I16, U64): None, (I32, U64): None, (I64, U64): None,
    (F32, F64): F64, (B, I8): None, (B, U64): None, (B, F32): None, (I32, F32): None, (U8, F64): None,
    (I64, F64): None, (U64, F32): None,
}


@pytest.mark.parametrize("pair, expected", list(TABLE.items()))
def test_promotion_table(pair, expected):
    a, b = (np.dtype(d) for d in pair)
    for x, y in ((a, b), (b, a)):
        if expected is None:
            with pytest.raises(TypeError):
                xp().result_type(x, y)
            assert not xp().can_cast(x, y) or x == y
        else:
            assert xp().result_type(x, y) == np.dtype(expected)
            assert xp().can_cast(x, y) == (y == np.dtype(expected))


def test_mixed_dtype_arithmetic_promotes_on_the_device():
    a = xp().asarray(np.array([1, -2, 3], np.int8))
    b = xp().asarray(np.array([1000, 2000, 3000], np.int32))
    got = a + b
    assert got.dtype == np.int32
    np.testing.assert_array_equal(host(got), np.array([1001, 1998, 3003], np.int32))
    f = xp().asarray(np.array([0.5], np.float32)) * xp().asarray(np.array([2.0, 4.0]))
    assert f.dtype == np.float64 and host(f).tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="promotion"):
        xp().add(a, f)
    mixed = a + xp().asarray(np.array([255, 1, 128], np.uint8))
    assert mixed.dtype == np.int16 and host(mixed).tolist() == [256, -1, 131]
    with pytest.raises(TypeError, match="no promotion of int8 with uint64"):
        a + xp().asarray(np.array([1], np.uint64))
    with pytest.raises(TypeError, match="Python float"):
        a * 1.5
    assert xp().result_type(a, 2) == np.int8 and xp().result_type(f, 2.5) == np.float64


def test_python_scalars_take_the_arrays_dtype():
    x = xp().asarray(np.array([1.0, 2.0], np.float32))
    assert (x + 1).dtype == np.float32 and (2.5 * x).dtype == np.float32
    assert host(x + 0.1).tolist() == (np.array([1.0, 2.0], np.float32) + np.float32(0.1)).tolist()
    flags = xp().asarray([True, False])
    assert host(flags & True).tolist() == [True, False]
    with pytest.raises(TypeError, match="Python int"):
        flags + 1


@FEW
@given(data=hnp.arrays(st.sampled_from([np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float32, np.float64]),
                       hnp.array_shapes(min_dims=0, max_dims=4, max_side=4)),
       layout=st.sampled_from(["c", "T", "step", "reverse"]))
def test_from_dlpack_to_the_cpu_copies_any_array(data, layout):
    d = xp().asarray(data, copy=True)
    view, expected = d, data
    if layout == "T":
        view, expected = d.T, data.T
    elif layout == "step" and data.ndim:
        view, expected = d[::2], data[::2]
    elif layout == "reverse" and data.ndim:
        view, expected = d[::-1], data[::-1]
    got = np.from_dlpack(view, device="cpu")
    assert got.dtype == data.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_dlpack_arguments():
    d = xp().asarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(BufferError, match="copy"):
        d.__dlpack__(dl_device=(1, 0), copy=False)
    assert host(d.T).tolist() == np.arange(6.0).reshape(2, 3).T.tolist()
    from pymagma import array

    copied = array.from_dlpack(_Producer(d.__dlpack__(copy=True, max_version=(1, 0)), d))
    assert copied.ptr != d.ptr and host(copied).tolist() == host(d).tolist()
    assert array.from_dlpack(_Producer(d.__dlpack__(max_version=(1, 0)), d)).ptr == d.ptr


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(stream=0), ValueError, "ambiguous"), (dict(stream=-2), ValueError, "not valid"),
    (dict(stream="s"), TypeError, "stream"), (dict(stream=1.5), TypeError, "stream"),
    (dict(max_version=(1,)), TypeError, "max_version"), (dict(max_version=[1, 0]), TypeError, "max_version"),
    (dict(dl_device=(2,)), TypeError, "dl_device"), (dict(dl_device=(4, 0)), BufferError, "device"),
    (dict(dl_device=(2, 1)), BufferError, "device"), (dict(copy="yes"), TypeError, "copy"),
    (dict(dl_device=(1, 0), copy=False), BufferError, "only by a copy"),
])
def test_dlpack_bad_keywords_are_clear_errors(kwargs, error, match):
    """The 2023.12 keywords: invalid values name the keyword; a zero-copy export of device memory to the CPU is
    the standard's BufferError."""
    with pytest.raises(error, match=match):
        xp().asarray(np.ones((2, 2))).__dlpack__(**kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128, np.uint16, np.int16, np.bool_])
def test_dlpack_corner_cases_that_work(dtype):
    from pymagma import array, runtime

    a = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    d = xp().asarray(a, copy=True)
    for stream in (None, -1, 1, 2):
        for version in (None, (0, 8), (1, 0), (2, 0)):
            np.testing.assert_array_equal(array.from_dlpack(_Producer(d.__dlpack__(stream=stream,
                                                                                   max_version=version), d)).get(), a)
    for copy in (None, True):  # to the host: a copy either way, a CPU capsule NumPy reads
        host = np.from_dlpack(_CpuProducer(d.__dlpack__(dl_device=(1, 0), copy=copy, max_version=(1, 0))))
        np.testing.assert_array_equal(host, a)
    pinned = runtime.pinned_empty(a.shape, a.dtype)  # memory the host reads in place: exported without a copy
    pinned[...] = a
    view = array.asarray(_Interface(pinned))
    host = np.from_dlpack(_CpuProducer(view.__dlpack__(dl_device=(1, 0), copy=False, max_version=(1, 0))))
    assert host.ctypes.data == pinned.ctypes.data
    np.testing.assert_array_equal(host, a)


class _Interface:
    """A CUDA array interface over host memory (as a pinned buffer handed to the device would be)."""

    def __init__(self, host):
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "version": 3,
                                         "data": (host.ctypes.data, False), "strides": None}


class _CpuProducer:
    """A DLPack producer handing out one host capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class _Producer:
    """A DLPack producer handing out one capsule (what from_dlpack reads)."""

    def __init__(self, capsule, like):
        self.capsule, self.like = capsule, like

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return self.like.__dlpack_device__()


@pytest.mark.parametrize("make, expected", [
    (lambda: xp().zeros((2, 3)), np.zeros((2, 3))),
    (lambda: xp().ones(4, dtype=xp().int32), np.ones(4, np.int32)),
    (lambda: xp().full((2,), 7), np.full((2,), 7, np.int64)),
    (lambda: xp().full((2, 1), True), np.full((2, 1), True)),
    (lambda: xp().arange(5), np.arange(5, dtype=np.int64)),
    (lambda: xp().arange(1.0, 2.0, 0.25), np.arange(1.0, 2.0, 0.25)),
    (lambda: xp().linspace(0, 1, 5, endpoint=False), np.linspace(0, 1, 5, endpoint=False)),
    (lambda: xp().eye(3, 4, k=1, dtype=xp().float32), np.eye(3, 4, k=1, dtype=np.float32)),
    (lambda: xp().asarray([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int64)),
    (lambda: xp().asarray(2.5), np.asarray(2.5)),
    (lambda: xp().zeros_like(xp().asarray(np.ones((2, 2), np.uint8))), np.zeros((2, 2), np.uint8)),
    (lambda: xp().full_like(xp().asarray([1.0, 2.0]), 3.0, dtype=xp().float32), np.full(2, 3.0, np.float32)),
    (lambda: xp().ones_like(xp().asarray([True])), np.ones(1, bool)),
])
def test_creation_functions_equal_numpy(make, expected):
    got = make()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(host(got), expected)
    assert xp().empty_like(got).shape == got.shape and xp().empty((0, 2)).shape == (0, 2)


def test_asarray_copy_semantics():
    d = xp().asarray(np.arange(4, dtype=np.int32))
    assert xp().asarray(d) is d and xp().asarray(d, copy=False) is d
    copied = xp().asarray(d, copy=True)
    assert copied.ptr != d.ptr and host(copied).tolist() == [0, 1, 2, 3]
    assert xp().asarray(d, dtype=xp().float32).dtype == np.float32
    with pytest.raises(ValueError, match="copy=False"):
        xp().asarray(d, dtype=xp().float32, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        xp().asarray(np.ones(2), copy=False)
    with pytest.raises(TypeError, match="float16 is not supported"):
        xp().asarray(np.ones(2, np.float16))
    assert xp().astype(d, xp().int32, copy=False) is d and xp().astype(d, xp().int32).ptr != d.ptr



@pytest.mark.parametrize("dtype", [">i4", ">f8", ">f4", "<i8"])
def test_asarray_takes_host_data_of_either_byte_order(dtype):
    """A big-endian int32 is int32 to NumPy: asarray copies it (in the native order), as numpy.asarray does."""
    a = np.arange(-3, 3).astype(dtype)
    d = xp().asarray(a, copy=True)
    expected = np.asarray(a, dtype=a.dtype.newbyteorder("="))
    assert d.dtype == expected.dtype
    np.testing.assert_array_equal(host(d), expected)

def test_dtype_functions():
    assert xp().isdtype(xp().int8, "signed integer") and xp().isdtype(xp().uint8, ("bool", "integral"))
    assert not xp().isdtype(xp().float32, "integral") and xp().isdtype(xp().float32, xp().float32)
    info = xp().finfo(xp().asarray([1.0], dtype=xp().float32))
    assert info.eps == np.finfo(np.float32).eps and type(info.eps) is float and info.bits == 32
    assert info.smallest_normal == np.finfo(np.float32).smallest_normal and info.dtype == np.float32
    assert xp().iinfo(xp().int8).min == -128
    with pytest.raises(TypeError, match="finfo"):
        xp().finfo(xp().int32)
    with pytest.raises(ValueError, match="unknown kind"):
        xp().isdtype(xp().int8, "integer")


def test_bad_operands_are_typed_errors():
    d = xp().asarray([1.0, 2.0])
    with pytest.raises(TypeError, match="DeviceArray"):
        xp().add([1.0], d)
    with pytest.raises(ValueError, match="broadcast"):
        d + xp().asarray([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="at least one operand"):
        xp().add(1, 2)
    with pytest.raises(TypeError, match="real floating"):
        xp().sqrt(xp().asarray([4]))


@FEW
@given(a=hnp.arrays(st.sampled_from([np.bool_, np.int8, np.int64, np.float32, np.float64]),
                    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                    ),
       data=st.data(), keepdims=st.booleans())
def test_all_and_any_equal_numpy(a, data, keepdims):
    axis = None if a.ndim == 0 else data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1)
                                              | st.just(tuple(range(a.ndim))))
    d = xp().asarray(a)[::-1] if a.ndim else xp().asarray(a)
    a = a[::-1] if a.ndim else a
    for name in ("all", "any"):
        got = host(getattr(xp(), name)(d, axis=axis, keepdims=keepdims))
        expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
        assert got.dtype == np.bool_ and got.shape == np.shape(expected)
        np.testing.assert_array_equal(got, expected)


def test_reshape_views_or_copies_on_the_device():
    a = np.arange(24.0).reshape(2, 3, 4)
    d = xp().asarray(a)
    view = xp().reshape(d, (6, 4))
    assert view.ptr == d.ptr and host(view).tolist() == a.reshape(6, 4).tolist()
    t = xp().reshape(d.mT, (-1,))
    assert host(t).tolist() == a.transpose(0, 2, 1).reshape(-1).tolist()
    with pytest.raises(ValueError, match="copy=False"):
        xp().reshape(d.mT, (24,), copy=False)
    assert xp().reshape(d, (24,), copy=True).ptr != d.ptr


def test_a_broadcast_view_is_read_only_as_in_numpy():
    """Writing into a broadcast view (a zero stride over more than one element) would have its elements, which
    share memory, race for the value: a ValueError, as NumPy's read-only broadcast views give; the base stays."""
    a = np.arange(4.0)
    with pytest.raises(ValueError, match="read-only"):
        np.broadcast_to(a, (3, 4))[:, 0] = [1.0, 2.0, 3.0]
    x = xp().asarray(a, copy=True)
    v = xp().broadcast_to(x, (3, 4))
    writes = [lambda: v.__setitem__((slice(None), 0), xp().asarray([1.0, 2.0, 3.0])),
              lambda: v.__setitem__(0, 5.0),
              lambda: v.__setitem__(xp().asarray([True, False, True]), 5.0),
              lambda: v.__setitem__(xp().asarray([0, 2]), 5.0),
              lambda: v.__imul__(xp().asarray([[1.0], [2.0], [3.0]])),
              lambda: v.__iadd__(1.0),
              lambda: xp().broadcast_to(x[:3], (3, 3)).__imatmul__(xp().ones((3, 3)))]
    for write in writes:
        with pytest.raises(ValueError, match="broadcast view"):
            write()
    np.testing.assert_array_equal(host(x), a)
    y = xp().expand_dims(x, axis=0)  # a size-1 axis: no element is shared, the write goes through
    y[0, 1] = 7.0
    assert host(x)[1] == 7.0


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_clip_takes_python_int_bounds_beyond_the_dtype_as_numpy(dtype):
    """A Python int bound outside an integer dtype's range clips nothing more (NumPy's answer), not an
    OverflowError from converting it to the dtype."""
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, 5, info.max], dtype)
    for lo, hi in ((info.min - 1000, 3), (1, info.max + 1000), (info.min - 1, info.max + 1), (None, info.max + 7)):
        np.testing.assert_array_equal(host(xp().clip(xp().asarray(a, copy=True), lo, hi)), np.clip(a, lo, hi))
        assert host(xp().clip(xp().asarray(a, copy=True), lo, hi)).dtype == a.dtype


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_comparisons_with_python_ints_beyond_the_dtype_compare_values_as_numpy(dtype):
    """``x_uint8 > -1`` or ``x_int8 == 300``: NumPy compares the values (the standard leaves it unspecified);
    arithmetic with such an int stays an OverflowError, as in NumPy."""
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, 5, info.max], dtype)
    d = xp().asarray(a, copy=True)
    for s in (int(info.min) - 1, int(info.max) + 1, -(2**40), 2**40):
        for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
            np.testing.assert_array_equal(host(getattr(xp(), name)(d, s)), getattr(np, name)(a, s))
            np.testing.assert_array_equal(host(getattr(xp(), name)(s, d)), getattr(np, name)(s, a))
    assert host(d > int(info.max) + 1).tolist() == [False] * 4 and host(-(2**40) < d).all()
    with pytest.raises(OverflowError):
        d + (int(info.max) + 1)


def test_setitem_drops_a_values_leading_size_1_axes_as_numpy():
    """``x[0] = y[0:1]``: a value with more dimensions than the selection, all of the extra ones of size 1, is
    stored as NumPy stores it; a leading axis of another size stays a ValueError."""
    a = np.arange(12.0).reshape(3, 4)
    keys = [0, (slice(None), 0), np.array([True, False, True]), np.array([0, 2])]
    values = [np.full((1, 4), 7.0), np.full((1, 1, 3), 8.0), np.full((1, 1, 4), 9.0), np.full((1, 2, 4), 6.0)]
    for key, value in zip(keys, values):
        expected = a.copy()
        expected[key] = value
        d = xp().asarray(a, copy=True)
        d[xp().asarray(key) if isinstance(key, np.ndarray) else key] = xp().asarray(value)
        np.testing.assert_array_equal(host(d), expected)
    with pytest.raises(ValueError):
        xp().asarray(a, copy=True)[0] = xp().asarray(np.ones((2, 4)))


# ------------------------------------------------------------- integer indices out of range, allocation sizes
def _index_cases():
    a = np.arange(20.0).reshape(4, 5)
    return [  # (id, operation on (namespace, device array, NumPy array), the read after it)
        ("getitem-past-end", lambda m, x, h: x[m.asarray(np.array([1, 7]))]),
        ("getitem-below-start", lambda m, x, h: x[m.asarray(np.array([-5]))]),
        ("getitem-second-axis", lambda m, x, h: x[:, m.asarray(np.array([0, 5], np.int32))]),
        ("getitem-two-arrays", lambda m, x, h: x[m.asarray(np.array([0, 1])), m.asarray(np.array([2, 9]))]),
        ("getitem-uint8", lambda m, x, h: x[m.asarray(np.array([4], np.uint8))]),
        ("getitem-int8-negative", lambda m, x, h: x[m.asarray(np.array([-9], np.int8))]),
        ("take", lambda m, x, h: m.take(x, m.asarray(np.array([0, 6])), axis=1)),
        ("take-along-axis", lambda m, x, h: m.take_along_axis(x, m.asarray(np.array([[0], [1], [2], [5]])), axis=1)),
        ("setitem", lambda m, x, h: x.__setitem__(m.asarray(np.array([4])), 1.0)),
        ("setitem-second-axis", lambda m, x, h: x.__setitem__((slice(None), m.asarray(np.array([-6]))), 1.0)),
    ], a


def _numpy_error(case_id, h):
    ops = {
        "getitem-past-end": lambda: h[np.array([1, 7])],
        "getitem-below-start": lambda: h[np.array([-5])],
        "getitem-second-axis": lambda: h[:, np.array([0, 5])],
        "getitem-two-arrays": lambda: h[np.array([0, 1]), np.array([2, 9])],
        "getitem-uint8": lambda: h[np.array([4], np.uint8)],
        "getitem-int8-negative": lambda: h[np.array([-9], np.int8)],
        "take": lambda: np.take(h, [0, 6], axis=1),
        "take-along-axis": lambda: np.take_along_axis(h, np.array([[0], [1], [2], [5]]), axis=1),
        "setitem": lambda: h.__setitem__(np.array([4]), 1.0),
        "setitem-second-axis": lambda: h.__setitem__((slice(None), np.array([-6])), 1.0),
    }
    with pytest.raises(IndexError) as caught:
        ops[case_id]()
    return str(caught.value)


@pytest.mark.parametrize("case_id", [c[0] for c in _index_cases()[0]])
def test_out_of_range_integer_indices_are_numpys_index_error_at_the_next_read(case_id):
    """Fault list, the array API's integer-array indexing (NumPy raises IndexError at the call; pymagma checks on
    the device and reports at the next host read of that device, with NumPy's message, no new synchronisation):
      x[[1, 7]] / x[[-5]] on 4 rows                 IndexError "index 7 is out of bounds for axis 0 with size 4"
                                                    (was: clamped to the last row without a word)
      x[:, [0, 5]] (int32), x[[0, 1], [2, 9]]       IndexError naming axis 1 and its size
      uint8 / int8 index arrays                      the same (checked as int64)
      take(axis=1), take_along_axis                  IndexError naming the axis
      x[[4]] = 1.0, x[:, [-6]] = 1.0                 IndexError (was: wrote into the clamped row)
      the error reported once; later reads work      (test below)
      in-range negative indices                      NumPy's wrap-around (test below)
    """
    cases, a = _index_cases()
    operation = dict(cases)[case_id]
    m, x = xp(), xp().asarray(a.copy())
    result = operation(m, x, a)
    with pytest.raises(IndexError) as caught:
        (result if result is not None else x).get()
    assert str(caught.value) == _numpy_error(case_id, a.copy())


def test_the_index_fault_is_reported_once_and_in_range_indices_wrap_as_numpy():
    m = xp()
    x = m.asarray(np.arange(5.0))
    bad = x[m.asarray(np.array([9]))]
    with pytest.raises(IndexError, match="index 9 is out of bounds for axis 0 with size 5"):
        m.asarray(np.ones(2)).get()  # the next read of the device, of another array
    np.testing.assert_array_equal(bad.get(), [4.0])  # reported; the clamped gather touched nothing outside x
    np.testing.assert_array_equal(x[m.asarray(np.array([-1, -5, 2]))].get(), np.arange(5.0)[[-1, -5, 2]])


@pytest.mark.parametrize("shape, error, words", [
    ((2**31, 2**31), ValueError, ["too big", "(2147483648, 2147483648)"]),
    ((2**62, 4), ValueError, ["too big", "2**63"]),
    ((2**63,), ValueError, ["too big"]),
    ((2**40,), MemoryError, ["Unable to allocate", "(1099511627776,)", "float64", "device 0"]),
    ((-1, 3), ValueError, ["negative dimension"]),
    ((3.5,), TypeError, ["integer", "3.5"]),
])
def test_allocation_sizes_give_numpys_errors(shape, error, words):
    """Fault list, allocation sizes (NumPy: ValueError "array is too big" past the address space, MemoryError
    "Unable to allocate" when memory runs out):
      empty((2**31, 2**31)), empty((2**62, 4)), empty((2**63,))   ValueError naming the shape (was ctypes'
                                                                   OverflowError)
      empty((2**40,)) float64 (8 TiB)                              MemoryError naming size, shape, dtype, device (was
                                                                   a bare MemoryError from the simulator)
      zeros of the same shapes                                     the same errors
      empty((-1, 3)), empty((3.5,))                                ValueError / TypeError (unchanged)
    """
    for make in (xp().empty, xp().zeros):
        with pytest.raises(error) as caught:
            make(shape, dtype=xp().float64)
        assert all(w in str(caught.value) for w in words), caught.value
