"""Device embeddings (kernels of device/kernels/embeddings.cu).

The gather never reads outside the table (NaN rows there); ids are checked before it by ``functional.embedding``
(a check kernel, reported at the next host read: see ``faults``), and Model checks its host data against every
Embedding once per call, before any batch runs."""

from __future__ import annotations

import numpy as np

from . import kernels as _dk
from ._common import (
    _int64_labels,
)

_INT64 = np.dtype(np.int64)


def embedding_forward(table, indices):
    """The gather kernel (NaN rows for indices outside the table, never a read outside it)."""
    return _dk.embedding(table, indices if indices.dtype is _INT64 else _int64_labels(indices))


def embedding_backward(dy, indices, num_rows):
    """The deterministic scatter-add kernel (one block per table row, indices in order)."""
    return _dk.embedding_backward(dy, indices if indices.dtype is _INT64 else _int64_labels(indices), int(num_rows))
