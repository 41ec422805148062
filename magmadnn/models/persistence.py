"""Saving and loading models and resumable checkpoints (file containers in :mod:`magmadnn.saving`).

A model file holds the weight and state arrays under position keys ``layers.<i>.<name>`` and a JSON document with
the model configuration (``kind: "model"``, the layers' ``trainable`` flags included) and a per-layer architecture
description. The training state follows when the model is compiled (in a model file as in Keras' ``model.save``,
always in a checkpoint, ``kind: "checkpoint"``): the optimizer (class, configuration, step count, slot arrays
``optimizer.<param index>.<slot>``, a ``LossScaleOptimizer``'s scale and counter), the loss and metrics, the
number of completed epochs and the RNG states (shuffling and dropout streams), so that a loaded model evaluates and
resumes training exactly. A compiled model whose loss, metric or learning rate cannot be written (a plain function)
is saved without it, with a warning. Loading compares the stored architecture with the model's and raises
``ArchitectureMismatchError`` naming the first difference. :class:`Persistence` gives ``Model`` its
``save``/``load_weights``/``save_checkpoint``/``load_checkpoint`` methods; rebuilding a model from a file is
:func:`magmadnn.models.config.load_model`.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import optimizers as _optimizers
from ..saving import ArchitectureMismatchError, ModelFileError, read_file, write_file
from . import graph_archive
from . import outputs as _outputs
from . import rng as _rng

__all__ = ["Persistence", "save_model", "read", "restore", "restore_training", "load_weights", "save_checkpoint",
           "load_checkpoint", "ArchitectureMismatchError", "ModelFileError"]

_OPT_PREFIX = "optimizer."


def _contents(model, kind: str) -> tuple[dict, dict]:
    """The weight arrays (host) and the metadata of a model file; a model of op nodes keeps its graph as ONNX bytes
    (:mod:`.graph_archive`) in place of a layer configuration."""
    tensors = {key: model.xp.to_numpy(array) for key, array in model.named_arrays().items()}
    graph = graph_archive.entry(model)
    if graph is not None:
        tensors.update(graph[1])
    config = model._stored_config() if graph is None else graph[0]
    return tensors, {"kind": kind, "model": config, "architecture": model.architecture()}


def save_model(model, path, extra: dict | None = None) -> str:
    """``extra``: more JSON metadata (``ModelCheckpoint`` keeps its best monitored value there). A compiled model's
    training state is saved too (see the module docstring)."""
    model._require_built("save")
    tensors, meta = _contents(model, "model")
    if model.compiled:
        try:
            training = _training_state(model, model.epoch)
        except (TypeError, ValueError, AttributeError) as exc:
            warnings.warn(f"save: model {model.name!r} is saved without its compiled state ({exc}); compile it "
                          "again after loading", RuntimeWarning, stacklevel=3)
        else:
            tensors.update(training[0])
            meta.update(training[1])
    return write_file(path, tensors, {**meta, **(extra or {})})


def read(path) -> tuple[dict, dict]:
    """The arrays and metadata of a model file or checkpoint (ModelFileError for any other magmadnn file)."""
    tensors, meta = read_file(path)
    if meta.get("kind") not in ("model", "checkpoint"):
        raise ModelFileError(f"{str(path)!r} is a magmadnn file but not a model or checkpoint "
                             f"(kind {meta.get('kind')!r})")
    for key, what in (("model", "model configuration (an object)"), ("architecture", "architecture (a list)")):
        wanted = dict if key == "model" else list
        if not isinstance(meta.get(key), wanted):
            found = "missing" if key not in meta else ("null" if meta[key] is None else
                                                       f"a {type(meta[key]).__name__}")
            raise ModelFileError(f"{str(path)!r} is a damaged {meta['kind']} file: its {what} is {found}; the "
                                 "file cannot be rebuilt (save the model again)")
    return tensors, meta


class _Damaged:
    """Context manager: a KeyError/TypeError/IndexError/AttributeError/ValueError (not one of ours) raised while
    reading the metadata of ``path`` becomes a ModelFileError saying the file is damaged."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None or issubclass(kind, (ModelFileError, ArchitectureMismatchError)):
            return False
        if issubclass(kind, (KeyError, TypeError, IndexError, AttributeError, ValueError)):
            raise ModelFileError(f"{str(self.path)!r} has damaged magmadnn metadata ({kind.__name__}: {exc})") \
                from None
        return False


def restore(model, tensors: dict, meta: dict, path) -> None:
    """Check that ``model`` (just rebuilt from ``meta``) has the stored architecture, then assign the weights."""
    with _Damaged(path):
        _check_architecture(model, meta["architecture"], path)
    model._assign(tensors, f"loading {str(path)!r}")


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


def _unknown_arrays(tensors: dict, model, path) -> None:
    known = set(model.named_arrays())
    extra = sorted(k for k in tensors if k not in known and not k.startswith(_OPT_PREFIX) and k != graph_archive.ARRAY)
    if extra:
        raise ArchitectureMismatchError(f"{str(path)!r} holds arrays this model does not have: {extra[:5]}")


def load_weights(model, path) -> None:
    """All or nothing: every array is checked before the first weight changes."""
    tensors, meta = read(path)
    with _Damaged(path):
        _ensure_built(model, meta)
        _check_architecture(model, meta["architecture"], path)
    _unknown_arrays(tensors, model, path)
    model._assign(tensors, f"loading {str(path)!r}")


# ------------------------------------------------------------------------------------------------ checkpoints


def _layer_rngs(model) -> dict:
    return {str(i): layer.rng for i, layer in enumerate(model.layers) if getattr(layer, "rng", None) is not None}


def _training_state(model, epoch: int) -> tuple[dict, dict]:
    """The optimizer's slot arrays (host) and the training metadata: optimizer, loss, metrics, epoch, RNG states."""
    state = model.optimizer.state_dict()
    meta = {
        "epoch": int(epoch),
        "optimizer": {**model.optimizer.to_config(), "iterations": state["iterations"],
                      **({"loss_scale": state["loss_scale"]} if "loss_scale" in state else {})},
        "loss": model.loss.to_config(),
        "metrics": [m.to_config() for m in model.metrics],
        "rng": {"shuffle": _rng.get_state(model._shuffle_rng),
                "layers": {i: _rng.get_state(rng) for i, rng in _layer_rngs(model).items()}},
    }
    tensors = {f"{_OPT_PREFIX}{index}.{slot}": model.xp.to_numpy(array)
               for index, slots in state["slots"].items() for slot, array in slots.items()}
    return tensors, meta


def save_checkpoint(model, path, epoch: int, extra: dict | None = None) -> str:
    model._require_compiled("save_checkpoint")
    model._require_built("save_checkpoint")
    tensors, meta = _contents(model, "checkpoint")
    slots, training = _training_state(model, epoch)
    tensors.update(slots)
    meta.update(training, **(extra or {}))
    return write_file(path, tensors, meta)


def _checked_rng_state(make, state, what: str, path):
    """``state`` after checking that a fresh stream from ``make()`` accepts it (nothing live is touched)."""
    if state is None:
        return None
    try:
        _rng.set_state(make(), state)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFileError(f"checkpoint {str(path)!r}: the {what} random state is damaged ({exc})") from None
    return state


def _plan_optimizer(model, meta, tensors, path):
    """The optimizer (the model's, or a new one when it is not compiled), loss, metrics and checked optimizer state
    a checkpoint holds; nothing is assigned."""
    stored = meta["optimizer"]
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
        raise ModelFileError(f"checkpoint {str(path)!r}: damaged optimizer entry {stored!r}")
    if model.compiled:
        if type(model.optimizer).__name__ != stored["class_name"]:
            raise ArchitectureMismatchError(
                f"checkpoint {str(path)!r} was trained with {stored['class_name']} but model {model.name!r} is "
                f"compiled with {type(model.optimizer).__name__}")
        optimizer, loss, metrics = model.optimizer, model.loss, model.metrics
    else:
        optimizer = _optimizers.get({"class_name": stored["class_name"], "config": stored["config"]})
        loss = _outputs.compiled_from_config(meta["loss"], meta["metrics"])  # (loss, loss_weights, metrics)
        metrics = loss[2]
    iterations = stored["iterations"]
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise ModelFileError(f"checkpoint {str(path)!r}: optimizer step count must be an int >= 0, got {iterations!r}")
    params = model.parameters()
    slots: dict[int, dict] = {}
    for key, array in tensors.items():
        if not key.startswith(_OPT_PREFIX):
            continue
        index, _, slot = key[len(_OPT_PREFIX):].partition(".")
        if not index.isdigit() or int(index) >= len(params) or slot not in optimizer.slots:
            raise ArchitectureMismatchError(
                f"checkpoint {str(path)!r}: optimizer array {key!r} matches no slot of {type(optimizer).__name__} "
                f"(slots {list(optimizer.slots)}) for the model's {len(params)} parameters")
        param = params[int(index)]
        if tuple(array.shape) != tuple(param.shape):
            raise ArchitectureMismatchError(
                f"checkpoint {str(path)!r}: optimizer slot {key!r} has shape {tuple(array.shape)} but parameter "
                f"{param.name!r} has shape {tuple(param.shape)}")
        if array.dtype.kind not in "iuf" or (array.dtype.kind == "f" and not np.isfinite(array).all()):
            raise ModelFileError(f"checkpoint {str(path)!r}: optimizer slot {key!r} has dtype {array.dtype} or "
                                 "non-finite values")
        slots.setdefault(int(index), {})[slot] = model.xp.asarray(np.array(array, dtype=param.dtype))
    for index, found in slots.items():
        if set(found) != set(optimizer.slots):
            raise ArchitectureMismatchError(
                f"checkpoint {str(path)!r}: parameter {index} has optimizer slots {sorted(found)}, "
                f"{type(optimizer).__name__} needs {sorted(optimizer.slots)}")
    config = stored["config"]
    config = config["inner_optimizer"]["config"] if isinstance(config.get("inner_optimizer"), dict) else config
    state = {"iterations": iterations, "lr": config["lr"], "slots": slots}
    if "loss_scale" in stored:  # a LossScaleOptimizer's scale and counter
        try:
            _optimizers.check_loss_scale_state(stored["loss_scale"], f"checkpoint {str(path)!r}")
        except ValueError as error:
            raise ModelFileError(str(error)) from None
        state["loss_scale"] = stored["loss_scale"]
    return optimizer, loss, metrics, state


def load_checkpoint(model, path) -> int:
    """All or nothing: weights, optimizer state, RNG states and the epoch are checked before anything changes."""
    tensors, meta = read(path)
    if meta["kind"] != "checkpoint":
        state = "with its training state" if "optimizer" in meta else "without training state"
        raise ModelFileError(f"{str(path)!r} is a model file (Model.save, {state}), not a checkpoint "
                             "(Model.save_checkpoint / ModelCheckpoint); load it with models.load_model(path), which "
                             "restores a compiled model's training state too, or model.load_weights(path)")
    return restore_training(model, tensors, meta, path)


def restore_training(model, tensors: dict, meta: dict, path) -> int:
    """Weights and training state (compiling ``model`` with the stored optimizer, loss and metrics unless it is
    compiled already); returns the epoch."""
    with _Damaged(path):
        _ensure_built(model, meta)
        _check_architecture(model, meta["architecture"], path)
        _unknown_arrays(tensors, model, path)
        optimizer, loss, metrics, opt_state = _plan_optimizer(model, meta, tensors, path)
        epoch = meta["epoch"]
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ModelFileError(f"checkpoint {str(path)!r}: epoch must be an int >= 0, got {epoch!r}")
        rng = meta.get("rng") or {}
        shuffle = _checked_rng_state(lambda: np.random.default_rng(0), rng.get("shuffle"), "shuffling", path)
        layer_states = {index: _checked_rng_state(lambda: model.xp.rng(0), (rng.get("layers") or {}).get(index),
                                                  f"layer {index} dropout", path)
                        for index in _layer_rngs(model)}
    plan = model._prepare_assign(tensors, f"loading {str(path)!r}")
    # everything is checked: commit
    if not model.compiled:
        model.compile(optimizer=optimizer, loss=loss[0], loss_weights=loss[1], metrics=metrics)
    model._commit(plan)
    optimizer.load_state_dict(opt_state)
    optimizer._count = len(model.parameters())
    _rng.set_state(model._shuffle_rng, shuffle)
    for index, layer_rng in _layer_rngs(model).items():
        _rng.set_state(layer_rng, layer_states[index])
    model.epoch = epoch
    return model.epoch


class Persistence:
    """The saving and loading methods of ``Model``."""

    def save(self, path, extra: dict | None = None) -> str:
        """Architecture (JSON) + weights to ``.safetensors`` or ``.npz`` (atomic write; never pickle); ``extra``:
        more JSON metadata."""
        return save_model(self, path, extra=extra)

    def save_weights(self, path) -> str:
        """Keras' ``save_weights``: writes what :meth:`save` writes (``.safetensors`` or ``.npz``; Keras'
        ``.weights.h5`` is not supported), which :meth:`load_weights` reads back."""
        return save_model(self, path)

    def load_weights(self, path) -> None:
        """Load weights from a model file or checkpoint of the same architecture (else ArchitectureMismatchError)."""
        load_weights(self, path)

    def save_checkpoint(self, path, epoch: int | None = None, extra: dict | None = None) -> str:
        """Resumable checkpoint: weights, optimizer state, epoch and RNG states, written atomically; ``extra``: more
        JSON metadata."""
        return save_checkpoint(self, path, self.epoch if epoch is None else epoch, extra=extra)

    def load_checkpoint(self, path) -> int:
        """Restore a checkpoint into this model; returns the epoch to pass to ``fit(initial_epoch=...)``."""
        return load_checkpoint(self, path)

    # -- ONNX
    def export(self, path, opset: int | None = None, output_name="output") -> str:
        """Write the model as ONNX to ``path`` (see :func:`magmadnn.onnx.export`; needs ``pip install
        'magmadnn[onnx]'``): opset 17+, named inputs and outputs (``output_name``: one name, or a list for several
        outputs), a dynamic batch axis."""
        from ..onnx.export import export  # noqa: PLC0415 - the onnx package is optional

        return export(self, path, opset=opset, output_name=output_name)
