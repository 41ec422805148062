"""The multi-tensor updates' plans (kernels/optim.py's ``_ManyPlan``): the launches a planned call builds equal those
of the full path (plans cleared) byte for byte, whatever changed since the plan was made (a parameter or state array
replaced, a gradient of another shape, dtype or layout, the momentum's states dropped, a parameter added), and a plan
keeps no array alive."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from magmadnn.backend.device.kernels import optim
from pymagma.array import DeviceArray

SIZES = (3, 5, 0, 7)  # (one empty tensor: in no launch, its buffers still checked)
_next = [1]


def fake(n, dtype=np.float32, strides=None):
    """A device array header at a fresh address (nothing is read or written through it)."""
    _next[0] += 1
    return DeviceArray((n,), dtype, 4096 * _next[0], strides=strides)


def columns(states=True):
    params = [fake(n) for n in SIZES]
    return params, [fake(n) for n in SIZES], [fake(n) for n in SIZES] if states else None


def full(what, cols, values=None):
    """The launches of the full path: every plan dropped first."""
    optim._MANY_PLANS.clear()
    return optim._many_groups(what, cols, values)


def same(got, want):
    assert [(d, like, total, at) for d, like, total, _, at in got] == \
        [(d, like, total, at) for d, like, total, _, at in want]
    assert [bytes(t) for *_, t, _ in got] == [bytes(t) for *_, t, _ in want]


@pytest.fixture(autouse=True)
def no_plans():
    optim._MANY_PLANS.clear()
    yield
    optim._MANY_PLANS.clear()


def test_a_planned_call_equals_the_full_path_with_new_gradients():
    params, grads, states = columns()
    first = optim._many_groups("sgd_update_many", (params, grads, states), None)
    assert len(optim._MANY_PLANS) == 1
    grads = [fake(n) for n in SIZES]  # a step's new gradients
    planned = optim._many_groups("sgd_update_many", (params, grads, states), None)
    assert [t.a[1][0] for *_, t, _ in planned] == [grads[0].ptr] != [t.a[1][0] for *_, t, _ in first]
    same(planned, full("sgd_update_many", (params, grads, states)))


@pytest.mark.parametrize("change", ["param", "state", "states_dropped", "added", "other_update"])
def test_a_plan_is_not_used_once_what_it_holds_for_changes(change):
    params, grads, states = columns()
    what = "sgd_update_many"
    optim._many_groups(what, (params, grads, states), None)
    if change == "param":  # set_weights, a snapshot restored: another array of the same shape
        params = [params[0], fake(5), *params[2:]]
    elif change == "state":  # the optimizer's slots loaded from a checkpoint
        states = [*states[:3], fake(7)]
    elif change == "states_dropped":  # momentum off
        states = None
    elif change == "added":
        params, grads, states = params + [fake(2)], grads + [fake(2)], states + [fake(2)]
    else:
        what = "adagrad_update_many"
    cols = (params, grads, states)
    planned = optim._many_groups(what, cols, None)
    same(planned, full(what, cols))


def test_gradients_unlike_the_plan_are_refused_as_by_the_full_path():
    params, grads, states = columns()
    optim._many_groups("sgd_update_many", (params, grads, states), None)
    for bad, error in ((fake(4), "shape"), (fake(5, np.float64), "dtype"), (fake(5, strides=(8,)), "C-contiguous")):
        with pytest.raises((ValueError, TypeError), match=error):
            optim._many_groups("sgd_update_many", (params, [grads[0], bad, *grads[2:]], states), None)
    with pytest.raises(ValueError, match="one entry per parameter"):
        optim._many_groups("sgd_update_many", (params, grads[:2], states), None)
    same(optim._many_groups("sgd_update_many", (params, grads, states), None),
         full("sgd_update_many", (params, grads, states)))


def test_a_state_unused_in_part_is_never_planned():
    params, grads, states = columns()
    cols = (params, grads, [None, *states[1:]])
    optim._many_groups("test", cols, None)
    assert not optim._MANY_PLANS


def test_a_plan_keeps_no_array_alive_and_a_dead_array_is_never_taken_for_a_live_one():
    params, grads, states = columns()
    optim._many_groups("sgd_update_many", (params, grads, states), None)
    kept = weakref.ref(params[1])
    params[1] = fake(5)
    gc.collect()
    assert kept() is None  # the plan held it weakly only
    cols = (params, grads, states)
    same(optim._many_groups("sgd_update_many", cols, None), full("sgd_update_many", cols))


def test_plans_are_bounded():
    alive = [columns() for _ in range(optim._MANY_PLAN_LIMIT + 5)]
    for cols in alive:
        optim._many_groups("test", cols, None)
    assert len(optim._MANY_PLANS) == optim._MANY_PLAN_LIMIT
