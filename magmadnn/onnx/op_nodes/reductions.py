"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSumExp/SumSquare/LogSum, ArgMax/ArgMin, TopK."""

from __future__ import annotations

import numpy as np

from ...autograd import Tensor
from ._registry import Form, op
from ._runtime import F, T, host, is_float

_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")
#: the opset from which each reduction takes its axes as an input
_AXES_INPUT = {"ReduceSum": 13}


@op(*_REDUCE, host=(1,))
def reduce(view):
    kind = view.node.op_type
    keepdims = bool(view.attr("keepdims", 1))
    noop = bool(view.attr("noop_with_empty_axes", 0))
    axes_from_input = view.opset >= _AXES_INPUT.get(kind, 18)
    axes_attr = view.attr("axes")

    def run(x, axes=None):
        if axes_from_input:
            axes = None if axes is None else host(axes).reshape(-1).tolist()
        else:
            axes = axes_attr
        if not axes:
            if noop:
                return x
            axes = list(range(x.ndim))
        axes = tuple(sorted(int(a) % x.ndim for a in axes)) if x.ndim else ()
        return _reduce(x, kind, axes, keepdims)

    axes = view.const(1) if axes_from_input and view.has(1) else (
        np.asarray(axes_attr) if axes_attr is not None else None)
    rank = view.rank(0)
    keeps = axes is not None and axes.size > 0 and rank is not None and all(
        int(a) % rank != 0 for a in axes.reshape(-1))
    return Form(run, keeps_batch=bool(keeps))


def _reduce(x, kind, axes, keepdims):
    if not isinstance(x, Tensor):
        raise TypeError("reduction of a host value")
    if x.size == 0:
        return _empty_reduce(x, kind, axes, keepdims)
    if not is_float(x):
        ns = x.data.__array_namespace__()
        fn = {"ReduceSum": ns.sum, "ReduceMax": ns.max, "ReduceMin": ns.min, "ReduceProd": ns.prod}.get(kind)
        if fn is None:
            raise TypeError(f"{kind} of integers")
        return Tensor._of(fn(x.data, axis=axes, keepdims=keepdims), x.xp)
    if kind == "ReduceSum":
        return _sum(x, axes, keepdims)
    if kind == "ReduceMean":
        return F.mean(x, axis=axes, keepdims=keepdims) if axes else x
    if kind in ("ReduceMax", "ReduceMin", "ReduceProd"):
        return T.reduce(x, {"ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}[kind], axes, keepdims)
    if kind == "ReduceL1":
        return _sum(T.unary(x, "abs"), axes, keepdims)
    if kind == "ReduceL2":
        return T.unary(_sum(F.multiply(x, x), axes, keepdims), "sqrt")
    if kind == "ReduceSumSquare":
        return _sum(F.multiply(x, x), axes, keepdims)
    if kind == "ReduceLogSum":
        return T.unary(_sum(x, axes, keepdims), "log")
    top = T.reduce(x, "max", axes, True)  # LogSumExp, stable
    top = Tensor._of(top.data, top.xp)  # a constant shift
    s = _sum(F.activation(F.subtract(x, top), "exponential"), axes, True)
    y = F.add(T.unary(s, "log"), top)
    return y if keepdims else F.reshape(y, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def _sum(x, axes, keepdims):
    return F.sum(x, axis=axes, keepdims=keepdims) if axes else x


def _empty_reduce(x, kind, axes, keepdims):
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keepdims else tuple(
        d for i, d in enumerate(x.shape) if i not in axes)
    value = {"ReduceProd": 1.0, "ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceLogSum": -np.inf,
             "ReduceLogSumExp": -np.inf}.get(kind, 0.0)
    if not is_float(x) and kind in ("ReduceMax", "ReduceMin"):
        info = np.iinfo(x.dtype)
        value = info.min if kind == "ReduceMax" else info.max
    return Tensor._of(x.xp.asarray(np.full(shape, value, np.dtype(x.dtype))), x.xp)


@op("ArgMax", "ArgMin")
def arg_extreme(view):
    axis, keepdims = int(view.attr("axis", 0)), bool(view.attr("keepdims", 1))
    last = bool(view.attr("select_last_index", 0))
    kind = "argmax" if view.node.op_type == "ArgMax" else "argmin"

    def run(x):
        ns = x.data.__array_namespace__()
        a = axis % x.ndim
        data = ns.flip(x.data, axis=a) if last else x.data
        found = getattr(ns, kind)(data, axis=a, keepdims=keepdims)
        if last:
            found = (x.shape[a] - 1) - found
        return Tensor._of(ns.astype(found, np.int64), x.xp)

    rank = view.rank(0)
    return Form(run, keeps_batch=rank is not None and axis % rank != 0)


@op("TopK", host=(1,))
def top_k(view):
    axis = int(view.attr("axis", -1))
    largest = bool(view.attr("largest", 1))  # the k values come sorted either way

    def run(x, k):
        k = int(host(k).reshape(-1)[0])
        ns = x.data.__array_namespace__()
        a = axis % x.ndim
        key = x.data if not largest else ns.negative(x.data) if x.dtype.kind in "fi" else ns.bitwise_invert(x.data)
        order = ns.argsort(key, axis=a, stable=True)
        index = ns.take(order, ns.asarray(np.arange(k), **_dev(x)) if not isinstance(x.data, np.ndarray)
                        else np.arange(k), axis=a)
        index = Tensor._of(ns.astype(index, np.int64), x.xp)
        values = T.take_along_axis(x, index, a)  # differentiable in x
        return [values, index] if outputs > 1 else values

    outputs = len(view.node.output)
    rank = view.rank(0)
    return Form(run, keeps_batch=rank is not None and axis % rank != 0)


def _dev(x):
    return {"device": x.data.device}


@op("CumProd", host=(1,))
def cum_prod(view):
    """Running products along an axis, one multiply per step (differentiable for floats)."""
    view.only("exclusive", "reverse")
    exclusive, reverse = bool(view.attr("exclusive", 0)), bool(view.attr("reverse", 0))

    def run(x, axis):
        a = int(host(axis).reshape(-1)[0]) % x.ndim
        ns = x.data.__array_namespace__()
        pieces = [F.slice_axis(x, a, k, k + 1) if is_float(x) else Tensor._of(
            ns.take(x.data, ns.asarray([k]) if isinstance(x.data, np.ndarray) else ns.asarray(
                np.asarray([k]), device=x.data.device), axis=a), x.xp) for k in range(x.shape[a])]
        order = list(range(len(pieces)))[::-1] if reverse else list(range(len(pieces)))
        out = [None] * len(pieces)
        running = None
        for k in order:
            if exclusive:
                out[k] = running if running is not None else _ones_like(pieces[k])
            running = pieces[k] if running is None else _mul(running, pieces[k])
            if not exclusive:
                out[k] = running
        if is_float(x):
            return F.concatenate(out, axis=a)
        return Tensor._of(ns.concat([o.data for o in out], axis=a), x.xp)

    return run


def _mul(a, b):
    if is_float(a):
        return F.multiply(a, b)
    return Tensor._of(a.data * b.data, a.xp)


def _ones_like(t):
    ns = t.data.__array_namespace__()
    return Tensor._of(ns.ones_like(t.data), t.xp)
