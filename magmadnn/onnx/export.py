"""``export(model, "m.onnx")`` (also ``model.export``): the model as an ONNX file onnxruntime runs.

Named inputs (the Input layers' names) and outputs (``output_name`` for one; the model's output names, or the list
given, for several), a dynamic batch axis ("batch"), the weights as initializers named ``<layer>/<weight>``, opset
17 (20 where a layer needs it, e.g. GELU; a model of op nodes keeps its file's opset), checked by ``onnx.checker``
(full check) before it is written. Each layer's nodes come from :mod:`.exporters` and :mod:`.exporters_more`, each
op node's from :mod:`.op_export`.
"""

from __future__ import annotations

import os

import numpy as np

from .._atomic import write_bytes
from ..layers.base import Input
from ..layers.lambda_layer import Lambda
from ..layers.operation import Operation
from . import (
    exporters_more,  # noqa: F401 - adds its layers to EXPORTERS
    op_export,
)
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


def _dims(node, batch):
    """The ONNX dims of a symbolic tensor: its batch axis first (``batch``) where it has one; None: unknown."""
    if node.shape is None:
        return None
    dims = [None if s is None else int(s) for s in node.shape]
    return [batch, *dims] if node.batched else dims


def _input_info(node, name: str, elem_of):
    """The graph input of an Input: its dtype (ids stay integers), a fixed batch size where it has one."""
    layer = node.layer
    elem = elem_of(np.dtype(layer.dtype) if layer.dtype is not None else None)
    return onnx().helper.make_tensor_value_info(name, elem, _dims(node, layer.batch_size or "batch"))


def _output_names(model, output_name) -> list[str]:
    outputs = model.outputs
    if isinstance(output_name, (list, tuple)):
        names = [str(n) for n in output_name]
        if len(names) != len(outputs) or len(set(names)) != len(names):
            raise OnnxExportError(f"model {model.name!r}: output_name must give {len(outputs)} distinct names (one "
                                  f"per output), got {list(output_name)!r}")
        return names
    if len(outputs) == 1:
        return [str(output_name)]
    names = list(model.output_names)
    return names if len(set(names)) == len(names) else [f"output_{k}" for k in range(len(outputs))]


def _refuse_layer(layer, node):
    why = ": it computes a Python function, write it with layers that have one" if isinstance(layer, Lambda) else ""
    raise OnnxExportError(f"layer {layer.name!r} ({type(layer).__name__}) has no ONNX form{why}; exportable layers: "
                          f"{', '.join(exportable_layers())}, and the op nodes of magmadnn.onnx.load (a custom layer "
                          "gets an ONNX form by an entry in magmadnn.onnx.exporters.EXPORTERS)")


def _write_nodes(b: Builder, model, names: dict) -> None:
    """Every node of ``model`` (but its Inputs, already in ``names``) as ONNX nodes; ``names``: node -> value."""
    calls = {}
    for node in model.nodes:
        if id(node) in names:
            continue
        layer = node.layer
        parents = [names[id(p)] for p in node.parents]
        if isinstance(layer, Operation):
            if node.index is None:
                names[id(node)] = op_export.write(b, layer, parents, node)[0]
                continue
            key = id(node.call)
            if key not in calls:
                calls[key] = op_export.write(b, layer, parents, node)
            names[id(node)] = calls[key][node.index]
            continue
        convert = EXPORTERS.get(type(layer))
        if convert is None:
            _refuse_layer(layer, node)
        if layer.uses_mask and any(p.masked for p in node.parents):
            raise OnnxExportError(f"layer {layer.name!r} ({type(layer).__name__}) has no ONNX form with a mask "
                                  "(Embedding(mask_zero=True), Masking): export the model without it")
        key = id(node.call) if node.index is not None else id(node)
        if key not in calls:
            calls[key] = convert(b, layer, parents, node)
        made = calls[key]
        if isinstance(made, list) != (node.index is not None):
            raise OnnxExportError(f"layer {layer.name!r} ({type(layer).__name__}) has no ONNX form with several "
                                  "outputs" if node.index is not None else
                                  f"layer {layer.name!r}: its exporter wrote several outputs for one")
        names[id(node)] = made[node.index] if node.index is not None else made


def _source_opset(model) -> int | None:
    """The opset the model's op nodes were read at (their attributes mean what they mean there), None without op
    nodes; an OnnxExportError where they come from files of different opsets."""
    found = {op_export.source_opset(n.layer) for n in model.nodes if isinstance(n.layer, Operation)}
    if len(found) > 1:
        raise OnnxExportError(f"model {model.name!r} holds op nodes read from ONNX files of opsets {sorted(found)}; "
                              "one ONNX file has one opset, so they cannot be written together")
    return found.pop() if found else None


def _pin_opset(model, b: Builder, source: int, asked) -> None:
    """A model with op nodes is written at their opset: any other (asked for, or needed by a layer) is refused."""
    layers = [n.layer for n in model.nodes if not isinstance(n.layer, (Operation, Input))]
    if asked is not None and int(asked) != source:
        raise OnnxExportError(f"model {model.name!r} holds op nodes read at ONNX opset {source}, whose attributes "
                              f"and inputs mean what they mean there: export it with opset={source} (or unset)")
    if layers and (b.opset > source or source < MIN_OPSET):
        needs = "; ".join(f"{what} needs opset {v}" for v, what in b.needs if v > source) or \
            f"magmadnn writes its layers at opset {MIN_OPSET} or newer"
        raise OnnxExportError(f"model {model.name!r} mixes op nodes read at ONNX opset {source} with layers that "
                              f"cannot be written there ({needs})")
    b.opset = source


def to_proto(model, opset: int | None = None, output_name="output", producer: str = "magmadnn"):
    """The checked ONNX ModelProto of ``model`` (see :func:`export`)."""
    module = onnx()
    helper = module.helper
    if not getattr(model, "built", False):
        raise OnnxExportError(f"model {model.name!r} is not built yet: give it an Input layer or run it on data first")
    if model.dtype not in _ELEM:
        raise OnnxExportError(f"model {model.name!r}: dtype {model.dtype} has no ONNX export (float32 or float64)")
    if getattr(model, "_subclassed", False):
        raise OnnxExportError(f"model {model.name!r} ({type(model).__name__}) is a Model subclass: its call() is "
                              "Python code, not a graph of layers ONNX can hold; build it with the functional API "
                              "(Model(inputs, outputs)) or Sequential to export it")
    elem = _ELEM[np.dtype(model.dtype)]

    def elem_of(dtype):
        if dtype is None or dtype.kind == "f" and dtype not in _ELEM:
            return elem
        return helper.np_dtype_to_tensor_dtype(dtype)

    source = _source_opset(model)
    b = Builder(model, None if opset is None or source is not None else int(opset))
    names, inputs = {}, []
    for node in model.inputs:
        names[id(node)] = b.unique(node.layer.name)
        inputs.append(_input_info(node, names[id(node)], elem_of))
    finals = _output_names(model, output_name)
    for name in finals:
        if name in b._names:
            raise OnnxExportError(f"model {model.name!r}: output name {name!r} is an input's name; give another "
                                  "(output_name=...)")
        b.unique(name)  # reserved: the output values are renamed to them
    _write_nodes(b, model, names)
    taken: set[str] = set()
    graph_inputs = {v.name for v in inputs}
    outputs = []
    for node, final in zip(model.outputs, finals):
        last = names[id(node)]
        if last in graph_inputs or last in taken:  # an input, or a value given twice: an Identity of it
            last = b.node("Identity", [last], f"{final}/identity")
        taken.add(last)
        _rename(b.nodes, last, final)
        layer = node.layer
        dtype = op_export.output_dtype(layer, node.index or 0) if isinstance(layer, Operation) else None
        outputs.append(helper.make_tensor_value_info(final, elem_of(None if dtype is None else np.dtype(dtype)),
                                                     _dims(node, model._batch_size or "batch")))
    if source is not None:
        _pin_opset(model, b, source, opset)
    elif opset is not None:
        b.opset = _checked_opset(model, opset, b, module.defs.onnx_opset_version())
    graph = helper.make_graph(b.nodes, model.name, inputs, outputs, b.initializers)
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
    ask for a newer one; a model of op nodes is written at the opset it was read at); returns the path. Input names
    are the Input layers' names; one output is named ``output_name``, several by ``model.output_names`` or a list
    given as ``output_name``; the batch axis is dynamic. A layer with no ONNX form is an OnnxExportError naming
    it."""
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() in (".safetensors", ".npz"):
        raise OnnxExportError(f"{path!r} names a magmadnn model file (.safetensors/.npz), which model.save writes; "
                              "give the ONNX file a name ending in .onnx")
    proto = to_proto(model, opset=opset, output_name=output_name)
    return write_bytes(path, proto.SerializeToString())
