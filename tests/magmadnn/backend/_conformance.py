"""Helpers of the op set's conformance tests (``tests/magmadnn/backend/test_<topic>.py``, one file per topic of
:mod:`magmadnn.backend.ops`): every op against independent references (written plainly with Python loops and the
math module; softmax, convolution, pooling and batch norm from ``tests/reference.py``), run on every backend through
the ``xp`` fixture of this folder's ``conftest.py``.

Inputs are made with NumPy and moved in with ``asarray`` (:func:`put`); results come back through ``to_numpy``
(:func:`get`): the only two ops that cross the boundary.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.strategies import FLOATS


def put(xp, *arrays):
    """Copies of NumPy arrays as backend arrays (one or a tuple): in-place ops never reach the test's own arrays."""
    out = tuple(None if a is None else xp.asarray(np.array(a, copy=True)) for a in arrays)
    return out[0] if len(out) == 1 else out


def get(xp, *arrays):
    """Backend arrays as NumPy arrays (one or a tuple)."""
    out = tuple(np.asarray(xp.to_numpy(a)) for a in arrays)
    return out[0] if len(out) == 1 else out


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


@st.composite
def arrays(draw, shape=None, min_dims=1, max_dims=3, max_side=4, low=-3.0, high=3.0, dtype=None):
    if shape is None:
        shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=min_dims, max_size=max_dims)))
    dtype = dtype or draw(st.sampled_from(FLOATS))
    seed = draw(st.integers(0, 2**31 - 1))
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def elementwise_reference(fn, *arrs):
    """Apply a scalar Python function element by element (with NumPy broadcasting of the operands)."""
    b = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in arrs])
    out = np.empty(b[0].shape)
    for pos in np.ndindex(out.shape):
        out[pos] = fn(*(float(a[pos]) for a in b))
    return out


def state_arrays(seed, n=5, dtype=np.float64):
    """Four arrays of n values for an in-place update: two normal (e.g. parameter and gradient), two in [0.1, 1)
    (e.g. moments)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(2)] + [rng.uniform(0.1, 1, n).astype(dtype)
                                                                       for _ in range(2)]  # fmt: skip
