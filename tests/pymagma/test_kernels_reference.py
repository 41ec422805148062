"""A plain NumPy Philox4x32-10 (the reference for the GPU random-number tests), checked against known answers."""

from __future__ import annotations

import numpy as np
import pytest

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox_reference(counters, seed):
    """Philox4x32-10 in NumPy (uint64 arithmetic, masked to 32 bits): counters (n, 4) uint64 -> (n, 4) words."""
    c = counters.astype(np.uint64).copy()
    mask = np.uint64(0xFFFFFFFF)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for _ in range(10):
        p0, p1 = np.uint64(M0) * c[:, 0], np.uint64(M1) * c[:, 2]
        hi0, lo0, hi1, lo1 = p0 >> np.uint64(32), p0 & mask, p1 >> np.uint64(32), p1 & mask
        c = np.stack([hi1 ^ c[:, 1] ^ k0, lo1, hi0 ^ c[:, 3] ^ k1, lo0], axis=1)
        k0, k1 = (k0 + np.uint64(W0)) & mask, (k1 + np.uint64(W1)) & mask
    return c


def reference_uniform_pairs(n, seed, offset):
    j = np.arange((n + 1) // 2, dtype=np.uint64)
    counters = np.stack([j & np.uint64(0xFFFFFFFF), j >> np.uint64(32), np.full_like(j, offset & 0xFFFFFFFF),
                         np.full_like(j, offset >> 32)], axis=1)
    w = philox_reference(counters, seed)

    def unit(hi, lo):
        return (((hi >> np.uint64(5)) << np.uint64(26)) | (lo >> np.uint64(6))).astype(np.float64) * 2.0**-53 \
            + 2.0**-54

    return unit(w[:, 0], w[:, 1]), unit(w[:, 2], w[:, 3])


@pytest.mark.parametrize("counter, key, expected", [
    ((0, 0, 0, 0), 0, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, 2**64 - 1, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0x299F31D0 << 32) | 0xA4093822,
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_reference_matches_known_answers(counter, key, expected):
    """Known-answer vectors of Philox4x32-10 published with the Random123 library."""
    got = philox_reference(np.array([counter], np.uint64), key)[0]
    assert tuple(int(v) for v in got) == expected


def test_uniform_pairs_are_in_the_open_unit_interval_and_distinct():
    u0, u1 = reference_uniform_pairs(10_001, seed=3, offset=5)
    both = np.concatenate([u0, u1])
    assert both.min() > 0.0 and both.max() < 1.0
    assert len(np.unique(both)) == both.size
    assert abs(both.mean() - 0.5) < 0.01
