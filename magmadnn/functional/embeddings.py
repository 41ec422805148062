"""Embedding: rows of a table picked by integer indices."""

from __future__ import annotations

import numpy as np

from ..autograd import Function, Tensor
from ._base import _as_tensor, _need_ndim, _same_dtype, check_values

__all__ = ["embedding"]


class EmbeddingFunction(Function):
    def forward(self, table, indices):
        self.indices, self.rows = indices, table.shape[0]
        return self.xp.embedding_forward(table, indices)

    def backward(self, g):
        return self.xp.embedding_backward(g, self.indices, self.rows), None


def embedding(table, indices) -> Tensor:
    """Rows of ``table`` (V, D) picked by integer ``indices`` of any shape -> ``indices.shape + (D,)``; the gradient
    is a deterministic scatter-add. An index outside [0, V) is a ValueError: at once for NumPy indices, at the next
    host read for device ones (a check kernel; nothing is read back here, see ``_base.check_values``)."""
    fn = "embedding"
    table = _as_tensor(table)
    _need_ndim(table, 2, fn, "table", "(input_dim, output_dim)")
    _same_dtype(fn, table=table)
    data = indices.data if isinstance(indices, Tensor) else indices
    if not hasattr(data, "dtype"):
        data = np.asarray(data)
    if np.dtype(data.dtype).kind not in "iu":
        raise TypeError(f"{fn}: indices must be integers (token ids), got dtype {data.dtype}")
    rows = table.shape[0]
    check_values(table.xp, data, f"{fn}: index {{bad}} is out of range for a table of {rows} rows; expected indices "
                 f"in [0, {rows})", 0, rows)
    if isinstance(data, np.ndarray):
        data = data.astype(np.int64, copy=False)
    return EmbeddingFunction.apply(table, table.xp.asarray(data))
