"""The ONNX project's own node tests (generated from the installed ``onnx`` package), every one whose operators
magmadnn imports: each predicts ONNX's expected output or is refused with an OnnxImportError (UnsupportedOnnxError
naming what is not supported) — never a wrong result, never another exception — on the host and the simulated
device."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

from tests.magmadnn._onnx_helpers import monnx, onnx  # noqa: F401 - skips the module without onnx
from tests.magmadnn.backends import open_backend

#: operator -> node tests it passes at least (docs/onnx.md lists them); fewer is a regression
PASSES = {"Add": 1, "AveragePool": 9, "Concat": 18, "Div": 10, "Dropout": 2, "Elu": 2, "Exp": 1, "Flatten": 3,
          "Gelu": 2, "GlobalAveragePool": 2, "GlobalMaxPool": 2, "Identity": 1, "LeakyRelu": 2, "LogSoftmax": 6,
          "MaxPool": 10, "Mul": 8, "Relu": 1, "Reshape": 12, "Selu": 1, "Shape": 6, "Sigmoid": 1, "Slice": 24,
          "Softmax": 6, "Softplus": 1, "Softsign": 1, "Tanh": 1, "Transpose": 8}


@pytest.fixture(scope="module")
def claimed():
    """The node tests whose operators are all in magmadnn's importer table."""
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415

    from magmadnn.onnx.importers import IMPORTERS  # noqa: PLC0415

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [case for case in cases if case.model.graph.node
            and all(node.op_type in IMPORTERS for node in case.model.graph.node)]


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def run_suite(cases, device) -> dict:
    """{"pass": [...], "refused": [...], "wrong": [...], "crash": [...]} of the node tests on ``device``."""
    from magmadnn.onnx.load import convert  # noqa: PLC0415

    found = collections.defaultdict(list)
    for case in cases:
        inputs, outputs = case.data_sets[0]
        try:
            model = convert(case.model, device=device, seed=0)
            got = model.predict(inputs[0] if len(inputs) == 1 else list(inputs), batch_size=len(inputs[0]))
        except monnx.OnnxImportError:
            found["refused"].append(case)
            continue
        except Exception as exc:  # noqa: BLE001 - what the suite is for
            found["crash"].append(f"{case.name}: {type(exc).__name__}: {exc}")
            continue
        want = outputs[0]
        right = got.size == want.size and np.allclose(got.reshape(want.shape), want, rtol=max(case.rtol, 1e-4),
                                                      atol=max(case.atol, 1e-5), equal_nan=True)
        found["pass" if right else "wrong"].append(case if right else case.name)
    return found


@pytest.mark.slow
def test_node_suite_never_wrong_never_unclear(claimed, device):
    found = run_suite(claimed, device)
    assert not found["wrong"] and not found["crash"], found["wrong"] + found["crash"]
    passes = collections.Counter(node.op_type for case in found["pass"] for node in case.model.graph.node
                                 if node.op_type != "Constant")
    short = {op: (passes[op], n) for op, n in PASSES.items() if passes[op] < n}
    assert not short, f"operators passing fewer node tests than docs/onnx.md lists (got, listed): {short}"
