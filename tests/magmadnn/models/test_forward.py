"""The functional model's forward pass (magmadnn.models.forward): a layer whose call plan holds for its input is
called through the plan without ``call_masked``, under call_masked's own conditions (an unmasked input, plans
current, the input's signature with the training flag); everything else goes through ``call_masked``; results equal
those of unplanned calls bit for bit."""

from __future__ import annotations

import numpy as np

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn.layers import plans
from magmadnn.layers.masking import MaskingMixin

RNG = np.random.default_rng(7)


def _counting(monkeypatch) -> list:
    """Every call_masked made, as the layer's name."""
    seen = []
    real = MaskingMixin.call_masked

    def call_masked(self, inputs, training=False):
        seen.append(self.name)
        return real(self, inputs, training)

    monkeypatch.setattr(MaskingMixin, "call_masked", call_masked)
    return seen


def _mlp(seed=0):
    x = L.Input((6,))
    h = L.Dense(8, activation="relu", name="d1", seed=seed)(x)
    y = L.Dense(3, name="d2", seed=seed + 1)(L.Add(name="add")([h, L.Dense(8, name="skip", seed=seed + 2)(x)]))
    return mdnn.Model(x, y)


def test_planned_layers_are_called_through_their_plans_and_give_the_unplanned_results(monkeypatch):
    data = RNG.standard_normal((4, 6)).astype(np.float32)
    model = _mlp()
    seen = _counting(monkeypatch)
    first = model(data).numpy()
    assert sorted(seen) == ["add", "d1", "d2", "skip"]  # the full calls, which make the plans
    seen.clear()
    second = model(data).numpy()
    assert seen == []  # (the residual Add too: its plan of two inputs, ``run(a, b)``)
    monkeypatch.setattr(plans, "LIMIT", 0)  # no plan is ever made: every call in full
    unplanned = _mlp()(data).numpy()
    np.testing.assert_array_equal(first, unplanned)
    np.testing.assert_array_equal(second, unplanned)


def test_training_steps_through_the_plans_equal_unplanned_ones_bit_for_bit(monkeypatch):
    x, y = RNG.standard_normal((8, 6)).astype(np.float32), RNG.integers(0, 3, 8)

    def trained():
        model = _mlp(seed=3)
        model.compile(optimizer=mdnn.optimizers.SGD(0.1, momentum=0.9), loss="cross_entropy", seed=0)
        for _ in range(4):
            model.train_on_batch(x, y)
        return [w.numpy() for w in model.parameters()]

    planned = trained()
    monkeypatch.setattr(plans, "LIMIT", 0)
    for a, b in zip(planned, trained()):
        np.testing.assert_array_equal(a, b)


def test_a_masked_input_to_a_planned_layer_keeps_its_mask():
    """A Dense planned on an unmasked input of one signature, then given a masked one of the same signature: the
    mask rides on (GlobalAveragePooling1D averages over the unmasked steps only)."""
    dense = L.Dense(4, name="shared", seed=5)
    floats = L.Input((5, 3))
    plain = mdnn.Model(floats, dense(floats))
    ids = L.Input((5,), dtype="int64")
    emb = L.Embedding(10, 3, mask_zero=True, seed=6)
    masked = mdnn.Model(ids, L.GlobalAveragePooling1D()(dense(emb(ids))))
    tokens = np.array([[1, 2, 0, 0, 0], [3, 4, 5, 6, 0]])
    table = emb._params["embeddings"].numpy()
    for _ in range(2):
        plain(table[tokens])  # plans the shared Dense for (2, 5, 3) float32
        out = masked(tokens).numpy()
    rows = table[tokens] @ dense._params["kernel"].numpy() + dense._params["bias"].numpy()
    keep = (tokens != 0)[..., None]
    np.testing.assert_allclose(out, (rows * keep).sum(1) / keep.sum(1), rtol=1e-5, atol=1e-6)


def test_an_attribute_set_after_planning_reaches_the_next_forward():
    x = L.Input((4,))
    dense = L.Dense(3, seed=2)
    model = mdnn.Model(x, dense(x))
    data = RNG.standard_normal((5, 4)).astype(np.float32)
    for _ in range(2):
        model(data)
    dense.activation = "relu"  # a public attribute: the plans go
    out = model(data).numpy()
    ref = np.maximum(data @ dense._params["kernel"].numpy() + dense._params["bias"].numpy(), 0)
    assert (ref == 0).any()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_the_training_flag_picks_its_own_plan():
    x = L.Input((6,))
    dense = L.Dense(6, seed=4)
    model = mdnn.Model(x, L.Dropout(0.5, seed=1)(dense(x)))
    data = RNG.standard_normal((8, 6)).astype(np.float32)
    for _ in range(2):
        trained = model(data, training=True).numpy()
    inferred = model(data, training=False).numpy()
    ref = data @ dense._params["kernel"].numpy() + dense._params["bias"].numpy()
    assert (trained == 0).any()  # dropout ran in training
    np.testing.assert_allclose(inferred, ref, rtol=1e-5, atol=1e-6)


def test_a_new_graph_gets_a_new_program():
    model = _mlp()
    data = RNG.standard_normal((2, 6)).astype(np.float32)
    model(data)
    program = model.__dict__["_forward_program"]
    model(data)
    assert model.__dict__["_forward_program"] is program
    x = L.Input((6,))
    model._set_graph(x, L.Dense(2, seed=9)(x))
    assert model(data).shape == (2, 2)
    assert model.__dict__["_forward_program"] is not program


def test_a_trainable_flag_changed_anywhere_makes_every_plan_anew(monkeypatch):
    from magmadnn.autograd import Parameter

    model = _mlp()
    data = RNG.standard_normal((3, 6)).astype(np.float32)
    before = model(data).numpy()
    seen = _counting(monkeypatch)
    model(data)
    assert seen == []
    Parameter(np.ones(2, np.float32)).trainable = False  # the plans' stamp moves (.layers.plans.stamp)
    seen.clear()
    np.testing.assert_array_equal(model(data).numpy(), before)
    assert sorted(seen) == ["add", "d1", "d2", "skip"]  # each call in full once more, its plan made anew


def test_a_masked_input_to_a_planned_add_is_refused_as_unplanned():
    """An Add planned on two unmasked inputs of one signature, then given a Tensor carrying a mask (either side;
    attached at run time by a function the graph does not see) of the same signature: refused as its full call
    refuses it (Add takes no mask), never replayed through the plan."""
    marking = {"on": False}

    def maybe_masked(t):
        out = t * 1.0
        if marking["on"]:
            out._mask = np.ones(out.shape[:2], np.float32)
        return out

    data = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    for masked_first in (True, False):
        a, b = L.Input((5, 3)), L.Input((5, 3))
        m = L.Lambda(maybe_masked)(a)
        model = mdnn.Model([a, b], L.Add(name="add")([m, b] if masked_first else [b, m]))
        marking["on"] = False
        for _ in range(2):  # the plan made, then replayed
            np.testing.assert_array_equal(model([data, data]).numpy(), data + data)
        marking["on"] = True
        try:
            model([data, data])
        except ValueError as exc:
            assert "mask" in str(exc)
        else:
            raise AssertionError("a masked input to Add went through its plan")


def test_two_input_layers_without_plans_go_through_call_masked(monkeypatch):
    a, b = L.Input((4,)), L.Input((4,))
    model = mdnn.Model([a, b], L.Concatenate(name="cat")([a, b]))
    x, y = (RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    seen = _counting(monkeypatch)
    for _ in range(2):
        np.testing.assert_array_equal(model([x, y]).numpy(), np.concatenate([x, y], axis=1))
    assert seen == ["cat", "cat"]
