"""The op set's embedding ops (``ops/embeddings.py``) on every backend: gather, a deterministic scatter-add
gradient, out-of-range ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import reference
from tests.conftest import examples
from tests.magmadnn.backend._conformance import get, put, tol
from tests.strategies import FLOATS


@settings(max_examples=examples(12))
@given(dtype=st.sampled_from(FLOATS), rows=st.integers(1, 7), dim=st.integers(1, 5),
       ids_shape=st.lists(st.integers(1, 4), min_size=1, max_size=2), seed=st.integers(0, 2**31 - 1))
def test_embedding_forward_backward(xp, dtype, rows, dim, ids_shape, seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(rows, dim)).astype(dtype)
    ids = rng.integers(0, rows, tuple(ids_shape))
    dy = rng.normal(size=tuple(ids_shape) + (dim,)).astype(dtype)
    y = xp.embedding_forward(put(xp, table), put(xp, ids))
    assert y.shape == tuple(ids_shape) + (dim,) and y.dtype == dtype
    np.testing.assert_array_equal(get(xp, y), reference.embedding_ref(table, ids).astype(dtype))
    dtable = xp.embedding_backward(put(xp, dy), put(xp, ids), rows)
    assert dtable.shape == (rows, dim) and dtable.dtype == dtype
    np.testing.assert_allclose(get(xp, dtable), reference.embedding_backward_ref(dy, ids, rows), **tol(dtype))


def test_embedding_gradient_is_the_same_every_run(xp):
    rng = np.random.default_rng(3)
    ids, dy = rng.integers(0, 3, 300), rng.normal(size=(300, 4)).astype(np.float32)  # many repeats of 3 rows
    runs = [get(xp, xp.embedding_backward(put(xp, dy), put(xp, ids), 3)) for _ in range(3)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])


def test_embedding_index_out_of_range(xp):
    table, ids = np.arange(8.0).reshape(4, 2), np.array([0, 4, -1, 3])
    if xp.name in ("host", "strict"):
        with pytest.raises(ValueError, match=r"index 4 is out of range for a table of 4 rows.*\[0, 4\)"):
            xp.embedding_forward(put(xp, table), put(xp, ids))
        return
    y = get(xp, xp.embedding_forward(put(xp, table), put(xp, ids)))  # never a read outside the table: NaN rows
    assert np.isnan(y[1:3]).all() and (y[[0, 3]] == table[[0, 3]]).all()
    dtable = get(xp, xp.embedding_backward(put(xp, np.ones((4, 2))), put(xp, ids), 4))
    np.testing.assert_array_equal(dtable, [[1, 1], [0, 0], [0, 0], [1, 1]])  # outside ids add nothing
