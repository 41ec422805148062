"""Gradients of the op nodes against PyTorch's autograd (ONNX's node tests check forward values only): one ONNX node
loaded as an op node (``layers=False``), the gradient of ``sum(out * u)`` with respect to every float input compared
with PyTorch's for the same computation, on the host and the simulated device, in float64. Every registered operator
has a case here or is in :data:`NOT_DIFFERENTIABLE` (with the reason); on the simulated device the forward and the
backward read no device data on the host (the simulator's ``host_reads``)."""

from __future__ import annotations

import numpy as np
import pytest

from .._onnx_helpers import onnx  # noqa: F401 - skips the module without onnx
from ..backends import open_backend
from ._gradient_cases import MORE_CASES, NOT_DIFFERENTIABLE

torch = pytest.importorskip("torch")
tF = torch.nn.functional
RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape)


def _gru_onnx(w):  # torch's r, z, n rows -> ONNX's z, r, h
    r, z, n = np.split(w, 3, axis=0)
    return np.concatenate([z, r, n], axis=0)


def _lstm_onnx(w):  # torch's i, f, g, o rows -> ONNX's i, o, f, c
    i, f, g, o = np.split(w, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def _rnn_case(kind):
    torch.manual_seed(0)
    module = (torch.nn.GRU if kind == "GRU" else torch.nn.LSTM)(3, 4, bidirectional=True).double()
    fix = _gru_onnx if kind == "GRU" else _lstm_onnx
    p = {n: t.detach().numpy() for n, t in module.named_parameters()}
    w = np.stack([fix(p["weight_ih_l0"]), fix(p["weight_ih_l0_reverse"])])
    r = np.stack([fix(p["weight_hh_l0"]), fix(p["weight_hh_l0_reverse"])])
    b = np.stack([np.concatenate([fix(p["bias_ih_l0"]), fix(p["bias_hh_l0"])]),
                  np.concatenate([fix(p["bias_ih_l0_reverse"]), fix(p["bias_hh_l0_reverse"])])])
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1

    def reference(x):  # ONNX's Y (T, 2, B, H) from PyTorch's (T, B, 2H)
        y = module(x)[0]
        return y.reshape(y.shape[0], y.shape[1], 2, 4).permute(0, 2, 1, 3)

    return (kind, attrs, [("X", _r(5, 2, 3))], {"W": w, "R": r, "B": b}, reference)


CASES = {**MORE_CASES,
    "attention_causal": ("Attention", {"is_causal": 1}, [("Q", _r(2, 3, 4, 8)), ("K", _r(2, 3, 6, 8)),
                                                        ("V", _r(2, 3, 6, 8))], {},
                         lambda q, k, v: tF.scaled_dot_product_attention(q, k, v, is_causal=True)),
    "attention_mask": ("Attention", {}, [("Q", _r(2, 3, 4, 8)), ("K", _r(2, 3, 6, 8)), ("V", _r(2, 3, 6, 8)),
                                         ("M", _r(4, 6))], {},
                       lambda q, k, v, m: tF.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    "resize_bilinear": ("Resize", {"mode": "linear"}, [("X", _r(2, 3, 4, 5))],
                        {"": None, "scales": np.array([1, 1, 2, 2], np.float32)},
                        lambda x: tF.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
    "resize_nearest": ("Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                  "nearest_mode": "floor"}, [("X", _r(2, 3, 4, 5))],
                       {"": None, "scales": np.array([1, 1, 2, 3], np.float32)},
                       lambda x: tF.interpolate(x, scale_factor=(2, 3), mode="nearest")),
    "nll_weighted": ("NegativeLogLikelihoodLoss", {"reduction": "mean", "ignore_index": 1}, [("X", _r(6, 5, 2))],
                     {"T": np.array([[0, 1], [2, 3], [4, 1], [0, 0], [3, 2], [1, 4]]), "W": np.abs(_r(5)) + 0.1},
                     None),
    "sce": ("SoftmaxCrossEntropyLoss", {"reduction": "sum"}, [("X", _r(6, 5))], {"T": np.array([0, 1, 2, 3, 4, 1])},
            lambda x: tF.cross_entropy(x, torch.tensor([0, 1, 2, 3, 4, 1]), reduction="sum")),
    "cumprod": ("CumProd", {"exclusive": 1}, [("X", _r(3, 4))], {"axis": np.array(1)},
                lambda x: torch.cat([torch.ones_like(x[:, :1]), torch.cumprod(x, 1)[:, :-1]], 1)),
    "gathernd": ("GatherND", {}, [("X", _r(3, 4, 2))], {"I": np.array([[0, 1], [2, 3], [0, 1]])},
                 lambda x: x[[0, 2, 0], [1, 3, 1]]),
    "layer_norm": ("LayerNormalization", {"axis": -2}, [("X", _r(2, 3, 4)), ("S", _r(3, 4)), ("B", _r(3, 4))], {},
                   lambda x, s, b: tF.layer_norm(x, (3, 4), s, b)),
    "depth_to_space": ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, [("X", _r(2, 8, 2, 3))], {},
                       lambda x: tF.pixel_shuffle(x, 2)),
    "scatternd_add": ("ScatterND", {"reduction": "add"}, [("X", _r(4, 3)), ("U", _r(3, 3))],
                      {"I": np.array([[0], [2], [0]])},
                      lambda x, u: x.index_add(0, torch.tensor([0, 2, 0]), u)),
    "scatternd": ("ScatterND", {}, [("X", _r(3, 4, 2)), ("U", _r(2, 2))], {"I": np.array([[0, 1], [2, -1]])},
                  lambda x, u: x.index_put((torch.tensor([0, 2]), torch.tensor([1, 3])), u)),
    "scatter_elements": ("ScatterElements", {"axis": 1}, [("X", _r(3, 4)), ("U", _r(3, 2))],
                         {"I": np.array([[0, 3], [1, 2], [3, -4]])},
                         lambda x, u: torch.scatter(x, 1, torch.tensor([[0, 3], [1, 2], [3, 0]]), u)),
    "lrn": ("LRN", {"size": 3, "alpha": 0.25, "beta": 0.75, "bias": 1.5}, [("X", _r(2, 5, 3, 2))], {},
            lambda x: tF.local_response_norm(x, 3, alpha=0.25, beta=0.75, k=1.5)),
    "maxpool_3d": ("MaxPool", {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 1, 0]},
                   [("X", _r(2, 2, 3, 4, 5))], {},
                   lambda x: tF.max_pool3d(tF.pad(x, (1, 0, 0, 1, 1, 1), value=-np.inf), 2, (2, 1, 2))),
    "avgpool_3d_ceil": ("AveragePool", {"kernel_shape": [3, 2, 3], "strides": [2, 2, 2], "pads": [1, 0, 1, 1, 0, 1],
                                        "ceil_mode": 1}, [("X", _r(2, 2, 5, 4, 6))], {},
                        lambda x: tF.avg_pool3d(x, (3, 2, 3), 2, padding=(1, 0, 1), ceil_mode=True,
                                                count_include_pad=False)),
    "gather_elements_negative": ("GatherElements", {"axis": 1}, [("X", _r(3, 4))],
                        {"I": np.array([[0, 3, 3], [1, -1, 0], [2, 2, 1]])},
                        lambda x: torch.gather(x, 1, torch.tensor([[0, 3, 3], [1, 3, 0], [2, 2, 1]]))),
    "topk_smallest": ("TopK", {"axis": 0, "largest": 0}, [("X", _r(5, 3))], {"K": np.array([2])},
             lambda x: torch.topk(x, 2, dim=0, largest=False)[0]),
    "mod_floored": ("Mod", {}, [("A", _r(3, 4) * 3), ("B", np.abs(_r(3, 4)) + 0.5)], {}, torch.remainder),
    "fmod_broadcast": ("Mod", {"fmod": 1}, [("A", _r(3, 4) * 3), ("B", _r(1, 4) + 2.0)], {}, torch.fmod),
    "swish": ("Swish", {"alpha": 0.5}, [("X", _r(3, 4))], {}, lambda x: x * torch.sigmoid(0.5 * x)),
    "mean_variance_normalization": (
        "MeanVarianceNormalization", {}, [("X", _r(2, 3, 4, 5))], {},
        lambda x: (x - x.mean((0, 2, 3), keepdim=True)) / torch.sqrt(x.var((0, 2, 3), unbiased=False, keepdim=True)
                                                                     + 1e-9)),
    "gru_bidirectional": _rnn_case("GRU"),
    "lstm_bidirectional": _rnn_case("LSTM"),
}


def _nll_reference(x):
    t = torch.tensor([[0, 1], [2, 3], [4, 1], [0, 0], [3, 2], [1, 4]])
    return tF.nll_loss(x, t, weight=torch.tensor(CASES["nll_weighted"][3]["W"]), ignore_index=1)


#: how the inputs (graph inputs, then constants) are ordered on the node where names order them otherwise
_ORDERS = {"Resize": ["X", "", "scales"], "ScatterND": ["X", "I", "U"], "ScatterElements": ["X", "I", "U"]}


def _model(op, attrs, inputs, constants, device, options):
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    from magmadnn.onnx.load import convert  # noqa: PLC0415

    names = [n for n, _ in inputs]
    inits, order = [], list(names)
    for name, value in constants.items():
        order.append(name)
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
    order = options.get("order", _ORDERS.get(op, order))
    if op in ("NegativeLogLikelihoodLoss", "GRU", "LSTM", "RNN") or op == "SoftmaxCrossEntropyLoss":
        order = names[:1] + [n for n in constants] + names[1:]
    info = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, list(a.shape)) for n, a in inputs]
    outs = [f"Y{k}" for k in range(options.get("outputs", 1))]
    node = helper.make_node(op, order, outs, **attrs)
    graph = helper.make_graph([node], "g", info, [helper.make_empty_tensor_value_info(n) for n in outs],
                              initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", options.get("opset", 26))])
    return convert(proto, device=device, layers=False)


def _floats(out):
    """The float outputs, flattened and joined (a case with several outputs compares them all at once)."""
    from magmadnn import functional as F  # noqa: PLC0415

    out = list(out.values()) if isinstance(out, dict) else out if isinstance(out, list) else [out]
    outs = [o for o in out if np.dtype(o.dtype).kind == "f"]
    return outs[0] if len(outs) == 1 else F.concatenate([F.reshape(o, (-1,)) for o in outs], axis=0)


def _host(grad, device):
    from magmadnn import Tensor  # noqa: PLC0415

    return grad.numpy() if isinstance(grad, Tensor) else Tensor._of(grad, device).numpy()


def _reads():
    from pymagma import simulator  # noqa: PLC0415

    return simulator.current().runtime.host_reads.total() if simulator.is_enabled() else 0


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


def test_every_differentiable_operator_has_a_gradient_case():
    """A registered operator is differentiable (a case above) or listed as not (a reason): none is forgotten."""
    from magmadnn.onnx.op_nodes import CONVERTERS  # noqa: PLC0415

    covered = {case[0] for case in CASES.values()}
    assert not covered & set(NOT_DIFFERENTIABLE), covered & set(NOT_DIFFERENTIABLE)
    missing = sorted(set(CONVERTERS) - covered - set(NOT_DIFFERENTIABLE))
    assert not missing, f"operators with no gradient case (add one, or list them in NOT_DIFFERENTIABLE): {missing}"
    stale = sorted((covered | set(NOT_DIFFERENTIABLE)) - set(CONVERTERS))
    assert not stale, f"cases of operators no converter registers: {stale}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_node_gradient_matches_torch(name, device):
    from magmadnn import Tensor  # noqa: PLC0415

    op, attrs, inputs, constants, reference, *rest = CASES[name]
    options = rest[0] if rest else {}
    reference = reference or _nll_reference
    model = _model(op, attrs, inputs, constants, device, options)
    theirs = [torch.tensor(a, requires_grad=True) for _, a in inputs]
    want = reference(*theirs)
    u = np.random.default_rng(1).standard_normal(tuple(want.shape))
    ours = [Tensor(a.copy(), requires_grad=True, backend=device) for _, a in inputs]
    seed = Tensor(u.astype(np.dtype(str(want.dtype).replace("torch.", ""))), backend=device)
    before = _reads()
    out = _floats(model(ours if len(ours) > 1 else ours[0]))
    out.backward(Tensor._of(device.reshape(seed.data, tuple(out.shape)), device))
    assert _reads() == before, "the op node read device data on the host (forward or backward)"
    rtol, atol = options.get("tol", (1e-9, 1e-9))
    np.testing.assert_allclose(np.asarray(out.numpy()).reshape(want.shape), want.detach().numpy(), rtol=rtol,
                               atol=atol)
    (want * torch.tensor(u, dtype=want.dtype)).sum().backward()
    for mine, theirs_t in zip(ours, theirs):
        assert mine.grad is not None, "no gradient reached the input"
        np.testing.assert_allclose(_host(mine.grad, device), theirs_t.grad.numpy(), rtol=max(rtol, 1e-8),
                                   atol=max(atol, 1e-9))
