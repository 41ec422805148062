"""The skip rules of tests/conftest.py, run on a small made-up suite in a subprocess: with MAGMADNN_REQUIRE naming a
tier, a skipped test of that tier fails, at run time and at collection time; gpu tests and selection-dependent skips
stay skips; without the variable every skip stays a skip."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = {
    "test_items.py": '''
import pytest

@pytest.mark.native
def test_native_skips():
    pytest.skip("libfoo is not installed")

@pytest.mark.native
@pytest.mark.skipif(True, reason="marked skip")
def test_native_skipif():
    pass

@pytest.mark.native
def test_native_selection_skip():
    pytest.skip("counts the ops of a whole-module run")

@pytest.mark.native
@pytest.mark.gpu
def test_native_gpu_skips():
    pytest.skip("no device")

@pytest.mark.mpi
def test_mpi_skips():
    pytest.skip("mpiexec not found")

def test_plain_skips():
    pytest.skip("an ordinary skip")

@pytest.mark.native
def test_native_passes():
    pass
''',
    "test_import_skip.py": 'import pytest\npytest.importorskip("a_module_that_does_not_exist_here")\n\n'
                           'def test_hidden():\n    pass\n',
    "test_gpu_module.py": 'import pytest\npytestmark = pytest.mark.gpu\n'
                          'pytest.skip("no device", allow_module_level=True)\n\ndef test_hidden():\n    pass\n',
    "test_mpi_module.py": 'import pytest\npytestmark = pytest.mark.mpi\n'
                          'pytest.importorskip("a_missing_mpi_binding")\n\ndef test_hidden():\n    pass\n',
}


def run_suite(tmp_path: Path, require: str | None, *options: str) -> dict[str, str]:
    """Outcome per test (or per module for collection results) of the made-up suite under this conftest."""
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    native: n\n    gpu: g\n    mpi: m\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MAGMADNN_REQUIRE", "CI", "PYTEST_ADDOPTS")}
    if require is not None:
        env["MAGMADNN_REQUIRE"] = require
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", *options, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    outcomes = {m.group(1): m.group(2) for m in re.finditer(r"::(\w+) (PASSED|FAILED|SKIPPED|ERROR)", proc.stdout)}
    # pytest-xdist's verbose lines put the outcome first: "[gw0] [ 14%] FAILED test_items.py::test_native_skips"
    xdist = re.finditer(r"\] (PASSED|FAILED|SKIPPED|ERROR) \S+::(\w+)", proc.stdout)
    outcomes |= {m.group(2): m.group(1) for m in xdist}
    for m in re.finditer(r"^(ERROR|SKIPPED \[\d+\]) (test_\w+\.py)\b", proc.stdout, re.M):  # collection results
        outcomes[m.group(2)] = m.group(1).split()[0]
    assert outcomes, proc.stdout + proc.stderr
    return outcomes


def test_native_required_turns_native_and_collection_skips_into_failures(tmp_path):
    got = run_suite(tmp_path, "native")
    assert got["test_native_skips"] == "FAILED"
    assert got["test_native_skipif"] == "ERROR"  # a skip in the setup phase (a skipif mark) fails as an error
    assert got["test_native_passes"] == "PASSED"
    assert got["test_import_skip.py"] == "ERROR"  # a module-level importorskip hides its tests: a failure
    for stays_skipped in ("test_native_selection_skip", "test_native_gpu_skips", "test_mpi_skips", "test_plain_skips"):
        assert got[stays_skipped] == "SKIPPED", stays_skipped
    assert "test_gpu_module.py" not in got or got["test_gpu_module.py"] == "SKIPPED"
    assert got.get("test_mpi_module.py", "SKIPPED") == "SKIPPED"  # mpi is not required


def test_mpi_required_turns_mpi_skips_into_failures(tmp_path):
    got = run_suite(tmp_path, "native,mpi")
    assert got["test_mpi_skips"] in ("FAILED", "ERROR")  # (ERROR: skipped at setup when mpiexec is missing)
    assert got["test_mpi_module.py"] == "ERROR"
    assert got["test_native_gpu_skips"] == "SKIPPED"


def test_pytest_xdist_workers_apply_the_same_rules(tmp_path):
    """scripts/test.sh runs the suite on pytest-xdist workers: every outcome is the one of a serial run."""
    pytest.importorskip("xdist")
    serial = run_suite(tmp_path, "native,mpi")
    assert run_suite(tmp_path, "native,mpi", "-n", "2", "--dist", "loadfile") == serial
    assert serial["test_native_skips"] == serial["test_mpi_skips"] == "FAILED"


def test_without_the_variable_every_skip_stays_a_skip(tmp_path):
    got = run_suite(tmp_path, None)
    assert set(got.values()) <= {"SKIPPED", "PASSED"}, got
    assert got["test_native_skips"] == "SKIPPED"


def test_unknown_tiers_are_a_usage_error(tmp_path):
    with pytest.raises(AssertionError, match="unknown tiers"):
        run_suite(tmp_path, "native,gpus")


@pytest.mark.parametrize("profile, expected", [("ci", (20, 4)), ("dev", (20, 4)), ("thorough", (200, 40))])
def test_per_test_example_counts_follow_the_profile(profile, expected):
    """``examples(n)``: n under ci/dev, scaled with the thorough profile (so no override caps a thorough run)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"HYPOTHESIS_PROFILE": profile}
    code = "import tests.conftest as c; print(c.examples(20), c.examples(4))"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert tuple(map(int, out)) == expected
