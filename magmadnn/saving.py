"""Model files: named NumPy arrays plus a JSON metadata document, never pickle.

Two containers, chosen by the file extension:

* ``.safetensors`` (needs the ``safetensors`` package, extra ``io``): the JSON goes into the header metadata under
  the key ``magmadnn``.
* ``.npz``: a plain ``numpy.savez`` archive read back with ``allow_pickle=False``; the JSON is stored as UTF-8 bytes
  in the uint8 array ``__magmadnn__``.

Writes are atomic (:mod:`magmadnn._atomic`): the file is written under a temporary name in the same directory,
flushed to disk, then moved over the destination with ``os.replace``, so a crash or a full disk never leaves a
half-written model or checkpoint, nor damages the file that was there.

The model code (``magmadnn.models``) decides what the arrays and the metadata hold; this module only stores them and
raises :class:`ModelFileError` for a file that is missing, damaged or not written by magmadnn, and
:class:`ArchitectureMismatchError` (raised by the model code) when a file belongs to another architecture.
"""

from __future__ import annotations

import io
import json
import os
import struct

import numpy as np

from ._atomic import write_bytes

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "ModelFileError", "ArchitectureMismatchError", "write_file", "read_file",
    "container_for",
]

FORMAT_NAME = "magmadnn"
FORMAT_VERSION = 1
_NPZ_META_KEY = "__magmadnn__"
_SAFETENSORS_META_KEY = "magmadnn"


class ModelFileError(ValueError):
    """A model or checkpoint file that cannot be read: missing, truncated, or not a magmadnn file."""


class ArchitectureMismatchError(ValueError):
    """A model file whose architecture or weight shapes differ from the model it is loaded into."""


def container_for(path) -> str:
    """``"safetensors"`` or ``"npz"`` from the extension of ``path``; ValueError for anything else."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext == ".safetensors":
        return "safetensors"
    if ext == ".npz":
        return "npz"
    hint = "; ONNX files are written by model.export and read by magmadnn.onnx.load" if ext == ".onnx" else ""
    raise ValueError(f"model files must end in '.safetensors' or '.npz', got {os.fspath(path)!r}{hint}")


def _safetensors_numpy():
    try:
        import safetensors.numpy as st_numpy
    except ImportError:
        raise ImportError("writing or reading '.safetensors' files needs the 'safetensors' package "
                          "(pip install safetensors, or the 'io' extra); use a '.npz' path instead") from None
    return st_numpy


def _encode(tensors: dict, metadata: dict, container: str) -> bytes:
    arrays = {}
    for key, value in tensors.items():
        array = np.ascontiguousarray(value).reshape(np.shape(value))  # keeps 0-d weights 0-d
        if array.dtype == object:
            raise TypeError(f"array {key!r} has dtype object; model files hold numeric arrays only")
        arrays[key] = array
    text = json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, **metadata}, sort_keys=True)
    if container == "safetensors":
        return _safetensors_numpy().save(arrays, metadata={_SAFETENSORS_META_KEY: text})
    if _NPZ_META_KEY in arrays:
        raise ValueError(f"array name {_NPZ_META_KEY!r} is reserved")
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, **{_NPZ_META_KEY: np.frombuffer(text.encode("utf-8"), dtype=np.uint8)})
    return buffer.getvalue()


def write_file(path, tensors: dict, metadata: dict) -> str:
    """Atomically write ``tensors`` (name -> NumPy array) and the JSON-able ``metadata`` dict to ``path``."""
    path = os.fspath(path)
    payload = _encode(tensors, metadata, container_for(path))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return write_bytes(path, payload)


def _read_safetensors(path, data: bytes):
    if len(data) < 8:
        raise ModelFileError(f"{path!r} is truncated: {len(data)} bytes, no safetensors header")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise ModelFileError(f"{path!r} is truncated: header needs {header_len} bytes, file has {len(data) - 8}")
    try:
        header = json.loads(data[8:8 + header_len])
        tensors = _safetensors_numpy().load(data)
    except Exception as exc:  # the Rust reader raises its own SafetensorError type
        raise ModelFileError(f"{path!r} is not a valid safetensors file: {exc}") from None
    text = (header.get("__metadata__") or {}).get(_SAFETENSORS_META_KEY)
    return tensors, text


def _read_npz(path, data: bytes):
    if not data.startswith(b"PK"):  # np.load would try .npy, then pickle, on anything that is not a zip archive
        raise ModelFileError(f"{path!r} is not a valid .npz archive: it does not start with a zip signature "
                             f"({len(data)} bytes, first {data[:4]!r})")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            tensors = {key: archive[key] for key in archive.files}
    except ValueError as exc:
        raise ModelFileError(f"{path!r} holds object arrays (pickled data), which magmadnn never loads: {exc}") \
            from None
    except Exception as exc:  # zipfile.BadZipFile, EOFError, OSError on damaged archives
        raise ModelFileError(f"{path!r} is not a valid .npz archive: {type(exc).__name__}: {exc}") from None
    meta = tensors.pop(_NPZ_META_KEY, None)
    text = None if meta is None else meta.tobytes().decode("utf-8", errors="replace")
    return tensors, text


def read_file(path) -> tuple[dict, dict]:
    """Read ``(tensors, metadata)`` back from a file written by :func:`write_file`."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a folder, not a model file: give the .safetensors or .npz file inside "
                                "it")
    container = container_for(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file {path!r} does not exist")
    with open(path, "rb") as f:
        data = f.read()
    tensors, text = (_read_safetensors if container == "safetensors" else _read_npz)(path, data)
    if text is None:
        raise ModelFileError(f"{path!r} has no magmadnn metadata: it was not written by magmadnn")
    try:
        metadata = json.loads(text)
    except ValueError as exc:
        raise ModelFileError(f"{path!r} has damaged magmadnn metadata: {exc}") from None
    if not isinstance(metadata, dict):
        raise ModelFileError(f"{path!r} has damaged magmadnn metadata: a JSON {type(metadata).__name__}, not an "
                             "object")
    if metadata.get("format") != FORMAT_NAME or not isinstance(metadata.get("version"), int):
        raise ModelFileError(f"{path!r} is not a magmadnn model file (format tag {metadata.get('format')!r})")
    if metadata["version"] > FORMAT_VERSION:
        raise ModelFileError(f"{path!r} uses format version {metadata['version']}; this magmadnn reads up to "
                             f"{FORMAT_VERSION}")
    return tensors, metadata
