"""Where the batch axis goes through the nodes that move it (Transpose, Reshape, Squeeze/Unsqueeze, the recurrent
operators' sequence-first layout, element-wise operators on a moved axis).

An op node's converter says which of its outputs keep the batch axis first (``Form.keeps_batch``). A value may also
carry the batch axis elsewhere: a batch-first LSTM runs sequence-first (``Transpose`` to ``(T, B, F)``, ``LSTM``,
``Transpose`` back), so the batch axis is axis 1 on the way and axis 0 again at the end. :func:`moved` follows it
through such nodes so that the model's outputs keep their batch axis (``fit`` and ``predict`` split batches).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["moved", "shape_batch", "refined", "holds_batch", "MOVERS"]

#: operators that may move a leading batch axis (their rule is asked even when every input has it first)
MOVERS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "LSTM", "GRU", "RNN", "Expand",
                    "ConstantOfShape"})

_ELEMENTWISE = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Where", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal",
    "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Softplus",
    "Softsign", "Mish", "Gelu", "Erf", "Clip", "Cast", "CastLike", "Identity", "Dropout", "Sin", "Cos", "Floor",
    "Ceil", "Round", "Sign", "IsNaN", "IsInf", "PRelu", "ThresholdedRelu", "Shrink"})


def moved(node, view, axes_in: list, attr) -> list | None:
    """The batch axis of each output of ``node`` (None: no batch axis), or None to keep the converter's flags.
    ``axes_in`` is each input's batch axis (None where it has none or is not computed)."""
    op, k = node.op_type, axes_in[0] if axes_in else None
    n = len(node.output)
    if op == "Transpose":
        if k is None:
            return None
        rank = view.rank(0)
        perm = attr("perm") or (list(reversed(range(rank))) if rank is not None else None)
        return None if perm is None else [list(perm).index(k)]
    if op in ("LSTM", "GRU", "RNN"):
        layout = int(attr("layout", 0) or 0)
        if layout == 0 and k == 1:
            return [2, 1, 1][:n]
        return None if k in (None, 0) else [None] * n
    if op in ("Squeeze", "Unsqueeze"):
        return [_squeeze(op, view, k, attr)] if k is not None else None
    if op in ("Expand", "ConstantOfShape"):
        return _sized(op, view, k)
    if op == "Reshape":
        if k is None:  # the batch folded into another axis and unfolded here by a shape holding the batch size
            found = getattr(view.inputs[1], "shape_batch", None) if len(view.inputs) > 1 else None
            return [found.index(BATCH)] if found is not None and BATCH in found else None
        return [_reshape(view, k, int(attr("allowzero", 0) or 0))]
    if op in _ELEMENTWISE and any(a not in (None, 0) for a in axes_in):
        ranks = [view.rank(i) for i in range(len(axes_in))]
        if any(r is None for r, a in zip(ranks, axes_in) if a is not None):
            return [None] * n
        out_rank = max(r for r in ranks if r is not None)
        found = {a + out_rank - r for a, r in zip(axes_in, ranks) if a is not None}
        return [found.pop() if len(found) == 1 else None] * n
    if any(a not in (None, 0) for a in axes_in):
        rule = _ALONG.get(op)
        return [rule(view, axes_in, attr) if rule is not None else None] * n  # no rule: no batch axis
    return None


def holds_batch(value) -> bool:
    """Whether ``value`` is a shape vector holding the batch size (see :func:`shape_batch`)."""
    found = getattr(value, "shape_batch", None)
    return found is not None and not isinstance(found, Truths) and BATCH in found


def _sized(op, view, k):
    """Expand / ConstantOfShape to a shape computed from a batched value's Shape (``x.expand(B, ...)``,
    ``torch.zeros(B, n)``): the output's batch axis where that shape holds the batch size; None (the converter's
    flags) where the shape holds none."""
    position = 0 if op == "ConstantOfShape" else 1
    found = getattr(view.inputs[position], "shape_batch", None) if len(view.inputs) > position else None
    if found is None or isinstance(found, Truths) or BATCH not in found:
        return None
    if op == "ConstantOfShape":
        return [found.index(BATCH)]
    rank = view.rank(0)
    if rank is None:
        return None
    out_rank = max(rank, len(found))
    axis = found.index(BATCH) + out_rank - len(found)
    return [axis if k is None or k + out_rank - rank == axis else None]


def _rank(view, k=0):
    return view.rank(k)


def _norm(axis, rank):
    return None if axis is None or rank is None else int(axis) % rank


def _apart(axis_of):
    """A rule for operators working along one axis: the batch axis stays where it is unless it is that axis."""
    def rule(view, axes_in, attr):
        k, rank = axes_in[0], _rank(view)
        axis = _norm(axis_of(view, attr), rank)
        if k is None or axis is None or axis == k:
            return None
        if any(a is not None and a != k for a in axes_in[1:]):
            return None
        return k
    return rule


def _softmax_axis(view, attr):
    return attr("axis", -1 if view.opset >= 13 else 1)


def _const_axis(view, attr):
    value = view.const(1)
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


def _slice(view, axes_in, attr):
    k, rank = axes_in[0], _rank(view)
    if k is None or rank is None or any(a is not None for a in axes_in[1:]):
        return None
    axes = view.const(3) if len(view.inputs) > 3 else None
    if axes is None:
        starts = view.const(1)
        axes = None if starts is None else np.arange(np.asarray(starts).size)
    if axes is None:
        return None
    return None if k in {int(a) % rank for a in np.asarray(axes).reshape(-1)} else k


def _gather(view, axes_in, attr):
    k, rank = axes_in[0], _rank(view)
    axis = _norm(attr("axis", 0), rank)
    if k is None or axis is None or axis == k or (len(axes_in) > 1 and axes_in[1] is not None):
        return None
    return k if axis > k else k - 1 + (view.rank(1) or 0) if view.rank(1) is not None else None


def _matmul(view, axes_in, attr):
    ra, rb = view.rank(0), view.rank(1)
    if ra is None or rb is None or ra < 2 or rb < 2:
        return None
    out = max(ra, rb)
    ka, kb = axes_in[0], axes_in[1] if len(axes_in) > 1 else None
    a = None if ka is None or ka > ra - 2 else ka + out - ra  # A's batch or row axes
    b = None if kb is None else kb + out - rb if kb < rb - 2 else out - 1 if kb == rb - 1 else None
    if ka is not None and kb is not None:
        return a if a == b and ka < ra - 2 else None
    return a if ka is not None else b


def _reduce(view, axes_in, attr):
    k, rank = axes_in[0], _rank(view)
    if k is None or rank is None:
        return None
    axes = _axes(view, attr)
    if axes is None:
        return None if not int(attr("noop_with_empty_axes", 0) or 0) else k
    axes = {a % rank for a in axes}
    if k in axes:
        return None
    return k if int(attr("keepdims", 1)) else k - sum(a < k for a in axes)


def _layer_norm(view, axes_in, attr):
    k, rank = axes_in[0], _rank(view)
    axis = _norm(attr("axis", -1), rank)
    return k if k is not None and axis is not None and k < axis else None


_ALONG = {
    "Split": _apart(lambda view, attr: attr("axis", 0)),
    "Concat": _apart(lambda view, attr: attr("axis")),
    "Softmax": _apart(_softmax_axis), "LogSoftmax": _apart(_softmax_axis), "Hardmax": _apart(_softmax_axis),
    "CumSum": _apart(_const_axis), "TopK": _apart(lambda view, attr: attr("axis", -1)),
    "Slice": _slice, "Gather": _gather, "MatMul": _matmul, "LayerNormalization": _layer_norm,
    **{op: _reduce for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                              "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")},
}


BATCH = "B"


class Truths(tuple):
    """What an ``Equal`` of a shape vector and a constant holds where known (True, False, None): the batch size
    (at least 1) never equals a constant below 1. ``Where`` picks by it (``expand(B, -1, -1)`` as the legacy
    exporter writes it)."""


def shape_batch(node, view, axes_in):
    """What a shape vector holds where it is known: a tuple of sizes (None where unknown, ``BATCH`` for the batch
    size) for a ``Shape`` of a value, followed through the shape arithmetic exporters write (Gather or
    Slice of it, Unsqueeze/Squeeze, Cast, Concat with constants or other such vectors); None where it holds no
    batch size or cannot be followed."""
    op = node.op_type
    if op == "Shape":
        k, shape = axes_in[0] if axes_in else None, view.shape(0)
        if shape is None:
            return None
        known = tuple(BATCH if i == k else d for i, d in enumerate(shape))
        start, end = view.attr("start", 0) or 0, view.attr("end")
        return _holding(known[slice(int(start), None if end is None else int(end))])
    marks = [getattr(v, "shape_batch", None) for v in view.inputs]
    first = marks[0] if marks else None
    if op in ("Cast", "Identity", "Unsqueeze", "Squeeze"):
        return first
    if op == "Reshape" and first is not None and not isinstance(first, Truths):
        target = view.const(1)
        return first if target is not None and np.asarray(target).size == 1 else None  # a vector stays one
    if op == "Equal" and first is not None and not isinstance(first, Truths) and view.const(1) is not None:
        c = np.asarray(view.const(1)).reshape(-1)
        if c.size not in (1, len(first)):
            return None
        c = np.broadcast_to(c, (len(first),))
        return Truths(False if d == BATCH and int(v) < 1 else (d == int(v)) if isinstance(d, int) else None
                      for d, v in zip(first, c))
    if op == "Where" and isinstance(first, Truths) and len(marks) == 3:
        picked_true, picked_false = view.const(1), marks[2]
        if picked_false is None or isinstance(picked_false, Truths) or len(picked_false) != len(first):
            return None
        out = []
        for i, truth in enumerate(first):
            if truth is False:
                out.append(picked_false[i])
            elif truth is True and picked_true is not None and np.asarray(picked_true).size == len(first):
                out.append(int(np.asarray(picked_true).reshape(-1)[i]))
            else:
                out.append(None)
        return _holding(tuple(out))
    if op == "Gather" and first is not None and int(view.attr("axis", 0) or 0) == 0:
        index = view.const(1)
        if index is None:
            return None
        return _holding(tuple(first[int(i)] for i in np.asarray(index).reshape(-1)))
    if op == "Slice" and first is not None:
        starts, ends = view.const(1), view.const(2)
        steps = view.const(4) if len(view.inputs) > 4 else None
        if starts is None or ends is None:
            return None
        step = 1 if steps is None else int(np.asarray(steps).reshape(-1)[0])
        start, end = int(np.asarray(starts).reshape(-1)[0]), int(np.asarray(ends).reshape(-1)[0])
        return _holding(first[slice(start, end, step)])
    if op == "Concat" and any(m is not None for m in marks):
        parts = []
        for i, mark in enumerate(marks):
            value = view.const(i)
            if mark is not None:
                parts.extend(mark)
            elif value is not None:
                parts.extend(int(v) if int(v) > 0 else None for v in np.asarray(value).reshape(-1))
            else:
                rank = view.shape(i)
                if rank is None or len(rank) != 1 or rank[0] is None:
                    return None
                parts.extend([None] * rank[0])
        return _holding(tuple(parts))
    return None


def _holding(values):
    return values if values.count(BATCH) <= 1 else None


def _axes(view, attr):
    value = attr("axes")
    if value is None and len(view.inputs) > 1:
        value = view.const(1)
    return None if value is None else [int(a) for a in np.asarray(value).reshape(-1)]


def _squeeze(op, view, k, attr):
    axes, rank = _axes(view, attr), view.rank(0)
    if axes is None or rank is None:
        return None
    if op == "Squeeze":
        axes = [a % rank for a in axes]
        return None if k in axes else k - sum(a < k for a in axes)
    out_rank = rank + len(axes)
    inserted = {a % out_rank for a in axes}
    kept = [j for j in range(out_rank) if j not in inserted]
    return kept[k]


def _reshape(view, k, allowzero):
    """The output axis holding input axis ``k`` (the batch) when the target keeps it whole: the axes before it
    multiply to the same size on both sides and the axis itself is copied (0), given by its size, or inferred
    (-1) from the known sizes after it."""
    shape, target = view.shape(0), view.const(1)
    if shape is None:
        return None
    if target is None:  # a shape computed from Shape(y): its batch position, when the axes before agree
        source = view.inputs[1] if len(view.inputs) > 1 else None
        found = getattr(source, "shape_batch", None)
        if found is None or BATCH not in found:
            return None
        j = found.index(BATCH)
        if any(d is None for d in (*shape[:k], *found[:j])):
            return None
        return j if math.prod(shape[:k]) == math.prod(found[:j]) else None
    target = [int(t) for t in np.asarray(target).reshape(-1)]
    before, after = shape[:k], shape[k + 1:]
    if any(d is None for d in (*before, *after)):
        return None
    prefix, suffix = math.prod(before), math.prod(after)
    dims = [shape[j] if t == 0 and not allowzero and j < len(shape) else t for j, t in enumerate(target)]
    for j in range(len(dims)):
        head, tail = dims[:j], dims[j + 1:]
        if any(d is None or d < 0 for d in head) or math.prod(head) != prefix:
            continue
        tail_known = all(d is not None and d >= 0 for d in tail)
        if target[j] == 0 and not allowzero and j == k:
            ok = not tail_known or math.prod(tail) == suffix or -1 in tail
        elif target[j] == -1:
            ok = tail_known and math.prod(tail) == suffix
        else:
            ok = shape[k] is not None and dims[j] == shape[k] and (-1 in tail or (tail_known and math.prod(
                tail) == suffix))
        if ok:
            return j
    return None


def refined(node, view, full):
    """``full`` (the inferred shape of a node's output) with the sizes a Slice with constant axes keeps from its
    input where inference left them unknown (ends computed at run time)."""
    if node.op_type != "Slice" or full is None or len(view.inputs) < 4 or view.const(3) is None:
        return full
    shape = view.shape(0)
    if shape is None or len(shape) != len(full):
        return full
    sliced = {int(a) % len(shape) for a in np.asarray(view.const(3)).reshape(-1)}
    return tuple(d if d is not None or i in sliced else shape[i] for i, d in enumerate(full))
