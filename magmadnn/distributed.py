"""Data-parallel training over MPI (mpi4py): ``model.fit(x, y, batch_size=b, distributed=True)``, or with
:class:`Options` (defaults: ``sync_batchnorm=False, bucket_mb=25, overlap=False, cuda_aware=None``), e.g.
``distributed=Options(sync_batchnorm=True)``.

Run the same script on every rank (``mpiexec -n N python train.py``). With ``distributed=True`` fit

* broadcasts rank 0's weights, state arrays (BatchNorm statistics) and shuffling stream to every rank at its start;
* gives each rank a disjoint shard of every global batch: the epoch order is one permutation drawn from the shared
  stream (the same one a single process would draw), global batch ``k`` is ``order[k*N*b : (k+1)*N*b]`` and rank
  ``r`` takes its ``r``-th slice of ``b`` samples; the last, uneven global batch is split the same way (a rank may
  get fewer samples, or none: it still takes part in the reduction with weight 0);
* sums the weighted gradients (weight: the rank's sample count), the weighted batch loss and the sample count over
  the ranks by in-place ``Allreduce`` on flat buffers, so that N ranks with per-rank batch ``b`` take exactly the
  steps of one process with batch ``N*b`` on the same order. The buffers are buckets of at most
  ``Options.bucket_mb`` MiB (default 25, as PyTorch DDP; a model under that size gets ONE fused buffer and one
  Allreduce per step), filled last layer first; ``Options(overlap=True)`` posts each bucket's ``Iallreduce`` from
  the backward pass as soon as its gradients are final (an autograd hook). The sum of each value does not depend on
  the bucketing: with 2 ranks the results are bit-identical to one fused buffer (tested; also seen with 3 ranks),
  with more the MPI library may choose another summation order for another message size (equal to rounding);
* sums the running loss/metric tallies (and validation, sharded over the ranks) over every rank at each read, so
  every rank logs the same global figures and callbacks such as EarlyStopping decide alike; progress updates are
  read at epoch end only (a timed read would be a collective call at a different batch on each rank);
* prints the progress bar on rank 0 only and runs the file-writing callbacks (ModelCheckpoint, CSVLogger) there only;
* with several ranks, limits each rank's BLAS/OpenMP threads to ``cores // ranks on the node`` unless the user set
  ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` (see ``limit_threads_per_rank``).

Backends: on the host backend the buckets are NumPy buffers the gradients are copied into and read back from as
views. On the GPU backend they are page-locked host buffers (``cudaMallocHost``: the device-to-host copies run at
full speed) unless the MPI library is CUDA-aware: then each bucket is a device buffer, packed and unpacked by one
kernel per gradient and handed to MPI by address. :func:`cuda_aware_mpi` decides (``Options(cuda_aware=...)``
overrides): ``MAGMADNN_CUDA_AWARE_MPI=1|0``, else the MPI 4.1 info key ``mpi_memory_alloc_kinds`` (a ``cuda``
kind), else ``MPIX_Query_cuda_support()``; ``stats()`` says what was used and why.

BatchNorm: by default its statistics are local to each rank (each normalizes its own shard; running statistics are
rank 0's when it saves). ``Options(sync_batchnorm=True)`` synchronizes them, as PyTorch's SyncBatchNorm: in
training every BatchNorm layer normalizes with the mean and variance of the global batch (per channel, each rank's
count, mean and sum of squared deviations gathered by one Allgather and combined in rank order, so every rank gets
the same values) and its backward pass sums the two per-channel gradient sums over the ranks (one Allreduce), each
rank's weighted by its share of the loss; N ranks then train exactly as one process with batch ``N*b``, running
statistics included (the same on every rank), uneven last batches too: a rank without samples runs a one-sample
stand-in batch of weight 0 to take part in the layers' collectives. The layer math is written once against the op
set (``functional.SyncBatchNormTrain``), so every backend runs the same code; the per-channel statistics go
through the host. Dropout streams are identical on every rank. Resume: every rank calls ``load_checkpoint`` on the
same file before ``fit(..., distributed=True)``.

Faults: :func:`install_abort_hook` (called by ``init``) makes an uncaught exception on any rank print that rank's
traceback and ``MPI.COMM_WORLD.Abort(1)`` the whole job instead of leaving the other ranks blocked in a collective.

Without mpi4py importing this module still works; ``is_available()`` is False and anything that needs MPI raises
:class:`MPIUnavailableError` naming ``pip install magmadnn[mpi]``.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import time
import traceback

import numpy as np

__all__ = ["MPIUnavailableError", "is_available", "init", "comm", "rank", "size", "is_root", "install_abort_hook",
           "broadcast_model", "shard_indices", "ShardedBatches", "GradientAverager", "DataParallel", "barrier",
           "setup_fit", "stats", "launched", "limit_threads_per_rank", "ranks_on_this_node", "Options",
           "BatchNormGroup", "combine_moments", "cuda_aware_mpi", "plan_buckets", "abort_if_several_ranks"]

_INSTALL = "pip install magmadnn[mpi] (mpi4py with an MPICH wheel), or mpi4py built against your cluster's MPI"


class MPIUnavailableError(ImportError):
    """mpi4py (or an MPI library under it) is not installed."""


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise MPIUnavailableError(f"distributed training needs mpi4py: {_INSTALL} ({exc})") from None
    return MPI


def is_available() -> bool:
    """Whether mpi4py and an MPI library load here."""
    try:
        _mpi()
    except (MPIUnavailableError, RuntimeError):
        return False
    return True


_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def launched() -> bool:
    """Whether an MPI launcher (mpiexec, srun) started this process, from its environment (MPI stays untouched)."""
    return any(name in os.environ for name in _LAUNCHER_VARS)


_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def ranks_on_this_node(default: int = 1) -> int:
    """How many ranks share this node, as the launcher says (``default`` when it does not)."""
    for name in _LOCAL_SIZE_VARS:
        if os.environ.get(name, "").isdigit():
            return max(1, int(os.environ[name]))
    return default


def limit_threads_per_rank(local_ranks: int | None = None) -> int | None:
    """Give each rank ``cores // ranks on the node`` BLAS/OpenMP threads (oversubscribed BLAS threads can make
    data-parallel runs an order of magnitude slower). Nothing is changed when the user set ``OMP_NUM_THREADS``,
    ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS``, or without threadpoolctl; returns the limit set, or None."""
    if any(name in os.environ for name in _THREAD_VARS):
        return None
    try:
        import threadpoolctl
    except ImportError:
        return None
    threads = max(1, (os.cpu_count() or 1) // (local_ranks or ranks_on_this_node()))
    threadpoolctl.threadpool_limits(threads)
    return threads


_hook_installed = False
_last = None  # for stats(): the DataParallel of the running fit(distributed=...), then its figures


def stats() -> dict:
    """Figures of the latest ``fit(distributed=...)`` on this rank: ranks, steps, seconds in the gradient reduction
    (packing, staging copies, Allreduce and the wait for the other ranks) and per step, gradient values (with the
    2-value header) and buckets, the staging, whether MPI was taken as CUDA-aware and why, and the synchronized
    BatchNorm collectives (calls, seconds)."""
    if _last is None:
        return {}
    return dict(_last) if isinstance(_last, dict) else _last.stats()


def init():
    """Initialize MPI (through mpi4py), install the abort-on-exception hook when there are several ranks; returns
    ``COMM_WORLD``."""
    world = _mpi().COMM_WORLD
    if world.Get_size() > 1:
        install_abort_hook()
    return world


def comm():
    """The world communicator (``init`` first)."""
    return init()


def rank() -> int:
    """This process's rank (0 without MPI installed)."""
    return init().Get_rank() if is_available() else 0


def size() -> int:
    """The number of ranks (1 without MPI installed)."""
    return init().Get_size() if is_available() else 1


def is_root() -> bool:
    return rank() == 0


def barrier() -> None:
    init().Barrier()


def install_abort_hook() -> None:
    """An uncaught exception prints ``[rank r]`` and the traceback on stderr, then aborts every rank (exit 1)."""
    global _hook_installed
    if _hook_installed:
        return
    MPI = _mpi()  # noqa: N806
    previous = sys.excepthook

    def hook(kind, value, tb):
        world = MPI.COMM_WORLD
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[rank {world.Get_rank()} of {world.Get_size()}] uncaught exception, aborting the job:\n"
                         f"{text}")
        sys.stderr.flush()
        if kind is KeyboardInterrupt or world.Get_size() == 1:
            previous(kind, value, tb)
            return
        world.Abort(1)

    sys.excepthook = hook
    _hook_installed = True


def abort_if_several_ranks(status: int) -> None:
    """When this process is one of several MPI ranks (mpi4py imported, MPI running): ``Abort(status)`` the whole
    job. For an error handled on one rank (a one-line message instead of a traceback): leaving alone, that rank
    would leave the others waiting in their next collective call for ever. Nothing happens without MPI."""
    MPI = sys.modules.get("mpi4py.MPI")  # noqa: N806  (never imported here)
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() == 1:
        return
    sys.stderr.flush()
    sys.stdout.flush()
    MPI.COMM_WORLD.Abort(status)


def _float_type(MPI, dtype):  # noqa: N803
    return {np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE}[np.dtype(dtype)]


def broadcast_model(model, root: int = 0, world=None) -> None:
    """Copy the weights and state arrays of ``root``'s model to every rank (one Bcast on a fused buffer)."""
    world = world or init()
    arrays = model.named_arrays()
    hosts = {k: np.asarray(model.xp.to_numpy(a)) for k, a in arrays.items()}
    total = sum(a.size for a in hosts.values())
    buffer = np.empty(total, dtype=model.dtype)
    offset = 0
    for a in hosts.values():
        buffer[offset:offset + a.size] = a.reshape(-1)
        offset += a.size
    world.Bcast([buffer, _float_type(_mpi(), model.dtype)], root=root)
    if world.Get_rank() != root:
        offset, out = 0, {}
        for key, a in hosts.items():
            out[key] = buffer[offset:offset + a.size].reshape(a.shape)
            offset += a.size
        model._assign(out, "broadcast_model")


def shard_indices(order: np.ndarray, batch_size: int, rank_: int, size_: int):
    """Per global batch of ``size_*batch_size`` samples of ``order``, the slice of rank ``rank_`` (maybe empty)."""
    step = batch_size * size_
    for start in range(0, len(order), step):
        chunk = order[start:start + step]
        yield chunk[rank_ * batch_size:(rank_ + 1) * batch_size]


class ShardedBatches:
    """Batches of in-memory arrays, one shard of each global batch per rank (see the module docstring)."""

    def __init__(self, xs, y, batch_size: int, shuffle: bool, rng, rank_: int, size_: int):
        self.xs, self.y, self.batch_size, self.shuffle, self.rng = xs, y, batch_size, shuffle, rng
        self.rank, self.size = rank_, size_
        self.n = xs[0].shape[0]

    def __len__(self):
        return -(-self.n // (self.batch_size * self.size))

    def __iter__(self):
        order = self.rng.permutation(self.n) if self.shuffle else np.arange(self.n)
        for index in shard_indices(order, self.batch_size, self.rank, self.size):
            yield [np.take(a, index, axis=0) for a in self.xs], self.y[index]


class Options:
    """How ``fit(..., distributed=Options(...))`` trains (``distributed=True`` takes the defaults).

    ``sync_batchnorm``: BatchNorm layers normalise with the statistics of the global batch (every rank's samples),
    as one process with batch ``N*b`` would, instead of each rank's own; costs one small Allgather per BatchNorm
    layer in the forward pass and one small Allreduce in the backward pass.
    ``bucket_mb``: the gradients are summed in buckets of at most this many MiB (one Allreduce each; a parameter
    larger than a bucket gets one of its own); ``None`` or ``math.inf``: one fused buffer.
    ``overlap``: start each bucket's nonblocking Allreduce (``Iallreduce``) during the backward pass as soon as its
    gradients are final, instead of after it (same results). Off by default: an MPI without an asynchronous progress
    engine advances the reduction only inside MPI calls, on the cores the backward pass is using (no gain measured
    with 2 ranks on 2 cores), and on a GPU each bucket's staging copy waits for the queue, stalling the kernels
    still to be issued. Worth trying where MPI progresses on its own (spare cores, offloading interconnects).
    ``cuda_aware``: whether the MPI library reads and writes GPU memory; None asks it (:func:`cuda_aware_mpi`). On a
    GPU backend a CUDA-aware MPI reduces the gradient buckets in device memory; otherwise they are staged through
    page-locked host buffers.
    """

    def __init__(self, sync_batchnorm: bool = False, bucket_mb: float | None = 25.0, overlap: bool = False,
                 cuda_aware: bool | None = None):
        if not isinstance(sync_batchnorm, (bool, np.bool_)) or not isinstance(overlap, (bool, np.bool_)):
            raise TypeError(f"Options: sync_batchnorm and overlap must be True or False, got {sync_batchnorm!r}, "
                            f"{overlap!r}")
        if bucket_mb is not None and (isinstance(bucket_mb, bool) or not isinstance(bucket_mb, numbers.Real)
                                      or not bucket_mb > 0):
            raise ValueError(f"Options: bucket_mb must be a positive number of MiB or None, got {bucket_mb!r}")
        if cuda_aware not in (None, True, False):
            raise TypeError(f"Options: cuda_aware must be None, True or False, got {cuda_aware!r}")
        self.sync_batchnorm, self.overlap, self.cuda_aware = bool(sync_batchnorm), bool(overlap), cuda_aware
        self.bucket_mb = math.inf if bucket_mb is None else float(bucket_mb)

    @property
    def bucket_bytes(self) -> float:
        return self.bucket_mb * 2**20

    def __repr__(self) -> str:
        return (f"Options(sync_batchnorm={self.sync_batchnorm}, bucket_mb={self.bucket_mb}, overlap={self.overlap}, "
                f"cuda_aware={self.cuda_aware})")


_CUDA_AWARE_VAR = "MAGMADNN_CUDA_AWARE_MPI"


def _alloc_kinds_have_cuda_device(kinds: str) -> bool:
    """Whether an MPI 4.1 ``mpi_memory_alloc_kinds`` value (``"mpi,system,cuda:device"``) admits CUDA device memory:
    a ``cuda`` kind without restrictors admits every CUDA memory, ``cuda:...`` the restrictors it names."""
    for kind in kinds.split(","):
        name, *restrictors = kind.strip().lower().split(":")
        if name == "cuda" and (not restrictors or "device" in restrictors):
            return True
    return False


def cuda_aware_mpi(world=None) -> tuple[bool, str]:
    """Whether the MPI library takes CUDA device buffers, and what said so.

    In order: ``MAGMADNN_CUDA_AWARE_MPI`` (``1``/``0``: you know better than the library); the MPI 4.1 info key
    ``mpi_memory_alloc_kinds`` of the communicator (MPICH 4.2+, Open MPI 6: a ``cuda`` kind); the
    ``MPIX_Query_cuda_support()`` extension (MPICH 4+, Open MPI); else False."""
    value = os.environ.get(_CUDA_AWARE_VAR, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True, f"{_CUDA_AWARE_VAR}={value}"
    if value in ("0", "false", "no", "off"):
        return False, f"{_CUDA_AWARE_VAR}={value}"
    MPI = _mpi()  # noqa: N806
    world = world or init()
    try:
        info = world.Get_info()
        try:
            kinds = info.Get("mpi_memory_alloc_kinds")
        finally:
            info.Free()
    except Exception:  # noqa: BLE001  (an MPI before 4.1: no such key)
        kinds = None
    if kinds is not None and _alloc_kinds_have_cuda_device(kinds):
        return True, f"mpi_memory_alloc_kinds={kinds}"
    try:
        import ctypes

        query = ctypes.CDLL(MPI.__file__).MPIX_Query_cuda_support  # found in the MPI library the module links
        query.restype = ctypes.c_int
        if query() == 1:
            return True, "MPIX_Query_cuda_support()=1"
        return False, "MPIX_Query_cuda_support()=0" + (f", mpi_memory_alloc_kinds={kinds}" if kinds else "")
    except (OSError, AttributeError):
        pass
    return False, f"mpi_memory_alloc_kinds={kinds}" if kinds else "the MPI library reports no CUDA support"


_COMMS: dict = {}


def _dup(world, purpose: str):
    """A duplicate of ``world`` for one purpose, made once per process (a collective call the first time), so that
    the gradient buckets, the batch-norm statistics and fit's own collectives never share a message context."""
    key = (world.py2f(), purpose)
    if key not in _COMMS:
        _COMMS[key] = world.Dup()
    return _COMMS[key]


def combine_moments(counts, means, m2s):
    """Per-channel count, mean and sum of squared deviations of the union of groups (rows), in row order:
    ``mean = sum(n_r mean_r) / n``, ``m2 = sum(m2_r + n_r (mean_r - mean)^2)`` (exact for exact inputs, no
    cancellation of large sums of squares). Returns ``(n, mean, m2)``; zeros when every count is 0."""
    counts = np.asarray(counts, dtype=np.float64).reshape(-1, 1)
    means, m2s = np.asarray(means, dtype=np.float64), np.asarray(m2s, dtype=np.float64)
    total = float(counts.sum())
    if total == 0:
        return 0, np.zeros(means.shape[1]), np.zeros(means.shape[1])
    mean = (counts * means).sum(axis=0) / total
    m2 = (m2s + counts * np.square(means - mean)).sum(axis=0)
    return int(round(total)), mean, m2


class BatchNormGroup:
    """The ranks of a communicator normalising with shared batch statistics: ``F.batch_norm(..., sync=group)``
    (what ``Options(sync_batchnorm=True)`` gives every BatchNorm layer during a training step).

    ``weight``: this rank's share of the global loss in the current step (its sample count for a mean-reduced
    loss, 1 for a sum-reduced one, 0 for a rank without samples; 1, as every rank's loss counts alike, when used by
    hand). ``moments`` gathers every rank's per-channel ``(count, mean, m2)`` (one Allgather) and combines them
    in rank order (:func:`combine_moments`), so every rank gets bit-identical statistics; ``sum`` is one Allreduce.
    """

    def __init__(self, world=None):
        self.comm = world or init()
        self.MPI = _mpi()
        self.size = self.comm.Get_size()
        self.weight = 1.0
        self.seconds, self.calls = 0.0, 0

    def moments(self, count: int, mean: np.ndarray, m2: np.ndarray):
        start = time.perf_counter()
        c = int(np.size(mean))
        local = np.concatenate([[float(count)], np.asarray(mean, np.float64).reshape(-1),
                                np.asarray(m2, np.float64).reshape(-1)])
        rows = np.empty((self.size, local.size))
        self.comm.Allgather([local, self.MPI.DOUBLE], [rows, self.MPI.DOUBLE])
        out = combine_moments(rows[:, 0], rows[:, 1:1 + c], rows[:, 1 + c:])
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out

    def sum(self, values: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        out = np.array(values, dtype=np.float64, copy=True)
        self.comm.Allreduce(self.MPI.IN_PLACE, [out, self.MPI.DOUBLE], op=self.MPI.SUM)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


class _Bucket:
    """Consecutive gradients (``params`` positions, sizes) in one flat buffer; the last bucket starts with the header
    ``[w*loss, w]`` (read back alone from a device buffer)."""

    def __init__(self, positions, sizes, header: bool):
        self.positions, self.sizes, self.header = list(positions), list(sizes), header
        self.offsets = (np.concatenate([[0], np.cumsum(self.sizes)]) + (2 if header else 0)).astype(int)
        self.values = int(self.offsets[-1])
        self.buffer = None


def plan_buckets(sizes, itemsize: int, bucket_bytes: float) -> list[list[int]]:
    """Parameter positions per bucket: the parameters in reverse order (the backward pass finishes the last layer's
    gradients first), each bucket filled up to ``bucket_bytes`` (a parameter larger than that alone), the last
    bucket also holding the 2-value header."""
    buckets, current, used = [], [], 0
    for position in reversed(range(len(sizes))):
        nbytes = sizes[position] * itemsize
        if current and used + nbytes > bucket_bytes:
            buckets.append(current)
            current, used = [], 0
        current.append(position)
        used += nbytes
    buckets.append(current)
    return buckets


class GradientAverager:
    """The gradients and loss of every rank summed by Allreduce, in buckets of at most ``bucket_bytes``.

    Each bucket is one flat buffer ``[w*g_i, ...]`` (the last one starts with ``[w*loss, w]``) summed over the ranks in
    place; ``w`` is the rank's sample count for a mean-reduced loss (1 for a sum-reduced one, 0 for an empty shard),
    so the result is the gradient and loss of the union of the shards. Buckets are reduced in one order on every
    rank (the sum of each value over the ranks does not depend on the bucketing: with 2 ranks the result is
    bit-identical to one fused buffer; with more, the MPI library may pick another summation order for another
    message size, equal to rounding).

    Staging (``xp``: the model's backend, the host when None): on the host backend the buffers are NumPy arrays the
    gradients are copied into (and read back from as views); on a backend with ``host_empty``/``copy_to_host`` (the
    GPU backend) they are page-locked host buffers; with ``direct`` (a CUDA-aware MPI and a backend with
    ``flat_pack``/``flat_unpack``) they are device arrays handed to MPI by address. ``overlap``: ``ready(leaf)``
    (the autograd hook) posts each bucket's ``Iallreduce`` as soon as its gradients are final, buckets in order;
    ``finish`` posts the rest and waits. ``seconds`` accumulates the time spent packing, reducing and unpacking (the
    wait for the other ranks included), ``steps`` counts the steps.
    """

    def __init__(self, params, dtype, world, xp=None, bucket_bytes: float = math.inf, overlap: bool = False,
                 direct: bool = False):
        from . import backend

        self.world, self.MPI, self.xp = world, _mpi(), backend.get("host") if xp is None else xp
        self.params = list(params)
        self.dtype = np.dtype(dtype)
        self.shapes = [tuple(p.data.shape) for p in self.params]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.index = {id(p): i for i, p in enumerate(self.params)}
        plan = plan_buckets(self.sizes, self.dtype.itemsize, bucket_bytes)
        self.buckets = [_Bucket(pos, [self.sizes[i] for i in pos], header=k == len(plan) - 1)
                        for k, pos in enumerate(plan)]
        self.mpi_type = _float_type(self.MPI, dtype)
        self.overlap, self.direct = bool(overlap), bool(direct)
        pinned = xp is not None and hasattr(xp, "host_empty") and hasattr(xp, "copy_to_host")
        for b in self.buckets:
            if self.direct:
                b.buffer = xp.zeros((b.values,), self.dtype)
            elif pinned:
                b.buffer = xp.host_empty((b.values,), self.dtype)
                b.buffer[:] = 0
            else:
                b.buffer = np.zeros(b.values, dtype=self.dtype)
        self.staging = ("device buffers (CUDA-aware MPI)" if self.direct else
                        "page-locked host buffers" if pinned else "host buffers")
        self._copy_to_host = xp.copy_to_host if pinned and not self.direct else None
        self.seconds, self.steps = 0.0, 0
        self._ready: set[int] = set()
        self._next, self._requests = 0, []
        self._weight, self._loss = 0.0, None

    @property
    def buffer_values(self) -> int:
        return sum(b.values for b in self.buckets)

    # -- one step: start, ready (from the backward pass, with overlap), finish
    def start(self, weight: float, loss=None) -> None:
        """A new step: this rank's weight and its loss (a 0-d backend array, read when the last bucket is packed)."""
        self._weight, self._loss = float(weight), loss
        self._ready, self._next, self._requests = set(), 0, []

    def ready(self, leaf) -> None:
        """Autograd hook: ``leaf``'s gradient is final; post every bucket (in order) whose gradients all are."""
        start = time.perf_counter()
        position = self.index.get(id(leaf))
        if position is not None:
            self._ready.add(position)
            while self._next < len(self.buckets) and all(i in self._ready for i in self.buckets[self._next].positions):
                self._post(self._next, nonblocking=True)
                self._next += 1
            if self._requests:
                self.MPI.Request.Testall(self._requests)  # lets MPI progress the posted ones
        self.seconds += time.perf_counter() - start

    def _pack(self, b: _Bucket) -> None:
        xp, w = self.xp, self._weight
        grads = [self.params[i].grad for i in b.positions]
        loss = 0.0
        if b.header and w:
            loss = float(np.asarray(xp.to_numpy(self._loss))) if self._loss is not None else 0.0
        if self.direct:
            arrays = [g if w and g is not None else xp.zeros(self.shapes[i], self.dtype)
                      for i, g in zip(b.positions, grads)]
            if b.header:
                arrays.insert(0, xp.asarray(np.array([loss, 1.0] if w else [0.0, 0.0], dtype=self.dtype)))
            xp.flat_pack(arrays, w, b.buffer)  # returns with the buffer written: MPI may read it
            return
        buf, off = b.buffer, b.offsets
        for k, g in enumerate(grads):
            part = buf[off[k]:off[k + 1]]
            if g is None or w == 0:
                part[:] = 0
            elif self._copy_to_host is not None:
                self._copy_to_host(g, part)
                if w != 1:
                    part *= w
            else:
                np.multiply(np.asarray(xp.to_numpy(g)).reshape(-1), w, out=part)
        if b.header:
            buf[0] = loss * w if w else 0.0
            buf[1] = w

    def _target(self, b: _Bucket):
        if self.direct:  # the device memory itself, by address (the CUDA array interface's pointer)
            ptr = b.buffer.__cuda_array_interface__["data"][0]
            return [self.MPI.buffer.fromaddress(ptr, b.values * self.dtype.itemsize), self.mpi_type]
        return [b.buffer, self.mpi_type]

    def _post(self, k: int, nonblocking: bool) -> None:
        b = self.buckets[k]
        self._pack(b)
        if nonblocking:
            self._requests.append(self.world.Iallreduce(self.MPI.IN_PLACE, self._target(b), op=self.MPI.SUM))
        else:
            self.world.Allreduce(self.MPI.IN_PLACE, self._target(b), op=self.MPI.SUM)

    def finish(self, mean: bool):
        """Post the buckets not posted yet, wait for all -> ``(gradients of all ranks, loss of all ranks)``."""
        start = time.perf_counter()
        for k in range(self._next, len(self.buckets)):
            self._post(k, nonblocking=self.overlap)
        self._next = len(self.buckets)
        if self._requests:
            self.MPI.Request.Waitall(self._requests)
        self._requests = []
        out = self._unpack(mean)
        self.seconds += time.perf_counter() - start
        self.steps += 1
        self._loss = None
        return out

    def _unpack(self, mean: bool):
        xp, last = self.xp, self.buckets[-1]
        grads = [None] * len(self.params)
        if self.direct:
            loss, total = np.asarray(xp.to_numpy(xp.flat_unpack(last.buffer, [(2,)], 1.0)[0])).tolist()
            divisor = total if mean and total > 0 else 1.0
            for b in self.buckets:
                shapes = [(2,)] * b.header + [self.shapes[i] for i in b.positions]
                for i, g in zip(b.positions, xp.flat_unpack(b.buffer, shapes, divisor)[int(b.header):]):
                    grads[i] = g
            return grads, loss / divisor
        total = float(last.buffer[1])
        for b in self.buckets:
            if mean and total > 0:
                b.buffer /= total
            for k, i in enumerate(b.positions):
                grads[i] = xp.asarray(b.buffer[b.offsets[k]:b.offsets[k + 1]].reshape(self.shapes[i]))
        return grads, float(last.buffer[0])


class DataParallel:
    """What ``fit(..., distributed=True | Options(...))`` attaches to a model for the length of the call."""

    def __init__(self, model, world=None, options: Options | None = None):
        from .layers import BatchNorm

        self.world = world or init()
        self.options = options = options or Options()
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        xp = model.xp
        if options.cuda_aware is None:
            self.cuda_aware, self.cuda_aware_source = cuda_aware_mpi(self.world)
        else:
            self.cuda_aware, self.cuda_aware_source = options.cuda_aware, "Options(cuda_aware=...)"
        direct = self.cuda_aware and hasattr(xp, "flat_pack") and hasattr(xp, "flat_unpack")
        self.averager = GradientAverager(model.parameters(), model.dtype, _dup(self.world, "gradients"), xp=xp,
                                         bucket_bytes=options.bucket_bytes, overlap=options.overlap, direct=direct)
        self.batchnorms = [layer for layer in model.layers if isinstance(layer, BatchNorm)]
        self.group = (BatchNormGroup(_dup(self.world, "batchnorm"))
                      if options.sync_batchnorm and self.batchnorms else None)
        if self.size > 1:
            self.threads = limit_threads_per_rank(ranks_on_this_node(default=self.size))
        global _last
        _last = self

    def stats(self) -> dict:
        a, group = self.averager, self.group
        return {"ranks": self.size, "steps": a.steps, "allreduce_seconds": a.seconds,
                "allreduce_ms_per_step": 1e3 * a.seconds / a.steps if a.steps else float("nan"),
                "buffer_values": a.buffer_values, "buckets": len(a.buckets), "overlap": a.overlap,
                "staging": a.staging, "cuda_aware_mpi": bool(self.cuda_aware),
                "cuda_aware_source": self.cuda_aware_source,
                "sync_batchnorm": group is not None, "batchnorm_sync_calls": group.calls if group else 0,
                "batchnorm_sync_seconds": group.seconds if group else 0.0}

    def close(self) -> None:
        """The end of fit: ``stats()`` keeps the figures only, not the model's tensors nor the gradient buffers."""
        global _last
        if _last is self:
            _last = self.stats()

    # -- fit set-up
    def prepare(self, model, n_train: int):
        """Broadcast weights and the shuffling stream from rank 0; check every rank has the same sample count."""
        counts = self.world.allgather(int(n_train))
        if len(set(counts)) != 1:
            raise ValueError(f"fit(distributed=True): every rank must pass the same training set, got sample "
                             f"counts {counts} on ranks 0..{self.size - 1}")
        broadcast_model(model, world=self.world)
        model._shuffle_rng.bit_generator.state = self.world.bcast(model._shuffle_rng.bit_generator.state, root=0)

    def batches(self, xs, y, batch_size, shuffle, rng):
        return ShardedBatches(xs, y, batch_size, shuffle, rng, self.rank, self.size)

    def shard(self, validation_data):
        """This rank's contiguous part of ``(x_val, y_val)`` (the tallies are summed over the ranks)."""
        xs, y = validation_data
        bounds = np.linspace(0, len(y), self.size + 1).astype(int)
        lo, hi = bounds[self.rank], bounds[self.rank + 1]
        return [a[lo:hi] for a in xs], y[lo:hi]

    def callbacks(self, callbacks):
        """The callbacks this rank runs: all on rank 0, the others without the ones that write files."""
        from .callbacks import CSVLogger, ModelCheckpoint

        if self.rank == 0:
            return list(callbacks or [])
        return [cb for cb in callbacks or [] if not isinstance(cb, (CSVLogger, ModelCheckpoint))]

    # -- collective pieces of the training loop
    def reduce_tally(self, sums: np.ndarray, counts: dict):
        """Sums and sample counts of every rank (one Allreduce)."""
        MPI = _mpi()  # noqa: N806
        names = list(counts)
        buf = np.concatenate([np.asarray(sums, dtype=np.float64).reshape(-1),
                              np.array([counts[k] for k in names], dtype=np.float64)])
        self.world.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE], op=MPI.SUM)
        k = len(names)
        return buf[:k], {name: int(round(buf[k + i])) for i, name in enumerate(names)}

    def train_step(self, model, xs, y, check: bool, tally=None):
        """``Model._train_step`` with the gradients (and the loss) averaged over the ranks before the update.

        A non-finite global loss applies nothing on any rank (BatchNorm statistics restored when ``check``). With
        synchronized BatchNorm a rank without samples runs a one-sample stand-in batch of zeros with weight 0: it
        counts for nothing but takes part in the layers' collectives, in the same order as the other ranks."""
        xp, params, averager = model.xp, model.parameters(), self.averager
        m = int(y.shape[0])
        mean = model.loss.reduction != "sum"
        weight = (m if mean else 1.0) if m else 0.0
        stateful = [layer for layer in model.layers if layer._state] if check else []
        saved = [{k: xp.copy(a) for k, a in layer._state.items()} for layer in stateful]
        run = m or self.group is not None
        if run and not m:
            xs = [np.zeros((1, *a.shape[1:]), dtype=a.dtype) for a in xs]
            y_run = np.zeros((1, *y.shape[1:]), dtype=y.dtype)
        else:
            y_run = y
        if self.group is not None:
            self.group.weight = weight
            for layer in self.batchnorms:
                layer.sync = self.group
        try:
            if run:
                outputs = model._forward([model._to_tensor(a) for a in xs], training=True)
                loss = model._loss_of(outputs, y_run)
                averager.start(weight, loss.data if m else None)
                loss.backward(on_leaf_ready=averager.ready if averager.overlap else None)
            else:
                averager.start(weight, None)
        finally:
            for layer in self.batchnorms:
                layer.sync = None
        averaged, value = averager.finish(mean)
        if math.isfinite(value):
            for p, g in zip(params, averaged):
                p.grad = g
            model.optimizer.step(params)
        else:  # applied nowhere; the device path finds it in the tally at its next read and replays from there
            for layer, state in zip(stateful, saved):
                layer._state.update(state)
        for p in params:
            p.grad = None
        if tally is not None and m:
            model._tally_batch(tally, "", loss.data, outputs.data, y)
        return value if check else None


def setup_fit(model, batches, validation_data, callbacks, verbose, options: Options | None = None):
    """``fit(distributed=True | Options)``'s set-up: ``(batches, validation_data, callbacks, verbose, DataParallel)``
    for this rank (the shard of each global batch, its part of the validation set, rank 0's printing and file
    writing)."""
    if not all(hasattr(batches, a) for a in ("xs", "y", "batch_size", "shuffle", "rng")):
        raise ValueError("fit(distributed=True) needs in-memory arrays x, y (not a batch iterable): every rank "
                         "passes the whole training set and takes its shard of each batch")
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"fit: distributed must be True, False or a magmadnn.distributed.Options, got {options!r}")
    parallel = DataParallel(model, options=options)
    try:
        parallel.prepare(model, batches.n)
    except BaseException:
        parallel.close()
        raise
    sharded = parallel.batches(batches.xs, batches.y, batches.batch_size, batches.shuffle, batches.rng)
    if validation_data is not None:
        validation_data = parallel.shard(validation_data)
    return sharded, validation_data, parallel.callbacks(callbacks), verbose if parallel.rank == 0 else 0, parallel
