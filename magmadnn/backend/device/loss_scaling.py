"""Device dynamic loss scaling: the finite flag, the undo of a skipped update and Keras' scale rule, all kernels
(nothing read back)."""

from __future__ import annotations

from pymagma import kernels as _k

from ._common import (
    _same_dtype,
)


def finite_flag(arrays):
    """1 where ``sum(0 * a)`` of every array is 0, 0 where one is NaN (0 * inf is NaN): two small kernels per array
    and one compare (NaN != NaN), nothing read back."""
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise ValueError(f"finite_flag: expected a non-empty list of arrays, got {arrays!r}")
    _same_dtype("finite_flag", *arrays)
    probe = None
    for a in arrays:
        part = _k.reduce("sum", _k.affine(a, 0.0, 0.0))
        probe = part if probe is None else _k.binary("add", probe, part)
    return _k.binary("equal", probe, probe)


def revert_update(a, saved, keep) -> None:
    """``a = keep ? a : saved`` by the select kernel, written into ``a`` (each element reads its own index)."""
    _same_dtype("revert_update", a, saved, keep)
    if a.shape != saved.shape or keep.shape != ():
        raise ValueError(f"revert_update: a {a.shape} and saved {saved.shape} must match and keep be 0-d, got keep "
                         f"{keep.shape}")
    _k.where(keep, a, saved, out=a)


def loss_scale_update(scale, counter, finite, growth_steps) -> None:
    """Keras' rule without a branch: grow = finite * (counter + 1 == growth_steps); counter = finite (counter + 1)
    (1 - grow); scale *= 0.5 + finite (grow + 0.5) (0.5, 1 or 2: exact)."""
    _same_dtype("loss_scale_update", scale, counter, finite)
    if scale.shape != () or counter.shape != () or finite.shape != ():
        raise ValueError("loss_scale_update: scale, counter and finite must be 0-d arrays")
    next_count = _k.binary("add", counter, 1.0)
    grow = _k.binary("multiply", finite, _k.binary("equal", next_count, float(growth_steps)))
    _k.binary("multiply", next_count, _k.binary("multiply", finite, _k.affine(grow, -1.0, 1.0)), out=counter)
    _k.binary("multiply", scale, _k.affine(_k.binary("multiply", finite, _k.affine(grow, 1.0, 0.5)), 1.0, 0.5),
              out=scale)
