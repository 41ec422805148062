"""More tiny PyTorch models of the kinds users export every day, for the ONNX import zoo tests: ViT, EfficientNet's
MBConv, DenseNet, a U-Net with bilinear upsampling, an autoencoder, a TCN, a text CNN, masked recurrent encoders,
nn.Transformer with a causal mask, padding modes, more activations, channel/pixel shuffles and pools, gather and
scatter heads, unrolled cells, siamese and mixed-dtype two-input models, three outputs, attention written by hand.

``ZOO_MORE`` maps a family name to ``(factory, input maker, trains)`` as ``_torch_zoo.ZOO`` does; an input maker
may return a tuple (a model of several inputs).
"""

from __future__ import annotations

import torch

nn, tF = torch.nn, torch.nn.functional


def _img(c=3, h=8, w=8):
    return lambda b: torch.randn(b, c, h, w)


class ViT(nn.Module):
    """Patch-embedding Conv, a class token concatenated, learned positions, nn.TransformerEncoder, LayerNorm, head on
    x[:, 0]."""

    def __init__(self, d=8):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, 5, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 3)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], 1) + self.pos
        return self.head(self.norm(self.enc(h))[:, 0])


class MBConv(nn.Module):
    """EfficientNet's block: 1x1 expand + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation (SiLU, sigmoid),
    1x1 project, stochastic depth (identity in eval), residual; a stem and a pooled head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16),
                                nn.SiLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 4, 1), nn.SiLU(), nn.Conv2d(4, 16, 1),
                                nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, x):
        x = self.stem(x)
        y = self.dw(self.expand(x))
        y = self.project(y * self.se(y))
        if self.training:  # stochastic depth
            y = y * torch.bernoulli(torch.full((y.shape[0], 1, 1, 1), 0.8)) / 0.8
        return self.head(x + y)


class DenseNet(nn.Module):
    """A dense block (BN-ReLU-Conv layers whose outputs are concatenated, growth 4), a transition (1x1 conv,
    AvgPool2d), a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layers = nn.ModuleList(nn.Sequential(nn.BatchNorm2d(8 + 4 * i), nn.ReLU(),
                                                  nn.Conv2d(8 + 4 * i, 4, 3, padding=1, bias=False))
                                    for i in range(3))
        self.transition = nn.Sequential(nn.BatchNorm2d(20), nn.ReLU(), nn.Conv2d(20, 10, 1), nn.AvgPool2d(2))
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        feats = [self.stem(x)]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, 1)))
        y = self.transition(torch.cat(feats, 1))
        return self.fc(tF.adaptive_avg_pool2d(y, 1).flatten(1))


class UNet(nn.Module):
    """Two levels: MaxPool down, ConvTranspose2d up and F.interpolate(bilinear, align_corners=False) up, skip
    concatenations, BatchNorm."""

    def __init__(self):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.e1, self.e2, self.e3 = block(3, 4), block(4, 8), block(8, 8)
        self.up2 = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.d2, self.d1 = block(16, 4), block(8, 4)
        self.out = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(tF.max_pool2d(a, 2))
        c = self.e3(tF.max_pool2d(b, 2))
        d = self.d2(torch.cat([self.up2(c), b], 1))
        d = tF.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(self.d1(torch.cat([d, a], 1)))


class AutoEncoder(nn.Module):
    """Conv encoder, Flatten, Linear bottleneck, Linear, nn.Unflatten, ConvTranspose2d decoder, Sigmoid."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1), nn.ReLU(), nn.Conv2d(4, 8, 3, 2, 1), nn.ReLU(),
                                 nn.Flatten(), nn.Linear(32, 6))
        self.dec = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Unflatten(1, (8, 2, 2)),
                                 nn.ConvTranspose2d(8, 4, 3, 2, 1, output_padding=1), nn.ReLU(),
                                 nn.ConvTranspose2d(4, 1, 3, 2, 1, output_padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


class TCN(nn.Module):
    """Dilated causal Conv1d (padding on both sides, the right end sliced off), weight-normed, residual blocks."""

    def __init__(self):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.convs = nn.ModuleList(wn(nn.Conv1d(4 if i == 0 else 6, 6, 3, padding=2 * d, dilation=d))
                                   for i, d in enumerate((1, 2, 4)))
        self.down = nn.Conv1d(4, 6, 1)
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        y = x
        for i, (conv, d) in enumerate(zip(self.convs, (1, 2, 4))):
            z = tF.relu(conv(y)[:, :, :-2 * d])
            y = z + (self.down(y) if i == 0 else y)
        return self.fc(y[:, :, -1])


class TextCNN(nn.Module):
    """Token ids -> Embedding -> permute -> Conv1d of widths 2, 3, 4 -> max over time -> concat -> Dropout ->
    Linear."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(8, 4, k) for k in (2, 3, 4))
        self.drop, self.fc = nn.Dropout(0.5), nn.Linear(12, 3)

    def forward(self, ids):
        h = self.emb(ids).permute(0, 2, 1)
        pooled = [tF.relu(c(h)).max(dim=2).values for c in self.convs]
        return self.fc(self.drop(torch.cat(pooled, 1)))


def _ids(vocab=30, t=9):
    def make(b):
        ids = torch.randint(1, vocab, (b, t))
        for i in range(b):
            ids[i, t - 1 - (i % 3):] = 0  # variable lengths, padded with 0
        return ids
    return make


class MaskedGRU(nn.Module):
    """Variable-length sequences without packing: ids padded with 0, an embedding, a GRU, the outputs masked, mean
    over the valid steps, and the output at the last valid step (gather by the lengths)."""

    def __init__(self):
        super().__init__()
        self.emb, self.gru = nn.Embedding(30, 6), nn.GRU(6, 5, batch_first=True)
        self.fc = nn.Linear(10, 2)

    def forward(self, ids):
        mask = (ids != 0).float()
        y, _ = self.gru(self.emb(ids))
        mean = (y * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        last = (mask.sum(1).long() - 1).clamp(min=0)
        at_last = y.gather(1, last.view(-1, 1, 1).expand(-1, 1, y.shape[2])).squeeze(1)
        return self.fc(torch.cat([mean, at_last], 1))


class MaskedLSTM(nn.Module):
    """A float sequence whose padded steps are zero: an LSTM, the mask by `x.abs().sum(-1) > 0`, masked max
    pooling."""

    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(4, 6, batch_first=True), nn.Linear(6, 2)

    def forward(self, x):
        mask = x.abs().sum(-1) > 0
        y, _ = self.lstm(x)
        y = y.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(1)
        return self.fc(y)


def _padded_seq(c=4, t=7):
    def make(b):
        x = torch.randn(b, t, c)
        for i in range(b):
            x[i, t - 1 - (i % 3):] = 0
        return x
    return make


class Seq2SeqTransformer(nn.Module):
    """nn.Transformer (one encoder and one decoder layer, batch_first), the target the first steps of the input
    projected, with a causal mask from generate_square_subsequent_mask."""

    def __init__(self, d=8):
        super().__init__()
        self.inp, self.tgt = nn.Linear(4, d), nn.Linear(4, d)
        self.tr = nn.Transformer(d, 2, 1, 1, 16, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        tgt = self.tgt(x[:, :4])
        mask = nn.Transformer.generate_square_subsequent_mask(4)
        return self.out(self.tr(self.inp(x), tgt, tgt_mask=mask, tgt_is_causal=True))


class CausalDecoder(nn.Module):
    """A GPT-style stack: nn.TransformerDecoder over its own memory with causal masks, a causal
    nn.TransformerEncoder layer (mask + is_causal), token and learned position embeddings."""

    def __init__(self, d=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(30, d), nn.Embedding(9, d)
        self.enc = nn.TransformerEncoderLayer(d, 2, 16, batch_first=True)
        self.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 2, 16, batch_first=True), 1)
        self.lm = nn.Linear(d, 30)

    def forward(self, ids):
        t = ids.shape[1]
        h = self.tok(ids) + self.pos(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        mem = self.enc(h, src_mask=mask, is_causal=True)
        return self.lm(self.dec(h, mem, tgt_mask=mask, memory_mask=mask, tgt_is_causal=True))


class Paddings(nn.Module):
    """ReflectionPad2d, ReplicationPad2d, ZeroPad2d, ConstantPad1d, Conv2d with padding_mode reflect and circular,
    F.pad with negative padding (a crop)."""

    def __init__(self):
        super().__init__()
        self.refl, self.repl, self.zero = nn.ReflectionPad2d(1), nn.ReplicationPad2d((1, 2, 0, 1)), nn.ZeroPad2d(1)
        self.c1 = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular")
        self.c3 = nn.Conv2d(4, 4, 3, padding=1, padding_mode="replicate")
        self.const = nn.ConstantPad1d((2, 1), 0.5)

    def forward(self, x):
        y = self.c3(self.c2(self.c1(x)))
        a = self.refl(y)[:, :, :8, :8] + self.zero(y)[:, :, 1:9, 1:9]
        b = tF.pad(self.repl(y), (-1, -2, 0, -1))
        z = (a + b).flatten(2)
        return self.const(z)


class ActivationsMore(nn.Module):
    """Hardtanh, ReLU6, LogSigmoid, Softmin, GLU, Tanhshrink, Softsign, Hardshrink, Softshrink, CELU, F.normalize
    (L1 and L2). (RReLU: the default exporter has no form for it.)"""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(6, 12)
        self.acts = nn.ModuleList([nn.Hardtanh(-0.5, 0.8), nn.ReLU6(), nn.LogSigmoid(), nn.Softmin(-1),
                                   nn.Tanhshrink(), nn.Softsign(), nn.Hardshrink(0.3), nn.Softshrink(0.2),
                                   nn.CELU(0.7)])
        self.glu = nn.GLU(-1)

    def forward(self, x):
        y = self.f(x)
        out = self.glu(y)
        for act in self.acts:
            out = out + act(y)[:, :6]
        return torch.cat([out, tF.normalize(y, dim=-1), tF.normalize(y, p=1.0, dim=-1)], 1)


class ShufflePools(nn.Module):
    """ChannelShuffle, PixelUnshuffle, MaxPool2d with dilation, AdaptiveAvgPool2d to (7, 7) from 10x10 (sizes it
    does not divide), AdaptiveMaxPool2d to 1, a 1x1 convolution classifier head with Flatten(1). (AdaptiveMaxPool2d
    to more than 1: the default exporter has no form for it.)"""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.shuffle, self.unshuffle = nn.ChannelShuffle(2), nn.PixelUnshuffle(2)
        self.head = nn.Sequential(nn.Conv2d(64, 3, 1), nn.Flatten(1))

    def forward(self, x):
        y = self.shuffle(tF.relu(self.c(x)))  # (B, 8, 10, 10)
        a = tF.adaptive_avg_pool2d(y, (7, 7))
        b = tF.max_pool2d(y, 3, stride=1, dilation=2)  # (B, 8, 6, 6)
        u = self.unshuffle(a[:, :, :6, :6] + b)  # (B, 32, 3, 3)
        m = tF.adaptive_max_pool2d(torch.cat([u, u * 0.5], 1), (1, 1))
        return self.head(m)


class BilinearWeightNorm(nn.Module):
    """nn.Bilinear of two projections, a weight_norm'd Linear (the parametrization), nn.CosineSimilarity."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 5), nn.Linear(6, 4)
        self.bil = nn.Bilinear(5, 4, 3)
        self.wn = nn.utils.parametrizations.weight_norm(nn.Linear(6, 3))
        self.cos = nn.CosineSimilarity(dim=1)

    def forward(self, x):
        a, b = torch.tanh(self.a(x)), torch.tanh(self.b(x))
        return self.bil(a, b) + self.wn(x) + self.cos(a[:, :4], b).unsqueeze(1)


class GatherScatterHeads(nn.Module):
    """torch.gather by an argmax, scatter and scatter_add, index_select, sort, topk indices used as data, three
    outputs (values, an int64 argmax, probabilities)."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(6, 8)
        self.register_buffer("perm", torch.tensor([3, 1, 0, 2]))

    def forward(self, x):
        y = self.f(x)
        idx = y.argmax(-1, keepdim=True)
        picked = torch.gather(y, 1, idx)
        one_hot = torch.zeros_like(y).scatter(1, idx, 1.0)
        added = torch.zeros(x.shape[0], 4).scatter_add(1, torch.tensor([[0, 1, 1, 2, 3, 3, 0, 2]]).expand(
            x.shape[0], -1), y)
        srt, order = torch.sort(y, dim=-1, descending=True)
        _, top = torch.topk(y, 2, dim=-1)
        sel = torch.index_select(added, 1, self.perm)
        values = torch.cat([picked, srt[:, :3], sel, top.float(), order[:, :1].float(), one_hot * y], 1)
        return values, y.argmax(-1), torch.softmax(y, -1)


class UnrolledCells(nn.Module):
    """LSTMCell, GRUCell and RNNCell unrolled over the steps by a Python loop, the states starting at zero."""

    def __init__(self):
        super().__init__()
        self.lstm, self.gru, self.rnn = nn.LSTMCell(4, 5), nn.GRUCell(5, 5), nn.RNNCell(5, 3, nonlinearity="relu")
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        b = x.shape[0]
        h = c = g = torch.zeros(b, 5)
        r = torch.zeros(b, 3)
        for t in range(x.shape[1]):
            h, c = self.lstm(x[:, t], (h, c))
            g = self.gru(h, g)
            r = self.rnn(g, r)
        return self.fc(r)


class Siamese(nn.Module):
    """Two inputs through one shared encoder; the pairwise distance, cosine similarity and |a - b| head."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                 nn.Linear(64, 6))
        self.fc = nn.Linear(8, 1)

    def forward(self, a, b):
        ea, eb = self.enc(a), self.enc(b)
        d = tF.pairwise_distance(ea, eb).unsqueeze(1)
        s = tF.cosine_similarity(ea, eb).unsqueeze(1)
        return self.fc(torch.cat([(ea - eb).abs(), d, s], 1))


class MixedDtype(nn.Module):
    """An int64 category input and a float feature input: embeddings of the categories, concatenated with the
    normalised features, an MLP."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 3)
        self.bn = nn.BatchNorm1d(5)
        self.mlp = nn.Sequential(nn.Linear(2 * 3 + 5, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, cats, feats):
        return self.mlp(torch.cat([self.emb(cats).flatten(1), self.bn(feats)], 1))


class AttentionByHand(nn.Module):
    """Causal attention written out: einsum("bhqd,bhkd->bhqk"), tril mask by masked_fill, softmax, matmul, cumsum
    of the values (a running mean), baddbmm."""

    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(8, 24), nn.Linear(8, 8)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 4).permute(2, 0, 3, 1, 4)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / 2.0
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
        w = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
        y = torch.einsum("bhqk,bhkd->bhqd", w, v)
        run = torch.cumsum(v, 2) / torch.arange(1, t + 1, dtype=torch.float32).view(1, 1, t, 1)
        y = (y + run).transpose(1, 2).reshape(b, t, 8)
        return self.o(y) + torch.triu(torch.ones(t, 8), diagonal=1)


class MLPMixer(nn.Module):
    """Patch embedding, token-mixing MLP on the transposed patches, channel-mixing MLP, LayerNorms, mean pooling."""

    def __init__(self, d=8, n=4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(n, 8), nn.GELU(), nn.Linear(8, n))
        self.ch = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        h = self.patch(x).flatten(2).transpose(1, 2)
        h = h + self.tok(self.ln1(h).transpose(1, 2)).transpose(1, 2)
        h = h + self.ch(self.ln2(h))
        return self.head(h.mean(1))


class VGGish(nn.Module):
    """Conv-BN-ReLU stacks with MaxPool, AdaptiveAvgPool2d((7, 7)) from 4x4 (upsampling), Flatten, Dropout,
    Linear layers (torchvision's VGG classifier shape), nn.Threshold."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(2, 2))
        self.pool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(4 * 49, 16), nn.Threshold(0.1, -1.0), nn.Dropout(),
                                        nn.Linear(16, 3))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class EmbeddingBagLike(nn.Module):
    """nn.EmbeddingBag (mean, fixed-length bags), an embedding with max_norm at inference, a one-hot head."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 6, mode="mean")
        self.fc = nn.Linear(6, 4)

    def forward(self, ids):
        return self.fc(self.bag(ids)) + tF.one_hot(ids[:, 0] % 4, 4).float()


class MobileNetV3Block(nn.Module):
    """MobileNetV3's block: HardSwish stem, depthwise 5x5 stride 2, squeeze-and-excitation gated by Hardsigmoid,
    ReLU, a Hardswish head with Dropout."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 5, 2, 2, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 4, 1), nn.ReLU(), nn.Conv2d(4, 8, 1),
                                nn.Hardsigmoid())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 6), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(6, 3))

    def forward(self, x):
        y = self.dw(self.stem(x))
        y = y * self.se(y)
        return self.head(tF.adaptive_avg_pool2d(y, 1))


class MHAVariants(nn.Module):
    """nn.MultiheadAttention sequence-first (batch_first=False) with an additive float attn_mask and the averaged
    attention weights returned (need_weights), and a cross-attention with kdim/vdim other than embed_dim."""

    def __init__(self):
        super().__init__()
        self.self_att = nn.MultiheadAttention(8, 2)
        self.cross = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, batch_first=True)
        self.k, self.v = nn.Linear(8, 4), nn.Linear(8, 6)
        self.register_buffer("bias", torch.triu(torch.full((5, 5), -1e4), 1))

    def forward(self, x):
        s = x.transpose(0, 1)
        y, w = self.self_att(s, s, s, attn_mask=self.bias)
        y = y.transpose(0, 1)
        z, _ = self.cross(y, self.k(x), self.v(x), need_weights=False)
        return z, w


class RecurrentStates(nn.Module):
    """An LSTM given learned initial states (expanded to the batch) returning its output and both final states, and
    a two-layer bidirectional GRU whose final hidden states are concatenated."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True)
        self.h0, self.c0 = nn.Parameter(torch.randn(1, 1, 5) * 0.1), nn.Parameter(torch.randn(1, 1, 5) * 0.1)
        self.gru = nn.GRU(5, 3, num_layers=2, batch_first=True, bidirectional=True)

    def forward(self, x):
        b = x.shape[0]
        y, (h, c) = self.lstm(x, (self.h0.expand(1, b, 5).contiguous(), self.c0.expand(1, b, 5).contiguous()))
        _, g = self.gru(y)
        return y, torch.cat([h[0], c[0]], 1), g.transpose(0, 1).reshape(b, -1)


class Signal1d(nn.Module):
    """Audio-style 1-D layers: dilated Conv1d, F.interpolate on rank 3 (linear, nearest), ConvTranspose1d with
    output_padding, a depthwise ConvTranspose1d (groups), AvgPool1d with padding, AdaptiveMaxPool1d to 1."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv1d(2, 4, 3, dilation=2, padding=2)
        self.up = nn.ConvTranspose1d(4, 4, 3, stride=2, padding=1, output_padding=1)
        self.dw = nn.ConvTranspose1d(4, 4, 2, stride=2, groups=4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = tF.relu(self.c(x))
        a = tF.interpolate(y, scale_factor=2, mode="linear", align_corners=False)
        b = tF.interpolate(y, size=a.shape[-1], mode="nearest")
        z = self.dw(tF.avg_pool1d(self.up(y), 2, padding=1, count_include_pad=False))
        return self.fc(tF.adaptive_max_pool1d(a + b, 1).squeeze(-1)) + z.mean(-1)[:, :2]


class HandNorms(nn.Module):
    """Normalisations written by hand or new in PyTorch: ConvNeXt's LayerNorm2d over the channel axis (mean, var
    with keepdim), nn.RMSNorm, torch.var_mean, nn.LocalResponseNorm."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, padding=1)
        self.w, self.b = nn.Parameter(torch.ones(6, 1, 1)), nn.Parameter(torch.zeros(6, 1, 1))
        self.rms = nn.RMSNorm(6)
        self.lrn = nn.LocalResponseNorm(3)

    def forward(self, x):
        y = self.c(x)
        u = y.mean(1, keepdim=True)
        s = (y - u).pow(2).mean(1, keepdim=True)
        y = self.w * (y - u) / torch.sqrt(s + 1e-6) + self.b
        var, mean = torch.var_mean(y, dim=(2, 3), keepdim=True)
        y = self.lrn((y - mean) / torch.sqrt(var + 1e-5))
        return self.rms(y.permute(0, 2, 3, 1)).mean((1, 2))


class SDPAVariants(nn.Module):
    """F.scaled_dot_product_attention with a boolean attn_mask (padding of the keys), an explicit scale, and
    grouped-query attention written by repeat_interleave of the key and value heads."""

    def __init__(self):
        super().__init__()
        self.q, self.kv, self.o = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 4, 2).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, 2, 2).permute(2, 0, 3, 1, 4)
        k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        keep = (x.abs().sum(-1) > 0).view(b, 1, 1, t)
        y = tF.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.3)
        return self.o(y.transpose(1, 2).reshape(b, t, 8))


class SpatialTransformer(nn.Module):
    """A spatial transformer network: a localisation net predicts an affine theta, F.affine_grid makes the sampling
    grid, F.grid_sample (bilinear, zeros padding) warps the input, a classifier follows."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                 nn.Linear(16, 6))
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        grid = tF.affine_grid(theta, list(x.shape), align_corners=False)
        return self.fc(tF.grid_sample(x, grid, align_corners=False).flatten(1))


class LSTMProjection(nn.Module):
    """nn.LSTM with proj_size (the hidden state projected): the default exporter writes an LSTM node whose initial
    cell state disagrees with its hidden_size (onnxruntime rejects the file too)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True, proj_size=3)

    def forward(self, x):
        return self.lstm(x)[0]


#: the batch axis of a family's input where it is not the first
BATCH_AXIS_MORE: dict[str, int] = {}

ZOO_MORE = {
    "vit": (ViT, _img(), True),
    "mbconv": (MBConv, _img(), True),
    "densenet": (DenseNet, _img(), True),
    "unet_bilinear": (UNet, _img(), True),
    "autoencoder": (AutoEncoder, _img(1, 8, 8), True),
    "tcn": (TCN, lambda b: torch.randn(b, 4, 12), True),
    "text_cnn": (TextCNN, _ids(), True),
    "masked_gru": (MaskedGRU, _ids(), True),
    "masked_lstm": (MaskedLSTM, _padded_seq(), True),
    "seq2seq_transformer": (Seq2SeqTransformer, lambda b: torch.randn(b, 6, 4), True),
    "causal_decoder": (CausalDecoder, _ids(t=7), True),
    "paddings": (Paddings, _img(), True),
    "activations_more": (ActivationsMore, lambda b: torch.randn(b, 6) * 2, True),
    "shuffle_pools": (ShufflePools, _img(h=10, w=10), True),
    "bilinear_weight_norm": (BilinearWeightNorm, lambda b: torch.randn(b, 6), True),
    "gather_scatter": (GatherScatterHeads, lambda b: torch.randn(b, 6), False),
    "unrolled_cells": (UnrolledCells, lambda b: torch.randn(b, 4, 4), True),
    "siamese": (Siamese, lambda b: (torch.randn(b, 1, 8, 8), torch.randn(b, 1, 8, 8)), True),
    "mixed_dtype": (MixedDtype, lambda b: (torch.randint(0, 10, (b, 2)), torch.randn(b, 5)), True),
    "attention_by_hand": (AttentionByHand, lambda b: torch.randn(b, 5, 8), True),
    "mlp_mixer": (MLPMixer, _img(), True),
    "vggish": (VGGish, _img(h=16, w=16), True),
    "embedding_bag": (EmbeddingBagLike, _ids(t=4), True),
    "mobilenetv3": (MobileNetV3Block, _img(h=16, w=16), True),
    "mha_variants": (MHAVariants, lambda b: torch.randn(b, 5, 8), False),
    "recurrent_states": (RecurrentStates, lambda b: torch.randn(b, 6, 4), False),
    "signal_1d": (Signal1d, lambda b: torch.randn(b, 2, 10), True),
    "hand_norms": (HandNorms, _img(), True),
    "sdpa_variants": (SDPAVariants, _padded_seq(8, 5), True),
    "spatial_transformer": (SpatialTransformer, _img(1, 8, 8), True),
    "lstm_projection": (LSTMProjection, lambda b: torch.randn(b, 5, 4), False),
}
