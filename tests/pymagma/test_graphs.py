"""CUDA graphs (pymagma.graphs) on the simulated device, which models stream capture as CUDA documents it (work
recorded, not run; forbidden operations fail and invalidate the capture; replay runs the recorded work in stream
order), with a gpu twin of the replay test."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import pymagma
from pymagma import dnn, graphs, kernels, linalg, memory, runtime, simulator
from pymagma.errors import DeviceMemoryError, GraphCaptureError


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    if request.param == "gpu":
        yield None
        return
    with simulator.simulated("full") as sim:
        yield sim


def _step(x, w, b):
    """A small network's forward: gemm, a bias kernel, a cuDNN activation and a reduction."""
    h = dnn.activation_forward(kernels.bias_add(x @ w, b), "tanh")
    return h, kernels.reduce("sum", h, axis=1)


def test_replay_equals_eager_bit_for_bit(device):
    rng = np.random.default_rng(0)
    w, b = pymagma.asarray(rng.standard_normal((5, 4)).astype(np.float32)), pymagma.asarray(np.ones(4, np.float32))
    x = pymagma.asarray(np.zeros((3, 5), np.float32))  # the static input
    with graphs.capture() as graph:
        h, s = _step(x, w, b)
    assert graph.launches == 0 and "ready" in repr(graph)
    for _ in range(5):
        batch = rng.standard_normal((3, 5)).astype(np.float32)
        x.set(batch)
        graph.launch()
        eager_h, eager_s = _step(pymagma.asarray(batch), w, b)
        np.testing.assert_array_equal(h.get(), eager_h.get())
        np.testing.assert_array_equal(s.get(), eager_s.get())
    assert graph.launches == 5


def test_the_graph_owns_its_memory_and_replays_allocate_nothing(device):
    x = pymagma.asarray(np.ones((4, 4), np.float32))
    before = memory.pool_stats()
    with graphs.capture() as graph:
        y = kernels.relu(x @ x)
    assert memory.pool_stats()["requests"] == before["requests"]  # the capture's arrays came from the graph's pool
    assert graph.pool.stats["requests"] >= 2  # x @ x and relu's output
    for _ in range(1000):
        graph.launch()
    np.testing.assert_array_equal(y.get(), np.full((4, 4), 4.0, np.float32))
    assert memory.pool_stats()["mallocs"] == before["mallocs"] and graph.pool.stats["mallocs"] == 2


@pytest.mark.parametrize("operation", ["get", "set", "asarray", "synchronize", "solve", "pageable copy"])
def test_what_cannot_be_captured_is_a_clear_error_and_spoils_the_capture(device, operation):
    a = pymagma.asarray(np.eye(3, dtype=np.float64) * 2)
    actions = {
        "get": lambda: a.get(),
        "set": lambda: a.set(np.zeros((3, 3))),
        "asarray": lambda: pymagma.asarray(np.ones(3)),
        "synchronize": lambda: pymagma.default_queue().synchronize(),
        "solve": lambda: linalg.solve(a, a),  # getrf returns info to the host at the call
        "pageable copy": lambda: runtime.memcpy_dtoh(np.empty(9), a.ptr, stream=pymagma.default_queue().stream),
    }
    with pytest.raises(GraphCaptureError) as caught:
        with graphs.capture():
            kernels.relu(a)
            actions[operation]()
    assert "CUDA graph" in str(caught.value)
    assert graphs.capturing() is None and not runtime.is_capturing(pymagma.default_queue().stream)
    np.testing.assert_array_equal((a @ a).get(), 4 * np.eye(3))  # the queue works again after the failed capture


def test_an_operation_caught_inside_the_block_still_invalidates_the_capture(device):
    a = pymagma.asarray(np.ones(4, np.float32))
    with pytest.raises(GraphCaptureError, match="cudaErrorStreamCaptureInvalidated"):
        with graphs.capture():
            kernels.relu(a)
            try:
                pymagma.default_queue().synchronize()
            except GraphCaptureError:
                pass  # swallowed: CUDA still invalidated the capture, and ending it says so


def test_replaying_a_graph_whose_memory_was_freed_is_an_error():
    with simulator.simulated("full"):
        x = pymagma.asarray(np.ones(8, np.float32))
        with graphs.capture() as graph:
            kernels.relu(kernels.relu(x))  # a temporary from the graph's pool, given back to it
        graph.pool.release_cached()  # its blocks freed under the graph
        with pytest.raises(DeviceMemoryError, match="memory freed since its capture"):
            graph.launch()


def test_captures_do_not_nest_and_a_destroyed_graph_does_not_launch():
    with simulator.simulated("full"):
        x = pymagma.asarray(np.ones(2, np.float32))
        with graphs.capture() as graph:
            kernels.relu(x)
            with pytest.raises(GraphCaptureError, match="already in progress"):
                with graphs.capture():
                    pass
        graph.destroy()
        with pytest.raises(GraphCaptureError, match="destroyed"):
            graph.launch()
        with pytest.raises(ValueError, match="capture mode"):
            with graphs.capture(mode="loose"):
                pass


def test_global_capture_forbids_another_threads_allocation_and_relaxed_allows_it():
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones(2, np.float32))
        errors = []

        def allocate():
            try:
                runtime.malloc(1 << 20)  # a fresh cudaMalloc on another thread (no pool involved)
            except GraphCaptureError as exc:
                errors.append(exc)

        for mode, refused in (("global", True), ("relaxed", False)):
            errors.clear()
            context = graphs.capture(mode=mode)
            try:
                with context:
                    kernels.relu(x)
                    worker = threading.Thread(target=allocate)
                    worker.start()
                    worker.join()
            except GraphCaptureError:
                assert refused  # the global capture was invalidated by the other thread's cudaMalloc
            assert bool(errors) == refused, mode
        assert not sim.runtime.captures


def test_a_destroyed_graphs_memory_is_freed_after_its_last_array_dies():
    """Blocks of arrays that outlive their graph go back to a closed pool, which frees them (no leak): the dying
    array's finalizer only queues the free (it may run inside a garbage collection), made at the next safe point,
    here the next allocation that reaches cudaMalloc."""
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones((4, 4), np.float32))
        with graphs.capture() as graph:
            y = kernels.relu(x @ x)
        pool, ptr = graph.pool, y.ptr
        graph.destroy()
        assert ptr in sim.runtime.blocks  # y still uses it
        del y
        pymagma.empty((12345,), np.float32)  # a size the pool has not cached
        assert ptr not in sim.runtime.blocks and not any(pool.free_blocks.values())


def test_a_graph_the_garbage_collector_takes_is_released_at_the_next_safe_point(monkeypatch):
    """A graph dropped in a reference cycle (as a failed replay step's can be) is collected wherever a collection
    runs: in the middle of a kernel the simulator runs, or of the context-variable update in ``np.errstate``.  Its
    finalizer makes no native call there (cudaFree waits for the device's queued work: run inside a kernel it would
    run the later kernels before that one had written its output); the graph and its memory are released at the
    next safe point."""
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones((4, 4), np.float32))
        with graphs.capture() as graph:
            kernels.relu(kernels.relu(x))  # a temporary cached in the graph's pool
            y = kernels.relu(x)
        graph.launch()
        graph.me = graph  # a cycle: only the collector frees it
        cached = graph.pool.cached_pointers()
        kept, handles, calls, collecting = y.ptr, set(sim.runtime.graphs), [], []
        assert cached and all(p in sim.runtime.blocks for p in cached)
        for name in ("cudaFree", "cudaGraphExecDestroy", "cudaGraphDestroy", "cudaDeviceSynchronize"):
            real = getattr(sim.runtime, name)
            monkeypatch.setattr(sim.runtime, name, lambda *a, _real=real, _name=name: (
                calls.append((_name, bool(collecting))), _real(*a))[1])

        def watch(phase, info):
            if phase == "start":
                collecting.append(1)
            else:
                collecting.clear()

        del graph
        gc.callbacks.append(watch)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(watch)
        assert calls == []  # nothing native inside the collection
        assert all(p in sim.runtime.blocks for p in cached) and set(sim.runtime.graphs) == handles
        memory.pool_stats()  # a safe point
        assert calls and not any(inside for _, inside in calls)
        assert not any(p in sim.runtime.blocks for p in cached) and not set(sim.runtime.graphs) & handles
        assert kept in sim.runtime.blocks  # y still uses its block
        np.testing.assert_array_equal(y.get(), np.ones((4, 4), np.float32))
        del y
        memory.pool_stats()
        assert kept not in sim.runtime.blocks


def test_running_out_of_memory_while_capturing_is_a_memory_error_not_a_spoiled_capture(monkeypatch):
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones(8, np.float32))
        blocks = len(sim.runtime.blocks)

        def out_of_memory(nbytes):
            return (runtime._rt().cudaError_t.cudaErrorMemoryAllocation, None)

        with pytest.raises(DeviceMemoryError):
            with graphs.capture():
                kernels.relu(x)
                monkeypatch.setattr(sim.runtime, "cudaMalloc", out_of_memory)
                kernels.relu(pymagma.empty((1 << 16,), np.float32))
        monkeypatch.undo()
        assert not sim.runtime.captures and len(sim.runtime.blocks) == blocks  # nothing leaked


def test_a_graph_made_on_the_simulator_is_freed_by_the_simulator_after_it_is_turned_off():
    if simulator.is_enabled():
        pytest.skip("the simulator is on for the whole session (PYMAGMA_SIMULATOR)")
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones(8, np.float32))
        with graphs.capture() as graph:
            kernels.relu(kernels.relu(x))  # a temporary cached in the graph's pool
        cached = graph.pool.cached_pointers()
        assert cached and all(p in sim.runtime.blocks for p in cached)
    graph.destroy()  # after disable: freed through the simulated runtime that made them, not the real one
    assert not any(p in sim.runtime.blocks for p in cached)


def test_what_the_garbage_collector_frees_during_a_capture_is_freed_after_it():
    """A graph, its arrays and page-locked buffers collected while another graph is captured (cudaFree and
    cudaFreeHost cannot be captured) are freed when that capture ends, and the capture stays valid."""
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones((4, 4), np.float32))
        with graphs.capture() as old:
            kept = kernels.relu(x)
        pinned = runtime.pinned_empty((64,), np.uint8)
        with graphs.capture() as graph:
            y = kernels.relu(x)
            blocks = len(sim.runtime.blocks)
            del old, kept, pinned
            gc.collect()
            assert len(sim.runtime.blocks) == blocks  # nothing freed inside the capture
        assert len(sim.runtime.blocks) == blocks - 2  # the old graph's block and the pinned buffer: freed after it
        graph.launch()
        np.testing.assert_array_equal(y.get(), np.ones((4, 4), np.float32))


def test_frees_held_back_wait_while_another_thread_captures():
    """A safe point reached on another thread (its run_deferred) makes no held-back free while this thread captures
    in global mode (that thread's cudaFree would spoil the capture); the free is made once the capture has ended."""
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.ones((4, 4), np.float32))
        with graphs.capture() as old:
            kept = kernels.relu(x)
        with graphs.capture() as graph:
            y = kernels.relu(x)
            blocks = len(sim.runtime.blocks)
            del old, kept
            gc.collect()  # the old graph's release: held back
            worker = threading.Thread(target=runtime.run_deferred)
            worker.start()
            worker.join()
            assert len(sim.runtime.blocks) == blocks  # nothing freed while this thread captures
        assert len(sim.runtime.blocks) == blocks - 1  # the old graph's pool block: freed after the capture
        graph.launch()
        np.testing.assert_array_equal(y.get(), np.ones((4, 4), np.float32))
