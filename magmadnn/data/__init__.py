"""Datasets and batching: MNIST / Fashion-MNIST (IDX), CIFAR-10/100 (binary), the embedded digits, DataLoader.

Every ``load_*`` returns ``((x_train, y_train), (x_test, y_test))`` with float32 NCHW images in [0, 1] and int64
labels. ``LengthBuckets`` / ``pad_to_multiple`` batch sequences of any length into few shapes. Bad files raise
`DatasetError`, checksum mismatches `ChecksumError` (both ValueError subclasses).
"""

from .buckets import LengthBuckets, pad_to_multiple
from .cifar import load_cifar10, load_cifar100, read_cifar_bin
from .digits import load_digits
from .download import Resource, cache_dir, fetch
from .errors import ChecksumError, DatasetError
from .idx import has_mnist, load_mnist, mnist_dir, parse_idx, read_idx
from .loader import DataLoader
from .splits import split_test_set


def load_fashion_mnist(path=None, download=False, cache_dir=None, test_only_split=0.8):
    """Fashion-MNIST: `load_mnist` with ``kind="fashion"``."""
    return load_mnist(path, "fashion", download, cache_dir, test_only_split)


__all__ = [
    "ChecksumError",
    "DataLoader",
    "DatasetError",
    "LengthBuckets",
    "Resource",
    "cache_dir",
    "fetch",
    "has_mnist",
    "load_cifar10",
    "load_cifar100",
    "load_digits",
    "load_fashion_mnist",
    "load_mnist",
    "mnist_dir",
    "pad_to_multiple",
    "parse_idx",
    "read_cifar_bin",
    "read_idx",
    "split_test_set",
]
