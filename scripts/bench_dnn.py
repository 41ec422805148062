#!/usr/bin/env python3
"""pymagma.dnn and pymagma.kernels against PyTorch on the same GPU, plus NVRTC compile times.

``run(repeats)`` returns one dict per row with the keys bench, case, pymagma, torch, unit, ratio:
  conv      forward + backward-data + backward-filter at LeNet-5 and ResNet-18 layer shapes, milliseconds;
            ratio = torch_ms / pymagma_ms (goal >= 0.95)
  kernel    elementwise add / relu / cast bandwidth in GB/s; ratio = pymagma / torch (goal >= 0.9)
  compile   each kernel program compiled cold (empty caches), from the disk cache and from the memory cache, in
            milliseconds (no GPU needed: compiled for sm_90 when there is no device)
Without a CUDA device only the compile rows are produced.  Run directly to print a table.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _gpu_bench import main, row, time_pymagma, time_torch  # noqa: E402

LENET = [("lenet conv1", (64, 1, 28, 28), (6, 1, 5, 5), 1, 2),
         ("lenet conv2", (64, 6, 14, 14), (16, 6, 5, 5), 1, 0)]
RESNET18 = [("resnet18 conv1", (32, 3, 224, 224), (64, 3, 7, 7), 2, 3),
            ("resnet18 layer1", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1),
            ("resnet18 layer2 down", (32, 64, 56, 56), (128, 64, 3, 3), 2, 1),
            ("resnet18 layer2", (32, 128, 28, 28), (128, 128, 3, 3), 1, 1),
            ("resnet18 layer3", (32, 256, 14, 14), (256, 256, 3, 3), 1, 1),
            ("resnet18 layer4", (32, 512, 7, 7), (512, 512, 3, 3), 1, 1)]


# --------------------------------------------------------------------------------------------------- compile
def compile_rows(repeats: int) -> list[dict]:
    """Cold / disk-cache / memory-cache compile time of every program for the current device (sm_90 without
    one), to its own kind and to PTX."""
    from pymagma import kernels, runtime
    from pymagma.kernels import compiler, loader

    arch, kind = loader.target_for(runtime.get_device()) if runtime.device_count() else ("sm_90", "cubin")
    targets = [(arch, kind)] + ([(arch, "ptx")] if kind != "ptx" else [])
    rows = []
    saved = os.environ.get("PYMAGMA_CACHE")
    try:
        for (arch, kind), name in ((t, n) for t in targets for n in kernels.programs.SHIPPED):
            cold, disk, mem = [], [], []
            for _ in range(max(1, min(repeats, 2))):
                os.environ["PYMAGMA_CACHE"] = tempfile.mkdtemp(prefix="pymagma-bench-")
                compiler.clear_memory_cache()
                for bucket in (cold, disk, mem):
                    if bucket is disk:
                        compiler.clear_memory_cache()
                    start = time.perf_counter()
                    kernels.compile_program(name, arch, kind)
                    bucket.append((time.perf_counter() - start) * 1e3)
            for label, values in (("cold", cold), ("disk cache", disk), ("memory cache", mem)):
                rows.append(row("compile", f"{name} {arch} {kind} {label}", statistics.median(values), None, "ms",
                                higher_is_better=False))
    finally:
        if saved is None:
            os.environ.pop("PYMAGMA_CACHE", None)
        else:
            os.environ["PYMAGMA_CACHE"] = saved
        compiler.clear_memory_cache()
    return rows


def _conv_case(torch, x, w, stride: int, pad: int, repeats: int) -> tuple[float, float]:
    """Median ms of forward + backward-data + backward-filter: (pymagma, torch)."""
    from pymagma import array, dnn

    y_shape = dnn.conv2d_output_shape(x.shape, w.shape, stride, pad)
    dy_host = np.random.default_rng(1).standard_normal(y_shape).astype(np.float32)
    dx_, dw_, dy = array.asarray(x), array.asarray(w), array.asarray(dy_host)

    def ours():
        dnn.conv2d_forward(dx_, dw_, stride=stride, padding=pad)
        dnn.conv2d_backward_data(dy, dw_, x.shape, stride=stride, padding=pad)
        dnn.conv2d_backward_filter(dx_, dy, w.shape, stride=stride, padding=pad)

    tx = torch.tensor(x, device="cuda", requires_grad=True)
    tw = torch.tensor(w, device="cuda", requires_grad=True)
    tdy = torch.tensor(dy_host, device="cuda")

    def theirs():
        y = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)
        torch.autograd.grad(y, (tx, tw), tdy)

    return time_pymagma(ours, repeats), time_torch(torch, theirs, repeats)


def conv_rows(torch, repeats: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for name, x_shape, w_shape, stride, pad in LENET + RESNET18:
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
        t_ours, t_theirs = _conv_case(torch, x, w, stride, pad, repeats)
        rows.append(row("conv fwd+bwd", f"{name} x{x_shape} w{w_shape} s{stride} p{pad}", t_ours, t_theirs, "ms",
                        higher_is_better=False))
    return rows


def kernel_rows(torch, repeats: int, n: int = 1 << 26) -> list[dict]:
    from pymagma import array, kernels

    rows = []
    a = array.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    b = array.asarray(np.random.default_rng(1).standard_normal(n).astype(np.float32))
    out = array.empty((n,), np.float32)
    half = array.empty((n,), np.float16)
    ta, tb = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    tout, thalf = torch.empty_like(ta), torch.empty(n, device="cuda", dtype=torch.float16)
    cases = [("add f32", 12 * n, lambda: kernels.add(a, b, out=out), lambda: torch.add(ta, tb, out=tout)),
             ("relu f32", 8 * n, lambda: kernels.relu(a, out=out), lambda: torch.clamp(ta, min=0, out=tout)),
             ("cast f32->f16", 6 * n, lambda: kernels.cast(a, np.float16, out=half), lambda: thalf.copy_(ta)),
             ("sum f32", 4 * n, lambda: kernels.reduce("sum", a), lambda: ta.sum())]
    for name, nbytes, ours, theirs in cases:
        t_ours, t_theirs = time_pymagma(ours, repeats), time_torch(torch, theirs, repeats)
        rows.append(row("kernel", f"{name} n={n}", nbytes / t_ours / 1e6, nbytes / t_theirs / 1e6, "GB/s",
                        higher_is_better=True))
    return rows


def run(repeats: int = 10) -> list[dict]:
    """All benchmark rows (GPU rows only with a CUDA device and PyTorch with CUDA)."""
    from pymagma import runtime

    rows = compile_rows(repeats)
    if not runtime.device_count():
        return rows
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        return rows
    return rows + conv_rows(torch, repeats) + kernel_rows(torch, repeats)


if __name__ == "__main__":
    sys.exit(main(run, __doc__.splitlines()[0]))
