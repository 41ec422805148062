"""The fast paths of every op's output, view and launch (arguments pymagma checked already, answered without a call
per check) give what the checked paths give, and bad input still meets the checked path's typed error. Run on the
simulator (mode "full": the data is computed), compared with NumPy's own shapes, strides and values."""

from __future__ import annotations

import gc
import weakref
from ctypes import c_double, c_longlong, c_void_p

import numpy as np
import pytest

import pymagma
from pymagma import array, blas, kernels, memory, simulator
from pymagma.array import DeviceArray, is_c_contiguous


@pytest.fixture(scope="module", autouse=True)
def simulated():
    with simulator.simulated("full"):
        yield


def _kept_values_agree(a: DeviceArray) -> None:
    """The values an array keeps (set at creation on the fast paths) equal those worked out from its layout."""
    assert a.ndim == len(a.shape)
    assert a.itemsize == a.dtype.itemsize
    assert a.size == int(np.prod(a.shape, dtype=np.int64))
    assert a.nbytes == a.size * a.dtype.itemsize
    assert a.is_c_contiguous == is_c_contiguous(a.shape, a.strides, a.dtype.itemsize)


@pytest.mark.parametrize("dtype", [np.float32, np.dtype(np.float64), "int64", np.uint8])
@pytest.mark.parametrize("shape", [(3, 4), (0, 5), (), [2, 3], (np.int64(2), 3)])
@pytest.mark.parametrize("device", [None, 0, np.int64(0)])
def test_empty_of_checked_and_unchecked_arguments_is_numpys_layout(shape, dtype, device):
    a = array.empty(shape, dtype, device=device)
    want = np.empty(tuple(int(s) for s in shape), dtype)
    strides = want.strides if want.size else array.c_strides(want.shape, want.itemsize)  # (NumPy: 0 when empty)
    assert (a.shape, a.strides, a.dtype, a.device) == (want.shape, strides, want.dtype, 0)
    assert all(type(s) is int for s in a.shape)
    _kept_values_agree(a)


@pytest.mark.parametrize("shape, dtype, error, words", [
    ((2.0, 3), np.float32, TypeError, "shape"), ((-1, 2), np.float32, ValueError, "negative dimension"),
    ((2, 3), [("a", "f4")], TypeError, "unsupported dtype"), ((2, 3), "float128", TypeError, "unsupported dtype"),
])
def test_empty_refuses_bad_arguments_with_the_checked_paths_errors(shape, dtype, error, words):
    array.empty((2, 3), np.float32)  # a checked (shape, dtype) seen before answers nothing for these
    with pytest.raises(error, match=words):
        array.empty(shape, dtype)


def test_empty_refuses_a_device_index_out_of_range():
    with pytest.raises(ValueError, match="device"):
        array.empty((2,), np.float32, device=2**40)


def test_reshape_views_follow_numpy_and_a_kept_answer_never_accepts_a_float():
    host = np.arange(24, dtype=np.float32)
    x = pymagma.asarray(host)
    for shape in [(2, 3, 4), (4, -1), (24,), (2, 3, 4), (-1,), (1, 24, 1)]:
        for _ in range(2):  # the second time from the kept answer
            y = x.reshape(shape)
            want = host.reshape(shape)
            assert (y.shape, y.strides, y.ptr, y.owner) == (want.shape, want.strides, x.ptr, x)
            _kept_values_agree(y)
            np.testing.assert_array_equal(y.get(), want)
    with pytest.raises(TypeError, match="integer"):
        x.reshape((2.0, 12))  # (2, 12) was answered before: 2.0 == 2 hashes alike, its type does not
    with pytest.raises(ValueError, match="cannot reshape"):
        x.reshape((5, 5))
    for shape in [24, [4, 6], (np.int64(2), 12), np.array([3, 8])]:  # the function under the method: any spelling
        y = array.reshape_to(x, shape)
        assert (y.shape, y.ptr, y.owner) == (host.reshape(shape).shape, x.ptr, x)
    with pytest.raises(ValueError, match="cannot reshape"):
        array.reshape_to(x, 5)
    strided = pymagma.asarray(host.reshape(4, 6)).T  # not contiguous: reshaped from a copy
    z = strided.reshape((24,))
    assert z.owner is not strided and z.is_c_contiguous
    np.testing.assert_array_equal(z.get(), host.reshape(4, 6).T.reshape(24))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8", "bool", "int8",
                                   "int16", "uint16", "uint32", "uint64", "complex64", "complex128"])
def test_reshape_of_a_strided_view_copies_on_the_device_in_every_dtype(dtype, monkeypatch):
    """A view that is not C-contiguous (reversed, transposed, stepped: layouts a memcpy cannot address) is copied by
    one kernel before the reshape, never through the host; dtypes the copy kernel lacks go as their bytes."""
    host = (np.arange(72).reshape(4, 3, 6) * 37 % 101).astype(dtype)
    if host.dtype.kind == "c":
        host = host - 1j * host[::-1]
    x = pymagma.asarray(host)
    run, launches = kernels.elementwise._run, []

    def counted(*args, **kwargs):
        launches.append(args[1])
        return run(*args, **kwargs)

    for view, want in [(x[::-1], host[::-1]), (x.transpose(2, 0, 1), host.transpose(2, 0, 1)),
                       (x[:, ::2, 1::3], host[:, ::2, 1::3]), (x[1].T, host[1].T)]:
        with monkeypatch.context() as m:
            m.setattr(DeviceArray, "get", lambda self, *a, **k: pytest.fail("a host round trip"))
            m.setattr(kernels.elementwise, "_run", counted)
            before = len(launches)
            y = view.reshape(-1)
            assert len(launches) == before + 1
        assert y.is_c_contiguous and y.dtype == want.dtype and y.shape == (want.size,)
        _kept_values_agree(y)
        np.testing.assert_array_equal(y.get(), want.reshape(-1))


def test_views_keep_their_rank_and_item_size():
    host = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    x = pymagma.asarray(host)
    for view, want in [(x.T, host.T), (x[1:, ::2], host[1:, ::2]), (x[..., 3], host[..., 3]),
                       (x.mT, host.swapaxes(1, 2)), (x[None, 0], host[None, 0]), (x[0].T, host[0].T),
                       (x[0].mT, host[0].T), (x[0, 1].T, host[0, 1].T), (x[:1, :1].T, host[:1, :1].T),
                       (x[:, :1].mT, host[:, :1].swapaxes(1, 2)), (x[1:2, 2:3, 4:5].T, host[1:2, 2:3, 4:5].T),
                       (x.transpose(), host.transpose()), (x.T.T, host), (x.transpose((0, 1, 2)), host),
                       (x.transpose(1, 0, 2), host.transpose(1, 0, 2)),
                       (x.transpose(2, 0, 1).reshape(60), host.transpose(2, 0, 1).ravel()),
                       (x.mT.reshape(60), host.swapaxes(1, 2).ravel())]:
        assert (view.shape, view.strides) == (want.shape, want.strides)
        _kept_values_agree(view)
        np.testing.assert_array_equal(view.get(), want)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        _ = x[0, 0].mT


def test_arrays_keep_their_values_in_slots_and_still_take_a_users_attributes_and_weak_references():
    made = DeviceArray((3, 4), np.float32, 0, strides=(4, 12))  # the checked constructor: a column-major view
    _kept_values_agree(made)
    assert not made.is_c_contiguous and (made.size, made.nbytes, made.ndim) == (12, 48, 2)
    out = array._empty((2, 5), np.dtype(np.float64), 0)
    out.label = "mine"  # an attribute of the user's own goes to the instance dict; the kept values stay in slots
    assert out.__dict__ == {"label": "mine"} and (out.nbytes, out.itemsize) == (80, 8)
    seen = weakref.ref(out)
    assert seen() is out
    del out
    assert seen() is None


def test_the_pool_accounts_an_inline_cache_hit_as_take_does():
    memory.empty_cache()
    a = array.empty((300,), np.float32)  # 1200 bytes: the 1536-byte size class
    ptr = a.ptr
    before = memory.pool_stats()
    del a
    gc.collect()
    b = array.empty((301,), np.float32)  # the same size class: the block given back is taken again
    after = memory.pool_stats()
    assert b.ptr == ptr
    assert after["requests"] == before["requests"] + 1 and after["hits"] == before["hits"] + 1
    assert after["in_use_bytes"] == before["in_use_bytes"] and after["mallocs"] == before["mallocs"]
    c = array.empty((301,), np.float32)  # a miss: a new block, counted once
    assert memory.pool_stats()["mallocs"] == after["mallocs"] + 1 and c.ptr != b.ptr
    assert memory.pool_stats()["requests"] == after["requests"] + 1


def test_a_launch_takes_a_pointer_as_a_plain_int_or_a_c_void_p():
    a, b = pymagma.asarray(np.zeros(100, np.float32)), pymagma.asarray(np.zeros(100, np.float32))
    stream = a.queue.stream
    kernels.launch("elementwise", "fill<float>", 0, stream, 1, 128, [a.ptr, c_longlong(100), c_double(2.5)])
    kernels.launch("elementwise", "fill<float>", 0, stream, 1, 128, [c_void_p(b.ptr), c_longlong(100), c_double(2.5)])
    np.testing.assert_array_equal(a.get(), np.full(100, 2.5, np.float32))
    np.testing.assert_array_equal(a.get(), b.get())


def test_kernels_and_gemm_still_refuse_mixed_or_host_operands():
    x32 = pymagma.asarray(np.ones((2, 2), np.float32))
    x64 = pymagma.asarray(np.ones((2, 2), np.float64))
    kernels.add(x32, x32)  # the float32 dtype known: the next checks start from the look-up
    with pytest.raises(TypeError, match="dtypes differ"):
        kernels.add(x32, x64)
    with pytest.raises(TypeError, match="DeviceArray"):
        kernels.add(np.ones((2, 2), np.float32), x32)
    with pytest.raises(TypeError, match="floating dtype"):
        kernels.relu(pymagma.asarray(np.ones(3, np.int32)))
    with pytest.raises(TypeError, match="pymagma.asarray"):
        blas.gemm(np.ones((2, 2), np.float32), x32)
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = blas.gemm(pymagma.asarray(host), pymagma.asarray(host), trans_b=True)
    np.testing.assert_allclose(out.get(), host @ host.T, rtol=1e-6)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_gemm_of_transposed_operands_is_numpys_product(trans_a, trans_b, strided):
    """Transposes given as flags (no view made on the hot path) and as views, and operands BLAS cannot address
    (every other column: the contiguous-copy path), give NumPy's product."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 8)), rng.standard_normal((8, 6))
    a_host, b_host = (np.ascontiguousarray(a.T) if trans_a else a), (np.ascontiguousarray(b.T) if trans_b else b)
    if strided:  # every other column of a wider array
        a_dev = pymagma.asarray(np.repeat(a_host, 2, axis=1))[:, ::2]
        b_dev = pymagma.asarray(np.repeat(b_host, 2, axis=1))[:, ::2]
    else:
        a_dev, b_dev = pymagma.asarray(a_host), pymagma.asarray(b_host)
    out = blas.gemm(a_dev, b_dev, trans_a=trans_a, trans_b=trans_b)
    np.testing.assert_allclose(out.get(), a @ b, rtol=1e-12)
    viewed = blas.gemm(a_dev.T if trans_a else a_dev, b_dev.T if trans_b else b_dev)
    np.testing.assert_array_equal(viewed.get(), out.get())
    with pytest.raises(ValueError, match="inner dimensions"):
        blas.gemm(a_dev, b_dev, trans_a=not trans_a, trans_b=trans_b)


@pytest.mark.parametrize("host", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                  np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2],  # not contiguous
                                  np.array([True, False]), np.float32(2.5), np.zeros((0, 3), np.int64)])
def test_an_upload_of_any_numpy_array_is_its_copy(host):
    a = pymagma.asarray(host)
    want = np.asarray(host)
    assert a.shape == want.shape and a.dtype == want.dtype
    np.testing.assert_array_equal(a.get(), want)
    _kept_values_agree(a)


def test_an_upload_of_an_unsupported_dtype_is_refused_as_before():
    with pytest.raises(TypeError, match="unsupported dtype >f4"):  # not the machine's byte order
        pymagma.asarray(np.arange(4, dtype=">f4"))
    with pytest.raises(TypeError, match="unsupported dtype"):
        pymagma.asarray(np.array(["a"]))


def test_a_magma_routine_bound_before_and_hidden_since_is_refused():
    from pymagma import _magma
    from pymagma.errors import MissingSymbolError

    x = pymagma.asarray(np.ones((2, 2), np.float32))
    blas.gemm(x, x)  # magma_sgemm bound (its answer kept)
    sim = simulator.current()
    sim.magma.hidden = {"magma_?gemm"}
    try:
        with pytest.raises(MissingSymbolError, match="hidden"):
            _magma.initialized().magma_sgemm  # noqa: B018
    finally:
        sim.magma.hidden = set()
    np.testing.assert_array_equal(blas.gemm(x, x).get(), np.full((2, 2), 2, np.float32))


@pytest.mark.parametrize("a_shape, b_shape", [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((1, 3), (2, 1, 3)),
                                              ((2, 1, 4), (2, 3, 1))])
def test_broadcast_launches_agree_with_numpy(a_shape, b_shape):
    """Broadcast operands' strides (made once per layout) give NumPy's results: a binary op and the reductions'
    gradient broadcast (``broadcast_divide``)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    np.testing.assert_array_equal(kernels.add(pymagma.asarray(a), pymagma.asarray(b)).get(), a + b)
    np.testing.assert_array_equal(kernels.multiply(pymagma.asarray(b), pymagma.asarray(a)).get(), b * a)
    shape = np.broadcast_shapes(a_shape, b_shape)
    np.testing.assert_allclose(kernels.broadcast_divide(pymagma.asarray(a), shape, 4.0).get(),
                               np.broadcast_to(a, shape) / 4.0, rtol=1e-15)


def test_broadcast_divide_refuses_a_shape_it_cannot_broadcast_to_every_time():
    x = pymagma.asarray(np.ones((2, 3)))
    kernels.broadcast_divide(x, (4, 2, 3))  # a pair of shapes checked and kept
    for _ in range(2):
        with pytest.raises(ValueError, match="does not broadcast"):
            kernels.broadcast_divide(x, (2, 4))


def test_elementwise_fast_paths_still_refuse_other_devices_and_dtypes(monkeypatch):
    """binary and bias_add take two float arrays of one dtype object on one device without a call per check; arrays
    of two devices or dtypes still meet the checked path's errors, after the fast path has served the dtype."""
    with simulator.simulated("full") as sim:
        monkeypatch.setattr(sim.runtime, "device_count", 2)
        monkeypatch.delattr(sim.libraries, "device_count", raising=False)
        host = np.arange(6, dtype=np.float32).reshape(2, 3)
        a, bias = pymagma.asarray(host), pymagma.asarray(np.ones(3, np.float32))
        with pymagma.runtime.on_device(1):
            a1, bias1 = pymagma.asarray(host), pymagma.asarray(np.ones(3, np.float32))
        for _ in range(2):
            np.testing.assert_array_equal(kernels.binary("add", a, a).get(), host + host)
            np.testing.assert_array_equal(kernels.bias_add(a, bias).get(), host + 1)
            with pytest.raises(ValueError, match="different devices"):
                kernels.binary("add", a, a1)
            with pytest.raises(ValueError, match="different devices"):
                kernels.bias_add(a, bias1)
            with pytest.raises(TypeError, match="dtypes differ"):
                kernels.binary("multiply", a, pymagma.asarray(host.astype(np.float64)))
            with pytest.raises(TypeError, match="dtypes differ"):
                kernels.bias_add(a, pymagma.asarray(np.ones(3, np.float64)))


def test_a_reduction_over_a_tuple_of_axes_is_planned_once_and_never_for_another_type():
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = pymagma.asarray(host)
    for _ in range(2):
        for axis, keepdims in (((0, 2), False), ((2, 0), True), ((1,), False), ((0, 1, 2), False)):
            np.testing.assert_array_equal(kernels.reduce("sum", x, axis=axis, keepdims=keepdims).get(),
                                          host.sum(axis=axis, keepdims=keepdims))
        with pytest.raises(TypeError, match="must be an integer"):
            kernels.reduce("sum", x, axis=(1.0,))  # equal to (1,) and hashed alike
        with pytest.raises(ValueError, match="repeated axis"):
            kernels.reduce("sum", x, axis=(0, 0))
        with pytest.raises(ValueError, match="out of range"):
            kernels.reduce("max", x, axis=(0, 3))


def test_outputs_layouts_are_kept_per_shape_and_dtype_and_stay_right_past_the_limit():
    for n in range(1, 4300, 3):
        for dtype in (np.dtype(np.float32), np.dtype(np.int64)):
            a = array._empty((2, n), dtype, 0)
            want = np.empty((2, n), dtype)
            assert (a.shape, a.strides, a.nbytes) == (want.shape, want.strides, want.nbytes)
            assert a.owner is memory._pool()  # (the array keeps its pool alive, as an Allocation did)
            _kept_values_agree(a)
            ptr, blocks = a.ptr, memory._pool().free_blocks[0, memory.bucket_size(want.nbytes)]
            del a  # the block back into the free list of its size class
            assert blocks[-1].ptr == ptr
        assert len(array._LAYOUTS) <= 4096
    assert array._empty((0, 3), np.dtype(np.float32), 0).ptr == 0
