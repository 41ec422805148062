"""Small helpers shared by the pymagma tests."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import dtypes


def _bfloat16():
    try:
        return dtypes.bfloat16().type
    except TypeError:
        return None


#: ml_dtypes' bfloat16 scalar type, or None where ml_dtypes is not installed.
BF16 = _bfloat16()
#: The bfloat16 case of a dtype parametrisation: the type, or a skip that names what to install.
BF16_CASE = BF16 if BF16 is not None else pytest.param(None, id="bfloat16",
                                                       marks=pytest.mark.skip(reason=dtypes.BFLOAT16_HINT))


def random_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard-normal values of ``dtype`` (complex dtypes get a random imaginary part too)."""
    v = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def pivoting_matrices(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Well-conditioned square matrices (``shape[-2] == shape[-1] == n``) whose LU must swap rows: random values plus
    ``2n + 3 max|value|`` on the diagonal (dominant by modulus and by |Re| + |Im| alike, complex values included),
    then the rows cyclically shifted by 1..n-1, so every column's large entry is off the diagonal and partial
    pivoting swaps at the first step (n = 1 has nothing to swap)."""
    n = shape[-1]
    v = random_values(rng, shape, dtype)
    a = v + ((2 * n + 3 * float(np.abs(v).max(initial=0.0))) * np.eye(n)).astype(dtype)
    return a if n < 2 else np.roll(a, int(rng.integers(1, n)), axis=-2)


def q_from_reflectors(h: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The m x m ``Q = H_1 ... H_k`` of LAPACK's geqrf output, one reflector at a time (an independent oracle)."""
    m = h.shape[0]
    q = np.eye(m, dtype=np.result_type(h, np.float64))
    for i in range(len(tau)):
        v = np.zeros(m, q.dtype)
        v[i], v[i + 1:] = 1, h[i + 1:, i]
        q = q @ (np.eye(m) - tau[i] * np.outer(v, np.conj(v)))
    return q
