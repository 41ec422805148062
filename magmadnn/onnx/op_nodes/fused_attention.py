"""Fusions (:mod:`magmadnn.onnx.fusion`) of attention as exporters write it: the scores scaled by a constant and
their softmax over the keys as one ``F.masked_softmax`` (the scale applied in the softmax's own pass)."""

from __future__ import annotations

import numpy as np

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
