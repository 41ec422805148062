"""Reader for the IDX format of MNIST and Fashion-MNIST (gzip-compressed or raw).

An IDX file is: two zero bytes, a type code, the number of dimensions, one big-endian uint32 per dimension,
then the values in C order (big-endian for multi-byte types).
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from .errors import DatasetError

# IDX type code -> big-endian NumPy dtype.
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, decompressed when it is gzip (detected by its magic, not its name)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: corrupt or truncated gzip data ({exc})") from None


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode IDX bytes into a native-endian NumPy array; `source` names the file in error messages."""
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in IDX_DTYPES:
        raise DatasetError(
            f"{source}: not an IDX file: expected magic 00 00 <type in {sorted(IDX_DTYPES)}> <ndim>, "
            f"got {data[:4].hex(' ') or 'an empty file'}"
        )
    dtype, ndim = IDX_DTYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{source}: truncated IDX header: expected {header} bytes for {ndim} dims, got {len(data)}")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = header + math.prod(shape) * dtype.itemsize  # Python ints: huge dimensions cannot overflow
    if len(data) != expected:
        kind = "truncated" if len(data) < expected else "trailing bytes in"
        raise DatasetError(
            f"{source}: {kind} IDX file: shape {shape} of {dtype.name} needs {expected} bytes, got {len(data)}"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (``.gz`` or raw) into a NumPy array of its stored type and shape."""
    return parse_idx(read_bytes(path), str(path))


def find_file(directory: Path, name: str) -> Path | None:
    """``name.gz`` or raw ``name`` in `directory` (also the ``name.idx3-ubyte`` spelling some mirrors use)."""
    variants = (name + ".gz", name, name.replace("-idx", ".idx") + ".gz", name.replace("-idx", ".idx"))
    for variant in variants:
        candidate = directory / variant
        if candidate.is_file():
            return candidate
    return None


def read_image_label_pair(images_path: Path, labels_path: Path, num_classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 1, H, W) uint8 and labels (N,) int64 from an IDX pair, checked against each other."""
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DatasetError(
            f"{images_path}: expected uint8 images of shape (N, H, W), got {images.dtype} {images.shape}"
        )
    if labels.ndim != 1:
        raise DatasetError(f"{labels_path}: expected labels of shape (N,), got {labels.shape}")
    if len(images) != len(labels):
        raise DatasetError(
            f"{labels_path}: label count {len(labels)} does not match the {len(images)} images in {images_path}"
        )
    if labels.dtype.kind not in "iu":
        raise DatasetError(f"{labels_path}: labels must be integers, got IDX type {labels.dtype} (float labels are "
                           "not truncated to class indices)")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise DatasetError(
            f"{labels_path}: labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]"
        )
    return images[:, None, :, :], labels


MNIST_KINDS = {"mnist": "mnist", "fashion": "fashion-mnist"}
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def mnist_dir(kind: str = "mnist", cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder of MNIST (``<cache>/mnist``) or Fashion-MNIST (``<cache>/fashion-mnist``)."""
    from .download import cache_dir as data_cache

    if kind not in MNIST_KINDS:
        raise ValueError(f"load_mnist: kind must be one of {sorted(MNIST_KINDS)}, got {kind!r}")
    return data_cache(cache_dir) / MNIST_KINDS[kind]


def has_mnist(directory: str | os.PathLike) -> bool:
    """True when `directory` holds at least the MNIST-format test images and labels."""
    directory = Path(directory)
    return all(find_file(directory, MNIST_FILES[key]) for key in ("test_images", "test_labels"))


def load_mnist(
    path: str | os.PathLike | None = None,
    kind: str = "mnist",
    download: bool = False,
    cache_dir: str | os.PathLike | None = None,
    test_only_split: int | float = 0.8,
):
    """MNIST or Fashion-MNIST as ``((x_train, y_train), (x_test, y_test))``.

    Images are float32 in [0, 1] of shape (N, 1, 28, 28), labels int64. Files are read from `path`
    (``.gz`` or raw IDX), else from the cache folder (see `mnist_dir`); with ``download=True`` missing files are
    fetched from the public mirrors and verified. A folder that holds only the test set (``t10k-*``) is split
    with `split_test_set`: by default the first 8,000 of its 10,000 images train and the last 2,000 test.
    """
    from .download import RESOURCES, fetch
    from .splits import check_split, split_test_set, to_float

    if kind not in MNIST_KINDS:
        raise ValueError(f"load_mnist: kind must be one of {sorted(MNIST_KINDS)}, got {kind!r}")
    check_split(test_only_split, "test_only_split", "load_mnist")
    directory = Path(path) if path is not None else mnist_dir(kind, cache_dir)
    if download:
        for stem in MNIST_FILES.values():
            if find_file(directory, stem) is None:
                fetch(RESOURCES[kind][stem + ".gz"], directory)
    found = {key: find_file(directory, stem) for key, stem in MNIST_FILES.items()}
    if found["test_images"] is None or found["test_labels"] is None:
        wanted = ", ".join(f"{stem}[.gz]" for stem in MNIST_FILES.values())
        raise DatasetError(
            f"{directory}: no {kind} IDX files found; expected {wanted} (at least the t10k pair); "
            "pass the folder that holds them or download=True"
        )
    test = read_image_label_pair(found["test_images"], found["test_labels"])
    if found["train_images"] is None:
        (x_train, y_train), (x_test, y_test) = split_test_set(*test, n_train=test_only_split)
    else:
        if found["train_labels"] is None:
            raise DatasetError(f"{directory}: {found['train_images'].name} has no {MNIST_FILES['train_labels']}[.gz]")
        x_train, y_train = read_image_label_pair(found["train_images"], found["train_labels"])
        x_test, y_test = test
    return (to_float(x_train), y_train), (to_float(x_test), y_test)
