"""Op nodes -> ONNX nodes: how an :class:`~magmadnn.layers.Operation` made by the op-node import writes itself back.

The import (:mod:`.op_graph`) gives each op node its source (:func:`remember`): the ONNX node it computes (op
type, domain, attributes, the number of outputs and which are left out), the opset it was read at and its outputs'
element types. Its ``arguments`` already say, per ONNX input position, what each input is: a computed value
(``input``), a trainable parameter (``weight``), a constant (``constant``: a buffer on the device; ``host``: a shape,
axes or sizes), or left out (``none``). :func:`write` rebuilds the node from these two: the same op type and
attributes, the inputs renamed to the exported graph's values, every parameter and constant an initializer holding
its current value (a fine-tuned parameter is written as trained). Nothing here knows an operator: one rule for all.

An Operation without a source (made by hand around a Python function) has no ONNX form: an OnnxExportError.
"""

from __future__ import annotations

import numpy as np

from ._proto import onnx
from .errors import OnnxExportError

__all__ = ["remember", "remember_chain", "write", "source_opset", "output_dtype"]


class _Source:
    """What an op node was read from: the ONNX node (a copy), its opset, its outputs' dtypes (None: unknown)."""

    __slots__ = ("node", "opset", "dtypes")

    def __init__(self, node, opset: int, dtypes):
        self.node, self.opset, self.dtypes = node, int(opset), tuple(dtypes)


class _Chain:
    """What a fused op node (:mod:`.fusion`) was read from: its ONNX nodes (copies), the (node index, input
    position) pairs each of its arguments feeds, the opset, its outputs' dtypes."""

    __slots__ = ("nodes", "slots", "opset", "dtypes")

    def __init__(self, nodes, slots, opset: int, dtypes):
        self.nodes, self.slots, self.opset, self.dtypes = nodes, slots, int(opset), tuple(dtypes)


def _copy(node):
    copy = onnx().NodeProto()
    copy.CopyFrom(node)
    return copy


def remember(op, node, opset: int, dtypes=()) -> None:
    """Give the op node ``op`` its ONNX source ``node`` read at ``opset`` (``dtypes``: per output, or None)."""
    op.onnx_source = _Source(_copy(node), opset, dtypes)


def remember_chain(op, nodes, slots, opset: int, dtypes=()) -> None:
    """Give the fused op node ``op`` its ONNX source: the chain ``nodes``, argument k feeding the (node index,
    input position) pairs ``slots[k]`` (the other inputs of the chain's nodes are outputs of earlier ones)."""
    op.onnx_source = _Chain([_copy(n) for n in nodes], [list(s) for s in slots], opset, dtypes)


def _source(layer):
    source = getattr(layer, "onnx_source", None)
    if source is None:
        raise OnnxExportError(f"Operation {layer.name!r} ({layer.op_type}) computes a Python function with no ONNX "
                              "form (only the op nodes magmadnn.onnx.load makes know their ONNX operator); build "
                              "the model from layers, or export the graph it came from")
    return source


def source_opset(layer) -> int:
    """The default-domain opset ``layer``'s ONNX node was read at (its attributes mean what they mean there)."""
    return _source(layer).opset


def output_dtype(layer, index: int):
    """The NumPy dtype of output ``index`` of ``layer`` as the import inferred it (None where unknown)."""
    dtypes = _source(layer).dtypes
    return dtypes[index] if index < len(dtypes) else None


def _array(b, layer, kind: str, key: str) -> np.ndarray:
    if kind == "weight":
        return np.asarray(b.model.xp.to_numpy(layer.params[key].data))
    if kind == "constant":
        return np.asarray(b.model.xp.to_numpy(layer.state[key]))
    return np.asarray(layer.host[key])


def write(b, layer, inputs: list[str], node) -> list[str]:
    """Add ``layer``'s ONNX node to the builder ``b`` (inputs: the ONNX names of its parents); its output names."""
    source = _source(layer)
    if isinstance(source, _Chain):
        return _write_chain(b, layer, inputs, source)
    names = []
    for position, (kind, key) in enumerate(layer.arguments):
        if kind == "input":
            names.append(inputs[key])
        elif kind == "none":
            names.append("")
        else:
            array = _array(b, layer, kind, key)
            names.append(b.constant(f"{layer.name}/{source.node.input[position] or key}", array, array.dtype))
    outputs = [b.unique(layer.name if k == 0 else f"{layer.name}:{k}") if given else ""
               for k, given in enumerate(source.node.output)]
    made = onnx().NodeProto()
    made.CopyFrom(source.node)
    made.name = layer.name
    del made.input[:], made.output[:]
    made.input.extend(names)
    made.output.extend(outputs)
    b.nodes.append(made)
    return outputs


def _write_chain(b, layer, inputs: list[str], source: _Chain) -> list[str]:
    """A fused op node written back as the chain of nodes it computes: its arguments where they fed the chain, the
    chain's inner values under names of its own, the last node's outputs as the op node's."""
    fed = {}
    for (kind, key), slots in zip(layer.arguments, source.slots):
        if kind == "input":
            name = inputs[key]
        elif kind == "none":
            name = ""
        else:
            array = _array(b, layer, kind, key)
            first = source.nodes[slots[0][0]].input[slots[0][1]] if slots else key
            name = b.constant(f"{layer.name}/{first or key}", array, array.dtype)
        for slot in slots:
            fed[tuple(slot)] = name
    inner: dict[str, str] = {}
    last = len(source.nodes) - 1
    outputs = []
    for i, node in enumerate(source.nodes):
        made = onnx().NodeProto()
        made.CopyFrom(node)
        made.name = layer.name if i == last else f"{layer.name}/{i}"
        names = [fed[(i, p)] if (i, p) in fed else inner[n] if n else "" for p, n in enumerate(node.input)]
        if i == last:
            outs = outputs = [b.unique(layer.name if k == 0 else f"{layer.name}:{k}") if given else ""
                              for k, given in enumerate(node.output)]
        else:
            outs = [b.unique(f"{layer.name}/{i}:{k}") if given else "" for k, given in enumerate(node.output)]
            inner.update((n, o) for n, o in zip(node.output, outs) if n)
        del made.input[:], made.output[:]
        made.input.extend(names)
        made.output.extend(outs)
        b.nodes.append(made)
    return outputs
