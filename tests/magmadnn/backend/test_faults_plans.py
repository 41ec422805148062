"""The device backend's range check planned per (dtype, bounds, message) (device/faults.py): a repeated check looks
up its device's record and launches; what it reports is what the checked path reports and what NumPy finds (the
first value outside the bounds, in C order, in the caller's message), also for a bad value after a plan, another
message or dtype with the same bounds, and an Embedding layer whose plan already ran on good ids."""

from __future__ import annotations

import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn.autograd import Tensor
from magmadnn.backend.device import faults
from pymagma import asarray, simulator
from pymagma.kernels import check

RNG = np.random.default_rng(38)
MESSAGE = "ids: {bad} is outside the table"


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def full(request):
    """The simulated device, or the real one (the gpu twin)."""
    if request.param == "simulator":
        with simulator.simulated("full"):
            yield
    else:
        yield


def _reported(x):
    """The error the device's record holds after the checks queued on ``x``'s device (the record cleared)."""
    record = faults.fault_record(x)
    return None if record is None else faults.fault_error(record, record.get())


def _first_bad(values: np.ndarray, low, high):
    flat = values.ravel()
    bad = np.flatnonzero(~((flat >= low) & (flat < high)))
    return None if not bad.size else flat[bad[0]].item()


@pytest.mark.parametrize("dtype, low, high", [(np.int64, 0, 7), (np.int32, 2, 9), (np.float32, 0.0, 1.5)],
                         ids=["int64", "int32", "float32"])
def test_planned_checks_report_what_the_checked_ones_and_numpy_report(full, dtype, low, high, monkeypatch):
    checked = []
    unplanned = faults._checked
    monkeypatch.setattr(faults, "_checked", lambda x: checked.append(1) or unplanned(x))
    faults._PLANNED.clear()
    faults.check_range(asarray(np.full((2, 3), low, dtype)), low, high, MESSAGE)  # plans
    assert _reported(asarray(np.zeros(1))) is None and len(checked) == 1
    for trial in range(4):
        values = RNG.uniform(low, high, (4, 5)).astype(dtype)
        if trial:
            values[RNG.integers(0, 4), RNG.integers(0, 5)] = (low - trial, high + trial)[trial % 2]
        got = []
        for planned in (True, False):
            if not planned:
                faults._PLANNED.clear()
                check._CHECKED.clear()
            before = len(checked)
            x = asarray(values)
            faults.check_range(x, low, high, MESSAGE)
            assert len(checked) - before == (0 if planned else 1)  # a planned call decides nothing again
            error = _reported(x)
            got.append(None if error is None else str(error))
        bad = _first_bad(values, low, high)
        assert got[0] == got[1] == (None if bad is None else MESSAGE.format(bad=bad))
        assert (bad is None) == (trial == 0)


def test_a_plan_answers_only_for_its_message_and_dtype(full):
    faults._PLANNED.clear()
    other = "values: {bad} is not a probability"
    faults.check_range(asarray(np.array([1, 2], np.int64)), 0, 3, MESSAGE)
    faults.check_range(asarray(np.array([1, 5], np.int64)), 0, 3, other)
    assert str(_reported(asarray(np.zeros(1)))) == other.format(bad=5)
    faults.check_range(asarray(np.array([0.5, 2.5], np.float32)), 0, 3, MESSAGE)
    faults.check_range(asarray(np.array([0.5, 3.5], np.float32)), 0, 3, MESSAGE)
    assert str(_reported(asarray(np.zeros(1)))) == MESSAGE.format(bad=3.5)  # a float, not its bits as an integer
    faults.check_range(asarray(np.array([True, False])), 0, 1, MESSAGE)  # booleans need no check
    faults.check_range(asarray(np.zeros((0,), np.int64)), 0, 3, MESSAGE)  # nor do empty arrays
    assert _reported(asarray(np.zeros(1))) is None


def test_a_bad_id_after_the_embedding_plan_ran_is_reported(full):
    dev = mdnn.backend.get("gpu")
    layer = L.Embedding(7, 4)
    layer.configure(dev, np.float32, 1)
    for _ in range(3):  # good ids: the layer's plan and the check's plans
        ids = RNG.integers(0, 7, (2, 5))
        out = layer(Tensor(dev.asarray(ids), backend=dev)).numpy()
        table = layer._params["embeddings"].data.get()
        np.testing.assert_array_equal(out, table[ids])
    ids[1, 3], ids[1, 4] = 7, -1
    out = layer(Tensor(dev.asarray(ids), backend=dev))
    with pytest.raises(ValueError) as caught:
        out.numpy()
    assert str(caught.value) == ("embedding: index 7 is out of range for a table of 7 rows; expected indices in "
                                 "[0, 7)")
    ids[1, 3], ids[1, 4] = 0, 6
    np.testing.assert_array_equal(layer(Tensor(dev.asarray(ids), backend=dev)).numpy(), table[ids])
