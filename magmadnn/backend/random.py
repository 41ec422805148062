"""The op set's random-number protocol: one counter-based stream that every backend draws identically.

A :class:`Stream` is a Philox4x32-10 key (``seed``, 64 bits) and a draw counter (``offset``). Each draw of ``n``
values (``uniform``, ``normal``, a dropout mask) takes the next offset, so a draw is a pure function of
(seed, offset, n): the host computes it in NumPy (:func:`uniform_doubles`), the device with pymagma's random
kernels, and the two agree bit for bit before the final rounding to the output dtype. That is what lets the same
seeded model train to the same losses on either backend.

Value ``2j`` and ``2j + 1`` of a draw come from counter ``(j, offset)``: four 32-bit words give two 53-bit doubles
in (0, 1]; normals are Box-Muller on the same pair (as ``pymagma.kernels.uniform``/``normal`` define them).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Stream", "uniform_doubles", "normal_doubles", "philox4x32"]

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)
_U64 = 2**64
_refusal: str | None = None  # why no draw may take an offset now (while models.graphed captures a step), else None


class Stream:
    """A seeded counter-based random stream: ``take()`` hands out one offset per draw."""

    __slots__ = ("seed", "offset")

    def __init__(self, seed: int = 0, offset: int = 0):
        self.seed, self.offset = _u64(seed, "seed"), _u64(offset, "offset")

    def take(self) -> int:
        """The offset of the next draw (and advance past it)."""
        if _refusal is not None:
            raise RuntimeError(_refusal)
        off = self.offset
        self.offset = (off + 1) % _U64
        return off

    @property
    def state(self) -> dict:
        return {"seed": self.seed, "offset": self.offset}

    @state.setter
    def state(self, value: dict) -> None:
        try:
            seed, offset = value["seed"], value["offset"]
        except (TypeError, KeyError):
            raise ValueError(f"Stream.state: expected a dict with 'seed' and 'offset', got {value!r}") from None
        self.seed, self.offset = _u64(seed, "seed"), _u64(offset, "offset")

    def __repr__(self) -> str:
        return f"Stream(seed={self.seed}, offset={self.offset})"


def _u64(value, what: str) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise TypeError(f"Stream: {what} must be an integer, got {value!r}") from None
    if v != value or not 0 <= v < _U64:
        raise ValueError(f"Stream: {what} must be an integer in [0, 2**64), got {value!r}")
    return v


def philox4x32(j: np.ndarray, offset: int, seed: int) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 of counters ``(j_lo, j_hi, offset_lo, offset_hi)`` under key ``seed``: four uint64 word arrays."""
    j = np.asarray(j, dtype=np.uint64)
    c0, c1 = j & _MASK, j >> np.uint64(32)
    c2 = np.full_like(j, offset & 0xFFFFFFFF)
    c3 = np.full_like(j, offset >> 32)
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for _ in range(10):
        p0, p1 = c0 * _M0, c2 * _M1
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _MASK, \
            (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _MASK
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _unit(hi, lo) -> np.ndarray:
    bits = ((hi >> np.uint64(5)) << np.uint64(26)) | (lo >> np.uint64(6))
    return (bits.astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)


def _pairs(n: int, seed: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    w = philox4x32(np.arange((n + 1) // 2, dtype=np.uint64), offset, seed)
    return _unit(w[0], w[1]), _unit(w[2], w[3])


def uniform_doubles(n: int, seed: int, offset: int) -> np.ndarray:
    """The ``n`` doubles in (0, 1] of draw ``offset`` of the stream keyed by ``seed``."""
    u0, u1 = _pairs(n, seed, offset)
    return np.stack([u0, u1], axis=1).ravel()[:n]


def normal_doubles(n: int, seed: int, offset: int) -> np.ndarray:
    """The ``n`` standard normals (Box-Muller on the uniform pairs) of draw ``offset``."""
    u0, u1 = _pairs(n, seed, offset)
    radius = np.sqrt(-2.0 * np.log(u0))
    angle = 2.0 * np.pi * u1
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1).ravel()[:n]
