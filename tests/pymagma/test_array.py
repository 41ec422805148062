"""DeviceArray: views and strides (against NumPy's own views), the CUDA array interface and DLPack (checked with
NumPy and PyTorch as independent consumers/producers, on host memory here), and real device use on a GPU."""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pymagma
from pymagma import _dlpack, simulator
from pymagma.array import DeviceArray, byte_extent, c_strides, index_view

from .helpers import BF16


def host_view(arr: np.ndarray) -> DeviceArray:
    """A DeviceArray over host memory (no CUDA involved): only its bookkeeping is exercised."""
    return DeviceArray(arr.shape, arr.dtype, arr.ctypes.data, arr.strides, owner=arr)


def as_numpy(x: DeviceArray, base: np.ndarray) -> np.ndarray:
    """Read a host-backed DeviceArray through its ptr/shape/strides."""
    off = x.ptr - base.ctypes.data
    flat = base.reshape(-1).view(np.uint8)
    return np.ndarray(x.shape, x.dtype, buffer=flat, offset=off, strides=x.strides)


index_item = st.one_of(st.integers(-6, 5), st.slices(6))


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6),
       key=st.lists(index_item, min_size=1, max_size=4), ellipsis_at=st.none() | st.integers(0, 4))
def test_basic_indexing_matches_numpy(shape, key, ellipsis_at):
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    key = list(key)[: len(shape)]
    if ellipsis_at is not None:
        key.insert(min(ellipsis_at, len(key)), Ellipsis)
    key = tuple(key)
    try:
        expected = base[key]
    except IndexError:
        with pytest.raises(IndexError):
            index_view(base.shape, base.strides, key)
        return
    view = host_view(base)[key]
    assert view.shape == expected.shape
    np.testing.assert_array_equal(as_numpy(view, base), expected)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6), key=index_item)
def test_one_int_or_slice_key_matches_numpy(shape, key):
    """A key that is one int or one slice (the first axis's quick path) indexes as NumPy does, errors included."""
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    try:
        expected = base[key]
    except IndexError as exc:
        with pytest.raises(IndexError, match="out of bounds" if "out of bounds" in str(exc) else "too many"):
            index_view(base.shape, base.strides, key)
        return
    view = host_view(base)[key]
    assert (view.shape, view.strides) == (expected.shape, expected.strides if expected.size else view.strides)
    if expected.size:  # (an empty view addresses nothing: its offset and strides are free)
        assert view.is_c_contiguous == expected.flags.c_contiguous
        np.testing.assert_array_equal(as_numpy(view, base), expected)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5), item=st.sampled_from([1, 4, 8, 16]))
def test_c_strides_and_extent_match_numpy(shape, item):
    a = np.empty(shape, dtype=f"V{item}")
    if a.size:  # NumPy gives empty arrays zero strides; any strides address nothing then
        assert c_strides(shape, item) == a.strides
    lo, hi = byte_extent(shape, a.strides, item)
    assert (lo, hi) == ((0, 0) if a.size == 0 else (0, a.nbytes))


def test_views_share_memory_and_follow_numpy():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = host_view(base)
    np.testing.assert_array_equal(as_numpy(d.T, base), base.T)
    np.testing.assert_array_equal(as_numpy(d.transpose(1, 0, 2), base), base.transpose(1, 0, 2))
    np.testing.assert_array_equal(as_numpy(d.mT, base), np.swapaxes(base, -1, -2))
    np.testing.assert_array_equal(as_numpy(d.reshape(4, -1), base), base.reshape(4, -1))
    np.testing.assert_array_equal(as_numpy(d[1:, ::2, -1], base), base[1:, ::2, -1])
    assert d.T.owner is d and not d.T.is_c_contiguous and d.is_c_contiguous
    assert (d.size, d.nbytes, d.ndim, len(d)) == (24, 96, 3, 2)
    with pytest.raises(ValueError, match="cannot reshape"):
        d.reshape(5, 5)
    with pytest.raises(TypeError, match="basic indexing"):
        d[[0, 1]]
    with pytest.raises(TypeError, match="unsupported dtype"):
        DeviceArray((2,), np.dtype("U3"), 0)


@pytest.mark.parametrize("convert", [np.asarray, np.array, lambda d: np.asarray(d, copy=False),
                                     lambda d: np.asarray(d, dtype=np.float32), lambda d: np.add(d, 1),
                                     lambda d: np.testing.assert_array_equal(d, np.ones(3))])
def test_numpy_never_converts_device_memory_implicitly(convert):
    """As CuPy: an implicit device-to-host copy would hide a synchronisation and a transfer; .get() is explicit."""
    d = host_view(np.ones(3))
    with pytest.raises(TypeError, match=r"implicit conversion.*\.get\(\)"):
        convert(d)


def test_cuda_array_interface_v3():
    base = np.zeros((3, 4), np.complex64)
    d = host_view(base)
    iface = d.__cuda_array_interface__
    assert iface == {"shape": (3, 4), "typestr": "<c8", "data": (base.ctypes.data, False), "version": 3,
                     "strides": None, "stream": 1}  # the legacy stream: consumers wait for all pending work
    assert d.T.__cuda_array_interface__["strides"] == (8, 32)


class _HostExporter:
    """Exports a host-backed DeviceArray as a kDLCPU capsule so NumPy/PyTorch can consume our struct layout."""

    def __init__(self, arr, versioned=True):
        self.arr, self.versioned = arr, versioned

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        versioned = self.versioned and max_version is not None and max_version[0] >= 1
        return _dlpack.to_capsule(self.arr, _dlpack.kDLCPU, versioned=versioned)

    def __dlpack_device__(self):
        return _dlpack.kDLCPU, 0


@pytest.mark.parametrize("versioned", [True, False], ids=["dltensor_versioned", "dltensor"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.int32, np.bool_])
def test_dlpack_export_is_read_correctly_by_numpy(dtype, versioned):
    base = (np.arange(24) % 3).astype(dtype).reshape(4, 6)
    for view, expected in ((host_view(base), base), (host_view(base).T, base.T), (host_view(base)[1:, ::2],
                                                                                   base[1:, ::2])):
        got = np.from_dlpack(_HostExporter(view, versioned))
        np.testing.assert_array_equal(got, expected)
        assert got.ctypes.data == view.ptr  # zero copy


def test_dlpack_export_and_import_with_torch():
    torch = pytest.importorskip("torch")
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = torch.from_dlpack(_HostExporter(host_view(base).T))
    np.testing.assert_array_equal(t.numpy(), base.T)
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3).T
    imported = _dlpack.from_capsule(src.__dlpack__(), DeviceArray)
    assert imported.shape == (3, 2) and imported.strides == (4, 12) and imported.ptr == src.data_ptr()
    assert imported.dtype == np.float32


def test_bfloat16_arrays_through_ml_dtypes_and_dlpack():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    bf16 = pymagma.dtypes.bfloat16()
    base = np.array([[1.5, -2.0, 3.25], [0.5, 96.0, -0.125]], bf16)
    view = host_view(base).T
    t = torch.from_dlpack(_HostExporter(view))  # torch reads our kDLBfloat export
    assert t.dtype == torch.bfloat16 and t.shape == (3, 2)
    np.testing.assert_array_equal(t.float().numpy(), base.T.astype(np.float32))
    src = torch.tensor([[1.0, 2.5], [-3.0, 0.75]], dtype=torch.bfloat16).T
    imported = _dlpack.from_capsule(src.__dlpack__(), DeviceArray)
    assert imported.dtype == bf16 and imported.strides == (2, 4)
    raw = (ctypes.c_uint8 * src.untyped_storage().nbytes()).from_address(imported.ptr)
    got = np.ndarray(imported.shape, imported.dtype, buffer=raw, strides=imported.strides)
    np.testing.assert_array_equal(got.astype(np.float32), src.float().numpy())
    with pytest.raises(AttributeError, match="DLPack"):
        _ = view.__cuda_array_interface__
    assert not hasattr(view, "__cuda_array_interface__")  # so CuPy/Numba-style probes fall back to DLPack


def test_bfloat16_without_ml_dtypes_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # as if it were not installed
    with pytest.raises(TypeError, match="pip install ml_dtypes"):
        pymagma.empty((2, 2), "bfloat16")
    with pytest.raises(TypeError, match="pip install ml_dtypes"):
        _dlpack.np_dtype(_dlpack.DLDataType(_dlpack.kDLBfloat, 16, 1))


@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_export_is_released_once_consumed_or_dropped(versioned):
    base = np.ones(5)
    gc.collect()  # earlier tests' dropped capsules are released now, not during this test
    before = len(_dlpack._EXPORTED)
    cap = _dlpack.to_capsule(host_view(base), _dlpack.kDLCPU, versioned=versioned)
    assert len(_dlpack._EXPORTED) == before + 1
    del cap  # never consumed: the next sweep (an export, a garbage collection) releases it
    gc.collect()
    assert len(_dlpack._EXPORTED) == before
    arr = np.from_dlpack(_HostExporter(host_view(base), versioned))
    del arr  # consumed: NumPy calls the deleter
    assert len(_dlpack._EXPORTED) == before
    imported = _dlpack.from_capsule(_dlpack.to_capsule(host_view(base), versioned=versioned), DeviceArray)
    assert len(_dlpack._EXPORTED) == before + 1
    del imported  # imported by pymagma itself: our finalizer calls our deleter
    gc.collect()
    assert len(_dlpack._EXPORTED) == before


def test_device_arrays_export_the_capsule_kind_the_consumer_asks_for():
    torch = pytest.importorskip("torch")
    with simulator.simulated():
        d = pymagma.asarray(np.arange(6.0).reshape(2, 3))
        assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(1, 0)))
        assert "dltensor_versioned" in repr(d.__dlpack__(max_version=(2, 3)))  # we answer with 1.0, as allowed
        assert '"dltensor"' in repr(d.__dlpack__()) and '"dltensor"' in repr(d.__dlpack__(max_version=(0, 8)))
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    for capsule in (src.__dlpack__(max_version=(1, 0)), src.__dlpack__()):
        imported = _dlpack.from_capsule(capsule, DeviceArray)
        assert imported.ptr == src.data_ptr() and imported.shape == (2, 3) and imported.dtype == np.float64


def test_dlpack_import_refuses_read_only_other_versions_and_used_capsules():
    base = np.ones(3)
    for change, words in ((lambda m: setattr(m, "flags", _dlpack.FLAG_READ_ONLY), "read-only"),
                          (lambda m: setattr(m.version, "major", 2), "version 2.0")):
        capsule = _dlpack.to_capsule(host_view(base), _dlpack.kDLCPU, versioned=True)
        change(next(reversed(_dlpack._EXPORTED.values()))[0])
        with pytest.raises(BufferError, match=words):
            _dlpack.from_capsule(capsule, DeviceArray)
    capsule = _dlpack.to_capsule(host_view(base), _dlpack.kDLCPU)
    _dlpack.from_capsule(capsule, DeviceArray)
    with pytest.raises(BufferError, match="unconsumed DLPack capsule"):
        _dlpack.from_capsule(capsule, DeviceArray)  # a capsule is consumed once


def test_mpi4py_reduces_a_device_array_in_place_through_dlpack():
    """mpi4py asks for a versioned capsule (it refuses an unversioned answer to max_version)."""
    mpi = pytest.importorskip("mpi4py.MPI")
    with simulator.simulated():
        d = pymagma.asarray(np.arange(6.0))
        mpi.COMM_SELF.Allreduce(mpi.IN_PLACE, d)
        np.testing.assert_array_equal(d.get(), np.arange(6.0))
        out = pymagma.empty(6, np.float64)
        mpi.COMM_SELF.Allreduce(d, out)
        np.testing.assert_array_equal(out.get(), np.arange(6.0))


def test_from_dlpack_rejects_host_tensors():
    with pytest.raises(ValueError, match="CUDA tensor"):
        pymagma.from_dlpack(np.ones(3))
    with pytest.raises(TypeError, match="DLPack"):
        pymagma.from_dlpack([1, 2])


# ----------------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
       dtype=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128, np.int32] +
                             ([BF16] if BF16 is not None else [])))
def test_round_trip_and_views_on_device(shape, dtype):
    host = (np.arange(int(np.prod(shape))) - 3).astype(dtype).reshape(shape)
    d = pymagma.asarray(host)
    np.testing.assert_array_equal(d.get(), host)
    np.testing.assert_array_equal(d.T.get(), host.T)
    np.testing.assert_array_equal(d.T.copy().get(), host.T)
    if host.ndim >= 1 and host.shape[0] > 1:
        np.testing.assert_array_equal(d[1::2].get(), host[1::2])


@pytest.mark.gpu
def test_creation_functions():
    np.testing.assert_array_equal(pymagma.zeros((3, 2), np.float64).get(), np.zeros((3, 2)))
    np.testing.assert_array_equal(pymagma.ones(5, np.complex64).get(), np.ones(5, np.complex64))
    assert pymagma.empty((0, 4)).get().shape == (0, 4)
    np.testing.assert_array_equal(pymagma.to_numpy(pymagma.asarray([1.5, 2.5])), [1.5, 2.5])


@pytest.mark.gpu
def test_torch_interop_both_ways():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    d = pymagma.from_dlpack(t)
    assert d.ptr == t.data_ptr()
    np.testing.assert_array_equal(d.get(), t.cpu().numpy())
    d2 = pymagma.asarray(t.T)  # through __cuda_array_interface__ / DLPack, no copy
    assert d2.ptr == t.data_ptr()
    back = torch.from_dlpack(d.T)
    assert back.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(back.cpu().numpy(), t.T.cpu().numpy())
    torch.testing.assert_close(torch.as_tensor(d, device="cuda"), t)  # torch reads __cuda_array_interface__
    if BF16 is not None:  # bfloat16 tensors need ml_dtypes on our side
        half = torch.linspace(-4, 4, 12, device="cuda").to(torch.bfloat16).reshape(3, 4)
        hd = pymagma.from_dlpack(half)
        assert hd.dtype.name == "bfloat16" and hd.ptr == half.data_ptr()
        np.testing.assert_array_equal(hd.get().astype(np.float32), half.float().cpu().numpy())
        assert torch.equal(torch.from_dlpack(hd.T), half.T)


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="cupy is not installed")
def test_cupy_interop_both_ways():
    import cupy

    c = cupy.arange(10, dtype=cupy.float64).reshape(2, 5)
    d = pymagma.asarray(c)
    assert d.ptr == c.data.ptr
    np.testing.assert_array_equal(d.get(), c.get())
    back = cupy.asarray(d.T)
    assert back.data.ptr == c.data.ptr
    np.testing.assert_array_equal(cupy.from_dlpack(d).get(), c.get())
