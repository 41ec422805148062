"""ONNX in and out: ``magmadnn.onnx.load("m.onnx", device=...)`` builds a Model from an ONNX file (written by
``torch.onnx.export`` or by us), ``model.export("m.onnx")`` (:func:`export`) writes one that onnxruntime runs.

The ``onnx`` package is imported on first use (``pip install 'magmadnn[onnx]'``). Modules: :mod:`.load` (the
graph walk), :mod:`.importers` (ONNX operator -> layers), :mod:`.decompositions` (GELU, SiLU as element-wise nodes),
:mod:`.op_graph` (a graph as op nodes, :mod:`.op_nodes`), :mod:`.export`, :mod:`.exporters` and
:mod:`.exporters_more` (layer -> ONNX nodes), :mod:`.op_export` (op node -> its ONNX node), :mod:`.archive`
(op-node models in model files), :mod:`.info` (what a file holds), :mod:`._proto` (reading and checking files),
:mod:`.errors`.
"""

from ..models import graph_archive as _graph_archive
from . import archive as _archive
from .errors import OnnxExportError, OnnxImportError, UnsupportedOnnxError
from .export import export
from .info import info
from .load import load

_graph_archive.register("onnx", _archive.writes, _archive.reads)  # model.save of a model of op nodes

__all__ = ["load", "export", "info", "OnnxImportError", "UnsupportedOnnxError", "OnnxExportError"]
