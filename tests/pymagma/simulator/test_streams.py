"""The simulated runtime's queued work when host code runs in the middle of it (a finalizer the garbage collector
runs inside a kernel's computation): a cudaFree or a synchronize made there neither runs the stream's later work
before the current work has finished nor drops memory that work still uses; the free is made once it is done."""

from __future__ import annotations

import gc

from pymagma.simulator.runtime import SimulatedCudart


def _stream(rt: SimulatedCudart) -> int:
    status, stream = rt.cudaStreamCreateWithFlags(0)
    assert int(status) == 0
    return stream


def test_a_free_inside_running_work_keeps_stream_order_and_waits_for_the_work():
    rt = SimulatedCudart()
    stream = _stream(rt)
    _, ptr = rt.cudaMalloc(16)
    order = []

    def first():  # a kernel whose computation triggers a collection that frees a block
        order.append("first starts")
        assert int(rt.cudaFree(ptr)[0]) == 0
        order.append(("first ends", ptr in rt.blocks))

    rt.submit(stream, first)
    rt.submit(stream, lambda: order.append(("second", ptr in rt.blocks)))
    assert int(rt.cudaStreamSynchronize(stream)[0]) == 0
    assert order == ["first starts", ("first ends", True), ("second", True)]
    assert ptr not in rt.blocks  # freed once the work queued before it ran


def test_a_synchronize_inside_running_work_runs_nothing_out_of_order():
    rt = SimulatedCudart()
    stream = _stream(rt)
    order = []

    def first():
        order.append(1)
        rt.cudaStreamSynchronize(stream)
        rt.cudaDeviceSynchronize()
        order.append(2)

    rt.submit(stream, first)
    rt.submit(stream, lambda: order.append(3))
    rt.cudaStreamSynchronize(stream)
    assert order == [1, 2, 3]


def test_a_free_inside_work_run_at_once_waits_for_it():
    """Work on the legacy stream runs at the call: a block freed in the middle of it stays until it ends."""
    rt = SimulatedCudart()
    _, ptr = rt.cudaMalloc(16)
    seen = []

    def work():
        rt.cudaFree(ptr)
        seen.append(ptr in rt.blocks)

    rt.submit(0, work)
    assert seen == [True] and ptr not in rt.blocks


def test_a_finalizer_collected_inside_running_work():
    """The real path: an object whose finalizer frees a block, in a reference cycle, collected by a garbage
    collection that runs in the middle of queued work; the stream's later work still sees the block."""
    rt = SimulatedCudart()
    stream = _stream(rt)
    _, ptr = rt.cudaMalloc(16)
    order = []

    class Holder:
        def __del__(self):
            rt.cudaFree(ptr)

    holder = Holder()
    holder.me = holder
    del holder

    def first():
        gc.collect()
        order.append(("first", ptr in rt.blocks))

    rt.submit(stream, first)
    rt.submit(stream, lambda: order.append(("second", ptr in rt.blocks)))
    rt.cudaStreamSynchronize(stream)
    assert order == [("first", True), ("second", True)] and ptr not in rt.blocks
