"""One training step on the GPU, four ways, on the same GPU in one run: magmadnn eager, magmadnn replaying the step
as a CUDA graph (``compile(graph=True)``), PyTorch eager and PyTorch replaying a ``torch.cuda.CUDAGraph``; the MLP
and LeNet-5 of ``scripts/bench.py`` at batch 128, SGD with momentum, the same batch every step.

Milliseconds per step: CUDA events around ``--steps`` consecutive steps (so a step whose host work outlasts its
device work shows as such), median of ``--repeats``. ``ratio`` = PyTorch eager / magmadnn graph (goal >= 2).
``--dry-run`` runs the magmadnn steps on the simulator's null device (the logic, not the speed) and skips PyTorch.

    python scripts/bench_graphs.py [--steps 50] [--repeats 5] [--json PATH] [--dry-run]
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

from _bench_common import LR, MOMENTUM, magmadnn_model  # noqa: E402
from _gpu_bench import per_call_ms, print_rows, torch_per_call_ms  # noqa: E402

from magmadnn._atomic import write_text  # noqa: E402

RECIPES = ("mlp", "lenet5")
BATCH = 128


def _batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, BATCH)


def magmadnn_step(recipe: str, graph: bool):
    """A callable running one training step of ``fit`` (replayed once captured when ``graph``), warmed up."""
    from magmadnn.models.step import Tally

    model = magmadnn_model(recipe, 0, "gpu")
    model.compile(model.optimizer, model.loss, model.metrics, graph=graph)
    x, y = _batch()
    tally = Tally(model.xp, model._tally_names(False), model.dtype)

    def step():
        model._train_step([x], y, check=False, tally=tally)

    for _ in range(3):  # warm-up, then the capture
        step()
    if graph and not model._graphs.steps:
        raise RuntimeError(f"{recipe}: the step was not captured")
    return step


def torch_step(recipe: str, graph: bool):
    """A callable running one PyTorch training step on CUDA (replaying a captured CUDAGraph when ``graph``)."""
    import torch
    from bench import torch_model

    net, opt = torch_model(recipe, 0, "cuda")
    assert opt.defaults["lr"] == LR and opt.defaults["momentum"] == MOMENTUM
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = (torch.from_numpy(a).cuda() for a in _batch())

    def eager():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # the warm-up PyTorch's CUDA-graph recipe asks for, on a side stream
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    if not graph:
        return eager
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss_fn(net(x), y).backward()
        opt.step()
    return g.replay


def run(steps: int, repeats: int, dry_run: bool) -> list[dict]:
    rows = []
    for recipe in RECIPES:
        r = {"recipe": recipe, "batch": BATCH}
        for graph in (False, True):
            key = "magmadnn_graph_ms" if graph else "magmadnn_eager_ms"
            r[key] = round(per_call_ms(magmadnn_step(recipe, graph), steps, repeats, cuda=not dry_run), 4)
        for graph in (False, True):
            key = "torch_graph_ms" if graph else "torch_eager_ms"
            r[key] = None if dry_run else round(torch_per_call_ms(torch_step(recipe, graph), steps, repeats), 4)
        r["ratio"] = round(r["torch_eager_ms"] / r["magmadnn_graph_ms"], 3) if r["torch_eager_ms"] else None
        rows.append(r)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    if args.dry_run:
        from pymagma import simulator

        with simulator.simulated("null"):
            rows = run(2, 1, True)
    else:
        rows = run(args.steps, args.repeats, False)
    print_rows(rows)
    if args.json:
        write_text(args.json, json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
