"""Data-parallel training over MPI (mpi4py): ``model.fit(x, y, batch_size=b, distributed=True)``.

Run the same script on every rank (``mpiexec -n N python train.py``). With ``distributed=True`` fit

* broadcasts rank 0's weights, state arrays (BatchNorm statistics) and shuffling stream to every rank at its start;
* gives each rank a disjoint shard of every global batch: the epoch order is one permutation drawn from the shared
  stream (the same one a single process would draw), global batch ``k`` is ``order[k*N*b : (k+1)*N*b]`` and rank
  ``r`` takes its ``r``-th slice of ``b`` samples; the last, uneven global batch is split the same way (a rank may
  get fewer samples, or none: it still takes part in the reduction with weight 0);
* averages the gradients with ONE in-place ``Allreduce`` per step on a flat fused host buffer holding every
  gradient (weighted by the rank's sample count), the weighted batch loss and the sample count, so that N ranks
  with per-rank batch ``b`` take exactly the steps of one process with batch ``N*b`` on the same order;
* sums the running loss/metric tallies (and validation, sharded over the ranks) over every rank at each read, so
  every rank logs the same global figures and callbacks such as EarlyStopping decide alike; progress updates are
  read at epoch end only (a timed read would be a collective call at a different batch on each rank);
* prints the progress bar on rank 0 only and runs the file-writing callbacks (ModelCheckpoint, CSVLogger) there only;
* with several ranks, limits each rank's BLAS/OpenMP threads to ``cores // ranks on the node`` unless the user set
  ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` (see ``limit_threads_per_rank``).

Backends: the fused buffer is host memory. On the host backend gradients are copied into it and read back as views;
on the device backend they are staged through host memory (``to_numpy``/``asarray``), as CUDA-aware MPI is not
assumed. BatchNorm statistics are local to each rank (each normalizes its own shard; running statistics are rank
0's when it saves). Dropout streams are identical on every rank. Resume: every rank calls ``load_checkpoint`` on the
same file before ``fit(..., distributed=True)``.

Faults: :func:`install_abort_hook` (called by ``init``) makes an uncaught exception on any rank print that rank's
traceback and ``MPI.COMM_WORLD.Abort(1)`` the whole job instead of leaving the other ranks blocked in a collective.

Without mpi4py importing this module still works; ``is_available()`` is False and anything that needs MPI raises
:class:`MPIUnavailableError` naming ``pip install magmadnn[mpi]``.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback

import numpy as np

__all__ = ["MPIUnavailableError", "is_available", "init", "comm", "rank", "size", "is_root", "install_abort_hook",
           "broadcast_model", "shard_indices", "ShardedBatches", "GradientAverager", "DataParallel", "barrier",
           "setup_fit", "stats", "launched", "limit_threads_per_rank", "ranks_on_this_node"]

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
_last = None  # the DataParallel of the latest fit(distributed=True), for stats()


def stats() -> dict:
    """Figures of the latest ``fit(distributed=True)`` on this rank: ranks, steps, seconds in Allreduce (with the
    host staging copies) and per step, fused buffer size in values."""
    if _last is None:
        return {}
    a = _last.averager
    return {"ranks": _last.size, "steps": a.steps, "allreduce_seconds": a.seconds,
            "allreduce_ms_per_step": 1e3 * a.seconds / a.steps if a.steps else float("nan"),
            "buffer_values": int(a.buffer.size)}


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


class GradientAverager:
    """One fused host buffer ``[w*g_1, ..., w*g_k, w*loss, w]`` summed over the ranks by one in-place Allreduce.

    ``w`` is the rank's sample count for a mean-reduced loss (1 for a sum-reduced one, 0 for an empty shard), so the
    result is the gradient and loss of the union of the shards. ``seconds`` accumulates the time spent in Allreduce
    (including the host staging copies), ``steps`` counts the calls.
    """

    def __init__(self, params, dtype, world):
        self.world, self.MPI = world, _mpi()
        self.shapes = [tuple(p.data.shape) for p in params]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.buffer = np.zeros(int(self.offsets[-1]) + 2, dtype=dtype)
        self.mpi_type = _float_type(self.MPI, dtype)
        self.seconds, self.steps = 0.0, 0

    def reduce(self, xp, grads, loss: float, weight: float, mean: bool):
        """Gradients (backend arrays or None) and the loss of this rank -> ``(grads, loss)`` of all ranks."""
        start = time.perf_counter()
        buf, off = self.buffer, self.offsets
        for i, g in enumerate(grads):
            part = buf[off[i]:off[i + 1]]
            if g is None or weight == 0:
                part[:] = 0
            else:
                np.multiply(np.asarray(xp.to_numpy(g)).reshape(-1), weight, out=part)
        buf[-2] = loss * weight if weight else 0.0
        buf[-1] = weight
        self.world.Allreduce(self.MPI.IN_PLACE, [buf, self.mpi_type], op=self.MPI.SUM)
        total = float(buf[-1])
        if mean and total > 0:
            buf /= total
        out = [xp.asarray(buf[off[i]:off[i + 1]].reshape(shape)) for i, shape in enumerate(self.shapes)]
        self.seconds += time.perf_counter() - start
        self.steps += 1
        return out, float(buf[-2])


class DataParallel:
    """What ``fit(..., distributed=True)`` attaches to a model for the length of the call."""

    def __init__(self, model, world=None):
        self.world = world or init()
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        self.averager = GradientAverager(model.parameters(), model.dtype, self.world)
        if self.size > 1:
            self.threads = limit_threads_per_rank(ranks_on_this_node(default=self.size))
        global _last
        _last = self

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

        A non-finite global loss applies nothing on any rank (BatchNorm statistics restored when ``check``)."""
        xp, params = model.xp, model.parameters()
        m = int(y.shape[0])
        mean = model.loss.reduction != "sum"
        stateful = [layer for layer in model.layers if layer._state] if check else []
        saved = [{k: xp.copy(a) for k, a in layer._state.items()} for layer in stateful]
        local = 0.0
        if m:
            outputs = model._forward([model._to_tensor(a) for a in xs], training=True)
            loss = model._loss_of(outputs, y)
            loss.backward()
            local = float(np.asarray(xp.to_numpy(loss.data)))
        weight = (m if mean else 1.0) if m else 0.0
        averaged, value = self.averager.reduce(xp, [p.grad for p in params], local, weight, mean)
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


def setup_fit(model, batches, validation_data, callbacks, verbose):
    """``fit(distributed=True)``'s set-up: ``(batches, validation_data, callbacks, verbose, DataParallel)`` for this
    rank (the shard of each global batch, its part of the validation set, rank 0's printing and file writing)."""
    if not all(hasattr(batches, a) for a in ("xs", "y", "batch_size", "shuffle", "rng")):
        raise ValueError("fit(distributed=True) needs in-memory arrays x, y (not a batch iterable): every rank "
                         "passes the whole training set and takes its shard of each batch")
    parallel = DataParallel(model)
    parallel.prepare(model, batches.n)
    sharded = parallel.batches(batches.xs, batches.y, batches.batch_size, batches.shuffle, batches.rng)
    if validation_data is not None:
        validation_data = parallel.shard(validation_data)
    return sharded, validation_data, parallel.callbacks(callbacks), verbose if parallel.rank == 0 else 0, parallel
