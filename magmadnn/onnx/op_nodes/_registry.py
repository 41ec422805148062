"""The converter registry of :mod:`magmadnn.onnx.op_nodes`: ONNX operators as functions of :mod:`magmadnn.functional`.

A converter takes a :class:`NodeView` (attributes, inputs: constants as NumPy arrays or values computed at run
time, static shapes) and returns a :class:`Form`: the function the op node runs on its inputs (Tensors on the
model's device, or host NumPy arrays where ``host`` positions read shapes, axes or sizes), which of its outputs keep
the batch axis, which outputs are host arrays. ``@op(names, host=..., weights=...)`` registers it: ``host`` are the
input positions read on the host, ``weights`` those whose float initializers are trainable parameters.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOnnxError

__all__ = ["CONVERTERS", "NodeView", "Form", "op"]

CONVERTERS: dict = {}


class Form:
    __slots__ = ("fn", "host", "weights", "keeps_batch", "host_outputs")

    def __init__(self, fn, host=(), weights=(), keeps_batch=None, host_outputs=()):
        self.fn, self.host, self.weights = fn, tuple(host), tuple(weights)
        self.keeps_batch, self.host_outputs = keeps_batch, tuple(host_outputs)


def op(*names, host=(), weights=()):
    """Register a converter for the operators ``names``."""
    def add(convert):
        def converter(view):
            made = convert(view)
            form = made if isinstance(made, Form) else Form(made)
            form.host = form.host or tuple(host)
            form.weights = form.weights or tuple(weights)
            return form

        converter.host, converter.weights, converter.__name__ = tuple(host), tuple(weights), convert.__name__
        for name in names:
            CONVERTERS[name] = converter
        return convert

    return add


class NodeView:
    """One ONNX node as a converter sees it."""

    def __init__(self, node, opset: int, inputs: list, state):
        self.node, self.opset, self.inputs, self._state = node, opset, inputs, state
        self._attrs = None

    @property
    def attrs(self) -> dict:
        if self._attrs is None:
            from .._proto import onnx  # noqa: PLC0415

            helper = onnx().helper
            out = {}
            for attr in self.node.attribute:
                value = helper.get_attribute_value(attr)
                out[attr.name] = value.decode() if isinstance(value, bytes) else value
            self._attrs = out
        return self._attrs

    def attr(self, name: str, default=None):
        value = self.attrs.get(name, default)
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        return value

    def only(self, *names) -> None:
        """An attribute outside ``names`` is refused."""
        extra = sorted(set(self.attrs) - set(names))
        if extra:
            raise self.error(f"attribute(s) {extra} are not supported (supported: {sorted(names) or 'none'})")

    def const(self, k: int):
        """Input ``k`` when it is a constant (NumPy), else None."""
        value = self.inputs[k] if k < len(self.inputs) else None
        return value if isinstance(value, np.ndarray) else None

    def has(self, k: int) -> bool:
        return k < len(self.inputs) and self.inputs[k] is not None

    def rank(self, k: int):
        """The rank of input ``k`` when known, else None."""
        value = self.inputs[k] if k < len(self.inputs) else None
        if isinstance(value, np.ndarray):
            return value.ndim
        shape = getattr(value, "shape", None)
        return None if shape is None else len(shape)

    def shape(self, k: int):
        value = self.inputs[k] if k < len(self.inputs) else None
        return value.shape if isinstance(value, np.ndarray) else getattr(value, "shape", None)

    def batched(self, k: int) -> bool:
        return bool(getattr(self.inputs[k], "batched", False)) if k < len(self.inputs) else False

    def declared_half(self, k: int) -> bool:
        """Whether input ``k`` is declared float16 in the graph (held as float32: see ``op_graph.FLOAT16``)."""
        return k < len(self.node.input) and self.node.input[k] in getattr(self._state, "halves", ())

    def holds(self, dtype) -> bool:
        """Whether the model's device holds tensors of ``dtype``."""
        return self._state.holds(dtype)

    def error(self, what: str) -> UnsupportedOnnxError:
        return self._state.error(self.node, what)
