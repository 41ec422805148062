#!/usr/bin/env python3
"""Mixed precision numbers that need no GPU: device memory of one training step on the simulator, host speed.

``--memory``: the bench recipes (MLP 784-512-256-10 and LeNet-5, SGD with momentum) at batch 256 on the simulated
device, one warm-up step, then the pool's bytes in use before a step (weights, optimizer slots, cached constants)
and at its peak (the most bytes in use after any allocation of the step, ``pymagma.memory.track_peak``), per
policy.
``--host``: host training throughput (images/s over ``--steps`` steps after one warm-up) per policy.

    PYMAGMA_SIMULATOR=1 python scripts/bench_mixed_precision.py --memory
    python scripts/bench_mixed_precision.py --host --steps 10
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def _model(recipe: str, policy: str, device: str, graph="auto"):
    from magmadnn import mixed_precision, zoo
    from magmadnn.optimizers import SGD

    mixed_precision.set_global_policy(policy)
    try:
        model = zoo.mlp(hidden=(512, 256)) if recipe == "mlp" else zoo.lenet5()
    finally:
        mixed_precision.set_global_policy("float32")
    model.compile(SGD(0.05, momentum=0.9), "cross_entropy", seed=0, device=device, graph=graph)
    return model


def _data(batch: int):
    rng = np.random.default_rng(0)
    return rng.random((batch, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, batch)


def memory(recipes, batch: int) -> list[dict]:
    """Peak pool bytes in use during one step, per recipe and policy (the simulated device)."""
    from pymagma import memory as pool_memory
    from pymagma import simulator

    rows = []
    with simulator.simulated("full"):
        for recipe in recipes:
            for policy in POLICIES:
                model = _model(recipe, policy, "gpu", graph=False)
                x, y = _data(batch)
                model.train_on_batch(x, y)  # warm-up: slots, constants
                gc.collect()
                with pool_memory.track_peak() as peak:  # every allocation of the step, cache hits included
                    model.train_on_batch(x, y)
                rows.append({"recipe": recipe, "policy": policy, "batch": batch, "resident_bytes": peak.start_bytes,
                             "peak_bytes": peak.peak_bytes, "step_bytes": peak.peak_bytes - peak.start_bytes})
                del model
                gc.collect()
    return rows


def host_speed(recipes, batch: int, steps: int) -> list[dict]:
    rows = []
    for recipe in recipes:
        for policy in POLICIES:
            model = _model(recipe, policy, "host")
            x, y = _data(batch)
            model.train_on_batch(x, y)
            start = time.perf_counter()
            for _ in range(steps):
                model.train_on_batch(x, y)
            rows.append({"recipe": recipe, "policy": policy, "batch": batch,
                         "images_per_s": steps * batch / (time.perf_counter() - start)})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memory", action="store_true", help="peak device bytes of a step (simulator)")
    p.add_argument("--host", action="store_true", help="host images/s per policy")
    p.add_argument("--recipe", default="mlp,lenet5")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args(argv)
    recipes = args.recipe.split(",")
    if args.memory:
        print(f"{'recipe':8} {'policy':15} {'resident MiB':>12} {'peak MiB':>9} {'step MiB':>9}")
        for r in memory(recipes, args.batch):
            print(f"{r['recipe']:8} {r['policy']:15} {r['resident_bytes'] / 2**20:12.2f} "
                  f"{r['peak_bytes'] / 2**20:9.2f} {r['step_bytes'] / 2**20:9.2f}")
    if args.host:
        print(f"{'recipe':8} {'policy':15} {'images/s':>9}")
        for r in host_speed(recipes, args.batch, args.steps):
            print(f"{r['recipe']:8} {r['policy']:15} {r['images_per_s']:9.0f}")
    if not (args.memory or args.host):
        p.error("give --memory and/or --host")
    return 0


if __name__ == "__main__":
    sys.exit(main())
