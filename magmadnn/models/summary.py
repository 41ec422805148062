"""``model.summary()``: a table of layers with output shapes and parameter counts, and Keras' totals."""

from __future__ import annotations

import math

__all__ = ["summary_text"]


def _shape(shape, batched=True) -> str:
    """Keras' form: the batch axis and axes known only at run time as None; an op node's output of unknown rank
    as "?"."""
    if isinstance(shape, list):  # a layer with several outputs (LSTM(return_state=True))
        flags = batched if isinstance(batched, list) else [batched] * len(shape)
        return "[" + ", ".join(_shape(s, b) for s, b in zip(shape, flags)) + "]"
    if shape is None:
        return "?"
    return "(" + ", ".join((["None"] if batched else []) + [str(s) for s in shape]) + ("," if len(shape) == 1
                                                                                      and not batched else "") + ")"


def _output_shape(model, layer) -> str:
    flags = getattr(layer, "_output_batched", None)
    if flags is None and getattr(layer, "batched", True) is False:  # an Input without a batch axis
        flags = [False]
    if flags is None:
        return _shape(layer.output_shape)
    return _shape(layer.output_shape, flags if isinstance(layer.output_shape, list) else flags[0])


def _size(weights) -> tuple[int, int]:
    """(values, bytes) of a list of weights or arrays, each counted once."""
    unique = {id(w): w for w in weights}.values()
    count = sum(math.prod(tuple(w.shape)) for w in unique)
    return count, sum(math.prod(tuple(w.shape)) * w.dtype.itemsize for w in unique)


def _readable(size: float) -> str:
    """Bytes as Keras writes them: ``48.00 B``, ``1.17 KB``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def summary_text(model) -> str:
    """Layer (type), output shape (None = batch), parameter count (every weight, BatchNorm statistics included) and,
    for graph models, the inbound layers; then Keras' totals: trainable, non-trainable (frozen layers' weights and
    BatchNorm statistics) and, once the optimizer has slots, the optimizer's (its slots, step count and learning
    rate, as Keras counts them), all in the total."""
    show_inbound = not model.is_sequential and not model._subclassed  # Keras shows no graph for these
    rows = []
    for layer in model.layers:
        inbound = ", ".join(sorted({p.layer.name for node in model.nodes_of(layer) for p in node.parents}))
        kind = getattr(layer, "op_type", type(layer).__name__)  # an op node shows its operator
        row = [f"{layer.name} ({kind})", _output_shape(model, layer), f"{layer.count_params():,}"]
        rows.append(row + [inbound] if show_inbound else row)
    header = ["Layer (type)", "Output Shape", "Param #"] + (["Connected to"] if show_inbound else [])
    widths = [max(len(r[i]) for r in [header, *rows]) + 2 for i in range(len(header))]
    rule = "-" * sum(widths)

    def line(cells):
        return "".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    trainable, trainable_bytes = _size(model.trainable_weights)
    frozen, frozen_bytes = _size(model.non_trainable_weights)
    held = model.optimizer.slot_arrays.values() if model.optimizer is not None else ()
    slots = [array for arrays in held for array in arrays.values()]
    optimizer, optimizer_bytes = _size(slots)
    if slots:  # Keras counts the optimizer's step count and learning rate too (two 4-byte variables)
        optimizer, optimizer_bytes = optimizer + 2, optimizer_bytes + 8
    total, total_bytes = trainable + frozen + optimizer, trainable_bytes + frozen_bytes + optimizer_bytes
    out = [f'Model: "{model.name}"', rule, line(header), "=" * len(rule), *(line(r) for r in rows), "=" * len(rule),
           f" Total params: {total:,} ({_readable(total_bytes)})",
           f" Trainable params: {trainable:,} ({_readable(trainable_bytes)})",
           f" Non-trainable params: {frozen:,} ({_readable(frozen_bytes)})"]
    if slots:
        out.append(f" Optimizer params: {optimizer:,} ({_readable(optimizer_bytes)})")
    return "\n".join([*out, rule])
