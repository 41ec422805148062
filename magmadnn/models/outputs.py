"""Training a model of several outputs, as Keras 3 does: ``compile(loss=`` one loss for all, a list or a dict by
output name, ``loss_weights=`` list or dict, ``metrics=`` per output as a list or dict), targets and
``sample_weight`` as a list or a dict, and the logs Keras writes (``loss``, ``<output>_loss`` when more than one
output has a loss, ``<output>_<metric>``).

Everything here plugs into the one training step without changing it: :class:`OutputTargets` is the targets of
every output indexed along the samples together (batching, shuffling and ``validation_split`` slice it as one
array), :class:`OutputsLoss` is the model's loss (the weighted sum of the outputs' losses; ``prepare`` packs every
output's targets into one host array, so a replayed graph stages them in one buffer), and :class:`OutputMetric` /
:class:`OutputLossEntry` are the model's metrics (one output's metric, one output's loss as logged). A model of one
output never sees this module.
"""

from __future__ import annotations

import numpy as np

from .. import losses as _losses
from .. import metrics as _metrics
from .._configurable import Configurable
from ..backend import host as _host

__all__ = ["OutputTargets", "OutputsLoss", "ScaledLoss", "AddedLoss", "OutputMetric", "OutputLossEntry", "Outputs",
           "compile_outputs", "targets_of", "per_output", "resolved"]


def resolved(shape, given):
    """A per-sample output ``shape`` with each axis known only at run time (None) taken from ``given`` (the
    targets' or outputs' per-sample shape, same leading axes)."""
    if not isinstance(shape, tuple) or None not in shape:
        return shape
    return tuple(given[k] if s is None and k < len(given) else s for k, s in enumerate(shape))


class Outputs(list):
    """A forward pass's outputs (Tensors, in the model's output order); ``.data`` is the list of their arrays."""

    @property
    def data(self):
        return [getattr(o, "data", o) for o in self]


class OutputTargets:
    """The targets of every output (host arrays, None for an output without a loss), sliced along the samples
    together: ``y[start:stop]``, ``y[index_array]``, ``y.shape[0]`` and ``y.copy()`` as for one array."""

    def __init__(self, arrays, n: int):
        self.arrays, self.shape = list(arrays), (int(n),)

    def __getitem__(self, index):
        parts = [None if a is None else a[index] for a in self.arrays]
        n = next((p.shape[0] for p in parts if p is not None), len(range(self.shape[0])[index])
                 if isinstance(index, slice) else len(index))
        return OutputTargets(parts, n)

    def copy(self):
        return OutputTargets([None if a is None else a.copy() for a in self.arrays], self.shape[0])

    @property
    def dtype(self):
        """What graph replay keys a batch by: the per-output target shapes and dtypes."""
        return _Key(tuple(None if a is None else (a.shape, a.dtype.str) for a in self.arrays))

    def __len__(self):
        return self.shape[0]


class _Key:
    def __init__(self, value):
        self.str = repr(value)


def _structure_error(model, who, what, got):
    names = model.output_names
    return ValueError(f"{who}: model {model.name!r} has {len(names)} outputs {names}; {what} must be a list of "
                      f"{len(names)} (one per output, in order) or a dict by output name, got {got}")


def per_output(model, value, what: str, who: str, default=None, allow_one: bool = False):
    """``value`` (one for all when ``allow_one``, a list, or a dict by output name) as one entry per output."""
    names = model.output_names
    if isinstance(value, dict):
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ValueError(f"{who}: {what} names {unknown}, which {'is' if len(unknown) == 1 else 'are'} not an "
                             f"output of model {model.name!r}; its outputs are {names}")
        return [value.get(name, default) for name in names]
    if isinstance(value, (list, tuple)):
        if len(value) != len(names):
            raise _structure_error(model, who, what, f"a {type(value).__name__} of {len(value)}")
        return list(value)
    if allow_one:
        return [value] * len(names)
    raise _structure_error(model, who, what, type(value).__name__)


class OutputsLoss(Configurable):
    """The loss of a model of several outputs: ``sum(loss_weights[k] * losses[k](outputs[k], targets[k]))`` over
    the outputs that have a loss. The last batch's per-output values are kept for :class:`OutputLossEntry`."""

    name = "loss"
    reduction = "sum_over_batch_size"
    sums_dataset = False
    _volatile = frozenset({"last"})

    def __init__(self, losses, weights, names):
        self.losses, self.weights, self.names = list(losses), [float(w) for w in weights], list(names)
        self.last = [None] * len(self.losses)

    def counted(self, targets):
        return None

    def to_config(self) -> dict:
        return {"class_name": "OutputsLoss", "config": {
            "losses": {n: None if loss is None else loss.to_config() for n, loss in zip(self.names, self.losses)},
            "loss_weights": dict(zip(self.names, self.weights))}}

    def validate_output(self, k: int, targets: np.ndarray, output_shape) -> None:
        self.losses[k].validate(targets, output_shape)

    def prepare(self, targets: OutputTargets, xp, dtype):
        """Every output's prepared targets: one host array (n, columns) uploaded at once when all are floats,
        else a tuple of backend arrays."""
        parts = [None if loss is None else loss.prepare(t, _host, dtype)
                 for loss, t in zip(self.losses, targets.arrays)]
        present = [p for p in parts if p is not None]
        n = targets.shape[0]
        if all(np.asarray(p).dtype == np.dtype(dtype) for p in present):
            self._layout = [None if p is None else (p.shape[1:], int(np.prod(p.shape[1:], dtype=np.int64)))
                            for p in parts]
            packed = np.concatenate([np.asarray(p).reshape(n, -1) for p in present], axis=1)
            return xp.asarray(packed, dtype) if xp is not _host else packed
        self._layout = None
        return tuple(None if p is None else xp.asarray(p) for p in parts)

    _layout = None

    def _parts(self, packed, xp):
        if isinstance(packed, tuple):
            return list(packed)
        arr = packed if not isinstance(packed, np.ndarray) else xp.asarray(packed)
        sizes = [size for entry in self._layout if entry is not None for _, size in [entry]]
        pieces = list(xp.split(arr, sizes, 1)) if len(sizes) > 1 else [arr]
        n = int(arr.shape[0])
        out, it = [], iter(pieces)
        for entry in self._layout:
            out.append(None if entry is None else xp.reshape(next(it), (n, *entry[0])))
        return out

    def checked(self, outputs, packed):
        xp = outputs[0].xp
        total = None
        for k, (loss, weight, target) in enumerate(zip(self.losses, self.weights, self._parts(packed, xp))):
            if loss is None:
                continue
            value = loss.checked(outputs[k], target)
            self.last[k] = value.data
            term = value if weight == 1.0 else value * weight
            total = term if total is None else total + term
        return total

    def __call__(self, outputs, targets):
        return self.checked(outputs, self.prepare(targets, outputs[0].xp, outputs[0].dtype))


class _Wrapped(Configurable):
    """A model's loss around another (``inner``): everything but the value is the inner loss's."""

    def __init__(self, inner):
        self.inner = inner
        self.name, self.reduction = inner.name, getattr(inner, "reduction", "sum_over_batch_size")

    sums_dataset = property(lambda self: self.inner.sums_dataset)

    def __getattr__(self, name):  # validate, prepare, counted, from_logits, ignore_index, losses: the inner's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def to_config(self) -> dict:
        return self.inner.to_config()


def compiled_from_config(loss: dict, metrics: list):
    """``(loss, loss_weights, metrics)`` for ``compile`` from a model file's stored loss and metrics (a loss per
    output, a scaled loss, or one loss)."""
    if loss.get("class_name") == "ScaledLoss":
        return loss["config"]["loss"], loss["config"]["weight"], [_metrics.get(m) for m in metrics]
    if loss.get("class_name") == "OutputsLoss":
        chosen: dict = {}
        for m in metrics:
            if m.get("class_name") == "OutputMetric":
                chosen.setdefault(m["config"]["output"], []).append(m["config"]["metric"])
        return loss, None, chosen
    return _losses.get(loss), None, [_metrics.get(m) for m in metrics]


class ScaledLoss(_Wrapped):
    """A model of one output compiled with ``loss_weights``: its loss times the weight (as Keras)."""

    def __init__(self, inner, weight: float):
        super().__init__(inner)
        self.weight = float(weight)

    def checked(self, outputs, targets):
        return self.inner.checked(outputs, targets) * self.weight

    def __call__(self, *args, **kwargs):
        return self.inner(*args, **kwargs) * self.weight

    def to_config(self) -> dict:
        return {"class_name": "ScaledLoss", "config": {"loss": self.inner.to_config(), "weight": self.weight}}


class AddedLoss(_Wrapped):
    """The loss of a subclassed model: the compiled loss plus the terms its ``call`` added (``add_loss``)."""

    _volatile = frozenset({"model"})

    def __init__(self, inner, model):
        super().__init__(inner)
        self.model = model

    def checked(self, outputs, targets):
        loss = self.inner.checked(outputs, targets)
        for term in self.model._added_losses:
            loss = loss + term
        return loss

    def __call__(self, outputs, targets):
        return self.checked(outputs, self.inner.prepare(targets, _host, outputs.dtype))


class OutputLossEntry(_metrics.Metric):
    """One output's loss as Keras logs it (``<output>_loss``, unweighted), read from the model loss's last batch."""

    def __init__(self, owner: OutputsLoss, k: int, name: str):
        self.owner, self.k, self.name = owner, k, name
        super().__init__()

    def result_of(self, total, count):
        return float(total) / count

    def stage(self, labels, shape, dtype):
        return np.zeros((1,), dtype)

    def hits(self, outputs, labels, xp):
        return xp.multiply(self.owner.last[self.k], float(labels.shape[0]))

    def hits_of(self, outputs, staged, xp):
        return xp.multiply(self.owner.last[self.k], float(outputs[0].shape[0]))

    def to_config(self) -> dict:
        return {"class_name": "OutputLossEntry", "config": {"name": self.name}}


class OutputMetric(_metrics.Metric):
    """Metric ``inner`` of output ``k``, logged as ``<output>_<metric>`` (Keras' name)."""

    def __init__(self, inner, k: int, output: str, shape):
        self.inner, self.k, self.output, self.out_shape = inner, k, output, tuple(shape)
        self.name = f"{output}_{inner.name}"
        self.size = inner.size
        super().__init__()

    def reset(self) -> None:
        super().reset()
        if hasattr(self, "inner"):
            self.inner.reset()

    def result_of(self, total, count):
        return self.inner.result_of(total, count)

    def counted(self, labels, shape):
        target = labels.arrays[self.k]
        return self.inner.counted(target, (target.shape[0], *resolved(self.out_shape, target.shape[1:])))

    def stage(self, labels, shape, dtype):
        target = labels.arrays[self.k]
        return self.inner.stage(target, (target.shape[0], *resolved(self.out_shape, target.shape[1:])), dtype)

    def hits(self, outputs, labels, xp):
        return self.inner.hits(outputs[self.k], labels.arrays[self.k], xp)

    def hits_of(self, outputs, staged, xp):
        return self.inner.hits_of(outputs[self.k], staged, xp)

    def to_config(self) -> dict:
        return {"class_name": "OutputMetric", "config": {"output": self.output, "metric": self.inner.to_config()}}


def compile_outputs(model, loss, loss_weights, metrics):
    """``(loss, metrics)`` of ``compile`` for a model of several outputs (Keras 3's forms and names)."""
    names = model.output_names
    if isinstance(loss, dict) and loss.get("class_name") == "OutputsLoss":  # a saved compile state
        stored = loss["config"]
        loss, loss_weights = stored["losses"], stored["loss_weights"]
    losses = [None if item is None else _losses.get(item) for item in
              per_output(model, loss, "loss", "compile", allow_one=True)]
    if all(item is None for item in losses):
        raise ValueError(f"compile: no output of model {model.name!r} has a loss; give at least one (outputs "
                         f"{names})")
    weights = [1.0] * len(names) if loss_weights is None else [
        1.0 if w is None else w for w in per_output(model, loss_weights, "loss_weights", "compile", default=1.0)]
    for name, w in zip(names, weights):
        if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not np.isfinite(w):
            raise TypeError(f"compile: loss_weights for output {name!r} must be a finite number, got {w!r}")
    combined = OutputsLoss(losses, weights, names)
    entries = []
    if sum(item is not None for item in losses) > 1:  # Keras logs each output's loss when several have one
        entries = [OutputLossEntry(combined, k, f"{name}_loss") for k, (name, item) in enumerate(zip(names, losses))
                   if item is not None]
    chosen = [] if metrics is None else per_output(model, metrics, "metrics", "compile")
    shapes = model.output_shape
    wrapped = []
    for k, (name, given) in enumerate(zip(names, chosen)):
        if given is None:
            continue
        for item in ([given] if isinstance(given, (str, _metrics.Metric)) or callable(given) else given):
            if isinstance(item, dict) and item.get("class_name") == "OutputMetric":
                item = item["config"]["metric"]
            wrapped.append(OutputMetric(_metrics.get(item), k, name, shapes[k]))
    return combined, entries + wrapped


def targets_of(model, y, n: int, who: str, check) -> OutputTargets:
    """Targets of a model of several outputs (a list, or a dict by output name) as :class:`OutputTargets`;
    ``check(array, k)`` checks one output's array. Outputs without a loss may leave their targets out."""
    if isinstance(y, OutputTargets):
        return y
    names, losses = model.output_names, model.loss.losses
    if isinstance(y, dict):
        unknown = [k for k in y if k not in names]
        if unknown:
            raise ValueError(f"{who}: the targets dict names {unknown}, which {'is' if len(unknown) == 1 else 'are'} "
                             f"not an output of model {model.name!r}; its outputs are {names}")
        given = [y.get(name) for name in names]
    elif isinstance(y, (list, tuple)) and not (y and np.isscalar(y[0])):
        if len(y) != len(names):
            raise _structure_error(model, who, "the targets y", f"a {type(y).__name__} of {len(y)} arrays")
        given = list(y)
    else:
        raise _structure_error(model, who, "the targets y", f"one {type(y).__name__}")
    arrays = []
    for k, (name, loss, array) in enumerate(zip(names, losses, given)):
        if loss is None:
            arrays.append(None)
            continue
        if array is None:
            raise ValueError(f"{who}: no targets for output {name!r} of model {model.name!r}, which has a loss")
        arrays.append(check(array, k))
    return OutputTargets(arrays, n)
