"""The embedded default dataset: the 1,797 8x8 handwritten digits, shipped with magmadnn (no network, no extra).

The images and labels are those of the UCI "Optical Recognition of Handwritten Digits" test set as scikit-learn
bundles them (``sklearn.datasets.load_digits``), stored once as ``digits.npz`` (uint8 grey levels 0..16 and labels,
in scikit-learn's order; CC BY 4.0, Alpaydin and Kaynak, 1998).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from .splits import split_test_set


def _raw() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 images (uint8, 8x8, grey levels 0..16) and labels, in scikit-learn's order."""
    with resources.files(__package__).joinpath("digits.npz").open("rb") as file, np.load(file) as archive:
        return archive["images"], archive["labels"]


def load_digits(test_fraction: float = 0.2, seed: int = 0):
    """The 1,797 8x8 digits of scikit-learn's ``load_digits`` as ``((x_train, y_train), (x_test, y_test))``.

    Images are float32 (N, 1, 8, 8) in [0, 1] (the 0..16 grey levels divided by 16), labels int64. The samples
    are shuffled once with `seed`, then the last `test_fraction` of them form the test set. The data ships with
    magmadnn: the core install needs neither scikit-learn nor a network.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must lie in (0, 1), got {test_fraction}")
    images, labels = _raw()
    x = (images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    y = labels.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    return split_test_set(x[order], y[order], n_train=1.0 - test_fraction)
