"""Run by the mpi tests under ``mpiexec -n N python _mpi_worker.py MODE OUT [args]`` (also usable by one process).

train OUT N B EPOCHS [DEVICE] [SPEC]: fit(distributed=True) a small MLP on N seeded samples, per-rank batch B; rank 0
  writes the per-batch losses, the epoch logs and the final weights to OUT (npz). SPEC (comma-separated, see
  ``options``): ``bn`` trains a conv + dense net with two BatchNorm layers instead, ``sync_bn``, ``bucket=MiB``,
  ``overlap``, ``cuda_aware`` choose the distributed Options; rank 0 also writes ``stats()`` figures.
tune OUT: grid_search (parallel="auto": over the ranks) of tune_build; rank 0 writes the table and best weights.
resume OUT DIR: 1 epoch with a ModelCheckpoint into DIR (rank 0 writes), then every rank loads it into a fresh model
  and trains epoch 2; rank 0 writes the final weights and the files DIR holds to OUT.
fault OUT: rank 1 raises while rank 0 waits in a collective.  kill OUT: rank 1 kills itself (SIGKILL) instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys

import numpy as np


def mpiexec() -> str | None:
    """The mpiexec next to this Python (a venv with the ``mpi`` extra), else the one on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def problem(n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    y = (x[:, :3].sum(axis=1) > 0).astype(np.int64) + (x[:, 3] > 1).astype(np.int64)
    x_val = rng.normal(size=(11, 6))
    y_val = (x_val[:, :3].sum(axis=1) > 0).astype(np.int64)
    return x, y, x_val, y_val


def build(device="host"):
    import magmadnn as mdnn
    from magmadnn import layers

    model = mdnn.Sequential([layers.Input((6,)), layers.Dense(8, activation="tanh"), layers.Dense(3)],
                            seed=11, dtype="float64", device=device)
    model.compile(optimizer=mdnn.optimizers.Adam(0.05), loss="cross_entropy", metrics=["accuracy"])
    return model


def bn_problem(n: int, seed: int = 5):
    """Images (n, 2, 4, 4) with a class from their mean brightness and a non-zero mean (batch statistics matter)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(loc=0.7, scale=1.5, size=(n, 2, 4, 4))
    y = np.digitize(x[:, 0].mean(axis=(1, 2)), [0.4, 1.0]).astype(np.int64)
    x_val = rng.normal(loc=0.7, scale=1.5, size=(9, 2, 4, 4))
    return x, y, x_val, np.digitize(x_val[:, 0].mean(axis=(1, 2)), [0.4, 1.0]).astype(np.int64)


def build_bn(device="host"):
    """Conv -> BatchNorm (4-D) -> tanh -> Flatten -> Dense -> BatchNorm (2-D) -> tanh -> Dense(3)."""
    import magmadnn as mdnn
    from magmadnn import layers

    model = mdnn.Sequential([layers.Input((2, 4, 4)), layers.Conv2D(3, 3, padding="same"), layers.BatchNorm(0.8),
                             layers.Activation("tanh"), layers.Flatten(), layers.Dense(8), layers.BatchNorm(0.7),
                             layers.Activation("tanh"), layers.Dense(3)], seed=13, dtype="float64", device=device)
    model.compile(optimizer=mdnn.optimizers.SGD(0.1, momentum=0.9), loss="cross_entropy", metrics=["accuracy"])
    return model


def options(spec: str):
    """``distributed`` for fit from a SPEC string: True when it names no option, else an Options."""
    from magmadnn import distributed as dist

    words = [w for w in spec.split(",") if w and w != "bn"]
    if not words:
        return True
    kwargs = {}
    for word in words:
        key, _, value = word.partition("=")
        if key == "sync_bn":
            kwargs["sync_batchnorm"] = True
        elif key == "bucket":
            kwargs["bucket_mb"] = float(value)
        elif key in ("overlap", "cuda_aware"):
            kwargs[key] = True
        else:
            raise SystemExit(f"unknown option {word!r}")
    return dist.Options(**kwargs)


class BatchLosses:
    """Callback recording the loss of every batch (host backend: fit puts it in the batch logs)."""

    def __new__(cls):
        from magmadnn.callbacks import Callback

        class _Rec(Callback):
            def __init__(self):
                self.losses = []

            def on_batch_end(self, batch, logs=None):
                if "loss" in logs:  # the host backend only
                    self.losses.append(logs["loss"])

        return _Rec()


def tune_build(params, seed):
    """A search's build_fn: hidden width and learning rate from params; ``fail=True`` raises (a failing trial)."""
    import magmadnn as mdnn
    from magmadnn import layers

    if params.get("fail"):
        raise RuntimeError("this configuration fails on purpose")
    model = mdnn.Sequential([layers.Input((6,)), layers.Dense(params["units"], activation="tanh"), layers.Dense(3)],
                            seed=seed, dtype="float64", device="host")
    model.compile(optimizer=mdnn.optimizers.Adam(params["lr"]), loss="cross_entropy", metrics=["accuracy"])
    return model


TUNE_GRID = {"units": [4, 8], "lr": [0.01, 0.1], "fail": [False, True]}


def tune(out, parallel="auto", workers=None):
    from magmadnn import tuning

    x, y, x_val, y_val = problem(24)
    result = tuning.grid_search(tune_build, TUNE_GRID, ((x, y), (x_val, y_val)), fit_kwargs={"batch_size": 8,
                                "epochs": 2}, seed=7, parallel=parallel, workers=workers)
    from magmadnn import distributed as dist

    if parallel != "mpi" or dist.rank() == 0:
        np.savez(out, index=[t.index for t in result.trials], seed=[t.seed for t in result.trials],
                 failed=[t.error is not None for t in result.trials],
                 val_loss=[t.metrics.get("val_loss", np.nan) for t in result.trials],
                 **{f"w{i}": w for i, w in enumerate(result.best_weights)})
    return result


def train(out, n, b, epochs, distributed=True, device="host", spec=""):
    bn = "bn" in spec.split(",")
    x, y, x_val, y_val = (bn_problem if bn else problem)(n)
    model = (build_bn if bn else build)(device)
    rec = BatchLosses()
    if distributed:
        distributed = options(spec)
    history = model.fit(x, y, batch_size=b, epochs=epochs, validation_data=(x_val, y_val), callbacks=[rec],
                        verbose=0, distributed=distributed)
    from magmadnn import distributed as dist

    if not distributed or dist.rank() == 0:
        logs = {f"log_{k}": np.array(v) for k, v in history.history.items()}
        figures = {f"stat_{k}": v for k, v in dist.stats().items()} if distributed else {}
        np.savez(out, batch_losses=np.array(rec.losses), **logs, **figures,
                 **{f"w{i}": w for i, w in enumerate(model.get_weights())})


def resume(out, folder, n=22, b=4):
    from magmadnn import distributed as dist
    from magmadnn.callbacks import ModelCheckpoint

    x, y, x_val, y_val = problem(n)
    world = dist.init()
    path = os.path.join(folder, "ckpt.npz")
    build().fit(x, y, batch_size=b, epochs=1, verbose=0, distributed=True, callbacks=[ModelCheckpoint(path)])
    world.Barrier()
    files = sorted(os.listdir(folder))
    model = build()
    start = model.load_checkpoint(path)
    model.fit(x, y, batch_size=b, epochs=2, initial_epoch=start, verbose=0, distributed=True)
    if world.Get_rank() == 0:
        np.savez(out, files=np.array(files), start=start, **{f"w{i}": w for i, w in enumerate(model.get_weights())})


def fault(out, kill: bool):
    from magmadnn import distributed as dist

    world = dist.init()
    if world.Get_rank() == 1:
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("boom on rank 1")
    world.Barrier()  # never completes: rank 1 is gone
    open(out, "w").write("rank 0 passed the barrier\n")


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "train":
        train(out, *map(int, sys.argv[3:6]), device=sys.argv[6] if len(sys.argv) > 6 else "host",
              spec=sys.argv[7] if len(sys.argv) > 7 else "")
    elif mode == "tune":
        tune(out, "mpi")
    elif mode == "resume":
        resume(out, sys.argv[3])
    elif mode in ("fault", "kill"):
        fault(out, mode == "kill")
    else:
        raise SystemExit(f"unknown mode {mode!r}")
