"""Mixed precision on the GPU against PyTorch on the same GPU, step 6 of ``gpu_check.sh``.

* ``gemm`` rows: C = A @ B, 4096x4096, A and B in bfloat16 or float16, C in float32 or in the half type:
  ``pymagma.blas.matmul(a, b, out_dtype=...)`` against ``torch.mm`` (``out_dtype=torch.float32`` for a float32 C),
  TFLOP/s (CUDA events, median of ``--repeats`` runs of ``--reps`` products) and the largest absolute error of each
  against the float64 product of the same half operands (``torch`` in float64 on the GPU).
* ``train`` rows: LeNet-5 and the char transformer (``scripts/_bench_char.py``) at batch 64 under
  ``magmadnn.mixed_precision.set_global_policy("mixed_bfloat16" | "mixed_float16")`` (eager steps; a
  ``LossScaleOptimizer`` under float16) against PyTorch with ``torch.autocast("cuda", dtype=...)`` (and a
  ``torch.amp.GradScaler`` for float16): steps per second and ``ratio`` = magmadnn / PyTorch. Without
  ``magmadnn.mixed_precision`` each says "skipped: no magmadnn.mixed_precision".

The JSON is rewritten after every row, so a time limit keeps what was measured. ``--dry-run`` (CPU): the gemm rows
at 64x64 on the simulator (errors against NumPy's float64 product, no PyTorch) and the training rows on the
simulator's null device (the logic, not the speed).

    python scripts/bench_mixed.py [--n 4096] [--steps 20] [--repeats 3] [--json PATH] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _gpu_bench import per_call_ms, print_rows, torch_per_call_ms  # noqa: E402

from magmadnn._atomic import write_text  # noqa: E402

BATCH = 64
HALVES = ("bfloat16", "float16")
POLICIES = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
SKIPPED = "skipped: no magmadnn.mixed_precision"


# ------------------------------------------------------------------------------------------------------ gemm
def _half_operands(n: int, half: str, seed: int = 0):
    """A and B as host arrays of the half type (ml_dtypes for bfloat16) and their float64 values."""
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if half == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype(np.float32).astype(dtype) for _ in range(2))
    return a, b


def gemm_rows(n: int, reps: int, repeats: int, dry_run: bool, emit) -> None:
    import pymagma
    from pymagma import blas

    for half in HALVES:
        a_host, b_host = _half_operands(n, half)
        exact = a_host.astype(np.float64) @ b_host.astype(np.float64) if dry_run else None
        a, b = pymagma.asarray(a_host), pymagma.asarray(b_host)
        torch_a = torch_b = None
        if not dry_run:
            import torch

            tdtype = getattr(torch, half)
            torch_a = torch.from_numpy(a_host.view(np.int16)).cuda().view(tdtype)
            torch_b = torch.from_numpy(b_host.view(np.int16)).cuda().view(tdtype)
            exact = (torch_a.double() @ torch_b.double()).cpu().numpy()
        for out in ("float32", half):
            ms = per_call_ms(lambda a=a, b=b, out=out: blas.matmul(a, b, out_dtype=out), reps, repeats,
                           cuda=not dry_run)
            ours = blas.matmul(a, b, out_dtype=out).get().astype(np.float64)
            r = {"bench": "gemm", "case": f"{half} x {half} -> {out} n={n}",
                 "magmadnn_tflops": _tflops(n, ms),
                 "magmadnn_max_error": float(np.abs(ours - exact).max())}
            r.update(_torch_gemm(torch_a, torch_b, out, exact, n, reps, repeats) if not dry_run else
                     {"torch_tflops": None, "torch_max_error": None})
            r["ratio"] = round(r["magmadnn_tflops"] / r["torch_tflops"], 3) if r["torch_tflops"] else None
            emit(r)


def _tflops(n: int, ms: float) -> float:
    """A gemm's TFLOP/s to four significant figures (a dry run's tiny figure is not rounded to zero)."""
    return float(f"{2 * n**3 / (ms * 1e-3) / 1e12:.4g}")


def _torch_gemm(a, b, out: str, exact, n: int, reps: int, repeats: int) -> dict:
    import torch

    if out == "float32":
        def run():
            return torch.mm(a, b, out_dtype=torch.float32)
    else:
        def run():
            return torch.mm(a, b)
    run()
    ms = torch_per_call_ms(run, reps, repeats)
    got = run().double().cpu().numpy()
    return {"torch_tflops": _tflops(n, ms),
            "torch_max_error": float(np.abs(got - exact).max())}


# ------------------------------------------------------------------------------------------------- training
def _lenet_batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, BATCH)


def _char_batch(dry_run: bool):
    from _bench_char import text_windows

    x, y, _, _, vocab = text_windows(dry_run, n_train=BATCH, n_val=4)
    return x, y, vocab


def magmadnn_train_step(recipe: str, half: str, dry_run: bool):
    """A warmed-up callable running one eager training step of ``recipe`` under the mixed policy of ``half``."""
    from magmadnn import mixed_precision, zoo
    from magmadnn import optimizers as O
    from magmadnn.models.step import Tally

    mixed_precision.set_global_policy(POLICIES[half])
    try:
        if recipe == "lenet5":
            from _bench_common import LR, MOMENTUM

            model, optimizer = zoo.lenet5(), O.SGD(LR, momentum=MOMENTUM)
            x, y = _lenet_batch()
        else:
            from _bench_char import BLOCKS, CONTEXT, DIM, HEADS, LR

            x, y, vocab = _char_batch(dry_run)
            model = zoo.char_transformer((CONTEXT,), vocab, dim=DIM, heads=HEADS, blocks=BLOCKS)
            optimizer = O.Adam(LR)
        model.compile(optimizer, "cross_entropy", seed=0, device="gpu")
        if half == "float16" and not isinstance(model.optimizer, O.LossScaleOptimizer):
            model.compile(O.LossScaleOptimizer(model.optimizer), model.loss, model.metrics)
    finally:
        mixed_precision.set_global_policy("float32")
    tally = Tally(model.xp, model._tally_names(False), model.dtype)

    def step():
        model._train_step([x], y, check=False, tally=tally)

    for _ in range(3):
        step()
    return step


def torch_train_step(recipe: str, half: str):
    """A warmed-up callable running one PyTorch step under ``torch.autocast`` (a GradScaler for float16)."""
    import torch

    if recipe == "lenet5":
        from bench import torch_model

        net, opt = torch_model("lenet5", 0, "cuda")
        x, y = (torch.from_numpy(a).cuda() for a in _lenet_batch())
    else:
        from _bench_char import LR, torch_char_transformer

        xs, ys, vocab = _char_batch(False)
        net = torch_char_transformer(vocab, 0).cuda()
        opt = torch.optim.Adam(net.parameters(), lr=LR)
        x, y = torch.from_numpy(xs).cuda(), torch.from_numpy(ys).cuda()
    dtype = getattr(torch, half)
    scaler = torch.amp.GradScaler("cuda", enabled=half == "float16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            logits = net(x)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, -2) if logits.ndim > 2 else logits,
                                                     y.flatten() if logits.ndim > 2 else y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(3):
        step()
    return step


def train_rows(steps: int, repeats: int, dry_run: bool, emit) -> None:
    try:
        import magmadnn.mixed_precision  # noqa: F401
    except ImportError:
        for recipe in ("lenet5", "char_transformer"):
            for half in HALVES:
                emit({"bench": "train", "case": f"{recipe} {POLICIES[half]} batch={BATCH}", "status": SKIPPED})
        return
    for recipe in ("lenet5", "char_transformer"):
        for half in HALVES:
            r = {"bench": "train", "case": f"{recipe} {POLICIES[half]} batch={BATCH}"}
            ms = per_call_ms(magmadnn_train_step(recipe, half, dry_run), steps, repeats, cuda=not dry_run)
            r["magmadnn_steps_per_s"] = round(1e3 / ms, 2)
            if dry_run:
                r["torch_steps_per_s"] = None
            else:
                ms = torch_per_call_ms(torch_train_step(recipe, half), steps, repeats)
                r["torch_steps_per_s"] = round(1e3 / ms, 2)
            r["ratio"] = round(r["magmadnn_steps_per_s"] / r["torch_steps_per_s"], 3) if r["torch_steps_per_s"] \
                else None
            emit(r)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    rows: list[dict] = []

    def emit(r: dict) -> None:
        rows.append(r)
        print(json.dumps(r), flush=True)
        if args.json:
            write_text(args.json, json.dumps(rows, indent=2))

    if args.dry_run:
        from pymagma import simulator

        with simulator.simulated("full"):
            gemm_rows(64, 1, 1, True, emit)
        with simulator.simulated("null"):
            train_rows(1, 1, True, emit)
    else:
        gemm_rows(args.n, args.reps, args.repeats, False, emit)
        train_rows(args.steps, args.repeats, False, emit)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
