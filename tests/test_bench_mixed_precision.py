"""``scripts/bench_mixed_precision.py --memory`` (its logic on the simulator, never its numbers): the peak it
reports is ``pymagma.memory.track_peak``'s, and equals the most bytes in use seen around every native call of the
step, a reference that needs no hook in the pool."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("cudart", "magma", "cudnn", "launcher")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mixed_precision_for_test",
                                                  ROOT / "scripts" / "bench_mixed_precision.py")
    bench = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path[:] = path
    return bench


class _Sampled:
    """A native library whose every call samples the pool's bytes in use before and after it runs."""

    def __init__(self, target, sample):
        self._target, self._sample = target, sample

    def _wrap(self, fn):
        def call(*args):
            self._sample()
            try:
                return fn(*args)
            finally:
                self._sample()

        return call

    def __getattr__(self, name):
        value = getattr(self._target, name)
        if name == "bind":
            return lambda symbol: self._wrap(value(symbol))
        if callable(value) and not isinstance(value, type) and (
                name.startswith(("cuda", "magma", "cudnn")) or name in ("launch", "program")):
            return self._wrap(value)
        return value


@contextlib.contextmanager
def _sampling(seen: list):
    from pymagma import _native

    libs, pool = _native.current, _native.current.memory_pool
    saved = {name: getattr(libs, name) for name in LIBRARIES}
    saved["magma_initialized"] = libs.magma_initialized

    def sample():
        seen[-1] = max(seen[-1], pool.stats["in_use_bytes"])

    seen.append(pool.stats["in_use_bytes"])
    for name in LIBRARIES:
        setattr(libs, name, _Sampled(saved[name], sample))
    libs.magma_initialized = libs.magma
    try:
        yield
    finally:
        for name, target in saved.items():
            setattr(libs, name, target)


def test_the_bench_peak_is_track_peaks_and_the_native_calls_see_it(monkeypatch):
    from pymagma import memory

    bench = _bench()
    track_peak, tracked, sampled = memory.track_peak, [], []

    @contextlib.contextmanager
    def checked(pool=None):
        with track_peak(pool) as peak, _sampling(sampled):
            yield peak
        tracked.append(peak.peak_bytes)

    monkeypatch.setattr(memory, "track_peak", checked)
    monkeypatch.setattr(bench, "POLICIES", ("float32",))  # (the three take 10 s)
    rows = bench.memory(["mlp"], 16)
    assert [r["policy"] for r in rows] == list(bench.POLICIES)
    assert [r["peak_bytes"] for r in rows] == tracked
    assert tracked == sampled  # every block allocated is written by a native call before it is freed
    for r in rows:
        assert r["step_bytes"] == r["peak_bytes"] - r["resident_bytes"] > 0
