"""Real-size models on the GPU against PyTorch on the same GPU, tier 3 of ``gpu_check.sh``: training images per second
at batch 128 under bfloat16 mixed precision.

* ``resnet``: ``zoo.resnet_small`` at ResNet-18's widths (64, 128, 256, 512; two basic blocks per stage) on 3x32x32;
* ``transformer``: ``zoo.vit_tiny`` at ViT-Tiny's size (dim 192, 3 heads, 12 blocks, MLP ratio 4, 4x4 patches) on
  3x32x32 (64 tokens).

magmadnn: ``Sequential``/``Model`` under ``mixed_precision.set_global_policy("mixed_bfloat16")``, eager steps, SGD with
momentum; PyTorch: the same architecture under ``torch.autocast("cuda", dtype=torch.bfloat16)``. Images per second =
batch / step time (CUDA events around ``--steps`` steps, median of ``--repeats``); ``ratio`` = magmadnn / PyTorch.
The JSON is rewritten after every row. ``--dry-run``: the magmadnn steps on the simulator's null device (the logic,
not the speed), no PyTorch.

    python scripts/bench_models.py [--steps 10] [--repeats 3] [--json PATH] [--dry-run]
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

BATCH = 128
SHAPE = (3, 32, 32)
RESNET = {"widths": (64, 128, 256, 512), "blocks_per_stage": 2}
VIT = {"patch": 4, "dim": 192, "heads": 3, "blocks": 12, "mlp_ratio": 4}
LR, MOMENTUM = 0.01, 0.9


def _batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, *SHAPE)).astype(np.float32), rng.integers(0, 10, BATCH)


def magmadnn_step(name: str):
    """A warmed-up callable running one eager bf16 training step of the model ``name`` on the device."""
    from magmadnn import mixed_precision, zoo
    from magmadnn.models.training import Tally
    from magmadnn.optimizers import SGD

    mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = zoo.resnet_small(SHAPE, 10, **RESNET) if name == "resnet" else zoo.vit_tiny(SHAPE, 10, **VIT)
        model.compile(SGD(LR, momentum=MOMENTUM), "cross_entropy", seed=0, device="gpu")
    finally:
        mixed_precision.set_global_policy("float32")
    x, y = _batch()
    tally = Tally(model.xp, model._tally_names(False), model.dtype)

    def step():
        model._train_step([x], y, check=False, tally=tally)

    for _ in range(2):
        step()
    return step


def torch_model(name: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "resnet":
        def conv_bn(cin, cout, k, s):
            return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout))

        class Block(nn.Module):
            def __init__(self, cin, cout, s):
                super().__init__()
                self.a, self.b = conv_bn(cin, cout, 3, s), conv_bn(cout, cout, 3, 1)
                self.short = nn.Identity() if s == 1 and cin == cout else conv_bn(cin, cout, 1, s)

            def forward(self, x):
                return torch.relu(self.b(torch.relu(self.a(x))) + self.short(x))

        widths, layers, cin = RESNET["widths"], [], RESNET["widths"][0]
        for stage, w in enumerate(widths):
            for block in range(RESNET["blocks_per_stage"]):
                layers.append(Block(cin, w, 2 if stage > 0 and block == 0 else 1))
                cin = w
        return nn.Sequential(conv_bn(3, widths[0], 3, 1), nn.ReLU(), *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(cin, 10))
    dim, tokens = VIT["dim"], (SHAPE[1] // VIT["patch"]) * (SHAPE[2] // VIT["patch"])

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.att = nn.MultiheadAttention(dim, VIT["heads"], batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, VIT["mlp_ratio"] * dim), nn.GELU(approximate="tanh"),
                                     nn.Linear(VIT["mlp_ratio"] * dim, dim))

        def forward(self, x):
            h = self.n1(x)
            x = x + self.att(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.n2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patches = nn.Conv2d(3, dim, VIT["patch"], VIT["patch"])
            self.pos = nn.Parameter(torch.zeros(tokens, dim).uniform_(-0.05, 0.05))
            self.blocks = nn.Sequential(*(Block() for _ in range(VIT["blocks"])))
            self.norm, self.out = nn.LayerNorm(dim), nn.Linear(dim, 10)

        def forward(self, x):
            x = self.patches(x).flatten(2).transpose(1, 2) + self.pos
            return self.out(self.norm(self.blocks(x)).mean(1))

    return ViT()


def torch_step(name: str):
    import torch

    net = torch_model(name).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = (torch.from_numpy(a).cuda() for a in _batch())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    return step


def run(steps: int, repeats: int, dry_run: bool, emit) -> None:
    for name in ("resnet", "transformer"):
        r = {"model": name, "batch": BATCH, "policy": "mixed_bfloat16"}
        ms = per_call_ms(magmadnn_step(name), steps, repeats, cuda=not dry_run)
        r["magmadnn_images_per_s"] = round(BATCH * 1e3 / ms, 1)
        r["torch_images_per_s"] = None if dry_run else \
            round(BATCH * 1e3 / torch_per_call_ms(torch_step(name), steps, repeats), 1)
        r["ratio"] = round(r["magmadnn_images_per_s"] / r["torch_images_per_s"], 3) if r["torch_images_per_s"] \
            else None
        emit(r)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
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

        with simulator.simulated("null"):
            run(1, 1, True, emit)
    else:
        run(args.steps, args.repeats, False, emit)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
