"""A model rebuilt from its configuration (``get_config()`` output): the layers by registered class name, then the
Sequential stack or the functional graph, node by node. The model classes come in as arguments, so that
``Model.from_config`` and ``models.model_from_config`` share this one home."""

from __future__ import annotations

from .. import mixed_precision
from ..layers.base import Input, layer_class
from ..saving import ModelFileError

__all__ = ["rebuild"]


def rebuild(config: dict, sequential_cls, model_cls, device=None, custom_objects: dict | None = None):
    """The model ``config`` describes, as ``sequential_cls`` or ``model_cls``, on ``device``."""
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise TypeError(f"custom_objects must be a dict {{class name: class}}, got {type(custom_objects).__name__}")
    if not isinstance(config, dict):
        raise TypeError(f"a model configuration must be a dict (get_config() output), got {type(config).__name__}")
    try:
        with mixed_precision.global_policy_as("float32"):  # the saved policies, not the global one (Keras)
            layers = [layer_class(entry["class_name"], custom_objects).from_config(dict(entry["config"]))
                      for entry in config["layers"]]
        common = {"name": config["name"], "seed": config["seed"], "dtype": config["dtype"], "device": device}
        if config["class_name"] == "Sequential":
            model = sequential_cls(layers, **common)
            model._trainable = bool(config.get("trainable", True))
            return model
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
        inputs = [nodes[i] for i in config["inputs"]]
        if "input_keys" in config:
            inputs = dict(zip(config["input_keys"], inputs))
        outputs = nodes[config["output"]]
        if "outputs" in config:
            outputs = [nodes[i] for i in config["outputs"]]
            if config.get("output_keys") is not None:
                outputs = dict(zip(config["output_keys"], outputs))
        model = model_cls(inputs, outputs, **common)
        model._trainable = bool(config.get("trainable", True))
        return model
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelFileError(f"damaged model configuration: {type(exc).__name__}: {exc}") from None
