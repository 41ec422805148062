"""Why a training loss became NaN or inf: run on the error path only (nothing here touches a training step).

:func:`nonfinite_cause` replays the batch through the model in inference mode, layer by layer, and names the first
layer whose output is not finite while its inputs are, with what it found there: a masked average over a sample
that is all padding (0/0; Keras gives NaN there too), or else the layer itself. When every output is finite the
loss overflowed: with sample or class weights, their size is named. None: nothing found (the generic advice
stands). :func:`culprit` names the layer, loss, metric or optimizer whose code raised an error (a step that could
not be captured as a graph)."""

from __future__ import annotations

import numpy as np

from .._loss_weights import weights_of
from ..autograd import Function, Tensor, no_grad
from ..layers.base import Input

__all__ = ["nonfinite_cause", "culprit"]


def _finite(xp, value) -> bool:
    items = value if isinstance(value, (list, tuple)) else [value]
    return all(not isinstance(t, Tensor) or bool(np.isfinite(np.asarray(xp.to_numpy(t.data), np.float64)).all())
               for t in items)


def _all_padding(xp, args) -> list[int]:
    """Samples whose mask (riding on the layer's inputs) is all 0."""
    for arg in args:
        mask = getattr(arg, "_mask", None)
        if mask is not None:
            host = np.asarray(xp.to_numpy(mask.data if isinstance(mask, Tensor) else mask), np.float64)
            return [int(i) for i in np.flatnonzero(host.reshape(host.shape[0], -1).sum(axis=1) == 0)]
    return []


def _first_nonfinite_layer(model, xs):
    """``(layer, its inputs)`` of the first node whose output is not finite, else None."""
    xp, values = model.xp, {}
    feeds = {id(node): tensor for node, tensor in zip(model.inputs, model._input_tensors(model._cast_inputs(xs)))}
    with no_grad():
        for node in model.nodes:
            if isinstance(node.layer, Input):
                values[id(node)] = feeds[id(node)]
                continue
            args = [values[id(parent)] for parent in node.parents]
            key = id(node) if node.index is None else id(node.call)
            if key not in values:
                values[key] = node.layer.call_masked(args if node.many else args[0], False)
                if not _finite(xp, values[key]):
                    return node.layer, args
            if node.index is not None:
                values[id(node)] = values[key][node.index]
    return None


def nonfinite_cause(model, xb, yb) -> str | None:
    """The cause found for a non-finite loss on the batch ``(xb, yb)`` (host arrays), or None."""
    try:
        found = _first_nonfinite_layer(model, list(xb))
    except Exception:  # noqa: BLE001 - a diagnosis never hides the error it explains
        return None
    if found is not None:
        layer, args = found
        padded = _all_padding(model.xp, args)
        if padded:
            return (f"sample(s) {padded[:5]} of this batch are all padding (their mask from "
                    f"Embedding(mask_zero=True) is all 0), so {type(layer).__name__} layer {layer.name!r} averages "
                    "over no step: 0/0 = NaN (as in Keras); drop those samples or keep at least one unmasked step in "
                    "each")
        return (f"the output of {type(layer).__name__} layer {layer.name!r} is the first that is not finite (its "
                "inputs are finite)")
    weights = weights_of(yb)
    if weights is not None and weights.size:
        return (f"every layer's output is finite, so the weighted loss overflowed {np.dtype(model.dtype).name}: "
                f"the largest sample/class weight of this batch is {float(np.abs(weights).max()):g}; scale the "
                "weights down")
    return None


def culprit(error: BaseException, model) -> str | None:
    """The layer, loss, metric or optimizer whose code raised ``error`` (the innermost one on its traceback), with
    the method and the autograd function running in it; the backward pass when only a function's backward ran."""
    names = {id(layer): f"layer {layer.name!r} ({type(layer).__name__})" for layer in model.layers}
    names[id(model.loss)] = f"the loss {type(model.loss).__name__}"
    names.update((id(m), f"the metric {m.name!r} ({type(m).__name__})") for m in model.metrics)
    names[id(model.optimizer)] = f"the optimizer {type(model.optimizer).__name__}"
    owner = function = None
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        this = frame.f_locals.get("self")
        if this is not None and id(this) in names:
            owner, function = f"{names[id(this)]}, {type(this).__name__}.{frame.f_code.co_name}", None
        elif isinstance(this, Function):
            function = f"{type(this).__name__}.{frame.f_code.co_name}"
        tb = tb.tb_next
    if owner is None:
        return None if function is None else f"the backward pass, {function}"
    return owner if function is None else f"{owner}, {function}"
