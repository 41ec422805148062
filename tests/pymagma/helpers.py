"""Small helpers shared by the pymagma tests."""

from __future__ import annotations

import numpy as np


def random_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard-normal values of ``dtype`` (complex dtypes get a random imaginary part too)."""
    v = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)
