"""The op set's pooling (``ops/pooling.py``) on every backend, against the loops of ``tests/reference.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reference
from tests.magmadnn.backend._conformance import get, put, tol
from tests.strategies import FLOATS, pool_cases

#: The reference mode of each op-set pooling mode: its average counts only the real elements of a window.
REFERENCE_POOL_MODE = {"max": "max", "avg": "avg_exclude_pad"}


@pytest.mark.parametrize("mode", ["max", "avg"])
@given(case=pool_cases(dtypes=FLOATS, values="ties", asymmetric=True), seed=st.integers(0, 99))
def test_pool2d_forward_backward_against_loops(xp, mode, case, seed):
    x, window, stride, padding = case
    ref_mode = REFERENCE_POOL_MODE[mode]
    dx_ = put(xp, x)
    y, ctx = xp.pool2d_forward(dx_, mode, window, stride, padding)
    assert y.dtype == x.dtype
    np.testing.assert_allclose(get(xp, y), reference.pool2d_ref(x, window, stride, padding, ref_mode), **tol(x.dtype))
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(x.dtype)
    dx_ref = reference.pool2d_backward_ref(x, dy, window, stride, padding, ref_mode)  # ties: the first maximum gets it
    dx = xp.pool2d_backward(put(xp, dy), dx_, y, ctx, mode, window, stride, padding)
    assert dx.shape == x.shape
    np.testing.assert_allclose(get(xp, dx), dx_ref, **tol(x.dtype))


def test_pool2d_unknown_mode(xp):
    with pytest.raises(ValueError, match="unknown mode 'min'"):
        xp.pool2d_forward(xp.zeros((1, 1, 2, 2)), "min", (2, 2), (2, 2))
