"""A model of op nodes in magmadnn's own model files: its graph as ONNX bytes (see
:mod:`magmadnn.models.graph_archive`, which this module's two functions are registered with)."""

from __future__ import annotations

from ._proto import onnx

__all__ = ["writes", "reads"]


def writes(model):
    """The ONNX bytes of ``model`` (its weights as they are now) when it holds op nodes read from ONNX, else None."""
    if not any(getattr(layer, "onnx_source", None) is not None for layer in model.layers):
        return None
    from .export import to_proto  # noqa: PLC0415

    return to_proto(model, output_name=_names(model)).SerializeToString()


def _names(model):
    return model.output_names if len(model.outputs) > 1 else "output"


def reads(data: bytes, config: dict, device):
    """The model of op nodes in ``data`` named and seeded as ``config`` says, on ``device``."""
    from .op_graph import build  # noqa: PLC0415

    proto = onnx().load_from_string(data)
    model = build(proto, name=config.get("name"), device=device, seed=config.get("seed"))
    model._trainable = bool(config.get("trainable", True))  # the layers' own flags follow, as they were saved
    frozen = set(config.get("frozen", ()))
    for layer in model.layers:
        if layer.name in frozen:
            layer.trainable = False
    return model
