"""The op set's dynamic loss scaling ops (``ops/loss_scaling.py``: finite_flag, revert_update,
loss_scale_update) on every backend, against Keras' rule written plainly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tests.magmadnn.backend._conformance import get, put
from tests.strategies import FLOATS


@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), count=st.integers(1, 3), bad=st.sampled_from([None, np.inf, -np.inf, np.nan]),
       seed=st.integers(0, 2**31 - 1))
def test_finite_flag(xp, dtype, count, bad, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=rng.integers(1, 5, 2)).astype(dtype) * dtype(1e30) for _ in range(count)]
    if bad is not None:
        arrays[rng.integers(count)].flat[0] = bad
    got = xp.finite_flag([put(xp, a) for a in arrays])
    expected = 1.0 if all(math.isfinite(v) for a in arrays for v in a.ravel().tolist()) else 0.0
    assert got.shape == () and got.dtype == dtype and float(get(xp, got)) == expected


def test_revert_update_keeps_or_restores_bit_for_bit(xp):
    a0 = np.array([1.5, np.nan, -np.inf, 2.0], np.float32)
    saved0 = np.array([-1.0, 2.0, 3.0, 4.25], np.float32)
    for keep, expected in ((1.0, a0), (0.0, saved0)):
        a, saved = put(xp, a0, saved0)
        xp.revert_update(a, saved, xp.asarray(np.array(keep, np.float32)))
        np.testing.assert_array_equal(get(xp, a), expected)
    with pytest.raises(ValueError, match="0-d"):
        xp.revert_update(put(xp, a0), put(xp, saved0), put(xp, np.ones(1, np.float32)))


def test_loss_scale_update_follows_keras_rule(xp):
    """A flag sequence through the op against the rule written plainly: grow after 3 finite steps in a row,
    halve and reset on a non-finite one."""
    flags = [1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1]
    scale, counter = put(xp, np.array(8.0, np.float32), np.array(0.0, np.float32))
    s, c = 8.0, 0
    for f in flags:
        xp.loss_scale_update(scale, counter, xp.asarray(np.array(f, np.float32)), 3)
        if f:
            c += 1
            if c == 3:
                s, c = s * 2, 0
        else:
            s, c = s / 2, 0
        assert (float(get(xp, scale)), float(get(xp, counter))) == (s, c)
    with pytest.raises(TypeError, match="dtype"):
        xp.loss_scale_update(scale, counter, xp.asarray(np.array(1.0)), 3)
