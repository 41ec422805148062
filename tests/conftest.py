"""Shared test configuration: hypothesis profiles, the gpu/mpi/native markers and their skip rules.

``MAGMADNN_REQUIRE`` (a comma-separated list of tiers; ``scripts/test.sh`` exports ``native``) names the tiers that
must run: a skipped test of a required tier is a failure, at run time and at collection time (a module that skips
while being imported, e.g. a module-level ``pytest.importorskip``, hides all its tests). ``native``: tests marked
``native``, and every module that skips at collection (except gpu and mpi modules); ``mpi``: tests marked ``mpi``.
``gpu`` tests may always skip (no device here). A few skips depend on how the run was selected, not on what is
installed (``SELECTION_SKIPS``); they stay skips.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Keras 3 is a test reference (the "Keras habits" tests); it runs on the torch backend on the CPU.
os.environ.setdefault("KERAS_BACKEND", "torch")

settings.register_profile("ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

#: The profile whose example counts the per-test overrides were chosen for (``examples`` scales from it).
_BASE_EXAMPLES = 50


def examples(n: int) -> int:
    """A per-test ``max_examples`` that follows the loaded profile: ``n`` under ci/dev (never more than the
    profile's own count), scaled up with bigger profiles (``thorough``: 10 n)."""
    default = settings().max_examples
    return max(1, n * default // _BASE_EXAMPLES) if default > _BASE_EXAMPLES else min(n, default)


def required_tiers() -> frozenset[str]:
    """The tiers named in ``MAGMADNN_REQUIRE`` (e.g. ``native`` or ``native,mpi``); unknown names are an error."""
    tiers = frozenset(t.strip() for t in os.environ.get("MAGMADNN_REQUIRE", "").split(",") if t.strip())
    unknown = tiers - {"native", "mpi"}
    if unknown:
        raise pytest.UsageError(f"MAGMADNN_REQUIRE: unknown tiers {sorted(unknown)}; expected native and/or mpi")
    return tiers


#: Skip reasons that describe the run's selection (-k, --lf, a session-wide simulator, ILP64), not a missing piece.
SELECTION_SKIPS = re.compile(r"counts the \w+ of a whole-module run|the simulator is on for the whole session|"
                             r"ILP64: 2\*\*31 fits")


@pytest.fixture(autouse=True)
def _no_rejected_magma_call():
    """A MAGMA call the simulator saw rejected (``magma_xerbla``, or a cuBLAS status MAGMA's wrapper drops) fails
    the test that made it: on a GPU it would have computed nothing, silently.  A test that expects one takes it
    with ``pymagma.simulator.magma.take_rejected()``."""
    yield
    magma = sys.modules.get("pymagma.simulator.magma")
    left = magma.take_rejected() if magma is not None else []
    if left:
        pytest.fail("rejected MAGMA calls (nothing computed):\n" + "\n".join(map(str, left)), pytrace=False)


@functools.cache
def gpu_available() -> tuple[bool, str]:
    try:
        from cuda.bindings import runtime
    except ImportError:
        return False, "cuda-python is not installed"
    err, count = runtime.cudaGetDeviceCount()
    if err != runtime.cudaError_t.cudaSuccess or not count:
        return False, f"no CUDA device ({getattr(err, 'name', err)})"
    return True, ""


def _mpiexec() -> str | None:
    """The mpiexec next to this Python (a venv with the ``mpi`` extra), else the one on PATH."""
    local = Path(sys.executable).with_name("mpiexec")
    return str(local) if os.access(local, os.X_OK) else shutil.which("mpiexec")


def pytest_configure(config):
    config.addinivalue_line("markers", "tier1: a gpu test that scripts/gpu_check.sh --tier 1 runs in the first minutes "
                            "(a device feature that can change results; docs/testing.md)")


def pytest_report_header(config):
    tiers = required_tiers()
    if tiers:
        return f"MAGMADNN_REQUIRE={','.join(sorted(tiers))}: a skipped test of these tiers fails"
    return None


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available()
    have_mpi = _mpiexec() is not None
    for item in items:
        if "tier1" in item.keywords and "gpu" not in item.keywords:
            raise pytest.UsageError(f"{item.nodeid} is marked tier1 but not gpu: tier1 selects gpu tests for "
                                    "scripts/gpu_check.sh --tier 1; mark it gpu too")
        if "gpu" in item.keywords and not ok:
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {why}"))
        if "mpi" in item.keywords and not have_mpi:
            item.add_marker(pytest.mark.skip(reason="mpi test: mpiexec not found"))
    # No reordering here: pytest-xdist's --dist loadfile hands out whole files, the ones with the most tests first
    # (its default --loadscope-reorder), whatever order the items are collected in.  A replay of a whole run's
    # per-test times on 2 workers put that order within 0.5 % of the ideal (the longest files first), and files of
    # slow tests first (--no-loadscope-reorder after sorting them ahead) 2 % behind it.


def _skip_reason(longrepr) -> str:
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _required_tier(keywords, tiers: frozenset[str]) -> str | None:
    """The required tier a test with these markers belongs to (None: it may skip)."""
    if "gpu" in keywords:
        return None
    for tier in ("native", "mpi"):
        if tier in keywords and tier in tiers:
            return tier
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skipped test of a required tier is a failure: that tier must actually run there."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    tier = _required_tier(item.keywords, required_tiers())
    reason = _skip_reason(report.longrepr)
    if tier and not SELECTION_SKIPS.search(reason):
        report.outcome = "failed"
        report.longrepr = f"{tier} test skipped although MAGMADNN_REQUIRE names {tier!r}: {reason}"


def _module_tiers(path: Path) -> set[str]:
    """The tier markers a test module's source applies (read as text: a module that skips on import has none)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return set()
    return set(re.findall(r"pytest\.mark\.(gpu|mpi|native)\b", text))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module that skips while being collected hides every test in it: a failure when a tier is required (gpu
    modules may skip; mpi modules only when mpi is not required)."""
    outcome = yield
    report = outcome.get_result()
    tiers = required_tiers()
    if not (tiers and report.skipped and isinstance(collector, pytest.Module)):
        return
    marks = _module_tiers(Path(collector.path))
    if "gpu" in marks or ("mpi" in marks and "mpi" not in tiers):
        return
    report.outcome = "failed"
    report.longrepr = (f"{collector.nodeid} skipped at collection although MAGMADNN_REQUIRE names "
                       f"{','.join(sorted(tiers))}: {_skip_reason(report.longrepr)}")
