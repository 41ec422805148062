"""``scripts/gpu_check.sh --dry-run`` on the CPU: every gpu test collects, the example parses its arguments and the
GPU benchmark's own logic (timing, rows, ratios, JSON) runs with the host standing in for the device, and the hybrid
LAPACK benchmark's on pymagma's simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpu_check_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run passed" in done.stdout
    rows = json.loads((tmp_path / "bench-gpu-dry.json").read_text())["gpu_training"]
    ratios = [r["ratio"] for r in rows if r["framework"] == "magmadnn"]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    hybrid = json.loads((tmp_path / "bench-hybrid-dry.json").read_text())  # simulator rows: logic, not speed
    assert {r["case"].split()[0] for r in hybrid} == {"cholesky", "qr", "eigh", "svd"}
    assert all(r["host_s"] > 0 and r["ratio"] > 0 for r in hybrid if r["case"].endswith(" hybrid"))
    graphs = json.loads((tmp_path / "bench-graphs-dry.json").read_text())  # null device: logic, not speed
    assert all(r["magmadnn_eager_ms"] > 0 and r["magmadnn_graph_ms"] > 0 for r in graphs)
    mixed = json.loads((tmp_path / "bench-mixed-dry.json").read_text())  # simulator gemm, null-device training
    gemm = [r for r in mixed if r["bench"] == "gemm"]
    assert [r["case"].split(" n=")[0] for r in gemm] == [
        f"{h} x {h} -> {o}" for h in ("bfloat16", "float16") for o in ("float32", h)]
    assert all(r["magmadnn_tflops"] > 0 for r in gemm)
    # float32 output: one rounding of float32 sums of 64 exact products; half output: that, rounded to the half type
    assert all(r["magmadnn_max_error"] < 1e-4 for r in gemm if r["case"].split()[-2] == "float32")
    train = [r for r in mixed if r["bench"] == "train"]
    assert len(train) == 4 and all(r.get("status") == "skipped: no magmadnn.mixed_precision"
                                   or r["magmadnn_steps_per_s"] > 0 for r in train)


def test_gpu_check_fits_its_time_budget():
    """The steps' time limits add up to at most 9 minutes, so that a 10-minute call runs them all."""
    import re

    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    limits = [int(t) for t in re.findall(r"^\s*timeout (\d+) ", script, re.M)]
    assert len(limits) == 6 and sum(limits) <= 540, limits


def test_gpu_check_rejects_unknown_arguments():
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--bogus"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "unknown argument --bogus" in done.stderr


def test_host_solver_rows_time_both_solvers_and_restore_scipy():
    """bench_pymagma --host-solvers on the CPU: the SciPy and NumPy host solvers per size; SciPy is back after."""
    pytest.importorskip("scipy.linalg")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_pymagma
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    before = {k: v for k, v in sys.modules.items() if k.startswith("scipy")}
    rows = bench_pymagma.host_solver_rows((16, 40))
    assert [r["case"] for r in rows] == ["tridiagonal (eigh) N=16", "bidiagonal (svd) N=16",
                                         "tridiagonal (eigh) N=40", "bidiagonal (svd) N=40"]
    assert all(r["scipy_dc_s"] >= 0 and r["numpy_dense_s"] >= 0 for r in rows)
    assert {k: v for k, v in sys.modules.items() if k.startswith("scipy")} == before
