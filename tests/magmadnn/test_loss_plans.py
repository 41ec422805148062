"""SoftmaxCrossEntropy's plans of a training batch (``Loss.of_batch``, what ``Model`` runs per batch): a planned batch
gives the loss and the logits' gradient of the unplanned ``checked(prepare(...))`` bit for bit (and NumPy's values),
on the host and the simulated device; a plan answers only for the configuration and the signature it was made for
(smoothing, ignore_index or the reduction changed, another batch size, label dtype or logits dtype), bad labels are
refused every time with the checked path's message, and a subclass overriding a planned method is never planned."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import backend, losses
from magmadnn.autograd import Tensor
from magmadnn.backend import host as _host
from magmadnn.models.weighting import WeightedTargets
from tests.magmadnn.backends import HOST_SIMULATOR_GPU, backend_of

RNG = np.random.default_rng(38)
N, C = 5, 4


@pytest.fixture(params=HOST_SIMULATOR_GPU)
def xp(request):
    yield from backend_of(request.param)


def _logits(xp, n=N, dtype=np.float32):
    return RNG.normal(size=(n, C)).astype(dtype)


def _run(loss, xp, logits, y, planned: bool):
    """(loss value, logits' gradient) as host arrays, through of_batch (``planned``) or checked(prepare(...))."""
    t = Tensor(xp.asarray(logits), backend=xp, requires_grad=True)
    value = loss.of_batch(t, y, _host, logits.dtype) if planned else \
        loss.checked(t, loss.prepare(y, _host, logits.dtype))
    value.backward()
    return np.asarray(xp.to_numpy(value.data)), np.asarray(xp.to_numpy(t.grad))


def _numpy_mean(logits, y):
    z = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


def test_a_planned_batch_equals_the_checked_path_bit_for_bit(xp):
    loss = losses.SoftmaxCrossEntropy()
    for _ in range(4):  # the first batch plans, the others run the plan
        logits, y = _logits(xp), RNG.integers(0, C, N)
        got, want = _run(loss, xp, logits, y, True), _run(loss, xp, logits, y, False)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
        np.testing.assert_allclose(got[0], _numpy_mean(logits, y), rtol=1e-5)
    assert len(loss._plans) == 1


@pytest.mark.parametrize("change", ["label_smoothing", "ignore_index", "reduction"])
def test_a_changed_configuration_is_never_answered_by_an_old_plan(xp, change):
    loss = losses.SoftmaxCrossEntropy()
    logits, y = _logits(xp), np.array([0, 1, 2, 3, 1])
    _run(loss, xp, logits, y, True)
    _run(loss, xp, logits, y, True)  # planned
    value = {"label_smoothing": 0.2, "ignore_index": 1, "reduction": "sum"}[change]
    setattr(loss, change, value)
    fresh = losses.SoftmaxCrossEntropy(**{change: value})
    got, want = _run(loss, xp, logits, y, True), _run(fresh, xp, logits, y, False)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    plain = _run(losses.SoftmaxCrossEntropy(), xp, logits, y, False)
    assert got[0].tobytes() != plain[0].tobytes()


def test_each_signature_has_its_own_plan(xp):
    loss = losses.SoftmaxCrossEntropy(reduction="sum")
    cases = [(_logits(xp), RNG.integers(0, C, N)), (_logits(xp, 3), RNG.integers(0, C, 3)),
             (_logits(xp), RNG.integers(0, C, N).astype(np.int32)), (_logits(xp, dtype=np.float64),
                                                                       RNG.integers(0, C, N))]
    for _ in range(2):
        for logits, y in cases:
            got, want = _run(loss, xp, logits, y, True), _run(loss, xp, logits, y, False)
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert len(loss._plans) == len(cases)


def test_bad_labels_are_refused_after_a_plan_as_before(xp):
    loss = losses.SoftmaxCrossEntropy()
    logits = _logits(xp)
    for _ in range(2):
        _run(loss, xp, logits, RNG.integers(0, C, N), True)
    with pytest.raises(ValueError, match=r"labels have shape \(4,\), expected \(5,\)"):
        _run(loss, xp, logits, RNG.integers(0, C, N - 1), True)
    with pytest.raises(TypeError, match="must be integer class indices"):
        _run(loss, xp, logits, RNG.normal(size=N), True)
    with pytest.raises(ValueError, match=r"labels have shape \(5,\); expected \(5, 2\)"):
        _run(loss, xp, RNG.normal(size=(N, 2, C)).astype(np.float32), RNG.integers(0, C, N), True)
    _run(loss, xp, logits, RNG.integers(0, C, N), True)  # the plan still answers its own signature


def test_one_hot_and_weighted_targets_run_the_checked_path(xp):
    loss = losses.SoftmaxCrossEntropy()
    loss.validate(np.zeros(N, np.int64), (C,))  # (weighted targets are packed with the validated shape)
    logits = _logits(xp)
    onehot = np.eye(C, dtype=np.float32)[RNG.integers(0, C, N)]
    weighted = RNG.integers(0, C, N).view(WeightedTargets)
    weighted.sample_weight = RNG.uniform(0.5, 2.0, N)
    targets = [onehot, weighted]
    for _ in range(2):
        for y in targets:
            got, want = _run(loss, xp, logits, y, True), _run(loss, xp, logits, y, False)
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert not loss._plans


def test_a_subclass_overriding_a_planned_method_is_never_planned(xp):
    calls = []

    class Counted(losses.SoftmaxCrossEntropy):
        def checked(self, logits, targets):
            calls.append(1)
            return super().checked(logits, targets)

    loss, logits, y = Counted(), _logits(xp), RNG.integers(0, C, N)
    for _ in range(3):
        _run(loss, xp, logits, y, True)
    assert len(calls) == 3 and not loss._plans


def test_plans_are_no_part_of_the_configuration():
    loss = losses.SoftmaxCrossEntropy()
    key = loss._capture_key()
    xp = backend.get("cpu")
    for _ in range(2):
        _run(loss, xp, _logits(xp), RNG.integers(0, C, N), True)
    assert loss._plans and loss._capture_key() == key


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_planned_batch_records_as_the_checked_path(xp, reduction):
    """A planned batch runs its Function's apply inline (the mean) or through it: the same value and the same record
    (recorded for logits that require grad, not for others, nor under no_grad) as the checked path."""
    from magmadnn.autograd import no_grad

    loss = losses.SoftmaxCrossEntropy(reduction=reduction)
    logits, y = _logits(xp), RNG.integers(0, C, N)
    _run(loss, xp, logits, y, True)  # planned from here
    for wants_grad, quiet in [(True, False), (False, False), (True, True)]:
        records = []
        for planned in (True, False):
            t = Tensor(xp.asarray(logits), backend=xp, requires_grad=wants_grad)
            if quiet:
                with no_grad():
                    value = loss.of_batch(t, y, _host, logits.dtype) if planned else \
                        loss.checked(t, loss.prepare(y, _host, logits.dtype))
            else:
                value = loss.of_batch(t, y, _host, logits.dtype) if planned else \
                    loss.checked(t, loss.prepare(y, _host, logits.dtype))
            fn = value._fn
            records.append((np.asarray(xp.to_numpy(value.data)).tobytes(), value.requires_grad, value.xp is xp,
                            None if fn is None else (type(fn), len(fn.inputs), fn.inputs[0] is t,
                                                     fn.needs_input_grad)))
        assert records[0] == records[1]
