"""``pymagma.asarray`` of host data on the simulator: every supported dtype and shape (0-size, 0-d, strided,
Fortran-ordered) equals NumPy's own bytes; the one-frame upload of a C-contiguous array raises exactly what the
general path's helpers (``runtime.get_device``, ``runtime.memcpy_htod``, ``empty``) raise, and leaks no block."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pymagma
from pymagma import _native, dtypes, graphs, runtime, simulator
from pymagma.errors import CudaError, DeviceMemoryError, GraphCaptureError, NoDeviceError

DTYPES = [d for d in dtypes.SUPPORTED if d.kind != "V"]  # NumPy's own dtypes (bfloat16 needs ml_dtypes)


@pytest.fixture
def sim():
    with simulator.simulated() as simulation:
        yield simulation


def same_bytes(device: pymagma.DeviceArray, host: np.ndarray) -> None:
    got = device.get()
    assert got.dtype == host.dtype and got.shape == host.shape
    assert got.tobytes() == np.ascontiguousarray(host).tobytes()  # (bit for bit: NaNs and signed zeros included)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
       layout=st.sampled_from(["C", "F", "strided", "reversed"]))
def test_upload_equals_numpy_for_every_dtype_and_layout(data, dtype, shape, layout):
    with simulator.simulated():
        host = data.draw(hnp.arrays(dtype, shape))
        if layout == "F":
            host = np.asfortranarray(host)
        elif layout == "strided" and host.ndim:
            host = np.repeat(host, 2, axis=-1)[..., ::2]
        elif layout == "reversed" and host.ndim:
            host = host[::-1]
        out = pymagma.asarray(host)
        assert out.dtype == dtype and out.is_c_contiguous and out.device == runtime.get_device()
        same_bytes(out, host)
        assert pymagma.asarray(host, device=0).get().tobytes() == out.get().tobytes()


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2), ()])
def test_empty_and_scalar_uploads_make_no_copy_of_nothing(sim, shape, monkeypatch):
    host = np.zeros(shape, np.float32) if shape else np.array(2.5, np.float32)
    calls = []
    real = _native.current.cudart.cudaMemcpy
    monkeypatch.setattr(_native.current.cudart, "cudaMemcpy", lambda *a: calls.append(a) or real(*a))
    out = pymagma.asarray(host)
    assert len(calls) == (1 if host.size else 0)  # a 0-byte upload calls no cudaMemcpy (as runtime._copy)
    for dst, src, nbytes, kind in calls:  # (the simulator's flat address space copies whatever the kind says)
        assert (dst, src, nbytes) == (out.ptr, host.ctypes.data, host.nbytes)
        assert kind == _native.current.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    same_bytes(out, host)


def test_the_fast_path_and_the_general_path_agree(sim):
    host = np.arange(12, dtype=np.int16).reshape(3, 4)
    fast = pymagma.asarray(host)
    general = pymagma.asarray(host.tolist(), dtype=np.int16)  # (a list: numpy.asarray, then the same upload)
    assert fast.shape == general.shape and fast.strides == general.strides and fast.dtype == general.dtype
    assert fast.get().tobytes() == general.get().tobytes() == host.tobytes()


def _failing(name: str, code: str):
    """A cuda.bindings-shaped answer of a failing call ``name`` with error ``code``."""
    from cuda.bindings import runtime as rt

    status = getattr(rt.cudaError_t, code)
    return (lambda *args: (status,)) if name == "cudaMemcpy" else (lambda *args: (status, 0))


@pytest.mark.parametrize("code", ["cudaErrorInvalidValue", "cudaErrorLaunchFailure", "cudaErrorMemoryAllocation",
                                  "cudaErrorInsufficientDriver"])
def test_a_failing_copy_raises_what_memcpy_htod_raises_and_frees_its_block(sim, monkeypatch, code):
    host = np.arange(6, dtype=np.float32)
    target = pymagma.empty(6, np.float32)
    monkeypatch.setattr(_native.current.cudart, "cudaMemcpy", _failing("cudaMemcpy", code))
    with pytest.raises(Exception) as general:
        runtime.memcpy_htod(target.ptr, host)
    pool = _native.current.memory_pool
    free_before = sum(len(v) for v in pool.free_blocks.values())
    with pytest.raises(Exception) as fast:
        pymagma.asarray(host)
    assert type(fast.value) is type(general.value) and str(fast.value) == str(general.value)
    assert isinstance(fast.value, CudaError | DeviceMemoryError | NoDeviceError)
    assert "cudaMemcpy(HtoD)" in str(fast.value) and code in str(fast.value)
    del fast  # (the traceback holds the frame that held the block)
    assert sum(len(v) for v in pool.free_blocks.values()) == free_before + 1  # the block went back to the pool


@pytest.mark.parametrize("code", ["cudaErrorInvalidValue", "cudaErrorNoDevice"])
def test_a_failing_get_device_raises_what_get_device_raises(sim, monkeypatch, code):
    monkeypatch.setattr(_native.current.cudart, "cudaGetDevice", _failing("cudaGetDevice", code))
    with pytest.raises(Exception) as general:
        runtime.get_device()
    with pytest.raises(Exception) as fast:
        pymagma.asarray(np.ones(3, np.float32))
    assert type(fast.value) is type(general.value) and str(fast.value) == str(general.value)


def test_a_replaced_require_device_is_asked(sim, monkeypatch):
    pymagma.asarray(np.ones(2, np.float32))  # (the device count is read: only a replaced function asks again)

    def no_device():
        raise NoDeviceError("replaced")
    monkeypatch.setattr(runtime, "require_device", no_device)
    with pytest.raises(NoDeviceError, match="replaced"):
        pymagma.asarray(np.ones(2, np.float32))


def test_an_exhausted_pool_raises_numpys_words(sim, monkeypatch):
    pool = _native.current.memory_pool

    def exhausted(device, bucket):
        raise MemoryError("simulated exhaustion")
    monkeypatch.setattr(pool, "new_block", exhausted)
    monkeypatch.setattr(pool, "free_blocks", {})
    with pytest.raises(DeviceMemoryError) as general:
        pymagma.empty((7, 3), np.float64)
    with pytest.raises(DeviceMemoryError) as fast:
        pymagma.asarray(np.ones((7, 3)))
    assert str(fast.value) == str(general.value)
    assert "Unable to allocate" in str(fast.value) and "simulated exhaustion" in str(fast.value)


@pytest.mark.parametrize("shape", [(3,), (0,)])
def test_an_upload_during_a_capture_is_refused_by_name_before_any_allocation(sim, shape):
    with pytest.raises(GraphCaptureError, match=r"pymagma\.asarray of host data") as caught:
        with graphs.capture() as graph:
            pymagma.asarray(np.ones(shape, np.float32))
    assert graph.pool.stats["requests"] == 0 and "CUDA graph" in str(caught.value)  # (refused before allocating)


@pytest.mark.parametrize("device", [-1, 2**40, "0", 1.0])
def test_bad_devices_raise_as_before(sim, device):
    with pytest.raises((TypeError, ValueError)) as general:
        pymagma.empty(3, np.float32, device=device)
    with pytest.raises((TypeError, ValueError)) as fast:
        pymagma.asarray(np.ones(3, np.float32), device=device)
    assert type(fast.value) is type(general.value) and str(fast.value) == str(general.value)


def test_an_uploads_block_goes_back_to_the_pool_when_the_array_dies(sim):
    pool, host = _native.current.memory_pool, np.arange(6, dtype=np.float32)
    for _ in range(3):  # the first upload keeps the pool's look-up; the later ones take its inline path
        before = pool.stats
        x = pymagma.asarray(host)
        np.testing.assert_array_equal(x.get(), host)
        assert pool.stats["in_use_bytes"] == before["in_use_bytes"] + 512
        del x
        after = pool.stats
        assert after["in_use_bytes"] == before["in_use_bytes"] and after["requests"] == before["requests"] + 1
