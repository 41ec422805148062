"""Shared helpers of the dataset loaders: scaling to float32 and the test-set-only split."""

from __future__ import annotations

import numpy as np

from .. import _checks
from .errors import DatasetError

Split = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
TEST_ONLY_TRAIN_FRACTION = 0.8


def to_float(images: np.ndarray, scale: float = 255.0) -> np.ndarray:
    """uint8 images -> float32 in [0, 1]."""
    return (images.astype(np.float32) / np.float32(scale)).astype(np.float32, copy=False)


def check_split(n_train, name: str, who: str) -> None:
    """``n_train`` is a training fraction (a float in (0, 1)) or a sample count (an int >= 1)."""
    if isinstance(n_train, (float, np.floating)):
        if not 0.0 < n_train < 1.0:
            raise ValueError(f"{who}: {name}={n_train!r} as a float is the training fraction and must lie in (0, 1); "
                             "pass an int for a sample count")
    else:
        _checks.integer(n_train, name, who, minimum=1)


def split_test_set(x: np.ndarray, y: np.ndarray, n_train: int | float = TEST_ONLY_TRAIN_FRACTION) -> Split:
    """Split one labelled set in order: the first `n_train` samples to train, the rest to test.

    `n_train` is a count, or a fraction of the samples when below 1 (0.8 of the 10,000-image MNIST test set
    gives 8,000 to train and 2,000 to test). The order is kept, so the split is reproducible.
    """
    if len(x) != len(y):
        raise DatasetError(f"split_test_set: {len(x)} samples but {len(y)} labels")
    check_split(n_train, "n_train", "split_test_set")
    count = int(round(n_train * len(x))) if isinstance(n_train, (float, np.floating)) else int(n_train)
    if not 0 < count < len(x):
        raise DatasetError(
            f"split_test_set: n_train={n_train} leaves no sample on one side of {len(x)}; expected 0 < count < {len(x)}"
        )
    return (x[:count], y[:count]), (x[count:], y[count:])
