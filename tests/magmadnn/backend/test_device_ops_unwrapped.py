"""The device ops that are their kernel launchers' own functions (no wrapper frame): the mean softmax cross-entropy and
its planned gradient, the embedding gather and scatter, the multi-tensor optimizer updates (device/losses.py,
embeddings.py, optim.py over kernels/loss.py, embeddings.py, optim.py), and the range check's plan
(device/faults.py). Each planned or unwrapped call equals the checked kernel launcher's bit for bit and NumPy's
within rounding; integer labels and indices of any dtype are cast as the wrappers cast them; errors are never kept."""

from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn.backend import device as xp
from magmadnn.backend.device import faults
from magmadnn.backend.device.kernels import embeddings, loss, optim
from pymagma import asarray, simulator
from pymagma.queue import default_queue

RNG = np.random.default_rng(38)
#: Where a test of values runs: the simulated device (CI), or the real one (the gpu twin, skipped without a GPU).
WHERE = ["simulator", pytest.param("gpu", marks=pytest.mark.gpu)]


def _on(where):
    return simulator.simulated("full") if where == "simulator" else contextlib.nullcontext()


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _labels(kind, rows, classes, rng):
    if kind == "prob":
        return rng.dirichlet(np.ones(classes), rows).astype(np.float32)
    return rng.integers(0, classes, rows).astype(np.int64 if kind == "int64" else np.int32)


@pytest.mark.parametrize("where", WHERE)
@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 6), classes=st.integers(1, 5), kind=st.sampled_from(["int64", "int32", "prob"]),
       upstream=st.sampled_from([None, 0.5, -2.0]), transposed=st.booleans(), seed=st.integers(0, 2**16))
def test_planned_mean_gradient_equals_the_checked_launcher_and_numpy(where, rows, classes, kind, upstream,
                                                                     transposed, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((rows, classes)).astype(np.float32)
    labels = _labels(kind, rows, classes, rng)
    with _on(where):
        loss._MEAN_BACKWARD.clear()
        d_logits = asarray(logits.T.copy()).T if transposed else asarray(logits)
        d_labels = asarray(labels)
        value, probs = xp.softmax_cross_entropy_mean(d_logits, d_labels)
        dloss = None if upstream is None else asarray(np.float32(upstream))
        checked_labels = d_labels if kind != "int32" else asarray(labels.astype(np.int64))
        want = loss.softmax_cross_entropy_backward(probs, checked_labels, dloss, mean=True).get()
        kernel_value, kernel_probs = loss.softmax_cross_entropy_mean(d_logits, checked_labels)
        value = value.get()
        np.testing.assert_array_equal(value, kernel_value.get())
        np.testing.assert_array_equal(probs.get(), kernel_probs.get())
        if transposed:  # (strided views: the planned call copies them as the checked one does)
            probs = asarray(probs.get().T.copy()).T
            d_labels = asarray(labels.T.copy()).T if kind == "prob" else d_labels
        first = xp.softmax_cross_entropy_mean_backward(probs, d_labels, dloss).get()  # checked, then planned
        assert len(loss._MEAN_BACKWARD) == 1
        second = xp.softmax_cross_entropy_mean_backward(probs, d_labels, dloss).get()  # planned
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(second, want)
    target = labels if kind == "prob" else np.eye(classes, dtype=np.float32)[labels]
    p = _softmax(logits.astype(np.float64))
    reference = (p * target.sum(axis=1, keepdims=True) - target) / rows * (1.0 if upstream is None else upstream)
    np.testing.assert_allclose(second, reference, rtol=1e-5, atol=1e-6)
    assert -np.sum(target * np.log(p)) / rows == pytest.approx(float(value), rel=1e-5, abs=1e-6)


def test_a_planned_call_skips_the_checked_launcher(monkeypatch):
    with simulator.simulated("null"):
        loss._MEAN_BACKWARD.clear()
        probs, labels = asarray(np.zeros((3, 4), np.float32)), asarray(np.zeros(3, np.int64))
        xp.softmax_cross_entropy_mean_backward(probs, labels, None)
        calls = []
        checked = loss.softmax_cross_entropy_backward
        monkeypatch.setattr(loss, "softmax_cross_entropy_backward", lambda *a, **k: calls.append(1) or checked(*a, **k))
        assert xp.softmax_cross_entropy_mean_backward(probs, labels, None).shape == (3, 4)
        assert calls == []
        xp.softmax_cross_entropy_mean_backward(probs, labels, asarray(np.float32(2.0)))  # another signature
        assert calls == [1]


def test_bad_gradient_calls_are_refused_every_time_after_a_good_call():
    with simulator.simulated("null"):
        loss._MEAN_BACKWARD.clear()
        probs, labels = asarray(np.zeros((3, 4), np.float32)), asarray(np.zeros(3, np.int64))
        prob_labels = asarray(np.zeros((3, 4), np.float32))
        dloss = asarray(np.float32(1.0))
        xp.softmax_cross_entropy_mean_backward(probs, labels, dloss)
        xp.softmax_cross_entropy_mean_backward(probs, prob_labels, dloss)
        for _ in range(2):
            with pytest.raises(ValueError, match="dloss must have shape"):
                xp.softmax_cross_entropy_mean_backward(probs, labels, asarray(np.ones(1, np.float32)))
            with pytest.raises(TypeError, match="dtypes differ"):
                xp.softmax_cross_entropy_mean_backward(probs, labels, asarray(np.float64(1.0)))
            with pytest.raises(TypeError, match="dtypes differ"):
                xp.softmax_cross_entropy_mean_backward(probs, asarray(np.zeros((3, 4), np.float64)), dloss)
            with pytest.raises(ValueError, match="class-index labels must have shape"):
                xp.softmax_cross_entropy_mean_backward(probs, asarray(np.zeros(2, np.int64)), dloss)
            with pytest.raises(ValueError, match="needs 2-D probs"):
                xp.softmax_cross_entropy_mean_backward(asarray(np.zeros(4, np.float32)), labels, dloss)
            with pytest.raises((TypeError, AttributeError)):
                xp.softmax_cross_entropy_mean_backward([[0.0]], labels, dloss)


def test_the_kernel_launchers_still_refuse_other_integer_labels_and_indices():
    with simulator.simulated("null"):
        logits, i32 = asarray(np.zeros((3, 4), np.float32)), asarray(np.zeros(3, np.int32))
        for _ in range(2):
            with pytest.raises(TypeError):
                loss.softmax_cross_entropy_mean(logits, i32)
            with pytest.raises(TypeError, match="indices must be an int64"):
                embeddings.embedding(logits, i32)
            with pytest.raises(TypeError, match="indices must be an int64"):
                embeddings.embedding_backward(asarray(np.zeros((3, 4), np.float32)), i32, 5)
        assert xp.softmax_cross_entropy_mean(logits, i32)[1].shape == (3, 4)  # the op casts them


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint8])
def test_the_embedding_ops_equal_the_kernel_launchers(where, index_dtype):
    table = RNG.standard_normal((6, 3)).astype(np.float32)
    ids = RNG.integers(0, 6, (2, 5))
    dy = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    with _on(where):
        embeddings._CHECKED.clear()
        d_table, d_ids, d_dy = asarray(table), asarray(ids.astype(index_dtype)), asarray(dy)
        got = [(xp.embedding_forward(d_table, d_ids).get(), xp.embedding_backward(d_dy, d_ids, np.int64(6)).get())
               for _ in range(3)]  # checked, planned, planned
        d_ids64 = asarray(ids.astype(np.int64))
        want = (embeddings._embedding(d_table, d_ids64).get(), embeddings._embedding_backward(d_dy, d_ids64, 6).get())
    for forward, backward in got:
        np.testing.assert_array_equal(forward, want[0])
        np.testing.assert_array_equal(backward, want[1])
    np.testing.assert_array_equal(want[0], table[ids])
    reference = np.zeros_like(table)
    np.add.at(reference, ids.ravel(), dy.reshape(-1, 3))
    np.testing.assert_allclose(want[1], reference, rtol=1e-6, atol=1e-6)


UPDATES = {  # op name -> (state count, the op's hyperparameters, the kernel launcher's keywords)
    "sgd": (1, dict(momentum=0.9, nesterov=True, weight_decay=0.01), dict(momentum=0.9, nesterov=True,
                                                                          weight_decay=0.01)),
    "adam": (2, dict(step=3, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1, decoupled=True),
             dict(step=3, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1, decoupled=True)),
    "rmsprop": (1, dict(rho=0.8, eps=1e-6, weight_decay=0.01), dict(rho=0.8, eps=1e-6, weight_decay=0.01)),
    "adagrad": (1, dict(eps=1e-6, weight_decay=0.01), dict(eps=1e-6, weight_decay=0.01)),
}


@pytest.mark.parametrize("values", [False, True], ids=["eager-rate", "device-values"])
@pytest.mark.parametrize("name", sorted(UPDATES))
@pytest.mark.parametrize("where", WHERE)
def test_the_multi_tensor_update_ops_equal_the_kernel_launchers(where, name, values):
    states, op_kw, kernel_kw = UPDATES[name]
    sizes = (4, 7, 0, 3)
    host = [[RNG.standard_normal(n).astype(np.float32) for n in sizes] for _ in range(2 + states)]
    host[3 if states == 2 else 2] = [abs(a) for a in host[3 if states == 2 else 2]]  # (second moments: >= 0)
    rate = np.array([0.05, 0.3, 0.7], np.float64)  # {lr, bc1, bc2}
    results = []
    with _on(where):
        for use_op in (True, True, False):  # the op twice (checked, then planned), then the kernel launcher
            if not results:
                optim._MANY_PLANS.clear()
            arrays = [[asarray(a) for a in column] for column in host]
            lr = asarray(rate) if values else 0.05
            if use_op:
                step = op_kw.get("step")
                kw = {k: v for k, v in op_kw.items() if k != "step"}
                getattr(xp, f"{name}_update_many")(*arrays, *(() if step is None else (step,)), lr, **kw)
            else:
                getattr(optim, f"{name}_update_many")(*arrays, **kernel_kw, **(
                    {"lr": 0.0, "values": lr} if values else {"lr": lr}))
            results.append([[a.get() for a in column] for column in arrays])
    for got in results[:2]:
        for column, want in zip(got, results[2]):
            for a, b in zip(column, want):
                np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(results[2][0], host[0]) if a.size)  # (an update happened)


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_the_update_ops_refuse_a_rate_that_is_not_finite_every_time(name):
    states, op_kw, _ = UPDATES[name]
    with simulator.simulated("null"):
        arrays = [[asarray(np.zeros(3, np.float32))] for _ in range(2 + states)]
        step = () if "step" not in op_kw else (op_kw["step"],)
        kw = {k: v for k, v in op_kw.items() if k != "step"}
        update = getattr(xp, f"{name}_update_many")
        update(*arrays, *step, 0.1, **kw)  # planned
        for bad in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match="lr must be a finite real number"):
                update(*arrays, *step, bad, **kw)


def test_a_range_check_plan_follows_the_devices_default_queue():
    """A plan made in one simulated session holds the queue and record by weak reference: in the next session (a new
    default queue and record) the check writes the new record and plans again."""
    message = "ids: {bad} is outside the table"
    faults._PLANNED.clear()
    queues = []
    for _ in range(2):
        with simulator.simulated("full"):
            default_queue(0)  # the session's default queue, there before its first check
            faults.check_range(asarray(np.zeros(3, np.int64)), 0, 5, message)  # planned after the first session
            bad = asarray(np.array([1, 7, 2], np.int64))
            faults.check_range(bad, 0, 5, message)
            record = faults.fault_record(bad)
            assert record is not None
            error = faults.fault_error(record, record.get())
            assert isinstance(error, ValueError) and str(error) == message.format(bad=7)
            (_, queue_ref, record_ref), = faults._PLANNED.values()
            assert record_ref() is record
            queues.append(queue_ref())
    assert queues[0] is not queues[1]


def _first_not_binary(values):
    flat = values.ravel()
    bad = np.flatnonzero((flat != 0) & (flat != 1))
    return None if not bad.size else flat[bad[0]].item()


@pytest.mark.parametrize("where", WHERE)
@settings(max_examples=20, deadline=None)
@given(dtypes=st.lists(st.sampled_from([np.float32, np.float64, np.int64, np.int32]), min_size=1, max_size=4),
       seed=st.integers(0, 2**16))
def test_planned_binary_checks_report_what_the_checked_ones_and_numpy_report(where, dtypes, seed):
    """Each call with a dtype (and message) seen before runs planned (check.check_binary's and faults'); what the
    record holds after each is NumPy's first value that is neither 0 nor 1, in that call's message."""
    rng = np.random.default_rng(seed)
    messages = ("mask: {bad} is not 0 or 1", "other mask: {bad}")
    with _on(where):
        for k, dtype in enumerate(dtypes * 2):  # (the second round: every signature planned)
            values = rng.integers(0, 2, (3, 4)).astype(dtype)
            if rng.random() < 0.7:
                values[rng.integers(0, 3), rng.integers(0, 4)] = rng.choice([2, -1, 5])
            message = messages[k % 2]
            d_values = asarray(values)
            faults.check_binary(d_values, message)
            record = faults.fault_record(d_values)
            error = faults.fault_error(record, record.get())
            bad = _first_not_binary(values)
            if bad is None:
                assert error is None
            else:
                assert isinstance(error, ValueError) and str(error) == message.format(bad=bad)


@pytest.mark.parametrize("where", WHERE)
@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3), rate=st.sampled_from([0.0, 0.25, 0.5, 0.9]),
       seed=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**64 - 1), transposed=st.booleans())
def test_planned_dropout_equals_the_checked_call_and_numpy(where, shape, rate, seed, offset, transposed):
    dropout = sys.modules["magmadnn.backend.device.kernels.dropout"]  # (the package's ``dropout`` is the function)

    x = RNG.standard_normal(shape).astype(np.float32)
    with _on(where):
        dropout._PLANS.clear()
        d_x = asarray(x.T.copy()).T if transposed else asarray(x)
        got = [tuple(a.get() for a in dropout.dropout(d_x, rate, seed=seed, offset=offset)) for _ in range(2)]
        assert len(dropout._PLANS) == 1
        dropout._PLANS.clear()
        want = tuple(a.get() for a in dropout.dropout(d_x, rate, seed=seed, offset=offset))
        u = pymagma_uniform(x.shape, seed, offset)
    for y, mask in got:
        np.testing.assert_array_equal(y, want[0])
        np.testing.assert_array_equal(mask, want[1])
    keep = (u >= np.float32(rate)).astype(np.float32) * np.float32(1.0 / (1.0 - rate))
    np.testing.assert_array_equal(want[1], keep)
    np.testing.assert_array_equal(want[0], x * keep)


def pymagma_uniform(shape, seed, offset):
    """The stream dropout draws from: pymagma.kernels.uniform's values of (seed, offset) in float32."""
    from pymagma import kernels

    return kernels.uniform(shape, seed=seed, offset=offset, dtype=np.float32).get()


def test_a_planned_dropout_refuses_a_bad_seed_or_offset_every_time():
    dropout = sys.modules["magmadnn.backend.device.kernels.dropout"]  # (the package's ``dropout`` is the function)

    with simulator.simulated("full"):
        x = asarray(np.zeros((2, 3), np.float32))
        dropout._PLANS.clear()
        dropout.dropout(x, 0.5, seed=1, offset=2)  # planned
        other = asarray(np.ones((4, 5), np.float32))  # another shape after the plan: its own launch
        y, mask = (a.get() for a in dropout.dropout(other, 0.5, seed=1, offset=2))
        np.testing.assert_array_equal(mask, (pymagma_uniform((4, 5), 1, 2) >= np.float32(0.5)) * np.float32(2.0))
        np.testing.assert_array_equal(y, mask)
        for _ in range(2):
            for seed, offset, error in ((-1, 0, ValueError), (2**64, 0, ValueError), (1.5, 0, TypeError),
                                        (1, -1, ValueError), (1, 2**64, ValueError), (1, 2.0, TypeError)):
                with pytest.raises(error):
                    dropout.dropout(x, 0.5, seed=seed, offset=offset)
            with pytest.raises(ValueError, match="dropout rate"):
                dropout.dropout(x, 1.0, seed=1)
