"""The op graph's fusion pass: a chain Conv -> Relu, Conv -> Add or Conv -> Add -> Relu becomes one op node.

A chain is fused when each value inside it is read only by the next node of the chain and is no graph output, the
convolution is 2-D and reads a computed value, the Add's other operand (the residual) is a computed value, and no
value of the chain is declared float16 (each would be rounded on its own). The fused node computes what the nodes
would one by one, in the same order (the convolution with its bias, plus the residual, then the ReLU): on the host
in inference, one call of the host convolution (``backend.host.conv.conv2d_forward_residual``) that adds the
residual and applies the ReLU while each group of samples is in cache; elsewhere, and whenever gradients are
recorded (``fit``), the same ops as the separate nodes, so training and the device path are unchanged. The fused
node is named as the Conv node, keeps its weights (``in1``, ``in2``) and exports as the chain's nodes again.
``magmadnn.onnx.load(path, fuse=False)`` keeps one op node per ONNX node.
"""

from __future__ import annotations

from ._proto import onnx
from .op_export import _Source
from .op_nodes import Form, NodeView
from .op_nodes.conv import conv_function

__all__ = ["Chains"]


class Chains:
    """The fusable chains of a graph and, while it is walked, which of them are being fused."""

    def __init__(self, proto, halves=()):
        outputs = {o.name for o in proto.graph.output}
        readers: dict[str, list] = {}
        for node in proto.graph.node:
            for name in node.input:
                if name:
                    readers.setdefault(name, []).append(node)

        def only_reader(name):
            found = readers.get(name, [])
            return found[0] if len(found) == 1 and name not in outputs and name not in halves else None

        self._member: dict[tuple, tuple] = {}  # a node's outputs (unique in a graph) -> (chain, position)
        claims: dict[tuple, tuple] = {}  # an Add's outputs -> the chain of the last Conv before it that reads into it
        found = []
        for node in proto.graph.node:
            if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
                continue
            chain, out = [node], node.output[0]
            after = only_reader(out)
            if after is not None and after.op_type == "Add" and len(after.input) == 2 and list(after.input).count(
                    out) == 1 and len(after.output) == 1:
                chain.append(after)
                out = after.output[0]
                after = only_reader(out)
            if after is not None and after.op_type == "Relu" and len(after.output) == 1:
                chain.append(after)
            if len(chain) > 1 and all(n.domain in ("", "ai.onnx") and n.output[0] for n in chain) and chain[
                    -1].output[0] not in halves:
                chain = tuple(chain)
                found.append(chain)
                if chain[1].op_type == "Add":
                    claims[_key(chain[1])] = chain
        for chain in found:  # an Add of two convolutions' outputs fuses with the later one (the other is computed)
            if chain[1].op_type == "Add" and claims[_key(chain[1])] is not chain:
                continue
            for k, member in enumerate(chain):
                self._member[_key(member)] = (chain, k)
        self._active: set[tuple] = set()  # the heads (by outputs) of the chains being fused

    def take(self, state, node) -> bool:
        """Whether ``node`` was handled here (put off as part of a chain, or the chain's fused node made); False:
        walk it as usual."""
        found = self._member.get(_key(node))
        if found is None:
            return False
        chain, k = found
        head = chain[0]
        if k == 0:
            x = state.values.get(head.input[0])
            shape = getattr(x, "shape", None)
            if _computed(x) and shape is not None and len(shape) == 4:
                self._active.add(_key(head))
                return True
            return False
        if _key(head) not in self._active:
            return False
        if node.op_type == "Add" and not _residual_fits(state, head, node):
            self._active.discard(_key(head))  # the head runs on its own after all, then this node and the rest
            state.node(head)
            return False
        if k < len(chain) - 1:
            return True
        self._active.discard(_key(head))
        _fuse(state, chain)
        return True


def _key(node) -> tuple:
    return tuple(node.output)


def _computed(value) -> bool:
    """A value computed at run time on the model's device (not a constant, not a host shape)."""
    return hasattr(value, "tensor") and not value.host


def _residual_fits(state, head, add) -> bool:
    """The Add's other operand is a computed value whose shape is the convolution's output's, where both are known
    (a broadcast falls back at run time too)."""
    other = add.input[1] if add.input[0] == head.output[0] else add.input[0]
    value = state.values.get(other)
    if not _computed(value):
        return False
    mine, theirs = state.shapes.get(head.output[0]), value.shape
    if mine is None or theirs is None:
        return True
    return len(mine) == len(theirs) and all(a is None or b is None or a == b for a, b in zip(mine, theirs))


def _fuse(state, chain) -> None:
    helper = onnx().helper
    head, add = chain[0], next((n for n in chain if n.op_type == "Add"), None)
    relu = chain[-1].op_type == "Relu"
    inputs = list(head.input) + [""] * (3 - len(head.input))
    residual = None
    if add is not None:
        left = add.input[1] == head.output[0]
        residual = "left" if left else "right"
        inputs.append(add.input[0] if left else add.input[1])
    fused = helper.make_node("Conv", inputs, [chain[-1].output[0]], name=head.name)
    fused.attribute.extend(head.attribute)
    view = NodeView(fused, state.opset, [state.values.get(n) if n else None for n in inputs], state)
    form = Form(conv_function(view, activation="relu" if relu else None, residual=residual), weights=(1, 2))
    state._op_node(fused, view, form)
    op = state.values[chain[-1].output[0]].tensor.layer
    op.op_type = "+".join(n.op_type for n in chain)
    source = op.onnx_source
    op.onnx_source = _ChainSource(source.node, source.opset, source.dtypes, tuple(_copy(n) for n in chain))


def _copy(node):
    made = onnx().NodeProto()
    made.CopyFrom(node)
    return made


class _ChainSource(_Source):
    """A fused node's source: the chain's nodes, written back one by one (``expand``)."""

    __slots__ = ("chain",)

    def __init__(self, node, opset, dtypes, chain):
        super().__init__(node, opset, dtypes)
        self.chain = chain

    def expand(self, name: str, names: list, outputs: list, unique) -> list:
        """The chain's ONNX nodes for the fused node ``name`` whose inputs are ``names`` (x, w, b, [residual]) and
        whose output is ``outputs[0]``."""
        made, value = [], None
        for k, original in enumerate(self.chain):
            node = _copy(original)
            del node.input[:], node.output[:]
            node.name = name if k == 0 else unique(f"{name}/{original.op_type.lower()}")
            if original.op_type == "Conv":
                node.input.extend(names[:len(original.input)])
            elif original.op_type == "Add":
                pair = [value, names[3]] if original.input[0] == self.chain[k - 1].output[0] else [names[3], value]
                node.input.extend(pair)
            else:
                node.input.append(value)
            value = outputs[0] if k == len(self.chain) - 1 else unique(f"{name}/{original.op_type.lower()}_out")
            node.output.append(value)
            made.append(node)
        return made
