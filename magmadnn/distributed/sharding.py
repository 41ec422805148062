"""Sharding: each rank's disjoint part of every global batch.

The epoch order is one permutation drawn from the shuffling stream all ranks share (the same one a single process
would draw); global batch ``k`` is ``order[k*N*b : (k+1)*N*b]`` and rank ``r`` takes its ``r``-th slice of ``b``
samples. The last, uneven global batch is split the same way: a rank may get fewer samples, or none.
"""

from __future__ import annotations

import numpy as np

__all__ = ["shard_indices", "ShardedBatches"]


def shard_indices(order: np.ndarray, batch_size: int, rank_: int, size_: int):
    """Per global batch of ``size_*batch_size`` samples of ``order``, the slice of rank ``rank_`` (maybe empty)."""
    step = batch_size * size_
    for start in range(0, len(order), step):
        chunk = order[start:start + step]
        yield chunk[rank_ * batch_size:(rank_ + 1) * batch_size]


class ShardedBatches:
    """Batches of in-memory arrays, one shard of each global batch per rank."""

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
