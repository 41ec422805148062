"""Resize (and Upsample): every interpolation ONNX defines (nearest, linear, cubic; each coordinate transformation,
antialias, tf_crop_and_resize) is linear in the data and separable per axis, so each resized axis becomes one
matrix product with an interpolation matrix. The matrices are made on the host from the shapes, scales or sizes and
the attributes alone, by onnx's reference Resize applied to the rows of an identity (exactly ONNX's meaning; no data
is read), and cached per shape; the product is differentiable. GridSample gathers its corners (below)."""

from __future__ import annotations

import itertools

import numpy as np

from ._registry import Form, op
from ._runtime import F, T, arith, host, tensor

_ATTRS = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value",
          "nearest_mode", "antialias")


def _matrix(attrs, opset, size, roi, scale, out):
    """(M^T (size, out), offset (out,)) of one axis: y = x @ M^T + offset."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    from .._proto import onnx  # noqa: PLC0415

    helper = onnx().helper
    node = helper.make_node("Resize", ["X", "roi", "scales" if out is None else "", "sizes" if out is not None else ""],
                            ["Y"], axes=[1], **attrs)
    basis = np.concatenate([np.eye(size), np.zeros((1, size))]).astype(np.float64)
    roi = np.asarray([0.0, 1.0] if roi is None else roi, np.float64)
    ins = [basis, roi] + ([np.asarray([scale], np.float32), None] if out is None else
                          [None, np.asarray([out], np.int64)])
    names = [n for n in node.input if n]
    untyped = helper.make_empty_tensor_value_info
    graph = helper.make_graph([node], "resize", [untyped(n) for n in names], [untyped("Y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(opset, 19))])
    feeds = {n: v for n, v in zip(node.input, ins) if n}
    y = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])
    return y[:size] - y[size:], y[size]


def _plan(x_shape, axes, roi, scales, sizes, policy):
    """[(axis, roi pair, scale, out size)] for the axes that change."""
    rank = len(x_shape)
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    if sizes is not None and policy != "stretch":
        ratios = [sizes[i] / x_shape[a] for i, a in enumerate(axes)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [int(np.floor(scale * x_shape[a] + 0.5)) for a in axes]
    plan = []
    for i, a in enumerate(axes):
        pair = None if roi is None else (roi[i], roi[i + len(axes)])
        out = None if sizes is None else int(sizes[i])
        scale = None if scales is None else float(scales[i])
        if (out if out is not None else int(np.floor(x_shape[a] * scale))) == x_shape[a] and (
                scale in (None, 1.0)) and pair in (None, (0.0, 1.0)):
            continue
        plan.append((a, pair, scale, out))
    return plan


def _apply(x, a, mt, offset):
    rank = x.ndim
    order = [k for k in range(rank) if k != a] + [a]
    moved = F.transpose(x, order) if a != rank - 1 else x
    lead = moved.shape[:-1]
    y = F.matmul(F.reshape(moved, (-1, mt.shape[0])), tensor(mt.astype(np.dtype(x.dtype)), x))
    if np.any(offset):
        y = F.add(y, tensor(offset.astype(np.dtype(x.dtype)), x))
    y = F.reshape(y, (*lead, mt.shape[1]))
    back = list(np.argsort(order))
    return F.transpose(y, back) if a != rank - 1 else y


def _resizer(view, attrs, axes, policy):
    cache = {}

    def run(x, roi=None, scales=None, sizes=None):
        if np.dtype(x.dtype).kind != "f":
            raise view.error("only float tensors are resized")
        roi = None if roi is None or host(roi).size == 0 else [float(v) for v in host(roi)]
        scales = None if scales is None or host(scales).size == 0 else [float(v) for v in host(scales)]
        sizes = None if sizes is None or host(sizes).size == 0 else [int(v) for v in host(sizes)]
        key = (tuple(x.shape), roi and tuple(roi), scales and tuple(scales), sizes and tuple(sizes))
        if key not in cache:
            plan = _plan(x.shape, axes, roi, scales, sizes, policy)
            try:
                cache[key] = [(a, *_matrix(attrs, view.opset, x.shape[a], pair, scale, out))
                              for a, pair, scale, out in plan]
            except Exception as exc:  # noqa: BLE001 - the reference raises what its Resize raises
                raise view.error(f"this resize cannot be computed ({type(exc).__name__}: {exc})") from None
        for a, mt, offset in cache[key]:
            x = _apply(x, a, mt, offset)
        return x

    return run


@op("Resize", host=(1, 2, 3))
def resize(view):
    view.only(*_ATTRS, "axes", "keep_aspect_ratio_policy")
    attrs = {k: view.attr(k) for k in _ATTRS if view.attr(k) is not None}
    axes = view.attr("axes")
    if view.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates
        attrs.setdefault("coordinate_transformation_mode", "asymmetric")
        run = _resizer(view, attrs, axes, "stretch")
        return Form(lambda x, scales: run(x, None, scales), host=(1,), keeps_batch=True)
    if attrs.get("mode", "nearest") == "nearest" and view.opset < 13:
        attrs.setdefault("nearest_mode", "round_prefer_floor")
    run = _resizer(view, attrs, axes, view.attr("keep_aspect_ratio_policy", "stretch"))
    keeps = axes is None or 0 not in [int(a) % max(view.rank(0) or 1, 1) for a in axes]
    return Form(run, keeps_batch=True if view.rank(0) is None else keeps)


@op("Upsample", host=(1,))
def upsample(view):
    view.only("mode", "scales")
    attrs = {"mode": view.attr("mode", "nearest"), "coordinate_transformation_mode": "asymmetric"}
    if attrs["mode"] == "nearest":
        attrs["nearest_mode"] = "floor"
    run = _resizer(view, attrs, None, "stretch")
    fixed = view.attr("scales")
    if fixed is not None:
        return Form(lambda x: run(x, None, np.asarray(fixed, np.float32)), keeps_batch=True)
    return Form(lambda x, scales: run(x, None, scales), keeps_batch=True)


@op("GridSample")
def grid_sample(view):
    """GridSample in 2-D and 3-D, linear (bi-, tri-) or nearest, zeros / border / reflection padding: the corners'
    values gathered from the flattened input (take_along_axis), weighted by functions of the grid, so the gradient
    reaches the input and the grid."""
    view.only("align_corners", "mode", "padding_mode")
    mode = view.attr("mode", "linear" if view.opset >= 20 else "bilinear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding, align = view.attr("padding_mode", "zeros"), bool(view.attr("align_corners", 0))
    if mode not in ("linear", "nearest") or padding not in ("zeros", "border", "reflection"):
        raise view.error(f"mode {mode!r} with padding_mode {padding!r} is not supported (linear or nearest; zeros, "
                         "border or reflection)")

    def run(x, grid):
        grid = tensor(grid, x)
        n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
        k, outs = len(sizes), grid.shape[1:-1]
        m = int(np.prod(outs))
        g = F.reshape(grid, (n, m, k))
        coords = [_coordinate(F.reshape(F.slice_axis(g, 2, k - 1 - d, k - d), (n, m)), size, padding, align)
                  for d, size in enumerate(sizes)]
        flat = F.reshape(x, (n, c, int(np.prod(sizes))))
        total = None
        for corner in itertools.product(*([(0,)] if mode == "nearest" else [(0, 1)]) * k):
            index, weight = None, None
            for d, (pos, size) in enumerate(zip(coords, sizes)):
                base = T.unary(pos, "round" if mode == "nearest" else "floor")
                at = F.add(base, float(corner[d]))
                if mode == "nearest":
                    w = None
                else:
                    frac = F.subtract(pos, base)
                    w = frac if corner[d] else F.subtract(1.0, frac)
                inside = T.logical(T.compare(at, -0.5, "greater"), T.compare(at, size - 0.5, "less"), "logical_and")
                inside = T.astype(inside, x.dtype)
                w = inside if w is None else F.multiply(w, inside)
                weight = w if weight is None else F.multiply(weight, w)
                step = int(np.prod(sizes[d + 1:]))
                clipped = T.astype(F.clip(at, 0.0, float(size - 1)), np.int64)
                term = clipped if step == 1 else T.astype(F.multiply(F.clip(at, 0.0, float(size - 1)), float(step)),
                                                          np.int64)
                index = term if index is None else arith(index, term, "add")
            index = T.broadcast_to(F.reshape(index, (n, 1, m)), (n, c, m))
            picked = F.multiply(T.take_along_axis(flat, index, 2), F.reshape(weight, (n, 1, m)))
            total = picked if total is None else F.add(total, picked)
        return F.reshape(total, (n, c, *outs))

    return run


def _coordinate(g, size, padding, align):
    """The grid's normalised coordinate (-1..1) as a position on an axis of ``size`` pixels, padded: border clips to
    the pixels, reflection reflects about the edges (the pixels' centres with align_corners, else their outer
    edges), then clips."""
    pos = F.multiply(F.add(g, 1.0), (size - 1) / 2.0) if align else F.subtract(F.multiply(F.add(g, 1.0), size / 2.0),
                                                                              0.5)
    if padding == "reflection" and size > 1:
        low, span = (0.0, size - 1.0) if align else (-0.5, float(size))
        t = T.remainder(F.subtract(pos, low), 2.0 * span)
        t = T.where(T.compare(t, span, "greater"), F.subtract(2.0 * span, t), t)
        pos = F.add(t, low)
    if padding in ("border", "reflection"):
        pos = F.clip(pos, 0.0, float(size - 1))
    return pos


@op("AffineGrid", host=(1,))
def affine_grid(view):
    """AffineGrid in 2-D and 3-D: the output's pixel positions (made on the host from the size) times theta."""
    view.only("align_corners")
    align = bool(view.attr("align_corners", 0))

    def run(theta, size):
        size = [int(s) for s in host(size).reshape(-1)]
        n, spatial = size[0], size[2:]
        axes = [np.linspace(-1.0, 1.0, s) if align else (np.arange(s) * 2.0 + 1.0) / s - 1.0 for s in spatial]
        mesh = np.meshgrid(*axes, indexing="ij")  # per spatial axis, outermost first
        base = np.stack([*reversed(mesh), np.ones(spatial)], -1).reshape(1, -1, len(spatial) + 1)
        theta = tensor(theta)
        grid = F.matmul(tensor(base.astype(np.dtype(theta.dtype)), theta), F.transpose(theta, (0, 2, 1)))
        return F.reshape(grid, (n, *spatial, len(spatial)))

    return Form(run, keeps_batch=view.batched(0))
