"""The char-transformer row of ``scripts/bench.py``: magmadnn and PyTorch train the same recipe in one run and the
row reports their ratio (a smoke test of its logic on a few generated windows, never of its timings)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_char_transformer_row_against_pytorch():
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("bench_for_test", ROOT / "scripts" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(bench)  # it puts scripts/ on sys.path for its helpers
    finally:
        sys.path[:] = path
    data = bench.SEQUENCE_RECIPES["char_transformer"][1](True, 32, 16)
    rows = bench.train_recipe("char_transformer", data, 1, 0, ["magmadnn", "pytorch"])
    bench.add_ratios(rows)
    assert [(r["recipe"], r["framework"]) for r in rows] == [("char_transformer", "magmadnn"),
                                                             ("char_transformer", "pytorch")]
    assert rows[0]["ratio"] > 0 and all(0.0 <= r["test_accuracy"] <= 1.0 for r in rows)
