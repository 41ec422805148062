"""The op set's recurrent ops (``ops/recurrent.py``: LSTM and GRU over a whole sequence) on every backend: the
forward against the step-by-step references of ``tests/reference.py``, the backward against central differences of
that reference (float64, so the check is tight)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import reference
from tests.conftest import examples
from tests.magmadnn.backend._conformance import get, put, tol
from tests.strategies import FLOATS

RECURRENT = {"lstm": (4, reference.lstm_ref), "gru": (3, reference.gru_ref)}


def _recurrent_case(kind, n, steps, units, features_seed):
    gates, ref = RECURRENT[kind]
    rng = np.random.default_rng(features_seed)
    args = [rng.uniform(-2, 2, (n, steps, gates * units)), rng.uniform(-1, 1, (units, gates * units))]
    if kind == "gru":
        args.append(rng.uniform(-1, 1, gates * units))
    return args, ref


def _recurrent_vjp_reference(ref, args, dy, return_sequences, eps=1e-6):
    """Central differences of sum(ref(args) * dy) with respect to every argument."""
    def scalar(values):
        y = ref(*values)
        return float(np.sum((y if return_sequences else y[:, -1]) * dy))

    grads = []
    for k, a in enumerate(args):
        g = np.zeros_like(a)
        for pos in np.ndindex(a.shape):
            plus, minus = [v.copy() for v in args], [v.copy() for v in args]
            plus[k][pos] += eps
            minus[k][pos] -= eps
            g[pos] = (scalar(plus) - scalar(minus)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@given(n=st.integers(1, 3), steps=st.integers(1, 4), units=st.integers(1, 3), seed=st.integers(0, 999),
       sequences=st.booleans(), dtype=st.sampled_from(FLOATS))
def test_recurrent_forward_against_the_reference(xp, kind, n, steps, units, seed, sequences, dtype):
    args, ref = _recurrent_case(kind, n, steps, units, seed)
    y, _ = getattr(xp, f"{kind}_forward")(*put(xp, *[a.astype(dtype) for a in args]), return_sequences=sequences)
    expected = ref(*[a.astype(dtype) for a in args])
    got = get(xp, y)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected if sequences else expected[:, -1], **tol(dtype))


@pytest.mark.parametrize("kind", sorted(RECURRENT))
@settings(max_examples=examples(10))  # each example differentiates the reference numerically
@given(n=st.integers(1, 2), steps=st.integers(1, 3), units=st.integers(1, 2), seed=st.integers(0, 999),
       sequences=st.booleans())
def test_recurrent_backward_against_differences_of_the_reference(xp, kind, n, steps, units, seed, sequences):
    args, ref = _recurrent_case(kind, n, steps, units, seed)
    dy = np.random.default_rng(seed + 1).standard_normal((n, steps, units) if sequences else (n, units))
    moved = put(xp, *args)
    _, ctx = getattr(xp, f"{kind}_forward")(*moved, return_sequences=sequences)
    grads = getattr(xp, f"{kind}_backward")(put(xp, dy), moved[1], ctx)
    expected = _recurrent_vjp_reference(ref, args, dy, sequences)
    assert len(grads) == len(expected)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(get(xp, g), e, rtol=1e-6, atol=1e-8)
