"""Activations written as chains of element-wise ONNX nodes, read back as one activation layer: GELU and SiLU
(``x * sigmoid(x)``, as magmadnn's export and PyTorch's ``F.silu`` write it; ONNX has no SiLU operator).

Exporters below opset 20 write GELU as primitives: the exact form as ``Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x ->
Mul 0.5``, the tanh form as ``Pow/Mul x^3 -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul x ->
Mul 0.5``, in an order and association each exporter picks. So a chain is recognised by what it computes, not by
its node order: from the first node reading a tensor ``x``, the element-wise nodes of ``x`` and scalar constants
that follow are evaluated on sample points, and a node whose value is GELU of ``x`` (with every node before it in
the chain read by the chain only) becomes one Activation layer.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import geometry, host
from ..layers import Activation
from .import_state import Value

__all__ = ["OPS", "gelu_kind", "recognise"]

#: element-wise operators a decomposed activation is written with
OPS = {"Div": np.divide, "Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Pow": np.power,
       "Erf": np.frompyfunc(math.erf, 1, 1), "Tanh": np.tanh, "Sqrt": np.sqrt,
       "Sigmoid": lambda t: 1.0 / (1.0 + np.exp(-t))}
_WINDOW = 24  # nodes after the first reader searched for the rest of a chain
_POINTS = np.linspace(-6.0, 6.0, 97)
_TANH_C = math.sqrt(2.0 / math.pi)
#: approximate (the Gelu op's attribute) -> GELU on sample points
GELU = {"none": lambda t: 0.5 * t * (1.0 + np.frompyfunc(math.erf, 1, 1)(t / math.sqrt(2.0)).astype(float)),
        "tanh": lambda t: 0.5 * t * (1.0 + np.tanh(_TANH_C * (t + 0.044715 * t ** 3)))}
#: what a chain may compute: GELU's forms, and SiLU
_FORMS = {**GELU, "silu": lambda t: t / (1.0 + np.exp(-t))}


def gelu_kind(approximate: str) -> str | None:
    """The activation kind computing GELU of ``approximate`` ("none": exact, "tanh"), found among the kinds named
    gelu by the values it computes; None where magmadnn has no such kind."""
    for kind in geometry.ACTIVATIONS:
        if "gelu" in kind and approximate in GELU:
            values = host.activation_forward(_POINTS.copy(), kind)
            if np.allclose(values, GELU[approximate](_POINTS), rtol=0, atol=1e-9):
                return kind
    return None


def recognise(graph, node):
    """The outputs of ``node`` when it starts a decomposed GELU or SiLU (the chain's nodes then absorbed and its
    last output registered), else None. Raises the node's error for an exact GELU where magmadnn has none."""
    inputs = [n for n in node.input if isinstance(graph.values.get(n), Value)]
    if len(set(inputs)) != 1 or graph.values[inputs[0]].layout is not None:
        return None
    x_name = inputs[0]
    chain = _chain(graph, node, x_name)
    if chain is None:
        return None
    values = {x_name: _POINTS}
    for step in chain:
        args = [values[n] if n in values else graph.values[n].reshape(()).astype(float) for n in step.input]
        with np.errstate(all="ignore"):
            values[step.output[0]] = np.asarray(OPS[step.op_type](*args), dtype=float)
        for approximate, reference in _FORMS.items():
            if np.allclose(values[step.output[0]], reference(_POINTS), rtol=1e-5, atol=1e-5):
                used = _closed(graph, chain, step, x_name)
                if used is not None:
                    return _activation(graph, node, x_name, used, step, approximate)
    return None


def _chain(graph, node, x_name: str):
    """``node`` and the element-wise nodes after it (within a window) computed from ``x`` and scalar constants."""
    nodes = graph.proto.graph.node
    start = next(i for i, n in enumerate(nodes) if n is node)
    known, chain = {x_name}, []
    for step in nodes[start:start + _WINDOW]:
        if step.op_type not in OPS or id(step) in graph.absorbed or len(step.output) != 1:
            continue
        if any(n not in known and not _scalar(graph.values.get(n)) for n in step.input) or not (
                set(step.input) & known):
            continue
        chain.append(step)
        known.add(step.output[0])
    return chain if chain and chain[0] is node else None


def _scalar(found) -> bool:
    return isinstance(found, np.ndarray) and found.size == 1 and found.dtype.kind in "fi"


def _closed(graph, chain, last, x_name: str):
    """The nodes of ``chain`` that ``last`` is computed from, when they start at the chain's first node and no
    other node (nor the graph's output) reads their intermediate values; else None."""
    makers = {step.output[0]: step for step in chain}
    used, todo = {id(last): last}, [last]
    while todo:
        for name in todo.pop().input:
            if name in makers and id(makers[name]) not in used:
                used[id(makers[name])] = makers[name]
                todo.append(makers[name])
    if id(chain[0]) not in used:
        return None
    for step in used.values():
        if step is not last and (step.output[0] in graph.outputs or any(
                id(reader) not in used for reader in graph.consumers.get(step.output[0], []))):
            return None
    return list(used.values())


def _activation(graph, node, x_name: str, used, last, approximate: str):
    kind = "silu" if approximate == "silu" else gelu_kind(approximate)
    what = {"none": "exact (erf) GELU", "tanh": "tanh-approximated GELU"}.get(approximate, approximate)
    if kind is None:
        raise graph.error(node, f"this node starts {what} written as element-wise nodes (ending at "
                                f"{graph.where(last)}), which magmadnn has no activation for",
                          "GELU with approximate='tanh'")
    x = graph.values[x_name]
    value = graph.layer(node, Activation, x.tensor, kind)
    for step in used:
        graph.absorb(step)
    graph.values[last.output[0]] = Value(value.tensor, x.shape)
    return [None]
