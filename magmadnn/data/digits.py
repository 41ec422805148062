"""The embedded default dataset: scikit-learn's bundled handwritten digits (no network needed)."""

from __future__ import annotations

import numpy as np

from .splits import split_test_set

INSTALL_HINT = "pip install 'magmadnn[examples]'"


def load_digits(test_fraction: float = 0.2, seed: int = 0):
    """The 1,797 8x8 digits of scikit-learn's ``load_digits`` as ``((x_train, y_train), (x_test, y_test))``.

    Images are float32 (N, 1, 8, 8) in [0, 1] (the 0..16 grey levels divided by 16), labels int64. The samples
    are shuffled once with `seed`, then the last `test_fraction` of them form the test set.
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as exc:
        raise ImportError(f"load_digits needs scikit-learn, which ships the data: {INSTALL_HINT}") from exc
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must lie in (0, 1), got {test_fraction}")
    bunch = sklearn_digits()
    x = (bunch.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    y = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    return split_test_set(x[order], y[order], n_train=1.0 - test_fraction)
