"""Rebuilding models: from a configuration (``get_config()`` output) or from a model file or checkpoint."""

from __future__ import annotations

from ..layers.base import Input, layer_class
from ..saving import ModelFileError
from . import persistence
from .model import Model, Sequential

__all__ = ["model_from_config", "load_model"]


def model_from_config(config: dict, device=None, backend=None) -> Model:
    """Rebuild an (untrained) model from ``get_config()`` output on ``device`` (``backend``: its old name)."""
    device = device if device is not None else backend
    try:
        layers = [layer_class(entry["class_name"]).from_config(dict(entry["config"])) for entry in config["layers"]]
        common = {"name": config["name"], "seed": config["seed"], "dtype": config["dtype"], "device": device}
        if config["class_name"] == "Sequential":
            return Sequential(layers, **common)
        nodes, calls = [], {}
        for entry in config["nodes"]:
            layer = layers[entry["layer"]]
            parents = [nodes[i] for i in entry["inputs"]]
            if isinstance(layer, Input):
                nodes.append(layer.output)
            elif "index" in entry:  # one of a layer's several outputs: one call for all of them
                key = (entry["layer"], tuple(entry["inputs"]))
                if key not in calls:
                    calls[key] = layer(parents if entry["many"] else parents[0])
                nodes.append(calls[key][entry["index"]])
            else:
                nodes.append(layer(parents if entry["many"] else parents[0]))
        return Model([nodes[i] for i in config["inputs"]], nodes[config["output"]], **common)
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelFileError(f"damaged model configuration: {type(exc).__name__}: {exc}") from None


def load_model(path, device=None, backend=None) -> Model:
    """Rebuild the model stored in ``path`` (a model file or a checkpoint) with its weights, on ``device`` ("host",
    "gpu", "gpu:N", "auto"; ``backend`` is its old name). Files hold host arrays: any device loads any file."""
    tensors, meta = persistence.read(path)
    model = model_from_config(meta["model"], device=device, backend=backend)
    persistence.restore(model, tensors, meta, path)
    return model
