"""Synchronized BatchNorm: the ranks of a communicator normalise with the statistics of the global batch.

``Options(sync_batchnorm=True)`` gives every BatchNorm layer a :class:`BatchNormGroup` for the length of a training
step (``layer.sync``); the layer passes it to ``functional.batch_norm(..., sync=group)``, whose autograd function
(``functional.SyncBatchNormTrainFunction``, written against the op set like every Function, so every backend runs it)
asks the group for the two collectives: ``moments`` in the forward pass (every rank's per-channel count, mean and sum
of squared deviations by one Allgather, combined in rank order so that every rank gets the same values) and ``sum``
in the backward pass (the two per-channel gradient sums, one Allreduce), each rank's weighted by its share of the
loss.
"""

from __future__ import annotations

import time

import numpy as np

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
