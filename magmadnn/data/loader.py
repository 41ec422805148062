"""DataLoader: mini-batches of NumPy arrays with seeded shuffling."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import _checks


class DataLoader:
    """Iterate over ``(x_batch, y_batch)`` NumPy arrays of at most `batch_size` samples.

    With ``shuffle=True`` every pass draws a new permutation from a generator seeded once with `seed`, so the
    sequence of epochs is reproducible for a given seed. ``drop_last=True`` skips a final short batch.
    `y` may be None, then batches are ``(x_batch, None)``; with ``sample_weight`` (one per sample) they are Keras'
    ``(x_batch, y_batch, sample_weight_batch)``.
    """

    def __init__(self, x, y=None, batch_size: int = 32, shuffle: bool = True, seed: int | None = None,
                 drop_last: bool = False, sample_weight=None):
        self.x = np.asarray(x)
        self.y = None if y is None else np.asarray(y)
        self.sample_weight = None if sample_weight is None else np.asarray(sample_weight)
        if self.sample_weight is not None and (self.y is None or len(self.sample_weight) != len(self.x)):
            raise ValueError("DataLoader: sample_weight needs y and one weight per sample of x "
                             f"({len(self.x)}), got {None if self.y is None else len(self.sample_weight)}")
        batch_size = _checks.integer(batch_size, "batch_size", "DataLoader", minimum=1)
        for name, flag in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"DataLoader: {name} must be True or False, got {flag!r}")
        if self.x.ndim == 0:
            raise ValueError("DataLoader: x must have a leading sample dimension, got a scalar")
        if self.y is not None and len(self.y) != len(self.x):
            raise ValueError(f"DataLoader: x has {len(self.x)} samples but y has {len(self.y)}")
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    @property
    def num_samples(self) -> int:
        return len(self.x)

    def __len__(self) -> int:
        """Number of batches in one pass."""
        full, rest = divmod(self.num_samples, self.batch_size)
        return full if self.drop_last or rest == 0 else full + 1

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        order = self._rng.permutation(self.num_samples) if self.shuffle else None
        for b in range(len(self)):
            index = slice(b * self.batch_size, (b + 1) * self.batch_size)
            if order is not None:
                index = order[index]
            if self.sample_weight is not None:
                yield self.x[index], self.y[index], self.sample_weight[index]
            else:
                yield self.x[index], None if self.y is None else self.y[index]
