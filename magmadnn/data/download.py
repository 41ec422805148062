"""Verified downloads into the magmadnn data cache.

The cache directory is ``$MAGMADNN_DATA`` when set, else ``$XDG_CACHE_HOME/magmadnn`` (``~/.cache/magmadnn``).
A file is streamed into a temporary name next to its destination, hashed while it arrives, and renamed into
place only when its SHA-256 (and MD5, when published) match: a failed or mismatching download leaves nothing.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import ChecksumError, DatasetError

CHUNK = 1 << 20
TIMEOUT_S = 60


@dataclass(frozen=True)
class Resource:
    """One public file: its name, the mirrors that serve it, and its published checksums."""

    filename: str
    urls: tuple[str, ...]
    sha256: str
    md5: str | None = None


def _mirrored(mirrors: Iterable[str], files: dict[str, tuple[str, str]]) -> dict[str, Resource]:
    mirrors = tuple(mirrors)
    return {name: Resource(name, tuple(m + name for m in mirrors), sha, md5) for name, (sha, md5) in files.items()}


MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/")
FASHION_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
CIFAR_MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)

# Published checksums (sha256, md5) of the datasets' public files.
RESOURCES: dict[str, dict[str, Resource]] = {
    "mnist": _mirrored(
        MNIST_MIRRORS,
        {
            "train-images-idx3-ubyte.gz": (
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            ),
            "train-labels-idx1-ubyte.gz": (
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                "d53e105ee54ea40749a09fcbcd1e9432",
            ),
            "t10k-images-idx3-ubyte.gz": (
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                "9fb629c4189551a2d022fa330f9573f3",
            ),
            "t10k-labels-idx1-ubyte.gz": (
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                "ec29112dd5afa0611ce80d1b7f02629c",
            ),
        },
    ),
    "fashion": _mirrored(
        FASHION_MIRRORS,
        {
            "train-images-idx3-ubyte.gz": (
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            ),
            "train-labels-idx1-ubyte.gz": (
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                "25c81989df183df01b3e8a0aad5dffbe",
            ),
            "t10k-images-idx3-ubyte.gz": (
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                "bef4ecab320f06d8554ea6380940ec79",
            ),
            "t10k-labels-idx1-ubyte.gz": (
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
                "bb300cfdad3c16e7a12a480ee83cd310",
            ),
        },
    ),
    "cifar10": _mirrored(
        CIFAR_MIRRORS,
        {
            "cifar-10-binary.tar.gz": (
                "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
                "c32a1d4ab5d03f1284b67883e8d87530",
            )
        },
    ),
    "cifar100": _mirrored(
        CIFAR_MIRRORS,
        {
            "cifar-100-binary.tar.gz": (
                "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
                "03b5dce01913d631647c71ecec9e9cb8",
            )
        },
    ),
}


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The data cache: `override`, else ``$MAGMADNN_DATA``, else ``$XDG_CACHE_HOME/magmadnn`` (~/.cache/magmadnn)."""
    if override is not None:
        return Path(override).expanduser()
    if os.environ.get("MAGMADNN_DATA"):
        return Path(os.environ["MAGMADNN_DATA"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "magmadnn"


def file_digests(path: Path) -> tuple[str, str]:
    """(sha256, md5) hex digests of a file, read in chunks."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def _mismatch(resource: Resource, sha: str, md5: str) -> str | None:
    """A description of the checksum mismatch, or None when the digests match the resource."""
    if sha != resource.sha256:
        return f"expected sha256 {resource.sha256}, got {sha}"
    if resource.md5 is not None and md5 != resource.md5:
        return f"expected md5 {resource.md5}, got {md5}"
    return None


def is_verified(path: Path, resource: Resource) -> bool:
    """True when `path` exists and matches the resource's checksums."""
    return path.is_file() and _mismatch(resource, *file_digests(path)) is None


def _stream_to_temp(url: str, directory: Path, filename: str) -> tuple[Path, str, str]:
    """Download `url` into a temporary file in `directory`; return it with its sha256 and md5."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{filename}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            announced, received = response.headers.get("Content-Length"), 0
            for chunk in iter(lambda: response.read(CHUNK), b""):
                out.write(chunk)
                sha.update(chunk)
                md5.update(chunk)
                received += len(chunk)
            if announced is not None and received != int(announced):
                raise OSError(f"incomplete download: received {received} of {announced} bytes")
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp), sha.hexdigest(), md5.hexdigest()


def _describe(exc: Exception) -> str:
    """A short reason for a failed download: the HTTP status, the network reason, or the error text."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    return str(getattr(exc, "reason", None) or exc)


def fetch(resource: Resource, directory: str | os.PathLike) -> Path:
    """Return `directory`/filename, verified; download it (trying each mirror) when absent or wrong.

    Raises ChecksumError when every mirror served mismatching bytes, DatasetError when none could be reached;
    in both cases nothing is left in `directory` (not even the directory, if this call created it).
    """
    directory = Path(directory)
    target = directory / resource.filename
    if is_verified(target, resource):
        return target
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    checksum_failure = False
    for url in resource.urls:
        try:
            tmp, sha, md5 = _stream_to_temp(url, directory, resource.filename)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            failures.append(f"{url}: {_describe(exc)}")
            continue
        problem = _mismatch(resource, sha, md5)
        if problem is None:
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            return target
        tmp.unlink()
        checksum_failure = True
        failures.append(f"{url}: checksum mismatch: {problem}")
    if created:
        try:
            directory.rmdir()
        except OSError:
            pass
    detail = "; ".join(failures) or "no URL to download from"
    if checksum_failure:
        raise ChecksumError(f"{resource.filename}: download rejected, nothing kept in {directory}: {detail}")
    raise DatasetError(
        f"{resource.filename}: could not download into {directory} ({detail}); "
        "without network access, copy the file there or pass the folder that holds it"
    )


def extract_members(archive: Path, members: dict[str, str], directory: Path) -> None:
    """Extract the named regular-file `members` (archive name -> file name in `directory`), each atomically.

    Only the listed members are read, so a hostile archive cannot write outside `directory`.
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member_name, out_name in members.items():
                try:
                    info = tar.getmember(member_name)
                except KeyError:
                    raise DatasetError(f"{archive}: archive lacks the expected member {member_name}") from None
                source = tar.extractfile(info) if info.isfile() else None
                if source is None:
                    raise DatasetError(f"{archive}: member {member_name} is not a regular file")
                fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{out_name}.", suffix=".part")
                try:
                    with os.fdopen(fd, "wb") as out:
                        shutil.copyfileobj(source, out, CHUNK)
                        out.flush()
                        os.fsync(out.fileno())
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, directory / out_name)
                except BaseException:
                    os.unlink(tmp)
                    raise
    except (tarfile.TarError, EOFError) as exc:
        raise DatasetError(f"{archive}: corrupt archive ({exc})") from None
