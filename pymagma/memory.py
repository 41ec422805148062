"""A caching device-memory pool: ``alloc(nbytes)`` returns an :class:`Allocation` that goes back to the pool when it
dies, so repeated allocate/free cycles (a training loop) do not pay ``cudaMalloc``/``cudaFree`` each time.

Sizes are rounded up to a bucket (multiples of 512 bytes; above 1 MiB, multiples of an eighth of the power of two
below the size) and freed blocks are kept per (device, bucket).  When ``cudaMalloc`` runs out of memory the cache
is released and the allocation retried once.  :func:`pinned_buffer` caches page-locked host buffers the same way
(``cudaMallocHost`` is slow and ``cudaFreeHost`` waits for the whole device).  :func:`track_peak` measures the most
bytes in use over a block of code, on request only (the hot paths pay nothing for it otherwise).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import defaultdict

import numpy as np

from . import _checks, _deferred, _native, runtime
from ._blocks import (  # noqa: F401 - pymagma.memory's own names
    _LARGE,
    _LAYOUTS,
    ALIGNMENT,
    _Block,
    _bucket,
    _Given,
    _Keeper,
    _layout,
    bucket_size,
    lease_output,
)
from .errors import DeviceMemoryError


class Pool:
    """Cached device blocks by (device, size class), and cached pinned host buffers, of the native libraries in use
    when it was made (it frees through them, whatever is current then).  ``relaxed``: the pool of a CUDA graph — its
    cudaMalloc runs in the relaxed capture mode, it never frees its own cache to retry an allocation (the graph's
    recorded work uses those blocks), and once closed (:meth:`close`) it frees every block given back.

    A shared (not relaxed) pool's block handed out is given back by its token (:class:`_Block`, a weak reference to
    the array or Allocation using it, kept in ``live``): when that dies, the token's callback, the free list's own
    ``append`` (no Python frame), puts the token, which holds the pointer, into the block's free list.  ``live``
    keeps every token alive, so a token fires even when its user dies in a reference cycle (the collector calls the
    callbacks of live weak references only).  A relaxed pool's block is given back by a :class:`_Keeper` its user
    holds, whose finalizer sees a closed pool (a graph's pool outlives its graph while its arrays live).

    Thread safety without a lock on the hot path: a cache hit pops a block from its free list and a dying user's
    token appends to one (``list.pop``/``list.append``, each atomic), and requests and cudaMalloc attempts (the
    misses) are counted by ``itertools.count`` (an atomic ``next``): a hit is a request that missed nothing, so the
    hot path counts the request only.  The lock guards what changes with a native call (the bytes held from
    cudaMalloc, the malloc and free counts) and the pinned buffers.  No finalizer takes the lock (a garbage
    collection can run while the lock is held) or makes a native call (see :mod:`pymagma._deferred`).  The bytes
    cached are counted when :attr:`stats` is read (the blocks in the free lists), the bytes in use are those held less
    those cached."""

    def __init__(self, relaxed: bool = False):
        self.relaxed, self.closed = relaxed, False
        self.cudart = _native.current.cudart  # the runtime its blocks come from, and go back to
        self.lock = threading.Lock()
        # (device, size class) -> the blocks cached, each an object whose ``ptr`` is the block (a dead _Block, or a
        # _Given): filled by dying users' tokens, emptied by requests and releases, never replaced (a token's
        # callback appends to the list it was made with)
        self.free_blocks: dict[tuple[int, int], list] = defaultdict(list)
        # pointer -> the token of each block a shared pool handed out (dead once its user died: kept until the
        # block is taken again, freed, or given back by Allocation.free)
        self.live: dict[int, _Block] = {}
        self._returners: dict[tuple[int, int], object] = {}  # (device, size class) -> its free list's append
        # (shape, dtype, device) -> an output's (C strides, size, itemsize, bytes, size class, free list, callback,
        # live): pymagma.array._empty's one look-up per output (a measured pool's reads miss)
        self.outputs: dict = {}
        self.free_pinned: dict[int, list[np.ndarray]] = defaultdict(list)  # bucket -> pinned host buffers
        self._requests, self._misses = itertools.count(), itertools.count()  # next() counts one, atomically
        self._held = self._mallocs = self._frees = 0  # bytes from cudaMalloc not freed yet, calls made (the lock)
        self._trackers: list[PeakTracker] = []  # the track_peak blocks measuring this pool (the lock)

    @property
    def stats(self) -> dict:
        """Bytes in use and cached, and counts of cudaMalloc calls, cudaFree calls, requests and cache hits."""
        cached = self._cached()
        with self.lock:
            held, mallocs, frees = self._held, self._mallocs, self._frees
        # misses read first: each has its request counted (hits never negative); a request another thread has
        # just made reads as a hit until its miss, if any, is counted
        misses, requests = _counted(self._misses), _counted(self._requests)
        return {"in_use_bytes": held - cached, "cached_bytes": cached, "mallocs": mallocs, "frees": frees,
                "hits": requests - misses, "requests": requests}

    def _cached(self) -> int:
        return sum(size * len(ptrs) for (_, size), ptrs in _free_lists(self))

    def collected(self, device: int, size: int, ptr: int) -> None:
        """A block given back explicitly (:meth:`Allocation.free`): back into its free list without any lock or
        native call (a closed pool's blocks are freed at the next safe point, :func:`pymagma.runtime.run_deferred`)."""
        given = _Given()
        given.ptr = ptr
        self.__dict__["free_blocks"][device, size].append(given)
        if self.closed:  # (read after the append: a block given back while the pool closes is never left behind)
            self._sweep()

    def returner(self, device: int, size: int):
        """The callback of a shared pool's tokens of blocks of (``device``, ``size``): their free list's
        ``append``, which puts the dead token into it."""
        key = (device, size)
        callback = self._returners.get(key)
        if callback is None:
            callback = self._returners.setdefault(key, self.__dict__["free_blocks"][key].append)
        return callback

    def lease(self, user, device: int, size: int) -> tuple[int, _Keeper | None]:
        """A block of ``size`` (a size class, > 0) bytes on ``device`` for ``user`` (any object a weak reference
        reaches): (its pointer, None) from a shared pool, given back when ``user`` dies; (its pointer, a
        :class:`_Keeper`) from a relaxed pool, given back when the keeper, which ``user`` must hold, dies."""
        ptr = self.take(device, size)
        if self.relaxed:
            keeper = _Keeper()
            keeper.pool, keeper.device, keeper.size, keeper.ptr = self, device, size, ptr
            return ptr, keeper
        token = _Block(user, self._returners.get((device, size)) or self.returner(device, size))
        token.ptr = ptr
        self.live[ptr] = token
        return ptr, None

    def cached_pointers(self) -> list[int]:
        """The pointers of the blocks cached now."""
        return [item.ptr for _, items in _free_lists(self) for item in list(items)]

    def _sweep(self) -> None:
        """A closed pool's cached blocks, each freed at the next safe point (no lock, no native call)."""
        for key, ptrs in _free_lists(self):
            while ptrs:
                try:
                    ptr = ptrs.pop().ptr
                except IndexError:  # another thread took the last one
                    break
                runtime.deferred(self._free_collected, *key, ptr)

    def _free_collected(self, device: int, size: int, ptr: int) -> None:
        self.live.pop(ptr, None)
        with self.lock:
            self._held -= size
            self._frees += 1
        self._free(device, ptr)

    def take(self, device: int, size: int) -> int:
        """A block of ``size`` (a size class) bytes on ``device``: a cached one, else a new one."""
        next(self._requests)
        blocks = self.free_blocks.get((device, size))
        if blocks:
            try:
                ptr = blocks.pop().ptr
            except IndexError:  # another thread took the last one
                pass
            else:
                return ptr
        return self.new_block(device, size)

    def new_block(self, device: int, size: int) -> int:
        """A block of ``size`` bytes from cudaMalloc (the cache released and the call retried once when it runs
        out): :meth:`take`'s miss, its request counted already (the frees held back are made first).  While
        :func:`track_peak` measures the pool every request comes here: a cached block first, then the bytes in use
        recorded."""
        if self._trackers:
            return self._tracked_take(device, size)
        return self._malloc_block(device, size)

    def _tracked_take(self, device: int, size: int) -> int:
        blocks = self.__dict__["free_blocks"].get((device, size))
        try:
            ptr = blocks.pop().ptr  # (None or an empty list: a miss)
        except (AttributeError, IndexError):
            ptr = self._malloc_block(device, size)
        in_use = -self._cached()
        with self.lock:
            in_use += self._held
            for tracker in self._trackers:
                if in_use > tracker.peak_bytes:
                    tracker.peak_bytes = in_use
        return ptr

    def _malloc_block(self, device: int, size: int) -> int:
        next(self._misses)  # a request the cache did not answer (whether cudaMalloc succeeds or not)
        if _deferred._after_capture:
            runtime.run_deferred()
        try:
            ptr = self._malloc(device, size)
        except DeviceMemoryError:
            if self.relaxed:  # a graph's pool: its cached blocks are in the graph; the error says what ran out
                raise
            self.release_cached()
            ptr = self._malloc(device, size)
        with self.lock:
            self._mallocs += 1
            self._held += size
        return ptr

    def _malloc(self, device: int, size: int) -> int:
        if not self.relaxed:
            return _malloc_on(device, size)
        with runtime.relaxed_capture():
            return _malloc_on(device, size)

    def give_back(self, device: int, size: int, ptr: int) -> None:
        """A block no longer used (:meth:`Allocation.free`): cached, or freed at the next safe point by a closed
        pool."""
        self.collected(device, size, ptr)

    def close(self) -> None:
        """Free every cached block now and every block given back from now on (a destroyed graph's pool; a shared,
        not relaxed, pool's tokens give their blocks back to the cache without a look at ``closed``: freed by
        :meth:`release_cached`)."""
        self.closed = True
        self.release_cached()

    def _free(self, device: int, ptr: int) -> None:
        if runtime.capture_state.__dict__.get("graph") is not None:  # cudaFree cannot be captured: after it ends
            runtime.after_capture(self._free, device, ptr)
            return
        if self.cudart is _native.current.cudart:
            _free_on(device, ptr)
        else:  # made by other libraries (the simulator, since turned off): freed by them, never by the current ones
            self.cudart.cudaFree(ptr)

    def take_pinned(self, size: int) -> np.ndarray:
        with self.lock:
            buffers = self.free_pinned.get(size)
            if buffers:
                return buffers.pop()
        try:
            return runtime.pinned_empty(size, np.uint8)
        except DeviceMemoryError:
            self.release_cached()
            return runtime.pinned_empty(size, np.uint8)

    def give_back_pinned(self, size: int, buffer: np.ndarray) -> None:
        with self.lock:
            self.free_pinned[size].append(buffer)

    def release_cached(self) -> int:
        """cudaFree every cached block (and drop the cached pinned host buffers); return the device bytes
        released."""
        with self.lock:
            pinned, self.free_pinned = self.free_pinned, defaultdict(list)
        del pinned  # each buffer's cudaFreeHost is held back as it dies: made below, outside the lock
        released = 0
        for (device, size), ptrs in _free_lists(self):
            while ptrs:  # popped one by one: a block another thread takes or gives back meanwhile is never lost
                try:
                    ptr = ptrs.pop().ptr
                except IndexError:
                    break
                self.live.pop(ptr, None)
                with self.lock:
                    self._held -= size
                    self._frees += 1
                self._free(device, ptr)
                released += size
        runtime.run_deferred()
        return released


def _free_lists(pool: Pool) -> list:
    """The pool's ``((device, size class), free list)`` pairs: taken again when a finalizer that runs meanwhile (a
    garbage collection while the list is made) adds a size class to the dict."""
    while True:
        try:
            return list(pool.free_blocks.items())
        except RuntimeError:  # dictionary changed size during iteration
            pass


def _counted(counter: itertools.count) -> int:
    """How many times ``next`` was called on ``counter`` (made with ``itertools.count()``), read without a call to
    it: its repr, ``count(N)``."""
    return int(repr(counter)[6:-1])


def _malloc_on(device: int, size: int) -> int:
    """cudaMalloc on ``device`` (which need not be the current one)."""
    with runtime.on_device(device):
        return runtime.malloc(size)


def _free_on(device: int, ptr: int) -> None:
    try:
        with runtime.on_device(device):
            runtime.free(ptr)
    except Exception:  # pragma: no cover - interpreter shutdown or a lost context: nothing left to free
        pass


_native.resource("memory_pool")(lambda libraries: Pool())  # the pool of each set of native libraries
_override = threading.local()  # a pool that takes the allocations of this thread for a while (using_pool)
# one entry per using_pool block open in any thread: while it is empty (no graph capture anywhere) the hot paths skip
# the thread-local look-up, ``_overriding and _override.__dict__.get("pool") or _native.current.memory_pool``
_overriding: list = []


def _pool() -> Pool:
    return _overriding and _override.__dict__.get("pool") or _native.current.memory_pool


@contextlib.contextmanager
def using_pool(pool: Pool):
    """The calling thread's allocations come from ``pool`` in the block (a CUDA graph's pool while it is
    captured)."""
    previous = _override.__dict__.get("pool")
    _overriding.append(pool)  # (before the override is set, taken away after it is undone: list ops are atomic)
    _override.pool = pool
    try:
        yield pool
    finally:
        _override.pool = previous
        _overriding.pop()


class Allocation:
    """``nbytes`` of device memory at ``ptr`` on ``device``; returned to the pool (of the native libraries that made
    it) when the object is collected or :meth:`free` is called (by its token in a shared pool: no finalizer runs)."""

    __slots__ = ("ptr", "nbytes", "device", "size", "_pool", "_keeper", "__weakref__")

    def __init__(self, nbytes: int, device: int | None = None):
        self._pool = self._keeper = None
        self.nbytes = _checks.count(nbytes, "nbytes", maximum=2**63 - 1)
        # the current device needs a device; an explicit one is reached by cudaMalloc, which checks for one
        self.device = runtime.get_device() if device is None else _checks.count(device, "device")
        self.size = _bucket(self.nbytes)
        self.ptr = 0
        if self.size:
            pool = _pool()
            self.ptr, self._keeper = pool.lease(self, self.device, self.size)
            self._pool = pool

    @classmethod
    def trusted(cls, nbytes: int, device: int) -> Allocation:
        """An Allocation of sizes pymagma computed from checked arrays (a non-negative int ``nbytes``, an existing
        ``device``): the hot path of every workspace, no argument checks again."""
        a = object.__new__(cls)
        a.nbytes, a.device, a._keeper = nbytes, device, None
        a.size = size = -(-nbytes // ALIGNMENT) * ALIGNMENT if nbytes <= _LARGE else _bucket(nbytes)
        if not size:
            a.ptr, a._pool = 0, None
            return a
        pool = _overriding and _override.__dict__.get("pool") or _native.current.memory_pool
        if pool.relaxed:
            a._pool = None
            a.ptr, a._keeper = pool.lease(a, device, size)
            a._pool = pool
            return a
        next(pool._requests)  # Pool.lease, inline
        blocks = pool.free_blocks.get((device, size))
        try:  # a cached block (None or an empty list: a miss)
            a.ptr = ptr = blocks.pop().ptr
            returner = blocks.append  # (the free list's own: Pool.returner's answer)
        except (AttributeError, IndexError):
            a.ptr = ptr = pool.new_block(device, size)
            returner = pool.returner(device, size)
        (token := _Block(a, returner)).ptr = ptr
        pool.live[ptr] = token
        a._pool = pool
        return a

    def free(self) -> None:
        """Return the memory to the pool now (idempotent): its token leaves the pool's ``live`` unfired (its keeper
        is emptied)."""
        pool, self._pool, keeper, self._keeper = self._pool, None, self._keeper, None
        if pool is None:
            return
        if keeper is not None:
            keeper.pool = None
            pool.collected(self.device, self.size, self.ptr)
        elif pool.live.pop(self.ptr, None) is not None:
            pool.collected(self.device, self.size, self.ptr)

    def __repr__(self) -> str:
        return f"Allocation(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, device={self.device})"


def alloc(nbytes: int, device: int | None = None) -> Allocation:
    """``nbytes`` (a non-negative int) of device memory on ``device`` (an index, or None for the current device)
    through the caching pool; returns an :class:`Allocation`."""
    return Allocation(nbytes, device)


@contextlib.contextmanager
def pinned_buffer(nbytes: int):
    """A page-locked host buffer (uint8, at least ``nbytes`` long, page-aligned) for the block, taken from the pool's
    cache and given back afterwards: every asynchronous copy from or into it must have finished when the block
    ends."""
    size = bucket_size(max(_checks.count(nbytes, "nbytes", maximum=2**63 - 1), 1))
    pool = _pool()
    buffer = pool.take_pinned(size)
    try:
        yield buffer[:nbytes]
    finally:
        pool.give_back_pinned(size, buffer)


def pool_stats() -> dict:
    """Bytes in use and cached, and counts of cudaMalloc calls, cudaFree calls, requests and pool hits."""
    runtime.run_deferred()
    return _pool().stats


class _MeasuredPool(Pool):
    """The class of a pool while :func:`track_peak` measures it (the same object, its ``__class__`` swapped, so
    nothing that holds the pool changes): its ``free_blocks`` reads the same free lists through a
    :class:`_MeasuredBlocks`, whose ``get`` misses, and its ``outputs`` always miss, so the hot paths' inline hit
    (``Allocation.trusted``, ``pymagma.array._empty``) reaches :meth:`Pool.new_block`, which takes the cached block
    and records the bytes in use.  Outside a measurement the pool's class and its hot paths are untouched."""

    @property
    def free_blocks(self):
        return _MeasuredBlocks(self.__dict__["free_blocks"])

    @property
    def outputs(self):
        return {}  # (what is stored in it is dropped)


class _MeasuredBlocks:
    """A measured pool's free lists as its hot paths see them: ``get`` misses; the rest reads the lists."""

    __slots__ = ("blocks",)

    def __init__(self, blocks: defaultdict):
        self.blocks = blocks

    def get(self, key, default=None):
        return default

    def __getitem__(self, key):  # a dying Allocation gives its block back here
        return self.blocks[key]

    def items(self):
        return self.blocks.items()

    def values(self):
        return self.blocks.values()


class PeakTracker:
    """What :func:`track_peak` measured: ``start_bytes``, the pool's bytes in use when the block began, and
    ``peak_bytes``, the most in use after any allocation since (at least ``start_bytes``; read it in the block or
    after)."""

    __slots__ = ("pool", "start_bytes", "peak_bytes")

    def __init__(self, pool: Pool):
        self.pool = pool
        self.start_bytes = self.peak_bytes = pool.stats["in_use_bytes"]

    def reset(self) -> None:
        """Start again from the bytes in use now."""
        runtime.run_deferred()
        in_use = self.pool.stats["in_use_bytes"]
        with self.pool.lock:
            self.start_bytes = self.peak_bytes = in_use

    def __repr__(self) -> str:
        return f"PeakTracker(start_bytes={self.start_bytes}, peak_bytes={self.peak_bytes})"


@contextlib.contextmanager
def track_peak(pool: Pool | None = None):
    """The most device bytes in use in the current pool (or ``pool``) after any allocation in the block: yields a
    :class:`PeakTracker`.  Blocks from the cache and from cudaMalloc count alike; allocations of every thread count.
    While a block is open every request of the pool takes a slower path that sums its cache (a measurement's cost);
    outside one the pool does no work for it.  Blocks nest."""
    if pool is None:
        pool = _pool()
    elif not isinstance(pool, Pool):
        raise TypeError(f"track_peak: pool must be a pymagma.memory.Pool or None, got {type(pool).__name__}")
    runtime.run_deferred()
    tracker = PeakTracker(pool)
    with pool.lock:
        pool._trackers.append(tracker)
        pool.__class__ = _MeasuredPool
    try:
        yield tracker
    finally:
        with pool.lock:
            pool._trackers.remove(tracker)
            if not pool._trackers:
                pool.__class__ = Pool


def empty_cache() -> int:
    """Free every cached (unused) block; return the bytes released."""
    return _pool().release_cached()

