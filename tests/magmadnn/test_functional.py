"""magmadnn.functional: forward values through the Tensor API, padding rules, and typed errors on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import F, Parameter, Tensor, backend

xp = backend.get("host")


def test_conv2d_output_shape_and_padding_rules():
    assert F.conv2d_output_shape((28, 28), (5, 5), 1, 2, 1) == (28, 28)
    assert F.conv2d_output_shape((28, 28), 5, 1, "valid") == (24, 24)
    assert F.conv2d_output_shape((7, 8), (3, 3), (2, 3), "same") == (4, 3)
    assert F.conv2d_output_shape((10, 10), 3, 1, 0, 2) == (6, 6)
    assert F.conv2d_padding((6, 6), 4, 1, "same") == ((1, 2), (1, 2))
    assert F.conv2d_padding((6, 6), 3, 1, (1, 2)) == ((1, 1), (2, 2))
    assert F.conv2d_padding((6, 6), 3, 1, ((0, 1), (2, 3))) == ((0, 1), (2, 3))
    with pytest.raises(ValueError, match="padding must be 'same', 'valid'"):
        F.conv2d_padding((6, 6), 3, 1, "full")
    with pytest.raises(ValueError, match="stride must be >= 1"):
        F.conv2d_output_shape((6, 6), 3, 0)


@given(h=st.integers(1, 12), w=st.integers(1, 12), k=st.integers(1, 4), s=st.integers(1, 3), d=st.integers(1, 2))
def test_same_padding_gives_ceil_output(h, w, k, s, d):
    assert F.conv2d_output_shape((h, w), k, s, "same", d) == (math.ceil(h / s), math.ceil(w / s))


def test_conv2d_same_padding_matches_explicit_asymmetric_padding():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 6, 5)), rng.standard_normal((3, 2, 4, 2))
    same = F.conv2d(x, w, padding="same").numpy()
    explicit = F.conv2d(x, w, padding=((1, 2), (0, 1))).numpy()
    np.testing.assert_allclose(same, explicit)
    assert same.shape == (1, 3, 6, 5)


def test_functional_values_through_tensors():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    y = F.dense(Tensor(x), Parameter(w), Parameter(b))
    assert y.requires_grad
    for i in range(4):
        for j in range(2):
            assert y.numpy()[i, j] == pytest.approx(sum(x[i, k] * w[k, j] for k in range(3)) + b[j])
    img = rng.standard_normal((2, 3, 4, 4))
    np.testing.assert_allclose(F.global_avg_pool2d(img).numpy(), [[img[n, c].mean() for c in range(3)]
                                                                  for n in range(2)])  # fmt: skip
    assert F.flatten(img).shape == (2, 48)
    assert F.activation(Tensor(x), None) is not None and F.activation(Tensor(x), "linear").shape == x.shape
    labels = np.array([0, 1, 1, 0])
    per_sample = F.softmax_cross_entropy(F.dense(x, w), labels, reduction="none").numpy()
    assert per_sample.shape == (4,)
    total = F.softmax_cross_entropy(F.dense(x, w), labels, reduction="sum").item()
    assert total == pytest.approx(per_sample.sum())
    assert F.mse(Tensor(x), np.zeros_like(x)).item() == pytest.approx((x**2).mean())


def test_float32_stays_float32_end_to_end():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    w = Parameter(rng.standard_normal((4, 1, 3, 3)).astype(np.float32))
    b = Parameter(np.zeros(4, np.float32))
    h = F.max_pool2d(F.relu(F.conv2d(x, w, b, padding="same")), 2)
    h = F.dense(F.flatten(h), Parameter(rng.standard_normal((64, 3)).astype(np.float32)))
    loss = F.softmax_cross_entropy(h, np.array([0, 2]))
    assert h.dtype == np.float32 and loss.dtype == np.float32
    loss.backward()
    assert w.grad.dtype == np.float32 and b.grad.dtype == np.float32


def test_batch_norm_running_stats_and_modes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 2, 2)) * 2 + 1
    gamma, beta = Parameter(np.ones(3)), Parameter(np.zeros(3))
    rm, rv = np.zeros(3), np.ones(3)
    y = F.batch_norm(x, gamma, beta, rm, rv, training=True, momentum=0.9)
    np.testing.assert_allclose(y.numpy().mean(axis=(0, 2, 3)), 0, atol=1e-7)
    np.testing.assert_allclose(rm, 0.1 * x.mean(axis=(0, 2, 3)))
    before = (rm.copy(), rv.copy())
    y_eval = F.batch_norm(x, gamma, beta, rm, rv, training=False)
    np.testing.assert_array_equal(rm, before[0])
    np.testing.assert_array_equal(rv, before[1])
    np.testing.assert_allclose(y_eval.numpy(), (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5))


def test_dropout_identity_when_not_training():
    x = Tensor(np.ones((3, 4)))
    assert F.dropout(x, 0.5, False, xp.rng(0)) is x
    assert F.dropout(x, 0.0, True, xp.rng(0)) is x
    y = F.dropout(x, 0.5, True, xp.rng(0)).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0}


# ------------------------------------------------------------------------------------------------- bad input


def test_shape_mismatch_errors_name_function_and_shapes():
    with pytest.raises(ValueError, match=r"dense: x has shape \(4, 3\) but w has shape \(5, 2\)"):
        F.dense(np.ones((4, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"dense: b has shape \(3,\), expected \(2,\)"):
        F.dense(np.ones((4, 3)), np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) do not broadcast"):
        F.add(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match=r"matmul: inner dimensions differ.*\(2, 3\).*\(4, 5\)"):
        F.matmul(np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"conv2d: x has shape \(1, 3, 8, 8\) \(C=3\).*groups=1; expected C = 2"):
        F.conv2d(np.ones((1, 3, 8, 8)), np.ones((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"conv2d: b has shape \(3,\), expected \(4,\)"):
        F.conv2d(np.ones((1, 2, 8, 8)), np.ones((4, 2, 3, 3)), np.ones(3))
    with pytest.raises(ValueError, match=r"conv2d: input of spatial size \(2, 2\) is too small for kernel \(3, 3\)"):
        F.conv2d(np.ones((1, 2, 2, 2)), np.ones((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"max_pool2d: input of spatial size \(1, 1\) is smaller than the window"):
        F.max_pool2d(np.ones((1, 1, 1, 1)), 2)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape a tensor of shape \(2, 3\) into shape \(4, 2\)"):
        F.reshape(np.ones((2, 3)), (4, 2))
    with pytest.raises(ValueError, match=r"mse: pred has shape \(2, 3\) but target has shape \(3, 2\)"):
        F.mse(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"batch_norm: gamma has shape \(2,\), expected \(3,\)"):
        F.batch_norm(np.ones((4, 3)), np.ones(2), np.zeros(3), np.zeros(3), np.ones(3), training=True)
    with pytest.raises(ValueError, match=r"sum: axis 3 is out of range for a tensor of shape \(2, 3\)"):
        F.sum(np.ones((2, 3)), axis=3)


def test_wrong_rank_errors():
    with pytest.raises(ValueError, match=r"conv2d: x must be 4-D \(N, C, H, W\), got shape \(3, 8, 8\)"):
        F.conv2d(np.ones((3, 8, 8)), np.ones((4, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"dense: x must be at least 2-D \(N, ..., in_features\), got shape \(4,\)"):
        F.dense(np.ones(4), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"avg_pool2d: x must be 4-D"):
        F.avg_pool2d(np.ones((2, 8, 8)), 2)
    with pytest.raises(ValueError, match=r"softmax_cross_entropy: logits must be 2-D \(N, C\), got shape \(5,\)"):
        F.softmax_cross_entropy(np.ones(5), np.zeros(5, int))
    with pytest.raises(ValueError, match="batch_norm: x must be 2-D .* or 4-D"):
        F.batch_norm(np.ones((2, 3, 4)), np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), training=False)


def test_label_errors():
    logits = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\) for logits of shape \(3, 4\), got values in"):
        F.softmax_cross_entropy(logits, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\)"):
        F.softmax_cross_entropy(logits, np.array([0, -1, 1]))
    with pytest.raises(ValueError, match=r"labels have shape \(2,\), expected \(3,\)"):
        F.softmax_cross_entropy(logits, np.array([0, 1]))
    with pytest.raises(TypeError, match=r"labels of shape \(3,\) must be integer class indices, got dtype float64"):
        F.softmax_cross_entropy(logits, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"one-hot labels have shape \(3, 5\), expected \(3, 4\)"):
        F.softmax_cross_entropy(logits, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        F.softmax_cross_entropy(logits, np.array([0, 1, 2]), reduction="avg")


def test_dtype_errors():
    with pytest.raises(TypeError, match="dense: all inputs must have the same floating dtype, got x=float32, w=float6"):
        F.dense(np.ones((2, 3), np.float32), np.ones((3, 2), np.float64))
    with pytest.raises(TypeError, match="conv2d: x must be a floating array"):
        F.conv2d(np.ones((1, 1, 4, 4), np.int64), np.ones((1, 1, 3, 3), np.int64))
    with pytest.raises(TypeError, match="softmax_cross_entropy: logits must be a floating array"):
        F.softmax_cross_entropy(np.ones((2, 3), np.int32), np.array([0, 1]))
    with pytest.raises(TypeError, match="power: the exponent must be a Python number"):
        F.power(np.ones(3), np.ones(3))


def test_other_argument_errors():
    with pytest.raises(ValueError, match="activation: unknown kind 'swishy'"):
        F.activation(np.ones(3), "swishy")
    with pytest.raises(ValueError, match=r"dropout: rate must be in \[0, 1\), got 1.5"):
        F.dropout(np.ones(3), 1.5, True, xp.rng(0))
    with pytest.raises(ValueError, match="conv2d: groups must be a positive int"):
        F.conv2d(np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3)), groups=0)
    with pytest.raises(TypeError, match="conv2d_padding: padding must be"):
        F.conv2d(np.ones((1, 2, 4, 4)), np.ones((2, 2, 3, 3)), padding=(1, 2, 3))
    with pytest.raises(ValueError, match="max_pool2d: padding .* must be smaller than the window"):
        F.max_pool2d(np.ones((1, 1, 6, 6)), 2, padding=2)
    with pytest.raises(ValueError, match="batch_norm: training needs more than one value per channel"):
        F.batch_norm(np.ones((1, 3)), np.ones(3), np.zeros(3), np.zeros(3), np.ones(3), training=True)


# ---------------------------------------------------------------------------------------------- plans per signature
def _tensors(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal(s).astype(dtype), backend=xp) for s in shapes]


def test_a_planned_call_computes_what_an_unplanned_one_does():
    """The second call of a signature reads its plan; the answer equals the same call checked in full (plans
    cleared), bit for bit, for conv2d (resolved "same" padding, stride 2), pooling, dense over a 3-D input and
    batch norm."""
    from magmadnn.functional import conv, linear, normalization, pooling

    x, w, b = _tensors((2, 3, 7, 6), (4, 3, 3, 3), (4,))
    x3, wd, bd = _tensors((2, 5, 6), (6, 4), (4,), seed=1)
    xb, g, be = _tensors((4, 3), (3,), (3,), seed=2)

    def calls():
        mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
        return [F.conv2d(x, w, b, stride=2, padding="same").numpy(), F.max_pool2d(x, 2, padding="same").numpy(),
                F.dense(x3, wd, bd).numpy(), F.batch_norm(xb, g, be, mean, var, True).numpy(), mean]

    for plans in (conv._CONV2D_PLANS, pooling._POOL_PLANS, linear._DENSE_PLANS, normalization._BATCH_NORM_CHECKED):
        plans.clear()
    first = calls()
    assert all(len(p) for p in (conv._CONV2D_PLANS, pooling._POOL_PLANS, linear._DENSE_PLANS,
                                normalization._BATCH_NORM_CHECKED))
    planned = calls()
    for a, c in zip(first, planned):
        np.testing.assert_array_equal(a, c)
    assert planned[0].shape == (2, 4, 4, 3) and planned[2].shape == (2, 5, 4)


def test_a_plan_never_answers_for_input_it_did_not_check():
    """A signature differs by shape, dtype and an option's type: 2.0 is not the planned stride 2, another shape is
    checked again (with its own message each time), and an error is never kept as a plan."""
    x, w = _tensors((1, 2, 6, 6), (3, 2, 3, 3))
    F.conv2d(x, w, stride=2)
    with pytest.raises(TypeError, match="stride"):
        F.conv2d(x, w, stride=2.0)
    (bad,) = _tensors((1, 5, 6, 6))
    for _ in range(2):
        with pytest.raises(ValueError, match="C=5"):
            F.conv2d(bad, w, stride=2)
    (x64,) = _tensors((1, 2, 6, 6), dtype=np.float64)
    with pytest.raises(TypeError, match="same floating dtype"):
        F.conv2d(x64, w, stride=2)
    xd, wd = _tensors((3, 4), (4, 2))
    F.dense(xd, wd)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"expected \(2,\)"):
            F.dense(xd, wd, _tensors((3,))[0])
    xb, g, be = _tensors((4, 3), (3,), (3,))
    F.batch_norm(xb, g, be, np.zeros(3, np.float32), np.ones(3, np.float32), True)
    with pytest.raises(ValueError, match="running_var has shape"):
        F.batch_norm(xb, g, be, np.zeros(3, np.float32), np.ones(4, np.float32), True)
    with pytest.raises(ValueError, match="more than one value per channel"):
        F.batch_norm(_tensors((1, 3))[0], g, be, np.zeros(3, np.float32), np.ones(3, np.float32), True)
    with pytest.raises(ValueError, match="padding"):
        F.max_pool2d(x, 2, padding=((2, 2), (0, 0)))
