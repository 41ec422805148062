"""``scripts/bench.py --onnx --dry-run`` (a smoke test: its logic, never its timings): tiny ResNet-style and
transformer models exported from PyTorch, loaded as op nodes and as recognised layers, built by hand from magmadnn
layers, timed against onnxruntime and PyTorch in one process; every variant predicts what PyTorch does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_onnx_table_in_a_dry_run(tmp_path):
    out = tmp_path / "onnx.json"
    done = subprocess.run([sys.executable, "scripts/bench.py", "--onnx", "--dry-run", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ONNX import, host inference" in done.stdout
    report = json.loads(out.read_text())
    assert report["environment"]["threads"] == 1
    rows = report["onnx"]
    for model in ("resnet", "transformer"):
        variants = {(r["export"], r["variant"], r["threads"]) for r in rows if r["model"] == model}
        expected = {("-", "pytorch", 1), ("-", "layers", 1)} | {
            (form, v, n) for form in ("static", "dynamic") for v, n in
            (("recognised", 1), ("op nodes", 1), ("onnxruntime", 1), ("onnxruntime", 2))}
        assert variants == expected, model
    for r in rows:
        assert r["us_per_batch"] > 0 and r["cpu_us"] >= 0  # timed (values not asserted)
        assert r["max_err"] < 1e-4, r  # every way of running the model predicts what PyTorch does
        assert r["vs_ort"] is not None and r["vs_ort"] > 0
        if r["variant"] == "layers":
            assert r["vs_layers"] == 1.0 and r["cpu_vs_layers"] in (1.0, None)
