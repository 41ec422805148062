"""Shared test configuration: hypothesis profiles, the gpu/mpi/native markers and their skip rules."""

from __future__ import annotations

import functools
import os
import shutil

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


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available()
    have_mpi = shutil.which("mpiexec") is not None
    for item in items:
        if "gpu" in item.keywords and not ok:
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {why}"))
        if "mpi" in item.keywords and not have_mpi:
            item.add_marker(pytest.mark.skip(reason="mpi test: mpiexec not found"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI a real-library ("native") test that skips is a failure: that tier must actually run there."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and "native" in item.keywords and report.skipped and "gpu" not in item.keywords:
        report.outcome = "failed"
        report.longrepr = f"native-library test skipped in CI: {report.longrepr}"
