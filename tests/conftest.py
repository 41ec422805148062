"""Shared test configuration: hypothesis profiles, the gpu/mpi/native markers and their skip rules."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


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


def mpiexec() -> str | None:
    """The mpiexec next to this Python (a venv with the ``mpi`` extra), else the one on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available()
    have_mpi = mpiexec() is not None and importlib.util.find_spec("mpi4py") is not None
    for item in items:
        if "gpu" in item.keywords and not ok:
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {why}"))
        if "mpi" in item.keywords and not have_mpi:
            item.add_marker(pytest.mark.skip(reason="mpi test: mpiexec not found"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI a real-library ("native") or "mpi" test that skips is a failure: those tiers must actually run there."""
    outcome = yield
    report = outcome.get_result()
    tier = "native" in item.keywords or "mpi" in item.keywords
    if os.environ.get("CI") and tier and report.skipped and "gpu" not in item.keywords:
        report.outcome = "failed"
        report.longrepr = f"native-library or mpi test skipped in CI: {report.longrepr}"
