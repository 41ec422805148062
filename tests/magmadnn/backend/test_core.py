"""The op set's creation and transfer ops (``ops/core.py``) on every backend."""

from __future__ import annotations

import numpy as np

from tests.magmadnn.backend._conformance import get, put


def test_creation_ops(xp):
    assert xp.asarray([1.0, 2.0]).dtype == np.float32
    assert xp.asarray(np.array([1.0, 2.0])).dtype == np.float64
    assert xp.asarray(np.float64(2.0)).dtype == np.float64
    assert xp.asarray(np.array([1, 2])).dtype == np.int64
    assert xp.asarray([1, 2], dtype=np.float64).dtype == np.float64
    z = xp.zeros((2, 3), np.float64)
    assert z.shape == (2, 3) and z.dtype == np.float64 and not get(xp, z).any()
    assert xp.zeros((2,)).dtype == np.float32
    assert get(xp, xp.ones((2,), np.float32)).tolist() == [1.0, 1.0]
    assert get(xp, xp.full((2, 2), 7.5, np.float32)).tolist() == [[7.5, 7.5], [7.5, 7.5]]
    a = put(xp, np.arange(6.0).reshape(2, 3))
    assert xp.zeros_like(a).shape == (2, 3) and xp.zeros_like(a).dtype == np.float64
    c = xp.copy(a)
    xp.sgd_update(c, xp.ones((2, 3), np.float64), None, 1.0)  # an in-place op on the copy leaves a alone
    np.testing.assert_array_equal(get(xp, a), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(get(xp, c), np.arange(6.0).reshape(2, 3) - 1)
    assert isinstance(xp.to_numpy(a), np.ndarray)
