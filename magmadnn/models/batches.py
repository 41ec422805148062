"""Batch iterators of ``fit``: in-memory arrays (shuffled into buffers allocated once) and checked batch iterables."""

from __future__ import annotations

import numpy as np

from .._checks import finite_array

__all__ = ["ArrayBatches", "CheckedBatches", "is_batch_iterable", "unpack", "weighted"]


def unpack(item, who: str):
    """A batch of an iterable: Keras' ``(x, y)`` or ``(x, y, sample_weight)`` as ``(x, y, sample_weight or None)``."""
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return item[0], item[1], (item[2] if len(item) == 3 else None)
    size = f"{len(item)} items" if isinstance(item, (tuple, list)) else type(item).__name__
    raise ValueError(f"{who}: a batch iterable must yield (x, y) or (x, y, sample_weight), as Keras, got {size}")


def weighted(model, y, sample_weight, who: str):
    """``y`` with a batch's ``sample_weight`` attached (``y`` itself without one)."""
    if sample_weight is None:
        return y
    from .weighting import attach  # noqa: PLC0415 (weighting reads the loss module)

    return attach(model, y, sample_weight, None, who)


class CheckedBatches:
    """A batch iterable (DataLoader) for fit: inputs and targets checked once per fit when it exposes its arrays
    (``x``, ``y``), else per batch (host checks only; nothing is read from the device)."""

    def __init__(self, model, source):
        self.model, self.source = model, source
        self.whole = isinstance(getattr(source, "x", None), np.ndarray) and isinstance(getattr(source, "y", None),
                                                                                         np.ndarray)
        if self.whole:
            arrays = model._training_inputs(source.x, "fit")
            model._targets(source.y, arrays[0].shape[0], "fit")

    def __len__(self):
        return len(self.source)  # TypeError for an iterable without a length

    def __iter__(self):
        model = self.model
        for item in self.source:
            xb, yb, sw = unpack(item, "fit")
            if self.whole:
                xs = list(xb) if isinstance(xb, (list, tuple)) else [xb]
                yield model._cast_inputs([np.asarray(a) for a in xs]), weighted(model, np.asarray(yb), sw, "fit")
            else:
                xs = model._cast_inputs(model._training_inputs(xb, "fit"))
                yield xs, weighted(model, model._targets(yb, xs[0].shape[0], "fit"), sw, "fit")


def is_batch_iterable(x) -> bool:
    return not isinstance(x, (np.ndarray, list, tuple)) and hasattr(x, "__iter__") and not hasattr(x, "__array__")


class ArrayBatches:
    """Batches of in-memory arrays; shuffled batches are gathered into buffers allocated once per fit. ``check``:
    ``(input index, what it is)`` of the inputs whose values fit did not read before the first batch (found finite
    by an earlier fit: see ``_training_inputs``); each batch of those is checked as it is made (in cache, just
    gathered), before its step runs."""

    def __init__(self, xs, y, batch_size, shuffle, rng, check=()):
        self.xs, self.y, self.batch_size, self.shuffle, self.rng = xs, y, batch_size, shuffle, rng
        self.check = tuple(check)
        self.n = xs[0].shape[0]
        self.buffers = None
        self._prepared = {}  # prepared(): the targets as a loss prepares them, for fit's replay loop

    def __len__(self):
        return -(-self.n // self.batch_size)

    def __iter__(self):
        if not self.shuffle:
            for start in range(0, self.n, self.batch_size):
                stop = start + self.batch_size
                batch = [a[start:stop] for a in self.xs]
                for i, what in self.check:
                    finite_array(batch[i], what, "fit", start)
                yield batch, self.y[start:stop]
            return
        order = self.rng.permutation(self.n)
        if self.buffers is None:
            self.buffers = [np.empty((min(self.batch_size, self.n), *a.shape[1:]), dtype=a.dtype) for a in self.xs]
        for start in range(0, self.n, self.batch_size):
            index = order[start:start + self.batch_size]
            m = index.shape[0]
            batch = [a.take(index, axis=0, out=buf[:m], mode="clip") for a, buf in zip(self.xs, self.buffers)]
            for i, what in self.check:
                finite_array(batch[i], what, "fit", index)
            yield batch, self.y[index]

    def selectors(self) -> list:
        """The rows of each batch of one epoch as index arrays, drawn as :meth:`__iter__` draws them (the same
        shuffle)."""
        order = self.rng.permutation(self.n) if self.shuffle else np.arange(self.n)
        return [order[start:start + self.batch_size] for start in range(0, self.n, self.batch_size)]

    def take(self, selector):
        """The batch ``(xs, y)`` of a selector of :meth:`selectors` (arrays of its own)."""
        batch = [np.take(a, selector, axis=0) for a in self.xs]
        for i, what in self.check:
            finite_array(batch[i], what, "fit", selector if isinstance(selector, np.ndarray) else selector.start)
        return batch, self.y[selector]

    def prepared(self, prepare, dtype, like: np.ndarray):
        """``prepare(y)`` of every target at once (kept for the fit), or None where it does not give one row per
        sample shaped and typed as ``like``'s rows (a batch's prepared targets)."""
        key = (prepare, np.dtype(dtype).str, like.shape[1:], like.dtype.str)
        if key not in self._prepared:
            from ..backend import host  # noqa: PLC0415

            rows = np.ascontiguousarray(prepare(self.y, host, dtype))
            fits = rows.shape[:1] == (self.n,) and rows.shape[1:] == like.shape[1:] and rows.dtype == like.dtype
            self._prepared[key] = rows if fits else None
        return self._prepared[key]
