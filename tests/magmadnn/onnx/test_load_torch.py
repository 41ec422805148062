"""Models exported by PyTorch (``torch.onnx.export``) import, predict like PyTorch and onnxruntime, fine-tune with
``fit`` and save in magmadnn's own format: LeNet-5, a ResNet block (BatchNorm kept, a strided 1x1 shortcut), a
pre-LayerNorm transformer block whose hand-written attention becomes one MultiHeadAttention, and
nn.TransformerEncoderLayer / nn.MultiheadAttention (the batch folded into the heads) as one MultiHeadAttention."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import magmadnn as m
from tests.magmadnn._onnx_helpers import loads_like_ort, monnx, run_ort
from tests.magmadnn.backends import HOST, open_backend

torch = pytest.importorskip("torch")
nn = torch.nn


@pytest.fixture(scope="module", params=["host", pytest.param("device", marks=pytest.mark.native)])
def device(request):
    yield from open_backend(request.param)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                        nn.Linear(84, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class ResNetBlock(nn.Module):
    """A strided basic block (two 3x3 convolutions, a 1x1 shortcut, BatchNorm) and a classifier head."""

    def __init__(self, cin=3, cout=8, classes=5):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))
        self.head = nn.Linear(cout, classes)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + self.short(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _randomize_batch_norm(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    for layer in module.modules():
        if isinstance(layer, nn.BatchNorm2d):
            layer.running_mean.copy_(torch.randn(layer.num_features, generator=gen) * 0.3)
            layer.running_var.copy_(torch.rand(layer.num_features, generator=gen) + 0.5)
            layer.weight.data.copy_(torch.rand(layer.num_features, generator=gen) + 0.5)
            layer.bias.data.copy_(torch.randn(layer.num_features, generator=gen) * 0.1)


def _export(module, shape, path, fold=True, opset=17):
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(2, *shape),), str(path), input_names=["x"], output_names=["logits"],
                          opset_version=opset, dynamo=False, do_constant_folding=fold,
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    return str(path)


def _check_import_and_fine_tune(module, shape, path, device, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, *shape)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_ort(path, {"x": x}), expected, rtol=1e-4, atol=1e-5)
    model = monnx.load(path, device=device, seed=0)
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-4, atol=1e-4)
    # fine-tune: a few steps on one batch bring its loss down
    labels = rng.integers(0, expected.shape[1], len(x))
    model.compile(m.optimizers.Adam(3e-3), "cross_entropy", device=device)
    before = model.evaluate(x, labels, return_dict=True)["loss"]
    model.fit(x, labels, batch_size=8, epochs=4, verbose=0)
    after = model.evaluate(x, labels, return_dict=True)["loss"]
    assert np.isfinite(after) and after < before
    # ... and is saved in magmadnn's own format
    saved = model.save(tmp_path / "tuned.npz")
    np.testing.assert_allclose(m.load_model(saved, device=device).predict(x), model.predict(x), rtol=1e-5,
                               atol=1e-6)
    return model


def test_pytorch_lenet5_imports_predicts_and_fine_tunes(device, tmp_path):
    torch.manual_seed(0)
    module = LeNet5()
    path = _export(module, (1, 28, 28), tmp_path / "lenet5.onnx")
    model = _check_import_and_fine_tune(module, (1, 28, 28), path, device, tmp_path)
    assert [type(layer).__name__ for layer in model.layers] == [
        "Input", "Conv2D", "MaxPool2D", "Conv2D", "MaxPool2D", "Flatten", "Dense", "Dense", "Dense"]


def test_pytorch_resnet_block_imports_predicts_and_fine_tunes(device, tmp_path):
    torch.manual_seed(1)
    module = ResNetBlock()
    _randomize_batch_norm(module)
    path = _export(module, (3, 10, 10), tmp_path / "block.onnx", fold=False)
    model = _check_import_and_fine_tune(module, (3, 10, 10), path, device, tmp_path)
    names = [type(layer).__name__ for layer in model.layers]
    assert names.count("BatchNorm") == 3 and names.count("Add") == 1 and "GlobalAvgPool2D" in names


# ---------------------------------------------------------------------------------------------------- attention


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one fused q/k/v Linear split in three (``fused="slice"``: sliced) or three Linears, heads
    by view + transpose, the causal mask a registered tril buffer (masked_fill) or
    ``scaled_dot_product_attention(is_causal=True)``; ``scale`` multiplies the scores, ``divide`` divides them."""

    def __init__(self, width, heads, steps, fused=True, sdpa=False, scale=None, mask=None, divide=None):
        super().__init__()
        self.heads, self.fused, self.sdpa, self.scale, self.divide = heads, fused, sdpa, scale, divide
        if fused:
            self.c_attn = nn.Linear(width, 3 * width)
        else:
            self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.c_proj = nn.Linear(width, width)
        tril = torch.tril(torch.ones(steps, steps)) if mask is None else mask
        self.register_buffer("bias", tril.view(1, 1, steps, steps))

    def forward(self, x):
        b, t, c = x.size()
        if self.fused == "slice":
            qkv = self.c_attn(x)
            q, k, v = qkv[..., :c], qkv[..., c:2 * c], qkv[..., 2 * c:]
        else:
            q, k, v = self.c_attn(x).split(c, dim=2) if self.fused else (self.q(x), self.k(x), self.v(x))
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = q @ k.transpose(-2, -1)
            att = att / self.divide if self.divide else att * (self.scale or k.size(-1) ** -0.5)
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class TransformerBlock(nn.Module):
    """Pre-LayerNorm block (attention, a tanh-GELU MLP, residual Adds) and a classifier head."""

    def __init__(self, width=8, heads=2, steps=5, classes=4, **attention):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, steps, **attention)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))
        self.head = nn.Linear(steps * width, classes)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return self.head(x.flatten(1))


@pytest.mark.parametrize("attention", [{"fused": True}, {"fused": False, "sdpa": True}],
                         ids=["fused-masked_fill", "separate-sdpa"])
def test_pytorch_transformer_block_imports_predicts_and_fine_tunes(attention, device, tmp_path):
    torch.manual_seed(3)
    module = TransformerBlock(**attention)
    path = _export(module, (5, 8), tmp_path / "block.onnx", opset=20)  # opset 20: Gelu(approximate="tanh")
    model = _check_import_and_fine_tune(module, (5, 8), path, device, tmp_path)
    assert [type(layer).__name__ for layer in model.layers] == [
        "Input", "LayerNorm", "MultiHeadAttention", "Add", "LayerNorm", "Dense", "Dense", "Add", "Flatten", "Dense"]
    attn = model.layers[2]
    assert (attn.num_heads, attn.key_dim, attn.causal) == (2, 4, True)


def test_pytorch_attention_scale_is_folded_and_other_masks_refused(tmp_path):
    """Any scale is exact (folded into the query projection); a mask that is not causal is an error naming the
    node, never a different model."""
    torch.manual_seed(4)
    x = np.random.default_rng(4).standard_normal((3, 5, 8)).astype(np.float32)
    for i, module in enumerate([TransformerBlock(scale=0.3), TransformerBlock(fused="slice", divide=1.7)]):
        model = monnx.load(_export(module, (5, 8), tmp_path / f"scaled{i}.onnx", opset=20))
        assert "MultiHeadAttention" in [type(layer).__name__ for layer in model.layers]
        with torch.no_grad():
            np.testing.assert_allclose(model.predict(x), module(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)
    banded = torch.tril(torch.ones(5, 5)) - torch.tril(torch.ones(5, 5), -2)  # a sliding window of 2 keys
    path = _export(TransformerBlock(mask=banded), (5, 8), tmp_path / "banded.onnx", opset=20)
    with pytest.raises(monnx.UnsupportedOnnxError, match=r"\(Where\): attention pattern: this mask is not supported"):
        monnx.load(path, layers=True)
    loads_like_ort(path)  # as op nodes


# ---------------------------------------------------------------------------------- nn.MultiheadAttention


def _randomize(module, seed=5):
    """Non-zero biases and norms (PyTorch starts the attention biases at zero, which would hide their order)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5 + (1.0 if "norm" in name and "weight" in name
                                                                      else 0.0))


def test_pytorch_transformer_encoder_layer_imports_predicts_and_fine_tunes(device, tmp_path):
    """nn.TransformerEncoderLayer(batch_first=True, norm_first=True, tanh GELU): its nn.MultiheadAttention (the
    batch folded into the heads) becomes one MultiHeadAttention; dropout in eval exports as nothing."""
    _check_encoder_layer(True, "gelu_tanh", device, tmp_path)


def test_pytorch_post_norm_relu_encoder_layer_imports_and_fine_tunes(tmp_path):
    _check_encoder_layer(False, "relu", HOST, tmp_path)


def _check_encoder_layer(norm_first, activation, device, tmp_path):

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            act = nn.GELU(approximate="tanh") if activation == "gelu_tanh" else "relu"
            self.block = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation=act, batch_first=True,
                                                    norm_first=norm_first)
            self.head = nn.Linear(5 * 8, 4)

        def forward(self, x):
            return self.head(self.block(x).flatten(1))

    torch.manual_seed(6)
    module = Net()
    _randomize(module)
    path = _export(module, (5, 8), tmp_path / "encoder.onnx", opset=20)
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused eval path computes the exact GELU even for "tanh"
    try:
        model = _check_import_and_fine_tune(module, (5, 8), path, device, tmp_path)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    names = [type(layer).__name__ for layer in model.layers]
    assert names.count("MultiHeadAttention") == 1 and names.count("LayerNorm") == 2 and "Dropout" not in names
    attn = model.layers[names.index("MultiHeadAttention")]
    assert (attn.num_heads, attn.key_dim, attn.causal) == (2, 4, False)


class _Attention(nn.Module):
    """nn.MultiheadAttention in a wrapper: batch first, time-major (transposed around it), causal or not."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.attn = nn.MultiheadAttention(8, 2, batch_first=kind != "time_major")

    def forward(self, x):
        if self.kind == "time_major":
            x = x.transpose(0, 1)
            return self.attn(x, x, x, need_weights=False)[0].transpose(0, 1).flatten(1)
        if self.kind == "weights":  # need_weights=True (the default): another chain, refused
            return self.attn(x, x, x)[0].flatten(1)
        mask = nn.Transformer.generate_square_subsequent_mask(5)
        if self.kind == "band":  # a window of 2 keys: refused
            mask = torch.triu(torch.full((5, 5), float("-inf")), 1) + torch.tril(torch.full((5, 5), float("-inf")), -2)
        return self.attn(x, x, x, need_weights=False, attn_mask=mask, is_causal=self.kind == "causal")[0].flatten(1)


@pytest.mark.parametrize("kind", ["time_major", "causal", "mask"])
def test_pytorch_multihead_attention_module_imports(kind, tmp_path):
    """batch_first=False in a transposing wrapper, is_causal=True, and a causal attn_mask (a -inf triangle)."""
    torch.manual_seed(7)
    module = _Attention(kind).eval()
    _randomize(module)
    path = _export(module, (5, 8), tmp_path / "mha.onnx", opset=20)
    x = np.random.default_rng(7).standard_normal((3, 5, 8)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_ort(path, {"x": x}), expected, rtol=1e-4, atol=1e-5)
    model = monnx.load(path)
    assert [type(layer).__name__ for layer in model.layers] == ["Input", "MultiHeadAttention", "Flatten"]
    assert model.layers[1].causal == (kind != "time_major")
    np.testing.assert_allclose(model.predict(x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind,node", [("weights", r"MatMul_1' \(MatMul\): this product is not one of attention's"),
                                       ("band", r"Add_2' \(Add\): attention pattern: this mask is not supported")],
                         ids=["need_weights", "band_mask"])
def test_pytorch_multihead_attention_other_chains_are_clear_errors(kind, node, tmp_path):
    """need_weights=True (the weights averaged over heads) and a mask that is not causal: refused by node."""
    path = _export(_Attention(kind), (5, 8), tmp_path / "mha.onnx", opset=20)
    with pytest.raises(monnx.UnsupportedOnnxError, match=rf"ONNX node '[^']+{node}.*looks like PyTorch's "
                                                         r"nn.MultiheadAttention.*need_weights=False"):
        monnx.load(path, layers=True)
    loads_like_ort(path)  # as op nodes
