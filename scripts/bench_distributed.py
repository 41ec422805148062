#!/usr/bin/env python3
"""``bench.py --distributed``: data-parallel training throughput on 1 rank vs 2 ranks, in one run.

Each configuration is a fresh ``mpiexec -n N`` job of this file (``--worker``) training a bench recipe with
``fit(distributed=True)`` at a fixed per-rank batch (weak scaling: 2 ranks take steps of twice the samples, each epoch
covers the same data). Every rank gets ``cores // max(ranks)`` BLAS threads in every run, so N ranks use N times
the cores of one (the usual scaling measure, free of BLAS threading effects). Throughput is over epochs 2.. (epoch 1
warms up); speedup is ``throughput(N) / throughput(1)``, scaling efficiency ``speedup / N``; Allreduce ms/step is
rank 0's time in the gradient reduction (staging copies included, and the wait for the slower rank: on a busy
machine that wait dominates).

``--bucket-mb MB|fused`` and ``--overlap`` choose the ``distributed.Options`` of every run (default: buckets of
25 MiB, no overlap; the bench recipes' gradients fit one); ``--compare-buckets MB[,MB...]`` runs the multi-rank job
again with each of those bucket sizes, one row each, so that fused and bucketed Allreduce ms/step come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from magmadnn import cli

HERE = Path(__file__).resolve().parent
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def mpiexec() -> str:
    local = Path(sys.executable).parent / "mpiexec"
    if os.access(local, os.X_OK):
        return str(local)
    import shutil

    found = shutil.which("mpiexec")
    if found is None:
        raise SystemExit("bench --distributed needs mpiexec: pip install magmadnn[mpi]")
    return found


def run(recipe: str, data: str | None, epochs: int, batch: int, train_size: int | None, ranks=(1, 2),
        timeout: float = 1200, bucket_mb: float | None = 25.0, overlap: bool = False, compare_buckets=()) -> list[dict]:
    """One row per rank count (and per size of ``compare_buckets`` for several ranks): samples/s, efficiency against
    1 rank, Allreduce ms/step, buckets, cores, threads per rank."""
    cores = os.cpu_count() or 1
    rows = []
    threads = max(1, cores // max(ranks))
    for n in ranks:
        for size in [bucket_mb, *(compare_buckets if n > 1 else ())]:
            env = {**os.environ, **dict.fromkeys(THREAD_VARS, str(threads))}
            cmd = [mpiexec(), "-n", str(n), sys.executable, str(Path(__file__).resolve()), "--worker", "--recipe",
                   recipe, "--epochs", str(epochs), "--batch", str(batch), "--bucket-mb", str(size or "fused")]
            cmd += ["--data", data] if data else []
            cmd += ["--train-size", str(train_size)] if train_size else []
            cmd += ["--overlap"] if overlap else []
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"recipe": recipe, "ranks": n, "cores": cores, "threads_per_rank": threads,
                         "bucket_mb": size, "overlap": overlap, **row})
    base = rows[0]["samples_per_s"]
    for row in rows:
        row["speedup"] = row["samples_per_s"] / base if base else float("nan")
        row["efficiency"] = row["speedup"] / row["ranks"]
    return rows


COLUMNS = ["recipe", "ranks", "cores", "threads_per_rank", "batch_per_rank", "bucket_mb", "buckets", "overlap",
           "samples_per_s", "speedup", "efficiency", "allreduce_ms_per_step", "steps_per_epoch", "val_accuracy"]


def worker(args) -> None:
    sys.path.insert(0, str(HERE))
    from _bench_common import load_data, magmadnn_model

    from magmadnn import distributed

    world = distributed.init()
    x, y, xt, yt, _ = load_data(args.data)
    if args.train_size:
        x, y = x[:args.train_size], y[:args.train_size]
    model = magmadnn_model(args.recipe, seed=0)
    times = []

    from magmadnn.callbacks import Callback

    class Clock(Callback):
        def on_epoch_begin(self, epoch, logs=None):
            world.Barrier()
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.start)

    history = model.fit(x, y, batch_size=args.batch, epochs=args.epochs, validation_data=(xt, yt), callbacks=[Clock()],
                        verbose=0, distributed=distributed.Options(bucket_mb=args.bucket_mb, overlap=args.overlap))
    steady = times[1:] or times
    figures = distributed.stats()
    if world.Get_rank() == 0:
        print(json.dumps({"batch_per_rank": args.batch, "samples_per_s": len(x) * len(steady) / sum(steady),
                          "allreduce_ms_per_step": figures["allreduce_ms_per_step"], "buckets": figures["buckets"],
                          "steps_per_epoch": figures["steps"] // args.epochs,
                          "val_accuracy": history.history["val_accuracy"][-1]}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--recipe", default="mlp", choices=("mlp", "lenet5"))
    p.add_argument("--data", default=None)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--train-size", type=int, default=None)
    p.add_argument("--bucket-mb", type=cli.bucket_mb, default=25.0, metavar="MB|fused",
                   help="gradient bucket size in MiB, or fused: one buffer (default 25)")
    p.add_argument("--overlap", action="store_true", help="start each bucket's Allreduce during the backward pass")
    p.add_argument("--compare-buckets", type=lambda t: [cli.bucket_mb(v) for v in t.split(",") if v], default=[],
                   metavar="MB[,MB...]", help="also run the multi-rank job with each of these bucket sizes")
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
    else:
        for row in run(args.recipe, args.data, args.epochs, args.batch, args.train_size, bucket_mb=args.bucket_mb,
                       overlap=args.overlap, compare_buckets=args.compare_buckets):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
