"""``scripts/gpu_check.sh --dry-run`` on the CPU: tier 1's checks on pymagma's simulator, every gpu test collects,
the example parses its arguments and the GPU benchmarks' own logic (timing, rows, ratios, JSON) runs with the
simulator standing in for the device; the runner's time limits, result lines and summary; the record's row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import _gpu_checks
    import _gpu_tiers
    import gpu_record
finally:
    sys.path.remove(str(ROOT / "scripts"))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """One ``gpu_check.sh --dry-run`` of every tier, run once for the tests that read it (its tier 1 is what
    ``--tier 1 --dry-run`` runs: the same checks in the same order)."""
    out = tmp_path_factory.mktemp("gpu-check-dry")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    return done, out


@pytest.mark.slow
def test_gpu_check_dry_run(dry_run):
    done, tmp_path = dry_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run passed" in done.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["finished"] and not summary["never_ran"] and not summary["failed"]
    assert [c["check"] for c in _lines(tmp_path / "checks.jsonl")] == [i.name for i in _gpu_tiers.plan()]
    models = json.loads((tmp_path / "bench-models-dry.json").read_text())
    assert [(r["model"], r["batch"]) for r in models] == [("resnet", 128), ("transformer", 128)]
    rows = json.loads((tmp_path / "bench-gpu-dry.json").read_text())["gpu_training"]
    ratios = [r["ratio"] for r in rows if r["framework"] == "magmadnn"]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    hybrid = json.loads((tmp_path / "bench-hybrid-dry.json").read_text())  # simulator rows: logic, not speed
    assert {r["case"].split()[0] for r in hybrid} == {"cholesky", "qr", "eigh", "svd"}
    assert all(r["host_s"] > 0 and r["ratio"] > 0 for r in hybrid if r["case"].endswith(" hybrid"))
    overhead = json.loads((tmp_path / "bench-overhead-dry.json").read_text())["overhead"]  # the null device
    assert [(r["model"], r["batch"]) for r in overhead] == [("mlp", 1)] and overhead[0]["fit_calls"] > 0
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


@pytest.mark.slow
def test_tier1_dry_run_lists_its_checks_and_passes(dry_run, tmp_path):
    names = [c.name for c in _gpu_checks.TIER1]
    listed = subprocess.run(["bash", "scripts/gpu_check.sh", "--tier", "1", "--list"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env={**os.environ, "OUT": str(tmp_path)})
    # --tier 1 plans tier 1 alone, in the full run's order
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert [x.split()[0] for x in listed.stdout.splitlines() if x.startswith("  ")] == names + ["tier1_tests"]
    assert [x.split(":")[0] for x in listed.stdout.splitlines() if x.startswith("tier ")] == ["tier 1"]
    done, out = dry_run  # the full dry run's tier 1: the checks --tier 1 --dry-run runs
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(f"  {name} " in done.stdout for name in names) and "dry run passed" in done.stdout
    lines = [x for x in _lines(out / "checks.jsonl") if x["tier"] == 1]
    assert [x["check"] for x in lines] == names + ["tier1_tests"]
    assert all(x["status"] == "pass" for x in lines[:-1]) and lines[-1]["status"] in ("pass", "skip")
    assert lines[names.index("fit")]["figures"]["lenet5_loss"] > 0
    assert json.loads((out / "summary.json").read_text())["tiers"]["1"] == {
        "planned": len(names) + 1, "pass": len(lines) - (lines[-1]["status"] == "skip"), "fail": 0, "timeout": 0,
        "skip": int(lines[-1]["status"] == "skip"), "limit_s": sum(i.limit_s for i in _gpu_tiers.plan([1]))}


def test_tier1_fits_three_minutes_and_covers_the_core():
    tier1 = _gpu_tiers.plan([1])
    assert sum(i.limit_s for i in tier1) <= _gpu_checks.TIER1_BUDGET_S == 180
    assert all(i.limit_s > 0 and i.tier == 1 for i in tier1)
    assert {"libraries", "gemm", "linalg", "conv_pool", "nvrtc", "fit", "mixed_precision", "array_api",
            "tier1_tests"} <= {i.name for i in tier1}
    assert [i.tier for i in _gpu_tiers.plan()] == sorted(i.tier for i in _gpu_tiers.plan())
    assert sum(i.limit_s for i in _gpu_tiers.plan([2, 3])) <= 10 * 60 + 60  # two calls at most with --budget


def test_a_gpu_test_marked_tier1_joins_tier1(tmp_path):
    marker = "pytest.mark." + "tier1"  # not written out: this file would join tier 1 itself
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_fft.py").write_text(f"import pytest\n\n@pytest.mark.gpu\n@{marker}\ndef test_x(): pass\n")
    (tmp_path / "test_other.py").write_text("import pytest\n\n@pytest.mark.gpu\ndef test_y(): pass\n")
    found = _gpu_tiers.tier1_files(tmp_path)
    assert [Path(p).name for p in found] == ["test_fft.py"]


def test_tier1_without_gpu_is_a_usage_error(tmp_path):
    test = ROOT / "tests" / f"test_tmp_tier1_{os.getpid()}.py"
    test.write_text("import pytest\n\n@pytest.mark." + "tier1\ndef test_x(): pass\n")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               str(test)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        test.unlink()
    assert done.returncode != 0 and "marked tier1 but not gpu" in done.stdout + done.stderr


def _item(name: str, code: str, limit: int) -> _gpu_tiers.Item:
    return _gpu_tiers.Item(name, 2, limit, "cmd", name, {"argv": ["-c", code], "dry_argv": [], "json": None,
                                                         "dry_json": None})


def test_each_check_is_written_when_it_ends_and_the_summary_names_what_never_ran(tmp_path):
    """A pass with its figure, a wrong answer with its message, a hang cut at its limit (the next check still
    runs), and a check left out by the budget: listed as never ran; then the record's row."""
    items = [_item("good", "print('test accuracy 0.99')", 20), _item("bad", "print('test accuracy 0.5')", 20),
             _item("hang", "import time; time.sleep(60)", 2), _item("after", "print('test accuracy 0.98')", 20),
             _item("late", "print('test accuracy 1.0')", 200)]
    _gpu_tiers.environment(tmp_path, True, [2])
    summary = _gpu_tiers.run(items, tmp_path, dry_run=False, budget=60)
    lines = {x["check"]: x for x in _lines(tmp_path / "checks.jsonl")}
    assert lines["good"]["status"] == "pass" and lines["good"]["figures"] == {"test_accuracy": 0.99}
    assert lines["bad"]["status"] == "fail" and "expected >= 0.97" in lines["bad"]["error"]
    assert lines["hang"]["status"] == "timeout" and 2 <= lines["hang"]["seconds"] < 30
    assert lines["after"]["status"] == "pass" and "late" not in lines
    assert summary["never_ran"] == ["late"] and summary["failed"] == ["bad", "hang"] and not summary["finished"]
    assert summary["tiers"]["2"] == {"planned": 5, "pass": 2, "fail": 1, "timeout": 1, "skip": 0, "limit_s": 262}
    doc = (ROOT / "docs" / "gpu-runs.md").read_text()
    row = gpu_record.row(tmp_path, doc)
    header = next(x for x in doc.splitlines() if x.startswith(gpu_record.HEADER))
    assert row.count("|") == header.count("|") and "| 2: 2/1/1/0/1 |" in row
    assert "bad (fail)" in row and "never ran: late" in row and "test_accuracy" in row
    copy = tmp_path / "gpu-runs.md"
    copy.write_text(doc)
    gpu_record.main([str(tmp_path), "--write", "--doc", str(copy)])
    written = copy.read_text().splitlines()
    assert written[written.index(header) + 2] == row and len(written) == len(doc.splitlines()) + 1


def test_the_real_size_models_match_their_pytorch_twins():
    """bench_models.py compares like with like: the same trainable parameters in both frameworks."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_models
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from magmadnn import zoo

    for name, build in (("resnet", lambda: zoo.resnet_small(bench_models.SHAPE, 10, **bench_models.RESNET)),
                        ("transformer", lambda: zoo.vit_tiny(bench_models.SHAPE, 10, **bench_models.VIT))):
        net, model = bench_models.torch_model(name), build()
        assert sum(p.numel() for p in net.parameters()) == sum(int(p.data.size) for p in model.parameters())
        assert tuple(net(torch.zeros(2, *bench_models.SHAPE)).shape) == (2, 10)


def test_gpu_check_rejects_unknown_arguments():
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--bogus"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "unknown argument --bogus" in done.stderr
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--tier", "4", "--list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 2 and "--tier: expected 1, 2, 3" in done.stderr


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
