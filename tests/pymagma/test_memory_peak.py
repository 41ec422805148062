"""``pymagma.memory.track_peak``: the most device bytes in use over a block, exact whether a block comes from the
cache (through the pool's inline hit paths) or from cudaMalloc, and no tracking work on the hot path outside a
block."""

from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np
import pytest

from pymagma import array, memory, simulator

F32 = np.dtype(np.float32)


@pytest.fixture
def pool():
    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            yield pool


def test_a_known_sequence_reports_its_exact_peak(pool):
    warm = [memory.Allocation.trusted(4096, 0), array._empty((2048,), F32, 0)]  # 4096 and 8192 bytes
    del warm  # both cached: the peak below is reached by cache hits, through the two inline hit paths
    assert pool.stats["in_use_bytes"] == 0 and pool.stats["cached_bytes"] == 12288
    before = pool.stats
    with memory.track_peak() as peak:
        assert (peak.start_bytes, peak.peak_bytes) == (0, 0)
        a = memory.Allocation.trusted(4000, 0)  # hit (4096): in use 4096
        b = array._empty((2000,), F32, 0)  # hit (8192): 12288, the peak
        del a  # 8192
        c = memory.alloc(1000)  # miss, cudaMalloc (1024): 9216
        del b, c  # 0
        d = array._empty((256,), F32, 0)  # the 1024 block again: 1024
        assert peak.peak_bytes == 12288
        peak.reset()
        assert (peak.start_bytes, peak.peak_bytes) == (1024, 1024)
        e = array._empty((3000,), F32, 0)  # 12000 -> 12288, the cached 8192 too small: a cudaMalloc, 13312
        del d, e
    after = pool.stats
    assert peak.peak_bytes == 13312 and peak.start_bytes == 1024
    assert {k: after[k] - before[k] for k in ("requests", "hits", "mallocs")} == {"requests": 5, "hits": 3,
                                                                                "mallocs": 2}
    assert after["in_use_bytes"] == 0


def test_the_peak_is_reached_at_a_cudamalloc_and_blocks_nest(pool):
    with memory.track_peak() as outer:
        a = array._empty((1 << 18,), F32, 0)  # 1 MiB, cudaMalloc
        with memory.track_peak() as inner:
            assert inner.start_bytes == 1 << 20
            b = memory.Allocation.trusted(1 << 19, 0)  # 512 KiB more
            del b
        c = memory.alloc(1 << 20)  # 2 MiB in use: the outer block's peak, after the inner one closed
        del a, c
    assert inner.peak_bytes == (1 << 20) + (1 << 19)
    assert outer.peak_bytes == 2 << 20


def test_outside_a_block_the_hot_paths_never_reach_the_tracked_path(pool, monkeypatch):
    with memory.track_peak():
        pass
    assert type(pool) is memory.Pool and type(pool.free_blocks) is defaultdict and not pool._trackers
    array._empty((64,), F32, 0)  # a block in the cache (the array dies at once)
    calls = []
    monkeypatch.setattr(pool, "_tracked_take", lambda *a: calls.append(a))
    hit = array._empty((64,), F32, 0)  # the cache's block through the inline hit, no tracked call
    assert calls == [] and hit.ptr and pool.stats["hits"] == 1


def test_allocations_of_other_threads_count():
    with simulator.simulated("null"), memory.track_peak() as peak:  # the libraries' pool, every thread's
        held = []
        workers = [threading.Thread(target=lambda: held.append(memory.alloc(1 << 16))) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert peak.peak_bytes - peak.start_bytes == 4 << 16
        held.clear()


def test_track_peak_refuses_what_is_not_a_pool():
    for bad in ("pool", 0, object()):
        with pytest.raises(TypeError, match="pool must be a pymagma.memory.Pool or None"):
            with memory.track_peak(bad):
                pass


def test_an_output_whose_look_up_the_pool_keeps_counts_in_the_peak(pool):
    array._empty((2048,), F32, 0)  # its look-up kept in pool.outputs, its block cached (8192 bytes)
    assert ((2048,), F32, 0) in pool.outputs and pool.stats["cached_bytes"] == 8192
    with memory.track_peak() as peak:
        a = array._empty((2048,), F32, 0)  # a cache hit of a kept shape: still measured
        assert peak.peak_bytes == 8192 and a.ptr
        del a
    b = array._empty((2048,), F32, 0)  # after the block: the kept look-up again, a hit
    assert pool.stats["hits"] == 2 and pool.stats["requests"] == 3 and b.ptr
