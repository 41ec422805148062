"""The training step's shortcuts (:func:`magmadnn.models.step.train_step`): the optimizer's planned update run
without ``Optimizer.step``'s frame, the fused loss's backward without ``Tensor.backward``'s, the inputs' dtypes read
inline. A step through them gives what the step spelled out by hand (forward, ``loss.backward()``,
``optimizer.step(params)``) gives, bit for bit, on the host and the simulated device, with a weight frozen and
unfrozen between steps; an optimizer whose ``step`` is its own (a subclass, or one set on the instance) runs it at
every step, and one used with another parameter count is refused as ``step`` refuses it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from magmadnn import _foreach, optimizers
from magmadnn import layers as L
from magmadnn.models import Model, step
from tests.magmadnn.backends import HOST_SIMULATOR_GPU, model_device

RNG = np.random.default_rng(41)
X = RNG.standard_normal((4, 6)).astype(np.float32)
Y = RNG.integers(0, 3, 4)
IDS = RNG.integers(0, 9, (4, 5))


@pytest.fixture(params=HOST_SIMULATOR_GPU)
def device(request):
    yield from model_device(request.param)


def _mlp():
    inputs = L.Input((6,))
    hidden = L.Dense(5, activation="relu", seed=1)
    return Model(inputs, L.Dense(3, seed=2)(hidden(inputs))), hidden


def _tokens():
    inputs = L.Input((5,), dtype="int64")  # an integer input keeps its dtype (the inline _input_dtypes)
    x = L.GlobalAveragePooling1D()(L.Embedding(9, 4, seed=1)(inputs))
    return Model(inputs, L.Dense(3, seed=2)(x)), None


def _by_hand(model, x, y):
    """The training step spelled out through the public calls each shortcut stands for."""
    out = model._forward(model._input_tensors([x]), training=True)
    loss = model._loss_of(out, y)
    loss.backward()
    params = model.parameters()
    model.optimizer.step(params)
    for p in params:
        p.grad = None
    return float(loss.numpy())


@pytest.mark.parametrize("make", [_mlp, _tokens])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_the_step_equals_the_step_by_hand_bit_for_bit(device, make, opt, monkeypatch):
    direct = []  # the planned updates train_step ran itself
    planned_step = _foreach.planned_step

    def counted(opt, params):
        done = planned_step(opt, params)
        if sys._getframe(1).f_code is step.train_step.__code__:
            direct.append(done)
        return done
    monkeypatch.setattr(_foreach, "planned_step", counted)
    runs = []
    for shortcut in (True, False):
        model, hidden = make()
        model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9) if opt == "sgd" else optimizers.Adam(0.01),
                      loss="cross_entropy", seed=0, device=device, graph=False)
        x = IDS if make is _tokens else X
        losses = []
        for k in range(6):
            if hidden is not None and k in (2, 4):  # frozen at step 2, trainable again at 4
                hidden.trainable = k == 4
            losses.append(float(model.train_on_batch(x, Y)) if shortcut else _by_hand(model, x, Y))
        runs.append((losses, [np.array(w.numpy()) for w in model.weights],
                     {i: {k: np.array(model.xp.to_numpy(a)) for k, a in s.items()}
                      for i, s in model.optimizer.slot_arrays.items()}, model.optimizer.iterations))
    (losses, weights, slots, steps), (want_losses, want_weights, want_slots, want_steps) = runs
    assert direct.count(True) >= 2  # (the shortcut taken: it gave what the step by hand gives)
    assert losses == want_losses and steps == want_steps
    for got, want in zip(weights, want_weights):
        np.testing.assert_array_equal(got, want)
    assert slots.keys() == want_slots.keys()
    for i in slots:
        for k in slots[i]:
            np.testing.assert_array_equal(slots[i][k], want_slots[i][k])


class _Counted(optimizers.SGD):
    steps = 0

    def step(self, params):
        type(self).steps += 1
        super().step(params)


def test_an_optimizer_with_its_own_step_runs_it_every_step():
    model, _ = _mlp()
    model.compile(optimizer=_Counted(0.1), loss="cross_entropy", seed=0, graph=False)
    for _ in range(4):
        model.train_on_batch(X, Y)
    assert _Counted.steps == 4
    seen = []
    opt = optimizers.SGD(0.1)
    model.compile(optimizer=opt, loss="cross_entropy", graph=False)
    model.train_on_batch(X, Y)
    model.train_on_batch(X, Y)  # planned by now
    step = opt.step

    def counted(params):
        seen.append(len(params))
        step(params)
    opt.__dict__["step"] = counted  # (set on the instance, as a test's wrapper: no attribute write's side effects)
    model.train_on_batch(X, Y)
    model.train_on_batch(X, Y)
    assert seen == [4, 4]


def test_an_optimizer_used_with_another_parameter_count_is_refused():
    model, _ = _mlp()
    opt = optimizers.SGD(0.1, momentum=0.9)
    model.compile(optimizer=opt, loss="cross_entropy", seed=0, graph=False)
    model.train_on_batch(X, Y)
    model.train_on_batch(X, Y)  # planned
    inputs = L.Input((6,))
    other = Model(inputs, L.Dense(3, use_bias=False, seed=3)(inputs))
    other.compile(optimizer=opt, loss="cross_entropy", seed=0, graph=False)
    model.train_on_batch(X, Y)
    model.train_on_batch(X, Y)  # planned again, after the compile's attribute writes
    assert opt._step_plan is not None
    with pytest.raises(ValueError, match="got 1 parameters, but this optimizer was used with 4"):
        other.train_on_batch(X, Y)
