"""GatherND as one Gather: the indexed leading axes are flattened and each index tuple becomes one linear index
(batch_dims leading axes shared by data and indices), so the gradient is Gather's."""

from __future__ import annotations

import numpy as np

from ._registry import op
from ._runtime import F, T, Tensor, tensor


@op("GatherND")
def gather_nd(view):
    view.only("batch_dims")
    batch_dims = int(view.attr("batch_dims", 0))

    def run(data, indices):
        indices = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices, np.int64), data)
        ns = indices.data.__array_namespace__()
        idx = ns.astype(indices.data, np.int64)
        k = idx.shape[-1]
        lead, picked = data.shape[:batch_dims], data.shape[batch_dims:batch_dims + k]
        rest = data.shape[batch_dims + k:]
        linear = None
        for j, size in enumerate(picked):
            col = idx[..., j]
            col = ns.where(col < 0, col + size, col)
            linear = col if linear is None else linear * size + col
        block = int(np.prod(picked, dtype=np.int64))
        if batch_dims:
            batches = int(np.prod(lead, dtype=np.int64))
            offsets = np.arange(batches, dtype=np.int64).reshape(lead + (1,) * (idx.ndim - 1 - batch_dims)) * block
            linear = linear + (offsets if isinstance(idx, np.ndarray) else ns.asarray(offsets, device=idx.device))
            block *= batches
        flat_shape = (block, *rest)
        if np.dtype(data.dtype).kind == "f":
            flat = F.reshape(data, flat_shape)
        else:
            dns = data.data.__array_namespace__()
            flat = Tensor._of(dns.reshape(data.data, flat_shape), data.xp)
        return T.take(flat, Tensor._of(linear, indices.xp), axis=0)

    return run
