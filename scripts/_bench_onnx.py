"""Inference speed of an imported ONNX model: ``python scripts/bench.py --onnx``.

Two models, written in PyTorch and exported with ``torch.onnx.export``: ``resnet`` (a ResNet-style CNN: a
convolution stem, residual blocks of two 3x3 convolutions with batch norm, one block downsampling with a strided 1x1
projection, global average pooling, a linear head) and ``transformer`` (pre-LN encoder blocks: nanoGPT-style
attention from one fused QKV projection, exact-GELU MLP, residual adds, a final LayerNorm). Each is exported twice:
the default call (static batch) and with a dynamic batch axis (``dynamic_axes``, which writes run-time shape
arithmetic for the attention's reshapes).

Per model, in one process, alternated call by call (``steps`` rounds, medians), microseconds per batch of:

- ``pytorch``: the PyTorch module in eval mode under ``torch.inference_mode``;
- ``layers``: the same model built by hand from magmadnn layers (Conv2D + BatchNormalization + ReLU, Add,
  GlobalAveragePooling2D, Dense; LayerNormalization, MultiHeadAttention, Dense with GELU) with PyTorch's weights
  copied in, ``predict`` on the host;
- ``recognised``: the ONNX file loaded with ``load(path, layers=True)`` (the layer-recognising pass: the same layers,
  batch norm folded into the convolutions by the exporter);
- ``op nodes``: the ONNX file loaded with ``load(path, layers=False)``: one op node per ONNX node (each chain
  Conv -> Add -> Relu fused into one by the default fusion pass);
- ``onnxruntime``: the ONNX file in an onnxruntime CPU session with 1 and with 2 intra-op threads.

Ratios: ``vs_layers`` = time / the hand-built layers model's; ``vs_ort`` = time / onnxruntime's with as many threads
as magmadnn's BLAS was given (``--threads``, default 1), same export; ``cpu_us`` and the ``cpu_`` ratios: the same
with the process's CPU time (what a loaded machine disturbs least; several threads add theirs up). ``max_err``:
largest absolute difference from PyTorch's output. Timings are never asserted (CI runs ``--onnx --dry-run`` as a
smoke test).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

MODELS = ("resnet", "transformer")
COLUMNS = ["model", "export", "variant", "threads", "us_per_batch", "vs_layers", "vs_ort", "cpu_us", "cpu_vs_layers",
           "cpu_vs_ort", "max_err"]

#: model -> size; dry runs use tiny ones
SIZES = {"resnet": {"channels": 16, "hw": 32, "classes": 10, "batch": 32},
         "transformer": {"dim": 64, "heads": 4, "time": 32, "blocks": 2, "batch": 32}}
DRY_SIZES = {"resnet": {"channels": 4, "hw": 8, "classes": 3, "batch": 2},
             "transformer": {"dim": 8, "heads": 2, "time": 4, "blocks": 1, "batch": 2}}


# --------------------------------------------------------------------------------------------- PyTorch models
def torch_resnet(channels, classes, **_):
    import torch
    from torch import nn

    def bn(c):
        layer = nn.BatchNorm2d(c)
        with torch.no_grad():  # running statistics that matter (a fresh layer's are 0 and 1)
            layer.running_mean.uniform_(-0.2, 0.2)
            layer.running_var.uniform_(0.5, 1.5)
            layer.weight.uniform_(0.5, 1.5)
            layer.bias.uniform_(-0.2, 0.2)
        return layer

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), bn(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), bn(cout)
            self.short = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))

        def forward(self, x):
            y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
            return torch.relu(y + (x if self.short is None else self.short(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            c = channels
            self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1, bias=False), bn(c), nn.ReLU())
            self.blocks = nn.Sequential(Block(c, c, 1), Block(c, 2 * c, 2), Block(2 * c, 2 * c, 1))
            self.head = nn.Linear(2 * c, classes)

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)).mean((2, 3)))

    return ResNet().eval()


def torch_transformer(dim, heads, blocks, **_):
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
            a = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5), dim=-1)
            return self.proj((a @ v).transpose(1, 2).contiguous().view(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(dim), Attention(), nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    return nn.Sequential(*[Block() for _ in range(blocks)], nn.LayerNorm(dim)).eval()


# --------------------------------------------------------------------------------- the same models in magmadnn
def _numpy(t):
    return t.detach().cpu().numpy().astype(np.float32)


def _bn_weights(bn):
    return [_numpy(bn.weight), _numpy(bn.bias), _numpy(bn.running_mean), _numpy(bn.running_var)]


def layers_resnet(net, channels, hw, device=None, **_):
    """``net`` built from magmadnn layers, its weights copied (Conv2D kernels are (K, C, R, S) as PyTorch's)."""
    from magmadnn import Model
    from magmadnn import layers as L

    def conv_bn(x, conv, bn, relu):
        c = L.Conv2D(conv.out_channels, conv.kernel_size, strides=conv.stride, padding=conv.padding[0],
                     use_bias=False)
        b = L.BatchNormalization(epsilon=bn.eps)
        y = b(c(x))
        copies.append((c, [_numpy(conv.weight)]))
        copies.append((b, _bn_weights(bn)))
        return L.Activation("relu")(y) if relu else y

    copies = []
    x = inputs = L.Input((3, hw, hw))
    x = conv_bn(x, net.stem[0], net.stem[1], True)
    for block in net.blocks:
        y = conv_bn(conv_bn(x, block.c1, block.b1, True), block.c2, block.b2, False)
        short = x if block.short is None else conv_bn(x, block.short[0], block.short[1], False)
        x = L.Activation("relu")(L.Add()([y, short]))
    dense = L.Dense(net.head.out_features)
    model = Model(inputs, dense(L.GlobalAveragePooling2D()(x)), device=device)
    for layer, weights in copies + [(dense, [_numpy(net.head.weight).T, _numpy(net.head.bias)])]:
        layer.set_weights(weights)
    return model


def layers_transformer(net, dim, heads, time, device=None, **_):
    from magmadnn import Model
    from magmadnn import layers as L

    copies = []

    def norm(x, ln):
        layer = L.LayerNormalization(epsilon=ln.eps)
        copies.append((layer, [_numpy(ln.weight), _numpy(ln.bias)]))
        return layer(x)

    def dense(x, linear, activation=None):
        layer = L.Dense(linear.out_features, activation=activation)
        copies.append((layer, [_numpy(linear.weight).T, _numpy(linear.bias)]))
        return layer(x)

    x = inputs = L.Input((time, dim))
    for block in list(net)[:-1]:
        mha = L.MultiHeadAttention(heads, dim // heads)
        qkv_w, qkv_b = _numpy(block.attn.qkv.weight), _numpy(block.attn.qkv.bias)
        copies.append((mha, [w for k in range(3) for w in (qkv_w[k * dim:(k + 1) * dim].T,
                                                           qkv_b[k * dim:(k + 1) * dim])]
                       + [_numpy(block.attn.proj.weight).T, _numpy(block.attn.proj.bias)]))
        x = L.Add()([x, mha(norm(x, block.ln1))])
        x = L.Add()([x, dense(dense(norm(x, block.ln2), block.mlp[0], "gelu"), block.mlp[2])])
    model = Model(inputs, norm(x, net[-1]), device=device)
    for layer, weights in copies:
        layer.set_weights(weights)
    return model


BUILDERS = {"resnet": (torch_resnet, layers_resnet), "transformer": (torch_transformer, layers_transformer)}


def sample(model: str, size: dict, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (3, size["hw"], size["hw"]) if model == "resnet" else (size["time"], size["dim"])
    return rng.standard_normal((size["batch"], *shape)).astype(np.float32)


def export(net, x: np.ndarray, path: str, dynamic: bool) -> None:
    import torch

    extra = {"input_names": ["x"], "output_names": ["y"]}
    if dynamic:
        extra["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(net, (torch.from_numpy(x),), path, dynamo=False, **extra)


# ---------------------------------------------------------------------------------------------------- timing
def timed(calls: dict, steps: int, warmup: int = 2) -> tuple[dict, dict]:
    """Median wall and process CPU seconds of each call, the calls alternated round by round (load drifts hit all
    of them alike). CPU time leaves out the waits of a loaded machine; a call on several threads adds theirs up."""
    for _ in range(warmup):
        for f in calls.values():
            f()
    wall, cpu = {k: [] for k in calls}, {k: [] for k in calls}
    for _ in range(steps):
        for k, f in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            f()
            cpu[k].append(time.process_time() - start_cpu)
            wall[k].append(time.perf_counter() - start)
    return ({k: statistics.median(v) for k, v in wall.items()}, {k: statistics.median(v) for k, v in cpu.items()})


def _ort_session(path: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    # no spinning: a pool's threads spinning after each run would take the cores (and the CPU time) of the calls
    # timed after it
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def bench_model(name: str, size: dict, steps: int, threads: int, folder: str) -> list[dict]:
    """Rows of one model (see the module)."""
    import torch

    from magmadnn import onnx as monnx

    torch.manual_seed(0)
    make_torch, make_layers = BUILDERS[name]
    net = make_torch(**size)
    x = sample(name, size)
    batch = size["batch"]
    with torch.inference_mode():
        reference = net(torch.from_numpy(x)).numpy()
    hand = make_layers(net, **size)
    runs = {("-", "pytorch", threads): _torch_call(net, x),
            ("-", "layers", threads): lambda: hand.predict(x, batch_size=batch, verbose=0)}
    outputs = {("-", "pytorch", threads): reference, ("-", "layers", threads): hand.predict(x, batch_size=batch)}
    for form in ("static", "dynamic"):
        path = os.path.join(folder, f"{name}_{form}.onnx")
        export(net, x, path, dynamic=form == "dynamic")
        for variant, layers in (("recognised", True), ("op nodes", False)):
            try:
                model = monnx.load(path, layers=layers)
            except monnx.UnsupportedOnnxError as exc:  # the recognising pass has no form for this export
                print(f"{name} ({form} batch): load(layers={layers}) refused: {exc}")
                continue
            runs[(form, variant, threads)] = (lambda m: lambda: m.predict(x, batch_size=batch, verbose=0))(model)
            outputs[(form, variant, threads)] = model.predict(x, batch_size=batch)
        for n in sorted({1, 2, threads}):
            session = _ort_session(path, n)
            runs[(form, "onnxruntime", n)] = (lambda s: lambda: s.run(None, {"x": x}))(session)
            outputs[(form, "onnxruntime", n)] = session.run(None, {"x": x})[0]
    seconds, cpu = timed(runs, steps)
    rows = []
    for key in seconds:
        form, variant, n = key
        ort = (form if form != "-" else "static", "onnxruntime", threads)
        row = {"model": name, "export": form, "variant": variant, "threads": n,
               "max_err": float(np.max(np.abs(np.asarray(outputs[key]) - reference)))}
        for prefix, table in (("", seconds), ("cpu_", cpu)):
            row["us_per_batch" if not prefix else "cpu_us"] = table[key] * 1e6
            base = table[("-", "layers", threads)]
            row[f"{prefix}vs_layers"] = table[key] / base if base else None
            row[f"{prefix}vs_ort"] = table[key] / table[ort] if table.get(ort) else None
        rows.append(row)
    return rows


def _torch_call(net, x):
    import torch

    tx = torch.from_numpy(x)

    def call():
        with torch.inference_mode():
            return net(tx)

    return call


def run(models, steps: int, threads: int, dry_run: bool = False) -> list[dict]:
    sizes = DRY_SIZES if dry_run else SIZES
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in models:
            rows += bench_model(name, sizes[name], steps, threads, folder)
    return rows


def describe(models, dry_run: bool = False) -> str:
    sizes = DRY_SIZES if dry_run else SIZES
    return "; ".join(f"{m} " + ", ".join(f"{k} {v}" for k, v in sizes[m].items()) for m in models)
