"""``scripts/bench.py --overhead`` on the CPU (a smoke test: its logic, never its timings): the null device runs
the device backend's training and inference steps with every native call checked and none computed, the meter
counts the calls by library, and PyTorch's batch-1 step is timed in the same run."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_overhead_table_on_the_null_device(tmp_path):
    out = tmp_path / "overhead.json"
    done = subprocess.run([sys.executable, "scripts/bench.py", "--overhead", "--steps", "2", "--batches", "1,4",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "host cost of the GPU path on the null device" in done.stdout
    rows = json.loads(out.read_text())["overhead"]
    models = ("mlp", "lenet5", "resnet_small")
    assert {(r["model"], r["batch"]) for r in rows} == {(m, b) for m in models for b in (1, 4)}
    for r in rows:
        assert r["train_us"] > 0 and r["infer_us"] > 0  # timed (values not asserted)
        assert r["replayed_train_us"] > 0 and r["replayed_infer_us"] > 0
        assert r["replayed_calls"] == 4  # a replayed step: the batch's copy, two event calls, the graph launch
        if r["batch"] == 1:  # fit over batches of one sample, compile's default: replayed (+ the epoch's reads)
            assert r["fit_replay_us"] > 0 and 4 <= r["fit_calls"] < r["calls_per_train_step"] / 2
        else:
            assert r["fit_replay_us"] is None and r["fit_calls"] is None
        assert r["python_us_per_call"] >= 0  # (step - native) of one metered pass: never negative
        assert r["python_calls_per_step"] > r["calls_per_train_step"]  # at least one Python call per native call
        assert r["magma"] > 0 and r["launcher"] > 0 and r["cudart"] > 0  # gemm, kernels, copies: all counted
        assert r["cudnn"] > 0 or r["model"] == "mlp"
        assert r["calls_per_train_step"] == sum(r[k] for k in ("cudart", "magma", "cudnn", "launcher"))
    assert "one array API elementwise call" in done.stdout
    assert "one cached cuFFT call next to one gemm call" in done.stdout
    ffts = json.loads(out.read_text())["fft"]
    assert len(ffts) == 6 and all(r["us"] > 0 for r in ffts)  # timed (values not asserted)
    assert all(r["magma"] == (1 if "gemm" in r["call"] or "@" in r["call"] or "ortho" in r["call"] else 0)
               for r in ffts)  # one MAGMA call: the gemm, or the scal of a normalised transform
    calls = {r["call"]: r for r in json.loads(out.read_text())["elementwise"]}
    assert len(calls) == 6 and all(r["us"] > 0 for r in calls.values())  # timed (values not asserted)
    for name, r in calls.items():  # one launch per call (two with a cast first), no host transfer but a scalar's
        assert r["launcher"] == (2 if "a cast first" in name else 1), name
        assert r["cudart"] == (1 if "scalar" in name else 0), name


def test_the_null_device_computes_nothing_but_checks_everything():
    import pymagma
    from pymagma import kernels, simulator
    from pymagma.simulator.magma import MagmaCallError

    with simulator.simulated("null") as sim:
        a = pymagma.asarray(np.ones((4, 4), np.float32))
        kernels.add(a, a)
        assert sim.kernels.launched and not sim.kernels.libraries  # launched, nothing compiled
        out = (a @ a).get()
        assert out.shape == (4, 4)  # results are undefined on the null device, shapes are not
        try:
            sim.magma.magma_sgemm(999, 999, 4, 4, 4, ctypes.c_float(1), a.ptr, 4, a.ptr, 4, ctypes.c_float(0), a.ptr, 4,
                                      pymagma.default_queue().handle)
        except MagmaCallError as exc:  # a bad enum is refused as in every mode
            assert "not a MAGMA enum value" in str(exc)
        else:
            raise AssertionError("the null device did not check the call")
    assert not simulator.is_enabled()
