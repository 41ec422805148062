"""``load(path, device=...)``: an ONNX file as a functional :class:`~magmadnn.models.Model` with its weights.

The graph is walked node by node (ONNX keeps them in topological order); each node is turned into layers by its
entry in :mod:`.importers`. Nothing outside the new model is touched, and the weights are checked all together
before the first is set, so loading either returns a complete model or raises (all or nothing).
"""

from __future__ import annotations

import os

import numpy as np

from ..layers.reshaping import Reshape
from ..models import Model
from ..saving import ArchitectureMismatchError, ModelFileError
from . import attention, decompositions, folded_attention, op_graph
from ._proto import default_opset, onnx, read
from .errors import OnnxImportError, UnsupportedOnnxError
from .import_state import BATCH, DTYPES, SHAPE_OPS, BatchZeros, Graph, Pending, Value
from .importers import IMPORTERS, supported_operators

__all__ = ["load", "convert", "check"]


def _model_dtype(proto):
    initializers = {i.name for i in proto.graph.initializer}
    kinds = {i.type.tensor_type.elem_type for i in proto.graph.input if i.name not in initializers} - {6, 7}
    if len(kinds) == 1 and next(iter(kinds)) in DTYPES:
        return DTYPES[next(iter(kinds))]
    return np.float32  # input_layer names the offending input


def _constants(graph: Graph, proto) -> None:
    numpy_helper = onnx().numpy_helper
    for init in proto.graph.initializer:
        try:
            graph.values[init.name] = np.asarray(numpy_helper.to_array(init))
        except Exception as exc:  # noqa: BLE001 - damaged tensor bytes
            raise OnnxImportError(f"initializer {init.name!r} cannot be read: {exc}") from None


def _hint(proto) -> str:
    """What an unsupported node is likely part of, where the graph shows it."""
    if any(node.op_type == "Erf" for node in proto.graph.node):
        if decompositions.gelu_kind("none") is None:
            return (" (the graph computes the exact, erf-based GELU from Erf and arithmetic; magmadnn imports the "
                    "single Gelu operator: export with opset 20)")
        return " (Erf is read only inside an exact GELU chain, x * 0.5 * (1 + erf(x / sqrt(2))))"
    return ""


def _batch_zeros(graph: Graph, node) -> BatchZeros:
    """ConstantOfShape of (or Expand to) a shape holding the batch size: zeros (a recurrent initial state) are
    supported."""
    if node.op_type == "Expand":
        fill = graph.values[node.input[0]]
    else:
        fill = graph.attrs(node, {"value": None})["value"]
        fill = None if fill is None else onnx().numpy_helper.to_array(fill)
    if fill is not None and np.any(fill):
        raise graph.error(node, "a non-zero constant whose shape holds the batch size is not supported",
                          "zeros (a recurrent operator's initial state)")
    return BatchZeros(graph.values[node.input[-1]])


def _fold(graph: Graph, node) -> list:
    """The outputs of a node whose inputs are all constants, computed by onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    helper = onnx().helper
    untyped = helper.make_empty_tensor_value_info
    one = helper.make_graph([node], "fold", [untyped(n) for n in node.input if n],
                            [untyped(n) for n in node.output if n])
    proto = helper.make_model(one, opset_imports=[helper.make_opsetid("", graph.opset)])
    try:
        results = ReferenceEvaluator(proto).run(None, {n: graph.values[n] for n in node.input if n})
    except Exception as exc:  # noqa: BLE001 - the evaluator raises what its operator raises
        raise graph.error(node, f"computing it from its constant inputs failed: {type(exc).__name__}: {exc}",
                          "constant inputs the ONNX reference evaluator computes") from None
    return [np.asarray(r) for r in results]


def check(proto, name: str | None = None, device=None, seed: int | None = None):
    """Every check of an import, shared by :func:`load` and :func:`~magmadnn.onnx.info`: the graph walked node by
    node into layers and each weight checked against its layer (shape, dtype, finite values). Returns the Model
    (its weights still the layers' initial ones) and the checked weights to commit; raises UnsupportedOnnxError /
    OnnxImportError as :func:`load` does."""
    graph = Graph(proto, default_opset(proto), _model_dtype(proto))
    _constants(graph, proto)
    inputs = []
    for spec in proto.graph.input:
        if spec.name not in graph.values:
            value = graph.input_layer(spec)
            graph.values[spec.name] = value
            inputs.append(value.tensor)
    if not inputs:
        raise UnsupportedOnnxError("the graph has no input that is not a constant")
    _walk(graph, proto)
    result = _output(graph, proto)
    model = Model(inputs, result.tensor, name=name or proto.graph.name or "onnx_model", seed=seed,
                  dtype=graph.dtype, device=device)
    index = {id(layer): i for i, layer in enumerate(model.layers)}
    arrays = {f"layers.{index[id(layer)]}.{key}": array for layer, weights in graph.weights
              if id(layer) in index for key, array in weights.items()}
    try:
        plan = model._prepare_assign(arrays, "ONNX import")
    except (ModelFileError, ArchitectureMismatchError) as exc:  # a weight the layer cannot take: the file's fault
        raise OnnxImportError(str(exc)) from None
    return model, plan


def _walk(graph: Graph, proto) -> None:
    """Every node of the graph turned into values and layers."""
    constants = [node for node in proto.graph.node if node.op_type == "Constant" and node.domain in ("", "ai.onnx")]
    for node in constants:  # first: a pattern (an LSTM's last step) may look at constants written after it
        graph.values[node.output[0]] = IMPORTERS["Constant"](graph, node)[0]
        graph.absorb(node)
    for node in proto.graph.node:
        if id(node) in graph.absorbed:
            continue
        if node.domain not in ("", "ai.onnx"):
            raise graph.error(node, f"operators of domain {node.domain!r} are not supported",
                              "the default ONNX domain")
        if node.op_type in SHAPE_OPS:
            graph.batch_shape(node, SHAPE_OPS[node.op_type])
        if node.input and node.op_type != "Constant" and all(
                isinstance(graph.values.get(n), np.ndarray) for n in node.input if n):
            if node.op_type in ("ConstantOfShape", "Expand") and np.any(graph.values[node.input[-1]] == BATCH):
                outputs = [_batch_zeros(graph, node)]
            else:  # a node of constants only (shape arithmetic, weight transposes)
                outputs = _fold(graph, node)
            for out_name, value in zip(node.output, outputs):
                graph.values[out_name] = value
            continue
        convert_node = IMPORTERS.get(node.op_type)
        pending = [v for v in map(graph.values.get, node.input) if isinstance(v, Pending)]
        if not pending and node.op_type in decompositions.OPS:  # the first node of a decomposed GELU?
            if decompositions.recognise(graph, node) is not None:
                continue
        if pending:  # inside an attention pattern (nn.MultiheadAttention's folds the batch into other axes)
            convert_node = folded_attention.follow if any(v.full is not None for v in pending) else attention.follow
        if convert_node is None:
            raise graph.error(node, "this operator is not supported" + _hint(proto), ", ".join(supported_operators()))
        try:
            outputs = convert_node(graph, node)
        except (IndexError, KeyError) as exc:  # a form no importer foresaw: still name the node
            raise graph.error(node, f"this form of the operator is not supported ({type(exc).__name__}: {exc})") \
                from None
        for out_name, value in zip(node.output, outputs):
            if out_name and value is not None:  # None: an output nobody reads
                graph.values[out_name] = value


def _output(graph: Graph, proto) -> Value:
    """The graph's one output, checked to be a batch-first tensor computed from the inputs."""
    if len(proto.graph.output) != 1:
        raise UnsupportedOnnxError(f"the graph has {len(proto.graph.output)} outputs; magmadnn models have one")
    out_name = proto.graph.output[0].name
    result = graph.values.get(out_name)
    if isinstance(result, Pending):
        raise UnsupportedOnnxError(f"graph output {out_name!r} is an intermediate of an attention pattern (made by "
                                   f"{graph.where(result.node)}); end attention with its output projection")
    if not isinstance(result, Value):
        raise UnsupportedOnnxError(f"graph output {out_name!r} is a constant, not computed from the inputs")
    if result.layout is not None:
        raise UnsupportedOnnxError(f"graph output {out_name!r} keeps its batch axis inside ({result.layout}); "
                                   "end the graph batch first")
    if result.shape != tuple(result.tensor.shape):  # unit axes kept aside (GlobalAveragePool, Unsqueeze): restored
        if not result.shape:
            raise UnsupportedOnnxError(f"graph output {out_name!r} has shape (N,); magmadnn models give at least "
                                       "(N, 1): end the graph without squeezing the last axis")
        layer = Reshape(result.shape, name=graph._unique(f"{out_name}_reshape"))
        return Value(layer(result.tensor), result.shape)
    return result


_LAYERS = ("auto", True, False)


def convert(proto, name: str | None = None, device=None, seed: int | None = None, layers="auto",
            fuse: bool = True) -> Model:
    """The magmadnn Model of a checked ModelProto (see :func:`load`)."""
    if layers not in _LAYERS:
        raise ValueError(f"load: layers must be 'auto', True or False, got {layers!r}")
    refusal = None
    if layers is not False:
        try:
            model, plan = check(proto, name=name, device=device, seed=seed)
        except UnsupportedOnnxError as exc:
            if layers is True:
                raise
            refusal = exc
        else:
            model._commit(plan)
            return model
    try:
        return op_graph.build(proto, name=name, device=device, seed=seed, fuse=fuse)
    except UnsupportedOnnxError as exc:
        if refusal is None:
            raise
        raise UnsupportedOnnxError(f"{exc} (read as magmadnn layers instead: {refusal})") from None


def load(path, device=None, name: str | None = None, seed: int | None = None, layers="auto",
         fuse: bool = True) -> Model:
    """The model in the ONNX file ``path`` (from ``torch.onnx.export``, ``Model.export`` or any ONNX writer using
    the operators of :data:`magmadnn.onnx.importers.IMPORTERS`) as a functional Model with its weights, on
    ``device`` ("host", "gpu", "gpu:N", "auto"; default: the current default). ``seed`` seeds its dropout and
    shuffling (compile it without ``seed=``, which would re-create the weights). Raises OnnxImportError for a
    file that cannot be read and UnsupportedOnnxError naming the node, op type and what is supported for anything
    magmadnn has no form for.

    ``layers``: the graph is first read as magmadnn layers (Conv -> Conv2D, Gemm -> Dense, attention chains ->
    MultiHeadAttention, ...: a readable summary, the layers' fast paths, a clean export); where a node has no layer
    form, ``"auto"`` (the default) loads the graph as op nodes instead, one :class:`~magmadnn.layers.Operation` per
    ONNX node (:mod:`.op_graph`: any graph of supported operators, several inputs and outputs, dynamic axes);
    ``True`` keeps the layers' refusal, ``False`` always makes op nodes. ``fuse``: op nodes make one node of each
    chain with a fused form (:mod:`.fusion`: MatMul + bias [+ activation], attention, Conv [+ residual Add] [+ Relu]:
    the same values and gradients, a faster host inference); ``False`` keeps one op node per ONNX node."""
    proto = read(path)
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return convert(proto, name=proto.graph.name or stem, device=device, seed=seed, layers=layers, fuse=fuse)
