"""The optimizers' step plans (``_foreach.StepPlan``, ``_foreach.planned_step``): planned steps give the weights and
slots of steps that decide everything anew (the plan dropped before each) bit for bit, on the host and the simulated
device, for every rule with a multi-tensor op and a schedule; a plan never outlives what it decided (a clipping
option, a hyperparameter or Nesterov set later, an ``update`` replaced on the class, a weight frozen or given a
constraint, the graph capture's device values)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import Parameter, _foreach, backend, constraints, optimizers, schedules
from tests.magmadnn.backends import HOST_SIMULATOR_GPU, backend_of

RNG = np.random.default_rng(38)
SHAPES = ((3, 4), (4,), (2, 3, 2))
STEPS = 4


@pytest.fixture(params=HOST_SIMULATOR_GPU)
def xp(request):
    yield from backend_of(request.param)


def _unplanned(opt):
    """``opt`` deciding its step anew each time: its plan dropped before every step."""
    step = opt.step

    def fresh(params):
        object.__setattr__(opt, "_step_plan", None)
        step(params)
    opt.step = fresh
    return opt


def _train(xp, opt, changes=None, steps=STEPS):
    """The weights (host arrays) after ``steps`` steps of fixed gradients; ``changes[k](opt, params)`` runs before
    step k."""
    rng = np.random.default_rng(7)
    params = [Parameter(xp.asarray(rng.normal(size=s).astype(np.float32)), backend=xp) for s in SHAPES]
    grads = [[rng.normal(size=s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    for k in range(steps):
        if changes and k in changes:
            changes[k](opt, params)
        for p, g in zip(params, grads[k]):
            p.grad = xp.asarray(g)
        opt.step(params)
    return [np.asarray(xp.to_numpy(p.data)) for p in params]


def _same(a, b):
    assert len(a) == len(b) and all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


MAKERS = {
    "sgd": lambda: optimizers.SGD(0.1),
    "momentum": lambda: optimizers.SGD(0.1, momentum=0.9),
    "nesterov_decay": lambda: optimizers.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "schedule": lambda: optimizers.SGD(schedules.ExponentialDecay(0.1, 1, 0.5), momentum=0.5),
    "adam": lambda: optimizers.Adam(0.01),
    "adamw": lambda: optimizers.AdamW(0.01, weight_decay=0.1),
    "rmsprop": lambda: optimizers.RMSprop(0.01),
    "adagrad": lambda: optimizers.Adagrad(0.1),
    "torch_rmsprop": lambda: optimizers.RMSProp(0.01),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_planned_steps_equal_unplanned_ones_bit_for_bit(xp, kind):
    opt = MAKERS[kind]()
    got = _train(xp, opt)
    assert (opt._step_plan is not None) == (_foreach._rule(opt) is not None) and opt.iterations == STEPS
    _same(got, _train(xp, _unplanned(MAKERS[kind]())))


def _set(**values):
    def change(opt, params):
        for name, value in values.items():
            setattr(opt, name, value)
    return change


@pytest.mark.parametrize("change", [
    _set(clipnorm=0.05), _set(global_clipnorm=0.05), _set(clipvalue=0.01), _set(momentum=0.2),
    _set(nesterov=True), _set(weight_decay=0.3)], ids=["clipnorm", "global_clipnorm", "clipvalue", "momentum",
                                                        "nesterov", "weight_decay"])
def test_a_plan_never_outlives_a_changed_option(xp, change):
    planned = _train(xp, optimizers.SGD(0.1, momentum=0.9), {2: change})
    _same(planned, _train(xp, _unplanned(optimizers.SGD(0.1, momentum=0.9)), {2: change}))
    _assert_differs(planned, _train(xp, optimizers.SGD(0.1, momentum=0.9)))


def _assert_differs(a, b):
    assert any(x.tobytes() != y.tobytes() for x, y in zip(a, b))


def test_frozen_and_constrained_weights_after_a_plan(xp):
    def freeze(opt, params):
        params[0].trainable = False

    def constrain(opt, params):
        params[0].trainable = True
        params[1].constraint = constraints.NonNeg()

    changes = {2: freeze, 3: constrain}
    planned = _train(xp, optimizers.SGD(0.1, momentum=0.9), changes, steps=5)
    _same(planned, _train(xp, _unplanned(optimizers.SGD(0.1, momentum=0.9)), changes, steps=5))
    assert (planned[1] >= 0).all()


def test_an_update_replaced_on_the_class_is_used_at_once():
    class Mine(optimizers.SGD):
        pass

    def halving(self, xp, p, g, state, lr):
        p[...] = p * 0.5

    host = backend.get("cpu")
    got = _train(host, Mine(0.1), {2: lambda opt, params: setattr(Mine, "update", halving)})
    for g, r in zip(got, _train(host, optimizers.SGD(0.1), steps=2)):
        np.testing.assert_array_equal(g, r * 0.25)


def test_a_plan_holds_for_its_class_only():
    xp = backend.get("cpu")
    opt = optimizers.SGD(0.1, momentum=0.9)
    _train(xp, opt, steps=2)
    plan = opt._step_plan
    assert plan is not None and plan.cls is optimizers.SGD and plan.rule is not None
    assert _foreach.StepPlan.of(optimizers.SGD(0.1, clipnorm=1.0), optimizers.Optimizer) is None
    assert _foreach.StepPlan.of(optimizers.RMSprop(0.1, momentum=0.5), optimizers.Optimizer) is None  # (no rule)
