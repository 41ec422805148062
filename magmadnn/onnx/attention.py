"""Attention as PyTorch writes it (nanoGPT's hand-written heads, ``F.scaled_dot_product_attention``) imported as
one :class:`~magmadnn.layers.MultiHeadAttention`.

Why a pattern and not the generic operators: the graph multiplies two activations, scales, masks and mixes heads
with per-sample 4-D tensors, which only make sense together; as one layer the model keeps the fused attention of
both backends (cuDNN / the fused masked softmax), trains the same parameters PyTorch had and exports back.

The nodes between the q/k/v projections and the output projection become :class:`.graph.Pending` values (a shape,
no layer). At the output projection (a MatMul by a constant) the chain is read back node by node::

    x -> MatMul(W)[+Add(b)] [-> Split/Slice of a fused qkv] -> Reshape(T, H, d) -> Transpose(0, 2, 1, 3)
    q [*|/ c] @ kᵀ [*|/ c] [*|/ c] [Where/Add causal mask] -> Softmax(-1) @ v -> Transpose(0, 2, 1, 3)
    -> Reshape(T, H*d) -> MatMul(W_o)[+Add(b_o)]

Any scale is folded into the query projection (the layer scales by 1/sqrt(d)); a mask must be the causal one.
Anything else is an error naming the node where the chain differs, never a different model.
"""

from __future__ import annotations

import math

import numpy as np

from .. import layers as L
from .import_state import BATCH, Pending, Value, reshape_dims

__all__ = ["product", "scale", "split", "slice_", "where", "follow", "build", "make_layer", "causal_mask"]

#: what a Pending value may feed (named in errors)
_PATH = ("Reshape, Transpose, Mul/Div by a constant scalar, MatMul, Where/Add of a causal mask, Softmax on the "
         "last axis, then the output projection MatMul by a constant")


def _operand(graph, node, index: int):
    """A computed input (Value or Pending) of ``node``, else an error."""
    found = graph.values.get(node.input[index]) if len(node.input) > index else None
    if not isinstance(found, (Value, Pending)):
        raise graph.error(node, f"input {index} ({node.input[index]!r}) must be a computed tensor", _PATH)
    if isinstance(found, Value) and found.layout is not None:
        return graph.value(node, index)  # reports the layout
    return found


def _scalar(graph, node, index: int):
    found = graph.values.get(node.input[index])
    if not isinstance(found, np.ndarray) or found.size != 1:
        return None
    return float(found.reshape(()))


# ----------------------------------------------------------------------------------------------- Pending makers


def product(graph, node):
    """MatMul of two computed tensors: attention scores or the mix of probabilities and values."""
    graph.attrs(node, {})
    a, b = _operand(graph, node, 0), _operand(graph, node, 1)
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise graph.error(node, f"a product of per-sample shapes {a.shape} and {b.shape} is not supported",
                          "(heads, T, d) @ (heads, d, S) inside an attention pattern")
    return [Pending((a.shape[0], a.shape[1], b.shape[2]), node)]


def scale(graph, node):
    """Mul / Div of a computed tensor by a constant scalar (attention's scaling)."""
    graph.attrs(node, {})
    values = [i for i in (0, 1) if isinstance(graph.values.get(node.input[i]), (Value, Pending))]
    other = 1 - values[0] if len(values) == 1 else None
    if other is None or _scalar(graph, node, other) is None or (node.op_type == "Div" and other != 1):
        raise graph.error(node, "this operator is supported only as the scaling inside an attention pattern",
                          "a computed tensor times (or divided by) a constant scalar, read by attention")
    return [Pending(_operand(graph, node, values[0]).shape, node)]


def _columns(graph, node, x, starts, ends):
    if len(x.shape) != 2:
        raise graph.error(node, f"splitting an input of per-sample shape {x.shape} is not supported",
                          "the last axis of a (T, features) projection, read by attention")
    return [Pending((x.shape[0], int(e) - int(s)), node) for s, e in zip(starts, ends)]


def _split_sizes(graph, node, width: int):
    attrs = graph.attrs(node, {"axis": 0, "split": None, "num_outputs": None})
    if attrs["axis"] not in (-1, 2):
        raise graph.error(node, f"axis={attrs['axis']} is not supported", "axis=-1 (a fused q/k/v projection)")
    if graph.has(node, 1):
        sizes = [int(s) for s in graph.constant(node, 1, "split").reshape(-1)]
    elif attrs["split"] is not None:
        sizes = [int(s) for s in attrs["split"]]
    else:
        parts = len(node.output)
        sizes = [width // parts] * parts if width % parts == 0 else []
    if sum(sizes) != width or len(sizes) != len(node.output) or min(sizes, default=0) < 1:
        raise graph.error(node, f"split sizes {sizes} do not divide {width} features", "sizes that add up")
    return sizes


def split(graph, node):
    """Split of a fused q/k/v projection along its features."""
    x = graph.value(node, 0)
    sizes = _split_sizes(graph, node, x.shape[-1])
    ends = np.cumsum(sizes)
    return _columns(graph, node, x, ends - sizes, ends)


def _slice_range(graph, node, width: int):
    starts, ends = (graph.constant(node, i, n).reshape(-1) for i, n in ((1, "starts"), (2, "ends")))
    axes = graph.constant(node, 3, "axes").reshape(-1) if graph.has(node, 3) else np.arange(len(starts))
    steps = graph.constant(node, 4, "steps").reshape(-1) if graph.has(node, 4) else np.ones_like(starts)
    if len(starts) != 1 or int(axes[0]) not in (-1, 2) or int(steps[0]) != 1:
        raise graph.error(node, f"slicing axes {axes.tolist()} with steps {steps.tolist()} is not supported",
                          "one slice of the last axis, step 1 (a fused q/k/v projection)")
    begin, end, _ = slice(int(starts[0]), int(ends[0])).indices(width)
    if end <= begin:
        raise graph.error(node, f"an empty slice [{starts[0]}:{ends[0]}] of {width} features")
    return begin, end


def slice_(graph, node):
    """Slice of a fused q/k/v projection along its features."""
    graph.attrs(node, {})
    x = graph.value(node, 0)
    begin, end = _slice_range(graph, node, x.shape[-1])
    return _columns(graph, node, x, [begin], [end])


def where(graph, node):
    raise graph.error(node, "this operator is supported only as the mask of attention scores",
                      "Where(causal mask, -inf, scores) inside an attention pattern")


# ----------------------------------------------------------------------------------------------- Pending path


def _merged_keys(graph, node, x):
    """The dynamo exporter's kᵀ of F.scaled_dot_product_attention: k (N, H, T, d) -> Reshape [-1, T, d] (the batch
    merged with the heads) -> Transpose [0, 2, 1] -> Reshape back to (N, H, d, T): that last value (the two nodes
    after ``node`` absorbed; the restoring shape is checked when the layer is built), else None."""
    target = graph.values.get(node.input[1])
    if not isinstance(target, np.ndarray) or len(x.shape) != 3 or [int(v) for v in target.reshape(-1)] != [
            -1, *x.shape[1:]]:
        return None
    swap = graph.sole_consumer(node.output[0], ("Transpose",))
    if swap is None or [int(p) for p in graph.attrs(swap, {"perm": None})["perm"] or []] != [0, 2, 1]:
        return None
    back = graph.sole_consumer(swap.output[0], ("Reshape",))
    if back is None:
        return None
    graph.absorb(swap)
    graph.absorb(back)
    heads, steps, width = x.shape
    graph.values[back.output[0]] = Pending((heads, width, steps), back)
    return [None]


def follow(graph, node):
    """A node reading a Pending value: the next Pending of the pattern, or the finished attention layer."""
    op = node.op_type
    x = next(graph.values[n] for n in node.input if isinstance(graph.values.get(n), Pending))
    if op == "Shape":
        attrs = graph.attrs(node, {"start": 0, "end": None})
        return [np.array([BATCH, *x.shape], np.int64)[attrs["start"]:attrs["end"]]]
    if op == "Identity":
        return [x]
    if op == "Reshape":
        graph.attrs(node, {"allowzero": 0})
        return _merged_keys(graph, node, x) or [Pending(reshape_dims(graph, node, x), node)]
    if op == "Transpose":
        perm = [int(p) for p in graph.attrs(node, {"perm": None})["perm"] or reversed(range(len(x.shape) + 1))]
        if sorted(perm) != list(range(len(x.shape) + 1)) or perm[0] != 0:
            raise graph.error(node, f"perm {perm} of a rank-{len(x.shape) + 1} tensor is not supported",
                              "permutations that keep axis 0 first")
        return [Pending(tuple(x.shape[p - 1] for p in perm[1:]), node)]
    if op in ("Mul", "Div"):
        return scale(graph, node)
    if op == "MatMul":
        if isinstance(graph.values.get(node.input[1]), np.ndarray):
            return build(graph, node)
        return product(graph, node)
    if op == "Softmax":
        axis = graph.attrs(node, {"axis": -1 if graph.opset >= 13 else 1})["axis"]
        if axis % (len(x.shape) + 1) != len(x.shape):
            raise graph.error(node, f"axis={axis} is not supported inside attention", "axis=-1 (the keys)")
        return [Pending(x.shape, node)]
    if op in ("Where", "Add"):
        graph.attrs(node, {})
        constants = [n for n in node.input if isinstance(graph.values.get(n), np.ndarray)]
        if len(constants) != len(node.input) - 1:
            raise graph.error(node, "this operator is supported inside attention only with constant masks",
                              "Where(mask, -inf, scores) or scores + a constant 0/-inf mask")
        return [Pending(x.shape, node)]
    source = f"{graph.where(x.node)}"
    raise graph.error(node, f"its input is an intermediate of an attention pattern (made by {source}), which it "
                            "cannot read", _PATH)


# ----------------------------------------------------------------------------------------------- the chain


class _Chain:
    """Reads the pattern back from the output projection, naming the node where it differs."""

    def __init__(self, graph):
        self.graph, self.producers = graph, graph.producers

    def node(self, name: str, ops: tuple, reader, what: str):
        found = self.producers.get(name)
        while found is not None and found.op_type == "Identity":
            found = self.producers.get(found.input[0])
        if found is None or found.op_type not in ops:
            got = "a graph input or constant" if found is None else self.graph.where(found)
            raise self.graph.error(reader, f"attention pattern: {what} should come from {'/'.join(ops)}, it comes "
                                           f"from {got}", _PATH)
        return found

    def unmerged(self, back, what: str):
        """The Transpose (0, 2, 1, 3) of k above the dynamo exporter's kᵀ ending at Reshape ``back``, and the scale
        met on the way; the restoring shape checked to be (N, H, d, T)."""
        heads, width, steps = self.graph.values[back.output[0]].shape
        target = [int(v) for v in np.ravel(self.graph.values.get(back.input[1], []))]
        if len(target) != 4 or target[1:] != [heads, width, steps] or target[0] not in (
                int(BATCH), 0, -1, self.graph.static_batch):
            raise self.graph.error(back, f"attention pattern: {what} restored to shape {target}",
                                   f"(N, {heads}, {width}, {steps})")
        swap = self.node(back.input[0], ("Transpose",), back, what)
        self.perm(swap, [0, 2, 1], what)
        merge = self.node(swap.input[0], ("Reshape",), swap, what)
        return self.scales(merge.input[0], merge, what)

    def perm(self, node, expected: list, what: str) -> None:
        perm = [int(p) for p in self.graph.attrs(node, {"perm": None})["perm"] or []]
        if perm != expected:
            raise self.graph.error(node, f"attention pattern: {what} with perm {perm}", f"perm {expected}")

    def scales(self, name: str, reader, what: str):
        """Skip Mul/Div by constant scalars above ``name``: (the node past them, their product)."""
        factor = 1.0
        while True:
            found = self.node(name, ("Mul", "Div", "Transpose", "MatMul", "Where", "Add", "Reshape"), reader, what)
            if found.op_type not in ("Mul", "Div"):
                return found, factor
            computed = [i for i in (0, 1) if not isinstance(self.graph.values.get(found.input[i]), np.ndarray)]
            value = _scalar(self.graph, found, 1 - computed[0])
            factor = factor / value if found.op_type == "Div" else factor * value
            reader, name = found, found.input[computed[0]]

    def heads(self, name: str, reader, kernel_side: bool, what: str):
        """(T, heads, d, projection) of q (kernel_side False: Transpose(0, 2, 1, 3)) or of k transposed for the
        scores (Transpose(0, 2, 3, 1), or (0, 1, 3, 2) of the heads), and the scale met on the way."""
        top, factor = self.scales(name, reader, what)
        if kernel_side and top.op_type == "Reshape":  # the dynamo exporter's kᵀ (see _merged_keys)
            top, more = self.unmerged(top, what)
            factor *= more
            self.perm(top, [0, 2, 1, 3], what)
            kernel_side = None
        if top.op_type != "Transpose":
            raise self.graph.error(reader, f"attention pattern: {what} should come from a Transpose, it comes from "
                                           f"{self.graph.where(top)}", _PATH)
        perm = [int(p) for p in self.graph.attrs(top, {"perm": None})["perm"] or []]
        if kernel_side is None:
            pass
        elif kernel_side and perm == [0, 1, 3, 2]:
            inner, more = self.scales(top.input[0], top, what)
            factor *= more
            if inner.op_type != "Transpose":
                raise self.graph.error(top, f"attention pattern: {what} should come from a Transpose", _PATH)
            self.perm(inner, [0, 2, 1, 3], what)
            top = inner
        elif kernel_side:
            self.perm(top, [0, 2, 3, 1], what)
        else:
            self.perm(top, [0, 2, 1, 3], what)
        split_heads = self.node(top.input[0], ("Reshape",), top, what)
        shape = self.graph.values[split_heads.output[0]].shape
        if len(shape) != 3:
            raise self.graph.error(split_heads, f"attention pattern: {what} split into {shape}", "(T, heads, d)")
        t, h, d = shape
        return (t, h, d, self.projection(split_heads.input[0], split_heads, h * d, t, what)), factor

    def projection(self, name: str, reader, width: int, steps: int, what: str):
        """(input name, kernel, bias or None) of the projection feeding ``reader`` (a Split/Slice part of one)."""
        found = self.node(name, ("Add", "MatMul", "Split", "Slice"), reader, f"the projection of {what}")
        columns = None
        if found.op_type in ("Split", "Slice"):
            fused = self.graph.values[found.input[0]]
            if found.op_type == "Split":
                sizes = _split_sizes(self.graph, found, fused.shape[-1])
                at = list(found.output).index(name)
                columns = (sum(sizes[:at]), sum(sizes[:at + 1]))
            else:
                columns = _slice_range(self.graph, found, fused.shape[-1])
            reader, found = found, self.node(found.input[0], ("Add", "MatMul"), found, f"the projection of {what}")
        bias = None
        if found.op_type == "Add":
            constant = [n for n in found.input if isinstance(self.graph.values.get(n), np.ndarray)]
            if len(constant) != 1:
                raise self.graph.error(found, f"attention pattern: the projection of {what} should add a constant "
                                              "bias", _PATH)
            bias = self.graph.values[constant[0]].reshape(-1)
            other = found.input[1 - list(found.input).index(constant[0])]
            reader, found = found, self.node(other, ("MatMul",), found, f"the projection of {what}")
        kernel = self.graph.values.get(found.input[1])
        x = self.graph.values.get(found.input[0])
        if not isinstance(kernel, np.ndarray) or kernel.ndim != 2 or not isinstance(x, Value) or \
                len(x.shape) != 2 or x.layout is not None:
            raise self.graph.error(found, f"attention pattern: the projection of {what} should be a (T, features) "
                                          "input times a constant matrix", _PATH)
        if bias is not None and bias.shape != (kernel.shape[1],):
            raise self.graph.error(reader, f"attention pattern: a bias of shape {bias.shape} for {kernel.shape[1]} "
                                           "features", _PATH)
        if columns is not None:
            kernel = kernel[:, columns[0]:columns[1]]
            bias = None if bias is None else bias[columns[0]:columns[1]]
        if kernel.shape[1] != width or x.shape[0] != steps:
            raise self.graph.error(reader, f"attention pattern: {what} splits {kernel.shape[1]} features of "
                                           f"{x.shape[0]} steps into {steps} steps of {width}", _PATH)
        return found.input[0], kernel, bias


def causal_mask(graph, node, scores_name: str, tq: int, tk: int) -> bool:
    """Whether a Where/Add mask node is the causal mask (an error for any other mask)."""
    values = graph.values
    if node.op_type == "Where":
        cond, a, b = (values.get(n) for n in node.input)
        if isinstance(a, np.ndarray) and node.input[2] == scores_name:
            masked, fill = np.asarray(cond, bool), a
        elif isinstance(b, np.ndarray) and node.input[1] == scores_name:
            masked, fill = ~np.asarray(cond, bool), b
        else:
            masked = fill = None
        ok = fill is not None and fill.size == 1 and float(fill.reshape(())) <= -1e9
    else:
        mask = values[next(n for n in node.input if n != scores_name)]
        masked, ok = mask <= -1e9, bool(np.all((mask == 0) | (mask <= -1e9)))
    if ok:
        try:
            full = np.broadcast_to(masked, masked.shape[:-2] + (tq, tk)).reshape(-1, tq, tk)
        except ValueError:
            ok = False
        else:
            ok = bool(np.all(full == np.triu(np.ones((tq, tk), bool), 1)))
    if not ok:
        raise graph.error(node, "attention pattern: this mask is not supported", "the causal mask (query i sees "
                          "keys j <= i): Where(tril == 0, -inf, scores) or scores + a 0/-inf upper triangle")
    return True


def build(graph, node):
    """The MultiHeadAttention layer ending at the output projection ``node`` (MatMul(merged heads, W_o))."""
    graph.attrs(node, {})
    chain = _Chain(graph)
    w_o = graph.values[node.input[1]]
    merge = chain.node(node.input[0], ("Reshape",), node, "the output projection's input")
    back = chain.node(merge.input[0], ("Transpose",), merge, "the merged heads")
    chain.perm(back, [0, 2, 1, 3], "the merged heads")
    mix = chain.node(back.input[0], ("MatMul",), back, "the heads")
    probs = chain.node(mix.input[0], ("Softmax",), mix, "the attention probabilities")
    scores, factor = chain.scales(probs.input[0], probs, "the attention scores")
    mask = masked = None
    if scores.op_type in ("Where", "Add"):
        mask = scores
        masked = next(n for n in scores.input if isinstance(graph.values.get(n), Pending))
        scores, more = chain.scales(masked, mask, "the attention scores")
        factor *= more
    if scores.op_type != "MatMul":
        raise graph.error(probs, f"attention pattern: the scores should come from a MatMul, they come from "
                                 f"{graph.where(scores)}", _PATH)
    (tq, heads, dk, query), more = chain.heads(scores.input[0], scores, False, "the queries")
    factor *= more
    (tk, heads_k, dk_k, key), more = chain.heads(scores.input[1], scores, True, "the keys")
    factor *= more
    (tv, heads_v, dv, value), more = chain.heads(mix.input[1], mix, False, "the values")
    if more != 1.0:
        raise graph.error(mix, "attention pattern: scaling the values is not supported", _PATH)
    if (heads_k, dk_k) != (heads, dk) or (heads_v, tv) != (heads, tk):
        raise graph.error(scores, f"attention pattern: queries of {heads} heads x {dk}, keys of {heads_k} x {dk_k}"
                                  f" and values of {heads_v} heads over {tv} steps do not match", _PATH)
    causal = mask is not None and causal_mask(graph, mask, masked, tq, tk)
    if graph.values[merge.output[0]].shape != (tq, heads * dv):
        raise graph.error(merge, f"attention pattern: merging heads into {graph.values[merge.output[0]].shape}",
                          f"(T, heads * d) = ({tq}, {heads * dv})")
    inputs = [query, key, value]
    tensors = [graph.values[name] for name, _, _ in inputs]
    width = tensors[0].shape[-1]
    if w_o.ndim != 2 or w_o.shape != (heads * dv, width):
        raise graph.error(node, f"an output projection of shape {w_o.shape} is not supported",
                          f"({heads * dv}, {width}): back to the query's features")
    out, bias_o = node.output[0], None
    add = graph.sole_consumer(out, ("Add",))
    if add is not None:
        other = [graph.values.get(n) for n in add.input if n != out]
        if len(other) == 1 and isinstance(other[0], np.ndarray) and other[0].shape in ((width,), (1, width)):
            bias_o = other[0].reshape(width)
            graph.absorb(add)
            out = add.output[0]
    q, k, v = (name for name, _, _ in inputs)
    names = [q] if q == k == v else [q, v] if k == v else [q, k, v]  # the layer's call forms
    parts = [graph.materialize(node, graph.values[n]) for n in names]
    value = make_layer(graph, node, parts, inputs, (heads, dk, dv), causal, factor, w_o, bias_o)
    result = Value(value.tensor)
    if out != node.output[0]:
        graph.values[out] = result
    return [result]


def make_layer(graph, node, parts, inputs, sizes, causal, factor, w_o, bias_o):
    """The MultiHeadAttention layer called on ``parts`` (its call form) with the weights of ``inputs`` ((input
    name, kernel, bias or None) of q, k, v), ``sizes`` (heads, key dim, value dim), the output projection and the
    scores' scale ``factor`` (folded into the queries)."""
    heads, dk, dv = sizes
    width = w_o.shape[1]
    weights = {}
    rescale = factor * math.sqrt(dk)  # the layer scales by 1/sqrt(dk): fold the rest into the queries
    for (_, kernel, bias), which, k in zip(inputs, ("query", "key", "value"), (rescale, 1.0, 1.0)):
        weights[f"{which}_kernel"] = kernel * k
        weights[f"{which}_bias"] = (np.zeros(kernel.shape[1], kernel.dtype) if bias is None else bias) * k
    weights["output_kernel"] = w_o
    weights["output_bias"] = np.zeros(width, w_o.dtype) if bias_o is None else bias_o
    use_bias = any(b is not None for _, _, b in inputs) or bias_o is not None
    if not use_bias:
        weights = {k: v for k, v in weights.items() if k.endswith("kernel")}
    return graph.layer(node, L.MultiHeadAttention, parts[0] if len(parts) == 1 else parts, heads, dk,
                       value_dim=dv, causal=causal, use_bias=use_bias, weights=weights)
