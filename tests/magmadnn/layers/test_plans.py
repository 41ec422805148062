"""Layer call plans (magmadnn.layers.plans): a repeated call with the same input signature replays its plan, and
gives bit for bit what the full call gives (outputs, every gradient, random streams, running statistics); anything
that changes what a call decides (a new input shape, dtype policy, trainable, an attribute, weights of another shape)
gives fresh results and the full call's errors."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from magmadnn import functional as F
from magmadnn import layers as L
from magmadnn.autograd import Tensor
from magmadnn.layers import plans

RNG = np.random.default_rng(3)


def _data(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# (constructor, input shapes (one or two), dtype of the input, training)
CASES = {
    "dense": (lambda: L.Dense(5, seed=1), [(4, 3)], "float32", True),
    "dense_relu": (lambda: L.Dense(5, activation="relu", seed=1), [(4, 3)], "float32", True),
    "dense_softmax": (lambda: L.Dense(5, activation="softmax", seed=1), [(4, 3)], "float32", True),
    "dense_3d_gelu": (lambda: L.Dense(5, activation="gelu", seed=1), [(2, 3, 4)], "float32", True),
    "dense_3d_no_bias": (lambda: L.Dense(5, use_bias=False, seed=1), [(2, 3, 4)], "float32", True),
    "conv_relu_same": (lambda: L.Conv2D(4, 3, padding="same", activation="relu", seed=1), [(2, 3, 6, 6)],
                       "float32", True),
    "conv_gelu": (lambda: L.Conv2D(4, 3, activation="gelu", seed=1), [(2, 3, 6, 6)], "float32", True),
    "conv_strided_no_bias": (lambda: L.Conv2D(2, 3, strides=2, use_bias=False, seed=1), [(2, 3, 7, 7)],
                             "float32", True),
    "batch_norm_train": (lambda: L.BatchNorm(), [(4, 3, 5, 5)], "float32", True),
    "batch_norm_eval": (lambda: L.BatchNorm(), [(4, 3, 5, 5)], "float32", False),
    "batch_norm_features": (lambda: L.BatchNorm(), [(6, 3)], "float32", True),
    "batch_normalization": (lambda: L.BatchNormalization(), [(4, 3, 5, 5)], "float32", True),
    "batch_normalization_sequence": (lambda: L.BatchNormalization(), [(4, 5, 3)], "float32", True),
    "activation_tanh": (lambda: L.Activation("tanh"), [(4, 3)], "float32", True),
    "activation_leaky": (lambda: L.Activation("leaky_relu", alpha=0.1), [(4, 3)], "float32", True),
    "activation_softmax": (lambda: L.Activation("softmax"), [(4, 3)], "float32", True),
    "max_pool": (lambda: L.MaxPool2D(2), [(2, 3, 6, 6)], "float32", True),
    "avg_pool_same": (lambda: L.AvgPool2D(3, strides=2, padding="same"), [(2, 3, 7, 7)], "float32", True),
    "flatten": (lambda: L.Flatten(), [(2, 3, 4, 5)], "float32", True),
    "layer_norm": (lambda: L.LayerNormalization(), [(2, 5, 6)], "float32", True),
    "layer_norm_axis1": (lambda: L.LayerNormalization(axis=1), [(2, 5, 6)], "float32", True),
    "global_average_1d": (lambda: L.GlobalAveragePooling1D(), [(2, 5, 6)], "float32", True),
    "global_average_2d": (lambda: L.GlobalAvgPool2D(), [(2, 3, 4, 5)], "float32", True),
    "dropout_train": (lambda: L.Dropout(0.5, seed=4), [(4, 8)], "float32", True),
    "dropout_eval": (lambda: L.Dropout(0.5, seed=4), [(4, 8)], "float32", False),
    "embedding": (lambda: L.Embedding(10, 4, seed=1), [(2, 5)], "int64", True),
    "position_embedding": (lambda: L.PositionEmbedding(seed=1), [(2, 5, 4)], "float32", True),
    "attention": (lambda: L.MultiHeadAttention(2, 3, seed=1), [(2, 5, 4)], "float32", True),
    "attention_eval": (lambda: L.MultiHeadAttention(2, 3, seed=1), [(2, 5, 4)], "float32", False),
    "add": (lambda: L.Add(), [(3, 4), (3, 4)], "float32", True),
}
PLANNED = {"dense", "dense_relu", "dense_softmax", "dense_3d_gelu", "dense_3d_no_bias", "conv_relu_same",
           "conv_gelu", "conv_strided_no_bias", "batch_norm_train", "batch_norm_eval", "batch_norm_features",
           "batch_normalization",
           "activation_tanh", "activation_leaky", "max_pool", "avg_pool_same", "flatten", "layer_norm",
           "global_average_1d", "global_average_2d", "dropout_train", "dropout_eval", "embedding",
           "position_embedding", "attention", "attention_eval", "add"}


def _inputs(shapes, dtype):
    if dtype == "int64":
        return [RNG.integers(0, 10, shapes[0])]
    return [_data(s) for s in shapes]


def _step(layer, arrays, training, upstream):
    """One call on fresh input Tensors, then backward of sum(out * upstream): (output, input grads, weight grads)."""
    floats = arrays[0].dtype.kind == "f"
    tensors = [Tensor(a, requires_grad=floats) for a in arrays]
    for w in layer.trainable_weights:
        w.grad = None
    out = layer(tensors if len(tensors) > 1 else tensors[0], training=training)
    F.sum(F.multiply(out, Tensor(upstream))).backward()
    grads = [None if t.grad is None else np.array(t.grad) for t in tensors]
    return out.numpy(), grads, [None if w.grad is None else np.array(w.grad) for w in layer.trainable_weights]


@pytest.mark.parametrize("case", sorted(CASES))
def test_planned_calls_equal_full_calls_bit_for_bit(case):
    make, shapes, dtype, training = CASES[case]
    planned, full = make(), make()
    full._plannable = False  # the reference: every call in full
    arrays = _inputs(shapes, dtype)
    upstream = None
    for _ in range(3):  # the first call plans, the later ones replay (a random stream moves on at each)
        if upstream is None:
            upstream = _data(full(arrays if len(arrays) > 1 else arrays[0], training=training).shape)
            planned(arrays if len(arrays) > 1 else arrays[0], training=training)  # (the same draws on both)
            full.set_weights(planned.get_weights())  # (built: the same weights, whatever the initial draws)
            if getattr(planned, "rng", None) is not None:  # the same random stream from here on
                full.rng = copy.deepcopy(planned.rng)
        got, want = _step(planned, arrays, training, upstream), _step(full, arrays, training, upstream)
        np.testing.assert_array_equal(got[0], want[0])
        for g, w in zip(got[1] + got[2], want[1] + want[2]):
            assert (g is None) == (w is None)
            if g is not None:
                np.testing.assert_array_equal(g, w)
    for a, b in zip(planned.state.values(), full.state.values()):  # running statistics
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    kept = [p for p in planned._plans.values() if p is not None]
    assert bool(kept) == (case in PLANNED), planned._plans


def _counting_call(layer):
    """Counts the calls of ``layer.call`` (set in its dict: no attribute write that drops its plans)."""
    seen = []
    call = layer.call

    def counted(*args, **kwargs):
        seen.append(1)
        return call(*args, **kwargs)

    layer.__dict__["call"] = counted
    return seen


def test_a_repeated_call_replays_its_plan_and_a_new_signature_plans_anew():
    layer = L.Dense(3, activation="relu", seed=0)
    seen = _counting_call(layer)
    xa, xb = _data((4, 5, 2)), _data((3, 5, 2))
    layer(xa)
    layer(xa)
    layer(xa, training=True)  # the training flag is part of the signature
    assert len(seen) == 2
    y = layer(xb).numpy()  # another batch size: the full call, then its plan
    assert len(seen) == 3 and y.shape == (3, 5, 3)
    w, b = layer.get_weights()
    np.testing.assert_allclose(layer(xb).numpy(), np.maximum(xb @ w + b, 0), rtol=1e-6)
    assert len(seen) == 3


def test_set_weights_reaches_the_planned_call():
    layer = L.Dense(3, seed=0)
    x = _data((4, 2))
    layer(x)
    layer(x)
    w, b = _data((2, 3)), _data((3,))
    layer.set_weights([w, b])
    np.testing.assert_allclose(layer(x).numpy(), x @ w + b, rtol=1e-6)


def test_an_attribute_set_drops_the_plans():
    layer = L.Dense(3, activation="relu", seed=0)
    x = _data((4, 2))
    layer(x)
    layer(x)
    layer.activation = "tanh"
    w, b = layer.get_weights()
    np.testing.assert_allclose(layer(x).numpy(), np.tanh(x @ w + b), rtol=1e-6)
    drop = L.Dropout(0.5, seed=2)
    ones = np.ones((64, 32), np.float32)
    drop(ones, training=True)
    drop(ones, training=True)
    drop.rate = 0.75
    kept = drop(ones, training=True).numpy()
    assert set(np.unique(kept)) <= {0.0, 4.0}


def test_trainable_false_makes_a_planned_batch_norm_use_its_running_statistics():
    layer = L.BatchNorm()
    x = _data((8, 3)) * 3 + 1
    layer(x, training=True)
    layer(x, training=True)  # planned: batch statistics, running ones updated
    mean, var = (np.array(v) for v in layer.state.values())
    layer.trainable = False
    y = layer(x, training=True).numpy()  # Keras: a frozen BatchNorm runs in inference mode
    gamma, beta = layer.get_weights()[:2]
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + layer.eps) * gamma + beta, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.array(layer.state["running_mean"]), mean)  # not updated


def test_a_dtype_policy_set_after_planning_casts_as_the_full_call():
    layer = L.Dense(3, seed=0)
    x = _data((4, 2))
    layer(x)
    layer(x)
    layer.dtype_policy = "mixed_float16"
    full = L.Dense(3, seed=0, dtype="mixed_float16")
    full._plannable = False
    full(x)
    full.set_weights(layer.get_weights())
    got, want = layer(x), full(x)
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert all(p is None for p in layer._plans.values())  # a mixed call runs in full


def test_a_weight_of_another_shape_gets_the_full_calls_error():
    layer = L.Dense(3, seed=0)
    x = _data((4, 2))
    layer(x)
    layer(x)
    layer._params["kernel"].data = layer.xp.asarray(_data((5, 3)))
    with pytest.raises(ValueError, match=r"dense: x has shape \(4, 2\) but w has shape \(5, 3\)"):
        layer(x)


def test_bad_input_is_refused_the_same_way_before_and_after_a_plan():
    layer = L.Dense(3, seed=0)
    x = _data((4, 2))
    for _ in range(2):
        layer(x)
        with pytest.raises(ValueError, match=r"dense: x has shape \(4, 5\) but w has shape \(2, 3\)"):
            layer(_data((4, 5)))
    emb = L.Embedding(4, 2, seed=0)
    ids = np.array([[0, 3]])
    emb(ids)
    emb(ids)
    with pytest.raises(ValueError, match=r"ids must be in \[0, 4\); got id 4"):
        emb(np.array([[0, 4]]))
    with pytest.raises(ValueError, match="embedding: index 4 is out of range for a table of 4 rows"):
        emb(Tensor(np.array([[0, 4]])))  # (a Tensor skips the layer's own check: the op's)


def test_a_subclass_defined_outside_magmadnn_is_never_planned():
    class Halved(L.Dense):
        def call(self, x, training=False):
            return F.multiply(super().call(x, training), 0.5)

    layer = Halved(3, seed=0)
    x = _data((4, 2))
    first = layer(x).numpy()
    np.testing.assert_array_equal(layer(x).numpy(), first)
    w, b = layer.get_weights()
    np.testing.assert_allclose(first, (x @ w + b) * 0.5, rtol=1e-6)
    assert not Halved._plannable and L.Dense._plannable


def test_plannable_classes():
    assert plans.plannable(L.Conv2D) and plans.plannable(L.DepthwiseConv2D)
    assert plans.plannable(L.LayerNormalization) and plans.plannable(L.BatchNorm)
    assert plans.plannable(L.BatchNormalization)  # its own plan (the channels axis; any other runs in full)
    assert plans.plannable(L.GlobalAvgPool2D) and plans.plannable(L.Activation) and plans.plannable(L.Add)
    assert not plans.plannable(L.RMSNorm)  # its own normalise_last, no plan
    assert not plans.plannable(L.Layer)


def test_explicit_attention_masks_bypass_the_plan():
    layer = L.MultiHeadAttention(2, 3, seed=1)
    full = L.MultiHeadAttention(2, 3, seed=1)
    full._plannable = False
    x = _data((2, 5, 4))
    layer(x)
    layer(x)
    full(x)
    full.set_weights(layer.get_weights())
    mask = np.tril(np.ones((2, 5, 5), bool))
    got = layer(x, attention_mask=mask)
    want = full(x, attention_mask=mask)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not np.allclose(got.numpy(), layer(x).numpy())
    np.testing.assert_array_equal(layer(x, use_causal_mask=True).numpy(), full(x, use_causal_mask=True).numpy())


# --------------------------------------------------------------------------- whole models on the simulated device
def _transformer():
    from magmadnn.models import Model

    tokens = L.Input((6,), dtype="int64")
    x = L.PositionEmbedding()(L.Embedding(20, 8)(tokens))
    x = L.Add()([x, L.MultiHeadAttention(2, 4)(L.LayerNormalization()(x))])
    x = L.Add()([x, L.Dense(8)(L.Dense(16, activation="gelu")(L.LayerNormalization()(x)))])
    return Model(tokens, L.Dense(3)(L.GlobalAveragePooling1D()(L.LayerNormalization()(x))))


def _convnet():
    from magmadnn.models import Sequential

    return Sequential([L.Input((2, 8, 8)), L.Conv2D(4, 3, padding="same", activation="relu"), L.BatchNorm(),
                       L.MaxPool2D(2), L.Conv2D(4, 3, activation="gelu"), L.Dropout(0.25), L.Flatten(),
                       L.Dense(6, activation="tanh"), L.Dense(3)])


def _residual():
    """A residual block of resnet_small's kind: bias-free convolutions, batch norms, activation layers, a strided
    shortcut convolution, an Add and global average pooling."""
    from magmadnn.models import Model

    inputs = L.Input((2, 8, 8))
    x = L.Activation("relu")(L.BatchNorm()(L.Conv2D(4, 3, strides=2, padding="same", use_bias=False)(inputs)))
    x = L.BatchNorm()(L.Conv2D(4, 3, padding="same", use_bias=False)(x))
    short = L.BatchNorm()(L.Conv2D(4, 1, strides=2, use_bias=False)(inputs))
    x = L.Activation("relu")(L.Add()([x, short]))
    return Model(inputs, L.Dense(3)(L.GlobalAvgPool2D()(x)))


@pytest.mark.native
@pytest.mark.parametrize("make", [_transformer, _convnet, _residual])
def test_planned_training_on_the_simulated_device_equals_unplanned_bit_for_bit(make):
    from magmadnn.optimizers import SGD
    from pymagma import simulator

    x = RNG.integers(0, 20, (4, 6)) if make is _transformer else _data((4, 2, 8, 8))
    y = RNG.integers(0, 3, 4)
    runs = []
    with simulator.simulated("full"):
        for planned in (True, False):
            model = make()
            model.compile(optimizer=SGD(0.1, momentum=0.9), loss="cross_entropy", seed=0, device="gpu", graph=False)
            for layer in model.layers:
                layer._plannable = layer._plannable and planned
            losses = [float(model.train_on_batch(x, y)) for _ in range(3)]
            runs.append((losses, [np.array(w.numpy()) for w in model.weights], model.predict(x, verbose=0)))
            if planned:
                assert any(p is not None for layer in model.layers for p in layer._plans.values())
    (losses, weights, predictions), (want_losses, want_weights, want_predictions) = runs
    assert losses == want_losses
    for got, want in zip(weights, want_weights):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(predictions, want_predictions)


def _record(t):
    """What the tape holds of ``t``: (requires_grad, its Function's class, each input's identity, needs_input_grad)."""
    fn = t._fn
    kind = type(fn).__name__.replace("Trailing", "")  # (a planned Add's own Function: the same ops, see there)
    return t.requires_grad, None if fn is None else (kind, tuple(map(id, fn.inputs)), fn.needs_input_grad)


@pytest.mark.parametrize("case", ["dense_relu", "dense_3d_no_bias", "conv_strided_no_bias", "flatten", "layer_norm",
                                  "activation_tanh", "batch_norm_train", "batch_norm_eval", "add"])
def test_a_plans_inline_apply_records_as_function_apply(case):
    """A plan runs Function.apply's body inline: the same output and the same record as the full call, whether an
    input or a weight requires grad, under no_grad, and for a Tensor subclass (which goes through apply itself)."""
    from magmadnn.autograd import Parameter, no_grad

    make, shapes, dtype, training = CASES[case]
    planned, full = make(), make()
    full._plannable = False
    arrays = _inputs(shapes, dtype)

    def call(layer, ts):
        return layer(ts if len(ts) > 1 else ts[0], training=training)

    call(planned, arrays)
    call(full, arrays)
    full.set_weights(planned.get_weights())
    call(planned, arrays)  # planned now
    assert any(p is not None for p in planned._plans.values())

    def calls(layer):
        ws = layer.trainable_weights
        out = []
        for x_grad, w_grad, quiet in [(True, True, False), (False, True, False), (False, False, False),
                                      (True, True, True)]:
            for w in ws:
                w.requires_grad = w_grad
            ts = [Tensor(a, requires_grad=x_grad if k == 0 else w_grad) for k, a in enumerate(arrays)]
            if quiet:
                with no_grad():
                    y = call(layer, ts)
            else:
                y = call(layer, ts)
            rec = _record(y)
            if rec[1] is not None:
                ids = rec[1][1]
                rec = (rec[0], (rec[1][0], len(ids), ids[:len(ts)] == tuple(map(id, ts)),
                                ids[len(ts):] == tuple(map(id, ws)), rec[1][2]))
            out.append((y.numpy(), all(y.xp is t.xp for t in ts), rec))
        y = call(layer, [Parameter(a) for a in arrays])  # a Tensor subclass as the input
        out.append((y.numpy(), True, _record(y)[:1] + (None if y._fn is None else _record(y)[1][0],)))
        for w in ws:
            w.requires_grad = True
        return out

    got, want = calls(planned), calls(full)
    for (g, gs, gr), (w, ws, wr) in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert gs and ws and gr == wr
