"""The onnx package (imported on first use) and the checked reading of an ONNX file."""

from __future__ import annotations

import os

from .errors import MISSING_ONNX, OnnxImportError, UnsupportedOnnxError

__all__ = ["onnx", "read", "default_opset"]


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
        raise OnnxImportError(f"{path!r} is not a readable ONNX file (truncated or damaged?): "
                              f"{type(exc).__name__}: {exc}") from None
    if not proto.graph.node and not proto.graph.output:
        raise OnnxImportError(f"{path!r} holds no ONNX graph (empty, truncated or not an ONNX file)")
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
