"""Finite-difference gradient checks in float64 for every differentiable function of magmadnn.functional."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import F, backend
from magmadnn import layers as L
from tests.magmadnn._gradcheck import check_gradients, spread_values

xp = backend.get("host")


def rand(seed, *shape, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


@pytest.mark.parametrize("op", [F.add, F.subtract, F.multiply])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 3), (2, 4, 1))])
def test_broadcasting_arithmetic(op, shapes):
    check_gradients(op, rand(0, *shapes[0]), rand(1, *shapes[1]))


def test_divide_negative_power():
    check_gradients(F.divide, rand(0, 3, 4), rand(1, 4, low=0.5, high=2.0))
    check_gradients(F.negative, rand(2, 2, 3))
    check_gradients(lambda a: F.power(a, 3.0), rand(3, 5))
    check_gradients(lambda a: F.power(a, 0.5), rand(4, 5, low=0.5, high=2.0))


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2))])
def test_matmul(shapes):
    check_gradients(F.matmul, rand(0, *shapes[0]), rand(1, *shapes[1]))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_mean(axis, keepdims):
    x = rand(0, 2, 3, 4)
    check_gradients(lambda a: F.sum(a, axis=axis, keepdims=keepdims), x)
    check_gradients(lambda a: F.mean(a, axis=axis, keepdims=keepdims), x)


def test_reshape_transpose_flatten():
    x = rand(0, 2, 3, 4)
    check_gradients(lambda a: F.reshape(a, (4, 6)), x)
    check_gradients(lambda a: F.transpose(a, (2, 0, 1)), x)
    check_gradients(lambda a: F.transpose(a), x)
    check_gradients(F.flatten, x)


@pytest.mark.parametrize("kind,alpha", [("sigmoid", 0), ("tanh", 0), ("relu", 0), ("leaky_relu", 0.1), ("elu", 0.7),
                                        ("gelu", 0), ("gelu_tanh", 0), ("silu", 0), ("softplus", 0),
                                        ("softsign", 0), ("selu", 0), ("hard_sigmoid", 0),
                                        ("exponential", 0)])  # fmt: skip
def test_activations(kind, alpha):
    x = spread_values(np.random.default_rng(0), (3, 5), gap=0.1)
    check_gradients(lambda a: F.activation(a, kind, alpha), x)


def test_activation_wrappers_and_softmax():
    x = spread_values(np.random.default_rng(1), (2, 4), gap=0.1)
    for fn in (F.relu, F.sigmoid, F.tanh, F.gelu, lambda a: F.leaky_relu(a, 0.2), lambda a: F.elu(a, 0.5),
               lambda a: F.gelu(a, approximate=True), F.silu, F.swish, F.softplus, F.softsign, F.selu,
               F.hard_sigmoid, F.exponential):
        check_gradients(fn, x)
    check_gradients(lambda a: F.softmax(a, axis=-1), rand(2, 3, 5))
    check_gradients(lambda a: F.softmax(a, axis=0), rand(3, 3, 5))
    check_gradients(lambda a: F.log_softmax(a, axis=1), rand(4, 3, 5))
    check_gradients(lambda a: F.activation(a, "softmax"), rand(5, 2, 4))


@pytest.mark.parametrize("bias", [False, True])
def test_dense(bias):
    args = (rand(0, 4, 3), rand(1, 3, 5)) + ((rand(2, 5),) if bias else ())
    check_gradients(F.dense, *args)


@pytest.mark.parametrize("kind", ["relu", "gelu", "elu", "sigmoid", "leaky_relu"])
def test_dense_with_its_activation_fused(kind):
    """``dense(x, w, b, activation)``: the epilogue op's gradients (z kept or not) against finite differences, on 2-D
    and 3-D inputs."""
    check_gradients(lambda x, w, b: F.dense(x, w, b, kind, 0.3), rand(0, 4, 3), rand(1, 3, 5), rand(2, 5))
    check_gradients(lambda x, w, b: F.dense(x, w, b, kind, 0.3), rand(3, 2, 4, 3), rand(4, 3, 2), rand(5, 2))


def test_attention_over_interleaved_heads():
    """``attention_heads``: the gradients of q, k and v against finite differences, causal and with a key mask."""
    mask = np.array([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 1.0]])
    check_gradients(lambda q, k, v: F.attention_heads(q, k, v, 2, key_mask=mask, causal=True),
                    rand(0, 2, 3, 4), rand(1, 2, 4, 4), rand(2, 2, 4, 6))


@st.composite
def conv_geometry(draw):
    groups = draw(st.sampled_from([1, 2]))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return {
        "groups": groups,
        "c": groups * draw(st.integers(1, 2)),
        "k": groups * draw(st.integers(1, 2)),
        "kernel": (kh, kw),
        "stride": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        "dilation": (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        "padding": draw(st.sampled_from([0, 1, (1, 0), ((0, 1), (1, 2)), "same", "valid"])),
        "bias": draw(st.booleans()),
    }


@given(g=conv_geometry(), seed=st.integers(0, 99))
def test_conv2d(g, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (2, g["c"], 5, 6))
    w = rng.uniform(-1, 1, (g["k"], g["c"] // g["groups"]) + g["kernel"])
    args = (x, w) + ((rng.uniform(-1, 1, g["k"]),) if g["bias"] else ())

    def fn(*t):
        b = t[2] if len(t) == 3 else None
        return F.conv2d(t[0], t[1], b, stride=g["stride"], padding=g["padding"], dilation=g["dilation"],
                        groups=g["groups"])  # fmt: skip

    check_gradients(fn, *args, atol=1e-5)


@pytest.mark.parametrize("pool", [F.max_pool2d, F.avg_pool2d])
@pytest.mark.parametrize("window,stride,padding", [(2, None, 0), (3, 1, 1), ((2, 3), (1, 2), "same"), (3, 2, "valid")])
def test_pools(pool, window, stride, padding):
    x = spread_values(np.random.default_rng(0), (2, 2, 5, 6), gap=0.05)
    check_gradients(lambda a: pool(a, window, stride, padding), x)


def test_global_avg_pool():
    check_gradients(F.global_avg_pool2d, rand(0, 2, 3, 4, 5))


@pytest.mark.parametrize("shape", [(6, 3), (3, 2, 3, 4)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(shape, training):
    c = shape[1]
    rng = np.random.default_rng(0)
    stats = (rng.standard_normal(c), rng.uniform(0.5, 2, c))

    def fn(x, gamma, beta):
        rm, rv = stats[0].copy(), stats[1].copy()  # fresh copies: the check evaluates fn many times
        return F.batch_norm(x, gamma, beta, rm, rv, training=training, momentum=0.9, eps=1e-3)

    check_gradients(fn, rand(1, *shape, low=-2, high=2), rand(2, c, low=0.5, high=1.5), rand(3, c), atol=1e-5)


def test_dropout_with_fixed_mask():
    check_gradients(lambda a: F.dropout(a, 0.4, True, xp.rng(7)), rand(0, 6, 5))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_int_labels(reduction):
    labels = np.array([0, 3, 1, 3, 2])
    check_gradients(lambda a: F.softmax_cross_entropy(a, labels, reduction=reduction), rand(0, 5, 4, low=-3, high=3))


def test_softmax_cross_entropy_one_hot_and_soft_labels():
    one_hot = np.eye(4)[[1, 0, 3]]
    check_gradients(lambda a: F.softmax_cross_entropy(a, one_hot), rand(0, 3, 4, low=-3, high=3))
    soft = np.random.default_rng(1).dirichlet(np.ones(4), size=3)
    check_gradients(lambda a: F.softmax_cross_entropy(a, soft, reduction="sum"), rand(1, 3, 4))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse(reduction):
    target = rand(9, 4, 3)
    check_gradients(lambda a: F.mse(a, target, reduction=reduction), rand(0, 4, 3))
    check_gradients(lambda a, b: F.mse(a, b, reduction=reduction), rand(1, 4, 3), rand(2, 4, 3))


# ---------------------------------------------------------------- normalization, embeddings, token losses
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6)])
def test_layer_norm_and_rms_norm(shape):
    f = shape[-1]
    check_gradients(lambda a, g, b: F.layer_norm(a, g, b, eps=1e-3), rand(0, *shape, low=-2, high=2),
                    rand(1, f, low=0.5, high=1.5), rand(2, f), atol=1e-5)
    check_gradients(lambda a: F.layer_norm(a, eps=1e-3), rand(3, *shape), atol=1e-5)
    check_gradients(lambda a, g: F.rms_norm(a, g, eps=1e-3), rand(4, *shape, low=-2, high=2),
                    rand(5, f, low=0.5, high=1.5), atol=1e-5)


def test_group_norm():
    check_gradients(lambda a, g, b: F.group_norm(a, 2, g, b, eps=1e-3), rand(0, 2, 4, 3, 2, low=-2, high=2),
                    rand(1, 4, low=0.5, high=1.5), rand(2, 4), atol=1e-5)


def test_embedding_table_gradient_with_repeated_ids():
    ids = np.array([[1, 4, 1], [0, 1, 3]])  # id 1 three times: its rows add up
    check_gradients(lambda t: F.multiply(F.embedding(t, ids), rand(9, 2, 3, 2)), rand(0, 5, 2))


@pytest.mark.parametrize("smoothing,ignore", [(0.0, None), (0.1, None), (0.0, 2), (0.2, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_token_cross_entropy(smoothing, ignore, reduction):
    labels = np.array([[0, 2, 1], [2, 3, 2]])
    check_gradients(lambda a: F.cross_entropy(a, labels, reduction, smoothing, ignore), rand(0, 2, 3, 4, low=-3,
                                                                                               high=3))


def test_binary_cross_entropy_with_logits():
    targets = np.random.default_rng(1).uniform(0, 1, (3, 4))
    check_gradients(lambda a: F.binary_cross_entropy_with_logits(a, targets), rand(0, 3, 4, low=-4, high=4))


@pytest.mark.parametrize("make", [lambda: L.LayerNorm(axis=1, eps=1e-3, dtype="float64"),
                                  lambda: L.RMSNorm(eps=1e-3, axis=2, dtype="float64"),
                                  lambda: L.GroupNorm(3, eps=1e-3, dtype="float64")])
def test_normalization_layers_on_any_axis(make):
    layer = make()
    x = rand(0, 2, 6, 2, 3, low=-2, high=2)
    layer(x)
    for name, param in layer.params.items():  # weights other than ones and zeros: the affine part counts
        param.data = rand(len(name), *param.shape, low=0.5, high=1.5)
    check_gradients(lambda a: layer(a), x, atol=1e-5)


# ---------------------------------------------------------------- Keras' per-sample losses and their pieces
@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_keras_categorical_and_binary_crossentropy(from_logits, smoothing):
    soft = np.random.default_rng(3).dirichlet(np.ones(4), size=(2, 3))
    probs = rand(0, 2, 3, 4, low=0.05, high=1.0)  # away from the clip bounds, where the gradient is cut
    pred = rand(0, 2, 3, 4, low=-3, high=3) if from_logits else probs
    check_gradients(lambda p: F.categorical_crossentropy(soft, p, from_logits, smoothing), pred)
    targets = np.random.default_rng(4).random((2, 3, 4))
    pred = rand(1, 2, 3, 4, low=-3, high=3) if from_logits else rand(1, 2, 3, 4, low=0.05, high=0.95)
    check_gradients(lambda p: F.binary_crossentropy(targets, p, from_logits, smoothing), pred)


@pytest.mark.parametrize("fn", ["mean_squared_error", "mean_absolute_error", "huber", "log_cosh", "kl_divergence"])
def test_keras_regression_losses(fn):
    target = rand(9, 4, 3, low=0.05, high=1.0)
    pred = rand(0, 4, 3, low=0.05, high=1.0) if fn == "kl_divergence" else rand(0, 4, 3, low=-3, high=3)
    check_gradients(lambda a: getattr(F, fn)(target, a), pred)


def test_log_clip_abs_scale():
    check_gradients(lambda a: F.log(a), rand(0, 3, 4, low=0.2, high=3))
    x = rand(1, 3, 4, low=-2, high=2)
    x[np.abs(np.abs(x) - 1.0) < 1e-3] = 0.5  # finite differences across a clip bound are not a gradient
    check_gradients(lambda a: F.clip(a, -1.0, 1.0), x)
    check_gradients(lambda a: F.abs(a), np.where(np.abs(x) < 1e-3, 0.3, x))
    check_gradients(lambda a: F.scale(a, -2.5, 0.75), x)
