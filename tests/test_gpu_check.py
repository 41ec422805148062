"""``scripts/gpu_check.sh --dry-run`` on the CPU: every gpu test collects, the example parses its arguments and the
GPU benchmark's own logic (timing, rows, ratios, JSON) runs with the host standing in for the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_check_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run passed" in done.stdout
    rows = json.loads((tmp_path / "bench-gpu-dry.json").read_text())["gpu_training"]
    ratios = [r["ratio"] for r in rows if r["framework"] == "magmadnn"]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)


def test_gpu_check_rejects_unknown_arguments():
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--bogus"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "unknown argument --bogus" in done.stderr
