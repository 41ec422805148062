"""The op set's optional host staging and flat packing (``ops/collectives.py``, what ``magmadnn.distributed``
uses) on the backends that have them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.magmadnn.backend._conformance import get, put
from tests.strategies import FLOATS


def _optional(xp, *names):
    if not all(hasattr(xp, n) for n in names):
        pytest.skip(f"backend {xp.name!r} has no {', '.join(names)} (optional: magmadnn.distributed does without)")


@pytest.mark.parametrize("dtype", FLOATS)
def test_host_staging(xp, dtype):
    _optional(xp, "host_empty", "copy_to_host")
    host = xp.host_empty((2, 3), dtype)
    assert isinstance(host, np.ndarray) and host.shape == (2, 3) and host.dtype == dtype and host.flags.c_contiguous
    want = np.arange(6, dtype=dtype).reshape(2, 3)
    out = xp.host_empty((6,), dtype)
    assert xp.copy_to_host(xp.multiply(put(xp, want), 2.0), out) is out  # the queued work is done first
    np.testing.assert_array_equal(out, 2 * want.reshape(-1))
    assert xp.copy_to_host(xp.zeros((0,), dtype), np.empty(0, dtype)).size == 0
    for bad in (np.empty(5, dtype), np.empty(6, np.int32), np.empty((6, 2), dtype)[:, 0]):
        with pytest.raises(ValueError, match="copy_to_host"):
            xp.copy_to_host(put(xp, want), bad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_flat_pack_and_unpack(xp, dtype):
    _optional(xp, "flat_pack", "flat_unpack")
    a, b = np.arange(6, dtype=dtype).reshape(2, 3), np.array([7.0, -8.0], dtype)
    flat = xp.zeros((8,), dtype)
    assert xp.flat_pack([put(xp, a), put(xp, b)], 3.0, flat) is None
    np.testing.assert_array_equal(get(xp, flat), 3 * np.concatenate([a.reshape(-1), b]))
    parts = xp.flat_unpack(flat, [(2, 3), (2,)], 3.0)
    assert [p.shape for p in parts] == [(2, 3), (2,)] and all(p.dtype == dtype for p in parts)
    np.testing.assert_array_equal(get(xp, parts[0]), a)
    np.testing.assert_array_equal(get(xp, parts[1]), b)
    head = xp.flat_unpack(flat, [(2,)], 1.0)  # the values at the start; flat may hold more
    np.testing.assert_array_equal(get(xp, head[0]), 3 * a.reshape(-1)[:2])
    six = xp.full((6,), 5.0, dtype)
    xp.flat_pack([put(xp, a)], 0.0, six)
    np.testing.assert_array_equal(get(xp, six), np.zeros(6))
    with pytest.raises(ValueError, match="flat_pack"):
        xp.flat_pack([put(xp, a)], 1.0, flat)  # 6 values into 8
