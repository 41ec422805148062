"""Keras' gradient clipping of the optimizers, on the backend (nothing is read back): ``clipnorm=c`` scales each
gradient by ``c / max(||g||, c)`` (``clip_by_norm``), ``global_clipnorm=c`` all of them by ``c / max(||all||, c)``
(``clip_by_global_norm``), ``clipvalue=c`` clips each element to [-c, c] (``ops.clip``); at most one is set."""

from __future__ import annotations

__all__ = ["options", "clip"]


def options(clipnorm, global_clipnorm, clipvalue, check) -> tuple:
    """The three options checked (``check(name, value)`` for each given one), at most one of them set."""
    given = {"clipnorm": clipnorm, "global_clipnorm": global_clipnorm, "clipvalue": clipvalue}
    if sum(v is not None for v in given.values()) > 1:
        raise ValueError("optimizer: only one of clipnorm (per tensor), global_clipnorm (over all) and clipvalue "
                         f"(per element) can be set, got {', '.join(f'{k}={v!r}' for k, v in given.items())}")
    return tuple(None if v is None else check(name, v) for name, v in given.items())


def clip(params, grads: list, clipnorm, global_clipnorm, clipvalue) -> list:
    """``grads`` (None where a parameter has none) clipped; the norms' factor is computed on the backend
    (``clip_norm_scale``)."""
    if clipnorm is None and global_clipnorm is None and clipvalue is None:
        return grads
    present = [(i, p.xp, g) for i, (p, g) in enumerate(zip(params, grads)) if g is not None]
    if global_clipnorm is not None and present:
        scale = present[0][1].clip_norm_scale([g for _, _, g in present], global_clipnorm)
        for i, xp, g in present:
            grads[i] = xp.multiply(g, scale)
    elif clipnorm is not None:
        for i, xp, g in present:
            grads[i] = xp.multiply(g, xp.clip_norm_scale([g], clipnorm))
    elif clipvalue is not None:
        for i, xp, g in present:
            grads[i] = xp.clip(g, -clipvalue, clipvalue)
    return grads
