"""ONNX operators as functions of :mod:`magmadnn.functional`: one converter per operator, by topic
(:mod:`._registry` holds :class:`NodeView`, :class:`Form` and the ``@op`` decorator; ``CONVERTERS`` maps each
operator to its converter)."""

from . import attention, conv, elementwise, linalg, losses, normalization, recurrent, reductions, resize, shaping  # noqa: F401 - they register
from ._registry import CONVERTERS, Form, NodeView, op

__all__ = ["CONVERTERS", "NodeView", "Form", "op"]
