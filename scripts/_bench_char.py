"""The char-transformer recipe of ``bench.py``: the same GPT-style character model in magmadnn and PyTorch.

Data: the text of CPython's ``pydoc_data.topics`` (or generated text in a dry run), windows of CONTEXT + 1
characters; the model: ``zoo.char_transformer`` (token + learned position embeddings, BLOCKS pre-LayerNorm causal
attention blocks with GELU MLPs, a final LayerNorm and the logits); Adam at LR, batch BATCH. Rows count sequences
per second (each CONTEXT characters) in ``images_per_s`` and next-character accuracy on the validation windows in
``test_accuracy``, like the image recipes.
"""

from __future__ import annotations

import math

import numpy as np

CONTEXT, DIM, HEADS, BLOCKS, BATCH, LR = 64, 64, 4, 2, 32, 3e-3


def text_windows(dry_run: bool, n_train: int = 1024, n_val: int = 256, seed: int = 0):
    """(x, y, x_val, y_val, vocab): int64 windows of CONTEXT characters and the next character at each position."""
    if dry_run:
        rng = np.random.default_rng(seed)
        text = "".join(rng.choice(list("abcdefgh ."), 8 * (n_train + n_val) + CONTEXT + 1))
    else:
        import pydoc_data.topics as topics

        text = "".join(topics.topics[k] for k in sorted(topics.topics))
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text[: 400_000]], dtype=np.int64)
    cut = int(0.9 * len(ids))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, cut - CONTEXT - 1, n_train)
    val_starts = np.arange(cut, len(ids) - CONTEXT - 1, CONTEXT)[:n_val]
    windows = np.stack([ids[s: s + CONTEXT + 1] for s in starts])
    val = np.stack([ids[s: s + CONTEXT + 1] for s in val_starts])
    return windows[:, :-1], windows[:, 1:], val[:, :-1], val[:, 1:], len(vocab)


class CharMagmadnnRunner:
    name = "magmadnn"

    def __init__(self, data, seed, batch=BATCH):
        from magmadnn import optimizers, zoo

        self.x, self.y, self.xv, self.yv, vocab = data
        self.model = zoo.char_transformer((CONTEXT,), vocab, dim=DIM, heads=HEADS, blocks=BLOCKS)
        self.model.compile(optimizers.Adam(LR), loss="cross_entropy", seed=seed, device="host")
        self.batch = batch

    def epoch(self):
        self.model.fit(self.x, self.y, batch_size=self.batch, epochs=1, shuffle=True, verbose=0)

    def accuracy(self):
        logits = self.model.predict(self.xv, batch_size=256)
        return float((logits.argmax(-1) == self.yv).mean())


def torch_char_transformer(vocab: int, seed: int):
    """The zoo's char transformer in PyTorch: the same layers, weight shapes and initial scales."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(DIM, DIM) for _ in range(4))

        def forward(self, x):
            b, t, _ = x.shape

            def heads(y):
                return y.view(b, t, HEADS, DIM // HEADS).transpose(1, 2)

            o = nn.functional.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)),
                                                           is_causal=True)
            return self.o(o.transpose(1, 2).reshape(b, t, DIM))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attention, self.norm2 = nn.LayerNorm(DIM), Attention(), nn.LayerNorm(DIM)
            self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(approximate="tanh"), nn.Linear(4 * DIM, DIM))

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, DIM)
            self.positions = nn.Parameter(torch.empty(CONTEXT, DIM).uniform_(-1, 1) * math.sqrt(6 / (CONTEXT + DIM)))
            self.blocks = nn.Sequential(*(Block() for _ in range(BLOCKS)))
            self.norm, self.out = nn.LayerNorm(DIM), nn.Linear(DIM, vocab)

        def forward(self, x):
            return self.out(self.norm(self.blocks(self.tokens(x) + self.positions)))

    return CharTransformer()


class CharTorchRunner:
    name = "pytorch"

    def __init__(self, data, seed, batch=BATCH):
        import torch

        self.torch, self.batch = torch, batch
        x, y, xv, yv, vocab = data
        self.x, self.y, self.xv, self.yv = (torch.from_numpy(a) for a in (x, y, xv, yv))
        self.net = torch_char_transformer(vocab, seed)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=LR)
        self.gen = torch.Generator().manual_seed(seed)

    def epoch(self):
        self.net.train()
        order = self.torch.randperm(len(self.x), generator=self.gen)
        for i in range(0, len(order), self.batch):
            idx = order[i: i + self.batch]
            self.opt.zero_grad(set_to_none=True)
            logits = self.net(self.x[idx])
            self.torch.nn.functional.cross_entropy(logits.flatten(0, 1), self.y[idx].flatten()).backward()
            self.opt.step()

    def accuracy(self):
        self.net.eval()
        with self.torch.no_grad():
            return float((self.net(self.xv).argmax(-1) == self.yv).float().mean())


RUNNERS = {"magmadnn": CharMagmadnnRunner, "pytorch": CharTorchRunner}
