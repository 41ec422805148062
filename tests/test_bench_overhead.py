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
    models = ("mlp", "lenet5", "resnet_small", "transformer")
    assert {(r["model"], r["batch"]) for r in rows} == {(m, b) for m in models for b in (1, 4)}
    for r in rows:
        assert r["train_us"] > 0 and r["infer_us"] > 0  # timed (values not asserted)
        assert r["replayed_train_us"] > 0 and r["replayed_infer_us"] > 0
        # a replayed step: the batch's copy and the graph launch, an event record and a wait every few steps
        assert 2 <= r["replayed_calls"] <= 3
        if r["batch"] == 1:  # fit over batches of one sample, compile's default: its replay loop, per batch
            assert r["fit_replay_us"] is not None and 2 <= r["fit_calls"] <= 3  # timed (values not asserted)
            assert r["fit_fixed_us"] is not None
        else:
            assert r["fit_replay_us"] is None and r["fit_calls"] is None and r["fit_fixed_us"] is None
        assert r["python_us_per_call"] >= 0  # (a plain step - the time inside its native calls): never negative
        assert r["meter_us_per_call"] is not None  # the meter's own cost, reported apart (timed, not asserted)
        assert r["python_calls_per_step"] > r["calls_per_train_step"]  # at least one Python call per native call
        assert r["magma"] > 0 and r["launcher"] > 0 and r["cudart"] > 0  # gemm, kernels, copies: all counted
        assert r["cudnn"] > 0 or r["model"] in ("mlp", "transformer")  # (dense epilogues are kernels)
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


#: Native calls per eager training step at batch 1 (deterministic): at most these, 40 % under the counts before the
#: fused kernels (MLP 37, LeNet-5 59, the transformer 116) and under ResNet-small's 122.
CALLS_AT_MOST = {"mlp": 22, "lenet5": 35, "transformer": 69, "resnet_small": 100}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CALLS_AT_MOST))
def test_native_calls_per_training_step_stay_within_the_fused_budget(name):
    """The overhead table's call count of one eager training step (SGD with momentum, cross-entropy), every call
    into the native libraries counted by the meter on the null device."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import _overhead
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from pymagma import simulator

    with simulator.simulated("null"):
        model = _overhead.magmadnn_model(name, "gpu")
        train, _ = _overhead.magmadnn_steps(model, *_overhead._batch(name, 1))
        for _ in range(3):  # the memory pool and the optimizer's slots made: the steady step
            train()
        with _overhead.Meter() as meter:
            train()
    assert 0 < sum(meter.calls.values()) <= CALLS_AT_MOST[name], meter.calls


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


def _overhead_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import _overhead
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return _overhead


class _HandCount:
    """Calls into the simulator's library objects, counted on the objects themselves (their functions replaced on
    each instance before the model is made, so whatever binds or keeps a function later holds a counted one); a call
    made inside another (the simulator's own) is not counted."""

    def __init__(self, libraries):
        self.calls, self.depth = {}, 0
        for library in ("cudart", "launcher"):
            target = getattr(libraries, library)
            for name in dir(type(target)):
                if name.startswith("cuda") or name in ("launch", "program"):
                    setattr(target, name, self._counted(getattr(target, name), library))
        for library in ("magma", "cudnn"):
            target, bind = getattr(libraries, library), getattr(libraries, library).bind
            target.bind = lambda symbol, bind=bind, library=library: self._counted(bind(symbol), library)

    def _counted(self, fn, library):
        def call(*args):
            self.depth += 1
            try:
                return fn(*args)
            finally:
                self.depth -= 1
                if not self.depth:
                    self.calls[library] = self.calls.get(library, 0) + 1

        return call


@pytest.mark.parametrize("name", ["mlp", "lenet5"])
def test_the_meter_counts_every_native_call_of_a_step(name):
    """The meter's count of one steady training step equals a count made on the simulator's library objects: a
    planned call that kept a function bound before the meter was installed (cuDNN plans, gemm plans, launches, the
    memory pool) would drop out of the meter's count and be timed as Python."""
    _overhead = _overhead_module()
    from pymagma import _native, simulator

    with simulator.simulated("null"):
        hand = _HandCount(_native.current)
        model = _overhead.magmadnn_model(name, "gpu")
        train, _ = _overhead.magmadnn_steps(model, *_overhead._batch(name, 1))
        for _ in range(3):  # plans, the memory pool and the optimizer's slots made: the steady step
            train()
        for _ in range(2):
            hand.calls.clear()
            with _overhead.Meter() as meter:
                train()
            assert {k: v for k, v in meter.calls.items() if v} == hand.calls
        assert hand.calls["launcher"] and hand.calls["magma"] and (name == "mlp" or hand.calls["cudnn"])


def _native_function(*args):
    return 0


def test_the_meters_own_cost_per_call_stays_small():
    """Bytecodes the meter adds to one native call (looked up as an attribute, or bound by symbol), counted, not
    timed: its wrappers are made once and kept (not one per look-up), so its own cost stays a small part of the
    Python per native call it reports."""
    _overhead = _overhead_module()

    class Library:
        def launch(self, *args):
            return 0

        def bind(self, symbol):  # (one function per symbol, as the libraries keep theirs)
            return _native_function

    raw = Library()
    metered = _overhead._Metered(Library(), "launcher", _overhead.Meter())
    metered.launch(1)
    metered.bind("f")(1)

    def opcodes(fn):
        seen = [0]

        def trace(frame, event, arg):
            frame.f_trace_opcodes = True
            if event == "opcode":
                seen[0] += 1
            return trace

        sys.settrace(trace)
        try:
            fn()
        finally:
            sys.settrace(None)
        return seen[0]

    assert opcodes(lambda: metered.launch(1, 2)) - opcodes(lambda: raw.launch(1, 2)) <= 85
    assert opcodes(lambda: metered.bind("f")(1, 2)) - opcodes(lambda: raw.bind("f")(1, 2)) <= 110
    assert metered.launch is metered.launch and metered.bind("f") is metered.bind("f")  # (kept)


def test_the_meter_counts_the_memory_pools_frees():
    """The memory pool frees through the runtime it was made with; under the meter a cudaFree of a cached block is a
    native call like any other (counted, timed as native), not Python time."""
    _overhead = _overhead_module()
    from pymagma import _native, memory, simulator

    with simulator.simulated("null"):
        hand = _HandCount(_native.current)
        pool = _native.current.memory_pool
        memory.Allocation.trusted(4096, 0).free()  # one block cached
        _native.current.magma_initialized  # noqa: B018 - MAGMA initialised (the meter's entry reads it) before the count
        hand.calls.clear()
        with _overhead.Meter() as meter:
            pool.release_cached()
        assert hand.calls.get("cudart", 0) >= 1
        assert {k: v for k, v in meter.calls.items() if v} == hand.calls
        assert pool.cudart is _native.current.cudart  # (the meter gone: the pool's runtime is the libraries' again)
