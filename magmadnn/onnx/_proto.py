"""The onnx package (imported on first use) and the checked reading of an ONNX file."""

from __future__ import annotations

import os

from .errors import MISSING_ONNX, OnnxImportError, UnsupportedOnnxError

__all__ = ["onnx", "read", "default_opset", "check_opset", "OLDEST_OPSET"]

#: the oldest default-domain opset magmadnn imports (older operator definitions differ: BatchNormalization's
#: ``spatial``, Dropout's ``is_test``, broadcasting only with ``broadcast=1``)
OLDEST_OPSET = 7


def onnx():
    """The ``onnx`` module, or one ImportError saying what to install."""
    try:
        import onnx as module  # noqa: PLC0415
        import onnx.numpy_helper  # noqa: F401, PLC0415
    except ImportError:
        raise ImportError(MISSING_ONNX) from None
    return module


def read(path):
    """The ModelProto in ``path``, checked by ``onnx.checker`` (full check, shape inference included); any file that
    is missing, truncated, not ONNX or fails the checker is an OnnxImportError saying which and why."""
    module = onnx()
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise OnnxImportError(f"ONNX file {path!r} does not exist or is not a file")
    try:
        proto = module.load(path)
    except Exception as exc:  # noqa: BLE001 - protobuf raises many types for damaged bytes
        hint = ("; it looks like a magmadnn model file (read it with magmadnn.load_model)"
                if os.path.splitext(path)[1].lower() in (".safetensors", ".npz") else "")
        raise OnnxImportError(f"{path!r} is not a readable ONNX file (truncated or damaged?): "
                              f"{type(exc).__name__}: {exc}{hint}") from None
    if not proto.graph.node and not proto.graph.output:
        raise OnnxImportError(f"{path!r} holds no ONNX graph (empty, truncated or not an ONNX file)")
    check_opset(proto, path, module.defs.onnx_opset_version())
    try:
        module.checker.check_model(proto, full_check=True)
    except Exception as exc:  # noqa: BLE001 - the checker raises ValidationError, shape inference others
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OnnxImportError(f"{path!r} fails onnx.checker: {first}") from None
    return proto


def default_opset(proto) -> int:
    """The version of the default ("ai.onnx") operator set the model imports."""
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise UnsupportedOnnxError("the model imports no version of the default ONNX operator set (ai.onnx)")


def check_opset(proto, path, newest: int) -> int:
    """The file's default opset, or UnsupportedOnnxError when it is older than :data:`OLDEST_OPSET` or newer than the
    installed onnx package knows (``newest``, ``onnx.defs.onnx_opset_version()``): neither can be checked nor run."""
    try:
        version = default_opset(proto)
    except UnsupportedOnnxError as exc:
        raise UnsupportedOnnxError(f"{os.fspath(path)!r}: {exc}") from None
    if version > newest:
        raise UnsupportedOnnxError(f"{os.fspath(path)!r} uses ONNX opset {version}, newer than the installed onnx "
                                   f"package knows (opsets up to {newest}): upgrade onnx (pip install -U onnx), or "
                                   f"export the model with opset {OLDEST_OPSET} to {newest}")
    if version < OLDEST_OPSET:
        raise UnsupportedOnnxError(f"{os.fspath(path)!r} uses ONNX opset {version}; magmadnn imports opsets "
                                   f"{OLDEST_OPSET} to {newest}: convert it first (onnx.version_converter."
                                   f"convert_version(model, {max(OLDEST_OPSET, 13)}))")
    return version
