"""Block rearrangements of (N, C, H, W) tensors: DepthToSpace and SpaceToDepth (DCR and CRD modes), as a reshape, a
transpose and a reshape (differentiable, any dtype)."""

from __future__ import annotations

from ._registry import op
from ._runtime import F, Tensor, is_float


def _permute(x, shape, axes, out):
    if is_float(x):
        return F.reshape(F.transpose(F.reshape(x, shape), axes), out)
    ns = x.data.__array_namespace__()
    return Tensor._of(ns.reshape(ns.permute_dims(ns.reshape(x.data, shape), axes), out), x.xp)


@op("DepthToSpace")
def depth_to_space(view):
    view.only("blocksize", "mode")
    bs, mode = int(view.attr("blocksize")), view.attr("mode", "DCR")

    def run(x):
        n, c, h, w = x.shape
        out = (n, c // (bs * bs), h * bs, w * bs)
        if mode == "DCR":
            return _permute(x, (n, bs, bs, c // (bs * bs), h, w), (0, 3, 4, 1, 5, 2), out)
        return _permute(x, (n, c // (bs * bs), bs, bs, h, w), (0, 1, 4, 2, 5, 3), out)

    return run


@op("SpaceToDepth")
def space_to_depth(view):
    view.only("blocksize", "mode")
    bs, mode = int(view.attr("blocksize")), view.attr("mode", "DCR")

    def run(x):
        n, c, h, w = x.shape
        shape, out = (n, c, h // bs, bs, w // bs, bs), (n, c * bs * bs, h // bs, w // bs)
        return _permute(x, shape, (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4), out)

    return run
