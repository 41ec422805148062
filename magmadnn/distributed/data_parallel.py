"""Data-parallel ``fit``: :class:`Options`, the set-up of ``fit(distributed=...)`` and the hook of its training step.

``setup_fit`` broadcasts rank 0's weights, state arrays and shuffling stream, gives this rank its shard of every
global batch (:mod:`.sharding`) and of the validation set, and keeps the progress bar and the file-writing callbacks
on rank 0. :class:`DataParallel` joins ``Model``'s one training step (``models.step.train_step``) through its
hook: the batch this rank runs, the BatchNorm group around forward and backward (:mod:`.sync_batchnorm`), and the
gradient reduction between backward and the update (:mod:`.buckets`); and sums the running tallies over the ranks.
"""

from __future__ import annotations

import math
import numbers
from contextlib import contextmanager

import numpy as np

from ..callbacks import CSVLogger, ModelCheckpoint
from ..layers import BatchNorm
from ..models.step import StepHook
from .buckets import GradientAverager
from .cuda_aware import cuda_aware_mpi
from .environment import _dup, _float_type, _mpi, init, limit_threads_per_rank, ranks_on_this_node
from .sharding import ShardedBatches
from .sync_batchnorm import BatchNormGroup

__all__ = ["Options", "DataParallel", "broadcast_model", "setup_fit", "stats"]

_last = None  # for stats(): the DataParallel of the running fit(distributed=...), then its figures


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


def stats() -> dict:
    """Figures of the latest ``fit(distributed=...)`` on this rank: ranks, steps, seconds in the gradient reduction
    (packing, staging copies, Allreduce and the wait for the other ranks) and per step, gradient values (with the
    2-value header) and buckets, the staging, whether MPI was taken as CUDA-aware and why, and the synchronized
    BatchNorm collectives (calls, seconds)."""
    if _last is None:
        return {}
    return dict(_last) if isinstance(_last, dict) else _last.stats()


class DataParallel(StepHook):
    """What ``fit(..., distributed=True | Options(...))`` attaches to a model for the length of the call: the set-up
    of the fit (broadcast, shards, callbacks) and the hook of its training step (a ``models.step.StepHook``)."""

    def __init__(self, model, world=None, options: Options | None = None):
        self.world = world or init()
        self.model = model
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
        self.model = None
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

    # -- the training step's hook (models.step.StepHook)
    @contextmanager
    def step(self, xs, y):
        """This rank's part of a step: its shard, or with synchronized BatchNorm and no samples a one-sample stand-in
        batch of zeros with weight 0 (it counts for nothing but takes part in the layers' collectives, in the same
        order as the other ranks), or None; the BatchNorm layers hold the group meanwhile."""
        m = int(y.shape[0])
        self._mean = mean = self.model.loss.reduction != "sum"
        self._weight = weight = (m if mean else 1.0) if m else 0.0
        self._counted = bool(m)
        if m:
            run = xs, y
        elif self.group is not None:
            run = ([np.zeros((1, *a.shape[1:]), dtype=a.dtype) for a in xs],
                   np.zeros((1, *y.shape[1:]), dtype=y.dtype))
        else:
            run = None
        if self.group is not None:
            self.group.weight = weight
            for layer in self.batchnorms:
                layer.sync = self.group
        try:
            yield run
        finally:
            for layer in self.batchnorms:
                layer.sync = None

    def backward_hook(self, loss):
        """Start the reduction with this rank's weight and loss; with overlap, the callback posting the buckets."""
        averager = self.averager
        averager.start(self._weight, loss.data if self._counted else None)
        return averager.ready if averager.overlap else None

    def reduce(self, params) -> float:
        """Every rank's gradients and loss summed (averaged for a mean-reduced loss) -> the global loss."""
        averaged, value = self.averager.finish(self._mean)
        for p, g in zip(params, averaged):
            p.grad = g
        return value


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
