"""ONNX operators as functions of :mod:`magmadnn.functional`: one converter per operator, by topic
(:mod:`._registry` holds :class:`NodeView`, :class:`Form` and the ``@op`` decorator; ``CONVERTERS`` maps each
operator to its converter)."""

from . import (  # noqa: F401 - they register
    attention,
    conv,
    elementwise,
    fused_attention,
    fused_conv,
    fused_linear,
    indexing,
    linalg,
    losses,
    normalization,
    rearrange,
    recurrent,
    reductions,
    resize,
    scatter,
    shaping,
)
from ._registry import CONVERTERS, Form, NodeView, op

__all__ = ["CONVERTERS", "NodeView", "Form", "op"]
