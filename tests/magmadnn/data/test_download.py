"""Verified downloads: a local HTTP server on 127.0.0.1 and file:// URLs stand in for the public mirrors."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

from magmadnn import data
from magmadnn.data import ChecksumError, DatasetError, Resource
from magmadnn.data import download as dl
from tests.magmadnn.dataset_files import idx_bytes

PAYLOAD = bytes(range(256)) * 40


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output quiet
        pass

    def do_GET(self):
        if self.path.startswith("/cut/"):  # announce more bytes than are sent, then hang up
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[:1000])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base URL, served folder) of an HTTP server on 127.0.0.1 that serves a temporary folder."""
    root = tmp_path_factory.mktemp("served")
    handler = lambda *a, **k: _Handler(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", root
    httpd.shutdown()
    httpd.server_close()


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def serve(server, name: str, content: bytes) -> str:
    base, root = server
    (root / name).write_bytes(content)
    return base + name


def test_fetch_downloads_and_verifies(server, tmp_path):
    url = serve(server, "good.bin", PAYLOAD)
    target = dl.fetch(Resource("good.bin", (url,), sha256(PAYLOAD), md5(PAYLOAD)), tmp_path / "cache")
    assert target == tmp_path / "cache" / "good.bin"
    assert target.read_bytes() == PAYLOAD
    assert sorted(p.name for p in target.parent.iterdir()) == ["good.bin"]  # no temporary file left


def test_checksum_mismatch_leaves_nothing_in_the_cache(server, tmp_path):
    url = serve(server, "tampered.bin", PAYLOAD + b"x")
    cache = tmp_path / "cache" / "mnist"
    resource = Resource("tampered.bin", (url,), sha256(PAYLOAD))
    with pytest.raises(ChecksumError, match=rf"tampered\.bin.*nothing kept.*expected sha256 {sha256(PAYLOAD)}"):
        dl.fetch(resource, cache)
    assert not cache.exists()  # the folder this call created is gone too
    cache.mkdir(parents=True)
    (cache / "other.bin").write_bytes(b"keep me")
    with pytest.raises(ChecksumError):
        dl.fetch(resource, cache)
    assert sorted(p.name for p in cache.iterdir()) == ["other.bin"]


def test_md5_is_checked_when_published(server, tmp_path):
    url = serve(server, "md5.bin", PAYLOAD)
    with pytest.raises(ChecksumError, match="expected md5 0+, got"):
        dl.fetch(Resource("md5.bin", (url,), sha256(PAYLOAD), "0" * 32), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_download_leaves_no_partial_file(server, tmp_path):
    base, _ = server
    resource = Resource("cut.bin", (base + "cut/cut.bin",), sha256(PAYLOAD))
    with pytest.raises(DatasetError, match=r"cut\.bin: could not download.*received 1000 of 10240 bytes") as info:
        dl.fetch(resource, tmp_path / "c")
    assert not isinstance(info.value, ChecksumError)
    assert not (tmp_path / "c").exists()


def test_unreachable_mirror_falls_back_to_the_next(server, tmp_path):
    base, _ = server
    url = serve(server, "mirrored.bin", PAYLOAD)
    resource = Resource("mirrored.bin", (base + "missing/mirrored.bin", url), sha256(PAYLOAD))
    assert dl.fetch(resource, tmp_path).read_bytes() == PAYLOAD


def test_all_mirrors_failing_lists_each_and_suggests_a_local_copy(server, tmp_path):
    base, _ = server
    resource = Resource("gone.bin", (base + "a/gone.bin", base + "b/gone.bin"), sha256(PAYLOAD))
    with pytest.raises(DatasetError, match=r"a/gone\.bin: HTTP 404 .*; .*b/gone\.bin: HTTP 404 .*copy the file there"):
        dl.fetch(resource, tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_file_urls_work_and_verified_files_are_not_fetched_again(tmp_path):
    source = tmp_path / "src.bin"
    source.write_bytes(PAYLOAD)
    resource = Resource("copy.bin", (source.as_uri(),), sha256(PAYLOAD))
    target = dl.fetch(resource, tmp_path / "cache")
    source.unlink()  # the mirror disappears: the verified cached copy is enough
    mtime = target.stat().st_mtime_ns
    assert dl.fetch(resource, tmp_path / "cache") == target
    assert target.stat().st_mtime_ns == mtime


def test_a_corrupt_cached_file_is_replaced(tmp_path):
    source = tmp_path / "src.bin"
    source.write_bytes(PAYLOAD)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "copy.bin").write_bytes(b"stale")
    target = dl.fetch(Resource("copy.bin", (source.as_uri(),), sha256(PAYLOAD)), tmp_path / "cache")
    assert target.read_bytes() == PAYLOAD


def test_published_checksums_are_well_formed():
    for files in dl.RESOURCES.values():
        for name, resource in files.items():
            assert resource.filename == name and all(url.endswith("/" + name) for url in resource.urls)
            assert len(resource.sha256) == 64 and int(resource.sha256, 16) >= 0
            assert resource.md5 is None or (len(resource.md5) == 32 and int(resource.md5, 16) >= 0)
    assert set(dl.RESOURCES["mnist"]) == {
        f"{p}-{k}-idx{d}-ubyte.gz" for p in ("train", "t10k") for k, d in (("images", 3), ("labels", 1))
    }


# ------------------------------------------------------------------------------ loaders with download=True


def idx_gz(array: np.ndarray) -> bytes:
    return gzip.compress(idx_bytes(array))


def test_load_mnist_download_fills_the_cache(server, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    files = {
        "t10k-images-idx3-ubyte.gz": idx_gz(rng.integers(0, 256, (10, 28, 28), dtype=np.uint8)),
        "t10k-labels-idx1-ubyte.gz": idx_gz(rng.integers(0, 10, 10, dtype=np.uint8)),
        "train-images-idx3-ubyte.gz": idx_gz(rng.integers(0, 256, (20, 28, 28), dtype=np.uint8)),
        "train-labels-idx1-ubyte.gz": idx_gz(rng.integers(0, 10, 20, dtype=np.uint8)),
    }
    table = {n: Resource(n, (serve(server, n, blob),), sha256(blob), md5(blob)) for n, blob in files.items()}
    monkeypatch.setitem(dl.RESOURCES, "mnist", table)
    monkeypatch.setenv("MAGMADNN_DATA", str(tmp_path / "cache"))
    (x_train, _), (x_test, _) = data.load_mnist(download=True)
    assert x_train.shape == (20, 1, 28, 28) and x_test.shape == (10, 1, 28, 28)
    assert sorted(p.name for p in (tmp_path / "cache" / "mnist").iterdir()) == sorted(files)


def cifar_tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return buffer.getvalue()


def cifar10_records(n: int, rng) -> bytes:
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    return np.concatenate([labels[:, None], pixels], axis=1).tobytes()


def test_load_cifar10_download_extracts_only_the_batches(server, tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    members = {f"cifar-10-batches-bin/data_batch_{i}.bin": cifar10_records(2, rng) for i in range(1, 6)}
    members["cifar-10-batches-bin/test_batch.bin"] = cifar10_records(3, rng)
    members["../escape.bin"] = b"must never be written"
    blob = cifar_tar(members)
    name = "cifar-10-binary.tar.gz"
    monkeypatch.setitem(dl.RESOURCES, "cifar10", {name: Resource(name, (serve(server, name, blob),), sha256(blob))})
    (x_train, y_train), (x_test, _) = data.load_cifar10(download=True, cache_dir=tmp_path / "cache")
    assert x_train.shape == (10, 3, 32, 32) and x_test.shape == (3, 3, 32, 32)
    expected = np.frombuffer(members["cifar-10-batches-bin/data_batch_1.bin"], np.uint8).reshape(2, 3073)[:, 0]
    np.testing.assert_array_equal(y_train[:2], expected)
    folder = tmp_path / "cache" / "cifar10"
    assert sorted(p.name for p in folder.iterdir()) == sorted(Path(m).name for m in members if "batches" in m)
    assert not (tmp_path / "cache" / "escape.bin").exists()


def test_archive_without_expected_member_is_a_dataset_error(server, tmp_path, monkeypatch):
    blob = cifar_tar({"cifar-100-binary/train.bin": b""})
    name = "cifar-100-binary.tar.gz"
    monkeypatch.setitem(dl.RESOURCES, "cifar100", {name: Resource(name, (serve(server, name, blob),), sha256(blob))})
    with pytest.raises(DatasetError, match=r"lacks the expected member cifar-100-binary/test\.bin"):
        data.load_cifar100(download=True, cache_dir=tmp_path)
    assert not list((tmp_path / "cifar100").glob("*.part"))


def test_download_checksum_mismatch_through_a_loader(server, tmp_path, monkeypatch):
    base, _ = server
    url = serve(server, "tampered.gz", b"not what was published")
    # every file is served by the local server with bytes that do not match the published checksum
    table = {name: Resource(name, (url,), sha256(b"the published bytes")) for name in dl.RESOURCES["mnist"]}
    monkeypatch.setitem(dl.RESOURCES, "mnist", table)
    with pytest.raises(ChecksumError, match=r"-ubyte\.gz: download rejected, nothing kept"):
        data.load_mnist(download=True, cache_dir=tmp_path)
    assert not (tmp_path / "mnist").exists()
