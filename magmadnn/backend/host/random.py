"""Host random numbers: the op set's counter-based Philox stream (:mod:`magmadnn.backend.random`) and dropout
drawn from it."""

from __future__ import annotations

import math

import numpy as np

from ..random import Stream, normal_doubles, uniform_doubles


def rng(seed=None) -> Stream:
    """A counter-based random stream (the op set's RNG protocol, :mod:`magmadnn.backend.random`)."""
    return Stream(np.random.SeedSequence().generate_state(1, np.uint64)[0] if seed is None else seed)


def uniform(rng, shape, low=0.0, high=1.0, dtype=np.float32):
    """Draw ``rng.take()``: ``low + (high - low) * u`` for the stream's doubles u in (0, 1], rounded to ``dtype``."""
    n = math.prod(shape)
    u = uniform_doubles(n, rng.seed, rng.take())
    return (low + (high - low) * u).astype(dtype).reshape(shape)


def normal(rng, shape, mean=0.0, std=1.0, dtype=np.float32):
    """Draw ``rng.take()``: ``mean + std * z`` for the stream's Box-Muller normals z, rounded to ``dtype``."""
    n = math.prod(shape)
    z = normal_doubles(n, rng.seed, rng.take())
    return (mean + std * z).astype(dtype).reshape(shape)


def dropout_forward(x, rate, rng):
    """Inverted dropout: ``(x * mask, mask)``; mask is 1/(1-rate) where the draw's uniform (x's dtype) >= rate."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_forward: rate must be in [0, 1), got {rate}")
    u = uniform(rng, x.shape, 0.0, 1.0, x.dtype)
    mask = np.greater_equal(u, x.dtype.type(rate)).astype(x.dtype)
    mask *= x.dtype.type(1.0 / (1.0 - rate))
    return x * mask, mask


def dropout_backward(dy, mask):
    return dy * mask
