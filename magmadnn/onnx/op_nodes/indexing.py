"""GatherND as one Gather: the indexed leading axes are flattened and each index tuple becomes one linear index
(batch_dims leading axes shared by data and indices), so the gradient is Gather's. :func:`take_along_axis`
(GatherElements, TopK's values) with its gradient: each picked gradient added back at its position through a
one-hot product along the axis (no scatter op needed)."""

from __future__ import annotations

import numpy as np

from ...autograd import Function
from ._registry import op
from ._runtime import F, T, Tensor, is_float, tensor


class _TakeAlongFunction(Function):
    def forward(self, x, idx, axis):
        ns = x.__array_namespace__()
        self.ns, self.idx, self.axis, self.shape = ns, idx, axis, x.shape
        return ns.take_along_axis(x, idx, axis=axis)

    def backward(self, g):
        ns, idx, axis, shape = self.ns, self.idx, self.axis, self.shape
        n = shape[axis]
        g, moved = ns.moveaxis(g, axis, -1), ns.moveaxis(idx, axis, -1)  # (..., k)
        rows = np.arange(n, dtype=np.int64) if isinstance(idx, np.ndarray) else ns.arange(
            n, dtype=np.int64, device=idx.device)
        hit = ns.astype(ns.equal(ns.reshape(moved, (*moved.shape, 1)), rows), g.dtype)  # (..., k, n)
        gx = ns.reshape(ns.matmul(ns.reshape(g, (*g.shape[:-1], 1, g.shape[-1])), hit), (*g.shape[:-1], n))
        gx = ns.moveaxis(gx, -1, axis)
        for d, size in enumerate(shape):  # indices shorter than the data on other axes: zeros beyond them
            if gx.shape[d] < size:
                pad = list(gx.shape)
                pad[d] = size - gx.shape[d]
                zeros = np.zeros(pad, gx.dtype) if isinstance(gx, np.ndarray) else ns.zeros(
                    tuple(pad), dtype=gx.dtype, device=gx.device)
                gx = ns.concat([gx, zeros], axis=d)
        return gx


def take_along_axis(x, indices, axis: int) -> Tensor:
    """ONNX's GatherElements (negative indices from the end), differentiable in ``x`` when it is float."""
    if not is_float(x):
        return T.take_along_axis(x, indices, axis)
    idx = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices, np.int64), x)
    ns = idx.data.__array_namespace__()
    data = ns.astype(idx.data, np.int64)
    data = ns.where(data < 0, data + x.shape[axis], data)
    return _TakeAlongFunction.apply(x, idx=data, axis=axis)


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
