"""The errors of ONNX import and export."""

from __future__ import annotations

from ..saving import ModelFileError

__all__ = ["OnnxImportError", "UnsupportedOnnxError", "OnnxExportError", "MISSING_ONNX"]

MISSING_ONNX = ("ONNX support needs the onnx package (and onnxruntime to run the files elsewhere): "
                "pip install 'magmadnn[onnx]'")


class OnnxImportError(ModelFileError):
    """An ONNX file that cannot become a magmadnn model: missing, truncated, malformed or failing onnx.checker."""


class UnsupportedOnnxError(OnnxImportError):
    """A valid ONNX file with an operator, attribute or dynamic shape magmadnn has no form for; the message names
    the node, its op type and what is supported."""


class OnnxExportError(ValueError):
    """A model that cannot be written as ONNX (a layer with no ONNX form, an opset too old for one of them)."""
