"""Synchronized BatchNorm: the ranks of a communicator normalise with the statistics of the global batch.

``Options(sync_batchnorm=True)`` gives every BatchNorm layer a :class:`BatchNormGroup` for the length of a training
step (``layer.sync``); the layer passes it to ``functional.batch_norm(..., sync=group)``, whose autograd function
(:class:`SyncBatchNormTrainFunction` below, written against the op set like every Function, so every backend runs it)
asks the group for the two collectives: ``moments`` in the forward pass (every rank's per-channel count, mean and sum
of squared deviations by one Allgather, combined in rank order so that every rank gets the same values) and ``sum``
in the backward pass (the two per-channel gradient sums, one Allreduce), each rank's weighted by its share of the
loss.
"""

from __future__ import annotations

import time

import numpy as np

from .. import functional
from ..autograd import Function
from .environment import _mpi, init

__all__ = ["BatchNormGroup", "combine_moments"]


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


class SyncBatchNormTrainFunction(Function):
    """Batch norm with the statistics of the global batch of a data-parallel group (``batch_norm(sync=group)``).

    Written against the op set only, so every backend runs the same code: per-channel count, mean and sum of
    squared deviations of the local batch (``channel_sum``), combined over the ranks on the host by
    ``group.moments``; the output is ``batch_norm_infer`` with the global mean and biased variance; the running
    statistics move by the op-set rule in place (``running_stat_update``).
    Backward: the two per-channel sums (of dy and of dy * xhat) are summed over the ranks by ``group.sum``, each
    rank's weighted by ``group.weight`` (its share of the global loss; see :mod:`magmadnn.distributed`).
    A rank whose weight is 0 runs a stand-in batch: it counts for nothing but takes part in every collective.
    """

    def forward(self, x, gamma, beta, running_mean, running_var, momentum, eps, sync, unbiased=True):
        xp, c = self.xp, x.shape[1]
        shape = (1, c) + (1,) * (x.ndim - 2)
        n = x.size // c if sync.weight else 0
        local_mean, local_m2 = np.zeros(c), np.zeros(c)
        if n:
            mean = xp.divide(xp.channel_sum(x), float(n))
            centered = xp.subtract(x, xp.reshape(mean, shape))
            local_mean = np.asarray(xp.to_numpy(mean), dtype=np.float64).reshape(c)
            local_m2 = np.asarray(xp.to_numpy(xp.channel_sum(xp.multiply(centered, centered))), np.float64).reshape(c)
        count, mean, m2 = sync.moments(n, local_mean, local_m2)
        if count < 2:
            raise ValueError(f"batch_norm: training needs more than one value per channel over the ranks, got {count}")
        var = m2 / count
        dtype = x.dtype
        self.x, self.gamma, self.sync, self.count, self.shape = x, gamma, sync, count, shape
        self.mean = xp.asarray(mean.astype(dtype))
        self.inv_std = xp.asarray((1.0 / np.sqrt(var + eps)).astype(dtype))
        y = xp.batch_norm_infer(x, gamma, beta, self.mean, xp.asarray(var.astype(dtype)), eps)
        batch_var = m2 / (count - 1 if unbiased else count)
        for running, batch in ((running_mean, self.mean), (running_var, xp.asarray(batch_var.astype(dtype)))):
            xp.running_stat_update(running, batch, momentum)
        return y

    def backward(self, g):
        xp, need, sync, shape = self.xp, self.needs_input_grad, self.sync, self.shape
        xhat = xp.multiply(xp.subtract(self.x, xp.reshape(self.mean, shape)), xp.reshape(self.inv_std, shape))
        dbeta = xp.bias_grad(g)
        dgamma = xp.channel_sum(xp.multiply(g, xhat))
        gx = None
        if need[0]:  # the same on every rank (one graph), so every rank joins this sum or none does
            local = np.stack([np.asarray(xp.to_numpy(a), dtype=np.float64).reshape(-1) for a in (dbeta, dgamma)])
            total = sync.sum(local * sync.weight)
            if sync.weight:
                a, b = (xp.reshape(xp.asarray((t / (sync.weight * self.count)).astype(g.dtype)), shape) for t in total)
                scale = xp.reshape(xp.multiply(self.gamma, self.inv_std), shape)
                gx = xp.multiply(xp.subtract(xp.subtract(g, a), xp.multiply(xhat, b)), scale)
            else:
                gx = xp.zeros_like(g)
        return gx, (dgamma if need[1] else None), (dbeta if need[2] else None)


functional.register_sync_batch_norm(SyncBatchNormTrainFunction)
