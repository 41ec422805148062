"""The sequence layers' call plans on the simulated device (a transformer's: Embedding, PositionEmbedding,
LayerNormalization, MultiHeadAttention, Add, GlobalAveragePooling1D): a planned call gives bit for bit what the full
call gives (output, input and weight gradients), and a planned Embedding checks its ids as the full call does."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.autograd import Tensor

pytestmark = pytest.mark.native

RNG = np.random.default_rng(38)

# (constructor, input shapes, integer ids)
CASES = {
    "embedding": (lambda: L.Embedding(10, 4, seed=1), [(2, 5)], True),
    "position_embedding": (lambda: L.PositionEmbedding(seed=1), [(2, 5, 4)], False),
    "layer_norm": (lambda: L.LayerNormalization(), [(2, 5, 6)], False),
    "attention": (lambda: L.MultiHeadAttention(2, 3, seed=1), [(2, 5, 4)], False),
    "causal_attention": (lambda: L.MultiHeadAttention(2, 3, causal=True, seed=1), [(2, 5, 4)], False),
    "add": (lambda: L.Add(), [(2, 5, 4), (2, 5, 4)], False),
    "global_average_1d": (lambda: L.GlobalAveragePooling1D(), [(2, 5, 6)], False),
}


def _on_device(layer):
    layer.xp = backend.get("gpu")
    return layer


def _step(layer, arrays, upstream):
    """One call on fresh device Tensors, then backward of sum(out * upstream): (output, input grads, weight grads)."""
    xp = layer.xp
    floats = arrays[0].dtype.kind == "f"
    tensors = [Tensor(xp.asarray(a), requires_grad=floats, backend=xp) for a in arrays]
    for w in layer.trainable_weights:
        w.grad = None
    out = layer(tensors if len(tensors) > 1 else tensors[0])
    F.sum(F.multiply(out, Tensor(xp.asarray(upstream), backend=xp))).backward()
    grads = [None if t.grad is None else xp.to_numpy(t.grad) for t in tensors]
    return out.numpy(), grads, [None if w.grad is None else xp.to_numpy(w.grad) for w in layer.trainable_weights]


@pytest.mark.parametrize("case", sorted(CASES))
def test_planned_device_calls_equal_full_calls_bit_for_bit(case):
    from pymagma import simulator

    make, shapes, ids = CASES[case]
    arrays = [RNG.integers(0, 10, shapes[0])] if ids else [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    with simulator.simulated("full"):
        planned, full = _on_device(make()), _on_device(make())
        full._plannable = False  # the reference: every call in full
        x = [Tensor(planned.xp.asarray(a), backend=planned.xp) for a in arrays]
        y = planned(x if len(x) > 1 else x[0])  # builds; the first call plans
        full(x if len(x) > 1 else x[0])
        full.set_weights(planned.get_weights())
        upstream = RNG.standard_normal(y.shape).astype(np.float32)
        for _ in range(3):  # each call replays the plan
            got, want = _step(planned, arrays, upstream), _step(full, arrays, upstream)
            np.testing.assert_array_equal(got[0], want[0])
            for g, w in zip(got[1] + got[2], want[1] + want[2], strict=True):
                assert (g is None) == (w is None)
                if g is not None:
                    np.testing.assert_array_equal(g, w)
        assert any(p is not None for p in planned._plans.values()), planned._plans


def test_a_planned_device_embedding_checks_device_ids_at_every_call():
    """The plan passes device ids on as they are, with the range check kernel queued at each call: an id outside the
    table is the op's ValueError at the next host read, as for the full call."""
    from pymagma import simulator

    with simulator.simulated("full"):
        layer = _on_device(L.Embedding(4, 2, seed=0))
        xp = layer.xp
        good = Tensor(xp.asarray(np.array([[0, 3]])), backend=xp)
        for _ in range(3):
            layer(good).numpy()
        assert any(p is not None for p in layer._plans.values())
        out = layer(Tensor(xp.asarray(np.array([[0, 4]])), backend=xp))
        with pytest.raises(ValueError, match=r"embedding: index 4 is out of range for a table of 4 rows"):
            out.numpy()
        layer(good).numpy()  # the record cleared: the next good call reads fine


def test_a_planned_device_embedding_takes_host_ids_as_the_full_call():
    """Ids of another array class than the plan saw (a Tensor of NumPy ids on the device layer) take the full call's
    path: checked on the host at once, uploaded, the same rows."""
    from pymagma import simulator

    with simulator.simulated("full"):
        layer = _on_device(L.Embedding(4, 2, seed=0))
        xp = layer.xp
        device_ids = Tensor(xp.asarray(np.array([[0, 3]])), backend=xp)
        for _ in range(2):
            want = layer(device_ids).numpy()
        got = layer(Tensor(np.array([[0, 3]])))
        np.testing.assert_array_equal(got.numpy(), want)
        with pytest.raises(ValueError, match=r"embedding: index 4 is out of range for a table of 4 rows"):
            layer(Tensor(np.array([[0, 4]])))  # at once: host ids are checked on the host
