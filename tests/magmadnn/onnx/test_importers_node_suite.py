"""The ONNX project's own node tests (generated from the installed ``onnx`` package), every one of the default
domain: each predicts ONNX's expected outputs or is refused with an OnnxImportError (UnsupportedOnnxError naming the
node, the operator and the opset) — never a wrong result, never another exception — on the host and the simulated
device. docs/onnx.md lists the counts per operator."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

from tests.magmadnn._onnx_helpers import monnx, onnx  # noqa: F401 - skips the module without onnx
from tests.magmadnn.backends import open_backend

#: node tests passing at least, over every operator (docs/onnx.md); fewer is a regression
PASSES_AT_LEAST = 1254
#: operator -> passing node tests using it at least (counted per node; a sample of the most exported operators)
PASSES = {"Add": 314, "AveragePool": 14, "Concat": 684, "Conv": 17, "Div": 326, "Gather": 92, "Gemm": 11, "MatMul":
          191, "MaxPool": 12, "Mul": 500, "Reshape": 513, "Slice": 127, "Softmax": 99, "Transpose": 283, "Where":
          274, "Attention": 82, "Resize": 39, "LSTM": 6, "GRU": 6, "LayerNormalization": 19,
          "NegativeLogLikelihoodLoss": 52, "ScatterND": 7, "ScatterElements": 7, "LRN": 2, "Swish": 4}


def _array(value):
    from onnx import numpy_helper  # noqa: PLC0415

    return numpy_helper.to_array(value) if hasattr(value, "dims") else np.asarray(value)


@pytest.fixture(scope="module")
def cases():
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [case for case in collect_testcases(None) if case.model.graph.node]


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def _right(got, outputs, case) -> bool:
    gots = list(got.values()) if isinstance(got, dict) else [got]
    if len(gots) != len(outputs):
        return False
    for g, want in zip(gots, outputs):
        g = np.asarray(g)
        if g.size != want.size or g.dtype.kind != want.dtype.kind:
            return False
        if not np.allclose(g.reshape(want.shape), want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5),
                           equal_nan=True):
            return False
    return True


def run_suite(cases, device) -> dict:
    """{"pass": [...], "refused": [...], "wrong": [...], "crash": [...]} of the node tests on ``device``."""
    from magmadnn.onnx.load import convert  # noqa: PLC0415

    found = collections.defaultdict(list)
    for case in cases:
        inputs, outputs = case.data_sets[0]
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                model = convert(case.model, device=device, seed=0)
                inputs, outputs = [_array(a) for a in inputs], [_array(a) for a in outputs]
                n = len(inputs[0]) if inputs and np.ndim(inputs[0]) else 1
                got = model.predict(inputs[0] if len(inputs) == 1 else list(inputs), batch_size=max(n, 1))
        except monnx.OnnxImportError:
            found["refused"].append(case)
            continue
        except Exception as exc:  # noqa: BLE001 - what the suite is for
            found["crash"].append(f"{case.name}: {type(exc).__name__}: {exc}")
            continue
        right = _right(got, outputs, case)
        found["pass" if right else "wrong"].append(case if right else case.name)
    return found


def per_operator(found) -> collections.Counter:
    return collections.Counter(node.op_type for case in found["pass"] for node in case.model.graph.node
                               if node.op_type != "Constant")


@pytest.mark.slow
def test_node_suite_never_wrong_never_unclear(cases, device):
    found = run_suite(cases, device)
    assert not found["wrong"] and not found["crash"], found["wrong"] + found["crash"]
    assert len(found["pass"]) >= PASSES_AT_LEAST, (len(found["pass"]), len(cases))
    passes = per_operator(found)
    short = {op: (passes[op], n) for op, n in PASSES.items() if passes[op] < n}
    assert not short, f"operators passing fewer node tests than docs/onnx.md lists (got, listed): {short}"
