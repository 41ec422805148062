"""magmadnn layers -> ONNX nodes: one function per layer class, ``f(builder, layer, inputs, node) -> output name``.

``inputs`` are the ONNX names of the layer's inputs, ``node`` its SymbolicTensor (per-sample shapes are known: only
the batch axis is dynamic). ``builder`` (:class:`.export.Builder`) adds nodes and weights.
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from .. import layers as L
from ..backend import geometry
from ._proto import onnx
from .errors import OnnxExportError

__all__ = ["EXPORTERS", "ACTIVATION_OPS", "exportable_layers"]

#: magmadnn activation kind -> (ONNX op, attributes given the layer's alpha, the opset it needs)
ACTIVATION_OPS = {
    "relu": ("Relu", lambda a: {}, 17), "sigmoid": ("Sigmoid", lambda a: {}, 17), "tanh": ("Tanh", lambda a: {}, 17),
    "leaky_relu": ("LeakyRelu", lambda a: {"alpha": a}, 17), "elu": ("Elu", lambda a: {"alpha": a}, 17),
    "gelu": ("Gelu", lambda a: {"approximate": "none"}, 20),
    "gelu_tanh": ("Gelu", lambda a: {"approximate": "tanh"}, 20),
    "softplus": ("Softplus", lambda a: {}, 17), "softsign": ("Softsign", lambda a: {}, 17),
    "selu": ("Selu", lambda a: {"alpha": geometry.SELU_ALPHA, "gamma": geometry.SELU_SCALE}, 17),
    "hard_sigmoid": ("HardSigmoid", lambda a: {"alpha": 1.0 / 6.0, "beta": 0.5}, 17),
    "exponential": ("Exp", lambda a: {}, 17), "silu": ("Sigmoid", lambda a: {}, 17),  # then Mul by x
    "softmax": ("Softmax", lambda a: {}, 17),
}


def _activation(b, layer, x: str, kind, alpha=None, name: str | None = None, rank: int = 2) -> str:
    if kind is None:
        return x
    if kind not in ACTIVATION_OPS:
        raise OnnxExportError(f"{type(layer).__name__} layer {layer.name!r}: activation {kind!r} has no ONNX form "
                              f"yet (written: {', '.join(sorted(ACTIVATION_OPS))})")
    op, attrs, opset = ACTIVATION_OPS[kind]
    b.need_opset(opset, f"{type(layer).__name__} layer {layer.name!r} (activation {kind})")
    if alpha is None:
        alpha = geometry.DEFAULT_ALPHA.get(kind, 0.0)
    if kind == "softmax":  # as apply_activation: the channels of NCHW, else the last axis
        return b.node(op, [x], name or f"{layer.name}/{kind}", axis=1 if rank == 4 else -1)
    if kind == "silu":  # x sigmoid(x): ONNX has no SiLU operator
        s = b.node("Sigmoid", [x], f"{name or layer.name + '/silu'}/sigmoid")
        return b.node("Mul", [x, s], name or f"{layer.name}/silu")
    return b.node(op, [x], name or f"{layer.name}/{kind}", **attrs(float(alpha)))


def dense(b, layer, inputs, node):
    weights = [b.weight(layer, "kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    if len(node.parents[0].shape) == 1:
        y = b.node("Gemm", [inputs[0], *weights], layer.name)
    else:  # Gemm takes matrices only: (N, ..., in) @ kernel (+ bias) on the last axis
        y = b.node("MatMul", [inputs[0], weights[0]], f"{layer.name}/matmul" if layer.use_bias else layer.name)
        if layer.use_bias:
            y = b.node("Add", [y, weights[1]], layer.name)
    return _activation(b, layer, y, layer.activation, rank=len(node.shape) + 1)


def activation(b, layer, inputs, node):
    if layer.kind is None:
        return b.node("Identity", inputs, layer.name)
    return _activation(b, layer, inputs[0], layer.kind, layer.alpha, name=layer.name, rank=len(node.shape) + 1)


def _pads(layer, node, kernel, dilation=(1, 1)):
    in_hw = node.parents[0].shape[1:]
    (t, bottom), (left, r) = geometry.resolve_padding(in_hw, kernel, layer.strides, layer.padding, dilation)
    return [t, left, bottom, r]


def conv2d(b, layer, inputs, node):
    weights = [b.weight(layer, getattr(layer, "kernel_name", "kernel"))]  # DepthwiseConv2D: depthwise_kernel
    weights += [b.weight(layer, "bias")] if layer.use_bias else []
    y = b.node("Conv", [inputs[0], *weights], layer.name, kernel_shape=list(layer.kernel_size),
               strides=list(layer.strides), dilations=list(layer.dilation),
               pads=_pads(layer, node, layer.kernel_size, layer.dilation), group=int(getattr(layer, "groups", 1)))
    return _activation(b, layer, y, layer.activation, rank=4)


def max_pool2d(b, layer, inputs, node):
    return b.node("MaxPool", inputs, layer.name, kernel_shape=list(layer.pool_size), strides=list(layer.strides),
                  pads=_pads(layer, node, layer.pool_size))


def avg_pool2d(b, layer, inputs, node):
    return b.node("AveragePool", inputs, layer.name, kernel_shape=list(layer.pool_size),
                  strides=list(layer.strides), pads=_pads(layer, node, layer.pool_size), count_include_pad=0)


def global_avg_pool2d(b, layer, inputs, node):
    y = b.node("GlobalAveragePool", inputs, f"{layer.name}/pool")
    return b.node("Flatten", [y], layer.name, axis=1)


def batch_norm(b, layer, inputs, node):
    rank = len(node.parents[0].shape) + 1
    if hasattr(layer, "_axis") and layer._axis(rank) != 1:
        raise OnnxExportError(f"{type(layer).__name__} layer {layer.name!r}: normalising axis "
                              f"{layer._axis(rank)} of a rank-{rank} input has no ONNX form; ONNX normalises axis 1")
    names = [b.weight(layer, n) for n in ("gamma", "beta", "running_mean", "running_var")]
    return b.node("BatchNormalization", [inputs[0], *names], layer.name, epsilon=float(layer.eps),
                  momentum=float(layer.momentum))


def dropout(b, layer, inputs, node):
    ratio = b.constant(f"{layer.name}/ratio", layer.rate)
    return b.node("Dropout", [inputs[0], ratio], layer.name)


def flatten(b, layer, inputs, node):
    return b.node("Flatten", inputs, layer.name, axis=1)


def add(b, layer, inputs, node):
    total = inputs[0]
    for i, other in enumerate(inputs[1:], start=1):
        total = b.node("Add", [total, other], layer.name if i == len(inputs) - 1 else f"{layer.name}/{i}")
    return total


def softmax(b, layer, inputs, node):
    return b.node("Softmax", inputs, layer.name, axis=int(layer.axis))


def log_softmax(b, layer, inputs, node):
    return b.node("LogSoftmax", inputs, layer.name, axis=int(layer.axis))


# ---------------------------------------------------------------------------------------------- the modern layers


def conv2d_transpose(b, layer, inputs, node):
    (t, bottom), (left, r) = F.conv_transpose2d_geometry(node.parents[0].shape[1:], layer.kernel_size, layer.strides,
                                                         layer.padding, layer.output_padding, layer.dilation)[0]
    weights = [b.weight(layer, "kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    y = b.node("ConvTranspose", [inputs[0], *weights], layer.name, kernel_shape=list(layer.kernel_size),
               strides=list(layer.strides), dilations=list(layer.dilation), pads=[t, left, bottom, r],
               output_padding=list(layer.output_padding))
    return _activation(b, layer, y, layer.activation, rank=4)


def global_max_pool2d(b, layer, inputs, node):
    y = b.node("GlobalMaxPool", inputs, f"{layer.name}/pool")
    return b.node("Flatten", [y], layer.name, axis=1)


def concatenate(b, layer, inputs, node):
    rank = len(node.shape) + 1
    return b.node("Concat", inputs, layer.name, axis=int(layer.axis) % rank)


def reshape(b, layer, inputs, node):
    shape = b.constant(f"{layer.name}/shape", [0, *layer.output_shape], np.int64)
    return b.node("Reshape", [inputs[0], shape], layer.name)


def permute(b, layer, inputs, node):
    return b.node("Transpose", inputs, layer.name, perm=[0, *(int(d) for d in layer.dims)])


def upsampling2d(b, layer, inputs, node):
    scales = b.constant(f"{layer.name}/scales", [1.0, 1.0, *layer.size], np.float32)
    return b.node("Resize", [inputs[0], "", scales], layer.name, mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _last_axis(layer, node):
    rank = len(node.parents[0].shape) + 1
    if int(layer.axis) % rank != rank - 1:
        raise OnnxExportError(f"{type(layer).__name__} layer {layer.name!r}: normalising axis {layer.axis} (not the "
                              "last) has no ONNX form; ONNX normalises from an axis to the end")


def layer_norm(b, layer, inputs, node):
    _last_axis(layer, node)
    return b.node("LayerNormalization", [inputs[0], b.weight(layer, "gamma"), b.weight(layer, "beta")], layer.name,
                  axis=-1, epsilon=float(layer.eps))


def rms_norm(b, layer, inputs, node):
    _last_axis(layer, node)
    b.need_opset(23, f"RMSNorm layer {layer.name!r}")
    return b.node("RMSNormalization", [inputs[0], b.weight(layer, "gamma")], layer.name, axis=-1,
                  epsilon=float(layer.eps))


def group_norm(b, layer, inputs, node):
    """GroupNormalization (opset 21: per-channel scale and bias); asked for an older opset, the form PyTorch writes
    there: Reshape (N, G, -1), InstanceNormalization, Reshape back, Mul and Add of (C, 1, ...) weights."""
    if b.target is None or b.target >= 21:
        b.need_opset(21, f"GroupNorm layer {layer.name!r}")
        return b.node("GroupNormalization", [inputs[0], b.weight(layer, "gamma"), b.weight(layer, "beta")],
                      layer.name, num_groups=int(layer.groups), epsilon=float(layer.eps))
    shape, groups = tuple(node.parents[0].shape), int(layer.groups)
    name = layer.name
    grouped = b.node("Reshape", [inputs[0], b.constant(f"{name}/groups", [0, groups, -1], np.int64)], f"{name}/group")
    normed = b.node("InstanceNormalization", [grouped, b.constant(f"{name}/ones", np.ones(groups), b.dtype),
                                              b.constant(f"{name}/zeros", np.zeros(groups), b.dtype)],
                    f"{name}/normalize", epsilon=float(layer.eps))
    back = b.node("Reshape", [normed, b.constant(f"{name}/shape", [0, *shape], np.int64)], f"{name}/ungroup")
    per_channel = (shape[0],) + (1,) * (len(shape) - 1)
    gamma = np.asarray(b.model.xp.to_numpy(layer.params["gamma"].data)).reshape(per_channel)
    beta = np.asarray(b.model.xp.to_numpy(layer.params["beta"].data)).reshape(per_channel)
    scaled = b.node("Mul", [back, b.constant(f"{name}/gamma", gamma, b.dtype)], f"{name}/scale")
    return b.node("Add", [scaled, b.constant(f"{name}/beta", beta, b.dtype)], name)


def embedding(b, layer, inputs, node):
    return b.node("Gather", [b.weight(layer, "embeddings"), inputs[0]], layer.name, axis=0)


_ONNX_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}  # magmadnn blocks in ONNX's order (i o f c / z r h)


def _onnx_gates(array, op: str, units: int):
    blocks = [array[..., i * units:(i + 1) * units] for i in range(len(_ONNX_GATES[op]))]
    return np.concatenate([blocks[i] for i in _ONNX_GATES[op]], axis=-1)


def reversed_steps(b, x: str, base: str) -> str:
    """``x`` (N, T, ...) with its steps in reverse order (Slice with step -1)."""
    const = lambda tag, v: b.constant(f"{base}/{tag}", [v], np.int64)  # noqa: E731
    return b.node("Slice", [x, const("start", -1), const("end", -(1 << 62)), const("axis", 1), const("step", -1)],
                  base)


def recurrent(b, layer, inputs, node):
    op = "LSTM" if isinstance(layer, L.LSTM) else "GRU"
    units = layer.units
    arrays = {k: np.asarray(b.model.xp.to_numpy(p.data)) for k, p in layer.params.items()}
    w = b.constant(f"{layer.name}/W", _onnx_gates(arrays["kernel"], op, units).T[None], b.dtype)
    r = b.constant(f"{layer.name}/R", _onnx_gates(arrays["recurrent_kernel"], op, units).T[None], b.dtype)
    second = arrays["recurrent_bias"] if op == "GRU" else np.zeros_like(arrays["bias"])
    bias = np.concatenate([_onnx_gates(arrays["bias"], op, units), _onnx_gates(second, op, units)])[None]
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    return recurrent_node(b, layer, op, inputs, [w, r, b.constant(f"{layer.name}/B", bias, b.dtype)], extra)


def recurrent_node(b, layer, op: str, inputs, weights, attributes) -> str | list:
    """ONNX's ``op`` (RNN, GRU, LSTM) running ``layer`` as Keras does: ``go_backwards`` reads the steps reversed
    (its sequence stays in that order), initial states (``inputs[1:]``) become initial_h / initial_c, and
    ``return_state`` gives ``[output, h]`` (+ ``c`` for LSTM) as the layer's several outputs."""
    name, states = layer.name, (2 if op == "LSTM" else 1)
    x = reversed_steps(b, inputs[0], f"{name}/reversed") if layer.go_backwards else inputs[0]
    x = b.node("Transpose", [x], f"{name}/time_major", perm=[1, 0, 2])
    axes0 = b.constant(f"{name}/axes0", [0], np.int64)
    initial = [b.node("Unsqueeze", [s, axes0], f"{name}/initial{k}") for k, s in enumerate(inputs[1:])]
    outputs = [b.unique(f"{name}/Y"), b.unique(f"{name}/Y_h")] + ([b.unique(f"{name}/Y_c")] if states == 2 else [])
    b.nodes.append(onnx().helper.make_node(op, [x, *weights, *([""] + initial if initial else [])],
                                           outputs[:2 + (states == 2 and layer.return_state)], name=f"{name}/{op}",
                                           hidden_size=layer.units, **attributes))
    out_name = f"{name}/output" if layer.return_state else name
    if layer.return_sequences:
        seq = b.node("Squeeze", [outputs[0], b.constant(f"{name}/axes1", [1], np.int64)], f"{name}/squeeze")
        out = b.node("Transpose", [seq], out_name, perm=[1, 0, 2])
    else:
        out = b.node("Squeeze", [outputs[1], axes0], out_name)
    if not layer.return_state:
        return out
    return [out, *(b.node("Squeeze", [y, axes0], f"{name}/state{k}") for k, y in enumerate(outputs[1:1 + states]))]


def _project(b, layer, x: str, which: str, base: str) -> str:
    y = b.node("MatMul", [x, b.weight(layer, f"{which}_kernel")], f"{base}/matmul" if layer.use_bias else base)
    return b.node("Add", [y, b.weight(layer, f"{which}_bias")], base) if layer.use_bias else y


def multi_head_attention(b, layer, inputs, node):
    shapes = [p.shape for p in node.parents]
    if len(shapes) > 1 and len(shapes[-1]) == 1:
        raise OnnxExportError(f"MultiHeadAttention layer {layer.name!r}: a key mask input has no ONNX export; "
                              "export the model without it (or with causal=True)")
    query, value = inputs[0], inputs[-1]
    key = inputs[1] if len(inputs) == 3 else value
    tq, tk = shapes[0][0], shapes[-1][0]
    name, heads = layer.name, layer.num_heads

    def split(x, which, size, steps):
        y = _project(b, layer, x, which, f"{name}/{which}")
        shape = b.constant(f"{name}/{which}_heads", [0, steps, heads, size], np.int64)
        return b.node("Transpose", [b.node("Reshape", [y, shape], f"{name}/{which}_split")], f"{name}/{which}_t",
                      perm=[0, 2, 1, 3])

    q, k, v = split(query, "query", layer.key_dim, tq), split(key, "key", layer.key_dim, tk), \
        split(value, "value", layer.value_dim, tk)
    kt = b.node("Transpose", [k], f"{name}/key_tt", perm=[0, 1, 3, 2])
    scale = b.constant(f"{name}/scale", 1.0 / np.sqrt(layer.key_dim), b.dtype)
    scores = b.node("Mul", [b.node("MatMul", [q, kt], f"{name}/scores"), scale], f"{name}/scaled")
    if layer.causal:
        mask = np.where(np.triu(np.ones((tq, tk), bool), 1), -np.inf, 0.0)
        scores = b.node("Add", [scores, b.constant(f"{name}/causal", mask, b.dtype)], f"{name}/masked")
    probs = b.node("Softmax", [scores], f"{name}/probs", axis=-1)
    o = b.node("Transpose", [b.node("MatMul", [probs, v], f"{name}/mix")], f"{name}/mix_t", perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [o, b.constant(f"{name}/merge", [0, tq, heads * layer.value_dim], np.int64)],
                    f"{name}/merged")
    return _project(b, layer, merged, "output", name)


def position_embedding(b, layer, inputs, node):
    return b.node("Add", [inputs[0], b.weight(layer, "embeddings")], layer.name)


# -- sequences (N, T, F): the 1-D ONNX operators work on (N, F, T), so each layer runs between two Transposes
def _to_channels(b, layer, x: str) -> str:
    return b.node("Transpose", [x], f"{layer.name}/to_channels", perm=[0, 2, 1])


def _to_steps(b, layer, x: str, name: str | None = None) -> str:
    return b.node("Transpose", [x], name or layer.name, perm=[0, 2, 1])


def conv1d(b, layer, inputs, node):
    weights = [b.weight(layer, "kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    pads = F.conv1d_padding(node.parents[0].shape[0], layer.kernel_size, layer.strides, layer.padding,
                            layer.dilation_rate)
    y = b.node("Conv", [_to_channels(b, layer, inputs[0]), *weights], f"{layer.name}/conv",
               kernel_shape=[layer.kernel_size], strides=[layer.strides], dilations=[layer.dilation_rate],
               pads=list(pads), group=layer.groups)
    y = _to_steps(b, layer, y, None if layer.activation is None else f"{layer.name}/steps")
    return _activation(b, layer, y, layer.activation, rank=3)


def pool1d(b, layer, inputs, node):
    pads = F.conv1d_padding(node.parents[0].shape[0], layer.pool_size, layer.strides, layer.padding)
    op, extra = ("MaxPool", {}) if isinstance(layer, L.MaxPooling1D) else ("AveragePool", {"count_include_pad": 0})
    y = b.node(op, [_to_channels(b, layer, inputs[0])], f"{layer.name}/pool", kernel_shape=[layer.pool_size],
               strides=[layer.strides], pads=list(pads), **extra)
    return _to_steps(b, layer, y)


def global_pool1d(b, layer, inputs, node):
    op = "GlobalMaxPool" if isinstance(layer, L.GlobalMaxPooling1D) else "GlobalAveragePool"
    y = b.node(op, [_to_channels(b, layer, inputs[0])], f"{layer.name}/pool")  # (N, F, 1)
    return _to_steps(b, layer, y) if layer.keepdims else b.node("Flatten", [y], layer.name, axis=1)


EXPORTERS = {
    L.Dense: dense, L.Activation: activation, L.Conv2D: conv2d, L.MaxPool2D: max_pool2d, L.AvgPool2D: avg_pool2d,
    L.GlobalAvgPool2D: global_avg_pool2d, L.BatchNorm: batch_norm, L.Dropout: dropout, L.Flatten: flatten,
    L.Add: add, L.Softmax: softmax, L.LogSoftmax: log_softmax,
}
EXPORTERS.update({  # the modern layers
    L.DepthwiseConv2D: conv2d, L.Conv2DTranspose: conv2d_transpose, L.GlobalMaxPool2D: global_max_pool2d,
    L.Concatenate: concatenate, L.Reshape: reshape, L.Permute: permute, L.UpSampling2D: upsampling2d,
    L.LayerNorm: layer_norm, L.RMSNorm: rms_norm, L.GroupNorm: group_norm, L.Embedding: embedding,
    L.LSTM: recurrent, L.GRU: recurrent, L.MultiHeadAttention: multi_head_attention,
    L.PositionEmbedding: position_embedding,
})
EXPORTERS[L.LeakyReLU] = activation
EXPORTERS.update({L.BatchNormalization: batch_norm, L.LayerNormalization: layer_norm,
                  L.GroupNormalization: group_norm})
EXPORTERS.update({L.Conv1D: conv1d, L.MaxPooling1D: pool1d, L.AveragePooling1D: pool1d,  # sequences (N, T, F)
                  L.GlobalAveragePooling1D: global_pool1d, L.GlobalMaxPooling1D: global_pool1d})


def exportable_layers() -> list[str]:
    return sorted(cls.__name__ for cls in EXPORTERS)
