"""Elementwise binary kernels on two arrays of different shapes: their broadcast shape is worked out (and checked)
once per pair of shapes and looked up after; the result equals NumPy's bit for bit every time, a pair that does not
broadcast is refused every time."""

from __future__ import annotations

import numpy as np
import pytest

from pymagma import kernels, simulator
from pymagma.kernels import elementwise

RNG = np.random.default_rng(38)
PAIRS = [((3, 1), (1, 4)), ((3, 1), (1, 5)), ((2, 3, 4), (3, 4)), ((3, 4), (2, 3, 4)), ((1, 16, 8), (16, 8)),
         ((2, 1, 4), (3, 1))]


def test_broadcast_binaries_equal_numpy_on_every_call():
    import pymagma

    with simulator.simulated("full"):
        elementwise._BROADCAST_SHAPES.clear()
        elementwise._BINARY_LAUNCHES.clear()  # (a kept launch looks no shape up)
        for _ in range(2):  # the first round works each pair's shape out, the second looks it up
            for sa, sb in PAIRS:
                a, b = (RNG.standard_normal(s).astype(np.float32) for s in (sa, sb))
                for op, want in (("add", a + b), ("multiply", a * b), ("subtract", a - b)):
                    got = kernels.binary(op, pymagma.asarray(a), pymagma.asarray(b)).get()
                    assert got.shape == want.shape
                    np.testing.assert_array_equal(got, want)
        assert set(elementwise._BROADCAST_SHAPES) == set(PAIRS)


def test_shapes_that_do_not_broadcast_are_refused_every_time():
    import pymagma

    with simulator.simulated("null"):
        a, b, c = (pymagma.zeros(s, np.float32) for s in ((2, 3), (3,), (4,)))
        kernels.binary("add", a, b)
        for _ in range(2):
            with pytest.raises(ValueError, match=r"do not broadcast"):
                kernels.binary("add", a, c)
        assert ((2, 3), (4,)) not in elementwise._BROADCAST_SHAPES
