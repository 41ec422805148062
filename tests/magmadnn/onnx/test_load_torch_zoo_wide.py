"""The wide zoo: one tiny PyTorch model per family users export (MobileNetV2, ConvNeXt, squeeze-and-excitation,
input normalisation + chunk + Resize, activations, 1-D CNN, bidirectional LSTM, GRU with two outputs, class token +
padding mask, scaled_dot_product_attention, nn.MultiheadAttention, nn.TransformerEncoderLayer, a BERT-like
embedding, ResNet basic blocks, a UNet with ConvTranspose2d, pools and norms, indexing ops), exported with the
default ``torch.onnx.export(model, (x,), path)`` (the dynamo exporter; slow) and ``dynamo=False``, with a static and
a dynamic batch; each import predicts like onnxruntime and PyTorch (a dynamic batch at another batch size), the
trainable ones fine-tune a few steps, a few gradients match PyTorch's autograd, and a subset runs on the simulated
device."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from .._onnx_helpers import onnx  # noqa: F401 - skips the module without onnx
from ..backends import model_device

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from ._torch_zoo import BATCH_AXIS, ZOO  # noqa: E402

EXPORT_BATCH, OTHER_BATCH = 2, 3
RTOL, ATOL = 2e-4, 2e-5


def build(name):
    """The module (eval mode, seeded: the same weights on every call) and its example-input maker."""
    torch.manual_seed(0)
    make, inputs, _ = ZOO[name]
    model = make().eval()
    with torch.no_grad():  # every parameter distinct (no two all-ones scales), running statistics not trivial
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for name_, b in model.named_buffers():
            if name_.endswith("running_mean"):
                b.normal_(0, 0.1)
            elif name_.endswith("running_var"):
                b.uniform_(0.5, 1.5)
    return model, inputs


def export(name, dynamo, dynamic, path, opset=None):
    """The module (eval mode), the example input and the path of its ONNX export."""
    model, inputs = build(name)
    x = inputs(EXPORT_BATCH)
    kwargs = {"dynamo": dynamo}
    if opset is not None:
        kwargs["opset_version"] = opset
    if dynamic:
        axis = BATCH_AXIS.get(name, 0)
        if dynamo:
            kwargs["dynamic_shapes"] = ({axis: torch.export.Dim("batch", min=1, max=64)},)
        else:
            kwargs.update(input_names=["x"], dynamic_axes={"x": {axis: "batch"}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), **kwargs)
    return model, inputs


def exports_once(root, export, build):
    """``get(name, dynamo, dynamic)``: a freshly built module, its input maker and the path of its export (made by
    ``export(name, dynamo, dynamic, path)`` under ``root``), written once: the exports (the dynamo exporter's above
    all) are most of a zoo module's time, and the predicting, fine-tuning, gradient and simulator tests read the same
    files (a test only reads its file)."""
    done = {}

    def get(name, dynamo, dynamic):
        key = (name, dynamo, dynamic)
        if key not in done:
            path = root / f"{name}-{'dynamo' if dynamo else 'legacy'}-{'dynamic' if dynamic else 'static'}.onnx"
            export(name, dynamo, dynamic, path)
            done[key] = path
        model, inputs = build(name)  # the exported weights again, in a module no other test has touched
        return model, inputs, done[key]

    return get


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """:func:`exports_once` for this module's zoo."""
    return exports_once(tmp_path_factory.mktemp("zoo_wide"), export, build)


def _as_list(out):
    if isinstance(out, dict):
        return list(out.values())
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def check_predicts(model, inputs, path, batch, device=None):
    from magmadnn import onnx as monnx  # noqa: PLC0415

    torch.manual_seed(1)
    x = inputs(batch)
    session = ort.InferenceSession(str(path))
    want = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        expected = model(x)
    expected = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    loaded = monnx.load(str(path), device=device) if device else monnx.load(str(path))
    got = _as_list(loaded.predict(x.numpy()))
    assert len(got) == len(want) == len(expected)
    for g, w, t in zip(got, want, expected):
        np.testing.assert_allclose(np.asarray(g), w, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(np.asarray(g), t, rtol=RTOL, atol=ATOL)
    return loaded


def _cases():
    cases = []
    for name in sorted(ZOO):
        for dynamo in (True, False):
            for dynamic in (False, True):
                marks = [pytest.mark.slow] if dynamo else []
                ids = f"{name}-{'default' if dynamo else 'dynamo_false'}-{'dynamic' if dynamic else 'static'}"
                cases.append(pytest.param(name, dynamo, dynamic, marks=marks, id=ids))
    return cases


@pytest.mark.parametrize(("name", "dynamo", "dynamic"), _cases())
def test_zoo_predicts_like_onnxruntime_and_torch(name, dynamo, dynamic, exported):
    model, inputs, path = exported(name, dynamo, dynamic)
    check_predicts(model, inputs, path, OTHER_BATCH if dynamic else EXPORT_BATCH)


@pytest.mark.parametrize("dynamo", [pytest.param(True, marks=pytest.mark.slow), False],
                         ids=["default", "dynamo_false"])
def test_zoo_attention_operator_at_opset_23(dynamo, tmp_path):
    """scaled_dot_product_attention exported at opset 23 (the dynamo exporter writes the Attention operator)."""
    path = tmp_path / "sdpa23.onnx"
    model, inputs = export("sdpa", dynamo, False, path, opset=23)
    if dynamo:
        from onnx import load  # noqa: PLC0415

        assert "Attention" in {n.op_type for n in load(str(path)).graph.node}
    check_predicts(model, inputs, path, EXPORT_BATCH)


FINE_TUNE = sorted(name for name, (_, _, trains) in ZOO.items() if trains)


def _fine_tune_cases():
    fast = [pytest.param(name, False, True, id=f"{name}-dynamo_false-dynamic") for name in FINE_TUNE]
    slow = [pytest.param(name, True, False, marks=pytest.mark.slow, id=f"{name}-default-static")
            for name in FINE_TUNE]
    return fast + slow


@pytest.mark.parametrize(("name", "dynamo", "dynamic"), _fine_tune_cases())
def test_zoo_fine_tunes(name, dynamo, dynamic, exported):
    """A few fit steps lower the loss: a dynamic batch in batches of 4 of 8 samples; a static batch (the default
    export) in batches of the exported size."""
    _, inputs, path = exported(name, dynamo, dynamic)
    torch.manual_seed(2)
    x = inputs(8 if dynamic else 2 * EXPORT_BATCH).numpy()
    assert_fine_tunes(path, x, 4 if dynamic else None)


def assert_fine_tunes(path, x, batch_size):
    """The imported model at ``path`` fitted 15 epochs (Adam, MSE) towards a reachable target (half its output on
    ``x``, shifted) lowers the loss by at least a tenth."""
    from magmadnn import onnx as monnx  # noqa: PLC0415
    from magmadnn.optimizers import Adam  # noqa: PLC0415

    model = monnx.load(str(path))
    out = model.predict(x)
    target = (0.5 * out + 0.2 * np.random.default_rng(0).standard_normal(out.shape)).astype(np.float32)
    model.compile(optimizer=Adam(learning_rate=0.01), loss="mse")
    before = float(np.mean((model.predict(x) - target) ** 2))
    model.fit(x, target, epochs=15, batch_size=batch_size, verbose=0)
    after = float(np.mean((model.predict(x) - target) ** 2))
    assert after < 0.9 * before, (before, after)


#: PyTorch parameters an import keeps constant by the documented rule (a layer-scale Mul factor), or that the
#: exporter rearranges (the LSTM's gates in ONNX's order, its two biases concatenated)
NOT_MATCHED = {"convnext": {"gamma"},
               "bilstm": {f"lstm.{kind}_{part}_l{layer}{rev}" for kind in ("weight", "bias") for part in ("ih", "hh")
                          for layer in (0, 1) for rev in ("", "_reverse")}}


def _match(weight, params):
    """The PyTorch parameter holding ``weight``'s values (as stored or reshaped, or transposed), and whether
    transposed."""
    for name, p in params:
        value = p.detach().numpy()
        for transposed, candidate in ((False, value), (True, value.T)):
            if candidate.size == weight.size and np.array_equal(candidate.reshape(weight.shape), weight):
                return name, p, transposed
    return None, None, None


def assert_gradients_match_torch(model, loaded, x, not_matched=frozenset()):
    """The gradient of sum(out * u) with respect to the input ``x`` (a torch tensor) and each weight of ``loaded``
    that is one of ``model``'s parameters (maybe transposed), against PyTorch's autograd; every parameter of
    ``model`` but ``not_matched`` must be matched."""
    from magmadnn import Tensor  # noqa: PLC0415

    ours = Tensor(x.numpy().copy(), requires_grad=True)
    out = loaded(ours)
    u = np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)
    out.backward(Tensor(u))
    theirs = x.clone().requires_grad_(True)
    (model(theirs) * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.asarray(ours.grad), theirs.grad.numpy(), rtol=2e-3, atol=2e-5)
    params, matched = list(model.named_parameters()), set()
    for weight in loaded.trainable_weights:
        found, p, transposed = _match(np.asarray(weight.numpy()), params)
        if found is None:
            continue  # a weight the exporter derived (a slice, a fused product): its gradient has no twin
        matched.add(found)
        grad = p.grad.numpy().T if transposed else p.grad.numpy()
        mine = np.asarray(weight.grad.numpy() if hasattr(weight.grad, "numpy") else weight.grad)
        np.testing.assert_allclose(mine, grad.reshape(mine.shape), rtol=2e-3, atol=2e-5, err_msg=found)
    assert {n for n, _ in params} - matched == set(not_matched)


@pytest.mark.parametrize("name", ["convnext", "bilstm", "mha_block", "unetish", "pools_norms", "indexing", "sdpa",
                                  "squeeze_excite"])
def test_zoo_gradients_match_torch_autograd(name, exported):
    """The gradient of sum(out * u) w.r.t. the input and each weight, against PyTorch's autograd."""
    from magmadnn import onnx as monnx  # noqa: PLC0415

    model, inputs, path = exported(name, False, False)
    torch.manual_seed(3)
    x = inputs(EXPORT_BATCH)
    assert_gradients_match_torch(model, monnx.load(str(path)), x, NOT_MATCHED.get(name, set()))


@pytest.fixture(scope="module")
def simulated():
    yield from model_device("simulator")


@pytest.mark.native
@pytest.mark.parametrize("name", ["mobilenetv2", "convnext", "conv1d", "bilstm", "mha_block", "bert_like",
                                  "unetish", "indexing"])
def test_zoo_predicts_on_the_simulated_device(name, simulated, exported):
    model, inputs, path = exported(name, False, True)
    check_predicts(model, inputs, path, OTHER_BATCH, device=simulated)
