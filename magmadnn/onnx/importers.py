"""ONNX operators -> magmadnn layers: one function per operator, ``f(graph, node) -> [output values]``.

``graph`` is the :class:`.graph.Graph` of the import: it gives a node's inputs (computed Values or constants), its
attributes (an attribute not listed with its default is an error), makes layers and reports what is not supported.
Only per-sample axes are mapped: the first axis of every computed tensor is the (dynamic) batch.
"""

from __future__ import annotations

import math

import numpy as np

from .. import layers as L
from ._proto import onnx
from .errors import UnsupportedOnnxError
from .graph import BATCH, Value

__all__ = ["IMPORTERS", "supported_operators", "pool_geometry"]

#: ONNX activation op -> (magmadnn kind, attribute defaults)
_ACTIVATIONS = {"Relu": ("relu", {}), "Sigmoid": ("sigmoid", {}), "Tanh": ("tanh", {}),
                "LeakyRelu": ("leaky_relu", {"alpha": 0.01}), "Elu": ("elu", {"alpha": 1.0}),
                "Gelu": ("gelu", {"approximate": "none"})}
_FUSABLE = {"relu": None, "sigmoid": None, "tanh": None, "leaky_relu": 0.01, "elu": 1.0, "gelu": None}


def _activation_of(graph, node):
    """(kind, alpha) of an activation node, or an error for what magmadnn cannot compute."""
    kind, defaults = _ACTIVATIONS[node.op_type]
    attrs = graph.attrs(node, defaults)
    if kind == "gelu" and attrs["approximate"] != "tanh":
        raise graph.error(node, f"approximate={attrs['approximate']!r} (exact, erf-based GELU) is not supported",
                          "approximate='tanh' (magmadnn's gelu is the tanh approximation)")
    return kind, float(attrs.get("alpha", 0.0))


def _fuse_activation(graph, output_name: str, layer_kwargs: dict, allow_softmax: bool = False):
    """Fold the one activation node reading ``output_name`` into the layer about to be made (``activation=``);
    returns the ONNX name of the fused output (``output_name`` when nothing was folded)."""
    ops = tuple(_ACTIVATIONS) + (("Softmax",) if allow_softmax else ())
    reader = graph.sole_consumer(output_name, ops)
    if reader is None:
        return output_name
    if reader.op_type == "Softmax":
        axis = graph.attrs(reader, {"axis": -1 if graph.opset >= 13 else 1})["axis"]
        if axis not in (1, -1):
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
    x = graph.value(node, 0)
    graph.rank(node, x, (2,), "(N, features) times a constant 2-D matrix")
    w = graph.constant(node, 1, "the weights")
    if w.ndim != 2 or w.shape[0] != x.shape[0]:
        raise graph.error(node, f"weights of shape {w.shape} for an input of {x.shape[0]} features",
                          f"a constant matrix ({x.shape[0]}, units)")
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
    fused = _fuse_activation(graph, out, kwargs, allow_softmax=True)
    value = graph.layer(node, L.Dense, x.tensor, w.shape[1], use_bias="bias" in weights, weights=weights, **kwargs)
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
    if group != 1:
        raise graph.error(node, f"group={group} is not supported", "group=1")
    if w.shape[1] * group != x.shape[0]:
        raise graph.error(node, f"a kernel of shape {w.shape} for an input of {x.shape[0]} channels")
    tensor = graph.materialize(node, x)
    pads = _pads(graph, node, attrs, x.shape[1:], kernel, strides, dilations)
    weights = {"kernel": w}
    if graph.has(node, 2):
        weights["bias"] = graph.constant(node, 2, "B, the bias").reshape(-1)
    kwargs = {}
    out = _fuse_activation(graph, node.output[0], kwargs)
    value = graph.layer(node, L.Conv2D, tensor, w.shape[0], kernel, strides=strides, padding=_pad_arg(pads),
                        dilation=dilations, use_bias="bias" in weights, weights=weights, **kwargs)
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
    allow_zero = graph.attrs(node, {"allowzero": 0})["allowzero"]
    x = graph.value(node, 0)
    target = [int(v) for v in graph.constant(node, 1, "shape").reshape(-1)]
    if allow_zero and 0 in target:
        raise graph.error(node, "allowzero=1 with a 0 in the shape is not supported", "allowzero=0")
    if target and target[0] == BATCH:  # the batch size taken from the input's Shape: keep it
        target[0] = 0
    if any(v < -1 for v in target):
        raise graph.error(node, "a shape computed from the batch size (other than copying it first) is not "
                                "supported", "shapes whose first entry is 0, -1 or the input's batch size")
    if not target or target[0] not in (0, -1) or (target[0] == -1 and -1 in target[1:]):
        raise graph.error(node, f"shape {target} is not supported",
                          "a shape that keeps the dynamic batch axis first (0 or -1) and fixes the others")
    dims = [x.shape[i - 1] if v == 0 and i > 0 else v for i, v in enumerate(target)][1:]
    size = math.prod(x.shape)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = size // known if known and size % known == 0 else -1
    if math.prod(dims) != size or min(dims, default=1) < 1:
        raise graph.error(node, f"shape {target} does not hold the {size} values of a sample of shape {x.shape}")
    dims = tuple(dims)
    if dims == x.shape or dims == tuple(x.tensor.shape):
        return [Value(x.tensor, dims)]
    if len(dims) == 1:
        return [_flat(graph, node, x)]
    raise graph.error(node, f"reshaping a sample of shape {x.shape} to {dims} is not supported",
                      "reshapes that flatten the sample or keep its shape")


def shape(graph, node):
    attrs = graph.attrs(node, {"start": 0, "end": None})
    x = graph.value(node, 0)
    full = np.array([BATCH, *x.shape], np.int64)
    return [full[attrs["start"]:attrs["end"]]]


def reduce_mean(graph, node):
    attrs = graph.attrs(node, {"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
    x = graph.value(node, 0)
    axes = attrs["axes"] if graph.opset < 18 or not graph.has(node, 1) else graph.constant(node, 1, "axes")
    rank = len(x.shape) + 1
    if rank != 4 or axes is None or sorted(int(a) % rank for a in np.ravel(axes)) != [2, 3]:
        raise graph.error(node, f"a mean over axes {None if axes is None else list(np.ravel(axes))} of a rank-{rank}"
                                " input is not supported", "the mean over the spatial axes [2, 3] of (N, C, H, W)")
    value = graph.layer(node, L.GlobalAvgPool2D, graph.materialize(node, x))
    return [Value(value.tensor, (x.shape[0], 1, 1) if attrs["keepdims"] else (x.shape[0],))]


def _axes(graph, node, what: str = "axes"):
    """The ``axes`` of Squeeze/Unsqueeze: an attribute before opset 13, an input since."""
    attrs = graph.attrs(node, {"axes": None})
    if graph.opset >= 13 and graph.has(node, 1):
        return [int(a) for a in graph.constant(node, 1, what).reshape(-1)]
    if attrs["axes"] is None:
        raise graph.error(node, "squeezing every unit axis (no axes) is not supported", "explicit axes")
    return [int(a) for a in attrs["axes"]]


def transpose(graph, node):
    x = graph.value(node, 0, layouts=(None, "time_major"))
    rank = len(x.shape) + 1
    perm = [int(p) for p in graph.attrs(node, {"perm": None})["perm"] or reversed(range(rank))]
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
    raise graph.error(node, f"perm {perm} is not supported", "[1, 0, 2] around recurrent operators")


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
    raise graph.error(node, "this Gather is not supported", "the last layer of a recurrent final state (axis 0)")


def constant(graph, node):
    attrs = graph.attrs(node, {"value": None})
    if attrs["value"] is None:
        raise graph.error(node, "a constant without a tensor 'value' is not supported", "value=tensor")
    return [np.asarray(onnx().numpy_helper.to_array(attrs["value"]))]


IMPORTERS = {
    "Gemm": gemm, "MatMul": matmul, "Conv": conv, "MaxPool": max_pool, "AveragePool": average_pool,
    "GlobalAveragePool": global_average_pool, "BatchNormalization": batch_normalization,
    **dict.fromkeys(_ACTIVATIONS, activation), "Softmax": softmax, "LogSoftmax": log_softmax, "Add": add,
    "Sum": add, "Identity": identity, "Dropout": dropout, "Flatten": flatten, "Reshape": reshape,
    "Constant": constant, "Shape": shape, "ReduceMean": reduce_mean, "Transpose": transpose, "Squeeze": squeeze,
    "Unsqueeze": unsqueeze, "Gather": gather,
}


def supported_operators() -> list[str]:
    return sorted(IMPORTERS)
