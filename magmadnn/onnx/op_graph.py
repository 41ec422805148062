"""An ONNX graph as a functional Model of op nodes: one :class:`~magmadnn.layers.Operation` per ONNX node.

Every node of the default domain whose operator :mod:`.op_nodes` knows becomes one op node computing it through
:mod:`magmadnn.functional` (host and device, differentiable where the operator is), so any graph of supported
operators loads without recognising patterns. The rules:

* **Values.** A node whose inputs are all constants is computed once at load (ONNX's reference evaluator); a
  ``Shape``/``Size`` of a tensor whose shape is known is a constant too. What decides shapes at run time
  (``Shape`` of a tensor with a dynamic axis and the arithmetic on it) stays a host NumPy array: such nodes never
  read device data. Every other value is a Tensor on the model's device.
* **Weights.** A float initializer in a weight position (Conv/ConvTranspose/Gemm/MatMul weights and biases, the
  vector operand of an ``Add`` whose other operand a MatMul/Gemm/Conv/Einsum computes (a bias), normalisation scales and
  biases (also the ``Mul``/``Add`` operands after an InstanceNormalization: GroupNorm as exporters write it),
  embedding tables of Gather, recurrent weights, PRelu slopes) is a trainable parameter of its node; every other
  initializer is a constant (not trained): a float one on the device, an integer one where it gives a shape, axes
  or sizes on the host. An initializer feeding several weight positions
  is a parameter of each node (tied weights are not kept tied).
* **Inputs.** A graph input whose first axis is dynamic has a batch axis (``predict`` splits it into batches);
  one whose first axis is fixed keeps that batch size (``Input(batch_size=B)``: ``fit`` and ``predict`` run
  batches of B) when it matches the first data input's, else it is given whole to every batch (a weight or a shape
  fed as a graph input). An integer input read only where shapes are read stays on the host.
* **Batch axis of outputs.** An output keeps the batch axis unless a node on its way reduces it or moves it where
  :mod:`.batch_axes` cannot follow (it follows Transpose, Reshape, Squeeze/Unsqueeze, sequence-first recurrent
  nodes and element-wise nodes); a model with such an output runs on the whole input.

Unsupported operators, attributes and forms are an UnsupportedOnnxError naming the node, the operator and the
opset; the model is made only when every node converted (all or nothing).
"""

from __future__ import annotations

import numpy as np

from ..layers.base import Input
from ..layers.operation import Operation
from ..models import Model
from . import batch_axes, fusion, op_export
from ._proto import default_opset, onnx
from .errors import OnnxImportError, UnsupportedOnnxError
from .op_nodes import CONVERTERS, NodeView
from .op_nodes._runtime import half_rounding
from .shape_folding import RANDOM, batch_shape, host_runner, known_sizes, with_batch_shapes

__all__ = ["build", "supported_op_types"]

#: ONNX element types magmadnn tensors hold
#: the element types every backend holds (the rest are checked against the model's device)
_EVERYWHERE = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_, np.int8, np.uint8)}
ELEMENT_TYPES = {1: np.float32, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_, 3: np.int8, 2: np.uint8,
                 5: np.int16, 4: np.uint16, 12: np.uint32, 13: np.uint64}


#: ONNX's float16: graph inputs, initializers and constants of float16 are held in float32 (exactly widened); each
#: node computes in float32 and a value the graph declares float16 is rounded to float16's values (a Cast or
#: CastLike to float16, any other node's float16 output, a float16 graph output), held in float32
FLOAT16 = 10


def _widen(value: np.ndarray) -> np.ndarray:
    return value.astype(np.float32) if value.dtype == np.float16 else value


def _rounding_outputs(fn, halves, outputs):
    """``fn`` whose outputs at ``halves`` (declared float16) are rounded to float16's values: every float16 value
    of the graph holds what float16 storage would (each node computes in float32 and rounds once, as NumPy's
    float16 arithmetic does)."""
    import inspect  # noqa: PLC0415

    def run(*args, **kwargs):
        made = fn(*args, **kwargs)
        listed = list(made) if outputs > 1 else [made]
        listed = [half_rounding(v) if k in halves and v is not None and np.dtype(v.dtype).kind == "f" else v
                  for k, v in enumerate(listed)]
        return listed if outputs > 1 else listed[0]

    run.__signature__ = inspect.signature(fn)
    return run


def supported_op_types() -> list[str]:
    return sorted(CONVERTERS)


class _Sym:
    """A value computed at run time: its symbolic tensor, full static shape (None where unknown), whether its
    leading axis is the batch axis, and whether it is a host NumPy array (a shape)."""

    __slots__ = ("tensor", "shape", "batch_axis", "host", "dtype", "shape_batch")

    def __init__(self, tensor, shape, batch_axis, host=False, dtype=None, shape_batch=None):
        self.tensor, self.shape, self.batch_axis, self.host, self.dtype = tensor, shape, batch_axis, host, dtype
        self.shape_batch = shape_batch  # a shape vector's known sizes (batch_axes.shape_batch)

    @property
    def batched(self) -> bool:
        """Whether the leading axis is the batch axis."""
        return self.batch_axis == 0


class _Import:
    def __init__(self, proto, name, device=None, reshaped=None, fuse=True):
        self.proto, self.opset, self.device = proto, default_opset(proto), device
        self._held, self.fuse = {}, fuse  # (fuse: whether chains with a fused form become one op node)
        self.values: dict[str, object] = {}  # name -> np.ndarray (constant) or _Sym
        self.names: dict[str, int] = {}
        self.shapes, self.dtypes, self.halves = _inferred(proto)
        self.name = name
        consumers: dict[str, list] = {}
        self.producers = {out: node for node in proto.graph.node for out in node.output}
        for node in proto.graph.node:
            for k, value in enumerate(node.input):
                consumers.setdefault(value, []).append((node, k))
        self.consumers = consumers
        self.graph_outputs = {o.name for o in proto.graph.output}
        self.batch_shapes: dict[str, np.ndarray] = {}  # Reshape output -> its target made constant (shape_folding)
        self.reshaped = reshaped or {}  # such a Reshape's output -> its batch axis, as the first reading found it
        self._claimed: set = set()  # the outputs of nodes a fused op node computes (see fusion)

    # -- names and errors
    def error(self, node, what: str) -> UnsupportedOnnxError:
        return UnsupportedOnnxError(f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type}, opset {self.opset}): "
                                    f"{what}")

    def unique(self, text: str) -> str:
        base = "".join(c if c.isalnum() or c in "_.-/" else "_" for c in text).strip("_") or "node"
        count = self.names.get(base, 0)
        self.names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    # -- graph inputs
    def inputs(self) -> list:
        numpy_helper = onnx().numpy_helper
        for init in self.proto.graph.initializer:
            try:
                self.values[init.name] = _widen(np.asarray(numpy_helper.to_array(init)))
            except Exception as exc:  # noqa: BLE001 - damaged tensor bytes
                raise OnnxImportError(f"initializer {init.name!r} cannot be read: {exc}") from None
        initializers = {i.name for i in self.proto.graph.initializer}
        specs = [s for s in self.proto.graph.input if s.name not in initializers]
        if not specs:
            raise UnsupportedOnnxError("the graph has no input that is not a constant")
        first = None
        made = []
        for spec in specs:
            tensor_type = spec.type.tensor_type
            if spec.type.WhichOneof("value") != "tensor_type" or (tensor_type.elem_type not in ELEMENT_TYPES
                                                                   and tensor_type.elem_type != FLOAT16):
                raise UnsupportedOnnxError(f"graph input {spec.name!r}: only tensors of float16, float32, float64, "
                                           "integers or bool are supported (no sequences, maps or strings)")
            dtype = np.dtype(ELEMENT_TYPES.get(tensor_type.elem_type, np.float32))  # float16 computes in float32
            if not self.holds(dtype):
                raise UnsupportedOnnxError(f"graph input {spec.name!r}: the device backend holds no {dtype.name} "
                                           "tensors")
            if not tensor_type.HasField("shape"):
                raise UnsupportedOnnxError(f"graph input {spec.name!r} has no shape (not even its rank)")
            dims = [int(d.dim_value) if d.WhichOneof("value") == "dim_value" else None
                    for d in tensor_type.shape.dim]
            if 0 in dims:
                raise UnsupportedOnnxError(f"graph input {spec.name!r}: empty tensors (an axis of size 0) are not "
                                           "supported")
            host = dtype.kind in "iu" and self._host_only(spec.name)
            batched, batch_size = False, None
            if dims and not host:
                if dims[0] is None:
                    batched = True
                elif dims[0] > 0 and (first is None or dims[0] == first):
                    batched, batch_size = True, dims[0]
                if first is None and dims[0] is not None and batched:
                    first = dims[0]
            if not batched and any(d is None for d in dims):
                raise UnsupportedOnnxError(f"graph input {spec.name!r}: a dynamic axis other than the first of an "
                                           "input that has no batch axis is not supported")
            shape = tuple(dims[1:]) if batched else tuple(dims)
            layer = Input(shape, name=self.unique(spec.name), dtype=dtype.name,
                          batch_size=batch_size if batched and dims and dims[0] is not None else None,
                          batched=batched)
            layer._exact_dtype = dtype.kind == "f"
            layer._keeps_host = host
            self.values[spec.name] = _Sym(layer.output, tuple(dims), 0 if batched else None, host, dtype)
            made.append((spec.name, layer))
        return made

    def holds(self, dtype) -> bool:
        """Whether the model's device holds tensors of ``dtype`` (the host holds every NumPy dtype)."""
        dtype = np.dtype(dtype)
        if self.device is None or dtype in _EVERYWHERE:
            return True
        if dtype not in self._held:
            from .. import backend  # noqa: PLC0415
            from ..autograd import Tensor  # noqa: PLC0415

            try:
                Tensor(np.zeros((1,), dtype), backend=backend.get(self.device))
                self._held[dtype] = True
            except TypeError:
                self._held[dtype] = False
        return self._held[dtype]

    def _host_only(self, name: str) -> bool:
        """Whether every reader of ``name`` reads it where a shape, axes or sizes go (kept on the host)."""
        readers = self.consumers.get(name, [])
        return bool(readers) and all(k in _host_positions(node, self.opset) for node, k in readers)

    # -- nodes
    def walk(self) -> None:
        folded = self._fold_constants()
        for node in self.proto.graph.node:
            if node.output and (node.output[0] in self._claimed or node.output[0] in folded):
                continue  # computed by the fused op node of a chain that starts earlier, or a constant
            if node.domain not in ("", "ai.onnx"):
                raise self.error(node, f"operators of domain {node.domain!r} are not supported (only the default "
                                       "ONNX domain)")
            ins = [self.values.get(n) if n else None for n in node.input]
            for n, v in zip(node.input, ins):
                if n and v is None:
                    raise self.error(node, f"input {n!r} is not computed before the node (graph not in order?)")
            if node.op_type == "Reshape" and len(ins) > 1 and isinstance(batch_shape(ins[1]), np.ndarray):
                self.batch_shapes[node.output[0]] = batch_shape(ins[1])  # build() reads the graph again
            if node.op_type == "Gather" and known_sizes(node, ins) is not None:
                self.values[node.output[0]] = known_sizes(node, ins)  # sizes known at load: a constant
                continue
            if node.op_type == "Constant" or all(isinstance(v, np.ndarray) or v is None for v in ins) and any(
                    v is not None for v in ins) and node.op_type not in _RANDOM:
                self._fold(node, ins)
                continue
            if node.op_type in ("Shape", "Size") and self._static_shape_of(node, ins[0]):
                continue
            if all(v is None or isinstance(v, np.ndarray) or v.host for v in ins):
                self._host_node(node, ins)
                continue
            fused = fusion.match(self, node) if self.fuse else None
            if fused is not None:
                self._fused_node(fused)
                continue
            view = NodeView(node, self.opset, ins, self)
            convert = CONVERTERS.get(node.op_type)
            if convert is None:
                raise self.error(node, "this operator is not supported; supported: " + ", ".join(sorted(CONVERTERS)))
            try:
                form = convert(view)
            except UnsupportedOnnxError:
                raise
            except (ValueError, TypeError, KeyError, IndexError, NotImplementedError) as exc:
                raise self.error(node, f"this form is not supported ({type(exc).__name__}: {exc})") from exc
            self._op_node(node, view, form)

    def _fused_node(self, fused) -> None:
        """One op node for the chain ``fused`` claimed (see :mod:`.fusion`), written back as that chain."""
        helper = onnx().helper
        last = fused.nodes[-1]
        node = helper.make_node(fused.op_type, list(fused.inputs), list(last.output), name=last.name)
        view = NodeView(node, self.opset, [self.values.get(n) if n else None for n in fused.inputs], self)
        op = self._op_node(node, view, fused.form)
        op_export.remember_chain(op, fused.nodes, fused.slots, self.opset,
                                 [self.dtypes.get(name) for name in last.output])
        for chained in fused.nodes:
            self._claimed.update(n for n in chained.output if n)

    def _fold_constants(self) -> set:
        """Compute every node of constants first (in graph order: a fusion starting at a node may read constants
        the graph computes after it); the first output names of the nodes folded."""
        done = set()
        for node in self.proto.graph.node:
            if node.domain not in ("", "ai.onnx") or node.op_type in _RANDOM:
                continue
            ins = [self.values.get(n) if n else None for n in node.input]
            if node.op_type == "Constant" or (any(v is not None for v in ins) and all(
                    isinstance(v, np.ndarray) for v, n in zip(ins, node.input) if n)):
                self._fold(node, ins)
                done.add(node.output[0])
        return done

    def _fold(self, node, ins) -> None:
        if node.op_type == "Constant":
            outputs = [_constant(node)]
        else:
            outputs = _reference(node, self.opset, ins)
        for name, value in zip(node.output, outputs):
            if name:
                self.values[name] = _widen(np.asarray(value))

    def _static_shape_of(self, node, value) -> bool:
        """``Shape``/``Size`` of a tensor whose whole shape is known at load: a constant."""
        if not isinstance(value, _Sym) or value.shape is None or any(d is None for d in value.shape):
            return False
        self._fold(node, [np.zeros(value.shape, np.float32)])
        return True

    def _host_node(self, node, ins) -> None:
        """A node reading only host values (shape arithmetic at run time): computed on the host by onnx's
        reference implementation of its operator, never touching device data."""
        from .op_nodes import Form  # noqa: PLC0415

        view = NodeView(node, self.opset, ins, self)
        positions = tuple(k for k, v in enumerate(ins) if isinstance(v, np.ndarray))
        self._op_node(node, view, Form(host_runner(node, self.opset), host=positions, keeps_batch=False,
                                       host_outputs=tuple(range(len(node.output)))))

    def rebatched(self, name, value, made):
        """A graph output of a static-batch graph (every batched input fixes the batch size B) whose batch axis was
        not followed (folded into attention heads, say) but whose leading axis has size B: batched again, as the
        model only ever runs batches of exactly B samples (``fit`` and ``predict`` split along it)."""
        sizes = {layer.batch_size for _, layer in made if getattr(layer, "batched", False)}
        if value.batched or value.host or len(sizes) != 1 or None in sizes or not value.shape:
            return value
        if value.shape[0] != next(iter(sizes)) or any(d is None for d in value.shape):
            return value
        op = Operation(lambda x: x, [("input", 0)], outputs=1, output_shapes=[tuple(value.shape[1:])],
                       output_batched=[True], op_type="Identity", name=self.unique(f"{name}_batched"))
        op_export.remember(op, onnx().helper.make_node("Identity", [name], [name]), self.opset, [value.dtype])
        return _Sym(op([value.tensor]), value.shape, 0, False, value.dtype)

    def rounded_half(self, name, value):
        """A graph output declared float16: its float32 value rounded to float16's values (one more op node)."""
        full = value.shape
        shape = None if full is None else tuple(full[1:]) if value.batched else tuple(full)
        op = Operation(half_rounding, [("input", 0)], outputs=1, output_shapes=[shape],
                       output_batched=[value.batched], op_type="Cast", name=self.unique(f"{name}_float16"))
        op_export.remember(op, onnx().helper.make_node("Cast", [name], [name], to=FLOAT16), self.opset,
                           [np.dtype(np.float16)])
        return op([value.tensor])

    def _bias_of_product(self, node, view, k) -> bool:
        """Whether input ``k`` of an ``Add``/``Mul`` (a finite constant with one axis longer than 1) is a weight by
        its place: the bias added to a MatMul/Gemm/Conv/Einsum product (a Linear's bias written as MatMul + Add),
        or the scale and bias that follow an InstanceNormalization (GroupNorm as both PyTorch exporters write it:
        InstanceNormalization, Reshape, Mul, Add)."""
        if node.op_type not in ("Add", "Mul") or len(node.input) != 2 or not isinstance(view.inputs[1 - k], _Sym):
            return False
        value = view.inputs[k]
        if sum(d != 1 for d in value.shape) > 1 or not np.all(np.isfinite(value)):
            return False  # a vector (a bias, a per-channel scale), never a mask or a table
        role = self._role(node.input[1 - k])
        return role in ("product", "scaled") if node.op_type == "Add" else role == "normalized"

    def _role(self, name: str):
        node = self.producers.get(name)
        while node is not None and node.op_type == "Reshape":
            node = self.producers.get(node.input[0])
        if node is None:
            return None
        if node.op_type in _PRODUCTS:
            return "product"
        if node.op_type == "InstanceNormalization":
            return "normalized"
        if node.op_type == "Mul" and any(self._role(n) == "normalized" for n in node.input):
            return "scaled"
        return None

    def _op_node(self, node, view, form) -> None:
        arguments, weights, constants, host, parents = [], {}, {}, {}, []
        positions: dict[int, int] = {}
        for k, value in enumerate(view.inputs):
            if value is None:
                arguments.append(("none", None))
            elif isinstance(value, _Sym):
                key = id(value.tensor)
                if key not in positions:
                    positions[key] = len(parents)
                    parents.append(value.tensor)
                arguments.append(("input", positions[key]))
            elif k in form.host:
                host[f"in{k}"] = value
                arguments.append(("host", f"in{k}"))
            elif (k in form.weights or self._bias_of_product(node, view, k)) and value.dtype.kind == "f":
                weights[f"in{k}"] = value
                arguments.append(("weight", f"in{k}"))
            else:
                constants[f"in{k}"] = value
                arguments.append(("constant", f"in{k}"))
        if not parents:
            raise self.error(node, "the node reads no computed value")
        outputs = len(node.output)
        shapes, flags, axes = [], [], []
        batched_in = [v.batched for v in view.inputs if isinstance(v, _Sym)]
        keeps = form.keeps_batch if form.keeps_batch is not None else [any(batched_in)] * outputs
        if not isinstance(keeps, list):
            keeps = [keeps] * outputs
        axes_in = [v.batch_axis if isinstance(v, _Sym) else None for v in view.inputs]
        moves = batch_axes.moved(node, view, axes_in, view.attr) if node.op_type in batch_axes.MOVERS or any(
            a not in (None, 0) for a in axes_in) else None
        if node.op_type == "Reshape" and node.output[0] in self.reshaped:  # its target was a shape holding the batch
            moves = [self.reshaped[node.output[0]]]
        for k, (name, keep) in enumerate(zip(node.output, keeps)):
            full = self.shapes[name] = batch_axes.refined(node, view, self.shapes.get(name))
            keep = bool(keep) and any(batched_in) and (full is None or len(full) >= 1)
            axis = moves[k] if moves is not None else (0 if keep else None)
            if axis is not None and axis != 0 and (full is None or axis >= len(full)):
                axis = None
            axes.append(axis)
            flags.append(axis == 0)
            shapes.append(None if full is None else tuple(full[1:]) if axis == 0 else tuple(full))
        fn = form.fn
        halves = [k for k, name in enumerate(node.output) if name in self.halves and k not in form.host_outputs]
        if halves and node.op_type not in ("Cast", "CastLike"):
            fn = _rounding_outputs(fn, halves, outputs)
        op = Operation(fn, arguments, outputs=outputs, weights=weights, constants=constants, host=host,
                       output_shapes=shapes, output_batched=flags, op_type=node.op_type,
                       name=self.unique(node.name or node.op_type.lower()))
        op_export.remember(op, node, self.opset, [self.dtypes.get(name) for name in node.output])
        made = op(parents)
        made = made if isinstance(made, list) else [made]
        for name, tensor, axis, k in zip(node.output, made, axes, range(outputs)):
            if name:
                self.values[name] = _Sym(tensor, self.shapes.get(name), axis, k in form.host_outputs,
                                         self.dtypes.get(name), batch_axes.shape_batch(node, view, axes_in))
        return op


_PRODUCTS = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum")
_RANDOM = RANDOM


def _host_positions(node, opset) -> tuple:
    convert = CONVERTERS.get(node.op_type)
    return getattr(convert, "host", ()) if convert is not None else ()


def _constant(node) -> np.ndarray:
    helper, numpy_helper = onnx().helper, onnx().numpy_helper
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return _widen(np.asarray(numpy_helper.to_array(value)))
    if attr.name in ("value_float", "value_int"):
        return np.asarray(value, np.float32 if attr.name == "value_float" else np.int64)
    if attr.name in ("value_floats", "value_ints"):
        return np.asarray(value, np.float32 if attr.name == "value_floats" else np.int64)
    raise UnsupportedOnnxError(f"ONNX node {node.name!r} (Constant): a {attr.name} constant is not supported")


def _reference(node, opset, ins) -> list:
    """A node of constants computed by onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    helper = onnx().helper
    untyped = helper.make_empty_tensor_value_info
    names = [n for n in node.input if n]
    graph = helper.make_graph([node], "fold", [untyped(n) for n in names], [untyped(n) for n in node.output if n])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        return [np.asarray(r) for r in ReferenceEvaluator(proto).run(
            None, {n: v for n, v in zip(node.input, ins) if n})]
    except Exception as exc:  # noqa: BLE001 - the evaluator raises what its operator raises
        raise UnsupportedOnnxError(f"ONNX node {node.name!r} ({node.op_type}, opset {opset}): computing it from its "
                                   f"constant inputs failed: {type(exc).__name__}: {exc}") from None


def _inferred(proto):
    """Full static shapes (None for unknown dims), dtypes (float16 as float32) and the names declared float16 of
    the values, by onnx's shape inference."""
    shapes, dtypes, halves = {}, {}, set()
    try:
        inferred = onnx().shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - shapes are only what summary shows
        inferred = proto
    for info in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        tensor_type = info.type.tensor_type
        if info.type.WhichOneof("value") != "tensor_type":
            continue
        if tensor_type.elem_type in ELEMENT_TYPES or tensor_type.elem_type == FLOAT16:
            dtypes[info.name] = np.dtype(ELEMENT_TYPES.get(tensor_type.elem_type, np.float32))
        if tensor_type.elem_type == FLOAT16:
            halves.add(info.name)
        if tensor_type.HasField("shape"):
            shapes[info.name] = tuple(int(d.dim_value) if d.WhichOneof("value") == "dim_value" else None
                                      for d in tensor_type.shape.dim)
    return shapes, dtypes, halves


def build(proto, name: str | None = None, device=None, seed: int | None = None, fuse: bool = True) -> Model:
    """The Model of op nodes of ``proto`` (see the module); ``fuse=False``: no fused op nodes (:mod:`.fusion`)."""
    state = _Import(proto, name, device, fuse=fuse)
    made = state.inputs()
    state.walk()
    if state.batch_shapes:  # read again with those targets constant (see shape_folding)
        made_at_load = {n: state.values[n] for node in proto.graph.node for n in node.output
                        if isinstance(state.values.get(n), np.ndarray) and n not in state.halves}
        proto = with_batch_shapes(proto, state.batch_shapes, made_at_load)
        reshaped = {n: state.values[n].batch_axis for n in state.batch_shapes if isinstance(state.values.get(n), _Sym)}
        state = _Import(proto, name, device, reshaped, fuse)
        made = state.inputs()
        state.walk()
    outputs = {}
    for spec in proto.graph.output:
        value = state.values.get(spec.name)
        if not isinstance(value, _Sym):
            raise UnsupportedOnnxError(f"graph output {spec.name!r} is a constant, not computed from the inputs")
        value = state.rebatched(spec.name, value, made)
        outputs[spec.name] = state.rounded_half(spec.name, value) if spec.name in state.halves else value.tensor
    if len(set(map(id, outputs.values()))) != len(outputs):
        raise UnsupportedOnnxError("two graph outputs are the same value; magmadnn models name each output once")
    floats = {np.dtype(v.dtype) for v in state.values.values() if isinstance(v, _Sym) and v.dtype is not None
              and np.dtype(v.dtype).kind == "f"}
    dtype = np.float64 if floats == {np.dtype(np.float64)} else np.float32
    try:
        return Model([layer for _, layer in made], outputs if len(outputs) > 1 else next(iter(outputs.values())),
                     name=name or proto.graph.name or "onnx_model", seed=seed, dtype=dtype, device=device)
    except (ValueError, TypeError) as exc:
        raise OnnxImportError(f"the ONNX graph cannot become a model: {exc}") from None
