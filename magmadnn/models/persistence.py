"""Saving and loading models and resumable checkpoints (file containers in :mod:`magmadnn.saving`).

A model file holds the weight and state arrays under position keys ``layers.<i>.<name>`` and a JSON document with
the model configuration (``kind: "model"``) and a per-layer architecture description. A checkpoint adds the
optimizer (class, configuration, step count, slot arrays ``optimizer.<param index>.<slot>``), the loss and metrics,
the number of completed epochs and the RNG states (shuffling and dropout streams) (``kind: "checkpoint"``).
Loading compares the stored architecture with the model's and raises ``ArchitectureMismatchError`` naming the first
difference.
"""

from __future__ import annotations

import numpy as np

from .. import losses as _losses
from .. import metrics as _metrics
from ..saving import ArchitectureMismatchError, ModelFileError, read_file, write_file

__all__ = ["save_model", "load_model", "load_weights", "save_checkpoint", "load_checkpoint",
           "ArchitectureMismatchError", "ModelFileError"]

_OPT_PREFIX = "optimizer."


def _weights(model) -> dict:
    return {key: model.xp.to_numpy(array) for key, array in model.named_arrays().items()}


def _metadata(model, kind: str) -> dict:
    return {"kind": kind, "model": model.get_config(), "architecture": model.architecture()}


def save_model(model, path) -> str:
    model._require_built("save")
    return write_file(path, _weights(model), _metadata(model, "model"))


def _read(path) -> tuple[dict, dict]:
    tensors, meta = read_file(path)
    if meta.get("kind") not in ("model", "checkpoint") or "model" not in meta or "architecture" not in meta:
        raise ModelFileError(f"{str(path)!r} is a magmadnn file but not a model or checkpoint "
                             f"(kind {meta.get('kind')!r})")
    return tensors, meta


def load_model(path, device=None, backend=None):
    """Rebuild the model stored in ``path`` (a model file or a checkpoint) with its weights, on ``device`` ("host",
    "gpu", "gpu:N", "auto"; ``backend`` is its old name). Files hold host arrays: any device loads any file."""
    from .model import model_from_config

    tensors, meta = _read(path)
    model = model_from_config(meta["model"], device=device, backend=backend)
    _check_architecture(model, meta["architecture"], path)
    model._assign(tensors, f"loading {str(path)!r}")
    return model


def _describe(entry: dict) -> str:
    shapes = ", ".join(f"{name} {tuple(shape)}" for name, shape in sorted(entry["weights"].items()))
    return f"{entry['class_name']} {entry['name']!r}" + (f" with {shapes}" if shapes else "")


def _comparable(config: dict) -> dict:
    """A layer configuration without its initializers: they only shape fresh weights, never loaded ones."""
    return {key: value for key, value in config.items() if not key.endswith("_initializer")}


def _check_architecture(model, stored: list, path) -> None:
    """Raise ArchitectureMismatchError unless ``stored`` describes the same layers and weight shapes (initializers
    may differ)."""
    mine = [{**entry, "config": _comparable(entry["config"])} for entry in model.architecture()]
    stored = [{**entry, "config": _comparable(entry["config"])} for entry in stored]
    where = f"model file {str(path)!r}"
    if len(stored) != len(mine):
        raise ArchitectureMismatchError(
            f"{where} holds a different architecture: {len(stored)} layers "
            f"({', '.join(e['class_name'] for e in stored)}) but model {model.name!r} has {len(mine)} "
            f"({', '.join(e['class_name'] for e in mine)})")
    for index, (theirs, ours) in enumerate(zip(stored, mine)):
        same = (theirs["class_name"] == ours["class_name"] and theirs["weights"] == ours["weights"]
                and theirs["config"] == ours["config"])
        if not same:
            detail = ""
            if theirs["class_name"] == ours["class_name"]:
                keys = sorted(k for k in {*theirs["config"], *ours["config"]}
                              if theirs["config"].get(k) != ours["config"].get(k))
                detail = "".join(f"; {k}: {theirs['config'].get(k)!r} in the file, {ours['config'].get(k)!r} here"
                                 for k in keys)
            raise ArchitectureMismatchError(
                f"{where} holds a different architecture: layer {index} is {_describe(theirs)} in the file but "
                f"{_describe(ours)} in model {model.name!r}{detail}")


def _ensure_built(model, meta) -> None:
    if model.built:
        return
    first = meta["model"]["layers"][0]
    if first["class_name"] != "Input" or not hasattr(model, "build"):
        model._require_built("load_weights")
    model.build(tuple(first["config"]["shape"]))


def load_weights(model, path) -> None:
    tensors, meta = _read(path)
    _ensure_built(model, meta)
    _check_architecture(model, meta["architecture"], path)
    model._assign(tensors, f"loading {str(path)!r}")


# ------------------------------------------------------------------------------------------------ checkpoints


def _rng_state(rng):
    if hasattr(rng, "state") and hasattr(rng, "take"):  # a backend random Stream
        return rng.state
    if hasattr(rng, "bit_generator"):
        return rng.bit_generator.state
    if hasattr(rng, "get_state"):
        return rng.get_state()
    return None


def _set_rng_state(rng, state) -> None:
    if state is None:
        return
    if hasattr(rng, "state") and hasattr(rng, "take"):
        rng.state = state
    elif hasattr(rng, "bit_generator"):
        rng.bit_generator.state = state
    elif hasattr(rng, "set_state"):
        rng.set_state(state)


def _layer_rngs(model) -> dict:
    return {str(i): layer.rng for i, layer in enumerate(model.layers) if getattr(layer, "rng", None) is not None}


def save_checkpoint(model, path, epoch: int) -> str:
    model._require_compiled("save_checkpoint")
    model._require_built("save_checkpoint")
    tensors = _weights(model)
    state = model.optimizer.state_dict()
    for index, slots in state["slots"].items():
        for slot, array in slots.items():
            tensors[f"{_OPT_PREFIX}{index}.{slot}"] = model.xp.to_numpy(array)
    meta = _metadata(model, "checkpoint")
    meta.update({
        "epoch": int(epoch),
        "optimizer": {**model.optimizer.to_config(), "iterations": state["iterations"]},
        "loss": model.loss.to_config(),
        "metrics": [m.to_config() for m in model.metrics],
        "rng": {"shuffle": _rng_state(model._shuffle_rng),
                "layers": {i: _rng_state(rng) for i, rng in _layer_rngs(model).items()}},
    })
    return write_file(path, tensors, meta)


def load_checkpoint(model, path) -> int:
    tensors, meta = _read(path)
    if meta["kind"] != "checkpoint":
        raise ModelFileError(f"{str(path)!r} is a model file without training state; use load_weights() or "
                             "models.load() for it")
    _ensure_built(model, meta)
    _check_architecture(model, meta["architecture"], path)
    stored_opt = meta["optimizer"]
    if model.compiled and type(model.optimizer).__name__ != stored_opt["class_name"]:
        raise ArchitectureMismatchError(
            f"checkpoint {str(path)!r} was trained with {stored_opt['class_name']} but model {model.name!r} is "
            f"compiled with {type(model.optimizer).__name__}")
    if not model.compiled:
        model.compile(optimizer={"class_name": stored_opt["class_name"], "config": stored_opt["config"]},
                      loss=_losses.get(meta["loss"]), metrics=[_metrics.get(m) for m in meta["metrics"]])
    model._assign(tensors, f"loading {str(path)!r}")
    params = model.parameters()
    slots: dict[int, dict] = {}
    for key, array in tensors.items():
        if key.startswith(_OPT_PREFIX):
            index, slot = key[len(_OPT_PREFIX):].split(".", 1)
            index = int(index)
            if index >= len(params) or tuple(array.shape) != params[index].shape:
                raise ArchitectureMismatchError(f"checkpoint {str(path)!r}: optimizer slot {key!r} does not match "
                                                f"the model's parameter {index}")
            slots.setdefault(index, {})[slot] = model.xp.asarray(np.array(array, dtype=params[index].dtype))
    model.optimizer.load_state_dict({"iterations": stored_opt["iterations"], "lr": stored_opt["config"]["lr"],
                                     "slots": slots})
    model.optimizer._count = len(params)
    rng = meta.get("rng", {})
    _set_rng_state(model._shuffle_rng, rng.get("shuffle"))
    for index, layer_rng in _layer_rngs(model).items():
        _set_rng_state(layer_rng, rng.get("layers", {}).get(index))
    model.epoch = int(meta["epoch"])
    return model.epoch

