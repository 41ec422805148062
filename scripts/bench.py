#!/usr/bin/env python3
"""magmadnn against PyTorch on the same recipes, in the same process, alternating epoch by epoch.

Recipes (MNIST, batch 64, SGD lr 0.05 momentum 0.9, 3 epochs):
  mlp     784-512-256-10, ReLU
  lenet5  conv 6@5x5 pad 2, ReLU, maxpool 2, conv 16@5x5, ReLU, maxpool 2, dense 120-84-10
  row_lstm  LSTM(128) over the 28 rows of 28 pixels, the last state into dense 10 (not in the default list)
and (host only) char_transformer: zoo.char_transformer on pydoc_data.topics, 1,024 windows of 64 characters an
epoch, batch 32, Adam 3e-3 (see _bench_char.py; sequences/s, next-character accuracy).

Training throughput is images/s over epochs 2..E (epoch 1 is the warm-up); the ratio column is
magmadnn / PyTorch measured in this run.  ``--ops`` adds host op micro-benchmarks; ``--gpu`` adds the
pymagma BLAS/LAPACK, cuDNN and kernel benchmarks and GPU training (both recipes at batch 128: magmadnn's device
backend against PyTorch eager on the same GPU); they need a CUDA device.  ``--dry-run`` checks the script's own
logic on a CPU in seconds: tiny data, one epoch, the host backend standing in for the GPU.

    python scripts/bench.py                      # both recipes, real MNIST when ../shared/data/mnist exists
    python scripts/bench.py --recipe mlp --repeats 3 --json bench.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import _bench_char  # noqa: E402
from _bench_common import BATCH, LR, MOMENTUM, load_data, magmadnn_model  # noqa: E402

from magmadnn._atomic import write_text  # noqa: E402

#: Recipes with data and runners of their own module: recipe -> (runners by framework, data(dry_run)).
SEQUENCE_RECIPES = {"char_transformer": (_bench_char.RUNNERS, _bench_char.text_windows)}

GPU_BATCH = 128


def rss_mib() -> float:
    """Resident set size of this process now, in MiB (Linux /proc; psutil elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import psutil

        return psutil.Process().memory_info().rss / 2**20


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------------------------- recipes
def torch_model(recipe: str, seed: int, device: str = "cpu"):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    if recipe == "mlp":
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 10))
    elif recipe == "row_lstm":
        net = torch_row_lstm()
    else:
        net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
                            nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
                            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    net = net.to(device)
    return net, torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)


# -- row LSTM: MNIST read row by row, 28 steps of 28 pixels
ROW_LSTM_UNITS = 128


def torch_row_lstm():
    from torch import nn

    class RowLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.out = nn.LSTM(28, ROW_LSTM_UNITS, batch_first=True), nn.Linear(ROW_LSTM_UNITS, 10)

        def forward(self, x):
            return self.out(self.lstm(x)[0][:, -1])

    return RowLSTM()


def recipe_data(recipe: str, data):
    """The recipe's inputs: the images as they are, or (N, 28, 28) rows for the row LSTM."""
    if recipe != "row_lstm":
        return data
    x, y, xt, yt = data
    return x.reshape(len(x), 28, 28), y, xt.reshape(len(xt), 28, 28), yt


class MagmadnnRunner:
    name = "magmadnn"

    def __init__(self, recipe, seed, data, batch=BATCH, gpu=False):
        self.model = magmadnn_model(recipe, seed, "gpu" if gpu else "host")
        self.x, self.y, self.xt, self.yt = data
        self.batch = batch

    def epoch(self):
        # fit returns after its last host read (the epoch's loss), so the device's work is finished
        self.model.fit(self.x, self.y, batch_size=self.batch, epochs=1, shuffle=True, verbose=0)

    def accuracy(self):
        return float(self.model.evaluate(self.xt, self.yt, batch_size=1000, return_dict=True)["accuracy"])


class TorchRunner:
    name = "pytorch"

    def __init__(self, recipe, seed, data, batch=BATCH, gpu=False):
        import torch

        self.torch, self.batch = torch, batch
        self.device = "cuda" if gpu else "cpu"
        self.net, self.opt = torch_model(recipe, seed, self.device)
        self.loss = torch.nn.CrossEntropyLoss()
        self.gen = torch.Generator().manual_seed(seed)
        x, y, xt, yt = data

        def dev(a, dtype=None):
            return torch.from_numpy(np.asarray(a, dtype=dtype)).to(self.device)

        self.x, self.y, self.xt, self.yt = dev(x), dev(y, np.int64), dev(xt), dev(yt, np.int64)

    def epoch(self):
        self.net.train()
        order = self.torch.randperm(len(self.x), generator=self.gen).to(self.device)
        for i in range(0, len(order), self.batch):
            idx = order[i:i + self.batch]
            self.opt.zero_grad(set_to_none=True)
            self.loss(self.net(self.x[idx]), self.y[idx]).backward()
            self.opt.step()
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def accuracy(self):
        self.net.eval()
        with self.torch.no_grad():
            return float((self.net(self.xt).argmax(1) == self.yt).float().mean())


def train_recipe(recipe: str, data, epochs: int, seed: int, frameworks: list[str], batch: int = BATCH,
                 gpu: bool = False) -> list[dict]:
    """Train each framework for ``epochs``, alternating epoch by epoch; time every epoch and note RSS."""
    data = recipe_data(recipe, data)
    runners = []
    for fw in frameworks:
        if recipe in SEQUENCE_RECIPES:
            runners.append(SEQUENCE_RECIPES[recipe][0][fw](data, seed))
            continue
        runners.append((MagmadnnRunner if fw == "magmadnn" else TorchRunner)(recipe, seed, data, batch, gpu))
    times = {r.name: [] for r in runners}
    rss = {r.name: [] for r in runners}
    for _ in range(epochs):
        for r in runners:
            gc.collect()
            t0 = time.perf_counter()
            r.epoch()
            times[r.name].append(time.perf_counter() - t0)
            rss[r.name].append(rss_mib())
    n = len(data[0])
    rows = []
    for r in runners:
        steady = times[r.name][1:] or times[r.name]
        rows.append({
            "recipe": recipe, "framework": r.name, "device": "gpu" if gpu else "host", "batch": batch,
            "epochs": epochs,
            "images_per_s": n * len(steady) / sum(steady), "epoch_s": times[r.name],
            "test_accuracy": r.accuracy(), "rss_mib_after_epoch": rss[r.name],
        })
    return rows


def median_rows(runs: list[list[dict]]) -> list[dict]:
    """Median images/s and accuracy over repeats, keeping the last run's other fields."""
    out = []
    for i, row in enumerate(runs[-1]):
        row = dict(row)
        row["images_per_s"] = statistics.median(run[i]["images_per_s"] for run in runs)
        row["test_accuracy"] = statistics.median(run[i]["test_accuracy"] for run in runs)
        row["repeats"] = len(runs)
        out.append(row)
    return out


def add_ratios(rows: list[dict]) -> None:
    torch_rate = {r["recipe"]: r["images_per_s"] for r in rows if r["framework"] == "pytorch"}
    torch_acc = {r["recipe"]: r["test_accuracy"] for r in rows if r["framework"] == "pytorch"}
    for r in rows:
        if r["framework"] == "magmadnn" and r["recipe"] in torch_rate:
            r["ratio"] = r["images_per_s"] / torch_rate[r["recipe"]]
            r["accuracy_delta_points"] = 100 * (r["test_accuracy"] - torch_acc[r["recipe"]])


def gpu_training(recipes, data, epochs: int, seed: int, frameworks: list[str], gpu: bool = True) -> list[dict]:
    """Both recipes at batch 128 on the GPU: magmadnn's device backend against PyTorch eager on the same device."""
    rows = []
    for recipe in recipes:
        rows.extend(train_recipe(recipe, data, epochs, seed, frameworks, batch=GPU_BATCH, gpu=gpu))
    add_ratios(rows)
    return rows


def print_table(title: str, rows: list[dict], cols: list[str]) -> None:
    if not rows:
        return
    print(f"\n{title}")
    widths = [max(len(c), *(len(fmt(r.get(c))) for r in rows)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in rows:
        print("  ".join(fmt(r.get(c)).ljust(w) for c, w in zip(cols, widths)))


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    if isinstance(v, list):
        return ",".join(fmt(x) for x in v)
    return str(v)


def set_threads(n: int) -> dict:
    """Same thread count for NumPy's BLAS and PyTorch; report the BLAS kernel NumPy runs."""
    info = {"threads": n}
    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(n)
        blas = [i for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        if blas:
            info["numpy_blas"] = f"{blas[0]['internal_api']} {blas[0].get('version')} {blas[0].get('architecture')}"
    except ImportError:
        info["numpy_blas"] = "unknown (threadpoolctl not installed; BLAS threads not pinned)"
    try:
        import torch

        torch.set_num_threads(n)
        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    return info


def environment(threads_info: dict, data_name: str) -> dict:
    import magmadnn

    return {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "machine": platform.machine(),
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "numpy": np.__version__,
            "magmadnn": magmadnn.__version__, "data": data_name, **threads_info}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="mlp,lenet5,char_transformer",
                   help="comma list of: mlp, lenet5, row_lstm, char_transformer")
    p.add_argument("--data", default=None, help="folder with MNIST IDX files (default ../shared/data/mnist)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=1, help="repeat each recipe; medians are reported")
    p.add_argument("--threads", type=int, default=None, help="BLAS and PyTorch threads (default: all cores; 1 for "
                   "--onnx and --dry-run)")
    p.add_argument("--frameworks", default="magmadnn,pytorch")
    p.add_argument("--ops", action="store_true", help="add host op micro-benchmarks")
    p.add_argument("--gpu", action="store_true", help="add pymagma GPU benchmarks (needs a CUDA device)")
    p.add_argument("--train-size", type=int, default=None, help="use only the first N training images")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write all rows and the environment to this file")
    p.add_argument("--distributed", action="store_true",
                   help="instead: data-parallel throughput on 1 vs 2 MPI ranks (mpi extra; see bench_distributed.py)")
    p.add_argument("--dry-run", action="store_true",
                   help="check this script on a CPU: 256 generated images, 1 epoch, host backend for the GPU rows")
    p.add_argument("--overhead", action="store_true",
                   help="instead: host cost of the GPU path per step on pymagma's null device (no GPU needed), "
                        "native calls per step, Python per call, and PyTorch CPU's batch-1 step in the same run")
    p.add_argument("--onnx", action="store_true",
                   help="instead: inference of imported ONNX models (op nodes, recognised layers) against the same "
                        "model built from magmadnn layers, onnxruntime and PyTorch on the CPU (see _bench_onnx.py); "
                        "--threads defaults to 1 here")
    p.add_argument("--models", default=None,
                   help="--overhead: comma list of models (default mlp,lenet5,resnet_small,transformer); --onnx: of "
                        "resnet,transformer (default both)")
    p.add_argument("--batches", default="1,128", help="--overhead: comma list of batch sizes")
    p.add_argument("--steps", type=int, default=None,
                   help="--overhead: timed steps per measurement (default 20); --onnx: timed rounds (default 30)")
    p.add_argument("--on-gpu", action="store_true",
                   help="--overhead: time the same figures on the GPU (the real libraries) instead of the null device")
    args = p.parse_args(argv)
    if args.overhead:
        return overhead_bench(args)
    if args.onnx:
        return onnx_bench(args)
    if args.dry_run:  # the script's own logic, not a speed: one thread (two spin-wait on a shared CPU: 2-3x the time)
        args.threads = args.threads or 1
    args.threads = args.threads or os.cpu_count()
    if args.dry_run:
        args.data, args.train_size, args.epochs, args.repeats = os.devnull, 256, 1, 1

    frameworks = [f for f in args.frameworks.split(",") if f]
    if "pytorch" in frameworks:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("PyTorch is not importable: benchmarking magmadnn alone (no ratios).")
            frameworks = [f for f in frameworks if f != "pytorch"]
    env = set_threads(args.threads)
    x, y, xt, yt, data_name = load_data(args.data, *((256, 128) if args.dry_run else ()))
    if args.train_size:
        x, y = x[:args.train_size], y[:args.train_size]
    env = environment(env, data_name)
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    if args.distributed:
        return distributed_bench(args, env)

    results = {"environment": env, "training": [], "ops": [], "gpu": []}
    for recipe in [r for r in args.recipe.split(",") if r]:
        if recipe not in ("mlp", "lenet5", "row_lstm", *SEQUENCE_RECIPES):
            p.error(f"unknown recipe {recipe!r}: expected mlp, lenet5, row_lstm or {', '.join(SEQUENCE_RECIPES)}")
        data = (x, y, xt, yt)
        if recipe in SEQUENCE_RECIPES:
            data = SEQUENCE_RECIPES[recipe][1](args.dry_run, *((64, 32) if args.dry_run else ()))
        runs = [train_recipe(recipe, data, args.epochs, args.seed + k, frameworks)
                for k in range(args.repeats)]
        results["training"].extend(median_rows(runs))
    add_ratios(results["training"])
    results["peak_rss_mib"] = peak_rss_mib()
    print_table(f"training ({args.epochs} epochs, images/s over epochs 2..{args.epochs}, median of "
                f"{args.repeats}; peak RSS of the process {results['peak_rss_mib']:.0f} MiB)", results["training"],
                ["recipe", "framework", "images_per_s", "ratio", "test_accuracy", "accuracy_delta_points",
                 "rss_mib_after_epoch"])

    if args.ops:
        import bench_ops

        results["ops"] = bench_ops.run(repeats=max(args.repeats, 5), threads=args.threads)
        print_table("host op micro-benchmarks (ms; ratio = PyTorch time / magmadnn time, >1 is faster)",
                    results["ops"], list(results["ops"][0]) if results["ops"] else [])
    if args.gpu:
        recipes = [r for r in args.recipe.split(",") if r and r not in SEQUENCE_RECIPES] or ["mlp", "lenet5"]
        results["gpu_training"] = gpu_training(recipes, (x, y, xt, yt), max(args.epochs, 2), args.seed, frameworks,
                                               gpu=not args.dry_run)
        print_table(f"GPU training (batch {GPU_BATCH}, images/s over epochs 2..; ratio = magmadnn / PyTorch eager)"
                    + (" [dry run: host stands in for the GPU]" if args.dry_run else ""),
                    results["gpu_training"], ["recipe", "framework", "images_per_s", "ratio", "test_accuracy"])
    if args.gpu and not args.dry_run:
        for mod in ("bench_pymagma", "bench_dnn"):
            rows = __import__(mod).run(repeats=max(args.repeats, 5))
            results["gpu"].extend(rows)
            print_table(f"GPU: {mod}", rows, list(rows[0]) if rows else [])
    if args.json:
        write_text(args.json, json.dumps(results, indent=2))
        print(f"\nwrote {args.json}")
    return 0


def overhead_bench(args) -> int:
    """``--overhead``: the host's cost of driving the device, per step, on the null device (see _overhead.py)."""
    import _overhead

    models = [m for m in (args.models or ",".join(_overhead.MODELS)).split(",") if m]
    unknown = sorted(set(models) - set(_overhead.MODELS))
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; expected some of {list(_overhead.MODELS)}")
    batches = [int(b) for b in args.batches.split(",") if b]
    env = environment(set_threads(1), "generated")
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    rows = _overhead.run(models, batches, args.steps or 20, on_gpu=args.on_gpu)
    where = "the GPU" if args.on_gpu else "the null device"
    env["overhead_device"] = where
    print_table(f"host cost of the GPU path on {where} (us per step; calls per training step; "
                "ratio = magmadnn train_us / PyTorch CPU eager batch-1 step, 1 thread)", rows, _overhead.COLUMNS)
    with _overhead.device(args.on_gpu):
        calls = _overhead.elementwise()
    print_table(f"host cost of one array API elementwise call on {where} (us; native calls per call)", calls,
                _overhead.ELEMENTWISE_COLUMNS)
    with _overhead.device(args.on_gpu):
        ffts = _overhead.fft_and_gemm()
    print_table(f"host cost of one cached cuFFT call next to one gemm call on {where} (us; native calls per "
                "call; cuFFT's own calls are not counted)", ffts, _overhead.FFT_COLUMNS)
    if args.json:
        write_text(args.json, json.dumps({"environment": env, "overhead": rows, "elementwise": calls, "fft": ffts},
                                         indent=2))
        print(f"\nwrote {args.json}")
    return 0


def onnx_bench(args) -> int:
    """``--onnx``: an imported ONNX model's host inference against the same model from layers, onnxruntime and
    PyTorch, alternated in one process (see _bench_onnx.py)."""
    import _bench_onnx

    models = [m for m in (args.models or ",".join(_bench_onnx.MODELS)).split(",") if m]
    unknown = sorted(set(models) - set(_bench_onnx.MODELS))
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; expected some of {list(_bench_onnx.MODELS)}")
    threads = args.threads or 1
    steps = args.steps or (2 if args.dry_run else 30)
    env = environment(set_threads(threads), "generated")
    env["load_average"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    rows = _bench_onnx.run(models, steps, threads, dry_run=args.dry_run)
    env["load_average_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print_table(f"ONNX import, host inference (us per batch, median of {steps} alternated rounds; "
                f"{_bench_onnx.describe(models, args.dry_run)}; vs_layers = time / the magmadnn layers model's, "
                f"vs_ort = time / onnxruntime's at {threads} thread(s), same export; max_err vs PyTorch)", rows,
                _bench_onnx.COLUMNS)
    if args.json:
        write_text(args.json, json.dumps({"environment": env, "onnx": rows}, indent=2))
        print(f"\nwrote {args.json}")
    return 0


def distributed_bench(args, env: dict) -> int:
    """``--distributed``: 1-rank vs 2-rank throughput of each recipe (fresh mpiexec jobs), scaling efficiency."""
    import bench_distributed

    rows = []
    for recipe in [r for r in args.recipe.split(",") if r]:
        rows += bench_distributed.run(recipe, args.data, args.epochs, BATCH, args.train_size)
    print_table(f"data-parallel training on {env['cores']} cores (batch {BATCH} per rank, samples/s over epochs "
                f"2..{args.epochs}; each rank has cores/2 threads; efficiency = speedup / ranks)", rows,
                bench_distributed.COLUMNS)
    if args.json:
        write_text(args.json, json.dumps({"environment": env, "distributed": rows}, indent=2))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
