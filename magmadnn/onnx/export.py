"""``export(model, "m.onnx")`` (also ``model.export``): the model as an ONNX file onnxruntime runs.

Named inputs (the Input layers' names) and output, a dynamic batch axis ("batch"), the weights as initializers
named ``<layer>/<weight>``, opset 17 (20 where a layer needs it, e.g. GELU), checked by ``onnx.checker`` (full
check) before it is written. Each layer's nodes come from :mod:`.exporters`.
"""

from __future__ import annotations

import os

import numpy as np

from .._atomic import write_bytes
from ..layers.base import Input
from ._proto import onnx
from .errors import OnnxExportError
from .exporters import EXPORTERS, exportable_layers

__all__ = ["export", "to_proto", "Builder", "MIN_OPSET"]

MIN_OPSET = 17
_ELEM = {np.dtype(np.float32): 1, np.dtype(np.float64): 11}


class Builder:
    """Collects the nodes and initializers of one export, with unique tensor names."""

    def __init__(self, model, target: int | None = None):
        self.model, self.dtype = model, np.dtype(model.dtype)
        self.target = target  # the opset asked for (None: the least every layer needs); exporters may follow it
        self.nodes, self.initializers, self.opset = [], [], MIN_OPSET
        self._names: set[str] = set()
        self._weights: dict[tuple[int, str], str] = {}
        self.needs: list[tuple[int, str]] = []  # (opset, what needs it)

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}:{k}", k + 1
        self._names.add(name)
        return name

    def need_opset(self, version: int, what: str) -> None:
        self.opset = max(self.opset, version)
        self.needs.append((version, what))

    def node(self, op: str, inputs, base: str, **attrs) -> str:
        out = self.unique(base)
        self.nodes.append(onnx().helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def constant(self, base: str, value, dtype=np.float32) -> str:
        name = self.unique(base)
        self.initializers.append(onnx().numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, layer, key: str) -> str:
        """The initializer of weight or state array ``key`` of ``layer`` (one per layer, however often it is used)."""
        found = self._weights.get((id(layer), key))
        if found is None:
            array = layer.params[key].data if key in layer.params else layer.state[key]
            found = self.constant(f"{layer.name}/{key}", np.asarray(self.model.xp.to_numpy(array)), self.dtype)
            self._weights[(id(layer), key)] = found
        return found


def _value_info(name: str, elem: int, shape):
    return onnx().helper.make_tensor_value_info(name, elem, ["batch", *(int(s) for s in shape)])


def to_proto(model, opset: int | None = None, output_name: str = "output", producer: str = "magmadnn"):
    """The checked ONNX ModelProto of ``model`` (see :func:`export`)."""
    module = onnx()
    helper = module.helper
    if not getattr(model, "built", False):
        raise OnnxExportError(f"model {model.name!r} is not built yet: give it an Input layer or run it on data first")
    if model.dtype not in _ELEM:
        raise OnnxExportError(f"model {model.name!r}: dtype {model.dtype} has no ONNX export (float32 or float64)")
    b = Builder(model, None if opset is None else int(opset))
    b.unique(output_name)  # reserved: the last node's output is renamed to it
    elem = _ELEM[np.dtype(model.dtype)]
    names = {}
    inputs = []
    for node in model.inputs:
        names[id(node)] = b.unique(node.layer.name)
        integer = node.layer.dtype is not None and np.dtype(node.layer.dtype).kind in "iu"
        inputs.append(_value_info(names[id(node)], 7 if integer else elem, node.shape))  # 7: INT64 ids
    for node in model.nodes:
        if id(node) in names:
            continue
        layer = node.layer
        convert = EXPORTERS.get(type(layer))
        if convert is None:
            raise OnnxExportError(f"layer {layer.name!r} ({type(layer).__name__}) has no ONNX form; exportable "
                                  f"layers: {', '.join(exportable_layers())}")
        if node.index is not None or getattr(layer, "go_backwards", False) or (
                layer.uses_mask and any(p.masked for p in node.parents)) or (getattr(layer, "states", 0) and node.many):
            raise OnnxExportError(f"layer {layer.name!r} ({type(layer).__name__}) has no ONNX form with several "
                                  "outputs (return_state), go_backwards, initial_state or a mask "
                                  "(Embedding(mask_zero=True))")
        names[id(node)] = convert(b, layer, [names[id(p)] for p in node.parents], node)
    last = names[id(model.output)]
    if isinstance(model.output.layer, Input):
        last = b.node("Identity", [last], f"{output_name}/identity")
    _rename(b.nodes, last, output_name)
    if opset is not None:
        b.opset = _checked_opset(model, opset, b, module.defs.onnx_opset_version())
    graph = helper.make_graph(b.nodes, model.name, inputs, [_value_info(output_name, elem, model.output.shape)],
                              b.initializers)
    opsets = [helper.make_opsetid("", b.opset)]
    proto = helper.make_model(graph, opset_imports=opsets, producer_name=producer,
                              ir_version=helper.find_min_ir_version_for(opsets))
    try:
        module.checker.check_model(proto, full_check=True)
    except Exception as exc:  # noqa: BLE001 - a failing check is a bug of an exporter: say which model
        raise OnnxExportError(f"model {model.name!r}: the ONNX graph fails onnx.checker: {exc}") from exc
    return proto


def _checked_opset(model, opset, b: Builder, newest: int) -> int:
    """The opset asked for, or an OnnxExportError saying why it cannot be (too old for magmadnn or for one of the
    model's layers, newer than the installed onnx knows, not an integer)."""
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        raise OnnxExportError(f"opset must be an integer (an ONNX opset version such as {MIN_OPSET}), got {opset!r}")
    opset = int(opset)
    if opset > newest:
        raise OnnxExportError(f"model {model.name!r} cannot be written with opset {opset}: the installed onnx "
                              f"package knows opsets up to {newest}; ask for {b.opset} to {newest}, or upgrade onnx")
    if opset < b.opset:
        needs = [f"{what} needs opset {v}" for v, what in b.needs if v > opset]
        if MIN_OPSET > opset:
            needs.insert(0, f"magmadnn writes opset {MIN_OPSET} or newer")
        raise OnnxExportError(f"model {model.name!r} cannot be written with opset {opset}: {'; '.join(needs)}; "
                              f"ask for {b.opset} to {newest}, or leave opset unset")
    return opset


def _rename(nodes, old: str, new: str) -> None:
    if old == new:
        return
    for node in nodes:
        for field in (node.input, node.output):
            for i, name in enumerate(field):
                if name == old:
                    field[i] = new


def export(model, path, opset: int | None = None, output_name: str = "output"):
    """Write ``model`` to the ONNX file ``path`` (opset 17 by default, higher where a layer needs it; ``opset`` to
    ask for a newer one); returns the path. Input names are the Input layers' names, the output is
    ``output_name``, the batch axis is dynamic. A layer with no ONNX form is an OnnxExportError naming it."""
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() in (".safetensors", ".npz"):
        raise OnnxExportError(f"{path!r} names a magmadnn model file (.safetensors/.npz), which model.save writes; "
                              "give the ONNX file a name ending in .onnx")
    proto = to_proto(model, opset=opset, output_name=output_name)
    return write_bytes(path, proto.SerializeToString())
