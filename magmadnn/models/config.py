"""Rebuilding models: from a configuration (``get_config()`` output) or from a model file or checkpoint."""

from __future__ import annotations

import numpy as np

from . import graph_archive, persistence
from .model import Model
from .rebuild import rebuild
from .sequential import Sequential
from .subclassing import rebuild_subclassed

__all__ = ["model_from_config", "model_from_json", "clone_model", "load_model"]


def model_from_config(config: dict, device=None, backend=None, custom_objects: dict | None = None) -> Model:
    """Rebuild an (untrained) model from ``get_config()`` output on ``device`` (``backend``: its old name).
    ``custom_objects``: ``{class name: Layer subclass}`` for layers not registered with ``layers.register`` (and
    for a Model subclass not registered with ``models.register``)."""
    if isinstance(config, dict) and config.get("subclassed"):  # a Model subclass: its class, from_config, built
        return rebuild_subclassed(config, device if device is not None else backend, custom_objects)
    return rebuild(config, Sequential, Model, device if device is not None else backend, custom_objects)


def load_model(path, device=None, backend=None, custom_objects: dict | None = None, compile: bool = True) -> Model:  # noqa: A002 - Keras' name
    """Rebuild the model stored in ``path`` (a model file or a checkpoint) with its weights, on ``device`` ("host",
    "gpu", "gpu:N", "auto"; ``backend`` is its old name). Files hold host arrays: any device loads any file.
    A model saved compiled comes back compiled (optimizer and its slots, loss, metrics, epoch, random streams):
    ``evaluate`` works at once and ``fit`` continues where the saved model stopped. ``custom_objects``:
    ``{class name: Layer subclass}`` for custom layers not registered with ``@magmadnn.layers.register``.
    ``compile=False`` (Keras' argument): the weights only, the model is left uncompiled."""
    if not isinstance(compile, (bool, np.bool_)):
        raise TypeError(f"load_model: compile must be True or False, got {compile!r}")
    tensors, meta = persistence.read(path)
    if graph_archive.is_archive(meta["model"]):  # a model of op nodes: its graph as ONNX bytes
        model = graph_archive.rebuild(tensors, meta["model"], device if device is not None else backend, path)
    else:
        model = model_from_config(meta["model"], device=device, backend=backend, custom_objects=custom_objects)
    if compile and "optimizer" in meta:
        persistence.restore_training(model, tensors, meta, path)
    else:
        persistence.restore(model, tensors, meta, path)
    return model


def model_from_json(json_string: str, custom_objects: dict | None = None) -> Model:
    """Keras' ``model_from_json``: the (untrained) model ``model.to_json()`` describes."""
    import json

    return model_from_config(json.loads(json_string), custom_objects=custom_objects)


def clone_model(model: Model, input_tensors=None, clone_function=None, call_function=None, recursive=False,
                **kwargs) -> Model:
    """Keras' ``clone_model``: the same architecture with new layers and freshly drawn weights (a new seed; the
    weights are not shared nor copied: ``clone.set_weights(model.get_weights())`` copies them)."""
    given = {"input_tensors": input_tensors, "clone_function": clone_function, "call_function": call_function,
             **kwargs}
    given = {k: v for k, v in given.items() if v is not None}
    if given or recursive:
        raise ValueError(f"clone_model: {sorted(given) or ['recursive']} is not supported; magmadnn's clone_model "
                         "takes the model only (build a new model from the cloned layers instead)")
    if not isinstance(model, Model):
        raise TypeError(f"clone_model expects a magmadnn Model, got {type(model).__name__}")
    config = {**model.get_config(), "seed": None}  # a fresh seed: new random weights, as Keras draws them
    return model_from_config(config, device=model.xp)
