"""Normalisations: BatchNormalization (inference), InstanceNormalization, LayerNormalization on any trailing axes,
GroupNormalization, RMSNormalization, LpNormalization, LRN, MeanVarianceNormalization; scales and biases are
trainable, running statistics constants."""

from __future__ import annotations

import numpy as np

from ._registry import Form, op
from ._runtime import F, T, tensor


def _channel(p, x, axis=1):
    """A (C,) parameter shaped to broadcast along ``axis`` of ``x``."""
    p = tensor(p, x)
    shape = tuple(p.shape[0] if i == axis else 1 for i in range(x.ndim))
    return F.reshape(p, shape)


def _vector(p, x) -> bool:
    """Whether ``p`` is a (C,) vector of x's last axis and dtype: what the fused layer norm takes."""
    return tuple(p.shape) == (x.shape[-1],) and p.dtype == x.dtype


def _normalise(x, axes, eps):
    mean = F.mean(x, axis=axes, keepdims=True)
    centred = F.subtract(x, mean)
    var = F.mean(F.multiply(centred, centred), axis=axes, keepdims=True)
    return F.divide(centred, T.unary(F.add(var, eps), "sqrt"))


@op("BatchNormalization", weights=(1, 2))
def batch_norm(view):
    view.only("epsilon", "momentum", "training_mode", "spatial")
    if int(view.attr("training_mode", 0)) or len([o for o in view.node.output if o]) > 1:
        raise view.error("training_mode=1 (batch statistics) is not supported; export the model in eval mode")
    eps = float(view.attr("epsilon", 1e-5))

    def run(x, scale, bias, mean, var):
        inv = T.unary(F.add(tensor(var, x), eps), "sqrt")
        y = F.divide(F.subtract(x, _channel(mean, x)), _channel(inv, x))
        return F.add(F.multiply(y, _channel(scale, x)), _channel(bias, x))

    return run


@op("InstanceNormalization", weights=(1, 2))
def instance_norm(view):
    eps = float(view.attr("epsilon", 1e-5))

    def run(x, scale, bias):
        y = _normalise(x, tuple(range(2, x.ndim)), eps)
        return F.add(F.multiply(y, _channel(scale, x)), _channel(bias, x))

    return run


@op("LayerNormalization", weights=(1, 2))
def layer_norm(view):
    view.only("axis", "epsilon", "stash_type")
    axis, eps = int(view.attr("axis", -1)), float(view.attr("epsilon", 1e-5))
    outputs = len(view.node.output)

    def run(x, scale, bias=None):
        if outputs == 1 and axis % x.ndim == x.ndim - 1 and _vector(scale, x) and (bias is None or _vector(bias, x)):
            return F.layer_norm(x, tensor(scale, x), None if bias is None else tensor(bias, x), eps)  # the layer's
        axes = tuple(range(axis % x.ndim, x.ndim))
        mean = F.mean(x, axis=axes, keepdims=True)
        centred = F.subtract(x, mean)
        inv = F.divide(1.0, T.unary(F.add(F.mean(F.multiply(centred, centred), axis=axes, keepdims=True), eps),
                                    "sqrt"))
        y = F.multiply(F.multiply(centred, inv), tensor(scale, x))
        y = y if bias is None else F.add(y, tensor(bias, x))
        return (y, mean, inv)[:outputs] if outputs > 1 else y

    rank = view.rank(0)
    return Form(run, keeps_batch=rank is None or axis % rank != 0)


@op("RMSNormalization", weights=(1,))
def rms_norm(view):
    view.only("axis", "epsilon", "stash_type")
    axis, eps = int(view.attr("axis", -1)), float(view.attr("epsilon", 1e-5))

    def run(x, scale):
        a = axis % x.ndim
        ms = F.mean(F.multiply(x, x), axis=tuple(range(a, x.ndim)), keepdims=True)
        return F.multiply(F.divide(x, T.unary(F.add(ms, eps), "sqrt")), tensor(scale, x))

    rank = view.rank(0)
    return Form(run, keeps_batch=rank is None or axis % rank != 0)


@op("GroupNormalization", weights=(1, 2))
def group_norm(view):
    view.only("epsilon", "num_groups", "stash_type")
    eps, groups = float(view.attr("epsilon", 1e-5)), int(view.attr("num_groups"))
    per_group = view.opset < 21  # opset 18: scale and bias per group; 21: per channel

    def run(x, scale, bias):
        n, c = x.shape[:2]
        rest = x.shape[2:]
        g = F.reshape(x, (n, groups, -1))
        y = F.reshape(_normalise(g, (2,), eps), x.shape)
        if per_group:
            scale = F.reshape(F.reshape(tensor(scale, x), (groups, 1)) * F.reshape(T.broadcast_to(
                tensor(_ones(x), x), (1, c // groups)), (1, c // groups)), (c,))
            bias = F.reshape(F.reshape(tensor(bias, x), (groups, 1)) * F.reshape(T.broadcast_to(
                tensor(_ones(x), x), (1, c // groups)), (1, c // groups)), (c,))
        del rest
        return F.add(F.multiply(y, _channel(scale, x)), _channel(bias, x))

    return run


def _ones(x):
    import numpy as np  # noqa: PLC0415

    return np.ones((1, 1), np.dtype(x.dtype))


@op("LpNormalization")
def lp_norm(view):
    axis, p = int(view.attr("axis", -1)), int(view.attr("p", 2))

    def run(x):
        a = axis % x.ndim
        norm = F.sum(T.unary(x, "abs"), axis=(a,), keepdims=True) if p == 1 else T.unary(
            F.sum(F.multiply(x, x), axis=(a,), keepdims=True), "sqrt")
        zero = T.compare(norm, 0.0, "equal")
        return T.where(zero, 0.0, F.divide(x, T.where(zero, 1.0, norm)))

    return run


@op("LRN")
def lrn(view):
    """Local response normalisation across channels: ``x / (bias + alpha / size * sum of x**2 over the channel
    window) ** beta``; the window sum is a product with a (C, C) band of ones (made once per channel count)."""
    view.only("alpha", "beta", "bias", "size")
    alpha, beta = float(view.attr("alpha", 1e-4)), float(view.attr("beta", 0.75))
    bias, size = float(view.attr("bias", 1.0)), int(view.attr("size"))
    bands: dict = {}

    def band(c, x):
        key = (c, x.dtype, id(x.xp))
        if key not in bands:
            rows = np.arange(c)[:, None]
            lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
            made = ((rows >= np.arange(c)[None, :] - lo) & (rows <= np.arange(c)[None, :] + hi)).astype(x.dtype)
            bands[key] = tensor(made, x)
        return bands[key]

    def run(x):
        if x.ndim < 3:
            raise view.error(f"inputs of rank {x.ndim} are not supported (N, C, ...)")
        c = x.shape[1]
        last = (0, *range(2, x.ndim), 1)
        moved = F.transpose(F.multiply(x, x), last)
        summed = F.reshape(F.matmul(F.reshape(moved, (-1, c)), band(c, x)), moved.shape)
        back = F.transpose(summed, tuple(np.argsort(last)))
        return F.divide(x, T.pow(F.add(F.multiply(back, alpha / size), bias), beta))

    return run


@op("MeanVarianceNormalization")
def mean_variance_normalization(view):
    """``(x - mean) / sqrt(variance)`` over ``axes`` (default N, H, W), ONNX's epsilon 1e-9 under the root."""
    view.only("axes")
    axes = tuple(view.attr("axes", [0, 2, 3]))
    return Form(lambda x: _normalise(x, tuple(a % x.ndim for a in axes), 1e-9),
                keeps_batch=all(a % max(view.rank(0) or 1, 1) != 0 for a in axes))
