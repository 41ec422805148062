"""Model files of graphs that have no layer configuration: a model of op nodes (``magmadnn.onnx.load``) is saved
with its graph written in a graph format (ONNX) as one ``uint8`` array of the file, beside the usual weight arrays.

``model.save`` and ``load_model`` reach the format through :data:`FORMATS`, which the format's package fills when
it is imported (``magmadnn.onnx`` registers "onnx"), so this floor never imports the one above; a file read in a
process that has not imported it yet imports the package named in :data:`PACKAGES` first. The graph is written
with the weights it holds (as trained) and the weight arrays are kept too, so ``load_weights``, checkpoints and the
compiled state work as for any model; the metadata's ``model`` entry says which format and array hold the graph.
"""

from __future__ import annotations

import importlib

import numpy as np

from ..saving import ModelFileError

__all__ = ["FORMATS", "PACKAGES", "ARRAY", "register", "archived", "entry", "is_archive", "rebuild"]

#: format name -> (writes(model) -> bytes or None when the model is not of this format, reads(bytes, config, device)
#: -> Model)
FORMATS: dict = {}
#: format name -> the package that registers it when imported
PACKAGES = {"onnx": "magmadnn.onnx"}
#: the key of the graph's bytes in the file
ARRAY = "graph.bytes"


def register(name: str, writes, reads) -> None:
    FORMATS[name] = (writes, reads)


def archived(model):
    """``(format, graph bytes)`` for a model whose graph a format writes, else None."""
    for name, (writes, _) in FORMATS.items():
        data = writes(model)
        if data is not None:
            return name, data
    return None


def entry(model):
    """The ``model`` entry of the file's metadata and the extra arrays for a model saved as a graph, else None."""
    found = archived(model)
    if found is None:
        return None
    name, data = found
    config = {"class_name": "Model", "name": model.name, "seed": model.seed, "dtype": model.dtype_policy.name,
              "trainable": model._trainable,
              "frozen": [layer.name for layer in model.layers if not getattr(layer, "trainable", True)],
              "graph": {"format": name, "array": ARRAY}}
    return config, {ARRAY: np.frombuffer(data, np.uint8)}


def is_archive(config) -> bool:
    return isinstance(config, dict) and isinstance(config.get("graph"), dict)


def rebuild(tensors: dict, config: dict, device, path):
    """The model a graph entry describes (weights as the graph holds them); pops the graph array from ``tensors``."""
    graph = config["graph"]
    name = graph.get("format")
    if name not in FORMATS and name in PACKAGES:
        importlib.import_module(PACKAGES[name])  # the format's package registers it (a floor above this one)
    if name not in FORMATS:
        raise ModelFileError(f"{str(path)!r} holds a model graph in format {name!r}, which magmadnn does not read "
                             f"(formats: {sorted(PACKAGES)})")
    array = tensors.pop(graph.get("array", ARRAY), None)
    if array is None or np.asarray(array).dtype != np.uint8:
        raise ModelFileError(f"{str(path)!r} is damaged: its {name} graph array is missing")
    return FORMATS[name][1](np.asarray(array).tobytes(), config, device)
