"""``pymagma._cudnn.call`` keeps the functions it bound while the cuDNN library object in use stays the same: a
library swapped in (the simulator, the overhead meter's stand-in) sees every call from the next one on, and the
library swapped back sees them again."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

import pymagma
from pymagma import _cudnn, _native, dnn, simulator
from tests.pymagma.test_dnn_plans import _Wrapped  # a cuDNN object in front of another, counting the calls

ROOT = Path(__file__).resolve().parents[2]


def _softmax(x):  # a plain cudnn call (activation_forward, say, runs a plan of pymagma._dnn_plans)
    return dnn.softmax_forward(x).get()


def test_a_library_swapped_in_and_back_sees_every_call(monkeypatch):
    with simulator.simulated("full") as sim:
        x = pymagma.asarray(np.array([[0.0, np.log(3.0)]], np.float32))
        np.testing.assert_allclose(_softmax(x), [[0.25, 0.75]], rtol=1e-6)  # bound from the simulator, kept
        counting = _Wrapped(sim.cudnn)
        with monkeypatch.context() as m:
            m.setattr(_native.current, "cudnn", counting)
            _softmax(x)
            _softmax(x)
        assert counting.calls.count("cudnnSoftmaxForward") == 2
        before = list(sim.cudnn.calls).count("cudnnSoftmaxForward")
        _softmax(x)  # the simulator's own object again: its functions bound again, the call recorded there
        assert list(sim.cudnn.calls).count("cudnnSoftmaxForward") == before + 1
        assert counting.calls.count("cudnnSoftmaxForward") == 2
        assert _cudnn._called[0] is sim.cudnn


def test_the_overhead_meter_counts_every_cudnn_call():
    spec = importlib.util.spec_from_file_location("overhead_for_test", ROOT / "scripts" / "_overhead.py")
    overhead = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(overhead)
    finally:
        sys.path[:] = path
    with simulator.simulated("null") as sim:
        x = pymagma.asarray(np.ones((2, 3), np.float32))
        dnn.activation_forward(x, "relu")
        dnn.softmax_forward(x)
        before = len(sim.cudnn.calls)
        with overhead.Meter() as meter:
            for _ in range(3):
                dnn.activation_forward(x, "relu")
                dnn.softmax_forward(x)
        assert meter.calls["cudnn"] == len(sim.cudnn.calls) - before >= 6
