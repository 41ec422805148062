"""The functional graph core: several inputs and outputs (list or dict), axes known only at run time (None),
op nodes (``layers.Operation``), inputs without a batch axis and a fixed batch size."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.layers.operation import Operation


def _dense_ref(layer, x):
    kernel, bias = layer.get_weights()
    return x @ kernel + bias


def test_dict_inputs_and_outputs_come_back_in_their_structure():
    a, b = L.Input((4,), name="a"), L.Input((3,), name="b")
    h = L.Dense(5, name="h")(a)
    o1 = L.Dense(2, name="o1")(L.Concatenate()([h, b]))
    o2 = L.Dense(1, name="o2")(h)
    model = mdnn.Model({"a": a, "b": b}, {"first": o1, "second": o2}, seed=0)
    rng = np.random.default_rng(0)
    xa, xb = rng.random((7, 4), np.float32), rng.random((7, 3), np.float32)
    got = model.predict({"a": xa, "b": xb}, batch_size=3)
    assert list(got) == ["first", "second"] == model.output_names
    hidden = _dense_ref(model.get_layer("h"), xa)
    np.testing.assert_allclose(got["second"], _dense_ref(model.get_layer("o2"), hidden), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["first"], _dense_ref(model.get_layer("o1"), np.concatenate([hidden, xb], 1)),
                               rtol=1e-5, atol=1e-6)
    called = model({"a": xa, "b": xb})
    assert isinstance(called, dict) and called["first"].shape == (7, 2)
    listed = mdnn.Model([a, b], [o1, o2])
    assert [p.shape for p in listed.predict([xa, xb])] == [(7, 2), (7, 1)]
    assert listed.output_shape == [(2,), (1,)]
    rebuilt = mdnn.models.model_from_config(model.get_config())
    assert list(rebuilt.predict({"a": xa, "b": xb})) == ["first", "second"]


def test_training_several_outputs_names_the_structure_expected():
    x = L.Input((3,))
    model = mdnn.Model(x, [L.Dense(1)(x), L.Dense(2)(x)])
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="2 outputs.*list of 2 .*or a dict by output name"):
        model.fit(np.ones((4, 3), np.float32), np.ones((4, 1), np.float32), verbose=0)


def test_axes_known_at_run_time_take_each_batch_size_and_summary_prints_none():
    x = L.Input((None, 6))
    dense = L.Dense(3)
    model = mdnn.Model(x, dense(x))
    for steps in (2, 9):
        data = np.random.default_rng(steps).random((2, steps, 6), np.float32)
        np.testing.assert_allclose(model.predict(data), _dense_ref(dense, data), rtol=1e-5, atol=1e-6)
    assert "(None, None, 3)" in model.summary(print_fn=None)
    with pytest.raises(mdnn.layers.ShapeMismatchError, match="(None, 6)|None"):
        model.predict(np.ones((2, 4, 5), np.float32))


def test_a_layer_that_needs_a_fixed_axis_names_it():
    x = L.Input((None,))
    with pytest.raises(mdnn.layers.ShapeMismatchError, match="known only at run time|None"):
        L.Dense(3)(L.Reshape((2, -1))(x))


def test_an_operation_node_with_a_weight_trains_and_has_several_outputs():
    x = L.Input((4,))
    w0 = np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32)

    def halves(t, w):
        y = F.matmul(t, w)
        return [F.slice_axis(y, 1, 0, 1), F.slice_axis(y, 1, 1, 2)]

    op = Operation(halves, [("input", 0), ("weight", "w")], outputs=2, weights={"w": w0},
                   output_shapes=[(1,), (1,)], op_type="Halves")
    left, right = op([x])
    model = mdnn.Model(x, L.Add()([left, right]), seed=0)
    data = np.random.default_rng(2).random((6, 4), np.float32)
    np.testing.assert_allclose(model.predict(data), (data @ w0).sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert "(Halves)" in model.summary(print_fn=None)
    model.compile("sgd", "mse")
    before = model.evaluate(data, np.zeros((6, 1), np.float32))
    model.fit(data, np.zeros((6, 1), np.float32), epochs=3, batch_size=6, verbose=0)
    assert model.evaluate(data, np.zeros((6, 1), np.float32)) < before
    assert not np.allclose(op.get_weights()[0], w0)
    with pytest.raises(TypeError, match="ONNX file"):
        model.get_config()


def test_an_input_without_batch_axis_goes_whole_to_every_batch():
    x = L.Input((3,))
    w = L.Input((3, 2), batched=False)
    y = Operation(lambda a, b: F.matmul(a, b), [("input", 0), ("input", 1)], output_shapes=[(2,)])([x, w])
    model = mdnn.Model([x, w], y)
    data, weight = np.arange(15, dtype=np.float32).reshape(5, 3), np.ones((3, 2), np.float32)
    np.testing.assert_allclose(model.predict([data, weight], batch_size=2), data @ weight)
    assert "(3, 2)" in model.summary(print_fn=None)


def test_a_fixed_batch_size_runs_batches_of_that_size():
    seen = []

    def record(t):
        seen.append(t.shape[0])
        return F.multiply(t, 2.0)

    x = L.Input((2,), batch_size=4)
    model = mdnn.Model(x, Operation(record, [("input", 0)], output_shapes=[(2,)])([x]))
    data = np.arange(14, dtype=np.float32).reshape(7, 2)
    np.testing.assert_allclose(model.predict(data, batch_size=3), data * 2)
    assert seen == [4, 4]
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="exactly 4 samples"):
        model.fit(data[:4], data[:4], batch_size=2, verbose=0)
    with pytest.raises(ValueError, match="partial batch"):
        model.fit(data, data, verbose=0)


def test_the_host_forward_lets_go_of_values_no_later_node_reads():
    """A value is dropped right after its last reader (so NumPy reuses its memory); values read later, several
    outputs of one node and the model's outputs are kept."""
    import weakref

    alive = {}

    def watch(name):
        def fn(x):
            seen[name] = {key: ref() is not None for key, ref in alive.items()}
            y = F.add(x, 1.0)
            alive[name] = weakref.ref(y)
            return y
        return fn

    seen = {}
    x = L.Input((3,))
    a = Operation(watch("a"), [("input", 0)], name="a")([x])
    b = Operation(watch("b"), [("input", 0)], name="b")([a])
    c = Operation(watch("c"), [("input", 0)], name="c")([b])
    pair = Operation(lambda u, v: [F.add(u, v), F.multiply(u, v)], [("input", 0), ("input", 1)], outputs=2,
                     name="pair")([a, c])
    d = Operation(watch("d"), [("input", 0)], name="d")([pair[0]])
    model = mdnn.Model(x, [d, pair[1], c])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = model.predict(data, batch_size=2)
    a_, c_ = data + 1, data + 3
    np.testing.assert_allclose(out[0], a_ + c_ + 1)
    np.testing.assert_allclose(out[1], a_ * c_)
    np.testing.assert_allclose(out[2], c_)
    assert seen["c"] == {"a": True, "b": True}  # a is read by pair later; b is c's argument
    assert seen["d"] == {"a": False, "b": False, "c": True}  # a and b dead; c is an output
