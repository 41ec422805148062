"""The state of one ONNX import: the values by ONNX name, the layers made so far and their weights, and the
errors that name the node, its op type and what is supported."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

import numpy as np

from ..layers.base import Input
from ..layers.reshaping import Reshape
from ._proto import onnx
from .errors import UnsupportedOnnxError

__all__ = ["Value", "BatchZeros", "Pending", "Graph", "DTYPES", "BATCH", "SHAPE_OPS", "reshape_dims"]

DTYPES = {1: np.float32, 11: np.float64}  # TensorProto.FLOAT, DOUBLE
INTEGERS = (6, 7)  # INT32, INT64: ids for embeddings
#: the batch size where a shape computed from the graph holds it (Shape of a computed tensor): unknown until run
BATCH = np.int64(-(1 << 40))
#: node type -> the input holding a shape whose leading entry is the batch size (see Graph.batch_shape)
SHAPE_OPS = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0}


class Value:
    """An activation of the graph: the magmadnn tensor that holds it and its ONNX per-sample shape (the same size;
    they differ where magmadnn drops unit axes, e.g. GlobalAveragePool's (C, 1, 1) is magmadnn's (C,)).

    ``layout`` says where ONNX keeps the batch axis when it is not first (the tensor always has it first):
    "time_major" (T, N, ...) around recurrent operators, "sequence" a recurrent output Y (T, 1, N, H),
    "sequence_swapped" that Y transposed to (T, N, 1, H), "state" a final recurrent state (1, N, H). Such values
    feed only the operators that undo the layout."""

    __slots__ = ("tensor", "shape", "name", "layout")

    def __init__(self, tensor, shape=None, name: str = "", layout: str | None = None):
        self.tensor, self.shape, self.name = tensor, tuple(tensor.shape if shape is None else shape), name
        self.layout = layout


class BatchZeros:
    """A constant of zeros whose shape holds the batch size (ConstantOfShape of a Shape): a recurrent operator's
    zero initial state, as PyTorch writes it."""

    def __init__(self, shape):
        self.shape = tuple(int(s) for s in shape)


class Pending:
    """A value inside an attention pattern (see :mod:`.attention`): its ONNX per-sample shape and the node that
    made it; no layer until the pattern's output projection. ``full``: the whole ONNX shape where the batch is
    folded into other axes (:mod:`.folded_attention`; batch factors are multiples of ``BATCH``), else None;
    ``result``: the layer's Value once the output projection is read."""

    __slots__ = ("shape", "node", "full", "result")

    def __init__(self, shape, node, full=None, result=None):
        self.shape, self.node = tuple(int(s) for s in shape), node
        self.full = None if full is None else tuple(int(s) for s in full)
        self.result = result


class Graph:
    """The state of one import: values by ONNX name, the layers made so far and their weights."""

    def __init__(self, proto, opset: int, dtype):
        self.proto, self.opset, self.dtype = proto, opset, np.dtype(dtype)
        self.values: dict[str, object] = {}  # ONNX name -> Value or a constant np.ndarray
        self.weights: list = []  # [(layer, {weight name: array})]
        self.consumers: dict[str, list] = defaultdict(list)
        self.outputs = {o.name for o in proto.graph.output}
        self.absorbed: set[int] = set()  # ids of nodes folded into an earlier node's layer
        self._names: Counter = Counter()
        self.producers = {name: node for node in proto.graph.node for name in node.output if name}
        self.hint = ""  # added to every node error where the graph shows what it comes from
        self.static_batch: int | None = None  # B of a graph exported with a fixed batch size (set by input_layer)
        self._batches: set[int] = set()
        if any("in_proj" in init.name for init in proto.graph.initializer):
            self.hint = (" (the graph looks like PyTorch's nn.MultiheadAttention, which imports as MultiHeadAttention "
                         "for self-attention called with need_weights=False, no key_padding_mask and no mask or the "
                         "causal one)")
        for node in proto.graph.node:
            for name in node.input:
                if name:
                    self.consumers[name].append(node)

    # -- errors
    @staticmethod
    def where(node) -> str:
        return f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type})"

    def error(self, node, what: str, supported: str | None = None) -> UnsupportedOnnxError:
        tail = f"; supported: {supported}" if supported else ""
        return UnsupportedOnnxError(f"{self.where(node)}: {what}{tail}{self._static_hint(node)}{self.hint}")

    def _static_hint(self, node) -> str:
        if self.static_batch is None or node.op_type not in SHAPE_OPS and not any(
                isinstance(self.values.get(n), Pending) for n in node.input):
            return ""
        return (f" (the graph was exported with the fixed batch size {self.static_batch}, which is read as the batch "
                "axis only where it leads a shape; where the batch is folded into other axes it cannot be "
                "generalised: export with a dynamic batch, torch.onnx.export(..., dynamic_shapes=({0: "
                "torch.export.Dim('batch')},)) or, with dynamo=False, dynamic_axes={'<input>': {0: 'batch'}})")

    def batch_shape(self, node, index: int) -> None:
        """Read a fixed batch size leading the constant shape input ``index`` of ``node`` as the batch axis."""
        name = node.input[index] if len(node.input) > index else ""
        found, data = self.values.get(name), self.values.get(node.input[0])
        if node.op_type == "Reshape" and not (isinstance(data, Value) and data.layout is None
                                              or isinstance(data, Pending) and data.full is None):
            return  # a time-major or batch-folded value: its leading axis is not the batch
        if (self.static_batch is not None and isinstance(found, np.ndarray) and found.dtype.kind == "i"
                and found.ndim == 1 and found.size and found[0] == self.static_batch):
            self.values[name] = np.concatenate([[BATCH], found[1:]]).astype(found.dtype)

    # -- inputs of a node
    def attrs(self, node, defaults: dict) -> dict:
        """The node's attributes with ``defaults`` filled in; an attribute not in ``defaults`` is an error."""
        helper = onnx().helper
        out = dict(defaults)
        for attr in node.attribute:
            if attr.name not in defaults:
                raise self.error(node, f"attribute {attr.name!r} is not supported",
                                 ", ".join(sorted(defaults)) or "no attributes")
            value = helper.get_attribute_value(attr)
            out[attr.name] = value.decode() if isinstance(value, bytes) else value
        return out

    def has(self, node, index: int) -> bool:
        return len(node.input) > index and bool(node.input[index])

    def constant(self, node, index: int, what: str) -> np.ndarray:
        name = node.input[index] if len(node.input) > index else ""
        found = self.values.get(name)
        if not isinstance(found, np.ndarray):
            raise self.error(node, f"input {index} ({what}, {name!r}) must be a constant (an initializer or a "
                                   "Constant node)")
        return found

    def rank(self, node, value: Value, ranks: tuple[int, ...], layout: str) -> None:
        if len(value.shape) + 1 not in ranks:
            raise self.error(node, f"an input of shape (N, {', '.join(map(str, value.shape))}) is not supported",
                             f"inputs {layout}")

    def value(self, node, index: int = 0, layouts: tuple = (None,)) -> Value:
        name = node.input[index] if len(node.input) > index else ""
        found = self.values.get(name)
        if isinstance(found, Pending):
            raise self.error(node, f"input {index} ({name!r}) is an intermediate of an attention pattern (made by "
                                   f"{self.where(found.node)}), which only the rest of that pattern may read")
        if not isinstance(found, Value):
            what = "a constant" if isinstance(found, (np.ndarray, BatchZeros)) else "missing"
            raise self.error(node, f"input {index} ({name!r}) must be a computed tensor of the batch, it is {what}")
        if found.layout not in layouts:
            where = {"time_major": "(time, batch, ...)", "sequence": "(time, 1, batch, units)",
                     "state": "(1, batch, units)", "sequence_swapped": "(time, batch, 1, units)"}.get(
                found.layout, "(batch, ...)")
            raise self.error(node, f"input {index} ({name!r}) has its batch axis inside, as {where}; such a value "
                                   "is supported only where it is put back batch first (Transpose, Squeeze, Gather)")
        return found

    def materialize(self, node, value: Value):
        """The magmadnn tensor of ``value`` in its ONNX shape (an error where the two differ)."""
        if value.shape == tuple(value.tensor.shape):
            return value.tensor
        return self.layer(node, Reshape, value.tensor, value.shape, name=f"{self._name(node)}_reshape").tensor

    # -- what a node makes
    def sole_consumer(self, name: str, op_types: tuple[str, ...]):
        """The one node that reads ``name`` when it is of one of ``op_types`` (and ``name`` is no graph output)."""
        readers = self.consumers.get(name, [])
        if len(readers) == 1 and name not in self.outputs and readers[0].op_type in op_types:
            return readers[0]
        return None

    def absorb(self, node) -> None:
        self.absorbed.add(id(node))

    def layer(self, node, cls, inputs, *args, weights=None, shape=None, name=None, **kwargs) -> Value:
        """Make ``cls(*args, **kwargs)`` named after ``node``, call it on ``inputs`` (tensors), remember its
        weights; the Value of its output (``shape``: its ONNX shape, when it differs)."""
        try:
            layer = cls(*args, name=name or self._name(node), **kwargs)
            tensor = layer(inputs)
        except (ValueError, TypeError) as exc:
            raise self.error(node, str(exc)) from None
        if weights:
            self.weights.append((layer, weights))
        return Value(tensor, shape)

    def _name(self, node) -> str:
        return self._unique(node.name or node.op_type.lower())

    def _unique(self, text: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.\-/]+", "_", text).strip("_") or "node"
        count = self._names[base]
        self._names[base] += 1
        return base if count == 0 else f"{base}_{count}"

    def input_layer(self, spec) -> Value:
        """An Input layer for a graph input: float, a batch axis first, every other dimension fixed."""
        tensor_type = spec.type.tensor_type
        integer = tensor_type.elem_type in INTEGERS
        if spec.type.WhichOneof("value") != "tensor_type" or tensor_type.elem_type not in DTYPES and not integer:
            raise UnsupportedOnnxError(f"graph input {spec.name!r}: only float32, float64 or integer (ids) tensors "
                                       "are supported")
        if not integer and np.dtype(DTYPES[tensor_type.elem_type]) != self.dtype:
            raise UnsupportedOnnxError(f"graph input {spec.name!r}: every input must have the model's dtype "
                                       f"{self.dtype}")
        dims = tensor_type.shape.dim
        if not tensor_type.HasField("shape") or len(dims) < 2:
            raise UnsupportedOnnxError(f"graph input {spec.name!r}: a shape (batch, ...) of rank >= 2 is needed (every "
                                       "graph input is data with a batch axis; weights, shapes and axes must be "
                                       "constants: initializers or Constant nodes)")
        shape = []
        for axis, dim in enumerate(dims[1:], start=1):
            if dim.WhichOneof("value") != "dim_value" or dim.dim_value < 1:
                label = dim.dim_param or "unknown"
                raise UnsupportedOnnxError(f"graph input {spec.name!r}: dimension {axis} ({label!r}) is dynamic; only "
                                           "the batch axis (0) may be dynamic, give the others fixed sizes")
            shape.append(int(dim.dim_value))
        self._batches.add(int(dims[0].dim_value) if dims[0].WhichOneof("value") == "dim_value" else 0)
        self.static_batch = next(iter(self._batches)) if len(self._batches) == 1 and 0 not in self._batches else None
        layer = Input(tuple(shape), name=self._unique(spec.name), dtype="int64" if integer else None)
        return Value(layer.output, name=spec.name)


def reshape_dims(graph, node, x) -> tuple:
    """The per-sample shape a Reshape node gives ``x`` (a Value or an attention Pending)."""
    allow_zero = graph.attrs(node, {"allowzero": 0})["allowzero"]
    target = [int(v) for v in graph.constant(node, 1, "shape").reshape(-1)]
    if allow_zero and 0 in target:
        raise graph.error(node, "allowzero=1 with a 0 in the shape is not supported", "allowzero=0")
    if target and target[0] == BATCH:  # the batch size taken from the input's Shape: keep it
        target[0] = 0
    if any(v < -1 for v in target):
        raise graph.error(node, "a shape computed from the batch size (other than copying it first) is not "
                                "supported", "shapes whose first entry is 0, -1 or the input's batch size")
    if not target or target[0] not in (0, -1) or (target[0] == -1 and -1 in target[1:]):
        raise graph.error(node, f"shape {target} is not supported",
                          "a shape that keeps the dynamic batch axis first (0 or -1) and fixes the others")
    dims = [x.shape[i - 1] if v == 0 and i > 0 else v for i, v in enumerate(target)][1:]
    size = math.prod(x.shape)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = size // known if known and size % known == 0 else -1
    if math.prod(dims) != size or min(dims, default=1) < 1:
        merged = target[0] == -1 and min(dims, default=1) >= 1 and math.prod(dims) < size
        raise graph.error(node, f"shape {target} does not hold the {size} values of a sample of shape {x.shape}" + (
            " (its -1 merges the batch axis with other axes, which magmadnn reads only inside the attention "
            "patterns)" if merged else ""))
    return tuple(dims)
