"""Shapes and indexing: Shape, Size, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather,
GatherElements, Expand, Tile, Pad, ConstantOfShape, Range, CumSum, Trilu, OneHot. Sizes, axes and shapes are read on
the host (``host=`` positions); the data never leaves the device."""

from __future__ import annotations

import math

import numpy as np

from ...autograd import Tensor
from ._registry import Form, op
from ._runtime import F, T, host, is_float, tensor


def _axes_keep_batch(axes, rank) -> bool:
    if rank is None:
        return True
    return all(int(a) % rank != 0 for a in axes)


@op("Shape")
def shape(view):
    start, end = view.attr("start", 0), view.attr("end", None)
    return Form(lambda x: np.asarray(x.shape[start:end], np.int64), keeps_batch=False, host_outputs=(0,))


@op("Size")
def size(view):
    return Form(lambda x: np.asarray(math.prod(x.shape), np.int64), keeps_batch=False, host_outputs=(0,))


def _reshape_target(x_shape, target, allowzero):
    target = [int(v) for v in target]
    out = [x_shape[i] if v == 0 and not allowzero else v for i, v in enumerate(target)]
    if -1 in out:
        known = math.prod(v for v in out if v != -1)
        out[out.index(-1)] = math.prod(x_shape) // known if known else 0
    return tuple(out)


@op("Reshape", host=(1,))
def reshape(view):
    allowzero = int(view.attr("allowzero", 0))
    target = view.const(1)
    keeps = target is not None and target.size > 0 and (int(target[0]) == 0 and not allowzero)
    if target is not None and target.size and view.batched(0):
        first = view.shape(0)[0] if view.shape(0) else None
        keeps = keeps or (first is not None and int(target[0]) == first)

    def run(x, shape):
        return F.reshape(x, _reshape_target(x.shape, host(shape).reshape(-1), allowzero)) if isinstance(
            x, Tensor) and is_float(x) else _plain(x, lambda a, ns: ns.reshape(
                a, _reshape_target(a.shape, host(shape).reshape(-1), allowzero)))

    return Form(run, keeps_batch=keeps)


def _plain(x, fn):
    if isinstance(x, np.ndarray):
        return fn(x, np)
    return Tensor._of(fn(x.data, x.data.__array_namespace__()), x.xp)


@op("Flatten")
def flatten(view):
    axis = int(view.attr("axis", 1))

    def run(x):
        a = axis % x.ndim if x.ndim else 0
        shape = (math.prod(x.shape[:a]), math.prod(x.shape[a:]))
        return F.reshape(x, shape) if is_float(x) else _plain(x, lambda d, ns: ns.reshape(d, shape))

    rank = view.rank(0)
    return Form(run, keeps_batch=rank is not None and rank > 1 and axis % rank == 1)


@op("Transpose")
def transpose(view):
    perm = view.attr("perm")

    def run(x):
        axes = tuple(perm) if perm is not None else tuple(reversed(range(x.ndim)))
        return F.transpose(x, axes) if is_float(x) else _plain(x, lambda d, ns: ns.permute_dims(d, axes))

    rank = view.rank(0)
    keeps = perm is not None and perm[0] == 0 or (perm is None and rank == 1)
    return Form(run, keeps_batch=bool(keeps))


def _axes_input(view, k, attr="axes"):
    return view.const(k) if view.opset >= 13 and view.has(k) else (
        np.asarray(view.attr(attr)) if view.attr(attr) is not None else None)


@op("Squeeze", host=(1,))
def squeeze(view):
    axes_attr = view.attr("axes")

    def run(x, axes=None):
        axes = axes_attr if axes is None else host(axes).reshape(-1).tolist()
        if axes is None:
            axes = [i for i, d in enumerate(x.shape) if d == 1]
        axes = [int(a) % x.ndim for a in axes]
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return F.reshape(x, shape) if is_float(x) else _plain(x, lambda d, ns: ns.reshape(d, shape))

    axes = _axes_input(view, 1)
    rank = view.rank(0)
    keeps = axes is not None and _axes_keep_batch(axes.reshape(-1), rank) or (
        axes is None and view.shape(0) is not None and view.shape(0)[0] is None)
    return Form(run, keeps_batch=bool(keeps))


@op("Unsqueeze", host=(1,))
def unsqueeze(view):
    axes_attr = view.attr("axes")

    def run(x, axes=None):
        axes = axes_attr if axes is None else host(axes).reshape(-1).tolist()
        rank = x.ndim + len(axes)
        axes = sorted(int(a) % rank for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        return F.reshape(x, tuple(shape)) if isinstance(x, Tensor) and is_float(x) else _plain(
            x, lambda d, ns: ns.reshape(d, tuple(shape)))

    axes = _axes_input(view, 1)
    rank = view.rank(0)
    keeps = axes is not None and rank is not None and all(int(a) % (rank + axes.size) != 0 for a in axes.reshape(-1))
    return Form(run, keeps_batch=bool(keeps))


@op("Concat")
def concat(view):
    axis = int(view.attr("axis"))

    def run(*xs):
        like = next(x for x in xs if isinstance(x, Tensor))
        xs = [tensor(x, like, dtype=like.dtype) for x in xs]
        xs = [x for x in xs if x.size or len(xs) == 1]
        a = axis % xs[0].ndim
        if is_float(like):
            return xs[0] if len(xs) == 1 else F.concatenate(xs, axis=a)
        ns = like.data.__array_namespace__()
        return Tensor._of(ns.concat([x.data for x in xs], axis=a), like.xp)

    rank = view.rank(0)
    keeps = rank is not None and axis % rank != 0 and all(view.batched(k) or not view.has(k)
                                                          for k in range(len(view.inputs)))
    return Form(run, keeps_batch=keeps)


@op("Split", host=(1,))
def split(view):
    axis = int(view.attr("axis", 0))
    count = len(view.node.output)
    sizes_attr = view.attr("split")
    num = view.attr("num_outputs")

    def run(x, sizes=None):
        a = axis % x.ndim
        total = x.shape[a]
        if sizes is not None:
            sizes = [int(s) for s in host(sizes).reshape(-1)]
        elif sizes_attr is not None:
            sizes = list(sizes_attr)
        else:
            n = num or count
            step = -(-total // n)
            sizes = [min(step, total - i * step) for i in range(n)]
        out, start = [], 0
        for s in sizes:
            out.append(_slice(x, a, start, start + s, 1))
            start += s
        return out if len(out) > 1 else out[0]

    rank = view.rank(0)
    return Form(run, keeps_batch=rank is None or axis % rank != 0)


def _slice(x, axis, start, stop, step):
    if not len(range(start, stop, step)):
        return _empty(x, axis)
    if step == 1 and is_float(x):
        return F.slice_axis(x, axis, start, stop)
    index = np.arange(start, stop, step, dtype=np.int64)
    return T.take(x, index, axis)


@op("Slice", host=(1, 2, 3, 4))
def slice_(view):
    starts_a, ends_a, axes_a = view.attr("starts"), view.attr("ends"), view.attr("axes")

    def run(x, starts=None, ends=None, axes=None, steps=None):
        starts = host(starts).reshape(-1).tolist() if starts is not None else list(starts_a)
        ends = host(ends).reshape(-1).tolist() if ends is not None else list(ends_a)
        axes = host(axes).reshape(-1).tolist() if axes is not None else (list(axes_a) if axes_a is not None else
                                                                         list(range(len(starts))))
        steps = host(steps).reshape(-1).tolist() if steps is not None else [1] * len(starts)
        y = x
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = int(a) % x.ndim
            r = range(x.shape[a])[slice(int(s), int(e), int(st))]
            if isinstance(y, np.ndarray):
                y = np.take(y, np.arange(r.start, r.stop, r.step, dtype=np.int64), axis=a)
            elif r.step == 1 and r.start == 0 and r.stop == x.shape[a]:
                continue
            else:
                y = _slice(y, a, r.start, r.stop, r.step) if len(r) else _empty(y, a)
        return y

    axes = view.const(3) if view.has(3) else (np.asarray(axes_a) if axes_a is not None else None)
    rank = view.rank(0)
    if axes is None and view.opset >= 10:
        starts = view.const(1)
        axes = np.arange(starts.size) if starts is not None else None
    keeps = axes is not None and _axes_keep_batch(axes.reshape(-1), rank)
    return Form(run, keeps_batch=bool(keeps))


def _empty(x, axis):
    shape = tuple(0 if i == axis else d for i, d in enumerate(x.shape))
    return Tensor._of(x.xp.zeros(shape, x.dtype) if is_float(x) else x.data.__array_namespace__().zeros(
        shape, dtype=x.dtype), x.xp)


@op("Gather", weights=(0,))
def gather(view):
    axis = int(view.attr("axis", 0))

    def run(x, indices):
        if isinstance(x, np.ndarray) and isinstance(indices, np.ndarray):
            return np.take(x, indices, axis=axis)
        if isinstance(x, np.ndarray):
            x = Tensor(x, backend=indices.xp)
        return T.take(x, indices, axis)

    rank = view.rank(0)
    keeps = (view.batched(0) and rank is not None and axis % rank != 0) or (
        not view.batched(0) and axis % max(rank or 1, 1) == 0 and view.batched(1))
    return Form(run, keeps_batch=bool(keeps))


@op("GatherElements")
def gather_elements(view):
    axis = int(view.attr("axis", 0))
    return Form(lambda x, idx: T.take_along_axis(x, idx, axis % x.ndim), keeps_batch=False)


@op("Expand", host=(1,))
def expand(view):
    def run(x, shape):
        return T.broadcast_to(x, host(shape).reshape(-1))

    return Form(run, keeps_batch=view.batched(0) and view.rank(0) is not None and view.const(1) is not None and
                view.const(1).size == view.rank(0))


@op("Tile", host=(1,))
def tile(view):
    reps = view.const(1)
    keeps = reps is not None and reps.size and int(reps[0]) == 1
    return Form(lambda x, repeats: T.tile(x, host(repeats).reshape(-1)), keeps_batch=bool(keeps))


@op("ConstantOfShape", host=(0,))
def constant_of_shape(view):
    from .._proto import onnx  # noqa: PLC0415

    value = view.attr("value")
    fill = np.zeros(1, np.float32) if value is None else onnx().numpy_helper.to_array(value).reshape(-1)

    def run(shape):
        return np.full(tuple(int(s) for s in host(shape).reshape(-1)), fill[0], fill.dtype)

    return Form(run, keeps_batch=False, host_outputs=(0,))


@op("Range", host=(0, 1, 2))
def range_(view):
    def run(start, limit, delta):
        start, limit, delta = host(start), host(limit), host(delta)
        return np.arange(start, limit, delta, dtype=start.dtype)

    return Form(run, keeps_batch=False, host_outputs=(0,))


@op("CumSum", host=(1,))
def cumsum(view):
    exclusive, reverse = bool(view.attr("exclusive", 0)), bool(view.attr("reverse", 0))
    axis = view.const(1)
    keeps = axis is not None and view.rank(0) is not None and int(axis.reshape(-1)[0]) % view.rank(0) != 0
    return Form(lambda x, axis: T.cumsum(x, int(host(axis).reshape(-1)[0]), exclusive, reverse),
                keeps_batch=bool(keeps))


@op("Trilu")
def trilu(view):
    upper = int(view.attr("upper", 1))

    def run(x, k=None):
        rows, cols = x.shape[-2], x.shape[-1]
        diff = np.arange(cols, dtype=np.int64)[None, :] - np.arange(rows, dtype=np.int64)[:, None]  # j - i
        kind = "greater_equal" if upper else "less_equal"
        if k is None:
            keep = getattr(np, kind)(diff, 0)
        else:  # the diagonal's offset compared on the device
            keep = T.compare(diff, T.astype(F.reshape(tensor(k, x), (1,)), np.int64), kind)
        return T.where(keep, x, np.zeros((), x.dtype) if not is_float(x) else 0.0)

    return run


@op("OneHot", host=(1,))
def one_hot(view):
    axis = int(view.attr("axis", -1))

    def run(indices, depth, values):
        depth = int(host(depth).reshape(-1)[0])
        idx = indices if isinstance(indices, Tensor) else Tensor(np.asarray(indices))
        ns = idx.data.__array_namespace__()
        data = ns.astype(idx.data, np.int64)
        data = ns.where(data < 0, data + depth, data)
        rank = idx.ndim + 1
        a = axis % rank
        ids = np.arange(depth, dtype=np.int64).reshape(tuple(depth if i == a else 1 for i in range(rank)))
        expanded = ns.reshape(data, tuple(1 if i == a else d for i, d in enumerate(
            list(idx.shape[:a]) + [1] + list(idx.shape[a:]))))
        hit = Tensor._of(ns.equal(expanded, idx.xp.asarray(ids)), idx.xp)
        values = F.reshape(tensor(values, idx), (2,))  # [off, on], on the device
        on, off = T.take(values, np.array([1], np.int64), 0), T.take(values, np.array([0], np.int64), 0)
        return T.where(hit, on, off)

    return run


@op("Pad", host=(1, 3))
def pad(view):
    mode = view.attr("mode", "constant")
    pads_attr = view.attr("pads")
    value_attr = float(view.attr("value", 0.0))

    def run(x, pads=None, value=None, axes=None):
        pads = host(pads).reshape(-1).tolist() if pads is not None else list(pads_attr)
        axes = host(axes).reshape(-1).tolist() if axes is not None else list(range(x.ndim))
        n = len(axes)
        y = x
        fill = value_attr if value is None or math.prod(value.shape) == 0 else tensor(value, x)  # on the device
        for i, a in enumerate(axes):
            a = int(a) % x.ndim
            before, after = int(pads[i]), int(pads[i + n])
            y = _pad_axis(y, a, before, after, mode, fill)
        return y

    rank = view.rank(0)
    pads = view.const(1)
    keeps = pads is not None and rank is not None and view.const(3) is None and \
        int(pads.reshape(-1)[0]) == 0 and int(pads.reshape(-1)[rank]) == 0
    return Form(run, keeps_batch=bool(keeps))


def _filled(x, shape, fill):
    """A block of ``shape`` holding ``fill``: a number (made on the host) or a one-element Tensor (broadcast on the
    device, differentiable in it)."""
    if not isinstance(fill, Tensor):
        return Tensor._of(x.xp.asarray(np.full(shape, fill, np.dtype(x.dtype))), x.xp)
    fill = T.astype(F.reshape(fill, (1,) * len(shape)), x.dtype)
    return T.broadcast_to(fill, shape) if tuple(shape) != fill.shape else fill


def _pad_axis(x, axis, before, after, mode, fill):
    size = x.shape[axis]
    if before < 0 or after < 0:
        x = _slice(x, axis, max(-before, 0), size - max(-after, 0), 1)
        size = x.shape[axis]
        before, after = max(before, 0), max(after, 0)
    if before == 0 and after == 0:
        return x
    if mode == "constant":
        parts = []
        for count in (before, after):
            shape = tuple(count if i == axis else d for i, d in enumerate(x.shape))
            parts.append(_filled(x, shape, fill) if count else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None and p.shape[axis]]
        if is_float(x):
            return F.concatenate(pieces, axis=axis)
        ns = x.data.__array_namespace__()
        return Tensor._of(ns.concat([p.data for p in pieces], axis=axis), x.xp)
    positions = np.arange(-before, size + after)
    if mode == "edge":
        index = np.clip(positions, 0, size - 1)
    elif mode == "reflect":
        period = 2 * (size - 1) if size > 1 else 1
        p = np.mod(positions, period)
        index = np.where(p >= size, period - p, p)
    elif mode == "wrap":
        index = np.mod(positions, size)
    else:
        raise ValueError(f"Pad mode {mode!r}")
    return T.take(x, index.astype(np.int64), axis)


@op("EyeLike")
def eye_like(view):
    """Ones on the k-th diagonal of a 2-D tensor of the input's shape (its values are not read)."""
    view.only("dtype", "k")
    from ._runtime import ONNX_DTYPES  # noqa: PLC0415

    code, k = view.attr("dtype"), int(view.attr("k", 0))
    if code is not None and (ONNX_DTYPES.get(int(code)) is None or not view.holds(ONNX_DTYPES[int(code)])):
        raise view.error(f"dtype {code} is not supported")

    def run(x):
        dtype = np.dtype(ONNX_DTYPES[int(code)]) if code is not None else np.dtype(x.dtype)
        return Tensor(np.eye(x.shape[0], x.shape[1], k=k, dtype=dtype), backend=x.xp)

    return Form(run, keeps_batch=False)
