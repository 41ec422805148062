"""Fusions (:mod:`magmadnn.onnx.fusion`) of the products transformers and MLPs are made of: a MatMul by a weight
matrix, its bias Add and an activation (Gelu, Relu) as one ``F.dense`` (one GEMM, the bias and the activation in one
pass, as a Dense layer runs)."""

from __future__ import annotations

import numpy as np

from .. import fusion
from ._registry import Form
from ._runtime import F

#: activations a dense product takes in its epilogue: ONNX operator (and Gelu's approximate) -> activation kind
_ACTIVATIONS = {("Relu", None): "relu", ("Gelu", "none"): "gelu", ("Gelu", "tanh"): "gelu_tanh"}


def _computed(state, name):
    """The run-time value ``name`` (a device/host Tensor value, not a shape) when it is one, else None."""
    value = state.values.get(name)
    return value if value is not None and not isinstance(value, np.ndarray) and not value.host else None


def _activation(state, node):
    """The activation kind of ``node`` when a dense epilogue computes it, else None."""
    if node.op_type == "Relu":
        return "relu" if not node.attribute else None
    if node.op_type == "Gelu":
        attrs = {a.name: a for a in node.attribute}
        if set(attrs) - {"approximate"}:
            return None
        approximate = attrs["approximate"].s.decode() if "approximate" in attrs else "none"
        return _ACTIVATIONS.get(("Gelu", approximate))
    return None


@fusion.pattern("MatMul")
def matmul_bias(state, node):
    """MatMul(x, W) + b [-> Relu | Gelu]: x of rank >= 2 with its batch axis first (or none), W a float
    constant (K, N), b a finite float constant (N,)."""
    if len(node.input) != 2:
        return None
    x, w = _computed(state, node.input[0]), state.values.get(node.input[1])
    if x is None or not isinstance(w, np.ndarray) or w.ndim != 2 or w.dtype.kind != "f":
        return None
    if x.shape is None or len(x.shape) < 2 or x.batch_axis not in (None, 0) or x.dtype != w.dtype:
        return None
    add = fusion.single_reader(state, node.output[0])
    if add is None or add.op_type != "Add" or len(add.input) != 2 or add.input[0] == add.input[1]:
        return None
    k = 1 - list(add.input).index(node.output[0])
    b = state.values.get(add.input[k])
    n = w.shape[1]
    if not isinstance(b, np.ndarray) or b.dtype != w.dtype or b.shape != (n,) or not np.all(np.isfinite(b)):
        return None
    chain = [node, add]
    kind = None
    after = fusion.single_reader(state, add.output[0])
    if after is not None:
        kind = _activation(state, after)
        if kind is not None:
            chain.append(after)
    if any(name in state.halves for c in chain for name in c.output):
        return None  # float16 values round after each node: left unfused

    def run(x, w, b):
        return F.dense(x, w, b, activation=kind) if kind is not None else F.dense(x, w, b)

    return fusion.Fused(chain, [node.input[0], node.input[1], add.input[k]],
                        [[(0, 0)], [(0, 1)], [(1, k)]], Form(run, weights=(1, 2), keeps_batch=x.batched))
