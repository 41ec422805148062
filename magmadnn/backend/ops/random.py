"""Random numbers: the counter-based stream of :mod:`magmadnn.backend.random`, and dropout drawn from it."""

from __future__ import annotations

from ._spec import op


@op
def rng(seed=None):
    """A :class:`.random.Stream` keyed by ``seed`` (a fresh random key when None)."""


@op
def uniform(rng, shape, low=0.0, high=1.0, dtype=...):
    """One draw: ``low + (high - low) * u`` rounded to ``dtype``."""


@op
def normal(rng, shape, mean=0.0, std=1.0, dtype=...):
    """One draw: ``mean + std * z`` rounded to ``dtype``."""


@op
def dropout_forward(x, rate, rng):
    """Inverted dropout -> ``(y, mask)``: one draw u of ``uniform(rng, x.shape, 0, 1, x.dtype)``, mask = 1/(1-rate)
    where u >= rate (compared in x's dtype) else 0, y = x * mask."""


@op
def dropout_backward(dy, mask):
    """``dy * mask``."""
