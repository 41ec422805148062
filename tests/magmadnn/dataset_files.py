"""Writers of tiny dataset files for the data, download and example tests, written plainly from the formats'
descriptions (independent of magmadnn.data)."""

from __future__ import annotations

import gzip
import struct

import numpy as np

IDX_TYPE = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D, np.float64: 0x0E}


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX encoding: 0, 0, type code, ndim, one big-endian uint32 per dimension, big-endian values."""
    header = bytes([0, 0, IDX_TYPE[array.dtype.type], array.ndim])
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_idx(path, array, compress=True):
    raw = idx_bytes(array)
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def write_mnist_folder(folder, n_train, n_test, seed=0, compress=True, with_train=True, side=28):
    """Random MNIST-format files in `folder`; returns {"train"/"t10k": (uint8 images, uint8 labels)}."""
    rng = np.random.default_rng(seed)
    arrays = {}
    suffix = ".gz" if compress else ""
    sets = [("t10k", n_test)] + ([("train", n_train)] if with_train else [])
    for prefix, n in sets:
        images = rng.integers(0, 256, size=(n, side, side), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)
        arrays[prefix] = (images, labels)
    return arrays


def cifar_records(images: np.ndarray, labels: list[np.ndarray]) -> bytes:
    """CIFAR binary records: the label byte(s) of each image, then its 3,072 channel-major pixels."""
    out = bytearray()
    for i, image in enumerate(images):
        out += bytes(int(lab[i]) for lab in labels)
        out += image.tobytes()
    return bytes(out)


def write_cifar10_folder(folder, per_batch, n_test, seed=0):
    """Random CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin) in `folder`."""
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for name, n in zip(names, [per_batch] * 5 + [n_test]):
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        (folder / name).write_bytes(cifar_records(images, [rng.integers(0, 10, size=n)]))


def write_cifar100_folder(folder, n_train, n_test, seed=0):
    """Random CIFAR-100 binary files (train.bin, test.bin) with coarse and fine labels in `folder`."""
    rng = np.random.default_rng(seed)
    for name, n in (("train.bin", n_train), ("test.bin", n_test)):
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        labels = [rng.integers(0, 20, size=n), rng.integers(0, 100, size=n)]
        (folder / name).write_bytes(cifar_records(images, labels))
