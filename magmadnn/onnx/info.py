"""``info(path)``: what an ONNX file holds (producer, opset, inputs, output, operators) and whether magmadnn imports
it (load's own checks), as text."""

from __future__ import annotations

import math
from collections import Counter

from ._proto import default_opset, read
from .errors import OnnxImportError
from .importers import IMPORTERS
from .load import convert
from .op_nodes import CONVERTERS

__all__ = ["info"]


def _shape(spec) -> str:
    dims = spec.type.tensor_type.shape.dim
    return "(" + ", ".join(d.dim_param or str(d.dim_value) if d.WhichOneof("value") else "?" for d in dims) + ")"


def info(path) -> str:
    """A few lines describing the ONNX file ``path``; "importable" runs every check :func:`magmadnn.onnx.load`
    runs (:func:`magmadnn.onnx.load.convert`), so "yes" means load succeeds and "no" gives load's error."""
    proto = read(path)
    graph = proto.graph
    weights = {i.name for i in graph.initializer}
    params = sum(math.prod(i.dims) for i in graph.initializer)
    ops = Counter(node.op_type for node in graph.node)
    missing = sorted(op for op in ops if op not in IMPORTERS and op not in CONVERTERS)
    try:
        convert(proto, device="host")  # load's own checks and weights, on the host
        verdict = "importable: yes"
    except OnnxImportError as exc:
        verdict = f"importable: no: {exc}"
    lines = [
        f"file: {path}",
        f"producer: {proto.producer_name or '?'} {proto.producer_version}".rstrip(),
        f"IR version {proto.ir_version}, opset {default_opset(proto)}",
        "inputs: " + ", ".join(f"{i.name} {_shape(i)}" for i in graph.input if i.name not in weights),
        "outputs: " + ", ".join(f"{o.name} {_shape(o)}" for o in graph.output),
        f"weights: {len(weights)} tensors, {params:,} values",
        "operators: " + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())),
        *([f"operators magmadnn has no importer for: {', '.join(missing)}"] if missing else []),
        verdict,
    ]
    return "\n".join(lines)
