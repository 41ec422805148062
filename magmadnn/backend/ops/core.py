"""Creation and transfer: new arrays of a backend, and the one op that moves data to the host."""

from __future__ import annotations

from ._spec import op, optional


@op
def asarray(x, dtype=None):
    """``x`` (host array, scalar, nested list or this backend's array) as this backend's array; host floats of
    Python type become float32, NumPy arrays keep their dtype unless ``dtype`` is given."""


@op
def to_numpy(a):
    """A host NumPy copy of ``a``: the only op that moves data to the host."""


@op
def zeros(shape, dtype=...):
    """A new zero array (float32 by default)."""


@op
def ones(shape, dtype=...):
    """A new array of ones."""


@op
def full(shape, value, dtype=...):
    """A new array filled with ``value``."""


@op
def zeros_like(a):
    """Zeros of ``a``'s shape and dtype."""


@op
def copy(a):
    """A new array equal to ``a``."""


@optional
def constant(value, dtype=None):
    """``asarray(value, dtype)`` for a constant (a scalar operand, a loss's fixed matrix): made once per value and
    kept, never written (no op writes its inputs), so that a step captured as a graph after an eager run of it
    uploads nothing. Callers without it use ``asarray`` (``functional._base.constant``)."""


@optional
def for_index(n):
    """The same backend bound to device ``n`` (a backend with several devices)."""
