"""What each tier-2/3 command of ``gpu_check.sh`` must have produced, and the figures taken from it.

A validator takes the command's JSON (and whether it was a dry run), raises on a result that is wrong or missing,
and returns the figures recorded in ``checks.jsonl`` (ratios against PyTorch and the like). A dry run checks the
logic only (rows, columns, positive times), never a speed.
"""

from __future__ import annotations

import re


def _ratios(rows, key: str = "case") -> dict:
    return {str(r.get(key)): r.get("ratio") for r in rows if r.get("ratio") is not None}


def bench_gpu(doc, dry_run: bool) -> dict:
    rows = doc["gpu_training"]
    assert {(r["recipe"], r["framework"]) for r in rows} >= {("mlp", "magmadnn"), ("lenet5", "magmadnn")}, rows
    ratios = {r["recipe"]: r["ratio"] for r in rows if r["framework"] == "magmadnn"}
    assert all(v and v > 0 for v in ratios.values()), rows
    return {"ratio_vs_torch_eager": ratios}


def bench_hybrid(rows, dry_run: bool) -> dict:
    assert {r["case"].split()[0] for r in rows} == {"cholesky", "qr", "eigh", "svd"} or not dry_run, rows
    assert all(r["ratio"] and (r["host_s"] or 0) > 0 for r in rows if r["case"].endswith("hybrid")), rows
    return {"ratio_vs_torch": _ratios(rows)}


def bench_graphs(rows, dry_run: bool) -> dict:
    assert [r["recipe"] for r in rows] == ["mlp", "lenet5"] and all(r["magmadnn_graph_ms"] > 0 for r in rows), rows
    return {"torch_eager_over_magmadnn_graph": _ratios(rows, "recipe"),
            "ms": {r["recipe"]: {k: r[k] for k in r if k.endswith("_ms")} for r in rows}}


def bench_mixed(rows, dry_run: bool) -> dict:
    assert [r["bench"] for r in rows] == ["gemm"] * 4 + ["train"] * 4, rows
    assert all(r["magmadnn_tflops"] >= 0 and r["magmadnn_max_error"] < 0.1 for r in rows[:4]), rows
    assert all(r.get("status", "").startswith("skipped") or r["magmadnn_steps_per_s"] > 0 for r in rows[4:]), rows
    return {"ratio_vs_torch": _ratios(rows)}


def bench_models(rows, dry_run: bool) -> dict:
    assert [r["model"] for r in rows] == ["resnet", "transformer"], rows
    assert all(r["batch"] == 128 and r["magmadnn_images_per_s"] > 0 for r in rows), rows
    if not dry_run:
        assert all(r["torch_images_per_s"] > 0 for r in rows), rows
    return {r["model"]: {"images_per_s": r["magmadnn_images_per_s"], "torch": r["torch_images_per_s"],
                         "ratio": r["ratio"]} for r in rows}


def bench_overhead(doc, dry_run: bool) -> dict:
    """``bench.py --overhead --on-gpu``: host us per eager and replayed step, fit's replay loop per batch and native
    calls per step, by model and batch (the dry run: the MLP at batch 1 on the null device)."""
    rows = doc["overhead"]
    models = {"mlp"} if dry_run else {"mlp", "lenet5", "resnet_small"}
    assert {r["model"] for r in rows} == models and all(r["train_us"] > 0 and r["replayed_train_us"] > 0
                                                        for r in rows), rows
    assert doc["environment"]["overhead_device"] == ("the null device" if dry_run else "the GPU"), doc["environment"]
    ones = [r for r in rows if r["batch"] == 1]
    assert ones and all(r["fit_replay_us"] is not None and r["fit_calls"] > 0 for r in ones), rows
    keys = ("train_us", "replayed_train_us", "replayed_calls", "fit_replay_us", "fit_calls", "fit_fixed_us",
            "calls_per_train_step", "python_us_per_call")
    return {f"{r['model']}@{r['batch']}": {k: r[k] for k in keys} for r in rows}


VALIDATORS = {"bench_gpu": bench_gpu, "bench_hybrid": bench_hybrid, "bench_graphs": bench_graphs,
              "bench_overhead": bench_overhead, "bench_mixed": bench_mixed, "bench_models": bench_models}


def command_output(name: str, stdout: str, dry_run: bool) -> tuple[str, dict, str | None]:
    """A command without JSON (LeNet-5 on MNIST): its printed accuracy, >= 97 % on the GPU."""
    if dry_run:
        return ("pass", {}, None) if "usage" in stdout.lower() else ("fail", {}, stdout[-2000:])
    found = re.search(r"^test accuracy ([0-9.]+)", stdout, re.M)
    if not found:
        return "fail", {}, "no 'test accuracy' line in the output:\n" + stdout[-2000:]
    acc = float(found.group(1))
    if acc < 0.97:
        return "fail", {"test_accuracy": acc}, f"LeNet-5 reached {acc} test accuracy on the GPU; expected >= 0.97"
    return "pass", {"test_accuracy": acc}, None
