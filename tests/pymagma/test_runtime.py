"""CUDA runtime wrapper, memory pool and queues: error mapping and the no-GPU behaviour (here), real use on a GPU."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from cuda.bindings import runtime as rt
from hypothesis import given
from hypothesis import strategies as st

import pymagma
from pymagma import _native, memory, runtime
from pymagma.errors import CudaError, DeviceMemoryError, NoDeviceError
from tests.conftest import gpu_available

HAS_GPU = gpu_available()[0]
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")


# ----------------------------------------------------------------------------------------------------- check()
def test_check_unpacks_values():
    ok = rt.cudaError_t.cudaSuccess
    assert runtime.check((ok,)) is None
    assert runtime.check((ok, 7)) == 7
    assert runtime.check((ok, 1, 2)) == (1, 2)
    assert runtime.check(ok) is None


@pytest.mark.parametrize(("name", "error"), [
    ("cudaErrorInvalidValue", CudaError), ("cudaErrorLaunchFailure", CudaError),
    ("cudaErrorInsufficientDriver", NoDeviceError), ("cudaErrorNoDevice", NoDeviceError),
    ("cudaErrorMemoryAllocation", DeviceMemoryError),
])
def test_check_maps_errors(name, error):
    code = getattr(rt.cudaError_t, name)
    with pytest.raises(error) as err:
        runtime.check((code, None), "cudaSomething")
    assert "cudaSomething" in str(err.value) and name in str(err.value)
    if error is CudaError:
        assert err.value.code == int(code) and err.value.name == name and err.value.text


# ----------------------------------------------------------------------------------------------------- no GPU
@no_gpu_only
def test_device_count_is_zero_without_a_device():
    assert runtime.device_count() == 0
    assert runtime.no_device_reason()


@no_gpu_only
@pytest.mark.parametrize("call", [
    runtime.require_device, runtime.get_device, lambda: runtime.malloc(16), lambda: runtime.set_device(0),
    runtime.Stream, runtime.Event, lambda: memory.alloc(16), lambda: pymagma.empty((2, 3)),
    lambda: pymagma.zeros(4), lambda: pymagma.asarray(np.ones(3)), pymagma.default_queue, pymagma.Queue,
    lambda: runtime.pinned_empty(8),
])
def test_device_work_without_a_device_raises_no_device_error(call):
    with pytest.raises(NoDeviceError, match="no usable CUDA device"):
        call()


def test_bad_sizes_are_rejected_before_any_cuda_call():
    with pytest.raises(ValueError, match="nbytes"):
        runtime.malloc(-1)
    with pytest.raises(ValueError, match="nbytes"):
        memory.bucket_size(-5)


# ----------------------------------------------------------------------------------------------------- pool sizing
@given(st.integers(0, 1 << 34))
def test_bucket_sizes_cover_the_request_with_bounded_waste(n):
    b = memory.bucket_size(n)
    assert b >= n
    if n == 0:
        assert b == 0
    elif n <= 1 << 20:
        assert b % memory.ALIGNMENT == 0 and b - n < memory.ALIGNMENT
    else:
        assert b - n <= n // 8 + 1  # at most 12.5% waste for large blocks
        assert b % 512 == 0


@given(st.integers(0, 1 << 30), st.integers(0, 1 << 30))
def test_bucket_sizes_are_monotonic(a, b):
    if a <= b:
        assert memory.bucket_size(a) <= memory.bucket_size(b)


def test_pool_allocates_and_frees_on_the_requested_device(monkeypatch):
    """With two (simulated) devices and device 0 current, memory for device 1 is cudaMalloc'ed and cudaFree'd while
    device 1 is current, and device 0 is current again afterwards."""
    current, log = {"device": 0}, []
    monkeypatch.setattr(runtime, "require_device", lambda: 2)
    monkeypatch.setattr(runtime, "get_device", lambda: current["device"])
    monkeypatch.setattr(runtime, "set_device", lambda d: current.update(device=int(d)))
    monkeypatch.setattr(runtime, "malloc", lambda n: log.append(("malloc", current["device"], n)) or 0x1000)
    monkeypatch.setattr(runtime, "free", lambda ptr: log.append(("free", current["device"], ptr)))
    monkeypatch.setattr(_native.current, "memory_pool", memory.Pool())
    block = memory.alloc(100, device=1)
    assert (block.device, log, current["device"]) == (1, [("malloc", 1, 512)], 0)
    block.free()
    assert memory.empty_cache() == 512
    assert (log[-1], current["device"]) == (("free", 1, 0x1000), 0)


def test_on_device_binds_a_context_once_per_thread(monkeypatch):
    """cudaGetDevice reports device 0 on a fresh thread before any context is bound there; the first on_device of
    each thread sets the device anyway (binding its primary context for the driver API), later ones do not."""
    sets = []
    monkeypatch.setattr(runtime, "_thread", threading.local())  # leave no "bound" flag behind
    monkeypatch.setattr(runtime, "require_device", lambda: 2)
    monkeypatch.setattr(runtime, "get_device", lambda: sets[-1] if sets else 0)
    monkeypatch.setattr(runtime, "set_device", lambda d: sets.append(int(d)))

    def work():
        for _ in range(3):
            with runtime.on_device(0):
                pass

    for _ in range(2):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert sets == [0, 0]  # once per thread, though device 0 was already "current"
    sets.clear()
    with runtime.on_device(1):
        assert runtime.get_device() == 1
    assert sets == [1, 0]  # switched and restored


# ----------------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_device_properties_and_streams():
    assert runtime.device_count() >= 1
    props = runtime.device_properties()
    assert props["total_memory"] > 0 and props["compute_capability"][0] >= 3
    s = runtime.Stream()
    e1, e2 = runtime.Event().record(s), runtime.Event()
    host = np.arange(1000, dtype=np.float32)
    ptr = runtime.malloc(host.nbytes)
    runtime.memcpy_htod(ptr, host, stream=s)
    e2.record(s)
    s.synchronize()
    assert e1.elapsed_ms(e2) >= 0
    back = runtime.memcpy_dtoh(np.empty_like(host), ptr)
    runtime.free(ptr)
    np.testing.assert_array_equal(back, host)


@pytest.mark.gpu
def test_async_2d_copies_ordered_by_events_across_queues():
    """A column-major block out through the transfer queue after the default queue's write, and back in."""
    main, side = pymagma.default_queue(), pymagma.queue.transfer_queue()
    assert side is pymagma.queue.transfer_queue() and side.stream != main.stream
    d = pymagma.asarray(np.arange(20.0).reshape(4, 5))  # C-ordered 4 x 5: as column-major, 5 x 4 with ld 5
    host = runtime.pinned_empty((3, 2), np.float64)  # columns 1..3, rows 2..3 of the column-major view
    side.wait_event(main.record_event())
    runtime.memcpy_2d_dtoh(host, d.ptr + (5 + 2) * 8, 5 * 8, stream=side.stream)
    side.record_event().synchronize()
    np.testing.assert_array_equal(host, np.arange(20.0).reshape(4, 5)[1:4, 2:4])
    host *= -1
    runtime.memcpy_2d_htod(d.ptr + (5 + 2) * 8, 5 * 8, host, stream=main.stream)
    main.synchronize()
    want = np.arange(20.0).reshape(4, 5)
    want[1:4, 2:4] *= -1
    np.testing.assert_array_equal(d.get(), want)


@pytest.mark.gpu
def test_pinned_buffers_round_trip():
    pinned = runtime.pinned_empty((3, 5), np.float64)
    pinned[...] = np.arange(15).reshape(3, 5)
    d = pymagma.empty((3, 5), np.float64)
    runtime.memcpy_htod(d.ptr, pinned)
    np.testing.assert_array_equal(d.get(), pinned)


@pytest.mark.gpu
def test_memory_returns_to_baseline_after_many_cycles():
    gc.collect()
    memory.empty_cache()
    free0, _ = runtime.mem_get_info()
    stats0 = memory.pool_stats()
    for i in range(1000):
        a = pymagma.empty((256 + i % 7, 33), np.float32)
        del a
    gc.collect()
    stats = memory.pool_stats()
    assert stats["in_use_bytes"] == stats0["in_use_bytes"]
    assert stats["hits"] - stats0["hits"] >= 990  # the pool served the cycles from its cache
    memory.empty_cache()
    free1, _ = runtime.mem_get_info()
    assert abs(free1 - free0) < (4 << 20)


@pytest.mark.gpu
def test_queues():
    q = pymagma.default_queue()
    assert q is pymagma.default_queue()
    assert q.handle.value and q.stream
    q.synchronize()
    s = runtime.Stream()
    q2 = pymagma.Queue.from_stream(s)
    assert q2.stream == s.handle
    q2.synchronize()


@no_gpu_only
@pytest.mark.parametrize("call", [
    lambda: runtime.malloc(64), lambda: runtime.free(0x1000), lambda: runtime.malloc_host(64),
    lambda: runtime.free_host(0x1000), lambda: runtime.memcpy_htod(0x1000, np.ones(4)),
    lambda: runtime.memcpy_htod(0x1000, np.ones(4), stream=5), lambda: runtime.memcpy_dtoh(np.ones(4), 0x1000),
    lambda: runtime.memcpy_dtod(0x1000, 0x2000, 16), lambda: runtime.memcpy_2d(0x1000, 32, 0x2000, 64, 32, 3),
    lambda: runtime.memcpy_2d(0x1000, 32, 0x2000, 64, 32, 3, stream=5), lambda: runtime.memset(0x1000, 0, 8),
    lambda: runtime.memcpy_2d_dtoh(np.ones((3, 4)), 0x1000, 64),
    lambda: runtime.memcpy_2d_dtoh(np.ones((3, 4)), 0x1000, 64, stream=5),
    lambda: runtime.memcpy_2d_htod(0x1000, 64, np.ones((3, 4))),
    lambda: runtime.memcpy_2d_htod(0x1000, 64, np.ones((3, 4)), stream=5),
    lambda: runtime.memset(0x1000, 0, 8, stream=5), lambda: runtime.Stream(non_blocking=True), runtime.Event,
    lambda: runtime.Stream(handle=5).synchronize(), runtime.get_device, lambda: runtime.set_device(0),
    runtime.synchronize, runtime.mem_get_info, lambda: runtime.device_properties(0),
])
def test_wrappers_pass_cuda_bindings_valid_arguments(call, monkeypatch):
    """With the device check bypassed, every wrapper reaches cuda.bindings with arguments it accepts: the call
    then fails only for lack of a driver (NoDeviceError), never with a TypeError from a wrong argument type."""
    monkeypatch.setattr(runtime, "require_device", lambda: 1)
    with pytest.raises(NoDeviceError):
        call()
