"""The ONNX project's own node tests (generated from the installed ``onnx`` package), every one of the default
domain: each predicts ONNX's expected outputs or is refused with an OnnxImportError (UnsupportedOnnxError naming the
node, the operator and the opset) — never a wrong result, never another exception — on the host and the simulated
device. docs/onnx.md lists the counts per operator.

On the simulated device the same run counts the host's reads of device data (the simulator's ``host_reads``) node by
node: an op node reads none, except where a shape, axes or sizes argument it reads on the host (its converter's
``host`` positions, :data:`SHAPE_ARGUMENTS`) arrives as a computed tensor."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

from tests.magmadnn._onnx_helpers import monnx, onnx  # noqa: F401 - skips the module without onnx
from tests.magmadnn.backends import open_backend

#: node tests passing at least, over every operator (docs/onnx.md); fewer is a regression
PASSES_AT_LEAST = 1297
#: operator -> passing node tests using it at least (counted per node; a sample of the most exported operators)
PASSES = {"Add": 314, "AveragePool": 20, "Concat": 684, "Conv": 17, "ConvTranspose": 10, "Einsum": 5, "LpPool": 8,
          "GridSample": 15, "Div": 326, "Gather": 92, "Gemm": 11, "MatMul": 191, "MaxPool": 17, "Mul": 500,
          "Reshape": 513,
          "Slice": 127, "Softmax": 99, "Transpose": 283, "Where": 274, "Attention": 82, "Resize": 39, "LSTM": 6,
          "GRU": 6, "LayerNormalization": 19, "NegativeLogLikelihoodLoss": 52, "ScatterND": 7, "ScatterElements": 7,
          "LRN": 2, "Swish": 4}


#: operator -> the input positions its op node reads on the host when they arrive as computed tensors, and why:
#: the only device reads an op node may make (kept equal to the converters' ``host`` declarations, so a new one is
#: reviewed here). Shape and Size read no data at all (only the shape), so they need no entry.
SHAPE_ARGUMENTS = {
    **{op: {1: "axes (the output's rank and shape)"} for op in (
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
        "ReduceSumSquare", "ReduceLogSum", "Squeeze", "Unsqueeze")},
    "Reshape": {1: "the target shape"}, "Expand": {1: "the target shape"}, "Tile": {1: "the repeats (the shape)"},
    "ConstantOfShape": {0: "the output's shape"}, "Split": {1: "the sizes of the parts"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps (together: the output's shape)"},
    "Range": {0: "start", 1: "limit", 2: "delta (together: the output's length)"},
    "OneHot": {1: "depth (the output's new axis)"}, "TopK": {1: "k (the output's length)"},
    "CumSum": {1: "the axis"}, "CumProd": {1: "the axis"},
    "Pad": {1: "the pads (the output's shape)", 3: "the axes"},
    "Resize": {1: "roi (the sampling coordinates)", 2: "scales", 3: "sizes (the output's shape)"},
    "Upsample": {1: "scales (the output's shape)"}, "AffineGrid": {1: "size (the output's shape)"},
    "RNN": {4: "sequence_lens (checked to be the whole sequence; shorter ones are refused)"},
    "GRU": {4: "sequence_lens (checked to be the whole sequence; shorter ones are refused)"},
    "LSTM": {4: "sequence_lens (checked to be the whole sequence; shorter ones are refused)"},
}


#: registered operators no node test runs as an op node on data, and why
NOT_IN_THE_NODE_SUITE = {"Size": "the node tests' shapes are static: Size is a constant folded at load"}


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


def run_suite(cases, device, layers="auto") -> dict:
    """{"pass": [...], "refused": [...], "wrong": [...], "crash": [...]} of the node tests on ``device``."""
    from magmadnn.onnx.load import convert  # noqa: PLC0415

    found = collections.defaultdict(list)
    for case in cases:
        inputs, outputs = case.data_sets[0]
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                model = convert(case.model, device=device, seed=0, layers=layers)
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


class HostReads:
    """Counts the simulator's host reads of device data per op node run (wrapping ``Operation.call``): each node's
    reads, and whether it had a computed tensor in one of its :data:`SHAPE_ARGUMENTS` positions."""

    def __init__(self, monkeypatch):
        from magmadnn.layers.operation import Operation  # noqa: PLC0415
        from pymagma import simulator  # noqa: PLC0415

        self.runs = collections.Counter()  # operator -> op nodes run
        self.offenders: dict = {}  # operator -> (case, reads, reads by call) of a node reading device data
        self.case = None
        runtime = simulator.current().runtime
        call = Operation.call

        def counted(op, inputs, training=False):
            before, by_call = runtime.host_reads.total(), dict(runtime.host_reads)
            out = call(op, inputs, training)
            reads = runtime.host_reads.total() - before
            allowed = SHAPE_ARGUMENTS.get(op.op_type, {})
            shapes_read = any(kind == "input" and k in allowed for k, (kind, _) in enumerate(op.arguments))
            self.runs[op.op_type] += 1
            if reads and not shapes_read:
                new = {k: v - by_call.get(k, 0) for k, v in runtime.host_reads.items() if v != by_call.get(k, 0)}
                self.offenders.setdefault(op.op_type, (self.case, reads, new))
            return out

        monkeypatch.setattr(Operation, "call", counted)


@pytest.fixture(scope="module")
def suite(cases, device):
    """The suite's run on ``device`` (once per module), with the host reads of each op node on the device."""
    if device.name == "host":
        return run_suite(cases, device), None
    with pytest.MonkeyPatch.context() as monkeypatch:
        reads = HostReads(monkeypatch)
        found = run_suite(_named(cases, reads), device)
        # the operators the run reached only through layers (layers="auto"): their first case as op nodes
        from magmadnn.onnx.op_nodes import CONVERTERS  # noqa: PLC0415

        missing = set(CONVERTERS) - set(reads.runs)
        again = [c for c in cases if any(n.op_type in missing for n in c.model.graph.node)]
        run_suite(_named(again, reads), device, layers=False)
    return found, reads


def _named(cases, reads):
    for case in cases:
        reads.case = case.name
        yield case


def test_shape_arguments_are_the_converters_host_positions():
    """The list above is what the converters declare: a new host read is reviewed (and documented) here."""
    from magmadnn.onnx.op_nodes import CONVERTERS  # noqa: PLC0415

    declared = {op: set(convert.host) for op, convert in CONVERTERS.items() if convert.host}
    assert declared == {op: set(positions) for op, positions in SHAPE_ARGUMENTS.items() if op in CONVERTERS}


@pytest.mark.slow
def test_no_op_node_reads_device_data_on_the_device(suite, device):
    found, reads = suite
    if reads is None:
        pytest.skip("host reads are counted on the simulated device")
    assert not reads.offenders, reads.offenders
    from magmadnn.onnx.op_nodes import CONVERTERS  # noqa: PLC0415

    never = sorted(set(CONVERTERS) - set(reads.runs))
    assert set(never) <= set(NOT_IN_THE_NODE_SUITE), never


@pytest.mark.slow
def test_node_suite_never_wrong_never_unclear(suite):
    found = suite[0]
    assert not found["wrong"] and not found["crash"], found["wrong"] + found["crash"]
    assert len(found["pass"]) >= PASSES_AT_LEAST, (len(found["pass"]), len(cases))
    passes = per_operator(found)
    short = {op: (passes[op], n) for op, n in PASSES.items() if passes[op] < n}
    assert not short, f"operators passing fewer node tests than docs/onnx.md lists (got, listed): {short}"
