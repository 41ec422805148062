"""Device random numbers on the op set's Philox stream (:mod:`magmadnn.backend.random`), and dropout.

Dropout is *not* cuDNN's: its generator cannot be reproduced on the host, and host/device parity tests train with
the same seed and need the same masks. It is one fused kernel on the stream: one ``rng.take()``, u rounded to x's
dtype, keep = u >= rate in that dtype, mask = keep * (1 / (1 - rate)), y = x * mask."""

from __future__ import annotations

import numpy as np

from pymagma import kernels as _k

from ..random import Stream as _Stream
from . import kernels as _dk
from ._common import (
    _shape,
)
from .elementwise import multiply


def _creation_ops(device: int | None) -> dict:
    """The random draws, allocating on GPU ``device`` (None: the current GPU)."""

    def uniform(rng, shape, low=0.0, high=1.0, dtype=np.float32):
        """One draw (``rng.take()``) of the Philox stream: ``low + (high - low) * u`` rounded to ``dtype``."""
        return _k.uniform(_shape(shape), low, high, seed=rng.seed, offset=rng.take(), dtype=dtype, device=device)

    def normal(rng, shape, mean=0.0, std=1.0, dtype=np.float32):
        """One draw (``rng.take()``): ``mean + std * z`` for the stream's Box-Muller normals z."""
        return _k.normal(_shape(shape), mean, std, seed=rng.seed, offset=rng.take(), dtype=dtype, device=device)

    return {"uniform": uniform, "normal": normal}


globals().update(_creation_ops(None))


def rng(seed=None):
    """A counter-based random stream (:class:`magmadnn.backend.random.Stream`); a fresh random key when None."""
    return _Stream(np.random.SeedSequence().generate_state(1, np.uint64)[0] if seed is None else seed)


def dropout_forward(x, rate, rng):
    """Inverted dropout on the op set's Philox stream (one ``rng.take()``), not cuDNN's: see the module docstring."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_forward: rate must be in [0, 1), got {rate}")
    if hasattr(rng, "take_slot"):  # graph capture: the offset is read from device memory (models/graphed.py)
        return _dk.dropout_at(x, float(rate), seed=rng.seed, offsets=rng.offsets, slot=rng.take_slot())
    return _dk.dropout(x, float(rate), seed=rng.seed, offset=rng.take())


def dropout_backward(dy, mask):
    return multiply(dy, mask)
