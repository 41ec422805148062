"""The range check's plans (kernels/check.py): a call's operand checks and launch arguments decided once per
signature (x's class, dtype and device, the record's layout, the bounds and the site with their types); the planned
launch records exactly what the checked one records, in C order, also for a strided ``x``; a bad call is refused each
time, also after a good call planned the same shapes."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import pymagma
from pymagma import simulator
from pymagma.kernels import check

RNG = np.random.default_rng(38)


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def on_device(request):
    """A context for the test's body: the simulated device, or the real one (the gpu twin)."""
    return (lambda: simulator.simulated("full")) if request.param == "simulator" else contextlib.nullcontext


def _record():
    return pymagma.zeros((check.FAULT_RECORD,), np.int64)


def _expected(values: np.ndarray, low, high, site: int) -> np.ndarray:
    """NumPy's record of the first value of ``values`` (C order) outside [low, high), NaN included."""
    flat = values.ravel()
    bad = np.flatnonzero(~((flat >= low) & (flat < high)))
    if not bad.size:
        return np.zeros(check.FAULT_RECORD, np.int64)
    i = int(bad[0])
    value = flat[i]
    bits = int(np.array([value], np.int64).view(np.uint64)[0]) if flat.dtype.kind == "i" \
        else int(np.array([value], np.float64).view(np.uint64)[0])
    return np.array([site, bits & 0xFFFFFFFF, bits >> 32, i], np.int64)


CASES = [(np.int64, 0, 7), (np.int32, -3, 5), (np.float32, 0.0, 3.0), (np.float64, -1.0, 1.0)]


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype, low, high", CASES, ids=[np.dtype(c[0]).name for c in CASES])
def test_planned_check_records_what_the_checked_one_and_numpy_record(dtype, low, high, strided, monkeypatch,
                                                                         on_device):
    checked = []
    operands = check._check_operands
    monkeypatch.setattr(check, "_check_operands", lambda *a: checked.append(1) or operands(*a))
    with on_device():
        check._CHECKED.clear()
        for trial in range(4):  # a good call plans; later calls, good and bad, launch the plan
            values = RNG.uniform(low, high, (6, 5)).astype(dtype)
            if trial:
                values[RNG.integers(0, 6), RNG.integers(0, 5)] = high + trial  # one bad value, anywhere
                values[5, 4] = low - 1  # and a later one: the first in C order is recorded
            x = pymagma.asarray(values.T.copy()).T if strided else pymagma.asarray(values)
            assert x.is_c_contiguous is (not strided)
            got = []
            for planned in (True, False):
                if not planned:
                    check._CHECKED.clear()  # the checked path
                record = _record()
                before = len(checked)
                check.check_range(x, low, high, record, 3)
                got.append(record.get())
                assert len(checked) - before == (0 if planned and trial else 1)  # a plan's launch checks nothing
            np.testing.assert_array_equal(got[0], got[1])
            np.testing.assert_array_equal(got[0], _expected(values, low, high, 3))


def test_a_plan_answers_only_for_its_bounds_and_site(on_device):
    with on_device():
        check._CHECKED.clear()
        x = pymagma.asarray(np.array([0, 4, 9], np.int64))
        record = _record()
        check.check_range(x, 0, 10, record, 1)
        assert not record.get().any()
        check.check_range(x, 0, 5, record, 2)  # other bounds: 9 is out
        np.testing.assert_array_equal(record.get(), [2, 9, 0, 2])
        record = _record()
        check.check_range(x, 1, 10, record, 1)  # another low only: 0 is out
        np.testing.assert_array_equal(record.get(), [1, 0, 0, 0])
        record = _record()
        check.check_range(x, 0, 10, record, 7)  # another site only
        check.check_range(x, 0, 9, record, 7)  # another high only
        np.testing.assert_array_equal(record.get(), [7, 9, 0, 2])
        for _ in range(2):  # float bounds of integer values are refused, also after the int bounds' plan
            with pytest.raises(TypeError):
                check.check_range(x, 0.0, 10.0, record, 7)


def test_bad_arguments_are_refused_after_a_good_call_planned_their_shapes(on_device):
    with on_device():
        check._CHECKED.clear()
        x = pymagma.asarray(np.array([1, 2], np.int64))
        record = _record()
        for _ in range(2):
            check.check_range(x, 0, 3, record, 1)
        with pytest.raises(TypeError, match="site must be an integer"):
            check.check_range(x, 0, 3, record, 1.0)
        with pytest.raises(TypeError, match="DeviceArray"):
            check.check_range(np.array([1, 2], np.int64), 0, 3, record, 1)
        with pytest.raises(ValueError, match="record must be a contiguous int64"):
            check.check_range(x, 0, 3, pymagma.zeros((8,), np.int64)[::2], 1)
        with pytest.raises(ValueError, match="record must be a contiguous int64"):
            check.check_range(x, 0, 3, pymagma.zeros((check.FAULT_RECORD,), np.int32), 1)
        with pytest.raises(ValueError, match="site must be between"):
            check.check_range(x, 0, 3, record, 0)
        with pytest.raises(TypeError, match="takes"):
            check.check_range(pymagma.asarray(np.array([1, 2], np.uint8)), 0, 3, record, 1)
        assert not record.get().any()


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_planned_binary_check_records_what_numpy_records_and_refuses_what_the_checked_one_refuses(strided,
                                                                                                  on_device):
    with on_device():
        check._CHECKED.clear()
        for trial in range(3):  # a good call plans; later calls launch the plan
            values = RNG.integers(0, 2, (6, 5)).astype(np.float32)
            if trial:
                values[RNG.integers(0, 6), RNG.integers(0, 5)] = 0.5  # one bad value, anywhere
                values[5, 4] = 2.0  # and a later one: the first in C order is recorded
            x = pymagma.asarray(values.T.copy()).T if strided else pymagma.asarray(values)
            record = _record()
            check.check_binary(x, record, 3)
            bad = np.flatnonzero((values.ravel() != 0) & (values.ravel() != 1))
            expected = np.zeros(check.FAULT_RECORD, np.int64)
            if bad.size:
                bits = int(np.array([values.ravel()[bad[0]]], np.float64).view(np.uint64)[0])
                expected[:] = [3, bits & 0xFFFFFFFF, bits >> 32, bad[0]]
            np.testing.assert_array_equal(record.get(), expected)
        good = pymagma.asarray(np.zeros((6, 5), np.float32))  # a bad record or site is refused after the plan
        with pytest.raises(TypeError, match="site must be an integer"):
            check.check_binary(good, _record(), 3.0)
        with pytest.raises(ValueError, match="record must be a contiguous int64"):
            check.check_binary(good, pymagma.zeros((2 * check.FAULT_RECORD,), np.int64)[::2], 3)
