"""The host reads of device data the simulated runtime counts (``SimulatedCudart.host_reads``): every copy that brings
device memory to the host counts once, by call; uploads, device-to-device copies and kernels count nothing; MAGMA
routines that return a value computed on the device (a norm) count too."""

from __future__ import annotations

import numpy as np
import pytest

import pymagma
from pymagma import runtime as rt
from pymagma import simulator


@pytest.fixture
def sim():
    with simulator.simulated("full") as simulation:
        yield simulation


def _reads(sim, work) -> dict:
    before = dict(sim.runtime.host_reads)
    total = sim.runtime.host_reads.total()
    work()
    after = sim.runtime.host_reads
    got = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert sum(got.values()) == sim.runtime.host_reads.total() - total
    return got


def test_uploads_device_copies_and_device_math_read_nothing(sim):
    host = np.arange(12.0).reshape(3, 4)
    x = _reads(sim, lambda: None)
    assert x == {}
    made = {}
    assert _reads(sim, lambda: made.setdefault("a", pymagma.asarray(host))) == {}
    a = made["a"]
    assert _reads(sim, lambda: made.setdefault("b", (a * 2.0 + a).T.copy())) == {}
    ptr = rt.malloc(a.nbytes)
    assert _reads(sim, lambda: rt.memcpy_dtod(ptr, a.ptr, a.nbytes)) == {}
    assert _reads(sim, lambda: rt.memcpy_2d(ptr, 32, a.ptr, 32, 32, 3)) == {}
    rt.free(ptr)
    np.testing.assert_array_equal(made["b"].get(), (3 * host).T)


def test_each_copy_to_the_host_counts_once_by_call(sim):
    a = pymagma.asarray(np.arange(6.0))
    assert _reads(sim, a.get) == {"cudaMemcpy": 1}
    assert _reads(sim, lambda: float(a[2])) == {"cudaMemcpy": 1}
    out = np.empty(6)
    stream = rt.Stream()
    assert _reads(sim, lambda: rt.memcpy_dtoh(out, a.ptr, stream=stream)) == {"cudaMemcpyAsync": 1}
    stream.synchronize()
    np.testing.assert_array_equal(out, np.arange(6.0))
    rows = np.empty((2, 2))
    assert _reads(sim, lambda: rt.memcpy_2d_dtoh(rows, a.ptr, 24)) == {"cudaMemcpy2D": 1}
    np.testing.assert_array_equal(rows, [[0, 1], [3, 4]])
    assert _reads(sim, lambda: rt.memcpy_2d_dtoh(rows, a.ptr, 24, stream=stream)) == {"cudaMemcpy2DAsync": 1}


def test_a_copy_into_pinned_memory_counts_a_copy_of_the_pinned_buffer_does_not(sim):
    a = pymagma.asarray(np.arange(4.0))
    pinned = rt.pinned_empty(4, np.float64)
    assert _reads(sim, lambda: rt.memcpy_dtoh(pinned, a.ptr)) == {"cudaMemcpy": 1}
    back = rt.malloc(32)
    assert _reads(sim, lambda: rt.memcpy_htod(back, pinned)) == {}
    np.testing.assert_array_equal(rt.memcpy_dtoh(np.empty(4), back), np.arange(4.0))
    rt.free(back)


def test_a_magma_routine_returning_a_value_is_a_read(sim):
    a = pymagma.asarray(np.array([3.0, 4.0]))
    got = {}
    reads = _reads(sim, lambda: got.setdefault("n", pymagma.blas.nrm2(a)))
    assert reads == {"magma_dnrm2": 1}
    assert float(got["n"]) == pytest.approx(5.0)
