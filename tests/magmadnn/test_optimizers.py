"""Optimizers against their formulas written here in NumPy (two steps, so the state carries over), schedules'
values, state dicts, and argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import Parameter, optimizers, schedules

RNG = np.random.default_rng(5)
P0 = RNG.normal(size=(3, 4))
GRADS = [RNG.normal(size=(3, 4)) for _ in range(3)]


def run(optimizer, grads=GRADS, p0=P0):
    """Apply ``optimizer`` with the gradient sequence to a copy of ``p0``; the parameter after each step."""
    param = Parameter(p0.copy())
    out = []
    for g in grads:
        param.grad = g.copy()
        optimizer.step([param])
        out.append(param.data.copy())
    return out


def sgd_reference(lr, momentum=0.0, nesterov=False, wd=0.0):
    """Keras' SGD: decoupled weight decay."""
    p, v, out = P0.copy(), np.zeros_like(P0), []
    for g in GRADS:
        p = p - lr * wd * p
        v = momentum * v + g
        p = p - lr * ((g + momentum * v) if nesterov else v)
        out.append(p)
    return out


def adam_reference(lr, b1, b2, eps, wd=0.0):
    """Keras' Adam/AdamW: decoupled decay, epsilon outside the uncorrected root."""
    p, m, v, out = P0.copy(), np.zeros_like(P0), np.zeros_like(P0), []
    for t, g in enumerate(GRADS, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
        out.append(p)
    return out


def rmsprop_reference(lr, rho, eps, wd=0.0, keras=False, s0=0.0):
    """PyTorch's form (L2 decay, eps outside the root) or Keras' (decoupled decay, eps inside)."""
    p, s, out = P0.copy(), np.full_like(P0, s0), []
    for g in GRADS:
        if keras:
            p = p - lr * wd * p
        else:
            g = g + wd * p
        s = rho * s + (1 - rho) * g * g
        p = p - lr * g / (np.sqrt(s + eps) if keras else np.sqrt(s) + eps)
        out.append(p)
    return out


def adagrad_reference(lr, eps, wd=0.0, keras=False, s0=0.0):
    p, s, out = P0.copy(), np.full_like(P0, s0), []
    for g in GRADS:
        if keras:
            p = p - lr * wd * p
        else:
            g = g + wd * p
        s = s + g * g
        p = p - lr * g / (np.sqrt(s + eps) if keras else np.sqrt(s) + eps)
        out.append(p)
    return out


@pytest.mark.parametrize("optimizer, reference", [
    (lambda: optimizers.SGD(0.1), lambda: sgd_reference(0.1)),
    (lambda: optimizers.SGD(0.1, momentum=0.9), lambda: sgd_reference(0.1, 0.9)),
    (lambda: optimizers.SGD(0.1, momentum=0.9, nesterov=True), lambda: sgd_reference(0.1, 0.9, True)),
    (lambda: optimizers.SGD(0.05, momentum=0.5, weight_decay=0.01), lambda: sgd_reference(0.05, 0.5, wd=0.01)),
    (lambda: optimizers.AdaGrad(0.1), lambda: adagrad_reference(0.1, 1e-7)),
    (lambda: optimizers.AdaGrad(0.1, weight_decay=0.1), lambda: adagrad_reference(0.1, 1e-7, 0.1)),
    (lambda: optimizers.RMSProp(0.01, rho=0.8), lambda: rmsprop_reference(0.01, 0.8, 1e-7)),
    (lambda: optimizers.RMSProp(0.01, weight_decay=0.1), lambda: rmsprop_reference(0.01, 0.9, 1e-7, 0.1)),
    (lambda: optimizers.Adam(0.01), lambda: adam_reference(0.01, 0.9, 0.999, 1e-7)),
    (lambda: optimizers.Adam(0.01, beta1=0.5, weight_decay=0.1), lambda: adam_reference(0.01, 0.5, 0.999, 1e-7, 0.1)),
    (lambda: optimizers.AdamW(0.01), lambda: adam_reference(0.01, 0.9, 0.999, 1e-7, 0.004)),
    (lambda: optimizers.AdamW(0.01, weight_decay=0.3, eps=1e-8), lambda: adam_reference(0.01, 0.9, 0.999, 1e-8, 0.3)),
    (lambda: optimizers.RMSprop(0.01, weight_decay=0.1), lambda: rmsprop_reference(0.01, 0.9, 1e-7, 0.1, True)),
    (lambda: optimizers.Adagrad(0.1, weight_decay=0.1), lambda: adagrad_reference(0.1, 1e-7, 0.1, True, 0.1)),
], ids=["sgd", "momentum", "nesterov", "sgd-wd", "adagrad", "adagrad-wd", "rmsprop", "rmsprop-wd", "adam",
        "adam-wd", "adamw", "adamw-0.3", "keras-rmsprop", "keras-adagrad"])
def test_updates_match_the_formula(optimizer, reference):
    for got, expected in zip(run(optimizer()), reference()):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_parameters_without_gradient_are_left_alone():
    a, b = Parameter(np.ones(3)), Parameter(np.ones(3))
    a.grad = np.ones(3)
    opt = optimizers.SGD(0.5, momentum=0.9)
    opt.step([a, b])
    np.testing.assert_allclose(a.data, 0.5)
    np.testing.assert_allclose(b.data, 1.0)
    assert opt.iterations == 1


def test_float32_parameters_stay_float32():
    param = Parameter(np.ones((2, 2), dtype=np.float32))
    param.grad = np.ones((2, 2), dtype=np.float32)
    optimizers.Adam(0.1).step([param])
    assert param.data.dtype == np.float32


def test_state_dict_resumes_identically():
    full = run(optimizers.Adam(0.01))
    first = optimizers.Adam(0.01)
    after_one = run(first, GRADS[:1])[-1]
    second = optimizers.Adam(0.01)
    second.load_state_dict({k: v for k, v in first.state_dict().items()})
    resumed = run(second, GRADS[1:], p0=after_one)
    np.testing.assert_allclose(resumed[-1], full[-1], rtol=1e-14)
    assert second.iterations == 3


def test_schedule_as_learning_rate_uses_the_step_count():
    opt = optimizers.SGD(schedules.StepDecay(0.1, step_size=1, gamma=0.5))
    lrs = []
    for _ in range(3):
        lrs.append(opt.learning_rate)
        run(opt, GRADS[:1])
    assert lrs == pytest.approx([0.1, 0.05, 0.025])
    p = run(optimizers.SGD(schedules.StepDecay(0.1, 1, 0.5)))
    expected = P0 - 0.1 * GRADS[0] - 0.05 * GRADS[1] - 0.025 * GRADS[2]
    np.testing.assert_allclose(p[-1], expected, rtol=1e-12)


@given(t=st.integers(0, 1000), step=st.integers(1, 50), gamma=st.floats(0.05, 0.99))
def test_step_decay_values(t, step, gamma):
    assert schedules.StepDecay(0.3, step, gamma)(t) == pytest.approx(0.3 * gamma ** math.floor(t / step))


def test_cosine_decay_values():
    cos = schedules.CosineDecay(1.0, decay_steps=100, alpha=0.1)
    assert cos(0) == pytest.approx(1.0)
    assert cos(50) == pytest.approx(0.1 + 0.9 * 0.5)
    assert cos(25) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert cos(100) == pytest.approx(0.1)
    assert cos(500) == pytest.approx(0.1)
    warm = schedules.CosineDecay(initial_lr=0.2, decay_steps=10, warmup_steps=4)  # the earlier spelling: from 0
    assert [warm(t) for t in range(5)] == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    assert warm(9) == pytest.approx(0.2 * 0.5 * (1 + math.cos(math.pi * 5 / 10)))


def test_schedule_config_round_trip():
    for sched in (schedules.StepDecay(0.1, 3, 0.5), schedules.CosineDecay(0.1, 7, 0.2, 2)):
        again = schedules.get(sched.to_config())
        assert [again(t) for t in range(12)] == [sched(t) for t in range(12)]
    opt = optimizers.get(optimizers.SGD(schedules.CosineDecay(0.1, 5), momentum=0.9).to_config())
    assert isinstance(opt.lr, schedules.CosineDecay) and opt.momentum == 0.9


@pytest.mark.parametrize("make, match", [
    (lambda: optimizers.SGD(0.1, momentum=1.0), "momentum"),
    (lambda: optimizers.SGD(0.1, nesterov=True), "nesterov"),
    (lambda: optimizers.Adam(0.1, beta2=1.5), "beta2"),
    (lambda: optimizers.RMSProp(0.1, eps=0.0), "eps"),
    (lambda: optimizers.SGD(-1.0), "lr"),
    (lambda: optimizers.get("lbfgs"), "unknown optimizer"),
    (lambda: schedules.StepDecay(0.1, 0), "step_size"),
    (lambda: schedules.CosineDecay(0.1, 10, alpha=2.0), "alpha"),
])
def test_bad_optimizer_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_one_optimizer_per_parameter_list():
    opt = optimizers.SGD(0.1)
    run(opt, GRADS[:1])
    with pytest.raises(ValueError, match="got 2 parameters"):
        opt.step([Parameter(np.ones(2)), Parameter(np.ones(2))])


def test_plain_callable_lr_trains_but_cannot_be_saved():
    opt = optimizers.SGD(lambda t: 0.1 / (1 + t))
    assert opt.learning_rate == pytest.approx(0.1)
    with pytest.raises(TypeError, match="plain callable learning rate .* cannot be saved; use a magmadnn.schedules"):
        opt.state_dict()


def _momentum_reference(steps, lr=0.1, momentum=0.9):
    """Keras' SGD with momentum for one parameter from ones(3): the value after ``steps``, a list of its gradients
    (None: a step that leaves it and its velocity alone)."""
    p, v = np.ones(3), np.zeros(3)
    for g in steps:
        if g is not None:
            v = momentum * v + g
            p = p - lr * v
    return p


def test_later_steps_follow_trainable_flags_gradients_and_constraints_as_the_first():
    """From the second step every parameter has its slots (the step updates them a column at a time): a weight
    frozen, one without a gradient, one given a constraint, one unfrozen again: each as a step of its own."""
    from magmadnn import constraints

    a, b, c = (Parameter(np.ones(3)) for _ in range(3))
    opt = optimizers.SGD(0.1, momentum=0.9)
    g = [np.full(3, k, dtype=np.float64) for k in (1.0, 2.0, 3.0, 4.0)]
    history = {"a": [], "b": [], "c": []}

    def step(grads, frozen=()):
        for name, p, gk in zip("abc", (a, b, c), grads):
            p.trainable = name not in frozen
            p.grad = None if gk is None else gk.copy()
            history[name].append(gk if (gk is not None and name not in frozen) else None)
        opt.step([a, b, c])

    step([g[0], g[0], g[0]])
    step([g[1], g[1], g[1]], frozen=("b",))
    np.testing.assert_array_equal(b.data, _momentum_reference(history["b"]))
    step([g[2], None, g[2]])  # b thawed but without a gradient
    c.constraint = constraints.NonNeg()
    step([g[3], g[3], g[3]])
    np.testing.assert_allclose(a.data, _momentum_reference(history["a"]), rtol=1e-14)
    np.testing.assert_allclose(b.data, _momentum_reference(history["b"]), rtol=1e-14)
    np.testing.assert_array_equal(c.data, np.maximum(_momentum_reference(history["c"]), 0.0))
    assert (c.data == 0).all() and opt.iterations == 4


def test_a_rule_of_its_own_is_used_on_every_step():
    """An optimizer class overriding ``update`` keeps its per-parameter updates after the first step too."""
    class Halving(optimizers.SGD):
        def update(self, xp, p, g, state, lr):
            p[...] = p * 0.5

    params = [Parameter(np.ones(2)), Parameter(np.ones(3))]
    opt = Halving(0.1)
    for _ in range(3):
        for p in params:
            p.grad = np.ones_like(p.data)
        opt.step(params)
    for p in params:
        np.testing.assert_array_equal(p.data, 0.125)
