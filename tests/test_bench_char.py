"""``scripts/bench.py --recipe char_transformer --dry-run``: the char-transformer row trains magmadnn and PyTorch on
the same recipe in one run and reports their ratio (a smoke test of its logic, never of its timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_char_transformer_row_against_pytorch(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "scripts/bench.py", "--recipe", "char_transformer", "--dry-run",
                           "--threads", "1", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())["training"]
    assert [(r["recipe"], r["framework"]) for r in rows] == [("char_transformer", "magmadnn"),
                                                             ("char_transformer", "pytorch")]
    assert rows[0]["ratio"] > 0 and all(0.0 <= r["test_accuracy"] <= 1.0 for r in rows)
