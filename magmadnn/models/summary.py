"""``model.summary()``: a table of layers with output shapes and parameter counts."""

from __future__ import annotations

__all__ = ["summary_text"]


def _shape(shape) -> str:
    if isinstance(shape, list):  # a layer with several outputs (LSTM(return_state=True))
        return "[" + ", ".join(_shape(s) for s in shape) + "]"
    return "(" + ", ".join(["None", *(str(s) for s in shape)]) + ")"


def summary_text(model) -> str:
    """Layer (type), output shape (None = batch), parameter count and, for graph models, the inbound layers."""
    show_inbound = not model.is_sequential
    rows = []
    for layer in model.layers:
        inbound = ", ".join(sorted({p.layer.name for node in model.nodes_of(layer) for p in node.parents}))
        row = [f"{layer.name} ({type(layer).__name__})", _shape(layer.output_shape),
               f"{layer.count_params() + layer.count_state():,}"]
        rows.append(row + [inbound] if show_inbound else row)
    header = ["Layer (type)", "Output Shape", "Param #"] + (["Connected to"] if show_inbound else [])
    widths = [max(len(r[i]) for r in [header, *rows]) + 2 for i in range(len(header))]
    rule = "-" * sum(widths)

    def line(cells):
        return "".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    trainable = sum(layer.count_params() for layer in model.layers)
    frozen = sum(layer.count_state() for layer in model.layers)
    out = [f'Model: "{model.name}"', rule, line(header), "=" * len(rule), *(line(r) for r in rows), "=" * len(rule),
           f"Total params: {trainable + frozen:,}", f"Trainable params: {trainable:,}",
           f"Non-trainable params: {frozen:,}", rule]
    return "\n".join(out)
