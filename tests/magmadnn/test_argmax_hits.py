"""The host fast paths of fit's counting (the argmax hit count, the tally's add) give exactly what the backend op
chain gives: the same backend run through a proxy with another name takes the op chain."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from magmadnn import metrics
from magmadnn._argmax_hits import _host_hits, argmax_hits
from magmadnn.backend import host
from magmadnn.models.step import Tally


class _OpChain:
    """The host backend under another name: the code paths that are not host-only."""

    name = "host-op-chain"

    def __getattr__(self, attr):
        return getattr(host, attr)


CHAIN = _OpChain()
# small integers make ties common; NaN and infinities are in
SCORES = st.sampled_from([0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf, 0.5])


def _same(a, b):
    assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.float16]),
       tokens=st.sampled_from([None, 1, 3]), ignore=st.sampled_from([None, 0, -100]))
def test_host_hits_equal_the_op_chain_and_numpy(data, dtype, tokens, ignore):
    n, c = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 6))
    shape = (n, c) if tokens is None else (n, tokens, c)
    outputs = data.draw(hnp.arrays(dtype, shape, elements=SCORES))
    labels = data.draw(hnp.arrays(np.int64, shape[:-1], elements=st.integers(0 if ignore is None else -100, c - 1)))
    if ignore is None:
        labels = np.clip(labels, 0, c - 1)
    metric = metrics.SparseCategoricalAccuracy() if ignore is None else metrics.Accuracy(ignore_index=ignore)
    staged = metric.stage(labels, shape, np.dtype(dtype))
    fast, chain = argmax_hits(outputs, staged, host), argmax_hits(outputs, staged, CHAIN)
    _same(fast, chain)
    # an independent count: the first NaN, else the first highest score, equal to a counted label
    flat, truth = outputs.reshape(-1, c), labels.reshape(-1)
    first = np.array([np.flatnonzero(np.isnan(r))[0] if np.isnan(r).any() else np.flatnonzero(r == r.max())[0]
                      for r in flat])
    kept = np.ones_like(truth, bool) if ignore is None else truth != ignore
    expected = np.count_nonzero((first == truth) & kept)
    if tokens is not None and ignore is None:
        expected *= n / truth.size
    assert float(fast) == pytest.approx(expected, rel=1e-3)


def test_one_hot_and_soft_targets_count_as_the_op_chain():
    rng = np.random.default_rng(0)
    outputs = rng.integers(0, 3, (64, 5)).astype(np.float32)  # ties everywhere
    targets = rng.random((64, 5)).astype(np.float32)
    metric = metrics.CategoricalAccuracy()
    for y in (targets, np.eye(5, dtype=np.float32)[rng.integers(0, 5, 64)]):
        _same(metric.hits(outputs, y, host), metric.hits(outputs, y, CHAIN))


def test_the_host_path_only_takes_what_it_counts_exactly():
    """Outside NumPy float32/float64 inputs the op chain answers (a float16 count of many rows may round)."""
    outputs, staged = np.zeros((4001, 2), np.float16), np.zeros(4001, np.float16)  # 4001: no float16
    _same(argmax_hits(outputs, staged, host), argmax_hits(outputs, staged, CHAIN))
    assert _host_hits(outputs, staged) is None
    assert _host_hits(outputs.astype(np.float32), staged) is None  # labels staged in another dtype
    assert _host_hits(outputs.astype(np.float32), staged.astype(np.float32)) == 4001


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the ops' inf * 0
@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.tuples(st.sampled_from(["loss", "acc"]),
                                 st.floats(-1e6, 1e6, width=32) | st.sampled_from([np.nan, np.inf, -0.0])),
                       max_size=8),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_host_tally_adds_equal_the_op_chain(values, dtype):
    fast, chain = Tally(host, ["loss", "acc"], dtype), Tally(CHAIN, ["loss", "acc"], dtype)
    start = fast.state()
    for name, v in values:
        for tally in (fast, chain):
            tally.add(name, np.sum(np.asarray([v], dtype)), 1)  # np.sum gives a NumPy scalar, as the metrics do
    np.testing.assert_array_equal(fast.sums, chain.sums)
    assert np.signbit(fast.sums).tolist() == np.signbit(chain.sums).tolist()
    assert fast.counts == chain.counts and fast.sums.dtype == chain.sums.dtype
    np.testing.assert_array_equal(start[0], 0.0)  # a state taken before is not changed by later adds


def test_host_tally_keeps_other_values_to_the_op_chain():
    """A 0-d array or a value of another dtype takes the ops (the sums' dtype follows NumPy's promotion there)."""
    fast, chain = Tally(host, ["a"], np.float32), Tally(CHAIN, ["a"], np.float32)
    for value in (np.asarray(2.5, np.float32), np.float64(1.25), np.asarray([0.5], np.float32)):
        fast.add("a", value, 1)
        chain.add("a", value, 1)
        _same(fast.sums, chain.sums)
