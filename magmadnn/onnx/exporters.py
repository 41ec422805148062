"""magmadnn layers -> ONNX nodes: one function per layer class, ``f(builder, layer, inputs, node) -> output name``.

``inputs`` are the ONNX names of the layer's inputs, ``node`` its SymbolicTensor (per-sample shapes are known: only
the batch axis is dynamic). ``builder`` (:class:`.export.Builder`) adds nodes and weights.
"""

from __future__ import annotations

from .. import layers as L
from ..backend import geometry

__all__ = ["EXPORTERS", "ACTIVATION_OPS", "exportable_layers"]

#: magmadnn activation kind -> (ONNX op, attributes given the layer's alpha, the opset it needs)
ACTIVATION_OPS = {
    "relu": ("Relu", lambda a: {}, 17), "sigmoid": ("Sigmoid", lambda a: {}, 17), "tanh": ("Tanh", lambda a: {}, 17),
    "leaky_relu": ("LeakyRelu", lambda a: {"alpha": a}, 17), "elu": ("Elu", lambda a: {"alpha": a}, 17),
    "gelu": ("Gelu", lambda a: {"approximate": "tanh"}, 20), "softmax": ("Softmax", lambda a: {"axis": 1}, 17),
}


def _activation(b, layer, x: str, kind, alpha=None, name: str | None = None) -> str:
    if kind is None:
        return x
    op, attrs, opset = ACTIVATION_OPS[kind]
    b.need_opset(opset, f"{type(layer).__name__} layer {layer.name!r} (activation {kind})")
    if alpha is None:
        alpha = geometry.DEFAULT_ALPHA.get(kind, 0.0)
    return b.node(op, [x], name or f"{layer.name}/{kind}", **attrs(float(alpha)))


def dense(b, layer, inputs, node):
    weights = [b.weight(layer, "kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    y = b.node("Gemm", [inputs[0], *weights], layer.name)
    return _activation(b, layer, y, layer.activation)


def activation(b, layer, inputs, node):
    if layer.kind is None:
        return b.node("Identity", inputs, layer.name)
    return _activation(b, layer, inputs[0], layer.kind, layer.alpha, name=layer.name)


def _pads(layer, node, kernel, dilation=(1, 1)):
    in_hw = node.parents[0].shape[1:]
    (t, bottom), (left, r) = geometry.resolve_padding(in_hw, kernel, layer.strides, layer.padding, dilation)
    return [t, left, bottom, r]


def conv2d(b, layer, inputs, node):
    weights = [b.weight(layer, "kernel")] + ([b.weight(layer, "bias")] if layer.use_bias else [])
    y = b.node("Conv", [inputs[0], *weights], layer.name, kernel_shape=list(layer.kernel_size),
               strides=list(layer.strides), dilations=list(layer.dilation),
               pads=_pads(layer, node, layer.kernel_size, layer.dilation), group=int(getattr(layer, "groups", 1)))
    return _activation(b, layer, y, layer.activation)


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


EXPORTERS = {
    L.Dense: dense, L.Activation: activation, L.Conv2D: conv2d, L.MaxPool2D: max_pool2d, L.AvgPool2D: avg_pool2d,
    L.GlobalAvgPool2D: global_avg_pool2d, L.BatchNorm: batch_norm, L.Dropout: dropout, L.Flatten: flatten,
    L.Add: add, L.Softmax: softmax, L.LogSoftmax: log_softmax,
}


def exportable_layers() -> list[str]:
    return sorted(cls.__name__ for cls in EXPORTERS)
