"""Fusions (:mod:`magmadnn.onnx.fusion`) of attention as exporters write it: nanoGPT's attention from a packed
q/k/v projection (Split, per-head Reshape/Transpose, scaled scores, softmax, the values, heads merged back) as one
``attention_heads`` (the layout MultiHeadAttention runs, no head copies); elsewhere, scores scaled by a constant and
their softmax over the keys as one ``F.masked_softmax`` (the scale applied in the softmax's own pass)."""

from __future__ import annotations

import numpy as np

from ...autograd import Function
from .. import fusion
from ._registry import Form
from ._runtime import F


@fusion.pattern("Mul")
def scaled_softmax(state, node):
    """Mul(x, c) -> Softmax over the last axis: x of rank 4 (batch, heads, queries, keys), c one finite float
    constant."""
    if len(node.input) != 2 or node.input[0] == node.input[1]:
        return None
    values = [state.values.get(n) for n in node.input]
    k = next((i for i, v in enumerate(values) if isinstance(v, np.ndarray)), None)
    x = values[1 - k] if k is not None else None
    if x is None or isinstance(x, np.ndarray) or x.host or x.shape is None or len(x.shape) != 4:
        return None
    c = values[k]
    if c.size != 1 or c.dtype.kind != "f" or not np.isfinite(c).all() or c.dtype != x.dtype:
        return None
    soft = fusion.single_reader(state, node.output[0])
    if soft is None or soft.op_type != "Softmax" or any(a.name != "axis" for a in soft.attribute):
        return None
    axis = next((a.i for a in soft.attribute), -1 if state.opset >= 13 else 1)
    if axis % 4 != 3 or x.batch_axis not in (None, 0):
        return None  # (before opset 13, axis 3 of a rank-4 value is the last axis too)
    if any(name in state.halves for name in (*node.output, *soft.output)):
        return None
    scale = float(c.reshape(-1)[0])

    def run(x, _c):
        return F.masked_softmax(x, scale=scale)

    return fusion.Fused([node, soft], [node.input[1 - k], node.input[k]], [[(0, 1 - k)], [(0, k)]],
                        Form(run, host=(1,), keeps_batch=x.batched))


class _PackedAttention(Function):
    """Attention from one packed projection (B, T, 3D): split into q, k, v (one split), ``attention_heads``."""

    def forward(self, qkv, width, heads, scale):
        self.q, self.k, self.v = self.xp.split(qkv, [width] * 3, qkv.ndim - 1)
        self.heads, self.scale = heads, scale
        o, self.p = self.xp.attention_heads(self.q, self.k, self.v, heads, None, scale, False)
        return o

    def backward(self, g):
        grads = self.xp.attention_heads_backward(g, self.q, self.k, self.v, self.p, self.heads, self.scale)
        return (self.xp.concatenate(list(grads), g.ndim - 1),)


def _const(state, name):
    value = state.values.get(name) if name else None
    return value if isinstance(value, np.ndarray) else None


def _perm(node):
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def _next(state, node, op_type):
    """The single reader of ``node``'s only output when it is an ``op_type`` node, else None."""
    if len(node.output) != 1:
        return None
    after = fusion.single_reader(state, node.output[0])
    return after if after is not None and after.op_type == op_type else None


def _fits(target, batch, sizes) -> bool:
    """A Reshape target whose first entry keeps the batch (-1, 0, or the static batch size) and the rest ``sizes``."""
    if target is None or target.ndim != 1 or len(target) != len(sizes) + 1:
        return False
    first = int(target[0])
    return (first in (-1, 0) or (batch is not None and first == batch)) and [int(t) for t in target[1:]] == sizes


@fusion.pattern("Split")
def packed_attention(state, node):
    """nanoGPT's attention from one packed projection, as PyTorch exports it: Split (B, T, 3D) into q, k, v on the
    last axis; each Reshape to (B, T, H, D/H) and Transpose (q, v: to (B, H, T, D/H); k: to (B, H, D/H, T)); MatMul
    q k; [Mul by a constant scale]; Softmax over the keys; MatMul by v; Transpose and Reshape back to (B, T, D)."""
    x = state.values.get(node.input[0])
    if x is None or isinstance(x, np.ndarray) or x.host or x.shape is None or len(x.shape) != 3:
        return None
    batch, time, packed = x.shape
    if time is None or packed is None or packed % 3 or len(node.output) != 3 or x.batch_axis not in (None, 0):
        return None
    if next((a.i for a in node.attribute if a.name == "axis"), 0) % 3 != 2:
        return None
    width = packed // 3
    sizes = _const(state, node.input[1]) if len(node.input) > 1 else None
    attr = next((list(a.ints) for a in node.attribute if a.name == "split"), None)
    given = [int(s) for s in sizes.reshape(-1)] if sizes is not None else attr
    if (given is not None and given != [width] * 3) or (len(node.input) > 1 and node.input[1] and sizes is None):
        return None
    pieces = []
    for out in node.output:
        reshape = fusion.single_reader(state, out)
        if reshape is None or reshape.op_type != "Reshape" or len(reshape.input) != 2:
            return None
        transpose = _next(state, reshape, "Transpose")
        if transpose is None:
            return None
        pieces.append((reshape, transpose, _const(state, reshape.input[1]), _perm(transpose)))
    target = pieces[0][2]
    if target is None or target.ndim != 1 or len(target) != 4:
        return None
    heads, depth = int(target[2]), int(target[3])
    if heads < 1 or heads * depth != width or not all(_fits(p[2], batch, [time, heads, depth]) for p in pieces):
        return None
    ks = [p for p in pieces if p[3] == [0, 2, 3, 1]]
    others = [p for p in pieces if p[3] == [0, 2, 1, 3]]
    if len(ks) != 1 or len(others) != 2 or pieces.index(ks[0]) != 1:
        return None
    scores = _next(state, ks[0][1], "MatMul")
    if scores is None or list(scores.input) != [pieces[0][1].output[0], ks[0][1].output[0]]:
        return None  # q is the first piece, k the second, v the third (PyTorch's qkv order)
    chain, scale = [scores], 1.0
    mul = fusion.single_reader(state, scores.output[0])
    if mul is not None and mul.op_type == "Mul":
        c = next((_const(state, n) for n in mul.input if n != scores.output[0]), None)
        if c is None or c.size != 1 or c.dtype.kind != "f" or not np.isfinite(c).all():
            return None
        scale = float(c.reshape(-1)[0])
        chain.append(mul)
    soft = _next(state, chain[-1], "Softmax")
    if soft is None or any(a.name != "axis" for a in soft.attribute):
        return None
    if next((a.i for a in soft.attribute), -1 if state.opset >= 13 else 1) % 4 != 3:
        return None
    values = _next(state, soft, "MatMul")
    if values is None or list(values.input) != [soft.output[0], pieces[2][1].output[0]]:
        return None
    back = _next(state, values, "Transpose")
    merge = _next(state, back, "Reshape") if back is not None and _perm(back) == [0, 2, 1, 3] else None
    if merge is None or not _fits(_const(state, merge.input[1]), batch, [time, width]):
        return None
    chain += [soft, values, back, merge]
    nodes = [node, *(n for p in pieces for n in p[:2]), *chain]
    if any(name in state.halves for n in nodes for name in n.output):
        return None
    outer = [(0, 0)] + ([(0, 1)] if len(node.input) > 1 and node.input[1] else [])
    for i in range(3):
        outer.append((1 + 2 * i, 1))  # the reshape targets
    if len(chain) == 6:  # the scale
        outer.append((8, next(j for j, n in enumerate(chain[1].input) if n != scores.output[0])))
    outer.append((len(nodes) - 1, 1))  # the merging reshape's target
    names = [nodes[i].input[j] for i, j in outer]

    def run(qkv, *_constants):
        return _PackedAttention.apply(qkv, width=width, heads=heads, scale=scale)

    return fusion.Fused(nodes, names, [[s] for s in outer],
                        Form(run, host=tuple(range(1, len(names))), keeps_batch=x.batched), op_type="PackedAttention")
