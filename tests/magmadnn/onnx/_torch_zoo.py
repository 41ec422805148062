"""Tiny PyTorch models of the kinds users export every day (one per family), for the ONNX import zoo tests.

``ZOO`` maps a family name to ``(factory, input maker, trains)``: the factory builds the module (seeded by the
caller), the input maker returns the example input for a batch size, ``trains`` says whether a few ``fit`` steps are
meaningful (float input, float output, something trainable on the way).
"""

from __future__ import annotations

import torch

nn, tF = torch.nn, torch.nn.functional


def _img(c=3, h=8, w=8):
    return lambda b: torch.randn(b, c, h, w)


class MobileNetV2Block(nn.Module):
    """Inverted residual: 1x1 expand, depthwise 3x3, 1x1 project, BatchNorm + ReLU6 (Clip), then pooled head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                                   nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16),
                                   nn.ReLU6(), nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8, 5))

    def forward(self, x):
        y = self.stem(x)
        return self.head(y + self.block(y))


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, LayerNorm over channels-last (permute), MLP with GELU, layer-scale Mul, residual."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 2, stride=2)
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.5))

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(tF.gelu(self.fc1(self.norm(y))))
        return (x + y.permute(0, 3, 1, 2)).mean((2, 3))


class SqueezeExcite(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.f1, self.f2 = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)

    def forward(self, x):
        y = tF.relu(self.c(x))
        gate = torch.sigmoid(self.f2(tF.relu(self.f1(tF.adaptive_avg_pool2d(y, 1)))))
        return y * gate


class NormaliseChunkResize(nn.Module):
    """Input normalised by mean/std buffers (Sub, Div), torch.chunk (Split), bilinear upsampling by a scale and
    Resize by sizes (nearest and bilinear)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.c = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        a, b, c = torch.chunk(self.c((x - self.mean) / self.std), 3, dim=1)
        a = tF.interpolate(a, scale_factor=2, mode="bilinear", align_corners=False)
        b = tF.interpolate(b, size=(16, 16), mode="nearest")
        c = tF.interpolate(c, size=(16, 16), mode="bilinear", align_corners=True)
        return torch.cat([a, b, c], 1)


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.prelu = nn.PReLU(4)

    def forward(self, x):
        y = self.c(x)
        return (tF.silu(y) + tF.mish(y) + tF.hardswish(y) + self.prelu(y) + tF.hardsigmoid(y) + tF.elu(y)
                + tF.leaky_relu(y, 0.1) + tF.softplus(y) + tF.gelu(y, approximate="tanh") + tF.selu(y))


class Conv1dNet(nn.Module):
    """A 1-D CNN for audio or text: Conv1d on rank-3 tensors, BatchNorm1d, pools (max, avg ceil_mode), global pool."""

    def __init__(self):
        super().__init__()
        self.c1, self.bn = nn.Conv1d(4, 8, 5, padding=2), nn.BatchNorm1d(8)
        self.c2 = nn.Conv1d(8, 8, 3, stride=2, dilation=1, padding=1, groups=2)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y = tF.max_pool1d(tF.relu(self.bn(self.c1(x))), 2)
        y = tF.avg_pool1d(tF.relu(self.c2(y)), 3, stride=2, ceil_mode=True)
        return self.fc(tF.adaptive_avg_pool1d(y, 1).flatten(1))


class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(10, 2)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class GRUEncoder(nn.Module):
    """Returns both outputs (the sequence and the last hidden state)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 6, batch_first=True)

    def forward(self, x):
        y, h = self.gru(x)
        return y, h[-1]


class ClassTokenMaskTwoOutputs(nn.Module):
    """x[:, 0] (BERT's class token), a padding mask by Equal, two outputs."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(6, 6)

    def forward(self, x):
        y = torch.tanh(self.f(x))
        pad = (x[:, :, 0] == 0).unsqueeze(-1)
        pooled = y.masked_fill(pad, 0.0).sum(1)
        return y[:, 0], pooled


class SDPA(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(8, 24), nn.Linear(8, 8)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 4).permute(2, 0, 3, 1, 4)
        y = tF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, 8))


class MHABlock(nn.Module):
    """A pre-norm transformer block with nn.MultiheadAttention (batch_first) and a key padding mask."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(8), nn.LayerNorm(8)
        self.att = nn.MultiheadAttention(8, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        h = self.ln1(x)
        y, _ = self.att(h, h, h, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln2(x))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, batch_first=True)

    def forward(self, x):
        return self.enc(x)


class BertLike(nn.Module):
    """Token ids -> token + positional embedding, LayerNorm, attention with a padding mask from ids == 0, pooled."""

    def __init__(self, vocab=20, t=6, d=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(t, d)
        self.ln = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, 2, batch_first=True)
        self.cls = nn.Linear(d, 2)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.ln(self.tok(ids) + self.pos(pos))
        y, _ = self.att(h, h, h, key_padding_mask=ids == 0, need_weights=False)
        return self.cls(y[:, 0])


def _ids(b):
    ids = torch.randint(1, 20, (b, 6))
    ids[:, -2:] = 0
    return ids


class ResNetBasic(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.a = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.b = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                               nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = self.stem(x)
        x = tF.relu(x + self.a(x))
        x = tF.relu(self.down(x) + self.b(x))
        return self.fc(torch.flatten(tF.adaptive_avg_pool2d(x, (1, 1)), 1))


class UNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.InstanceNorm2d(8, affine=True), nn.ReLU())
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.d = nn.Conv2d(8, 2, 3, padding=1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(tF.max_pool2d(a, 2))
        return self.d(torch.cat([self.up(b), a], 1))


class PoolsNorms(nn.Module):
    """GroupNorm, InstanceNorm (no affine), depthwise conv, AvgPool with ceil_mode and count_include_pad, adaptive
    average pooling to 2x2, Flatten."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3)
        self.gn, self.inorm = nn.GroupNorm(3, 6), nn.InstanceNorm2d(6)
        self.dw = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.fc = nn.Linear(24, 3)

    def forward(self, x):
        y = self.inorm(self.dw(self.gn(self.c(x))))
        y = tF.avg_pool2d(y, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        y = tF.avg_pool2d(y, 3, stride=1, padding=1, count_include_pad=True)
        return self.fc(nn.Flatten()(tF.adaptive_avg_pool2d(y, 2)))


class Indexing(nn.Module):
    """torch.where, masked_fill, cumsum, topk, a slice, softmax/log-softmax, clamp, pow."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(6, 6)

    def forward(self, x):
        y = self.f(x)
        y = torch.where(y > 0, y, 0.5 * y).masked_fill(x < -1.5, -1.0)
        c = torch.cumsum(y, dim=1)
        top, _ = torch.topk(c, 3, dim=-1)
        z = torch.log_softmax(y, -1)[:, 1:5] + torch.clamp(y, -0.5, 0.5).pow(2)[:, :4]
        return torch.cat([top, z], 1)


class BertEncoder(nn.Module):
    """Token embedding (padding_idx) + a learned positional table, nn.TransformerEncoder (two layers) with
    src_key_padding_mask, the class token."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(20, 8, padding_idx=0), nn.Parameter(torch.randn(1, 6, 8) * 0.1)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                         enable_nested_tensor=False)
        self.fc = nn.Linear(8, 2)

    def forward(self, ids):
        h = self.tok(ids) + self.pos[:, :ids.shape[1]]
        return self.fc(self.enc(h, src_key_padding_mask=ids == 0)[:, 0])


class SequenceFirstLSTM(nn.Module):
    """batch_first=False: the input is (T, B, F), the last hidden state read."""

    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(4, 5), nn.Linear(5, 2)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


class UpsampleBicubic(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.up = nn.Conv2d(3, 4, 3, padding=1), nn.Upsample(scale_factor=2)

    def forward(self, x):
        return tF.interpolate(self.up(self.c(x)), scale_factor=0.5, mode="bicubic", align_corners=False)


class GatedStats(nn.Module):
    """A GLU by chunk, LayerNorm over the last two axes, statistics (amax, argmax, norm, std, var), einsum."""

    def __init__(self):
        super().__init__()
        self.f, self.ln = nn.Linear(6, 12), nn.LayerNorm([5, 6])
        self.w = nn.Parameter(torch.randn(2, 6, 3) * 0.3)

    def forward(self, x):
        a, b = self.f(x).chunk(2, -1)
        y = self.ln(a * torch.sigmoid(b))
        z = torch.einsum("btd,hdk->bthk", y, self.w).flatten(2)
        stats = torch.stack([y.amax(-1), y.argmax(-1).float(), y.norm(dim=-1), y.std(-1), y.var(-1)], -1)
        return torch.cat([z, stats], -1)


class PixelShuffleGRU(nn.Module):
    """PixelShuffle, MaxPool2d ceil_mode, then a two-layer GRU with an explicit zero initial state."""

    def __init__(self):
        super().__init__()
        self.c, self.p = nn.Conv2d(3, 12, 3, padding=1), nn.PixelShuffle(2)
        self.gru = nn.GRU(3, 5, num_layers=2, batch_first=True)

    def forward(self, x):
        y = tF.max_pool2d(self.p(self.c(x)), 3, 2, ceil_mode=True)  # (B, 3, 5, 5)
        seq = y.flatten(2).transpose(1, 2)
        out, _ = self.gru(seq, torch.zeros(2, x.shape[0], 5))
        return out.mean(1)


def _seq(c=4, t=7):
    return lambda b: torch.randn(b, t, c)


def _tokens(d=6, t=5):
    def make(b):
        x = torch.randn(b, t, d)
        x[:, -1] = 0
        return x
    return make


#: the batch axis of a family's input where it is not the first
BATCH_AXIS = {"sequence_first_lstm": 1}

ZOO = {
    "mobilenetv2": (MobileNetV2Block, _img(), True),
    "convnext": (ConvNeXtBlock, _img(), True),
    "squeeze_excite": (SqueezeExcite, _img(), True),
    "normalise_chunk_resize": (NormaliseChunkResize, _img(), True),
    "activations": (Activations, _img(), True),
    "conv1d": (Conv1dNet, lambda b: torch.randn(b, 4, 16), True),
    "bilstm": (BiLSTM, _seq(), True),
    "gru_two_outputs": (GRUEncoder, _seq(), False),
    "cls_token_mask": (ClassTokenMaskTwoOutputs, _tokens(), False),
    "sdpa": (SDPA, _seq(8, 5), True),
    "mha_block": (MHABlock, _seq(8, 5), True),
    "encoder_layer": (EncoderLayer, _seq(8, 5), True),
    "bert_like": (BertLike, _ids, True),
    "resnet_basic": (ResNetBasic, _img(), True),
    "unetish": (UNetish, _img(), True),
    "pools_norms": (PoolsNorms, _img(h=9, w=9), True),
    "indexing": (Indexing, lambda b: torch.randn(b, 6) * 2, True),
    "bert_encoder": (BertEncoder, _ids, True),
    "sequence_first_lstm": (SequenceFirstLSTM, lambda b: torch.randn(7, b, 4), False),
    "upsample_bicubic": (UpsampleBicubic, _img(), True),
    "gated_stats": (GatedStats, lambda b: torch.randn(b, 5, 6), True),
    "pixel_shuffle_gru": (PixelShuffleGRU, _img(h=5, w=5), True),
}
