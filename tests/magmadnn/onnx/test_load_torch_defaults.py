"""Models as ``torch.onnx.export(model, (x,), path)`` writes them with nothing else given: the dynamo exporter (the
default) or ``dynamo=False``, a static batch (the example's size baked into shapes). Each is exported once per
module (the dynamo exporter takes seconds), imported on the host and the simulated device, predicted like
onnxruntime on the exported batch and like PyTorch on another batch size, and fine-tuned a few steps."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

import magmadnn as m
from magmadnn.onnx import decompositions
from tests.magmadnn._onnx_helpers import loads_like_ort, monnx, run_ort
from tests.magmadnn.backends import open_backend

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
BATCH = 4  # the batch size baked into the exported graphs


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


class LeNet5(nn.Module):
    def __init__(self, view=False):
        super().__init__()
        self.view = view
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1) if self.view else torch.flatten(x, 1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class RecurrentHead(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn, self.head = cell(8, 16, batch_first=True), nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


class RecurrentSequence(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn, self.head = cell(8, 16, batch_first=True), nn.Linear(16, 3)

    def forward(self, x):
        return torch.flatten(self.head(self.rnn(x)[0]), 1)


class AttentionBlock(nn.Module):
    """Pre-LayerNorm: nn.MultiheadAttention (the batch folded into the heads when exported) and a GELU MLP."""

    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(16), nn.LayerNorm(16)
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 16))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    """Convolution, GroupNorm (the InstanceNormalization pattern as PyTorch writes it), transposed convolution."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        with torch.no_grad():  # weights that are not GroupNorm's initial ones
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.flatten(self.up(torch.relu(self.norm(self.conv(x)))), 1)


class GeluMLP(nn.Module):
    """A pre-LayerNorm residual MLP on (N, T, F) with GELU (exact or tanh)."""

    def __init__(self, approximate):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate=approximate), nn.Linear(16, 8))

    def forward(self, x):
        return torch.flatten(x + self.mlp(self.norm(x)), 1)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.head = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4 * 4 * 4, 3)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.head(torch.flatten(torch.relu(self.norm(self.conv(x))), 1))


class CausalSDPA(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x):
        n, t, e = x.shape
        q, k, v = (part.view(n, t, 4, 4).transpose(1, 2) for part in self.qkv(x).split(16, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(n, t, e))


class PatchEmbedding(nn.Module):
    """ViT-style: a strided convolution into patches, flatten(2).transpose(1, 2), a learned position table,
    LayerNorm, the mean over the tokens, a classifier."""

    def __init__(self):
        super().__init__()
        self.patches, self.norm, self.head = nn.Conv2d(3, 16, 4, stride=4), nn.LayerNorm(16), nn.Linear(16, 5)
        self.position = nn.Parameter(torch.randn(1, 4, 16) * 0.1)

    def forward(self, x):
        tokens = self.patches(x).flatten(2).transpose(1, 2) + self.position
        return self.head(self.norm(tokens).mean(1))


MODELS = {  # name -> (module factory, per-sample input shape)
    "lenet": (LeNet5, (1, 28, 28)),
    "lenet_view": (lambda: LeNet5(view=True), (1, 28, 28)),
    "lstm": (lambda: RecurrentHead(nn.LSTM), (6, 8)),
    "gru": (lambda: RecurrentHead(nn.GRU), (6, 8)),
    "lstm_sequence": (lambda: RecurrentSequence(nn.LSTM), (6, 8)),
    "gru_sequence": (lambda: RecurrentSequence(nn.GRU), (6, 8)),
    "attention": (AttentionBlock, (5, 16)),
    "decoder": (Decoder, (3, 6, 6)),
    "sdpa": (CausalSDPA, (5, 16)),
    "patches": (PatchEmbedding, (3, 8, 8)),
    "encoder_layer": (lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True,
                                                         activation=nn.GELU(approximate="tanh")), (5, 16)),
    "gelu_exact": (lambda: GeluMLP("none"), (5, 8)),
    "conv_bn": (ConvBN, (3, 6, 6)),
    "gelu_tanh": (lambda: GeluMLP("tanh"), (5, 8)),
}


#: exporter name -> torch.onnx.export's options
EXPORTERS = {"dynamo": {}, "legacy": {"dynamo": False}, "dynamo_unoptimized": {"optimize": False},
             "dynamo_dynamic": {"dynamic_shapes": ({0: torch.export.Dim("batch")},)},
             "legacy_preserve": {"dynamo": False, "training": torch.onnx.TrainingMode.PRESERVE}}


class Exported:
    """Each (model, exporter) exported once, with the module that made it."""

    def __init__(self, folder):
        self.folder, self.done = folder, {}

    def __call__(self, name: str, exporter: str, opset: int | None = None):
        if (name, exporter, opset) not in self.done:
            factory, shape = MODELS[name]
            torch.manual_seed(0)
            module = factory().eval()
            path = str(self.folder / f"{name}_{exporter}{opset or ''}.onnx")
            options = {**({} if opset is None else {"opset_version": opset}), **EXPORTERS[exporter]}
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                torch.onnx.export(module, (torch.randn(BATCH, *shape),), path, **options)
            self.done[name, exporter, opset] = (module, shape, path)
        return self.done[name, exporter, opset]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return Exported(tmp_path_factory.mktemp("exported"))


def _torch(module, x):
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


def _ort(path, x):
    import onnxruntime  # noqa: PLC0415

    name = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    return run_ort(path, {name: x})


def _check(exported, name, exporter, device, fine_tune=True, opset=None):
    """Imported: predicts onnxruntime's output on the exported batch, PyTorch's on 7 samples; fine-tunes."""
    module, shape, path = exported(name, exporter, opset)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, *shape)).astype(np.float32)
    model = monnx.load(path, device=device, seed=0)
    expected = _ort(path, x)
    np.testing.assert_allclose(model.predict(x).reshape(expected.shape), expected, rtol=1e-4, atol=1e-4)
    other = rng.standard_normal((7, *shape)).astype(np.float32)
    expected = _torch(module, other)
    np.testing.assert_allclose(model.predict(other, batch_size=7).reshape(expected.shape), expected, rtol=1e-4,
                               atol=1e-4)
    if fine_tune:
        labels = rng.integers(0, expected.shape[-1], 12)
        data = rng.standard_normal((12, *shape)).astype(np.float32)
        model.compile(m.optimizers.Adam(3e-3), "cross_entropy", device=device)
        before = model.evaluate(data, labels)
        model.fit(data, labels, batch_size=6, epochs=4, verbose=0)  # batches of 6: not the exported 4
        after = model.evaluate(data, labels)
        assert np.isfinite(after) and after < before
    return model


@pytest.mark.parametrize(("name", "exporter"), [("lenet", "dynamo"), ("lenet", "legacy"), ("lenet_view", "legacy")])
def test_static_batch_lenet_predicts_and_trains_on_any_batch(exported, name, exporter, device):
    """The fixed batch size leading a Reshape target ([4, 400], [4, -1]) is read as the batch axis (the dynamo
    exporter writes flatten and view(x.size(0), -1) as the same Reshape)."""
    _check(exported, name, exporter, device)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_static_batch_recurrent_heads_import(exported, name, exporter, device):
    """dynamo=False writes the zero initial state as Expand(zeros, [1, N, 16]); the dynamo exporter as a (1, 4, 16)
    initializer of zeros, one LSTM output and Y -> Transpose [0, 2, 1, 3] -> Reshape [6, 4, 16] -> Transpose ->
    Gather of the last step: one layer returning its last state."""
    model = _check(exported, name, exporter, device)
    recurrent = [layer for layer in model.layers if isinstance(layer, (m.layers.LSTM, m.layers.GRU))]
    assert len(recurrent) == 1 and not recurrent[0].return_sequences


def test_static_batch_folded_into_heads_loads_as_op_nodes(exported):
    """nn.MultiheadAttention (dynamo=False) folds the batch into the heads: as layers (T, 4 * 4, 4) cannot be
    generalised, so the graph loads as op nodes for its exported batch size, predicting onnxruntime's and PyTorch's
    outputs."""
    module, shape, path = exported("attention", "legacy")
    with pytest.raises(monnx.UnsupportedOnnxError, match="fixed batch size 4.*dynamic_axes") as caught:
        monnx.load(path, layers=True)
    assert "Reshape" in str(caught.value)
    x = np.random.default_rng(3).standard_normal((BATCH, *shape)).astype(np.float32)
    model = monnx.load(path, seed=0)
    got = model.predict(x)
    np.testing.assert_allclose(got, _ort(path, x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, _torch(module, x), rtol=1e-4, atol=1e-4)
    assert monnx.info(path).splitlines()[-1] == "importable: yes"


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_group_norm_from_the_instance_normalization_pattern(exported, exporter, device):
    """Reshape -> InstanceNormalization -> Reshape -> Mul -> Add becomes one GroupNorm layer."""
    model = _check(exported, "decoder", exporter, device, fine_tune=False)
    norms = [layer for layer in model.layers if isinstance(layer, m.layers.GroupNorm)]
    assert len(norms) == 1 and norms[0].groups == 2


@pytest.mark.parametrize(("exporter", "opset"), [("legacy", 17), ("dynamo", 18)])
def test_tanh_gelu_from_its_decomposition(exported, exporter, opset, device):
    """Below opset 20 the tanh GELU is written as Mul/Pow, Add, Mul, Tanh, Add, Mul, Mul: one Activation layer."""
    model = _check(exported, "gelu_tanh", exporter, device, opset=opset)
    kinds = [layer.kind for layer in model.layers if isinstance(layer, m.layers.Activation)]
    assert kinds == [decompositions.gelu_kind("tanh")]


@pytest.mark.parametrize(("exporter", "opset"), [("legacy", 17), ("dynamo", 18)])
def test_exact_gelu_from_its_decomposition(exported, exporter, opset, device):
    """Below opset 20 the exact GELU is Div, Erf, Add, Mul, Mul: one Activation layer of the exact kind, or, where
    magmadnn has none, an error naming the chain's first node and saying it is the exact GELU."""
    if decompositions.gelu_kind("none") is None:
        _, _, path = exported("gelu_exact", exporter, opset)
        with pytest.raises(monnx.UnsupportedOnnxError, match=r"\(Div\): this node starts exact \(erf\) GELU"):
            monnx.load(path, device=device)
        return
    model = _check(exported, "gelu_exact", exporter, device, opset=opset)
    kinds = [layer.kind for layer in model.layers if isinstance(layer, m.layers.Activation)]
    assert kinds == [decompositions.gelu_kind("none")]


@pytest.mark.parametrize("exporter", ["legacy_preserve", "dynamo_unoptimized"])
def test_batch_norm_stays_a_layer_when_exported_unfolded(exported, exporter, device):
    """Exported eval-mode, BatchNorm is folded into the convolution; with TrainingMode.PRESERVE (dynamo=False) or
    optimize=False (dynamo) it stays a BatchNormalization node and imports as a BatchNorm layer."""
    model = _check(exported, "conv_bn", exporter, device)
    assert sum(isinstance(layer, m.layers.BatchNorm) for layer in model.layers) == 1


def test_batch_norm_is_folded_by_a_plain_export(exported):
    _, _, path = exported("conv_bn", "dynamo")
    assert not any(isinstance(layer, m.layers.BatchNorm) for layer in monnx.load(path).layers)


@pytest.mark.parametrize("name", ["attention", "encoder_layer"])
def test_dynamo_multihead_attention_with_a_dynamic_batch(exported, name, device):
    """nn.MultiheadAttention as the dynamo exporter writes it (kᵀ as Reshape, Transpose [0, 2, 1], Reshape; sizes
    from Shape nodes) imports as one MultiHeadAttention layer."""
    model = _check(exported, name, "dynamo_dynamic", device, fine_tune=False)
    assert sum(isinstance(layer, m.layers.MultiHeadAttention) for layer in model.layers) == 1


def test_dynamo_multihead_attention_with_a_static_batch_names_the_option(exported):
    _, _, path = exported("attention", "dynamo")
    with pytest.raises(monnx.UnsupportedOnnxError, match="fixed batch size 4.*dynamic_shapes"):
        monnx.load(path, layers=True)
    loads_like_ort(path, batch=BATCH)  # as op nodes


@pytest.mark.parametrize("exporter", ["dynamo", "dynamo_dynamic"])
def test_dynamo_scaled_dot_product_attention(exported, exporter, device):
    """The dynamo exporter writes kᵀ of F.scaled_dot_product_attention(is_causal=True) as Reshape [-1, T, d] (the
    batch merged with the heads), Transpose [0, 2, 1], Reshape back: one causal MultiHeadAttention layer."""
    model = _check(exported, "sdpa", exporter, device, fine_tune=False)
    assert sum(isinstance(layer, m.layers.MultiHeadAttention) for layer in model.layers) == 1


def test_a_reshape_merging_the_batch_outside_attention_says_so(tmp_path):
    from tests.magmadnn._onnx_helpers import graph, helper, save  # noqa: PLC0415

    proto = graph([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": (4, 5)},
                  {"s": np.array([-1, 5], np.int64)}, output_shape=(5,))
    with pytest.raises(monnx.UnsupportedOnnxError, match=r"\(Reshape\).*merges the batch axis"):
        monnx.load(save(proto, tmp_path), layers=True)


@pytest.mark.parametrize(("exporter", "opset"), [("legacy", 18), ("legacy", 20), ("dynamo", 18), ("dynamo", 23)])
@pytest.mark.parametrize("name", ["lenet", "decoder", "gelu_tanh", "gru"])
def test_opset_matrix(exported, name, exporter, opset):
    """The static-batch models at other opsets (17 and the dynamo default are above): same predictions."""
    _check(exported, name, exporter, "host", fine_tune=False, opset=opset)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_patch_embedding(exported, exporter, device):
    """flatten(2) of the patch grid, transpose, the position table, the mean over tokens (ReduceMean axis 1)."""
    _check(exported, "patches", exporter, device)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
@pytest.mark.parametrize("name", ["lstm_sequence", "gru_sequence"])
def test_recurrent_sequences(exported, name, exporter, device):
    """Every step's output: Y -> Squeeze + Transpose (dynamo=False) or Transpose [0, 2, 1, 3] + Reshape +
    Transpose (dynamo), then a Linear on (N, T, H)."""
    model = _check(exported, name, exporter, device, fine_tune=False)
    recurrent = [layer for layer in model.layers if isinstance(layer, (m.layers.LSTM, m.layers.GRU))]
    assert len(recurrent) == 1 and recurrent[0].return_sequences


def test_the_exporters_table_built_once_writes_the_same_export(_torchlib_registry_built_once, tmp_path,
                                                                monkeypatch):
    """This folder's conftest builds the dynamo exporter's torchlib table once per opset version for the session:
    each export gets its own copy, and a model's export is byte for byte the one PyTorch's own build of the table
    gives."""
    from .conftest import torchlib_registry_class  # noqa: PLC0415

    build, registry = _torchlib_registry_built_once, torchlib_registry_class()
    assert build is not None and registry is not None  # torch is imported: the table is built once
    first, second = registry.from_torchlib(), registry.from_torchlib(opset_version=18)
    assert first is not second and first.functions is not second.functions
    target = next(iter(first.functions))
    first.functions[target].clear()  # a change to one export's copy stays there
    assert registry.from_torchlib().functions[target] == second.functions[target] != []
    torch.manual_seed(0)
    module, x = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.LayerNorm(5)).eval(), torch.randn(BATCH, 6)
    written = []
    for from_torchlib in (registry.__dict__["from_torchlib"], classmethod(build)):  # ours, then PyTorch's own
        monkeypatch.setattr(registry, "from_torchlib", from_torchlib)
        path = tmp_path / f"{len(written)}.onnx"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (x,), str(path))
        written.append(path.read_bytes())
    assert written[0] == written[1]
