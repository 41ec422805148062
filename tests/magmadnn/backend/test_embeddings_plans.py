"""The embedding launchers' plans (kernels/embeddings.py): a call's checks and launch arguments decided once per
signature (table, indices, rows), the planned launch equal bit for bit to the checked one and to NumPy; errors never
kept (a bad call is refused each time, also after a good call of the same shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.backend.device.kernels import embeddings
from pymagma import simulator
from tests import reference

RNG = np.random.default_rng(38)


def _case(rows, dim, ids_shape, transposed_ids=False):
    import pymagma

    table = RNG.standard_normal((rows, dim)).astype(np.float32)
    ids = RNG.integers(0, rows, ids_shape)
    dy = RNG.standard_normal((*ids_shape, dim)).astype(np.float32)
    d_ids = pymagma.asarray(ids.T.copy()).T if transposed_ids else pymagma.asarray(ids)
    return table, ids, dy, pymagma.asarray(table), d_ids, pymagma.asarray(dy)


@pytest.mark.parametrize("transposed_ids", [False, True], ids=["contiguous", "transposed-ids"])
def test_planned_launches_equal_checked_ones_and_numpy(transposed_ids):
    with simulator.simulated("full"):
        embeddings._CHECKED.clear()
        for rows, dim, ids_shape in ((5, 3, (2, 4)), (7, 2, (3, 3)), (5, 3, (2, 4))):  # rows != dim: no swap hides
            table, ids, dy, d_table, d_ids, d_dy = _case(rows, dim, ids_shape, transposed_ids)
            got = []
            for _ in range(2):  # the first call checks and plans, the second launches the plan
                got.append((embeddings.embedding(d_table, d_ids).get(),
                            embeddings.embedding_backward(d_dy, d_ids, rows).get()))
            (y0, g0), (y1, g1) = got
            np.testing.assert_array_equal(y1, y0)
            np.testing.assert_array_equal(g1, g0)
            np.testing.assert_array_equal(y1, reference.embedding_ref(table, ids).astype(np.float32))
            np.testing.assert_allclose(g1, reference.embedding_backward_ref(dy, ids, rows), rtol=1e-6, atol=1e-6)
        assert len(embeddings._CHECKED) == 4  # two signatures, forward and backward each (the third call: planned)


def test_bad_calls_are_refused_every_time_after_a_good_call_of_the_same_shapes():
    import pymagma

    with simulator.simulated("null"):
        table, ids = pymagma.zeros((4, 2), np.float32), pymagma.asarray(np.zeros(3, np.int64))
        dy = pymagma.zeros((3, 2), np.float32)
        embeddings.embedding(table, ids)
        embeddings.embedding_backward(dy, ids, 4)
        for _ in range(2):
            with pytest.raises(TypeError, match="indices must be an int64"):
                embeddings.embedding(table, pymagma.asarray(np.zeros(3, np.int32)))
            with pytest.raises(ValueError, match="the table must be 2-D"):
                embeddings.embedding(pymagma.zeros((4, 2, 1), np.float32), ids)
            with pytest.raises(ValueError, match="rows"):
                embeddings.embedding_backward(dy, ids, 0)
            with pytest.raises(TypeError):
                embeddings.embedding_backward(dy, ids, 4.0)
            with pytest.raises(ValueError, match="must be the indices' shape"):
                embeddings.embedding_backward(pymagma.zeros((2, 2), np.float32), ids, 4)
            with pytest.raises(TypeError):  # not arrays: the checked path names them
                embeddings.embedding([[1.0]], ids)
        assert embeddings.embedding_backward(dy, ids, 4).shape == (4, 2)
