"""What ``bench.py`` and ``bench_distributed.py`` share: the data and the magmadnn model of a bench recipe."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mnist"
BATCH, LR, MOMENTUM = 64, 0.05, 0.9


def load_data(path: str | None, n_train: int = 8000, n_test: int = 2000, seed: int = 0):
    """MNIST test set split 8,000 / 2,000 when a folder has it, otherwise generated data of the same shape."""
    folder = Path(path) if path else DEFAULT_DATA
    if (folder / "t10k-images-idx3-ubyte.gz").exists() or (folder / "t10k-images-idx3-ubyte").exists():
        from magmadnn.data import load_mnist

        (x_tr, y_tr), (x_te, y_te) = load_mnist(str(folder))
        return x_tr.astype(np.float32), y_tr, x_te.astype(np.float32), y_te, f"MNIST ({folder.name})"
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(10, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, n_train + n_test)
    x = (protos[y] + rng.normal(scale=1.0, size=(len(y), 1, 28, 28))).astype(np.float32)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:], "generated"


def magmadnn_model(recipe: str, seed: int, device: str = "host"):
    from magmadnn import zoo
    from magmadnn.optimizers import SGD

    if recipe == "row_lstm":  # MNIST rows, 28 steps of 28 pixels
        model = zoo.lstm_classifier((28, 28), 10, units=128)
    else:
        model = zoo.mlp(hidden=(512, 256)) if recipe == "mlp" else zoo.lenet5()
    model.compile(optimizer=SGD(LR, momentum=MOMENTUM), loss="cross_entropy", metrics=["accuracy"], seed=seed,
                  device=device)
    return model
