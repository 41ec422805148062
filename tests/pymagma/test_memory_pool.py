"""The caching pool's lock-free hot path (pymagma.memory): cache hits and dying allocations take no lock, and the
statistics (requests, hits, bytes in use and cached) stay exact, with threads, explicit frees and closed pools."""

from __future__ import annotations

import gc
import itertools
import sys
import threading

import numpy as np

import pymagma
from pymagma import array, memory, runtime, simulator

U8, F32 = np.dtype(np.uint8), np.dtype(np.float32)


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


def test_counted_reads_how_many_times_a_counter_advanced():
    counter = itertools.count()
    assert memory._counted(counter) == 0
    for n in range(1, 1200):
        next(counter)
        assert memory._counted(counter) == n


def test_stats_account_hits_misses_and_bytes_as_blocks_come_and_go():
    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            a = memory.Allocation.trusted(1000, 0)  # 1024-byte class: a miss
            b = memory.alloc(3000)  # 3072: a miss
            assert pool.stats == {"in_use_bytes": 4096, "cached_bytes": 0, "mallocs": 2, "frees": 0, "hits": 0,
                                  "requests": 2}
            ptr = a.ptr
            del a
            assert pool.stats["in_use_bytes"] == 3072 and pool.stats["cached_bytes"] == 1024
            c = memory.Allocation.trusted(600, 0)  # the same class: the block given back
            assert c.ptr == ptr
            b.free()
            b.free()  # idempotent: given back once
            given = b.ptr
            del b
            assert [item.ptr for item in pool.free_blocks[(0, 3072)]] == [given]
            assert pool.stats == {"in_use_bytes": 1024, "cached_bytes": 3072, "mallocs": 2, "frees": 0, "hits": 1,
                                  "requests": 3}
            zero = memory.Allocation.trusted(0, 0)  # no block, no request
            assert (zero.ptr, pool.stats["requests"]) == (0, 3)
            assert pool.release_cached() == 3072
            assert pool.stats == {"in_use_bytes": 1024, "cached_bytes": 0, "mallocs": 2, "frees": 1, "hits": 1,
                                  "requests": 3}
            del c


def test_threads_never_share_a_block_and_the_stats_add_up():
    """Four threads allocate and drop arrays of a few size classes: a block is never handed to two live arrays, every
    request is a hit or a cudaMalloc, and every byte is back in the cache at the end."""
    with simulator.simulated("null"):
        pool = memory.Pool()
        live, guard, errors = set(), threading.Lock(), []
        sizes, rounds = (100, 700, 5000, 70_000), 1500

        def work(seed):
            rng = np.random.default_rng(seed)
            held = []
            with memory.using_pool(pool):
                try:
                    for i, n in enumerate(rng.choice(sizes, rounds)):  # Allocation.trusted, and its copy in _empty
                        a = memory.Allocation.trusted(int(n), 0) if i % 2 else array._empty((int(n),), U8, 0)
                        with guard:
                            if a.ptr in live:
                                errors.append(a.ptr)
                            live.add(a.ptr)
                        held.append(a)
                        if len(held) > 3:
                            old = held.pop(int(rng.integers(len(held))))
                            with guard:
                                live.discard(old.ptr)
                            if rng.integers(2) and isinstance(old, memory.Allocation):
                                old.free()
                            del old
                    with guard:
                        live.difference_update(h.ptr for h in held)
                    held.clear()
                except Exception as exc:  # pragma: no cover - reported below
                    errors.append(exc)

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gc.collect()
        assert errors == []
        stats = pool.stats
        assert stats["requests"] == 4 * rounds and stats["hits"] + stats["mallocs"] == stats["requests"]
        assert stats["in_use_bytes"] == 0 and stats["cached_bytes"] > 0
        cached = pool.cached_pointers()
        assert len(cached) == len(set(cached)) == stats["mallocs"] and set(pool.live) <= set(cached)  # each once
        pool.release_cached()
        assert pool.stats["frees"] == stats["mallocs"] and pool.stats["in_use_bytes"] == 0


def test_a_closed_pools_blocks_are_freed_at_the_next_safe_point_whoever_gives_them_back():
    with simulator.simulated("full") as sim:
        pool = memory.Pool(relaxed=True)  # (a graph's pool: the pools closed)
        with memory.using_pool(pool):
            a, b, c = (pymagma.empty((64,), np.float32) for _ in range(3))
        ptrs = [x.ptr for x in (a, b, c)]
        del c  # cached: freed by close
        pool.close()
        assert ptrs[2] not in sim.runtime.blocks and all(p in sim.runtime.blocks for p in ptrs[:2])
        with memory.using_pool(pool):
            kept = memory.Allocation.trusted(256, 0)  # a closed pool's block handed out after the close
        assert kept._pool is pool and kept.ptr not in ptrs[:2]
        ptrs.append(kept.ptr)
        kept.free()  # an explicit free and collections of a closed pool's blocks: held back, no native call
        del a, b
        assert all(p in sim.runtime.blocks for p in ptrs[:2] + ptrs[3:]) and not any(pool.free_blocks.values())
        runtime.run_deferred()
        assert not any(p in sim.runtime.blocks for p in ptrs) and pool.live == {}
        assert pool.stats == {"in_use_bytes": 0, "cached_bytes": 0, "mallocs": 4, "frees": 4, "hits": 0,
                              "requests": 4}


def test_a_shared_pool_closed_frees_its_cache_and_what_comes_back_later_at_a_release():
    """A shared (not relaxed) pool's tokens give blocks back with the free list's own append, which never looks at
    ``closed``: what comes back after a close is cached until the next release."""
    with simulator.simulated("full") as sim:
        pool = memory.Pool()
        with memory.using_pool(pool):
            a, c = array._empty((64,), F32, 0), array._empty((64,), F32, 0)
        ptrs = [a.ptr, c.ptr]
        del c
        pool.close()
        assert ptrs[1] not in sim.runtime.blocks and ptrs[0] in sim.runtime.blocks
        del a
        assert pool.cached_pointers() == ptrs[:1] and pool.release_cached() == 512
        assert not any(p in sim.runtime.blocks for p in ptrs) and pool.live == {}


def test_an_allocation_whose_malloc_failed_dies_quietly(monkeypatch):
    with simulator.simulated("null") as sim:
        pool = memory.Pool()

        def out_of_memory(nbytes):
            return (runtime._rt().cudaError_t.cudaErrorMemoryAllocation, None)

        monkeypatch.setattr(sim.runtime, "cudaMalloc", out_of_memory)
        unraisable = []
        monkeypatch.setattr("sys.unraisablehook", unraisable.append)
        with memory.using_pool(pool):
            for make in (lambda: memory.Allocation.trusted(4096, 0), lambda: memory.alloc(4096)):
                try:
                    make()
                except MemoryError:
                    pass
                else:  # pragma: no cover
                    raise AssertionError("cudaMalloc failed: the allocation must raise")
        gc.collect()
        assert unraisable == [] and pool.stats["requests"] == 2 and pool.stats["in_use_bytes"] == 0
        assert pool.stats["hits"] == 0  # a request cudaMalloc failed is a miss, never a hit


def test_allocations_without_a_block_or_given_back_already_die_quietly_and_give_nothing_back(monkeypatch):
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            empties = [memory.Allocation.trusted(0, 0), memory.alloc(0)]
            assert [(a.ptr, a.size) for a in empties] == [(0, 0)] * 2
            assert (array._empty((0, 3), U8, 0).ptr, pool.live, pool.outputs) == (0, {}, {})
            del empties
            a = memory.alloc(100)
            ptr = a.ptr
            a.free()
            a.free()
            del a
        gc.collect()
        assert unraisable == [] and [len(items) for items in pool.free_blocks.values()] == [1]
        assert pool.cached_pointers() == [ptr] and pool.live == {}  # (the freed block's token left ``live``)
        assert pool.stats == {"in_use_bytes": 0, "cached_bytes": 512, "mallocs": 1, "frees": 0, "hits": 0,
                              "requests": 1}


def test_a_threads_pool_is_its_own_and_the_others_keep_the_libraries_pool():
    """While one thread allocates from a pool of its own (using_pool, as a graph's capture does), another thread's
    outputs still come from the libraries' pool; blocks nest and undo in order, and an error inside one undoes it."""
    with simulator.simulated("null"):
        mine, inner, shared = memory.Pool(), memory.Pool(), memory._pool()
        entered, done, seen = threading.Event(), threading.Event(), {}

        def other():
            try:
                entered.wait(60)
                seen["empty"] = _pool_of(array._empty((10,), U8, 0))
                seen["trusted"] = memory.Allocation.trusted(10, 0)._pool
                seen["alloc"] = memory.alloc(10)._pool
            except BaseException as exc:  # (reported below: the main thread must not wait for ever)
                seen["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=other)
        worker.start()
        with memory.using_pool(mine):
            entered.set()
            assert done.wait(60), "the other thread never finished"
            assert "error" not in seen, seen
            assert _pool_of(array._empty((10,), U8, 0)) is mine and memory.Allocation.trusted(10, 0)._pool is mine
            with memory.using_pool(inner):
                assert memory.alloc(10)._pool is inner and memory._pool() is inner
            assert memory.alloc(10)._pool is mine
        worker.join()
        assert seen == {"empty": shared, "trusted": shared, "alloc": shared}
        try:
            with memory.using_pool(mine):
                raise KeyError("inside")
        except KeyError:
            pass
        assert memory._overriding == [] and memory._pool() is shared and _pool_of(array._empty((3,), U8, 0)) is shared


def _pool_of(out) -> memory.Pool:
    """The pool whose ``live`` holds the token of ``out``'s block (a weak reference to ``out``)."""
    # (type(), not isinstance: the collector's objects may include weak proxies whose referent died, which
    # isinstance would touch)
    pools = [p for p in gc.get_objects() if type(p) is memory.Pool and (t := p.live.get(out.ptr)) is not None and
             t() is out]
    return pools[0] if len(pools) == 1 else pools


class _GrowsOnce(dict):
    """Free lists whose first ``items()`` listing meets a size class added meanwhile, as when a garbage collection
    during the listing runs a dying array's finalizer."""

    listed = 0

    def items(self):
        type(self).listed += 1
        if type(self).listed == 1:
            raise RuntimeError("dictionary changed size during iteration")
        return super().items()


def test_stats_and_releases_list_the_free_lists_again_when_a_finalizer_adds_a_size_class():
    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            a = memory.alloc(1000)
            del a  # cached: 1024 bytes
            for read in (lambda: pool.stats["cached_bytes"], pool.release_cached):
                _GrowsOnce.listed = 0
                pool.free_blocks = _GrowsOnce(pool.free_blocks)
                assert read() == 1024 and _GrowsOnce.listed == 2


def test_an_output_in_a_reference_cycle_gives_its_block_back_when_the_cycle_is_collected():
    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            out = array._empty((1000,), U8, 0)
            ptr, holder = out.ptr, {"out": out}
            holder["self"] = holder  # the array is reachable from a cycle only
            del out, holder
            gc.collect()
            assert pool.cached_pointers() == [ptr] and pool.stats["in_use_bytes"] == 0
            assert array._empty((600,), U8, 0).ptr == ptr  # taken again: a hit
        assert pool.stats["hits"] == 1 and pool.stats["requests"] == 2


def test_an_upload_or_an_empty_array_that_runs_out_of_memory_says_so_in_numpys_words(monkeypatch):
    with simulator.simulated("null") as sim:
        monkeypatch.setattr(sim.runtime, "cudaMalloc",
                            lambda nbytes: (runtime._rt().cudaError_t.cudaErrorMemoryAllocation, None))
        with memory.using_pool(memory.Pool()):
            for make in (lambda: pymagma.asarray(np.ones((3, 5), np.float32)),
                         lambda: pymagma.asarray(np.ones((3, 5), np.float32), device=0),
                         lambda: array.empty((3, 5), np.float32)):
                try:
                    make()
                except MemoryError as exc:
                    assert isinstance(exc, pymagma.errors.DeviceMemoryError)
                    assert "Unable to allocate" in str(exc) and "shape (3, 5)" in str(exc) and "float32" in str(exc)
                    assert "on device 0" in str(exc)
                else:  # pragma: no cover
                    raise AssertionError("cudaMalloc failed: the allocation must raise")


def test_an_outputs_and_a_workspaces_allocation_and_release_run_one_python_frame_each():
    """A pool hit of a kept output shape is _empty's one frame, a workspace trusted's; their release none (the
    token's callback is the free list's C append)."""
    with simulator.simulated("null"):
        pool = memory._pool()
        warm = [array._empty((5, 7), F32, 0), memory.Allocation.trusted(5000, 0)]  # the output's look-up kept
        del warm  # both blocks cached
        calls = []

        def profile(frame, event, arg):
            if event == "call":
                calls.append(frame.f_code.co_name)
        before = pool.stats
        sys.setprofile(profile)
        try:
            out = array._empty((5, 7), F32, 0)
            space = memory.Allocation.trusted(5000, 0)
            del out, space
        finally:
            sys.setprofile(None)
        assert calls == ["_empty", "trusted"]
        after = pool.stats
        assert after["hits"] - before["hits"] == 2 and after["in_use_bytes"] == before["in_use_bytes"]


def test_an_output_keeps_its_pool_and_runtime_alive():
    """An op's output (no Allocation) holds its pool, as an Allocation did: a pool dropped by everything else, and
    the runtime it frees through, live while an array uses one of its blocks (the simulator's memory with them)."""
    import weakref

    with simulator.simulated("null"):
        pool = memory.Pool()
        with memory.using_pool(pool):
            out = array._empty((10,), U8, 0)
            out = array._empty((10,), U8, 0)  # (the output's kept look-up: its fast path)
            up = pymagma.asarray(np.zeros(3, np.int64), device=0)
            up = pymagma.asarray(np.zeros(3, np.int64), device=0)  # (the upload's kept look-up: its fast path)
        kept, runtime = weakref.ref(pool), weakref.ref(pool.cudart)
        del pool
        gc.collect()
        assert kept() is not None and runtime() is not None and out.owner is kept() and up.owner is kept()
        del out, up
        gc.collect()
        assert kept() is None
