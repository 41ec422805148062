"""Embeddings: a gather of table rows and its deterministic scatter-add."""

from __future__ import annotations

from ._spec import op


@op
def embedding_forward(table, indices):
    """The rows of ``table`` (V, D) picked by the int64 array ``indices`` (any shape) -> ``indices.shape + (D,)``. An
    index outside [0, V) is a ``ValueError`` where the indices can be checked without a device read (the host); a
    device backend never reads outside the table and gives that position a NaN row (a loss over it is NaN, so fit
    refuses the update; ``Model`` checks host data against every ``Embedding`` before a batch runs)."""


@op
def embedding_backward(dy, indices, num_rows):
    """The table gradient (num_rows, D) of ``embedding_forward``: each row the sum of the rows of ``dy`` whose index
    it is, added in an order fixed by the indices (the same bits on every run; the device adds them in index
    order); indices outside the table add nothing."""
