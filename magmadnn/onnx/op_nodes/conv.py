"""Convolution in 1-D and 2-D (Conv, ConvTranspose), pooling in 1-D, 2-D and 3-D (MaxPool, AveragePool with
ceil_mode and count_include_pad), GlobalAveragePool, GlobalMaxPool. 1-D runs as 2-D with a unit height, 3-D as two
2-D pools."""

from __future__ import annotations

import math

import numpy as np

from ...autograd import is_grad_enabled
from ._registry import op
from ._runtime import F, Tensor, arith, is_float, tensor
from .shaping import _pad_axis


def _geometry(view, spatial):
    kernel = view.attr("kernel_shape")
    strides = list(view.attr("strides", [1] * spatial))
    dilations = list(view.attr("dilations", [1] * spatial))
    pads = list(view.attr("pads", [0] * (2 * spatial)))
    auto = view.attr("auto_pad", "NOTSET")
    return kernel, strides, dilations, pads, auto


def _auto_pads(auto, sizes, kernel, strides, dilations, pads):
    if auto in ("NOTSET", "") or auto is None:
        return pads
    if auto == "VALID":
        return [0] * (2 * len(sizes))
    begin, end = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)
        end.append(total - small if auto == "SAME_UPPER" else small)
    return begin + end


def _as2d(x):
    return F.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))


def _spatial(view, ranks=(3, 4)):
    rank = view.rank(0)
    if rank not in ranks:
        raise view.error(f"inputs of rank {rank} are not supported (rank {' or '.join(map(str, ranks))})")
    return rank - 2


@op("Conv", weights=(1, 2))
def conv(view):
    return conv_function(view)


def conv_function(view, activation=None, residual=None):
    """Conv's function ``run(x, w, b=None, r=None)``. A chain Conv -> Add -> Relu fused into one node
    (:mod:`.fused_conv`): ``residual`` ("left" or "right": the Add's operand order) adds ``r``, ``activation``
    ("relu") follows; the same values and gradients as the nodes one by one (host inference in one call)."""
    view.only("kernel_shape", "strides", "dilations", "pads", "auto_pad", "group")
    spatial = _spatial(view)
    _, strides, dilations, pads, auto = _geometry(view, spatial)
    groups = int(view.attr("group", 1))
    if spatial == 1 and (activation or residual):
        raise view.error("a fused chain needs a 2-D convolution")

    def run(x, w, b=None, r=None):
        w = tensor(w, x)
        kernel = list(w.shape[2:])
        p = _auto_pads(auto, x.shape[2:], kernel, strides, dilations, pads)
        if spatial == 1:
            y = F.conv2d(_as2d(x), F.reshape(w, (*w.shape[:2], 1, w.shape[2])),
                         None if b is None else tensor(b, x), stride=(1, strides[0]),
                         padding=((0, 0), (p[0], p[1])), dilation=(1, dilations[0]), groups=groups)
            return F.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
        b = None if b is None else tensor(b, x)
        geometry = {"stride": tuple(strides), "padding": ((p[0], p[2]), (p[1], p[3])), "dilation": tuple(dilations),
                    "groups": groups}
        if residual is None:
            return F.conv2d(x, w, b, activation=activation, **geometry)
        fast = _host_inference(x, w, b, r, activation, geometry)
        if fast is not None:
            return fast
        y = F.conv2d(x, w, b, **geometry)
        y = arith(r, y, "add") if residual == "left" else arith(y, r, "add")
        return y if activation is None else F.activation(y, activation)

    return run


def _host_inference(x, w, b, r, activation, geometry):
    """``activation(conv2d(x, w, b) + r)`` by the host's one-call inference convolution, or None where it does not
    apply (a device, gradients recorded, groups, broadcasting or mixed dtypes: the ops one by one then)."""
    if is_grad_enabled() or geometry["groups"] != 1 or not isinstance(r, Tensor) or x.xp.name != "host":
        return None
    if not (x.dtype == w.dtype == r.dtype and (b is None or b.dtype == x.dtype) and is_float(x)):
        return None
    from ...backend.host.conv import conv2d_forward_residual  # noqa: PLC0415

    data = [t.data for t in (x, w, r)]
    if not all(isinstance(a, np.ndarray) for a in data) or data[0].ndim != 4 or data[1].shape[1] != data[0].shape[1]:
        return None
    n, k = data[0].shape[0], data[1].shape[0]
    ho, wo = F.conv2d_output_shape(data[0].shape[2:], data[1].shape[2:], geometry["stride"], geometry["padding"],
                                   geometry["dilation"])
    if data[2].shape != (n, k, ho, wo):
        return None
    y = conv2d_forward_residual(*data, stride=geometry["stride"], padding=geometry["padding"],
                                dilation=geometry["dilation"], bias=None if b is None else b.data,
                                activation=activation)
    return Tensor._of(y, x.xp)


@op("ConvTranspose", weights=(1, 2))
def conv_transpose(view):
    view.only("kernel_shape", "strides", "dilations", "pads", "auto_pad", "group", "output_padding",
              "output_shape")
    spatial = _spatial(view)
    _, strides, dilations, pads, auto = _geometry(view, spatial)
    if int(view.attr("group", 1)) != 1:
        raise view.error("group > 1 is not supported")
    extra = list(view.attr("output_padding", [0] * spatial))
    wanted = view.attr("output_shape")
    if auto not in ("NOTSET", "", None, "VALID") or wanted is not None:
        raise view.error("auto_pad SAME_* and output_shape are not supported (give pads and output_padding)")

    def run(x, w, b=None):
        w = tensor(w, x)
        if spatial == 1:
            y = F.conv_transpose2d(_as2d(x), F.reshape(w, (*w.shape[:2], 1, w.shape[2])),
                                   None if b is None else tensor(b, x), stride=(1, strides[0]),
                                   padding=((0, 0), (pads[0], pads[1])), output_padding=(0, extra[0]),
                                   dilation=(1, dilations[0]))
            return F.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
        return F.conv_transpose2d(x, w, None if b is None else tensor(b, x), stride=tuple(strides),
                                  padding=((pads[0], pads[2]), (pads[1], pads[3])), output_padding=tuple(extra),
                                  dilation=tuple(dilations))

    return run


@op("MaxPool", "AveragePool")
def pool(view):
    view.only("kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode", "count_include_pad",
              "storage_order")
    spatial = _spatial(view, (3, 4, 5))
    kernel, strides, dilations, pads, auto = _geometry(view, spatial)
    if any(d != 1 for d in dilations):
        raise view.error("dilations other than 1 are not supported")
    if int(view.attr("storage_order", 0)) or len([o for o in view.node.output if o]) > 1:
        raise view.error("the Indices output (and storage_order) is not supported")
    ceil, include = int(view.attr("ceil_mode", 0)), int(view.attr("count_include_pad", 0))
    mode = "max" if view.node.op_type == "MaxPool" else "avg"
    dtype = getattr(view.inputs[0], "dtype", None)
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise view.error(f"pooling {np.dtype(dtype)} tensors is not supported (float only)")

    def run(x):
        sizes = x.shape[2:]
        p = _auto_pads(auto, sizes, kernel, strides, dilations, pads)
        begin, end = list(p[:spatial]), list(p[spatial:])
        grow = [0] * spatial  # ceil_mode: the extra end padding no window average counts
        for i in range(spatial):
            span = sizes[i] + begin[i] + end[i] - kernel[i]
            out = (math.ceil(span / strides[i]) if ceil else span // strides[i]) + 1
            if ceil and (out - 1) * strides[i] >= sizes[i] + begin[i]:
                out -= 1
            grow[i] = max((out - 1) * strides[i] + kernel[i] - (sizes[i] + begin[i] + end[i]), 0)
        if mode == "avg" and include and any(p):  # the declared padding counts: pad with zeros first
            for i in range(spatial):
                x = _pad_axis(x, 2 + i, begin[i], end[i], "constant", 0.0)
            begin, end = [0] * spatial, [0] * spatial
        end = [e + g for e, g in zip(end, grow)]
        if spatial == 1:
            y = _pool2d(mode, _as2d(x), (1, kernel[0]), (1, strides[0]), ((0, 0), (begin[0], end[0])))
            return F.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
        if spatial == 3:
            return _pool3d(mode, x, kernel, strides, begin, end)
        return _pool2d(mode, x, tuple(kernel), tuple(strides), ((begin[0], end[0]), (begin[1], end[1])))

    return run


def _pool3d(mode, x, kernel, strides, begin, end):
    """A 3-D pool as two 2-D pools: over (H, W) with the depth folded into the channels, then over the depth with
    (H, W) flattened. The max of a box is the max over depth of the max over (H, W); the average over its real
    elements is too, as the count of real (H, W) elements is the same at every depth of one window."""
    n, c, d, h, w = x.shape
    y = _pool2d(mode, F.reshape(x, (n, c * d, h, w)), tuple(kernel[1:]), tuple(strides[1:]),
                ((begin[1], end[1]), (begin[2], end[2])))
    h2, w2 = y.shape[2], y.shape[3]
    y = _pool2d(mode, F.reshape(y, (n, c, d, h2 * w2)), (kernel[0], 1), (strides[0], 1), ((begin[0], end[0]), (0, 0)))
    return F.reshape(y, (n, c, y.shape[2], h2, w2))


def _pool2d(mode, x, window, stride, pads):
    if any(p >= k for pair, k in zip(pads, window) for p in pair):  # the op's padding stays below the window
        for axis, (pair, k) in enumerate(zip(pads, window)):
            if max(pair) >= k:
                fill = -math.inf if mode == "max" else 0.0
                x = _pad_axis(x, 2 + axis, pair[0], pair[1], "constant", fill)
        pads = tuple((0, 0) if max(pair) >= k else pair for pair, k in zip(pads, window))
    return F.max_pool2d(x, window, stride, pads) if mode == "max" else F.avg_pool2d(x, window, stride, pads)


@op("GlobalAveragePool", "GlobalMaxPool")
def global_pool(view):
    kind = view.node.op_type

    def run(x):
        axes = tuple(range(2, x.ndim))
        if kind == "GlobalAveragePool":
            return F.mean(x, axis=axes, keepdims=True)
        from ...functional import _tensor_math as T  # noqa: PLC0415

        return T.reduce(x, "max", axes, True)

    return run
