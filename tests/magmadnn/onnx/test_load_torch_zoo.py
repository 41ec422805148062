"""A small matrix of PyTorch models of the kinds users export (squeeze-and-excitation with ReLU6, input normalisation
by Sub/Div buffers, torch.chunk, layer-scale Mul, SiLU/Mish/HardSwish, bilinear upsampling, Conv1d + PReLU, a
bidirectional LSTM, a GRU returning both outputs, the class token x[:, 0], an Equal padding mask, two outputs,
scaled_dot_product_attention), exported with ``torch.onnx.export(model, (x,), path)`` (the default exporter, slow)
and ``dynamo=False``, loaded and compared with onnxruntime and PyTorch; one fine-tunes a few steps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from .._onnx_helpers import onnx  # noqa: F401 - skips the module without onnx

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
nn, tF = torch.nn, torch.nn.functional

class SE(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.f = nn.Conv2d(4, 4, 3, padding=1), nn.Linear(4, 4)

    def forward(self, x):
        y = tF.relu6(self.c(x))
        gate = torch.sigmoid(self.f(y.mean((2, 3))))
        return y * gate[:, :, None, None]


class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("m", torch.tensor([0.5, 0.4, 0.3, 0.2]).view(1, 4, 1, 1))
        self.register_buffer("sd", torch.tensor([0.2, 0.3, 0.4, 0.5]).view(1, 4, 1, 1))
        self.c, self.g = nn.Conv2d(4, 4, 1), nn.Parameter(torch.full((4, 1, 1), 0.1))

    def forward(self, x):
        a, b = torch.chunk(self.c((x - self.m) / self.sd), 2, dim=1)
        y = tF.silu(a) * self.g[:2] + tF.mish(b) + tF.hardswish(b)
        return tF.interpolate(y, scale_factor=2, mode="bilinear")


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.p = nn.Conv1d(4, 6, 3, padding=1), nn.PReLU()
        self.lstm = nn.LSTM(6, 5, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(10, 3, batch_first=True)

    def forward(self, x):
        y, _ = self.lstm(self.p(self.c(x)).transpose(1, 2))
        y, h = self.gru(y)
        return y[:, 0], h[0]


class Att(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.q(x).view(x.shape[0], x.shape[1], 3, 2, 4).permute(2, 0, 3, 1, 4)
        pad = (x[:, :, 0] == 0)
        y = tF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 8) + pad[:, :, None].float()


MODELS = {"se_relu6": (SE, (2, 4, 6, 6)), "normalise_chunk_upsample": (Norm, (2, 4, 5, 5)),
          "conv1d_lstm_gru": (Seq, (2, 4, 7)), "sdpa_mask": (Att, (2, 5, 8))}


def _export(name, dynamo, tmp_path):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    model = make().eval()
    x = torch.randn(*shape)
    path = str(tmp_path / f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, dynamo=dynamo)
    return model, x, path


@pytest.mark.parametrize("dynamo", [pytest.param(True, marks=pytest.mark.slow), False], ids=["default", "dynamo_false"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_predicts_like_onnxruntime_and_torch(name, dynamo, tmp_path):
    from magmadnn import onnx as monnx  # noqa: PLC0415

    model, x, path = _export(name, dynamo, tmp_path)
    session = ort.InferenceSession(path)
    want = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        torch_out = model(x)
    torch_out = [t.numpy() for t in (torch_out if isinstance(torch_out, tuple) else (torch_out,))]
    got = monnx.load(path).predict(x.numpy())
    got = list(got.values()) if isinstance(got, dict) else [got]
    assert len(got) == len(want)
    for g, w, t in zip(got, want, torch_out):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(g), t, rtol=1e-4, atol=1e-5)


def test_zoo_model_fine_tunes(tmp_path):
    from magmadnn import onnx as monnx  # noqa: PLC0415
    from magmadnn.optimizers import Adam  # noqa: PLC0415

    _, x, path = _export("se_relu6", False, tmp_path)
    model = monnx.load(path)
    target = np.random.default_rng(0).standard_normal(model.predict(x.numpy()).shape).astype(np.float32)
    model.compile(optimizer=Adam(learning_rate=0.01), loss="mse")
    before = float(np.mean((model.predict(x.numpy()) - target) ** 2))
    model.fit(x.numpy(), target, epochs=30, batch_size=2, verbose=0)
    after = float(np.mean((model.predict(x.numpy()) - target) ** 2))
    assert after < 0.9 * before, (before, after)


@pytest.mark.parametrize("name", ["se_relu6", "normalise_chunk_upsample"])
def test_zoo_model_input_gradient_matches_torch_autograd(name, tmp_path):
    from magmadnn import Tensor  # noqa: PLC0415
    from magmadnn import onnx as monnx  # noqa: PLC0415

    model, x, path = _export(name, False, tmp_path)
    loaded = monnx.load(path)
    ours = Tensor(x.numpy().copy(), requires_grad=True)
    out = loaded(ours)
    u = np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)
    out.backward(Tensor(u))
    theirs = x.clone().requires_grad_(True)
    (model(theirs) * torch.tensor(u)).sum().backward()
    np.testing.assert_allclose(np.asarray(ours.grad), theirs.grad.numpy(), rtol=1e-3, atol=1e-5)
