"""Fusions (:mod:`magmadnn.onnx.fusion`) of the convolutional networks' blocks: a Conv, the Add of a residual (a
computed value of the convolution's output shape) and a Relu, in the chains Conv -> Relu, Conv -> Add and
Conv -> Add -> Relu, as one op node. It computes the same float operations in the same order as the nodes one by one
(the convolution with its bias, plus the residual, then the ReLU): on the host in inference one call of the host
convolution that adds the residual and applies the ReLU while each group of samples is in cache
(``backend.host.conv.conv2d_forward_residual``: bit for bit the nodes' values); when gradients are recorded
(``fit``) and on the device, the nodes' own ops (``F.conv2d`` with a fused ReLU, ``F.add``, ``F.activation``), so
training and gradients are theirs."""

from __future__ import annotations

import numpy as np

from .. import fusion
from ._registry import Form, NodeView
from .conv import conv_function


def _computed(state, name):
    """The run-time value ``name`` (a Tensor value, not a constant or a host shape) when it is one, else None."""
    value = state.values.get(name)
    return value if value is not None and not isinstance(value, np.ndarray) and not value.host else None


def _same_shape(a, b) -> bool:
    """Shapes equal where both are known (a broadcast residual also falls back to the ops one by one at run time)."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(p is None or q is None or p == q for p, q in zip(a, b))


@fusion.pattern("Conv")
def conv_residual_relu(state, node):
    """Conv(x, W[, B]) [+ r] [-> Relu] on a 2-D input x (rank 4) with r a computed value of the output's shape."""
    x = _computed(state, node.input[0]) if node.input else None
    if x is None or x.shape is None or len(x.shape) != 4 or len(node.output) != 1:
        return None
    inputs = list(node.input) + [""] * (3 - len(node.input))
    slots = [[(0, k)] if k < len(node.input) and node.input[k] else [] for k in range(3)]
    chain, residual = [node], None
    after = fusion.single_reader(state, node.output[0])
    if after is not None and after.op_type == "Add" and len(after.input) == 2 and after.input[0] != after.input[1]:
        k = 1 - list(after.input).index(node.output[0])
        r = _computed(state, after.input[k])
        if r is None or not _same_shape(state.shapes.get(node.output[0]), r.shape):
            return None  # a bias or a broadcast operand: the Add stays a node of its own (and so does the Relu)
        chain.append(after)
        inputs.append(after.input[k])
        slots.append([(1, k)])
        residual = "left" if k == 0 else "right"
        after = fusion.single_reader(state, after.output[0])
    relu = after is not None and after.op_type == "Relu" and not after.attribute
    if relu:
        chain.append(after)
    if len(chain) == 1 or any(name in state.halves for c in chain for name in c.output):
        return None  # nothing to fuse; float16 values round after each node: left unfused
    view = NodeView(node, state.opset, [state.values.get(n) if n else None for n in node.input], state)
    return fusion.Fused(chain, inputs, slots, Form(conv_function(view, "relu" if relu else None, residual),
                                                    weights=(1, 2)))
