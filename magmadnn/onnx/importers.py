"""ONNX operators -> magmadnn layers: one function per operator, ``f(graph, node) -> [output values]``.

``graph`` is the :class:`.graph.Graph` of the import: it gives a node's inputs (computed Values or constants), its
attributes (an attribute not listed with its default is an error), makes layers and reports what is not supported.
Only per-sample axes are mapped: the first axis of every computed tensor is the (dynamic) batch.
"""

from __future__ import annotations

import math

import numpy as np

from .. import layers as L
from ..backend import geometry
from . import attention, folded_attention
from ._proto import onnx
from .errors import UnsupportedOnnxError
from .import_state import BATCH, BatchZeros, Value, reshape_dims

__all__ = ["IMPORTERS", "supported_operators", "pool_geometry"]

#: ONNX activation op -> (magmadnn kind, attribute defaults)
_ACTIVATIONS = {"Relu": ("relu", {}), "Sigmoid": ("sigmoid", {}), "Tanh": ("tanh", {}),
                "LeakyRelu": ("leaky_relu", {"alpha": 0.01}), "Elu": ("elu", {"alpha": 1.0}),
                "Gelu": ("gelu", {"approximate": "none"}), "Softplus": ("softplus", {}), "Softsign": ("softsign", {}),
                "Exp": ("exponential", {}), "Selu": ("selu", {"alpha": 1.67326319217681884765625,
                                                             "gamma": 1.05070102214813232421875}),
                "HardSigmoid": ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5})}
#: The attributes magmadnn's kind computes, where an ONNX operator has others (compared to float32 precision).
_FIXED = {"selu": {"alpha": geometry.SELU_ALPHA, "gamma": geometry.SELU_SCALE},
          "hard_sigmoid": {"alpha": 1.0 / 6.0, "beta": 0.5}}
#: Kinds a layer's ``activation=`` takes, with the alpha it then applies (None: takes none).
_FUSABLE = {**dict.fromkeys(geometry.ACTIVATIONS), **geometry.DEFAULT_ALPHA}


def _activation_of(graph, node):
    """(kind, alpha) of an activation node, or an error for what magmadnn cannot compute."""
    kind, defaults = _ACTIVATIONS[node.op_type]
    attrs = graph.attrs(node, defaults)
    if kind == "gelu":
        if attrs["approximate"] not in ("none", "tanh"):
            raise graph.error(node, f"approximate={attrs['approximate']!r} is not a GELU form", "'none' or 'tanh'")
        kind = "gelu" if attrs["approximate"] == "none" else "gelu_tanh"
    for name, value in _FIXED.get(kind, {}).items():
        if not math.isclose(float(attrs[name]), value, rel_tol=1e-6):
            fixed = ", ".join(f"{k}={v:.6g}" for k, v in _FIXED[kind].items())
            raise graph.error(node, f"{name}={attrs[name]!r} is not supported", fixed)
    return kind, float(attrs.get("alpha", 0.0))


def _fuse_activation(graph, output_name: str, layer_kwargs: dict, allow_softmax: bool = False, rank: int = 2):
    """Fold the one activation node reading ``output_name`` into the layer about to be made (``activation=``);
    returns the ONNX name of the fused output (``output_name`` when nothing was folded)."""
    ops = tuple(_ACTIVATIONS) + (("Softmax",) if allow_softmax else ())
    reader = graph.sole_consumer(output_name, ops)
    if reader is None:
        return output_name
    if reader.op_type == "Softmax":
        axis = graph.attrs(reader, {"axis": -1 if graph.opset >= 13 else 1})["axis"]
        if axis % rank != rank - 1 or rank == 4:  # Dense's softmax: the last axis (but NCHW's channels)
            return output_name
        kind = "softmax"
    else:
        try:
            kind, alpha = _activation_of(graph, reader)
        except UnsupportedOnnxError:  # the node reports its own error when converted on its own
            return output_name
        default = _FUSABLE[kind]
        if default is not None and not math.isclose(alpha, default, rel_tol=1e-6):
            return output_name
    layer_kwargs["activation"] = kind
    graph.absorb(reader)
    return reader.output[0]


def _alias(graph, source: str, target: str, value: Value) -> Value:
    """Register ``value`` under the fused output name ``target`` too (when it differs from ``source``)."""
    if target != source:
        graph.values[target] = value
    return value


# ----------------------------------------------------------------------------------------------- dense


def _bias_vector(graph, node, bias, units: int, what: str):
    if bias.size == 1:
        return np.full((units,), float(bias.reshape(())))
    if bias.shape in ((units,), (1, units)):
        return bias.reshape(units)
    raise graph.error(node, f"{what} of shape {bias.shape} is not supported", f"shape ({units},) or (1, {units})")


def gemm(graph, node):
    attrs = graph.attrs(node, {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0})
    x = graph.value(node, 0)
    graph.rank(node, x, (2,), "(N, features)")
    if attrs["transA"]:
        raise graph.error(node, "transA=1 (the batch along the columns) is not supported", "transA=0")
    w = graph.constant(node, 1, "B, the weights")
    if w.ndim != 2:
        raise graph.error(node, f"weights of shape {w.shape} are not supported", "a 2-D B")
    w = (w.T if attrs["transB"] else w) * attrs["alpha"]
    if w.shape[0] != x.shape[0]:
        raise graph.error(node, f"B gives {w.shape[0]} input features, the input has {x.shape[0]}")
    units = w.shape[1]
    weights = {"kernel": w}
    if graph.has(node, 2):
        weights["bias"] = _bias_vector(graph, node, graph.constant(node, 2, "C, the bias"), units, "C") * attrs["beta"]
    kwargs = {}
    out = _fuse_activation(graph, node.output[0], kwargs, allow_softmax=True)
    value = graph.layer(node, L.Dense, x.tensor, units, use_bias="bias" in weights, weights=weights, **kwargs)
    return [_alias(graph, node.output[0], out, value)]


def matmul(graph, node):
    graph.attrs(node, {})
    second = graph.values.get(node.input[1]) if len(node.input) > 1 else None
    if isinstance(second, Value) and len(second.shape) == 3:
        return attention.product(graph, node)  # two activations of (heads, T, d): attention's scores or mix
    x = graph.value(node, 0, layouts=(None, "time_major"))  # per position: time-major stays time-major
    graph.rank(node, x, (2, 3, 4), "(N, ..., features) times a constant 2-D matrix")
    w = graph.constant(node, 1, "the weights")
    if w.ndim != 2 or w.shape[0] != x.shape[-1]:
        raise graph.error(node, f"weights of shape {w.shape} for an input of {x.shape[-1]} features",
                          f"a constant matrix ({x.shape[-1]}, units)")
    weights, out = {"kernel": w}, node.output[0]
    add = graph.sole_consumer(out, ("Add",))
    if add is not None:  # MatMul + Add(constant bias) is one Dense
        other = [name for name in add.input if name != out]
        bias = graph.values.get(other[0]) if len(other) == 1 else None
        if isinstance(bias, np.ndarray) and bias.shape in ((w.shape[1],), (1, w.shape[1])):
            weights["bias"] = bias.reshape(w.shape[1])
            graph.absorb(add)
            out = add.output[0]
    kwargs = {}
    fused = _fuse_activation(graph, out, kwargs, allow_softmax=True, rank=len(x.shape) + 1)
    value = graph.layer(node, L.Dense, graph.materialize(node, x), w.shape[1], use_bias="bias" in weights,
                        weights=weights, **kwargs)
    value.layout = x.layout
    _alias(graph, node.output[0], out, value)
    return [_alias(graph, node.output[0], fused, value)]


# ----------------------------------------------------------------------------------------------- convolution


def _pads(graph, node, attrs, in_hw, kernel, strides, dilations, ceil_mode=0):
    """((top, bottom), (left, right)) of a window op from auto_pad / pads (and ceil_mode, as extra bottom/right
    padding that is never counted)."""
    auto = attrs["auto_pad"]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for n, k, s, d in zip(in_hw, kernel, strides, dilations):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto == "SAME_UPPER" else (large, small))
        return tuple(pads)
    if auto == "VALID":
        return (0, 0), (0, 0)
    if auto != "NOTSET":
        raise graph.error(node, f"auto_pad={auto!r} is not supported", "NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    p = list(attrs["pads"] or [0, 0, 0, 0])
    if len(p) != 4:
        raise graph.error(node, f"pads {p} is not supported", "4 values for a 2-D window (t, l, b, r)")
    pads = [[p[0], p[2]], [p[1], p[3]]]
    if ceil_mode:
        for axis, (n, k, s) in enumerate(zip(in_hw, kernel, strides)):
            lo, hi = pads[axis]
            _, extra = pool_geometry(n, k, s, lo, hi, True)
            pads[axis][1] += extra
    return tuple(tuple(int(v) for v in pair) for pair in pads)


def pool_geometry(n: int, k: int, s: int, lo: int, hi: int, ceil: bool) -> tuple[int, int]:
    """(output size, extra padding at the end) of a pooling axis; with ``ceil`` the last window may run past the
    padded input but must start inside the input or its leading padding (as PyTorch and onnxruntime do)."""
    span = n + lo + hi - k
    if not ceil:
        return span // s + 1, 0
    out = -(-span // s) + 1
    if (out - 1) * s >= n + lo:
        out -= 1
    return out, max((out - 1) * s + k - (n + lo + hi), 0)


def _pad_arg(pads):
    (t, b), (l, r) = pads
    return (t, l) if (t, l) == (b, r) else pads


def _window(graph, node, attrs, kernel_from=None):
    kernel = tuple(attrs["kernel_shape"] or kernel_from or ())
    if len(kernel) != 2:
        raise graph.error(node, f"kernel_shape {list(kernel)} is not supported", "2-D windows (NCHW inputs)")
    strides = tuple(attrs["strides"] or (1, 1))
    dilations = tuple(attrs.get("dilations") or (1, 1))
    if len(strides) != 2 or len(dilations) != 2:
        raise graph.error(node, f"strides {list(strides)} / dilations {list(dilations)} are not supported",
                          "2 values each")
    return kernel, strides, dilations


_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
               "strides": None}


def conv(graph, node):
    attrs = graph.attrs(node, _CONV_ATTRS)
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    w = graph.constant(node, 1, "W, the kernel")
    if w.ndim != 4:
        raise graph.error(node, f"a kernel of shape {w.shape} is not supported", "a 4-D (K, C/group, R, S) kernel")
    kernel, strides, dilations = _window(graph, node, attrs, w.shape[2:])
    if kernel != w.shape[2:]:
        raise graph.error(node, f"kernel_shape {list(kernel)} differs from the kernel's {list(w.shape[2:])}")
    group = int(attrs["group"])
    if w.shape[1] * group != x.shape[0]:
        raise graph.error(node, f"a kernel of shape {w.shape} for an input of {x.shape[0]} channels")
    tensor = graph.materialize(node, x)
    pads = _pads(graph, node, attrs, x.shape[1:], kernel, strides, dilations)
    weights = {"kernel": w}
    if graph.has(node, 2):
        weights["bias"] = graph.constant(node, 2, "B, the bias").reshape(-1)
    kwargs = {}
    out = _fuse_activation(graph, node.output[0], kwargs)
    geometry = {"strides": strides, "padding": _pad_arg(pads), "dilation": dilations, "use_bias": "bias" in weights}
    if group > 1 and group == x.shape[0] and w.shape[1] == 1:  # one group per channel: depthwise
        weights["depthwise_kernel"] = weights.pop("kernel")
        value = graph.layer(node, L.DepthwiseConv2D, tensor, kernel, depth_multiplier=w.shape[0] // group,
                            weights=weights, **geometry, **kwargs)
    else:
        value = graph.layer(node, L.Conv2D, tensor, w.shape[0], kernel, groups=group, weights=weights, **geometry,
                            **kwargs)
    return [_alias(graph, node.output[0], out, value)]


def _pool(graph, node, layer_cls, attrs):
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    if len(node.output) > 1 and node.output[1] and graph.consumers.get(node.output[1]):
        raise graph.error(node, "the Indices output is not supported", "the pooled values only")
    kernel, strides, dilations = _window(graph, node, attrs)
    if dilations != (1, 1):
        raise graph.error(node, f"dilations {list(dilations)} are not supported", "dilations [1, 1]")
    pads = _pads(graph, node, attrs, x.shape[1:], kernel, strides, dilations, int(attrs["ceil_mode"]))
    if any(p >= k for pair, k in zip(pads, kernel) for p in pair):
        raise graph.error(node, f"padding {pads} (ceil_mode included) as large as the window {kernel} is not "
                                "supported", "padding smaller than the window on every side")
    if attrs.get("count_include_pad") and any(p for pair in pads for p in pair):
        raise graph.error(node, "count_include_pad=1 with padding is not supported",
                          "count_include_pad=0 (padding is never averaged), or no padding")
    if attrs.get("storage_order"):
        raise graph.error(node, "storage_order=1 is not supported", "storage_order=0")
    tensor = graph.materialize(node, x)
    return [graph.layer(node, layer_cls, tensor, kernel, strides=strides, padding=_pad_arg(pads))]


def max_pool(graph, node):
    attrs = graph.attrs(node, {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
                               "pads": None, "storage_order": 0, "strides": None})
    return _pool(graph, node, L.MaxPool2D, attrs)


def average_pool(graph, node):
    attrs = graph.attrs(node, {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0, "dilations": None,
                               "kernel_shape": None, "pads": None, "strides": None})
    return _pool(graph, node, L.AvgPool2D, attrs)


def global_average_pool(graph, node):
    graph.attrs(node, {})
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    value = graph.layer(node, L.GlobalAvgPool2D, graph.materialize(node, x))
    return [Value(value.tensor, (x.shape[0], 1, 1))]


# ----------------------------------------------------------------------------------------------- normalization


def batch_normalization(graph, node):
    attrs = graph.attrs(node, {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "spatial": 1})
    if attrs["training_mode"] or not attrs["spatial"] or any(graph.consumers.get(o) for o in node.output[1:] if o):
        raise graph.error(node, "training_mode=1, spatial=0 or the running-statistics outputs are not supported",
                          "inference form (one output)")
    x = graph.value(node, 0)
    graph.rank(node, x, (2, 4), "(N, F) or (N, C, H, W)")
    names = ("gamma", "beta", "running_mean", "running_var")
    weights = {name: graph.constant(node, i + 1, name).reshape(-1) for i, name in enumerate(names)}
    return [graph.layer(node, L.BatchNorm, graph.materialize(node, x), momentum=float(attrs["momentum"]),
                        eps=float(attrs["epsilon"]), weights=weights)]


# ----------------------------------------------------------------------------------------------- element-wise


def activation(graph, node):
    kind, alpha = _activation_of(graph, node)
    x = graph.value(node, 0)
    value = graph.layer(node, L.Activation, x.tensor, kind, alpha=alpha if kind in ("leaky_relu", "elu") else None)
    return [Value(value.tensor, x.shape)]


def _softmax(layer_cls, graph, node):
    axis = graph.attrs(node, {"axis": -1 if graph.opset >= 13 else 1})["axis"]
    x = graph.value(node, 0)
    rank = len(x.shape) + 1
    if not -rank <= axis < rank or axis % rank == 0:
        raise graph.error(node, f"axis={axis} (the batch axis) is not supported", "any axis but the batch axis")
    if graph.opset < 13 and axis % rank != rank - 1:
        raise graph.error(node, f"axis={axis} with opset {graph.opset} (softmax over all axes from it) is not "
                                "supported", "the last axis, or opset 13+")
    return [graph.layer(node, layer_cls, graph.materialize(node, x), axis=axis % rank)]


def softmax(graph, node):
    return _softmax(L.Softmax, graph, node)


def log_softmax(graph, node):
    return _softmax(L.LogSoftmax, graph, node)


def add(graph, node):
    graph.attrs(node, {})
    constants = [n for n in node.input if isinstance(graph.values.get(n), np.ndarray)]
    if node.op_type == "Add" and len(node.input) == 2 and len(constants) == 1:  # x + a learned (time, features)
        x = graph.value(node, 1 - list(node.input).index(constants[0]))
        table = graph.values[constants[0]]
        if len(x.shape) == 2 and table.shape in (x.shape, (1, *x.shape)):
            return [graph.layer(node, L.PositionEmbedding, graph.materialize(node, x),
                                weights={"embeddings": table.reshape(x.shape)})]
    if len(node.input) < 2 or not all(isinstance(graph.values.get(n), Value) for n in node.input):
        raise graph.error(node, "adding a constant is not supported", "sums of computed tensors of one shape (a "
                          "constant only as the bias of a MatMul)")
    values = [graph.value(node, i) for i in range(len(node.input))]
    if any(v.shape != values[0].shape for v in values):
        shapes = ", ".join(str(v.shape) for v in values)
        raise graph.error(node, f"broadcasting per-sample shapes {shapes} is not supported", "inputs of one shape")
    tensors = [v.tensor for v in values]
    if any(t.shape != tensors[0].shape for t in tensors):
        tensors = [graph.materialize(node, v) for v in values]
    out = graph.layer(node, L.Add, tensors)
    return [Value(out.tensor, values[0].shape)]


def identity(graph, node):
    graph.attrs(node, {})
    return [graph.values[node.input[0]]]


def dropout(graph, node):
    attrs = graph.attrs(node, {"seed": 0, "ratio": 0.5, "is_test": 0})
    if len(node.output) > 1 and node.output[1] and graph.consumers.get(node.output[1]):
        raise graph.error(node, "the mask output is not supported", "the dropped-out values only")
    rate = float(graph.constant(node, 1, "ratio").reshape(())) if graph.has(node, 1) else float(attrs["ratio"])
    if graph.has(node, 2) and bool(graph.constant(node, 2, "training_mode").reshape(())):
        raise graph.error(node, "training_mode=true is not supported", "inference form")
    x = graph.value(node, 0)
    if rate == 0.0:
        return [x]
    value = graph.layer(node, L.Dropout, x.tensor, rate)
    return [Value(value.tensor, x.shape)]


# ----------------------------------------------------------------------------------------------- shapes


def _flat(graph, node, x: Value) -> Value:
    size = math.prod(x.shape)
    if len(x.tensor.shape) == 1:
        return Value(x.tensor, (size,))
    return graph.layer(node, L.Flatten, x.tensor)


def flatten(graph, node):
    axis = graph.attrs(node, {"axis": 1})["axis"]
    x = graph.value(node, 0)
    if axis % (len(x.shape) + 1) != 1:
        raise graph.error(node, f"axis={axis} (which merges the batch axis with others) is not supported", "axis=1")
    return [_flat(graph, node, x)]


def reshape(graph, node):
    found = graph.values.get(node.input[0])
    if isinstance(found, Value) and found.layout == "sequence_swapped":  # (T, N, 1, H) -> (T, N, H)
        graph.attrs(node, {"allowzero": 0})
        target = graph.constant(node, 1, "shape")
        if not _merges_unit_axis(graph, node, found.shape[0]):
            raise graph.error(node, f"shape {list(np.ravel(target))} of a recurrent output (time, batch, 1, units) "
                                    "is not supported", "(time, batch, units)")
        return [Value(found.tensor, found.shape, layout="time_major")]
    if isinstance(found, Value) and found.layout == "time_major":  # nn.MultiheadAttention's packed q/k/v
        return folded_attention.unfold(graph, node, found)
    x = graph.value(node, 0)
    dims = reshape_dims(graph, node, x)
    if dims == x.shape or dims == tuple(x.tensor.shape):
        return [Value(x.tensor, dims)]
    if len(dims) == 1:
        return [_flat(graph, node, x)]
    return [graph.layer(node, L.Reshape, x.tensor, dims)]


def shape(graph, node):
    attrs = graph.attrs(node, {"start": 0, "end": None})
    x = graph.value(node, 0, layouts=(None, "time_major"))
    full = np.array([BATCH, *x.shape] if x.layout is None else [x.shape[0], BATCH, *x.shape[1:]], np.int64)
    return [full[attrs["start"]:attrs["end"]]]


def reduce_mean(graph, node):
    """The mean over non-batch axes: GlobalAvgPool2D over (H, W) of (N, C, H, W); any other axes moved last
    (Permute) and merged into one (Reshape) first, e.g. the mean over the tokens of (N, T, F)."""
    attrs = graph.attrs(node, {"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
    x = graph.value(node, 0)
    axes = attrs["axes"] if graph.opset < 18 or not graph.has(node, 1) else graph.constant(node, 1, "axes")
    rank = len(x.shape) + 1
    reduced = sorted({int(a) % rank for a in np.ravel(axes)}) if axes is not None and -rank <= min(
        np.ravel(axes), default=0) and max(np.ravel(axes), default=0) < rank else None
    if not reduced or 0 in reduced or len(reduced) == rank - 1:
        raise graph.error(node, f"a mean over axes {None if axes is None else list(np.ravel(axes))} of a rank-{rank}"
                                " input is not supported", "a mean over some (not all) axes other than the batch axis")
    kept = [a for a in range(1, rank) if a not in reduced]
    shape = tuple(1 if a in reduced else x.shape[a - 1] for a in range(1, rank)) if attrs["keepdims"] else \
        tuple(x.shape[a - 1] for a in kept)
    source = graph.materialize(node, x)
    if not (rank == 4 and reduced == [2, 3]):
        if kept + reduced != list(range(1, rank)):
            source = graph.layer(node, L.Permute, source, tuple(kept + reduced), name=f"{graph._name(node)}_permute"
                                 ).tensor
        groups = (math.prod(x.shape[a - 1] for a in kept), math.prod(x.shape[a - 1] for a in reduced), 1)
        source = graph.layer(node, L.Reshape, source, groups, name=f"{graph._name(node)}_reshape").tensor
    value = graph.layer(node, L.GlobalAvgPool2D, source)
    return [Value(value.tensor, shape)]


def _axes(graph, node, what: str = "axes"):
    """The ``axes`` of Squeeze/Unsqueeze: an attribute before opset 13, an input since."""
    attrs = graph.attrs(node, {"axes": None})
    if graph.opset >= 13 and graph.has(node, 1):
        return [int(a) for a in graph.constant(node, 1, what).reshape(-1)]
    if attrs["axes"] is None:
        raise graph.error(node, "squeezing every unit axis (no axes) is not supported", "explicit axes")
    return [int(a) for a in attrs["axes"]]


def transpose(graph, node):
    x = graph.value(node, 0, layouts=(None, "time_major", "sequence"))
    rank = len(x.shape) + 1
    perm = [int(p) for p in graph.attrs(node, {"perm": None})["perm"] or reversed(range(rank))]
    if x.layout == "sequence":  # the dynamo exporter's Y (T, 1, N, H) -> (T, N, 1, H), then Reshape to (T, N, H)
        if perm != [0, 2, 1, 3]:
            raise graph.error(node, f"perm {perm} of a recurrent output (time, 1, batch, units) is not supported",
                              "[0, 2, 1, 3] followed by a Reshape to (time, batch, units)")
        return [Value(x.tensor, x.shape, layout="sequence_swapped")]
    if rank == 3 and perm == [1, 0, 2]:  # batch first <-> time first, around recurrent operators
        return [Value(x.tensor, x.shape, layout=None if x.layout == "time_major" else "time_major")]
    if x.layout is not None:
        raise graph.error(node, f"perm {perm} of a (time, batch, features) tensor is not supported", "[1, 0, 2]")
    if perm == list(range(rank)):
        return [x]
    if perm[0] != 0:
        raise graph.error(node, f"perm {perm} moves the batch axis", "permutations that keep axis 0 first")
    return [_permute(graph, node, x, perm)]


def _permute(graph, node, x, perm):
    return graph.layer(node, L.Permute, graph.materialize(node, x), tuple(perm[1:]))


def squeeze(graph, node):
    x = graph.value(node, 0, layouts=(None, "sequence", "state"))
    axes = sorted(a % (len(x.shape) + 1 + (x.layout is not None)) for a in _axes(graph, node))
    if x.layout == "sequence" and axes == [1]:  # Y (T, 1, N, H) -> (T, N, H)
        return [Value(x.tensor, x.shape, layout="time_major")]
    if x.layout == "state" and axes == [0]:  # Y_h (1, N, H) -> (N, H)
        return [Value(x.tensor, x.shape)]
    if x.layout is not None or 0 in axes or any(x.shape[a - 1] != 1 for a in axes):
        raise graph.error(node, f"squeezing axes {axes} is not supported",
                          "unit axes other than the batch axis, or the direction axis of a recurrent output")
    return [Value(x.tensor, tuple(d for i, d in enumerate(x.shape, start=1) if i not in axes))]


def unsqueeze(graph, node):
    x = graph.value(node, 0)
    rank = len(x.shape) + 1 + len(_axes(graph, node))
    axes = sorted(a % rank for a in _axes(graph, node))
    if 0 in axes:
        raise graph.error(node, "inserting an axis before the batch axis is not supported", "axes >= 1")
    shape = list(x.shape)
    for a in axes:
        shape.insert(a - 1, 1)
    return [Value(x.tensor, tuple(shape))]


def gather(graph, node):
    axis = graph.attrs(node, {"axis": 0})["axis"]
    data = graph.values.get(node.input[0])
    if isinstance(data, Value) and data.layout == "state" and axis == 0:  # h[-1] of a final state (1, N, H)
        index = graph.constant(node, 1, "indices")
        if index.shape == () and int(index) in (0, -1):
            return [Value(data.tensor, data.shape)]
    return [_gather_rows(graph, node, data, axis)]


def _gather_rows(graph, node, data, axis):
    if not isinstance(data, np.ndarray) or data.ndim != 2 or axis != 0:
        raise graph.error(node, "gathering from a computed tensor, along axis != 0 or from a table that is not 2-D "
                                "is not supported", "rows of a constant 2-D table (an embedding) by integer ids; "
                          "the last layer of a recurrent final state")
    ids = graph.value(node, 1)
    return graph.layer(node, L.Embedding, ids.tensor, data.shape[0], data.shape[1], weights={"embeddings": data})


_CONSTANT_KINDS = {"value_int": np.int64, "value_ints": np.int64, "value_float": np.float32,
                   "value_floats": np.float32}


def constant(graph, node):
    attrs = graph.attrs(node, {"value": None, **dict.fromkeys(_CONSTANT_KINDS)})
    given = [key for key, found in attrs.items() if found is not None]
    if len(given) != 1:
        raise graph.error(node, "a constant with a tensor, string or sparse value is not supported",
                          "value (a tensor), value_int(s), value_float(s)")
    if given[0] != "value":
        return [np.asarray(attrs[given[0]], dtype=_CONSTANT_KINDS[given[0]])]
    return [np.asarray(onnx().numpy_helper.to_array(attrs["value"]))]


# ---------------------------------------------------------------------------------- the modern layers' operators:
# the layers of the modern-networks issue (groups, transposed convolution, normalisations, embeddings, shapes)


def conv_transpose(graph, node):
    attrs = graph.attrs(node, {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
                               "output_padding": None, "output_shape": None, "pads": None, "strides": None})
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    w = graph.constant(node, 1, "W, the kernel")
    if w.ndim != 4 or w.shape[0] != x.shape[0]:
        raise graph.error(node, f"a kernel of shape {w.shape} for an input of {x.shape[0]} channels",
                          f"a 4-D ({x.shape[0]}, M, R, S) kernel")
    kernel, strides, dilations = _window(graph, node, attrs, w.shape[2:])
    if int(attrs["group"]) != 1 or attrs["output_shape"] is not None:
        raise graph.error(node, "group != 1 or an output_shape attribute is not supported",
                          "group=1 with pads / output_padding")
    if attrs["auto_pad"] not in ("NOTSET", "VALID"):
        raise graph.error(node, f"auto_pad={attrs['auto_pad']!r} is not supported", "NOTSET or VALID")
    p = list(attrs["pads"] or [0, 0, 0, 0]) if attrs["auto_pad"] == "NOTSET" else [0, 0, 0, 0]
    if (p[0], p[1]) != (p[2], p[3]):
        raise graph.error(node, f"asymmetric pads {p} are not supported", "pads with begin == end per axis")
    output_padding = tuple(attrs["output_padding"] or (0, 0))
    weights = {"kernel": w}
    if graph.has(node, 2):
        weights["bias"] = graph.constant(node, 2, "B, the bias").reshape(-1)
    kwargs = {}
    out = _fuse_activation(graph, node.output[0], kwargs)
    value = graph.layer(node, L.Conv2DTranspose, graph.materialize(node, x), w.shape[1], kernel, strides=strides,
                        padding=(p[0], p[1]), output_padding=output_padding, dilation=dilations,
                        use_bias="bias" in weights, weights=weights, **kwargs)
    return [_alias(graph, node.output[0], out, value)]


def global_max_pool(graph, node):
    graph.attrs(node, {})
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    value = graph.layer(node, L.GlobalMaxPool2D, graph.materialize(node, x))
    return [Value(value.tensor, (x.shape[0], 1, 1))]


def _full_axis(graph, node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank or axis % rank == 0:
        raise graph.error(node, f"axis={axis} (the batch axis, or outside rank {rank}) is not supported",
                          "any axis but the batch axis")
    return axis % rank


def concat(graph, node):
    axis = graph.attrs(node, {"axis": None})["axis"]
    if not all(isinstance(graph.values.get(n), Value) for n in node.input):
        raise graph.error(node, "joining constants is not supported", "computed tensors only")
    values = [graph.value(node, i) for i in range(len(node.input))]
    axis = _full_axis(graph, node, axis, len(values[0].shape) + 1)
    tensors = [graph.materialize(node, v) for v in values]
    if len(tensors) == 1:
        return [values[0]]
    return [graph.layer(node, L.Concatenate, tensors, axis=axis)]


_COORDINATES = {
    "half_pixel": lambda i, s, n: (i + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda i, s, n: (i + 0.5) / s - 0.5 if n * s > 1 else 0.0,
    "asymmetric": lambda i, s, n: i / s,
    "tf_half_pixel_for_nearest": lambda i, s, n: (i + 0.5) / s,
    "align_corners": lambda i, s, n: i * (n - 1) / (n * s - 1) if n * s > 1 else 0.0,
}
_ROUNDING = {
    "round_prefer_floor": lambda v: math.ceil(v - 0.5), "round_prefer_ceil": lambda v: math.floor(v + 0.5),
    "floor": math.floor, "ceil": math.ceil,
}


def resize(graph, node):
    attrs = graph.attrs(node, {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                               "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75, "exclude_outside": 0,
                               "extrapolation_value": 0.0, "antialias": 0, "axes": None,
                               "keep_aspect_ratio_policy": "stretch"})
    x = graph.value(node, 0)
    graph.rank(node, x, (4,), "(N, C, H, W)")
    mode, where, rounding = attrs["mode"], attrs["coordinate_transformation_mode"], attrs["nearest_mode"]
    supported = "mode='nearest' with integer scales [1, 1, sh, sw] (pixel repetition)"
    if mode != "nearest" or attrs["axes"] is not None or where not in _COORDINATES or not graph.has(node, 2):
        raise graph.error(node, f"mode={mode!r}, coordinate_transformation_mode={where!r} or sizes instead of "
                                "scales is not supported", supported)
    scales = [float(s) for s in graph.constant(node, 2, "scales").reshape(-1)]
    if len(scales) != 4 or scales[:2] != [1.0, 1.0] or any(s < 1 or s != int(s) for s in scales[2:]):
        raise graph.error(node, f"scales {scales} are not supported", supported)
    size = (int(scales[2]), int(scales[3]))
    for n, s in zip(x.shape[1:], size):  # the source pixel of every output pixel must be i // s
        source = [min(max(_ROUNDING[rounding](_COORDINATES[where](i, s, n)), 0), n - 1) for i in range(n * s)]
        if source != [i // s for i in range(n * s)]:
            raise graph.error(node, f"coordinate_transformation_mode={where!r} with nearest_mode={rounding!r} does "
                                    "not repeat pixels", supported + ", e.g. asymmetric + floor")
    return [graph.layer(node, L.UpSampling2D, graph.materialize(node, x), size)]


def layer_normalization(graph, node):
    attrs = graph.attrs(node, {"axis": -1, "epsilon": 1e-5, "stash_type": 1})
    x = graph.value(node, 0)
    rank = len(x.shape) + 1
    if _full_axis(graph, node, attrs["axis"], rank) != rank - 1 or any(graph.consumers.get(o) for o in node.output[1:]
                                                                        if o):
        raise graph.error(node, f"normalising from axis {attrs['axis']} of a rank-{rank} input (or the mean / "
                                "inverse deviation outputs) is not supported", "axis=-1 (the last axis), one output")
    gamma = graph.constant(node, 1, "Scale").reshape(-1)
    beta = graph.constant(node, 2, "B").reshape(-1) if graph.has(node, 2) else np.zeros_like(gamma)
    return [graph.layer(node, L.LayerNorm, graph.materialize(node, x), axis=-1, eps=float(attrs["epsilon"]),
                        weights={"gamma": gamma, "beta": beta})]


def rms_normalization(graph, node):
    attrs = graph.attrs(node, {"axis": -1, "epsilon": 1e-5, "stash_type": 1})
    x = graph.value(node, 0)
    rank = len(x.shape) + 1
    if _full_axis(graph, node, attrs["axis"], rank) != rank - 1:
        raise graph.error(node, f"normalising from axis {attrs['axis']} of a rank-{rank} input is not supported",
                          "axis=-1 (the last axis)")
    gamma = graph.constant(node, 1, "scale").reshape(-1)
    return [graph.layer(node, L.RMSNorm, graph.materialize(node, x), eps=float(attrs["epsilon"]), axis=-1,
                        weights={"gamma": gamma})]


def group_normalization(graph, node):
    attrs = graph.attrs(node, {"epsilon": 1e-5, "num_groups": None, "stash_type": 1})
    x = graph.value(node, 0)
    graph.rank(node, x, (3, 4, 5), "(N, C, ...)")
    groups, channels = int(attrs["num_groups"]), x.shape[0]
    scale, bias = graph.constant(node, 1, "scale").reshape(-1), graph.constant(node, 2, "bias").reshape(-1)
    if graph.opset < 21 and scale.shape == bias.shape == (groups,) and channels % groups == 0:
        scale, bias = np.repeat(scale, channels // groups), np.repeat(bias, channels // groups)  # opset 18: per group
    if scale.shape != (channels,) or bias.shape != (channels,):
        raise graph.error(node, f"scale and bias of shape {scale.shape} are not supported",
                          f"one value per group ({groups},) below opset 21, per channel ({channels},) from 21")
    return [graph.layer(node, L.GroupNorm, graph.materialize(node, x), groups, eps=float(attrs["epsilon"]),
                        weights={"gamma": scale, "beta": bias})]



def _per_channel(graph, node, source: Value):
    """The constant operand of a Mul/Add of ``source`` (N, C, ...) holding one value per channel, as (C,), or None
    (it must broadcast along the channel axis only: (C, 1, 1), (1, C, 1, 1), ...)."""
    rank = len(source.shape) + 1
    for i in (0, 1):
        found = graph.values.get(node.input[i])
        if isinstance(found, np.ndarray) and 0 < found.ndim <= rank:
            padded = (1,) * (rank - found.ndim) + found.shape
            if padded[1] == source.shape[0] and all(d == 1 for j, d in enumerate(padded) if j != 1):
                return found.reshape(-1).astype(np.float64)
    return None


def instance_normalization(graph, node):
    """InstanceNormalization of (N, C, ...) as GroupNorm with one group a channel; PyTorch's GroupNorm below opset
    18 (and from the dynamo exporter) as one GroupNorm: Reshape (N, C, ...) -> (N, G, -1), InstanceNormalization,
    Reshape back, Mul and Add of per-channel (C, 1, 1) weights."""
    eps = float(graph.attrs(node, {"epsilon": 1e-5})["epsilon"])
    inner = graph.value(node, 0)
    scale, bias = graph.constant(node, 1, "scale").reshape(-1), graph.constant(node, 2, "B").reshape(-1)
    before = graph.producers.get(node.input[0])
    source = graph.values.get(before.input[0]) if before is not None and before.op_type == "Reshape" else None
    back = graph.sole_consumer(node.output[0], ("Reshape",))
    if not (isinstance(source, Value) and source.layout is None and len(source.shape) >= 2 and back is not None
            and len(inner.shape) == 2 and source.shape[0] % inner.shape[0] == 0 and _restores(graph, back, source)):
        graph.rank(node, inner, (3, 4, 5), "(N, C, ...), or PyTorch's GroupNorm pattern (Reshape to (N, G, -1), "
                                           "InstanceNormalization, Reshape back, Mul, Add)")
        return [graph.layer(node, L.GroupNorm, graph.materialize(node, inner), inner.shape[0], eps=eps,
                            weights={"gamma": scale, "beta": bias})]
    groups, channels = inner.shape[0], source.shape[0]
    gamma, beta = np.repeat(scale, channels // groups), np.repeat(bias, channels // groups)
    graph.absorb(back)
    out = back.output[0]
    mul = graph.sole_consumer(out, ("Mul",))
    weight = None if mul is None else _per_channel(graph, mul, source)
    if weight is not None:
        gamma, beta, out = gamma * weight, beta * weight, mul.output[0]
        graph.absorb(mul)
    add = graph.sole_consumer(out, ("Add",))
    shift = None if add is None else _per_channel(graph, add, source)
    if shift is not None:
        beta, out = beta + shift, add.output[0]
        graph.absorb(add)
    value = graph.layer(node, L.GroupNorm, graph.materialize(node, source), groups, eps=eps,
                        weights={"gamma": gamma, "beta": beta})
    graph.values[out] = value
    return [None]


def _restores(graph, back, source: Value) -> bool:
    """Whether Reshape ``back`` gives its input ``source``'s shape again (a constant shape, or Shape of it)."""
    target = graph.values.get(back.input[1]) if len(back.input) > 1 else None
    if isinstance(target, np.ndarray):
        dims = [int(v) for v in target.reshape(-1)]
        return len(dims) == len(source.shape) + 1 and dims[0] in (0, -1, int(BATCH), graph.static_batch) and \
            all(d in (s, 0, -1) for d, s in zip(dims[1:], source.shape)) and dims.count(-1) <= 1
    maker = graph.producers.get(back.input[1]) if len(back.input) > 1 else None
    return (maker is not None and maker.op_type == "Shape" and not maker.attribute
            and graph.values.get(maker.input[0]) is source)


# ----------------------------------------------------------------------------------------------- recurrent


#: ONNX gate blocks in magmadnn's order (LSTM: ONNX i, o, f, c -> i, f, g, o; GRU: ONNX z, r, h -> r, z, n)
_GATE_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}


def _gates(array, op: str, units: int):
    """ONNX (blocks * units, ...) rows in magmadnn's block order."""
    blocks = [array[i * units:(i + 1) * units] for i in range(len(_GATE_ORDER[op]))]
    return np.concatenate([blocks[i] for i in _GATE_ORDER[op]], axis=0)


def _last_step(graph, y_name: str, steps: int):
    """Y -> Squeeze(1) -> Transpose([1, 0, 2]) -> Gather(axis 1, the last step) (dynamo=False), or Y ->
    Transpose([0, 2, 1, 3]) -> Reshape to 3-D -> Transpose([1, 0, 2]) -> Gather (the dynamo exporter): that Gather
    (the layer then returns its last state only), else None."""
    first = graph.sole_consumer(y_name, ("Squeeze", "Transpose"))
    if first is None:
        return None
    if first.op_type == "Squeeze":
        axes = graph.values.get(first.input[1]) if graph.has(first, 1) else graph.attrs(first, {"axes": None})["axes"]
        chain = [first] if axes is not None and list(np.ravel(axes)) == [1] else None
    else:
        swap = list(graph.attrs(first, {"perm": None})["perm"] or []) == [0, 2, 1, 3]
        flat = swap and graph.sole_consumer(first.output[0], ("Reshape",))
        chain = [first, flat] if flat and _merges_unit_axis(graph, flat, steps) else None
    back = chain and graph.sole_consumer(chain[-1].output[0], ("Transpose",))
    pick = back and graph.sole_consumer(back.output[0], ("Gather",))
    if not pick or graph.attrs(pick, {"axis": 0})["axis"] != 1 or list(graph.attrs(back, {"perm": None})["perm"] or
                                                                         []) != [1, 0, 2]:
        return None
    index = graph.values.get(pick.input[1])
    if not isinstance(index, np.ndarray) or index.shape != () or int(index) not in (-1, steps - 1):
        return None
    for absorbed in (*chain, back, pick):
        graph.absorb(absorbed)
    return pick


def _merges_unit_axis(graph, node, steps: int) -> bool:
    """Whether Reshape ``node`` of (T, N, 1, H) drops the unit axis: a constant 3-D target keeping T first (its
    batch entry, fixed or symbolic, is the batch; H follows from the size), or one computed later from Shape
    nodes."""
    target = graph.values.get(node.input[1])
    if target is None:
        return node.input[1] in graph.producers
    dims = [int(v) for v in np.ravel(target)]
    return len(dims) == 3 and dims[0] in (steps, 0, -1)


def recurrent(graph, node):
    op = node.op_type
    defaults = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
                "direction": "forward", "hidden_size": None, "layout": 0}
    defaults.update({"input_forget": 0} if op == "LSTM" else {"linear_before_reset": 0})
    attrs = graph.attrs(node, defaults)
    standard = ["Sigmoid", "Tanh", "Tanh"] if op == "LSTM" else ["Sigmoid", "Tanh"]
    if attrs["direction"] != "forward" or attrs["clip"] is not None or attrs.get("input_forget") or \
            (attrs["activations"] is not None and [a.decode() if isinstance(a, bytes) else a
                                                   for a in attrs["activations"]] != standard):
        raise graph.error(node, "direction, clip, input_forget or activations other than the defaults are not "
                                "supported", f"a forward {op} with the standard activations")
    if op == "GRU" and not attrs["linear_before_reset"]:
        raise graph.error(node, "linear_before_reset=0 is not supported",
                          "linear_before_reset=1 (PyTorch's and cuDNN's GRU)")
    x = graph.value(node, 0, layouts=("time_major",) if attrs["layout"] == 0 else (None,))
    if len(x.shape) != 2:
        raise graph.error(node, f"an input of per-sample shape {x.shape} is not supported", "(time, features)")
    units, gates = int(attrs["hidden_size"]), len(_GATE_ORDER[op])
    w, r = graph.constant(node, 1, "W")[0], graph.constant(node, 2, "R")[0]
    b = graph.constant(node, 3, "B")[0] if graph.has(node, 3) else np.zeros(2 * gates * units, w.dtype)
    for index in (4, 5, 6, 7):  # sequence_lens, initial_h, initial_c (zeros of hidden_size's shape), peepholes
        if graph.has(node, index) and not (index in (5, 6) and _zeros(v := graph.values.get(node.input[index]))
                                           and np.shape(v)[-1:] == (units,)):
            raise graph.error(node, f"input {index} ({node.input[index]!r}) is not supported",
                              f"full sequences from a zero initial state of {units} units, no peepholes (P)")
    weights = {"kernel": _gates(w, op, units).T, "recurrent_kernel": _gates(r, op, units).T}
    if op == "LSTM":
        weights["bias"] = _gates(b[:4 * units] + b[4 * units:], op, units)
    else:
        weights["bias"], weights["recurrent_bias"] = _gates(b[:3 * units], op, units), _gates(b[3 * units:], op, units)
    outputs = [name if name and graph.consumers.get(name) or name in graph.outputs else "" for name in node.output]
    outputs += [""] * (3 - len(outputs))  # the dynamo exporter writes only the outputs it reads
    if len(outputs) > 2 and outputs[2] or (outputs[0] and outputs[1]):
        raise graph.error(node, "reading both Y and Y_h (or Y_c) is not supported", "Y or Y_h")
    last = _last_step(graph, node.output[0], x.shape[0]) if outputs[0] and attrs["layout"] == 0 else None
    cls = L.LSTM if op == "LSTM" else L.GRU
    value = graph.layer(node, cls, x.tensor, units, return_sequences=bool(outputs[0]) and last is None,
                        weights=weights)
    if last is not None:
        graph.values[last.output[0]] = Value(value.tensor)
        return []
    if outputs[0]:
        return [Value(value.tensor, layout="sequence" if attrs["layout"] == 0 else None,
                      shape=value.tensor.shape if attrs["layout"] == 0 else (x.shape[0], 1, units))]
    return ["", Value(value.tensor, layout="state" if attrs["layout"] == 0 else None,
                      shape=value.tensor.shape if attrs["layout"] == 0 else (1, units))]


def _zeros(value) -> bool:
    return isinstance(value, BatchZeros) or (isinstance(value, np.ndarray) and not np.any(value))



IMPORTERS = {
    "Gemm": gemm, "MatMul": matmul, "Conv": conv, "MaxPool": max_pool, "AveragePool": average_pool,
    "GlobalAveragePool": global_average_pool, "BatchNormalization": batch_normalization,
    **dict.fromkeys(_ACTIVATIONS, activation), "Softmax": softmax, "LogSoftmax": log_softmax, "Add": add,
    "Sum": add, "Identity": identity, "Dropout": dropout, "Flatten": flatten, "Reshape": reshape,
    "Constant": constant, "Shape": shape, "ReduceMean": reduce_mean, "Transpose": transpose, "Squeeze": squeeze,
    "Unsqueeze": unsqueeze, "Gather": gather,
}
IMPORTERS.update({  # the modern layers
    "ConvTranspose": conv_transpose, "GlobalMaxPool": global_max_pool, "Concat": concat, "Resize": resize,
    "LayerNormalization": layer_normalization, "RMSNormalization": rms_normalization,
    "GroupNormalization": group_normalization, "InstanceNormalization": instance_normalization,
    "LSTM": recurrent, "GRU": recurrent,
})


IMPORTERS.update({  # attention as PyTorch writes it (see .attention)
    "Split": attention.split, "Slice": attention.slice_, "Mul": attention.scale, "Div": attention.scale,
    "Where": attention.where,
})


def supported_operators() -> list[str]:
    return sorted(IMPORTERS)
