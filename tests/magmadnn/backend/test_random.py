"""The op set's random numbers and dropout (``ops/random.py``) on every backend: the RNG protocol (the same
draws as the host's), the dropout mask from the uniform stream."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.magmadnn.backend._conformance import arrays, get, put
from tests.magmadnn.backends import HOST


@given(x=arrays(shape=(40, 50), low=0.5, high=1.5), rate=st.sampled_from([0.0, 0.25, 0.5, 0.8]),
       seed=st.integers(0, 999))  # fmt: skip
def test_dropout_follows_the_rng_protocol(xp, x, rate, seed):
    stream = xp.rng(seed)
    y, mask = xp.dropout_forward(put(xp, x), rate, stream)
    assert stream.offset == 1  # one draw
    y, mask = get(xp, y, mask)
    u = HOST.uniform(HOST.rng(seed), x.shape, 0.0, 1.0, x.dtype)  # the protocol's draw, computed on the host
    expected = np.where(u >= x.dtype.type(rate), x.dtype.type(1.0 / (1.0 - rate)), 0).astype(x.dtype)
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_allclose(y, x * mask, rtol=1e-6)
    assert abs((mask != 0).mean() - (1 - rate)) < 0.07
    dy = np.full(x.shape, 2.0, x.dtype)
    np.testing.assert_allclose(get(xp, xp.dropout_backward(*put(xp, dy, mask))), 2.0 * mask)


def test_dropout_rate_checked(xp):
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\), got 1.0"):
        xp.dropout_forward(xp.ones((3,)), 1.0, xp.rng(0))


def test_random_follows_the_rng_protocol(xp):
    stream = xp.rng(3)
    a = get(xp, xp.uniform(stream, (201,), -0.5, 0.25, np.float32))
    assert stream.state == {"seed": 3, "offset": 1}
    np.testing.assert_array_equal(a, get(xp, xp.uniform(xp.rng(3), (201,), -0.5, 0.25, np.float32)))
    assert a.dtype == np.float32 and a.min() >= -0.5 and a.max() <= 0.25
    assert not np.array_equal(a, get(xp, xp.uniform(stream, (201,), -0.5, 0.25, np.float32)))  # the next draw
    assert not np.array_equal(a, get(xp, xp.uniform(xp.rng(4), (201,), -0.5, 0.25, np.float32)))
    # the same numbers as the host's NumPy Philox: the protocol, not each backend's own generator
    np.testing.assert_array_equal(a, HOST.uniform(HOST.rng(3), (201,), -0.5, 0.25, np.float32))
    n = get(xp, xp.normal(xp.rng(0), (20000,), 2.0, 0.5, np.float64))
    np.testing.assert_allclose(n, HOST.normal(HOST.rng(0), (20000,), 2.0, 0.5, np.float64), rtol=1e-12, atol=1e-12)
    assert n.dtype == np.float64 and abs(n.mean() - 2.0) < 0.02 and abs(n.std() - 0.5) < 0.02
