"""TrailingAddFunction (the sum that residual Adds' and PositionEmbedding's call plans run): the same output and
gradients, bit for bit, as AddFunction with its ``sum_to_shape``, on the host and on the simulated device; and
``trailing_lead``, which decides when it applies."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend
from magmadnn import functional as F
from magmadnn.autograd import Tensor

RNG = np.random.default_rng(38)


@pytest.mark.parametrize(("a", "b", "lead"), [
    ((2, 5, 4), (2, 5, 4), None), ((2, 5, 4), (5, 4), (0,)), ((3, 2, 5, 4), (4,), (0, 1, 2)),
    ((2, 5, 4), (1, 5, 4), False), ((2, 5, 4), (5, 1), False), ((5, 4), (2, 5, 4), False), ((2, 3), (), False),
    ((2, 5, 4), (4, 5), False)])
def test_trailing_lead(a, b, lead):
    assert F.trailing_lead(a, b) == lead


def _run(fn, xp, a, b, needs, upstream, **params):
    ta = Tensor(xp.asarray(a), requires_grad=needs[0], backend=xp)
    tb = Tensor(xp.asarray(b), requires_grad=needs[1], backend=xp)
    out = fn.apply(ta, tb, **params)
    F.sum(F.multiply(out, Tensor(xp.asarray(upstream), backend=xp))).backward()
    return [xp.to_numpy(out.data)] + [None if t.grad is None else xp.to_numpy(t.grad) for t in (ta, tb)]


def _cases():
    for a, b in (((2, 5, 4), (2, 5, 4)), ((3, 5, 4), (5, 4)), ((2, 3, 7, 4), (4,))):
        for needs in ((True, True), (True, False), (False, True)):
            yield a, b, needs


@pytest.mark.parametrize("where", ["host", pytest.param("device", marks=pytest.mark.native)])
def test_trailing_add_equals_add_bit_for_bit(where):
    import contextlib

    from pymagma import simulator

    with simulator.simulated("full") if where == "device" else contextlib.nullcontext():
        xp = backend.get("gpu" if where == "device" else "cpu")
        for a_shape, b_shape, needs in _cases():
            a, b = RNG.standard_normal(a_shape).astype(np.float32), RNG.standard_normal(b_shape).astype(np.float32)
            upstream = RNG.standard_normal(a_shape).astype(np.float32)
            lead = F.trailing_lead(a_shape, b_shape)
            got = _run(F.TrailingAddFunction, xp, a, b, needs, upstream, lead=lead)
            want = _run(F.AddFunction, xp, a, b, needs, upstream)
            for g, w in zip(got, want, strict=True):
                assert (g is None) == (w is None)
                if g is not None:
                    assert g.shape == w.shape
                    np.testing.assert_array_equal(g, w)
            np.testing.assert_allclose(got[0], a + b, rtol=1e-6)
            if needs[1]:  # an independent reference for the reduced gradient
                np.testing.assert_allclose(got[2], upstream.reshape(-1, *b_shape).sum(0), rtol=1e-5, atol=1e-5)
