"""More magmadnn layers -> ONNX nodes (the same form as :mod:`.exporters`, whose ``EXPORTERS`` they join): the other
merges, padding and cropping, RepeatVector, the preprocessing layers, the noise layers (identities at inference),
SeparableConv2D, SimpleRNN, the score attentions, Bidirectional and TimeDistributed."""

from __future__ import annotations

import numpy as np

from .. import layers as L
from ..layers.preprocessing import EPSILON
from .errors import OnnxExportError
from .exporters import EXPORTERS, _activation, _pads, dropout, recurrent_node, reversed_steps

__all__ = ["MORE"]


def _fold(op: str):
    def merge(b, layer, inputs, node):
        total = inputs[0]
        for i, other in enumerate(inputs[1:], start=1):
            total = b.node(op, [total, other], layer.name if i == len(inputs) - 1 else f"{layer.name}/{i}")
        return total

    return merge


def average(b, layer, inputs, node):
    total = b.node("Sum", inputs, f"{layer.name}/sum")
    return b.node("Mul", [total, b.constant(f"{layer.name}/scale", 1.0 / len(inputs), b.dtype)], layer.name)


def identity(b, layer, inputs, node):
    return b.node("Identity", inputs, layer.name)


def zero_padding2d(b, layer, inputs, node):
    (top, bottom), (left, right) = layer.padding
    pads = b.constant(f"{layer.name}/pads", [0, 0, top, left, 0, 0, bottom, right], np.int64)
    return b.node("Pad", [inputs[0], pads], layer.name, mode="constant")


def cropping2d(b, layer, inputs, node):
    (top, bottom), (left, right) = layer.cropping
    _, h, w = node.parents[0].shape
    starts = b.constant(f"{layer.name}/starts", [top, left], np.int64)
    ends = b.constant(f"{layer.name}/ends", [h - bottom, w - right], np.int64)
    return b.node("Slice", [inputs[0], starts, ends, b.constant(f"{layer.name}/axes", [2, 3], np.int64)], layer.name)


def repeat_vector(b, layer, inputs, node):
    row = b.node("Unsqueeze", [inputs[0], b.constant(f"{layer.name}/axis", [1], np.int64)], f"{layer.name}/row")
    return b.node("Tile", [row, b.constant(f"{layer.name}/repeats", [1, layer.n, 1], np.int64)], layer.name)


def rescaling(b, layer, inputs, node):
    y = b.node("Mul", [inputs[0], b.constant(f"{layer.name}/scale", layer.scale, b.dtype)], f"{layer.name}/scale")
    return b.node("Add", [y, b.constant(f"{layer.name}/offset", layer.offset, b.dtype)], layer.name)


def normalization(b, layer, inputs, node):
    """(x - mean) / max(sqrt(variance), eps), or its inverse, with the statistics as the layer holds them now."""
    mean, variance = (np.asarray(b.model.xp.to_numpy(a)) for a in layer._statistics())
    spread = np.clip(np.sqrt(variance), EPSILON, np.finfo(np.float32).max)
    mean_name = b.constant(f"{layer.name}/mean", mean, b.dtype)
    spread_name = b.constant(f"{layer.name}/spread", spread, b.dtype)
    if layer.invert:
        return b.node("Add", [b.node("Mul", [inputs[0], spread_name], f"{layer.name}/scale"), mean_name], layer.name)
    return b.node("Div", [b.node("Sub", [inputs[0], mean_name], f"{layer.name}/center"), spread_name], layer.name)


def separable_conv2d(b, layer, inputs, node):
    y = b.node("Conv", [inputs[0], b.weight(layer, layer.kernel_name)], f"{layer.name}/depthwise",
               kernel_shape=list(layer.kernel_size), strides=list(layer.strides), dilations=list(layer.dilation),
               pads=_pads(layer, node, layer.kernel_size, layer.dilation), group=int(layer.groups))
    weights = [b.weight(layer, "pointwise_kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    y = b.node("Conv", [y, *weights], layer.name if layer.activation is None else f"{layer.name}/pointwise",
               kernel_shape=[1, 1])
    return _activation(b, layer, y, layer.activation, rank=4)


def simple_rnn(b, layer, inputs, node):
    """tanh: ONNX's RNN operator; any other activation: the steps unrolled (h = act(x_t W + b + h U)), which needs
    a fixed number of steps."""
    arrays = {k: np.asarray(b.model.xp.to_numpy(p.data)) for k, p in layer.params.items()}
    units, name = layer.units, layer.name
    if layer.activation != "tanh":
        return _unrolled_rnn(b, layer, inputs, node)
    w = b.constant(f"{name}/W", arrays["kernel"].T[None], b.dtype)
    r = b.constant(f"{name}/R", arrays["recurrent_kernel"].T[None], b.dtype)
    bias = np.concatenate([arrays.get("bias", np.zeros(units)), np.zeros(units)])[None]
    return recurrent_node(b, layer, "RNN", inputs, [w, r, b.constant(f"{name}/B", bias, b.dtype)], {})


def _unrolled_rnn(b, layer, inputs, node) -> str | list:
    steps, name = node.parents[0].shape[0], layer.name
    x = reversed_steps(b, inputs[0], f"{name}/reversed") if layer.go_backwards else inputs[0]
    if steps is None:
        raise OnnxExportError(f"SimpleRNN layer {layer.name!r}: activation {layer.activation!r} has no form in "
                              "ONNX's RNN operator (tanh only), and its steps can be written one by one only for a "
                              "fixed number of steps; give the Input a fixed length or use activation='tanh'")
    projected = b.node("MatMul", [x, b.weight(layer, "kernel")], f"{name}/inputs")  # (N, T, units)
    if layer.use_bias:
        projected = b.node("Add", [projected, b.weight(layer, "bias")], f"{name}/biased")
    recurrent = b.weight(layer, "recurrent_kernel")
    h, outputs = (inputs[1] if len(inputs) > 1 else None), []
    for t in range(steps):
        z = b.node("Gather", [projected, b.constant(f"{name}/t{t}", t, np.int64)], f"{name}/x{t}", axis=1)
        if h is not None:
            z = b.node("Add", [z, b.node("MatMul", [h, recurrent], f"{name}/hU{t}")], f"{name}/z{t}")
        h = _activation(b, layer, z, layer.activation, name=f"{name}/h{t}")
        if h == z:  # linear: a name of its own for the step
            h = b.node("Identity", [z], f"{name}/h{t}")
        outputs.append(h)
    out_name = f"{name}/output" if layer.return_state else name
    if not layer.return_sequences:
        out = b.node("Identity", [h], out_name)
    else:
        axis = b.constant(f"{name}/axis", [1], np.int64)
        rows = [b.node("Unsqueeze", [o, axis], f"{name}/row{t}") for t, o in enumerate(outputs)]
        out = b.node("Concat", rows, out_name, axis=1) if len(rows) > 1 else b.node("Identity", rows, out_name)
    return [out, b.node("Identity", [h], f"{name}/state")] if layer.return_state else out


def score_attention(b, layer, inputs, node):
    """Attention (dot or concat scores) and AdditiveAttention: scores, the causal band, softmax, weights @ value."""
    query, value = inputs[0], inputs[1]
    key = inputs[2] if len(inputs) == 3 else value
    name = layer.name
    if isinstance(layer, L.Attention) and layer.score_mode == "dot":
        kt = b.node("Transpose", [key], f"{name}/key_t", perm=[0, 2, 1])
        scores = b.node("MatMul", [query, kt], f"{name}/scores")
        if layer.use_scale:
            scores = b.node("Mul", [scores, b.weight(layer, "scale")], f"{name}/scaled")
    else:  # tanh of every query_i + key_j (N, Tq, Tv, dim), summed over dim
        pairs = b.node("Add", [b.node("Unsqueeze", [query, b.constant(f"{name}/at2", [2], np.int64)], f"{name}/q"),
                               b.node("Unsqueeze", [key, b.constant(f"{name}/at1", [1], np.int64)], f"{name}/k")],
                       f"{name}/pairs")
        additive = isinstance(layer, L.AdditiveAttention)
        if layer.use_scale and not additive:
            pairs = b.node("Mul", [pairs, b.weight(layer, "scale")], f"{name}/pairs_scaled")
        pairs = b.node("Tanh", [pairs], f"{name}/tanh")
        if layer.use_scale and additive:
            pairs = b.node("Mul", [pairs, b.weight(layer, "scale")], f"{name}/tanh_scaled")
        scores = b.node("ReduceSum", [pairs, b.constant(f"{name}/last", [-1], np.int64)], f"{name}/scores",
                        keepdims=0)
        if not additive:
            scores = b.node("Mul", [scores, b.weight(layer, "concat_score_weight")], f"{name}/weighted")
    if layer.causal:
        tq, tv = node.parents[0].shape[0], node.parents[1].shape[0]
        if tq is None or tv is None:
            raise OnnxExportError(f"{type(layer).__name__} layer {name!r}: causal=True is written for a fixed "
                                  "number of query and value steps; give the Inputs fixed lengths")
        band = (np.tril(np.ones((tq, tv))) - 1.0) * 1e9  # Keras: scores - 1e9 where a key is hidden
        scores = b.node("Add", [scores, b.constant(f"{name}/causal", band, b.dtype)], f"{name}/masked")
    weights = b.node("Softmax", [scores], f"{name}/weights", axis=-1)
    if layer.return_attention_scores:
        return [b.node("MatMul", [weights, value], f"{name}/output"), weights]
    return b.node("MatMul", [weights, value], name)


def bidirectional(b, layer, inputs, node):
    """The forward layer and the backward one (its go_backwards reads the steps reversed; its sequence is put back
    in order), merged; with return_state the states of both follow."""
    name = layer.name
    forward = EXPORTERS[type(layer.forward_layer)](b, layer.forward_layer, inputs, node)
    backward = EXPORTERS[type(layer.backward_layer)](b, layer.backward_layer, inputs, node)
    (forward, *forward_states), (backward, *backward_states) = (
        (made if isinstance(made, list) else [made]) for made in (forward, backward))
    if layer.return_sequences:
        backward = reversed_steps(b, backward, f"{name}/backward_in_order")
    states = forward_states + backward_states
    if layer.merge_mode is None:
        return [forward, backward, *states]
    if layer.merge_mode == "concat":
        merged = b.node("Concat", [forward, backward], name, axis=-1)
    elif layer.merge_mode == "ave":
        total = b.node("Add", [forward, backward], f"{name}/sum")
        merged = b.node("Mul", [total, b.constant(f"{name}/half", 0.5, b.dtype)], name)
    else:
        merged = b.node({"sum": "Add", "mul": "Mul"}[layer.merge_mode], [forward, backward], name)
    return [merged, *states] if states else merged


class _Step:
    """The stand-in node of a TimeDistributed layer's wrapped layer: one step's shapes, the steps in the batch."""

    index, many, masked, batched = None, False, False, True

    def __init__(self, shape, parents=()):
        self.shape, self.parents = shape, list(parents)


def time_distributed(b, layer, inputs, node):
    inner, name = layer.layer, layer.name
    convert = EXPORTERS.get(type(inner))
    steps, step_shape = node.parents[0].shape[0], tuple(node.parents[0].shape[1:])
    if convert is None:
        raise OnnxExportError(f"TimeDistributed layer {name!r}: the wrapped layer {inner.name!r} "
                              f"({type(inner).__name__}) has no ONNX form")
    if steps is None or None in step_shape:
        raise OnnxExportError(f"TimeDistributed layer {name!r}: written with fixed steps and step shapes; give the "
                              f"Input a fixed shape (got {node.parents[0].shape})")
    folded = b.node("Reshape", [inputs[0], b.constant(f"{name}/fold", [-1, *step_shape], np.int64)], f"{name}/fold")
    y = convert(b, inner, [folded], _Step(tuple(node.shape[1:]), [_Step(step_shape)]))
    return b.node("Reshape", [y, b.constant(f"{name}/unfold", [-1, steps, *node.shape[1:]], np.int64)], name)


MORE = {
    L.Subtract: _fold("Sub"), L.Multiply: _fold("Mul"), L.Maximum: _fold("Max"), L.Minimum: _fold("Min"),
    L.Average: average, L.GaussianNoise: identity, L.SpatialDropout1D: dropout, L.SpatialDropout2D: dropout,
    L.ZeroPadding2D: zero_padding2d, L.Cropping2D: cropping2d, L.RepeatVector: repeat_vector,
    L.Rescaling: rescaling, L.Normalization: normalization, L.SeparableConv2D: separable_conv2d,
    L.SimpleRNN: simple_rnn, L.Attention: score_attention, L.AdditiveAttention: score_attention,
    L.Bidirectional: bidirectional, L.TimeDistributed: time_distributed,
}
EXPORTERS.update(MORE)
