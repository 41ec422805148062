"""PyTorch's ``nn.MultiheadAttention`` as ``torch.onnx.export(..., dynamo=False)`` writes it (self-attention,
``need_weights=False``, no key padding mask), imported as one :class:`~magmadnn.layers.MultiHeadAttention`.

PyTorch computes it time-major and folds the batch into other axes (the heads, the rows of the output
projection), with the batch size read from Shape nodes at run time. The values between the in-projection and the
output projection are :class:`.graph.Pending` with a ``full`` ONNX shape (a batch factor written as a multiple of
``BATCH``, as the Shape nodes give it); at the output projection the chain is read back node by node::

    x (N, T, E) -> Transpose(1, 0, 2) -> MatMul(W_in (E, 3E)) [+ Add(b_in)]                             (T, N, 3E)
    -> Reshape (T, N, 3, E) -> Unsqueeze(0) -> Transpose(3, 1, 2, 0, 4) -> Squeeze(3) -> Gather(0|1|2)    (T, N, E)
    -> Reshape (T, N*H, d) -> Transpose(1, 0, 2) -> Reshape (N, H, T, d)        [keys: Transpose(0, 1, 3, 2)]
    q [* c] @ kᵀ [* c] [+ causal mask] -> Softmax(-1) @ v -> Transpose(2, 0, 1, 3) -> Reshape (T*N, E)
    -> Gemm(W_o, b_o) -> Reshape (T, N, E)                                     (time-major again, as x was)

Every Reshape is checked by the shapes it makes, every Transpose by its perm; any other node or shape is an error
naming the node where the chain differs, never a different model.
"""

from __future__ import annotations

import math

import numpy as np

from .attention import causal_mask, make_layer
from .import_state import BATCH, Pending, Value

__all__ = ["unfold", "follow", "build"]

_PATH = ("nn.MultiheadAttention's export: self-attention (query is key is value), need_weights=False, no "
         "key_padding_mask, no mask or the causal one")


def _factor(v) -> tuple[int, int]:
    """(coefficient, power of the batch) of one entry of a full shape."""
    v = int(v)
    return (v // int(BATCH), 1) if v < 0 and v % int(BATCH) == 0 else (v, 0)


def _size(full) -> tuple[int, int]:
    factors = [_factor(v) for v in full]
    return math.prod(c for c, _ in factors), sum(p for _, p in factors)


def _show(full) -> str:
    text = [(f"{c}*N" if c != 1 else "N") if p else str(c) for c, p in map(_factor, full)]
    return f"({', '.join(text)})"


def _folded(node, full) -> Pending:
    return Pending((), node, full=full)


def _reshaped(graph, node, full) -> tuple:
    """The full shape a Reshape node gives a folded value of full shape ``full``."""
    graph.attrs(node, {"allowzero": 0})
    target = [int(v) for v in graph.constant(node, 1, "shape").reshape(-1)]
    dims = [full[i] if v == 0 and i < len(full) else v for i, v in enumerate(target)]
    coef, power = _size(full)
    known = [_factor(v) for v in dims if v != -1]
    if dims.count(-1) > 1 or any(c < 1 for c, _ in known):
        raise graph.error(node, f"shape {target} is not supported here", _PATH)
    kc, kp = math.prod(c for c, _ in known), sum(p for _, p in known)
    if -1 in dims:
        if coef % kc or power - kp not in (0, 1):
            raise graph.error(node, f"shape {target} does not hold the values of {_show(full)}", _PATH)
        dims[dims.index(-1)] = coef // kc * (int(BATCH) if power - kp else 1)
    if _size(dims) != (coef, power):
        raise graph.error(node, f"shape {_show(dims)} does not hold the values of {_show(full)}", _PATH)
    return tuple(dims)


def _time_major_full(x: Value) -> tuple:
    return (x.shape[0], int(BATCH), *x.shape[1:])


def unfold(graph, node, x: Value):
    """A Reshape of a time-major value that splits its features (PyTorch's packed q/k/v): a folded value."""
    full = _reshaped(graph, node, _time_major_full(x))
    if full[:2] != _time_major_full(x)[:2]:
        raise graph.error(node, f"reshaping a (time, batch, features) tensor into {_show(full)} is not supported",
                          "splitting its features, as nn.MultiheadAttention's export does")
    return [_folded(node, full)]


def _axes(graph, node) -> list[int]:
    attrs = graph.attrs(node, {"axes": None})
    if graph.has(node, 1):
        return [int(a) for a in graph.constant(node, 1, "axes").reshape(-1)]
    if attrs["axes"] is None:
        raise graph.error(node, "no axes is not supported here", _PATH)
    return [int(a) for a in attrs["axes"]]


def _scalar_constant(graph, node, pending_name: str):
    other = [n for n in node.input if n != pending_name]
    value = graph.values.get(other[0]) if len(other) == 1 else None
    divisor = node.op_type == "Div" and node.input[0] != pending_name
    if not isinstance(value, np.ndarray) or value.size != 1 or divisor:
        raise graph.error(node, "only scaling by a constant scalar is supported here", _PATH)
    return float(value.reshape(()))


def follow(graph, node):
    """A node reading a folded value: the next folded value, or the finished attention layer."""
    op = node.op_type
    name = next(n for n in node.input if isinstance(graph.values.get(n), Pending))
    x = graph.values[name]
    if op == "Shape":
        attrs = graph.attrs(node, {"start": 0, "end": None})
        return [np.array(x.full, np.int64)[attrs["start"]:attrs["end"]]]
    if op == "Identity":
        return [x]
    if x.result is not None:  # the output projection's (T*N, E): only back to (T, N, E)
        full = _reshaped(graph, node, x.full) if op == "Reshape" else None
        if full is None or len(full) != 3 or _factor(full[1]) != (1, 1) or full[0] * full[1] != x.full[0]:
            raise graph.error(node, f"the output of nn.MultiheadAttention's output projection, {_show(x.full)}, "
                                    "is supported only reshaped to (T, N, E)", _PATH)
        return [Value(x.result.tensor, (full[0], full[2]), layout="time_major")]
    if op == "Reshape":
        return [_folded(node, _reshaped(graph, node, x.full))]
    if op == "Transpose":
        perm = [int(p) for p in graph.attrs(node, {"perm": None})["perm"] or reversed(range(len(x.full)))]
        if sorted(perm) != list(range(len(x.full))):
            raise graph.error(node, f"perm {perm} of {_show(x.full)}", "a permutation of its axes")
        return [_folded(node, tuple(x.full[p] for p in perm))]
    if op == "Unsqueeze":
        full = list(x.full)
        for a in sorted(a % (len(full) + len(_axes(graph, node))) for a in _axes(graph, node)):
            full.insert(a, 1)
        return [_folded(node, full)]
    if op == "Squeeze":
        axes = {a % len(x.full) for a in _axes(graph, node)}
        if any(x.full[a] != 1 for a in axes):
            raise graph.error(node, f"squeezing axes {sorted(axes)} of {_show(x.full)}", _PATH)
        return [_folded(node, [d for i, d in enumerate(x.full) if i not in axes])]
    if op == "Gather":
        axis = graph.attrs(node, {"axis": 0})["axis"] % len(x.full)
        index = graph.constant(node, 1, "indices")
        if name != node.input[0] or index.size != 1 or index.ndim or _factor(x.full[axis])[1]:
            raise graph.error(node, f"gathering {index.tolist()} along axis {axis} of {_show(x.full)}", _PATH)
        return [_folded(node, x.full[:axis] + x.full[axis + 1:])]
    if op in ("Mul", "Div"):
        graph.attrs(node, {})
        _scalar_constant(graph, node, name)
        return [_folded(node, x.full)]
    if op in ("Gemm", "MatMul") and isinstance(graph.values.get(node.input[1]), np.ndarray):
        return build(graph, node)
    if op == "MatMul":
        graph.attrs(node, {})
        a, b = (graph.values.get(n) for n in node.input)
        if not all(isinstance(v, Pending) and v.full is not None for v in (a, b)) or len(a.full) != 4 or \
                a.full[:2] != b.full[:2] or a.full[3] != b.full[2]:
            raise graph.error(node, "this product is not one of attention's", _PATH)
        return [_folded(node, a.full[:3] + b.full[3:])]
    if op == "Softmax":
        axis = graph.attrs(node, {"axis": -1 if graph.opset >= 13 else 1})["axis"]
        if axis % len(x.full) != len(x.full) - 1:
            raise graph.error(node, f"axis={axis} is not supported inside attention", "axis=-1 (the keys)")
        return [_folded(node, x.full)]
    if op in ("Where", "Add"):
        graph.attrs(node, {})
        if sum(isinstance(graph.values.get(n), np.ndarray) for n in node.input) != len(node.input) - 1:
            raise graph.error(node, "only a constant mask is supported here", _PATH)
        return [_folded(node, x.full)]
    raise graph.error(node, f"its input is an intermediate of nn.MultiheadAttention (made by "
                            f"{graph.where(x.node)}), which it cannot read", _PATH)


# ----------------------------------------------------------------------------------------------- the chain


class _Walk:
    """Reads the chain back from the output projection, naming the node where it differs."""

    def __init__(self, graph):
        self.graph = graph

    def up(self, name: str, op: str, reader, what: str, full=None, perm=None):
        found = self.graph.producers.get(name)
        while found is not None and found.op_type == "Identity":
            found = self.graph.producers.get(found.input[0])
        if found is None or found.op_type != op:
            got = "a graph input or constant" if found is None else self.graph.where(found)
            raise self.graph.error(reader, f"nn.MultiheadAttention pattern: {what} should come from {op}, it comes "
                                           f"from {got}", _PATH)
        made = self.graph.values.get(found.output[0])
        if full is not None and (not isinstance(made, Pending) or made.full != tuple(full)):
            shape = _show(made.full) if isinstance(made, Pending) and made.full else "another shape"
            raise self.graph.error(found, f"nn.MultiheadAttention pattern: {what} has shape {shape}",
                                   f"{_show(full)}; {_PATH}")
        if perm is not None:
            got = [int(p) for p in self.graph.attrs(found, {"perm": None})["perm"] or []]
            if got != perm:
                raise self.graph.error(found, f"nn.MultiheadAttention pattern: {what} with perm {got}", f"perm {perm}")
        return found

    def scales(self, name: str, reader, what: str):
        """Skip Mul/Div by constant scalars above ``name``: (the name past them, the reader of it, their product)."""
        factor = 1.0
        found = self.graph.producers.get(name)
        while found is not None and found.op_type in ("Mul", "Div"):
            pending = next(n for n in found.input if isinstance(self.graph.values.get(n), Pending))
            value = _scalar_constant(self.graph, found, pending)
            factor = factor / value if found.op_type == "Div" else factor * value
            reader, name = found, pending
            found = self.graph.producers.get(name)
        return name, reader, factor

    def part(self, name: str, reader, index: int, keys: bool, what: str):
        """(heads, steps, head dim, in-projection name, scale) of q (index 0), k (1, transposed) or v (2)."""
        n = int(BATCH)
        name, reader, factor = self.scales(name, reader, what)
        made = self.graph.producers.get(name)
        if keys and made is not None and made.op_type == "Reshape":  # the dynamo exporter's kᵀ: (N*H, d, T) -> 4-D
            full = self.graph.values[made.output[0]].full
            if len(full) != 4 or full[0] != n or min(full[1:]) < 1:
                raise self.graph.error(made, f"nn.MultiheadAttention pattern: {what} has shape {_show(full)}",
                                       f"(N, heads, d, T); {_PATH}")
            _, h, d, t = full
            swap = self.up(made.input[0], "Transpose", made, what, (h * n, d, t), [0, 2, 1])
            above = self.graph.producers.get(swap.input[0])
            if above is not None and above.op_type == "Reshape":  # a dynamic batch: via (N, H, T, d) again
                flat = self.up(swap.input[0], "Reshape", swap, what, (h * n, t, d))
                swap = self.up(flat.input[0], "Reshape", flat, what, (n, h, t, d))
            step = self.up(swap.input[0], "Transpose", swap, what, (h * n, t, d), [1, 0, 2])
            return self._packed(step, what, index, h, t, d), factor
        if keys:
            top = self.up(name, "Transpose", reader, what, perm=[0, 1, 3, 2])
            name, reader, more = self.scales(top.input[0], top, what)
            factor *= more
        heads4 = self.up(name, "Reshape", reader, what)
        full = self.graph.values[heads4.output[0]].full
        if len(full) != 4 or full[0] != n or min(full[1:]) < 1:
            raise self.graph.error(heads4, f"nn.MultiheadAttention pattern: {what} has shape {_show(full)}",
                                   f"(N, heads, T, d); {_PATH}")
        _, h, t, d = full
        step = self.up(heads4.input[0], "Transpose", heads4, what, (h * n, t, d), [1, 0, 2])
        return self._packed(step, what, index, h, t, d), factor

    def _packed(self, step, what: str, index: int, h: int, t: int, d: int):
        """(heads, steps, head dim, in-projection name) above the (N*H, T, d) Transpose ``step`` of one part."""
        n = int(BATCH)
        step = self.up(step.input[0], "Reshape", step, what, (t, h * n, d))
        pick = self.up(step.input[0], "Gather", step, what, (t, n, h * d))
        if int(self.graph.values[pick.input[1]].reshape(())) % 3 != index:
            raise self.graph.error(pick, f"nn.MultiheadAttention pattern: {what} should be part {index} of the "
                                         "packed projection", _PATH)
        step = self.up(pick.input[0], "Squeeze", pick, what, (3, t, n, h * d))
        step = self.up(step.input[0], "Transpose", step, what, (3, t, n, 1, h * d), [3, 1, 2, 0, 4])
        step = self.up(step.input[0], "Unsqueeze", step, what, (1, t, n, 3, h * d))
        step = self.up(step.input[0], "Reshape", step, what, (t, n, 3, h * d))
        return h, t, d, step.input[0]

    def projection(self, name: str, reader):
        """(x, packed kernel (E, 3E), packed bias or None) of the in-projection ``name``."""
        found = self.graph.producers.get(name)
        bias = None
        if found is not None and found.op_type == "Add":
            constant = [n for n in found.input if isinstance(self.graph.values.get(n), np.ndarray)]
            if len(constant) == 1:
                bias = self.graph.values[constant[0]].reshape(-1)
                found = self.graph.producers.get(found.input[1 - list(found.input).index(constant[0])])
        x = self.graph.values.get(found.input[0]) if found is not None and found.op_type == "MatMul" else None
        kernel = self.graph.values.get(found.input[1]) if x is not None else None
        if not isinstance(x, Value) or x.layout != "time_major" or not isinstance(kernel, np.ndarray) or \
                kernel.shape != (x.shape[-1], 3 * x.shape[-1]) or bias is not None and bias.shape != (kernel.shape[1],):
            raise self.graph.error(reader, "nn.MultiheadAttention pattern: the packed q/k/v should be a (T, N, E) "
                                           "input times a constant (E, 3E) matrix plus a (3E,) bias", _PATH)
        return x, kernel, bias


def _output_projection(graph, node):
    """(kernel (E, E), bias or None, the ONNX name of the projected output) of a Gemm / MatMul (+ Add) node."""
    if node.op_type == "Gemm":
        attrs = graph.attrs(node, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
        if attrs["transA"]:
            raise graph.error(node, "transA=1 is not supported", "transA=0")
        w = graph.constant(node, 1, "B, the weights")
        w = (w.T if attrs["transB"] else w) * attrs["alpha"]
        bias = graph.constant(node, 2, "C, the bias").reshape(-1) * attrs["beta"] if graph.has(node, 2) else None
        return w, bias, node.output[0]
    graph.attrs(node, {})
    w, out, bias = graph.values[node.input[1]], node.output[0], None
    add = graph.sole_consumer(out, ("Add",))
    other = [graph.values.get(n) for n in add.input if n != out] if add is not None else []
    if len(other) == 1 and isinstance(other[0], np.ndarray) and w.ndim == 2 and other[0].size == w.shape[-1]:
        bias = other[0].reshape(-1)
        graph.absorb(add)
        out = add.output[0]
    return w, bias, out


def build(graph, node):
    """The MultiHeadAttention layer ending at the output projection ``node``."""
    walk, n = _Walk(graph), int(BATCH)
    w_o, bias_o, out = _output_projection(graph, node)
    merge = walk.up(node.input[0], "Reshape", node, "the output projection's input")
    back = walk.up(merge.input[0], "Transpose", merge, "the merged heads", perm=[2, 0, 1, 3])
    t, _, h, d = graph.values[back.output[0]].full
    if graph.values[merge.output[0]].full != (t * n, h * d):
        raise graph.error(merge, f"nn.MultiheadAttention pattern: the merged heads have shape "
                                 f"{_show(graph.values[merge.output[0]].full)}", f"{_show((t * n, h * d))}; {_PATH}")
    mix = walk.up(back.input[0], "MatMul", back, "the heads", (n, h, t, d))
    probs = walk.up(mix.input[0], "Softmax", mix, "the attention probabilities", (n, h, t, t))
    name, reader, factor = walk.scales(probs.input[0], probs, "the attention scores")
    mask = masked = None
    if graph.producers.get(name) is not None and graph.producers[name].op_type in ("Where", "Add"):
        mask = graph.producers[name]
        masked = next(i for i in mask.input if isinstance(graph.values.get(i), Pending))
        name, reader, more = walk.scales(masked, mask, "the attention scores")
        factor *= more
    scores = walk.up(name, "MatMul", reader, "the attention scores", (n, h, t, t))
    parts = [walk.part(scores.input[0], scores, 0, False, "the queries"),
             walk.part(scores.input[1], scores, 1, True, "the keys"),
             walk.part(mix.input[1], mix, 2, False, "the values")]
    if parts[2][1] != 1.0:
        raise graph.error(mix, "nn.MultiheadAttention pattern: scaling the values is not supported", _PATH)
    if any(p[:3] != (h, t, d) for p, _ in parts) or len({p[3] for p, _ in parts}) != 1:
        raise graph.error(scores, "nn.MultiheadAttention pattern: q, k and v are not the parts of one packed "
                                  f"projection into {h} heads of {d} over {t} steps", _PATH)
    factor *= parts[0][1] * parts[1][1]
    causal = mask is not None and causal_mask(graph, mask, masked, t, t)
    x, kernel, bias = walk.projection(parts[0][0][3], scores)
    width = h * d
    if w_o.ndim != 2 or w_o.shape != (width, width):
        raise graph.error(node, f"an output projection of shape {w_o.shape} is not supported", f"({width}, {width})")
    if bias_o is not None and bias_o.shape != (width,):
        raise graph.error(node, f"an output bias of shape {bias_o.shape} is not supported", f"({width},)")
    inputs = [(None, kernel[:, i * width:(i + 1) * width], None if bias is None else bias[i * width:(i + 1) * width])
              for i in range(3)]
    layer = make_layer(graph, node, [x.tensor], inputs, (h, d, d), causal, factor, w_o, bias_o)
    result = Pending((), node, full=(t * n, width), result=layer)
    if out != node.output[0]:
        graph.values[out] = result
    return [result]
