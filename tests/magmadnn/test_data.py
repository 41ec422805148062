"""magmadnn.data: IDX and CIFAR readers, the folder loaders, DataLoader, the embedded digits, typed errors.

Every dataset file here is written by the test itself (independent writers in dataset_files.py), never real data.
"""

from __future__ import annotations

import gzip
import struct
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from magmadnn import data
from magmadnn.data import ChecksumError, DataLoader, DatasetError

from .dataset_files import IDX_TYPE, cifar_records, idx_bytes, write_idx, write_mnist_folder

# ---------------------------------------------------------------------------------------------------- IDX


@given(
    dtype=st.sampled_from(list(IDX_TYPE)),
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    compress=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_read_idx_round_trips_every_type_and_rank(tmp_path_factory, dtype, shape, compress, seed):
    rng = np.random.default_rng(seed)
    array = (rng.standard_normal(shape) * 100).astype(dtype)
    path = write_idx(tmp_path_factory.mktemp("idx") / "a.idx", array, compress)
    got = data.read_idx(path)
    assert got.shape == array.shape and got.dtype == array.dtype
    np.testing.assert_array_equal(got, array)


def test_wrong_magic_names_file_and_expected_magic(tmp_path):
    path = tmp_path / "bad-images-idx3-ubyte"
    path.write_bytes(b"\x12\x34\x08\x03" + bytes(100))
    with pytest.raises(DatasetError, match=r"bad-images-idx3-ubyte.*not an IDX file.*expected magic 00 00"):
        data.read_idx(path)


def test_unknown_type_code_is_rejected(tmp_path):
    path = tmp_path / "x.idx"
    path.write_bytes(b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(DatasetError, match="not an IDX file"):
        data.read_idx(path)


@pytest.mark.parametrize("cut", [3, 10, 100])
def test_truncated_idx_reports_needed_and_found_sizes(tmp_path, cut):
    raw = idx_bytes(np.zeros((4, 5, 5), np.uint8))
    path = tmp_path / "cut.idx"
    path.write_bytes(raw[: len(raw) - cut])
    with pytest.raises(DatasetError, match=r"cut\.idx: truncated"):
        data.read_idx(path)


def test_trailing_bytes_are_rejected(tmp_path):
    path = tmp_path / "long.idx"
    path.write_bytes(idx_bytes(np.zeros(3, np.uint8)) + b"\x00")
    with pytest.raises(DatasetError, match=r"trailing bytes.*needs 11 bytes, got 12"):
        data.read_idx(path)


def test_truncated_gzip_is_a_dataset_error(tmp_path):
    packed = gzip.compress(idx_bytes(np.arange(200, dtype=np.uint8)))
    path = tmp_path / "t.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(DatasetError, match=r"t\.gz: corrupt or truncated gzip"):
        data.read_idx(path)


def test_missing_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="file not found"):
        data.read_idx(tmp_path / "nope.gz")


# ------------------------------------------------------------------------------------------------- MNIST


@pytest.mark.parametrize("compress", [True, False])
def test_load_mnist_reads_train_and_test_scaled_nchw(tmp_path, compress):
    written = write_mnist_folder(tmp_path, n_train=12, n_test=7, compress=compress)
    (x_train, y_train), (x_test, y_test) = data.load_mnist(tmp_path)
    assert x_train.shape == (12, 1, 28, 28) and x_test.shape == (7, 1, 28, 28)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64
    np.testing.assert_allclose(x_train[:, 0], written["train"][0] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(x_test[:, 0], written["t10k"][0] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y_train, written["train"][1])
    np.testing.assert_array_equal(y_test, written["t10k"][1])


def test_test_set_only_folder_is_split_in_order(tmp_path):
    written = write_mnist_folder(tmp_path, 0, n_test=50, with_train=False)
    # A training-labels file without training images (as some mirrors ship) must not confuse the loader.
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(60, np.uint8))
    (x_train, y_train), (x_test, y_test) = data.load_mnist(tmp_path)
    assert len(x_train) == 40 and len(x_test) == 10
    np.testing.assert_array_equal(y_train, written["t10k"][1][:40])
    np.testing.assert_array_equal(y_test, written["t10k"][1][40:])
    (x_train, _), (x_test, _) = data.load_mnist(tmp_path, test_only_split=45)
    assert len(x_train) == 45 and len(x_test) == 5


def test_fashion_kind_reads_the_same_format(tmp_path):
    written = write_mnist_folder(tmp_path, 5, 5)
    (_, y_train), _ = data.load_fashion_mnist(tmp_path)
    np.testing.assert_array_equal(y_train, written["train"][1])
    with pytest.raises(ValueError, match="kind must be one of"):
        data.load_mnist(tmp_path, kind="kmnist")


def test_label_count_mismatch_names_both_files(tmp_path):
    write_mnist_folder(tmp_path, 0, 10, with_train=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.zeros(9, np.uint8))
    with pytest.raises(DatasetError, match=r"t10k-labels.*label count 9 does not match the 10 images in .*t10k-images"):
        data.load_mnist(tmp_path)


def test_label_out_of_range_is_reported(tmp_path):
    write_mnist_folder(tmp_path, 0, 4, with_train=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([1, 2, 12, 3], np.uint8))
    with pytest.raises(DatasetError, match=r"labels must lie in \[0, 10\), got \[1, 12\]"):
        data.load_mnist(tmp_path)


def test_images_of_wrong_rank_are_reported(tmp_path):
    write_mnist_folder(tmp_path, 0, 4, with_train=False)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", np.zeros((4, 784), np.uint8))
    with pytest.raises(DatasetError, match=r"expected uint8 images of shape \(N, H, W\), got uint8 \(4, 784\)"):
        data.load_mnist(tmp_path)


def test_empty_folder_says_which_files_are_expected(tmp_path):
    with pytest.raises(DatasetError, match=r"no mnist IDX files found; expected train-images-idx3-ubyte"):
        data.load_mnist(tmp_path)


def test_train_images_without_labels_is_reported(tmp_path):
    write_mnist_folder(tmp_path, 5, 5)
    (tmp_path / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetError, match="has no train-labels-idx1-ubyte"):
        data.load_mnist(tmp_path)


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MAGMADNN_DATA", str(tmp_path / "cache"))
    assert data.cache_dir() == tmp_path / "cache"
    assert data.mnist_dir("fashion") == tmp_path / "cache" / "fashion-mnist"
    write_mnist_folder(_mkdir(tmp_path / "cache" / "mnist"), 3, 3)
    (x_train, _), _ = data.load_mnist()
    assert len(x_train) == 3
    monkeypatch.delenv("MAGMADNN_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_dir() == tmp_path / "xdg" / "magmadnn"


def _mkdir(path):
    path.mkdir(parents=True)
    return path


# ------------------------------------------------------------------------------------------------- CIFAR


def test_read_cifar10_records_decode_channel_major(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(6, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, size=6)
    path = tmp_path / "test_batch.bin"
    path.write_bytes(cifar_records(images, [labels]))
    x, y = data.read_cifar_bin(path)
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, labels)
    # Channel-major: pixel (row 0, col 1) of green is byte 1 + 1024 + 1 of the first record.
    assert x[0, 1, 0, 1] == path.read_bytes()[1 + 1024 + 1]


def test_load_cifar10_folder_and_nested_folder(tmp_path):
    rng = np.random.default_rng(2)
    nested = _mkdir(tmp_path / "cifar-10-batches-bin")
    batches = []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        images = rng.integers(0, 256, size=(3, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, size=3)
        (nested / name).write_bytes(cifar_records(images, [labels]))
        batches.append((images, labels))
    (x_train, y_train), (x_test, y_test) = data.load_cifar10(tmp_path)
    assert x_train.shape == (15, 3, 32, 32) and x_test.shape == (3, 3, 32, 32) and x_train.dtype == np.float32
    np.testing.assert_array_equal(y_train, np.concatenate([b[1] for b in batches[:5]]))
    np.testing.assert_allclose(x_test, batches[5][0] / 255.0, rtol=1e-6)
    (nested / "data_batch_3.bin").unlink()
    with pytest.raises(DatasetError, match="training batches missing: data_batch_3.bin"):
        data.load_cifar10(tmp_path)


def test_load_cifar100_fine_and_coarse_labels(tmp_path):
    rng = np.random.default_rng(3)
    coarse, fine = rng.integers(0, 20, size=5), rng.integers(0, 100, size=5)
    images = rng.integers(0, 256, size=(5, 3, 32, 32), dtype=np.uint8)
    (tmp_path / "train.bin").write_bytes(cifar_records(images, [coarse, fine]))
    (tmp_path / "test.bin").write_bytes(cifar_records(images[:2], [coarse[:2], fine[:2]]))
    (_, y_fine), _ = data.load_cifar100(tmp_path)
    (_, y_coarse), _ = data.load_cifar100(tmp_path, label_mode="coarse")
    np.testing.assert_array_equal(y_fine, fine)
    np.testing.assert_array_equal(y_coarse, coarse)
    with pytest.raises(ValueError, match="label_mode must be one of"):
        data.load_cifar100(tmp_path, label_mode="medium")


def test_cifar_test_only_folder_is_split(tmp_path):
    labels = np.arange(10) % 10
    (tmp_path / "test_batch.bin").write_bytes(cifar_records(np.zeros((10, 3, 32, 32), np.uint8), [labels]))
    (_, y_train), (_, y_test) = data.load_cifar10(tmp_path)
    np.testing.assert_array_equal(y_train, labels[:8])
    np.testing.assert_array_equal(y_test, labels[8:])


@pytest.mark.parametrize("size", [0, 3073 * 2 - 5, 3073 + 1])
def test_truncated_cifar_file_names_record_size(tmp_path, size):
    path = tmp_path / "test_batch.bin"
    path.write_bytes(bytes(size))
    with pytest.raises(DatasetError, match=rf"test_batch\.bin: truncated.*size {size} bytes.*3073-byte record"):
        data.read_cifar_bin(path)


def test_cifar10_reader_rejects_cifar100_labels(tmp_path):
    path = tmp_path / "test_batch.bin"
    path.write_bytes(cifar_records(np.zeros((2, 3, 32, 32), np.uint8), [np.array([3, 57])]))
    with pytest.raises(DatasetError, match=r"record 1 has label 57, expected a label in \[0, 10\)"):
        data.read_cifar_bin(path)


def test_missing_cifar_folder_says_what_is_expected(tmp_path):
    with pytest.raises(DatasetError, match=r"no cifar10 binary files found; expected data_batch_1\.bin"):
        data.load_cifar10(tmp_path)


# --------------------------------------------------------------------------------------------- split, errors


@given(n=st.integers(2, 60), frac=st.floats(0.05, 0.95))
def test_split_test_set_keeps_order_and_every_sample(n, frac):
    x, y = np.arange(n * 2).reshape(n, 2), np.arange(n)
    count = int(round(frac * n))
    if not 0 < count < n:
        with pytest.raises(DatasetError, match="leaves no sample"):
            data.split_test_set(x, y, frac)
        return
    (xa, ya), (xb, yb) = data.split_test_set(x, y, frac)
    assert len(ya) == count
    np.testing.assert_array_equal(np.concatenate([ya, yb]), y)
    np.testing.assert_array_equal(np.concatenate([xa, xb]), x)


def test_split_test_set_rejects_mismatch_and_bad_counts():
    with pytest.raises(DatasetError, match="5 samples but 4 labels"):
        data.split_test_set(np.zeros(5), np.zeros(4))
    with pytest.raises(DatasetError, match="leaves no sample"):
        data.split_test_set(np.zeros(5), np.zeros(5), 5)


def test_error_types_are_value_errors():
    assert issubclass(DatasetError, ValueError)
    assert issubclass(ChecksumError, DatasetError)


# ------------------------------------------------------------------------------------------------ DataLoader


@given(
    n=st.integers(1, 50),
    batch_size=st.integers(1, 17),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_dataloader_batches_partition_the_samples(n, batch_size, shuffle, drop_last, seed):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n)
    loader = DataLoader(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last)
    batches = list(loader)
    assert len(batches) == len(loader)
    sizes = [len(b[1]) for b in batches]
    expected_batches = n // batch_size if drop_last else -(-n // batch_size)
    assert len(batches) == expected_batches
    assert all(s == batch_size for s in sizes[:-1])
    assert all(0 < s <= batch_size for s in sizes[-1:])
    if drop_last:
        assert all(s == batch_size for s in sizes)
    seen = np.concatenate([b[1] for b in batches]) if batches else np.array([], int)
    assert len(np.unique(seen)) == len(seen)  # no sample twice in a pass
    assert len(seen) == (n - n % batch_size if drop_last else n)
    for xb, yb in batches:
        np.testing.assert_array_equal(xb, x[yb])  # x rows stay paired with their labels
    if not shuffle:
        np.testing.assert_array_equal(seen, np.arange(len(seen)))


def test_dataloader_shuffling_is_seeded_and_changes_per_epoch():
    x = np.arange(100)
    first = [np.concatenate([b for b, _ in DataLoader(x, batch_size=10, seed=7)])]
    a, b = DataLoader(x, batch_size=10, seed=7), DataLoader(x, batch_size=10, seed=7)
    epochs_a = [np.concatenate([xb for xb, _ in a]) for _ in range(3)]
    epochs_b = [np.concatenate([xb for xb, _ in b]) for _ in range(3)]
    for ea, eb in zip(epochs_a, epochs_b):
        np.testing.assert_array_equal(ea, eb)
    np.testing.assert_array_equal(epochs_a[0], first[0])
    assert not np.array_equal(epochs_a[0], epochs_a[1])
    assert not np.array_equal(epochs_a[0], np.arange(100))
    other = np.concatenate([xb for xb, _ in DataLoader(x, batch_size=10, seed=8)])
    assert not np.array_equal(other, epochs_a[0])


def test_dataloader_rejects_bad_arguments():
    with pytest.raises(ValueError, match="x has 3 samples but y has 2"):
        DataLoader(np.zeros(3), np.zeros(2))
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="batch_size must be an integer"):
            DataLoader(np.zeros(3), batch_size=bad)


# ---------------------------------------------------------------------------------------------------- digits


def test_load_digits_is_the_sklearn_set_split_reproducibly():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    ref = sklearn_datasets.load_digits()
    (x_train, y_train), (x_test, y_test) = data.load_digits(seed=0)
    assert x_train.shape[1:] == (1, 8, 8) and len(x_train) + len(x_test) == 1797
    assert len(x_test) == 1797 - round(0.8 * 1797)
    assert x_train.dtype == np.float32 and 0.0 <= x_train.min() and x_train.max() <= 1.0
    # every sample is one of sklearn's images (scaled by 1/16) with its own label
    flat = {img.tobytes(): lab for img, lab in zip((ref.images / 16.0).astype(np.float32), ref.target)}
    for img, lab in zip(x_test[:, 0], y_test):
        assert flat[img.tobytes()] == lab
    # and every one of sklearn's samples is there once
    ours = np.concatenate([x_train, x_test])[:, 0]
    assert sorted(img.tobytes() for img in (ref.images / 16.0).astype(np.float32)) == sorted(
        img.tobytes() for img in ours)
    (x2, y2), _ = data.load_digits(seed=0)
    np.testing.assert_array_equal(y2, y_train)
    (_, y3), _ = data.load_digits(seed=1)
    assert not np.array_equal(y3, y_train)


def test_load_digits_needs_no_sklearn(monkeypatch):
    """The digits ship with magmadnn: with scikit-learn hidden the same split comes back."""
    expected = data.load_digits(seed=3)
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    got = data.load_digits(seed=3)
    for a, b in zip((*expected[0], *expected[1]), (*got[0], *got[1])):
        np.testing.assert_array_equal(a, b)
