"""Reader for the binary ("suitable for C programs") versions of CIFAR-10 and CIFAR-100.

Each record is the label byte(s) followed by 3,072 pixel bytes: 1,024 red, 1,024 green, 1,024 blue, row-major
32x32, which is exactly one (3, 32, 32) NCHW image. CIFAR-10 has one label byte; CIFAR-100 has two
(coarse label, then fine label).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DatasetError

IMAGE_SHAPE = (3, 32, 32)
IMAGE_BYTES = 3 * 32 * 32


@dataclass(frozen=True)
class CifarLayout:
    """Where a CIFAR variant keeps its files and how its records are laid out."""

    key: str
    archive: str
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    label_bytes: int
    num_classes: dict[str, int]


CIFAR10 = CifarLayout(
    "cifar10",
    "cifar-10-binary.tar.gz",
    "cifar-10-batches-bin",
    tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
    "test_batch.bin",
    1,
    {"fine": 10},
)
CIFAR100 = CifarLayout(
    "cifar100",
    "cifar-100-binary.tar.gz",
    "cifar-100-binary",
    ("train.bin",),
    "test.bin",
    2,
    {"coarse": 20, "fine": 100},
)


def read_cifar_bin(
    path: str | os.PathLike, label_bytes: int = 1, label_index: int = 0, num_classes: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64 from one CIFAR binary file.

    `label_index` picks which of the `label_bytes` label bytes to return (CIFAR-100: 0 coarse, 1 fine).
    """
    path = Path(path)
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None
    record = label_bytes + IMAGE_BYTES
    if raw.size == 0 or raw.size % record:
        raise DatasetError(
            f"{path}: truncated or not a CIFAR binary file: size {raw.size} bytes is not a positive multiple of "
            f"the {record}-byte record ({label_bytes} label byte(s) + {IMAGE_BYTES} pixels)"
        )
    records = raw.reshape(-1, record)
    labels = records[:, label_index].astype(np.int64)
    if labels.max() >= num_classes:
        bad = int(np.argmax(labels >= num_classes))
        raise DatasetError(
            f"{path}: record {bad} has label {labels[bad]}, expected a label in [0, {num_classes}) "
            "(wrong CIFAR variant or corrupt file?)"
        )
    images = records[:, label_bytes:].reshape(-1, *IMAGE_SHAPE)
    return images, labels


def _locate(directory: Path, layout: CifarLayout) -> Path:
    """The folder holding the batch files: `directory` itself or its archive sub-folder."""
    nested = directory / layout.folder
    return nested if (nested / layout.test_file).is_file() else directory


def _download(directory: Path, layout: CifarLayout) -> None:
    """Fetch and verify the archive, extract the batch files into `directory`, then drop the archive."""
    from .download import RESOURCES, extract_members, fetch

    archive = fetch(RESOURCES[layout.key][layout.archive], directory)
    names = (*layout.train_files, layout.test_file)
    extract_members(archive, {f"{layout.folder}/{name}": name for name in names}, directory)
    archive.unlink()


def load_cifar(
    layout: CifarLayout,
    path: str | os.PathLike | None = None,
    download: bool = False,
    cache_dir: str | os.PathLike | None = None,
    label_mode: str = "fine",
    test_only_split: int | float = 0.8,
):
    """Shared body of `load_cifar10` and `load_cifar100`."""
    from .download import cache_dir as data_cache
    from .splits import check_split, split_test_set, to_float

    if label_mode not in layout.num_classes:
        modes = sorted(layout.num_classes)
        raise ValueError(f"load_{layout.key}: label_mode must be one of {modes}, got {label_mode!r}")
    check_split(test_only_split, "test_only_split", f"load_{layout.key}")
    directory = Path(path) if path is not None else data_cache(cache_dir) / layout.key
    if download and not (_locate(directory, layout) / layout.test_file).is_file():
        _download(directory, layout)
    folder = _locate(directory, layout)
    if not (folder / layout.test_file).is_file():
        raise DatasetError(
            f"{directory}: no {layout.key} binary files found; expected {', '.join(layout.train_files)} and "
            f"{layout.test_file} (directly or under {layout.folder}/); pass the folder that holds them or download=True"
        )
    label_index = layout.label_bytes - 1 if label_mode == "fine" else 0

    def read(name: str) -> tuple[np.ndarray, np.ndarray]:
        return read_cifar_bin(folder / name, layout.label_bytes, label_index, layout.num_classes[label_mode])

    test = read(layout.test_file)
    present = [name for name in layout.train_files if (folder / name).is_file()]
    if not present:
        (x_train, y_train), (x_test, y_test) = split_test_set(*test, n_train=test_only_split)
    else:
        if len(present) != len(layout.train_files):
            missing = sorted(set(layout.train_files) - set(present))
            raise DatasetError(f"{folder}: training batches missing: {', '.join(missing)}")
        parts = [read(name) for name in layout.train_files]
        x_train, y_train = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        x_test, y_test = test
    return (to_float(x_train), y_train), (to_float(x_test), y_test)


def load_cifar10(path=None, download=False, cache_dir=None, test_only_split=0.8):
    """CIFAR-10 as ``((x_train, y_train), (x_test, y_test))``: float32 (N, 3, 32, 32) in [0, 1], int64 labels.

    Reads ``data_batch_1..5.bin`` and ``test_batch.bin`` from `path` (or its ``cifar-10-batches-bin``
    sub-folder), else from ``<cache>/cifar10``; ``download=True`` fetches and verifies the public archive.
    A folder with only ``test_batch.bin`` is split in order (first 80% train).
    """
    return load_cifar(CIFAR10, path, download, cache_dir, "fine", test_only_split)


def load_cifar100(path=None, download=False, cache_dir=None, label_mode="fine", test_only_split=0.8):
    """CIFAR-100 like `load_cifar10`, from ``train.bin``/``test.bin``; `label_mode` "fine" (100) or "coarse" (20)."""
    return load_cifar(CIFAR100, path, download, cache_dir, label_mode, test_only_split)
