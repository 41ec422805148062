"""ScatterND and ScatterElements (reduction none, add, mul, max, min) on any backend without a scatter op.

Each update's linear position in the flattened data is computed from the indices on the data's own device (no host
read); the M updates land through a one-hot (N, M) matrix P (N data elements): ``add`` is ``data + P @ u``,
``none`` is ``data * (1 - covered) + P @ u`` (``covered``: the positions some update writes), so float data and
updates are differentiable through matmul (the gradient of an update is the gradient at its position; positions an
update overwrites pass none to the data). ``mul``, ``max`` and ``min`` reduce the picked updates per position
(forward only). The one-hot product costs N x M, sized for the small index sets exporters write (cache updates,
masked writes)."""

from __future__ import annotations

import math

import numpy as np

from ._registry import Form, op
from ._runtime import F, Tensor, is_float, tensor

_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _ns(x):
    return x.data.__array_namespace__()


def _arange(ns, n, like):
    if isinstance(like, np.ndarray):
        return np.arange(n, dtype=np.int64)
    return ns.arange(n, dtype=np.int64, device=like.device)


def _wrap(ns, idx, size):
    return ns.where(idx < 0, idx + size, idx)


def _indices(data, indices):
    indices = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices, np.int64), data)
    return _ns(indices), _ns(indices).astype(indices.data, np.int64)


def _nd_positions(data, indices):
    """ScatterND: the linear data position of every update element, flattened (M,)."""
    ns, idx = _indices(data, indices)
    k = idx.shape[-1]
    if k > data.ndim:
        raise ValueError(f"ScatterND: indices of last axis {k} index more axes than the data's {data.ndim}")
    lin = None
    for j in range(k):
        col = _wrap(ns, idx[..., j], data.shape[j])
        lin = col if lin is None else lin * data.shape[j] + col
    block = math.prod(data.shape[k:])
    lin = ns.reshape(lin, (-1, 1)) * block + ns.reshape(_arange(ns, block, idx), (1, block))
    return ns, ns.reshape(lin, (-1,))


def _elements_positions(data, indices, axis):
    """ScatterElements: the linear data position of every update (indices' shape), flattened (M,)."""
    ns, idx = _indices(data, indices)
    if idx.ndim != data.ndim:
        raise ValueError(f"ScatterElements: indices of rank {idx.ndim} for data of rank {data.ndim}")
    strides = [math.prod(data.shape[d + 1:]) for d in range(data.ndim)]
    lin = _wrap(ns, idx, data.shape[axis]) * strides[axis]
    for d in range(data.ndim):
        if d != axis:
            shape = [1] * data.ndim
            shape[d] = idx.shape[d]
            lin = lin + ns.reshape(_arange(ns, idx.shape[d], idx), tuple(shape)) * strides[d]
    return ns, ns.reshape(lin, (-1,))


def _scatter(data, updates, positions, reduction):
    ns, lin = positions
    n, m = math.prod(data.shape), int(lin.shape[0])
    updates = tensor(updates, data)
    if math.prod(updates.shape) != m:
        raise ValueError(f"the updates hold {math.prod(updates.shape)} values, the indices address {m}")
    hit = ns.equal(ns.reshape(_arange(ns, n, lin), (n, 1)), ns.reshape(lin, (1, m)))  # (N, M)
    dns = _ns(data)
    if isinstance(hit, np.ndarray) and not isinstance(data.data, np.ndarray):
        hit = dns.asarray(hit, device=data.data.device)
    covered = dns.any(hit, axis=1)
    if reduction in ("none", "add") and is_float(data):
        p = Tensor._of(dns.astype(hit, data.dtype), data.xp)
        added = F.reshape(F.matmul(p, F.reshape(F.cast(updates, data.dtype) if updates.dtype != data.dtype
                                                else updates, (m, 1))), data.shape)
        if reduction == "add":
            return F.add(data, added)
        keep = Tensor._of(dns.reshape(dns.astype(dns.logical_not(covered), data.dtype), data.shape), data.xp)
        return F.add(F.multiply(data, keep), added)
    flat, row = dns.reshape(data.data, (n,)), dns.reshape(dns.astype(updates.data, data.dtype), (1, m))
    if reduction in ("none", "add"):
        zero = dns.zeros((1, 1), dtype=data.dtype, device=getattr(flat, "device", None)) if not isinstance(
            flat, np.ndarray) else np.zeros((1, 1), data.dtype)
        picked = dns.sum(dns.where(hit, row, zero), axis=1, dtype=data.dtype)
        out = flat + picked if reduction == "add" else dns.where(covered, picked, flat)
    elif reduction == "mul":
        one = dns.ones_like(row)
        out = flat * dns.prod(dns.where(hit, row, one), axis=1, dtype=data.dtype)
    else:
        info = np.finfo(data.dtype) if is_float(data) else np.iinfo(data.dtype)
        fill = dns.full_like(row, info.min if reduction == "max" else info.max)
        if reduction == "max":
            out = dns.where(covered, dns.maximum(flat, dns.max(dns.where(hit, row, fill), axis=1)), flat)
        else:
            out = dns.where(covered, dns.minimum(flat, dns.min(dns.where(hit, row, fill), axis=1)), flat)
    return Tensor._of(dns.reshape(out, data.shape), data.xp)


def _reduction(view):
    reduction = view.attr("reduction", "none")
    if reduction not in _REDUCTIONS:
        raise view.error(f"reduction {reduction!r} is not supported (supported: {list(_REDUCTIONS)})")
    return reduction


@op("ScatterND")
def scatter_nd(view):
    view.only("reduction")
    reduction = _reduction(view)

    def run(data, indices, updates):
        data = tensor(data, updates if isinstance(updates, Tensor) else None)
        return _scatter(data, updates, _nd_positions(data, indices), reduction)

    return Form(run, keeps_batch=False)  # its indices address the whole batch


@op("ScatterElements")
def scatter_elements(view):
    view.only("axis", "reduction")
    reduction, axis = _reduction(view), int(view.attr("axis", 0))

    def run(data, indices, updates):
        data = tensor(data, updates if isinstance(updates, Tensor) else None)
        return _scatter(data, updates, _elements_positions(data, indices, axis % data.ndim), reduction)

    rank = view.rank(0)
    keeps = rank is not None and axis % rank != 0 and all(view.batched(k) for k in range(3) if view.has(k))
    return Form(run, keeps_batch=keeps)
