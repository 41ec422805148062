"""pymagma.simulator as a mode of the library: activation (environment variable, enable/disable, context manager),
the MAGMA export policy (partial vs full), exact restoration of the real device layer, the info report, the checks
the simulated runtime and MAGMA make, and the kernel launcher's compiler handling."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _cudnn, _magma, _native, array, dnn, kernels, linalg, memory, queue, simulator
from pymagma import runtime as rt
from pymagma.errors import CudaError, DeviceMemoryError, MissingSymbolError
from pymagma.kernels import loader
from pymagma.simulator import kernels as sim_kernels
from pymagma.simulator.magma import AUX_FAMILIES, MODEL, MagmaCallError, provider_exports
from tests.conftest import examples

MODELLED = set(MODEL) | AUX_FAMILIES  # the MAGMA families the simulator models

pytestmark = pytest.mark.native
needs_compiler = pytest.mark.skipif(sim_kernels.compiler() is None, reason="no host C++ compiler (g++ or clang++)")


def _run_python(code: str, value: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYMAGMA_SIMULATOR=value)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300)


# ----------------------------------------------------------------------------------------------------- activation
@needs_compiler
def test_environment_variable_turns_it_on_at_import():
    done = _run_python("""
        import json
        import numpy as np
        import pymagma
        from pymagma import kernels, simulator
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
        da = pymagma.asarray(a)
        print(json.dumps({
            "mode": simulator.mode(),
            "round_trip": bool((da.get() == a).all()),
            "gemm": float(abs((da @ pymagma.asarray(b)).get() - a @ b).max()),
            "kernel": float(abs(kernels.add(da, da).get() - 2 * a).max()),
            "device": pymagma.runtime.device_properties()["name"],
            "report": str(pymagma.info()),
        }))
        """, "1")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["mode"] == "partial" and out["round_trip"] and out["device"] == "pymagma simulator"
    assert out["gemm"] < 1e-12 and out["kernel"] == 0
    assert "SIMULATOR ON (mode partial)" in out["report"]


def test_bad_environment_value_is_a_clear_error_at_import():
    done = _run_python("import pymagma", "yes")
    assert done.returncode != 0
    assert "ValueError: PYMAGMA_SIMULATOR='yes'" in done.stderr
    for allowed in ("1", "partial", "full", "0"):
        assert allowed in done.stderr.splitlines()[-1]


@pytest.mark.parametrize(("raw", "expected"), [("", None), ("0", None), ("1", "partial"), ("partial", "partial"),
                                               (" FULL ", "full"), (None, None)])
def test_environment_values(raw, expected):
    assert simulator.mode_from_environment({} if raw is None else {"PYMAGMA_SIMULATOR": raw}) == expected


@pytest.mark.parametrize("raw", ["2", "true", "fulll", "cpu"])
def test_other_environment_values_are_refused(raw):
    with pytest.raises(ValueError, match=f"PYMAGMA_SIMULATOR='{raw}'.*1 or partial.*full.*0 / empty"):
        simulator.mode_from_environment({"PYMAGMA_SIMULATOR": raw})


def test_modes_nest_and_restore():
    outer = simulator.mode()
    with simulator.simulated("full") as sim:
        assert simulator.is_enabled() and simulator.mode() == "full" and simulator.current() is sim
        with simulator.simulated("partial") as inner:
            assert inner is sim and simulator.mode() == "partial"  # the same device, another export policy
        assert simulator.mode() == "full" and sim.magma.exports is None
        assert simulator.enable("full") is sim  # enabling again changes nothing
    assert simulator.mode() == outer
    with pytest.raises(ValueError, match="one of .*'partial', 'full'"):
        simulator.enable("everything")


# ----------------------------------------------------------------------------------------------------- restoration
DEVICE_LAYER = (rt, _magma, _cudnn, queue, memory, kernels, loader, array, dnn, _native)


def _snapshot():
    return {m.__name__: dict(vars(m)) for m in DEVICE_LAYER} | {"cudnn lib": dict(vars(_cudnn.lib))}


@needs_compiler
def test_the_simulator_replaces_the_native_seam_and_nothing_else():
    """On: every native library object is the simulator's and no module attribute of the device layer changed
    (but the seam's ``current``).  Off: the real libraries are back and nothing else moved."""
    if simulator.is_enabled():
        pytest.skip("the simulator is on for the whole session (PYMAGMA_SIMULATOR)")
    before = _snapshot()
    with simulator.simulated("full") as sim:
        assert _native.current is sim.libraries and _native.current is not _native.real()
        assert isinstance(_native.current.cudart, simulator.runtime.SimulatedCudart)
        assert isinstance(_magma.library(), simulator.magma.SimulatedMagma)
        assert isinstance(_cudnn.library(), simulator.cudnn.SimulatedCudnn)
        assert isinstance(_native.current.launcher, simulator.kernels.Launcher)
        during = _snapshot()
        for where, names in before.items():
            moved = [n for n, v in names.items() if during[where].get(n) is not v and n != "current"]
            assert not moved, f"{where}: {moved} replaced by the simulator outside the seam"
        host = np.arange(6.0).reshape(2, 3)
        x = pymagma.asarray(host)
        np.testing.assert_array_equal(kernels.add(x @ x.T, 1.0).get(), host @ host.T + 1)
        del x
    after = _snapshot()
    for where, names in before.items():
        assert set(after[where]) == set(names), where
        changed = [n for n, v in names.items() if after[where][n] is not v]
        assert not changed, f"{where}: {changed} not restored"


# ----------------------------------------------------------------------------------------------------- export policy
def test_full_mode_exports_every_modelled_routine_and_cholesky_works():
    with simulator.simulated("full") as sim:
        exported = set(sim.magma.exported())
        assert exported == {n for n, s in _magma.SIGNATURES.items() if s.family in MODELLED}
        a = np.array([[4.0, 2.0], [2.0, 3.0]])
        np.testing.assert_allclose(linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-12)


def test_partial_mode_exports_what_the_provider_exports():
    exports, source = provider_exports(_magma.library() if not simulator.is_enabled()
                                       else simulator.current().real_magma)
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    with simulator.simulated("partial") as sim:
        modelled = {n for n, s in _magma.SIGNATURES.items() if s.family in MODELLED}
        if exports is None:  # no provider: partial is full
            assert set(sim.magma.exported()) == modelled and "no MAGMA provider" in sim.magma.source
            np.testing.assert_allclose(linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-12)
            return
        assert source in sim.magma.source
        if pymagma._libs.magma_provider().source == "torch":  # PyTorch's partial MAGMA 2.6.1 (known table)
            assert set(sim.magma.exported()) == modelled - _magma.torch_missing()
        if "magma_dpotrf_gpu" not in exports:
            with pytest.raises(MissingSymbolError, match="magma_dpotrf_gpu.*mode 'full'"):
                linalg.cholesky(a, method="native")
            np.testing.assert_allclose(linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-12)  # the hybrid driver
        else:
            np.testing.assert_allclose(linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-12)
        if "magma_dgetrf_gpu" in exports:  # the LU family (in every provider pymagma knows) runs as on a GPU
            b = np.array([1.0, 2.0])
            np.testing.assert_allclose(linalg.solve(a, b), np.linalg.solve(a, b), rtol=1e-12)


def test_hidden_families_are_not_exported():
    with simulator.simulated("full") as sim:
        sim.magma.hidden = {"magma_?potrf_gpu"}
        assert not sim.magma.has("magma_dpotrf_gpu") and "magma_dpotrf_gpu" in sim.magma.missing()
        with pytest.raises(MissingSymbolError, match="hidden"):
            _magma.initialized().magma_dpotrf_gpu  # noqa: B018
        sim.magma.reset()
        assert sim.magma.has("magma_dpotrf_gpu")


# ----------------------------------------------------------------------------------------------------- info
def test_info_says_whether_the_simulator_is_on():
    with simulator.simulated("full"):
        report = pymagma.info()
        assert report["simulator"]["enabled"] and report["simulator"]["mode"] == "full"
        assert report["cuda"]["devices"][0]["name"] == "pymagma simulator"
        assert report["cuda"]["devices"][0]["compute_capability"] == (9, 0)
        routines = report["simulator"]["magma_routines"]
        assert routines == len({n for n, s in _magma.SIGNATURES.items() if s.family in MODELLED})
        assert "SIMULATOR ON (mode full)" in str(report) and f"NumPy models of {routines} routines" in str(report)
    if not simulator.is_enabled():
        report = pymagma.info()
        assert not report["simulator"]["enabled"] and report["simulator"]["mode"] is None
        assert "simulator: off" in str(report)


# ----------------------------------------------------------------------------------------------------- MAGMA checks
def _gemm_args(m=2, n=2, k=2, ld=2, alpha=1.0, trans=_magma.MagmaNoTrans):
    buf = [np.zeros(8) for _ in range(3)]
    return [trans, _magma.MagmaNoTrans, m, n, k, ctypes.c_double(alpha), buf[0].ctypes.data, ld,
            buf[1].ctypes.data, ld, ctypes.c_double(0.0), buf[2].ctypes.data, ld, None], buf


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a[:-1], "13 arguments, the table has 14"),
    (lambda a: a[:2] + [2.0] + a[3:], r"magma_dgemm\(m\) got float"),
    (lambda a: [7] + a[1:], r"magma_dgemm\(transA\) = 7 is not a MAGMA enum"),
    (lambda a: a[:2] + [2**31] + a[3:], r"magma_dgemm\(m\) = 2147483648 does not fit magma_int_t"),
    (lambda a: a[:5] + [1.0] + a[6:], r"magma_dgemm\(alpha\) got float, expected c_double"),
])
def test_magma_calls_are_checked_against_the_tables(change, message):
    with simulator.simulated("full"):
        args, _ = _gemm_args()
        if _magma.MAGMA_INT is ctypes.c_int64 and "does not fit" in message:
            pytest.skip("ILP64: 2**31 fits")
        with pytest.raises(MagmaCallError, match=message):
            _magma.initialized().magma_dgemm(*change(args))


def test_a_short_leading_dimension_computes_nothing_and_is_recorded():
    """cuBLAS answers CUBLAS_STATUS_INVALID_VALUE for lda < m, which MAGMA's magma_dgemm drops: C is untouched."""
    with simulator.simulated("full") as sim:
        args, (_, _, c) = _gemm_args()
        c[:] = 7.0
        args[0:8] = [*args[:7], 1]
        _magma.initialized().magma_dgemm(*args)
        assert [(r.routine, r.arg, r.name, r.value, r.by) for r in sim.magma.xerbla_calls] == \
            [("magma_dgemm", 8, "ldda", 1, "cublas")]
        assert (c == 7.0).all()
        assert "argument 8 (ldda = 1)" in str(simulator.magma.take_rejected()[0])


@settings(max_examples=examples(20), deadline=None)
@given(m=st.integers(1, 4), n=st.integers(1, 4), k=st.integers(1, 4), alpha=st.floats(-2, 2), seed=st.integers(0, 99))
def test_raw_gemm_model_matches_numpy_in_column_major(m, n, k, alpha, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    with simulator.simulated("full"):
        A, B, C = np.asfortranarray(a), np.asfortranarray(b), np.zeros((m, n), order="F")
        _magma.initialized().magma_dgemm(_magma.MagmaNoTrans, _magma.MagmaNoTrans, m, n, k, ctypes.c_double(alpha),
                                         A.ctypes.data, m, B.ctypes.data, k, ctypes.c_double(0.0), C.ctypes.data,
                                         m, None)
    np.testing.assert_allclose(C, alpha * a @ b, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------------------- runtime checks
def test_memory_is_host_memory_with_bounds_checks():
    with simulator.simulated("full") as sim:
        ptr = rt.malloc(16)
        assert ptr in sim.runtime.blocks
        rt.memcpy_htod(ptr, np.arange(2.0))
        np.testing.assert_array_equal(rt.memcpy_dtoh(np.empty(2), ptr), [0.0, 1.0])
        with pytest.raises(DeviceMemoryError, match="24 bytes at offset 0 overrun the simulated allocation of 16"):
            rt.memcpy_htod(ptr, np.arange(3.0))
        with pytest.raises(DeviceMemoryError, match="overrun"):
            rt.memset(ptr + 8, 0, 9)
        with pytest.raises(ValueError, match="device 1 does not exist"):
            rt.set_device(1)
        free, total = rt.mem_get_info()
        assert 0 < free <= total
        start = rt.Event().record()
        rt.Stream().synchronize()
        assert start.elapsed_ms(rt.Event().record()) >= 0
        with pytest.raises(CudaError, match="cudaErrorInvalidResourceHandle"):  # as CUDA documents: never recorded
            start.elapsed_ms(rt.Event())
        rt.free(ptr)
        assert ptr not in sim.runtime.blocks


def test_work_on_a_created_stream_runs_when_something_orders_it():
    """cudaMemcpyAsync on a created stream completes only by the sync points CUDA documents: the stream's or an
    event's synchronize, a wait on the event (the waiting stream's later work), a synchronous legacy-stream copy
    (blocking streams only), a device synchronize."""
    with simulator.simulated("full"):
        dev = pymagma.zeros(4, np.float64)
        host = rt.pinned_empty(4, np.float64)
        s = rt.Stream()
        rt.memcpy_htod(dev.ptr, np.arange(4.0), stream=s)
        rt.memcpy_dtoh(host, dev.ptr, stream=s)
        event = rt.Event(timing=False).record(s)
        rt.memcpy_htod(dev.ptr, np.full(4, 7.0), stream=s)  # after the event
        assert not host.any()
        event.synchronize()
        np.testing.assert_array_equal(host, np.arange(4.0))
        assert rt.memcpy_dtoh(np.empty(4), dev.ptr)[0] == 7  # the legacy stream waits for blocking streams

        quiet = rt.Stream(non_blocking=True)
        rt.memset(dev.ptr, 0, 8, stream=quiet)
        assert dev.get()[0] == 7  # a non-blocking stream is not waited for by the legacy stream
        rt.synchronize()
        assert dev.get()[0] == 0

        first, second = rt.Stream(), rt.Stream()
        rt.memcpy_2d_htod(dev.ptr, 16, np.array([[1.0], [2.0]]), stream=first)  # rows 16 bytes apart: dev[0], dev[2]
        second.wait(rt.Event(timing=False).record(first))
        out = rt.memcpy_2d_dtoh(rt.pinned_empty((2, 1), np.float64), dev.ptr, 16, stream=second)
        assert not out.any()
        rt.Event(timing=False).record(second).synchronize()  # runs `first` up to its event, then the copy
        np.testing.assert_array_equal(out[:, 0], [1.0, 2.0])
        with pytest.raises(DeviceMemoryError, match="overrun"):
            rt.memcpy_2d_dtoh(np.zeros((2, 1)), dev.ptr, 1 << 20, stream=second)  # past the block


def test_async_copies_into_pageable_memory_return_when_done():
    """CUDA's documented exception: cudaMemcpyAsync (and 2-D) from the device into pageable host memory returns
    only once the copy has completed; into pinned memory it is enqueued like any other work."""
    with simulator.simulated("full"):
        dev = pymagma.asarray(np.arange(1.0, 5.0))
        s = rt.Stream()
        rt.memset(dev.ptr, 0, 8, stream=s)
        np.testing.assert_array_equal(rt.memcpy_dtoh(np.empty(4), dev.ptr, stream=s), [0, 2, 3, 4])
        rt.memset(dev.ptr + 16, 0, 8, stream=s)
        np.testing.assert_array_equal(rt.memcpy_2d_dtoh(np.empty((2, 1)), dev.ptr + 8, 8, stream=s)[:, 0], [2, 0])
        rt.memset(dev.ptr, 0, 32, stream=s)
        pinned = rt.pinned_empty(4, np.float64)
        pinned[:] = -1
        rt.memcpy_dtoh(pinned, dev.ptr, stream=s)
        assert (pinned == -1).all()
        s.synchronize()
        assert not pinned.any()


def test_magma_reads_host_arguments_when_called_on_a_created_queue():
    """magmablas_?laswp packs its host pivots into the kernel's arguments at the call, so the caller may reuse them
    at once (the simulator runs such a routine at the call, after the queue's earlier work)."""
    with simulator.simulated("full"):
        q = pymagma.Queue(0)
        rows = np.arange(6.0).reshape(3, 2)
        x = pymagma.asarray(rows)
        ipiv = (_magma.MAGMA_INT * 3)(3, 3, 3)  # 1-based: swap rows 1<->3, then 2<->3
        _magma.initialized().magmablas_dlaswp(2, x.ptr, 2, 1, 3, ipiv, 1, q.handle)
        ipiv[:] = [1, 2, 3]  # no swaps: must not matter any more
        q.synchronize()
        np.testing.assert_array_equal(x.get(), rows[[2, 0, 1]])


def test_queue_synchronize_reports_a_failed_stream_as_cuda_error():
    """magma_queue_sync only prints a failure of the queue's work; Queue.synchronize raises it."""
    def failed(self):
        raise CudaError(700, "cudaErrorIllegalAddress", "an illegal memory access was encountered",
                        "cudaStreamSynchronize")

    with simulator.simulated("full"):
        q = pymagma.Queue(0)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rt.Stream, "synchronize", failed)
            with pytest.raises(CudaError, match="cudaErrorIllegalAddress"):
                q.synchronize()


def test_a_destroyed_queue_destroys_the_stream_it_made():
    """magma_queue_destroy destroys the stream magma_queue_create made (its work still runs), not a borrowed one."""
    with simulator.simulated("full") as sim:
        q = pymagma.Queue(0)
        x = pymagma.asarray(np.ones(2))
        _magma.initialized().magma_dscal(2, ctypes.c_double(3.0), x.ptr, 1, q.handle)
        made = q.stream
        assert made in sim.runtime.work
        q._finalizer()
        assert made not in sim.runtime.work
        np.testing.assert_array_equal(np.ctypeslib.as_array((ctypes.c_double * 2).from_address(x.ptr)), [3, 3])
        borrowed = rt.Stream()
        queue.Queue.from_stream(borrowed)._finalizer()
        assert borrowed.handle in sim.runtime.work


def test_queue_events_are_made_on_the_queues_device():
    """cudaEventRecord needs the event and the stream in one context: a queue of device 1 records with device 1
    current, whatever the caller's device (cudaStreamWaitEvent may wait across devices)."""

    with simulator.simulated("full") as sim, pytest.MonkeyPatch.context() as mp:
        mp.setattr(sim.runtime, "device_count", 2)
        mp.delattr(sim.libraries, "device_count", raising=False)  # read once per set of libraries
        q, made = pymagma.Queue(device=1), []

        class Probe(rt.Event):
            def __init__(self, timing=True):
                made.append(rt.get_device())
                super().__init__(timing)

        mp.setattr(rt, "Event", Probe)
        q.record_event()
        assert made == [1] and rt.get_device() == 0


def test_cached_pinned_buffers_are_freed_outside_the_pool_lock():
    """Dropping the cached pinned buffers runs cudaFreeHost (a device-wide wait, and any finalizer the garbage
    collector runs meanwhile, such as a DeviceArray going back to the pool): never with the pool's lock held."""
    with simulator.simulated("full"):
        pool, seen = memory._pool(), []
        with memory.pinned_buffer(100) as buffer:
            weakref.finalize(buffer.base, lambda: seen.append(pool.lock.locked()))
        del buffer
        memory.empty_cache()
        assert seen == [False]


def test_pinned_allocation_failure_releases_the_cache_and_retries(monkeypatch):
    with simulator.simulated("full"):
        with memory.pinned_buffer(5000):
            pass
        real, calls = rt.pinned_empty, []

        def pinned_empty(nbytes, dtype):
            calls.append(len(memory._pool().free_pinned[memory.bucket_size(5000)]))
            if len(calls) == 1:
                raise DeviceMemoryError("cudaMallocHost: cudaErrorMemoryAllocation")
            return real(nbytes, dtype)

        monkeypatch.setattr(rt, "pinned_empty", pinned_empty)
        with memory.pinned_buffer(9000) as b:
            assert b.size == 9000
        assert calls == [1, 0]  # the second try after the cached buffer was dropped


def test_pinned_buffers_are_cached_by_the_pool():
    with simulator.simulated("full"):
        with memory.pinned_buffer(1000) as a:
            assert a.dtype == np.uint8 and a.shape == (1000,)
            a[:] = 1
        with memory.pinned_buffer(1000) as b, memory.pinned_buffer(1000) as c:
            assert b.ctypes.data == a.ctypes.data != c.ctypes.data  # the cached one, then a new one
        memory.empty_cache()
        with memory.pinned_buffer(0) as d:
            assert d.size == 0


def test_magma_blas_on_a_created_queue_runs_in_queue_order():
    with simulator.simulated("full"):
        q = pymagma.Queue(0)
        assert q.stream  # a stream of its own, as magma_queue_create makes
        x = pymagma.asarray(np.ones(3))
        memory_now = np.ctypeslib.as_array((ctypes.c_double * 3).from_address(x.ptr))  # the device's view
        scal = _magma.initialized().magma_dscal
        scal(3, ctypes.c_double(2.0), x.ptr, 1, q.handle)
        host = rt.pinned_empty(3, np.float64)
        rt.memcpy_dtoh(host, x.ptr, stream=q.stream)
        done = q.record_event()
        scal(3, ctypes.c_double(2.0), x.ptr, 1, q.handle)  # after the event
        assert not host.any() and (memory_now == 1).all()  # nothing has run yet
        done.synchronize()
        np.testing.assert_array_equal(host, [2.0] * 3)
        assert (memory_now == 2).all()
        main = pymagma.default_queue()
        assert main.stream in simulator.current().runtime.work  # a created stream too: waiting runs nothing yet
        main.wait_event(q.record_event())
        assert (memory_now == 2).all()
        main.synchronize()  # the default queue's work, and before it q's
        assert (memory_now == 4).all()


def test_a_queue_reading_the_default_queues_data_needs_its_event():
    """The default queue has a blocking stream of its own, as magma_queue_create makes on a GPU: a second queue that
    copies out what it produced without waiting for its event copies stale data; with wait_event the result."""
    with simulator.simulated("full"):
        main, q = pymagma.default_queue(), pymagma.Queue(0)
        x = pymagma.asarray(np.ones(3))
        _magma.initialized().magma_dscal(3, ctypes.c_double(2.0), x.ptr, 1, main.handle)
        stale, fresh = rt.pinned_empty(3, np.float64), rt.pinned_empty(3, np.float64)
        rt.memcpy_dtoh(stale, x.ptr, stream=q.stream)  # no wait: the scal is still pending on the default queue
        q.synchronize()
        np.testing.assert_array_equal(stale, [1.0] * 3)
        q.wait_event(main.record_event())
        rt.memcpy_dtoh(fresh, x.ptr, stream=q.stream)
        q.synchronize()
        np.testing.assert_array_equal(fresh, [2.0] * 3)
        np.testing.assert_array_equal(x.get(), [2.0] * 3)


@needs_compiler
def test_kernels_and_cudnn_calls_run_in_their_streams_order():
    """A kernel launch and a cuDNN call are queued on their stream (the default queue's, which the cuDNN handle is
    bound to): the device memory changes only once something orders them, here the legacy-stream copy of get()."""
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.array([-1.0, 2.0], np.float32))
        y = kernels.unary("negative", x)
        z = dnn.activation_forward(y, "relu")
        memory_now = np.ctypeslib.as_array((ctypes.c_float * 2).from_address(z.ptr))
        assert sim.runtime.work[pymagma.default_queue().stream].pending  # neither has run yet
        np.testing.assert_array_equal(z.get(), [1.0, 0.0])
        np.testing.assert_array_equal(memory_now, [1.0, 0.0])
        assert not sim.runtime.work[pymagma.default_queue().stream].pending


# ----------------------------------------------------------------------------------------------------- kernels
def test_no_host_compiler_is_a_clear_error_on_first_launch(tmp_path):
    with simulator.simulated("full"), pytest.MonkeyPatch.context() as mp:  # undone before the simulator is
        mp.setattr(sim_kernels.shutil, "which", lambda name: None)
        mp.setattr(simulator.current().libraries, "launcher", sim_kernels.Launcher(tmp_path))  # nothing compiled
        x = pymagma.zeros(3)  # memory works without a compiler
        with pytest.raises(sim_kernels.SimulatorError, match=r"g\+\+ or clang\+\+.*apt-get install g\+\+"):
            kernels.add(x, x)
        assert "a host C++ compiler (the simulator's kernels)" in {m["what"] for m in pymagma.info()["missing"]}


def test_launch_configuration_and_driver_path_are_checked():
    with simulator.simulated("full"):
        with pytest.raises(ValueError, match="grid 1, block 0"):
            kernels.launch("elementwise", "fill<float>", 0, 0, 1, 0, [])
        with pytest.raises(KeyError, match="no kernel program 'nope'"):
            kernels.launch("nope", "x", 0, 0, 1, 1, [])
        with pytest.raises(sim_kernels.SimulatorError, match="never through NVRTC"):
            loader.loaded_program("elementwise", 0)


@needs_compiler
def test_compiled_programs_are_cached_on_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("PYMAGMA_CACHE", str(tmp_path))
    assert sim_kernels.cache_dir() == tmp_path / "simulator"
    sim_kernels.build("random")
    built = list((tmp_path / "simulator").glob("random-*.so"))
    assert len(built) == 1 and not list((tmp_path / "simulator").glob("*.cpp"))

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(sim_kernels.subprocess, "run", no_compiler)
    assert sim_kernels.build("random").pm_launch is not None  # from the cache


def test_concurrent_builds_of_a_program_compile_it_once(monkeypatch, tmp_path):
    """Builders sharing a cold cache (parallel test workers, threads) wait on the program's lock file: one compiles,
    the others load its library."""
    import threading

    monkeypatch.setenv("PYMAGMA_CACHE", str(tmp_path))
    sim_kernels._compiler_identity(sim_kernels.compiler())  # its --version call is not a compile
    compiles, run = [], sim_kernels.subprocess.run
    monkeypatch.setattr(sim_kernels.subprocess, "run", lambda *a, **k: compiles.append(a) or run(*a, **k))
    libraries = []
    builders = [threading.Thread(target=lambda: libraries.append(sim_kernels.build("reductions"))) for _ in range(3)]
    for builder in builders:
        builder.start()
    for builder in builders:
        builder.join()
    assert len(libraries) == 3 and len(compiles) == 1
    assert len(list((tmp_path / "simulator").glob("reductions-*.so"))) == 1


def test_current_device_is_per_thread_and_queues_work(monkeypatch):
    import threading


    with simulator.simulated("full") as sim, pytest.MonkeyPatch.context() as mp:
        mp.setattr(sim.runtime, "device_count", 2)
        mp.delattr(sim.libraries, "device_count", raising=False)  # read once per set of libraries
        assert rt.device_count() == 2 and rt.get_device() == 0
        with rt.on_device(1):
            assert rt.get_device() == 1
            seen = []
            worker = threading.Thread(target=lambda: seen.append(rt.get_device()))
            worker.start()
            worker.join()
            assert seen == [0]  # a new thread starts on device 0, as in CUDA
            x = pymagma.zeros(2)
        assert rt.get_device() == 0 and x.device == 1 and x.queue.device == 1
        stream = rt.Stream()
        q = queue.Queue.from_stream(stream)
        assert q.stream == stream.handle and q.device == 0
        q.synchronize()
        assert pymagma.Queue(device=1).device == 1


def test_every_barrier_helper_of_common_cuh_marks_its_programs_as_using_barriers():
    """The emulation runs a program's threads one after another unless it meets at barriers: a helper of
    common.cuh that calls __syncthreads must be listed, or a program using it would run without them."""
    import re

    from pymagma.kernels import programs
    from pymagma.simulator import kernels as simulated_kernels

    text = programs.read_text("common.cuh")
    helpers = set()
    for match in re.finditer(r"__device__[^(;{]*?\b(\w+)\s*\(", text):
        body = text[match.end():text.find("\n}\n", match.end())]
        if "__syncthreads" in body:
            helpers.add(match.group(1))
    assert "pm_block_reduce" in helpers
    assert helpers <= set(simulated_kernels.BARRIER_CALLS)
