"""Sequences of different lengths in batches of few shapes: each distinct batch shape is one captured graph under
``compile(graph=True)`` (and one set of cached device plans), so bounding the shapes bounds the graphs.

``pad_to_multiple(x, multiple)`` pads one array's time axis up to a multiple; ``LengthBuckets(sequences, y,
batch_size, multiple=8)`` is a batch iterable for ``fit`` / ``evaluate`` that sorts sequences by length into
batches, each padded only up to the next multiple of ``multiple`` of its longest sequence: at most
``ceil(longest / multiple)`` time lengths, hence graphs per batch size. Pad with the value a mask reads as padding
(0 for ``Embedding(mask_zero=True)``).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import integer

__all__ = ["pad_to_multiple", "LengthBuckets"]


def pad_to_multiple(x, multiple: int, axis: int = 1, value=0):
    """``x`` padded with ``value`` at the end of ``axis`` up to the next multiple of ``multiple``."""
    multiple = integer(multiple, "multiple", "pad_to_multiple", minimum=1)
    x = np.asarray(x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"pad_to_multiple: axis {axis} is out of range for an array of shape {x.shape}")
    size = x.shape[axis]
    extra = -size % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths, constant_values=value)


class LengthBuckets:
    """A batch iterable of ``(x, y)``: ``sequences`` (a list of arrays of shape (time, ...) with any time, or int
    ids (time,)) sorted by length into batches of ``batch_size``, each padded at its end with ``value`` up to the
    next multiple of ``multiple`` of its longest sequence; the batch order is shuffled every pass (``seed``) unless
    ``shuffle=False``. ``y``: one target per sequence (an array, first axis the sequences)."""

    def __init__(self, sequences, y, batch_size: int = 32, multiple: int = 8, value=0, shuffle: bool = True,
                 seed: int = 0):
        who = "LengthBuckets"
        self.sequences = [np.asarray(s) for s in sequences]
        if not self.sequences:
            raise ValueError(f"{who}: no sequences")
        ranks = {s.ndim for s in self.sequences}
        if len(ranks) != 1 or 0 in ranks:
            raise ValueError(f"{who}: every sequence must be an array (time, ...) of one rank, got ranks "
                             f"{sorted(ranks)}")
        self.y = np.asarray(y)
        if self.y.shape[:1] != (len(self.sequences),):
            raise ValueError(f"{who}: y must hold one target per sequence ({len(self.sequences)}), got shape "
                             f"{self.y.shape}")
        self.batch_size = integer(batch_size, "batch_size", who, minimum=1)
        self.multiple = integer(multiple, "multiple", who, minimum=1)
        self.value, self.shuffle = value, bool(shuffle)
        self.rng = np.random.default_rng(seed)
        order = np.argsort([len(s) for s in self.sequences], kind="stable")
        self.batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def lengths(self) -> list[int]:
        """The padded time length of each batch (sorted order)."""
        return [self._length(index) for index in self.batches]

    def _length(self, index) -> int:
        longest = max(len(self.sequences[i]) for i in index)
        return max(self.multiple, math.ceil(longest / self.multiple) * self.multiple)

    def __iter__(self):
        order = self.rng.permutation(len(self.batches)) if self.shuffle else range(len(self.batches))
        for b in order:
            index = self.batches[b]
            length = self._length(index)
            first = self.sequences[index[0]]
            x = np.full((len(index), length, *first.shape[1:]), self.value, dtype=first.dtype)
            for row, i in enumerate(index):
                x[row, :len(self.sequences[i])] = self.sequences[i]
            yield x, self.y[index]
