"""Op-level micro-benchmarks: magmadnn's host backend against PyTorch on the CPU, in the same process.

``run(repeats, threads, rounds)`` returns one dict per op: magmadnn and torch median milliseconds and their ratio
``torch_ms / magmadnn_ms`` (above 1: magmadnn is faster). Shapes are LeNet-5 / MLP on MNIST at batch 64.

Each framework is timed in blocks: all ``repeats`` of one framework, then all of the other, for ``rounds`` rounds
(after a warm-up call at the start of every block). Alternating call by call would be unfair: PyTorch's OpenMP
threads keep spinning for a while after each of its calls and steal the cores NumPy runs on next (and OpenBLAS's
threads do the same to PyTorch); a short pause before each block lets them settle. Medians and minima are over
every timed repeat of every round.
Run directly to print a table: ``python scripts/bench_ops.py --repeats 20 --threads 2``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

BATCH = 64


def _time(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e3


def _cases(xp, torch, rng):
    """(name, shape text, magmadnn callable, torch callable or None) for every benchmarked op."""

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def tt(a, grad=False):
        return torch.from_numpy(a).requires_grad_(grad) if torch is not None else None

    cases = []
    for label, x_shape, w_shape, pad in (
        ("conv1", (BATCH, 1, 28, 28), (6, 1, 5, 5), 2),
        ("conv2", (BATCH, 6, 14, 14), (16, 6, 5, 5), 0),
    ):
        x, w, b = arr(*x_shape), arr(*w_shape), arr(w_shape[0])
        y = xp.conv2d_forward(x, w, padding=(pad, pad), bias=b)
        dy = arr(*y.shape)
        shape = f"x{x_shape} w{w_shape} pad {pad}"

        def m_fwd(x=x, w=w, b=b, pad=pad):
            xp.conv2d_forward(x, w, padding=(pad, pad), bias=b)

        def m_bwd(x=x, w=w, dy=dy, pad=pad):
            xp.conv2d_backward_data(dy, w, x.shape, padding=(pad, pad))
            xp.conv2d_backward_filter(dy, x, w.shape, padding=(pad, pad))
            xp.conv2d_backward_bias(dy)

        t_fwd = t_bwd = None
        if torch is not None:
            tx, tw, tb, tdy = tt(x, True), tt(w, True), tt(b, True), tt(dy)
            ty = torch.nn.functional.conv2d(tx, tw, tb, padding=pad)

            def t_fwd(tx=tx, tw=tw, tb=tb, pad=pad):
                with torch.no_grad():
                    torch.nn.functional.conv2d(tx, tw, tb, padding=pad)

            def t_bwd(ty=ty, tx=tx, tw=tw, tb=tb, tdy=tdy):
                torch.autograd.grad(ty, (tx, tw, tb), tdy, retain_graph=True)

        cases += [(f"{label} forward", shape, m_fwd, t_fwd), (f"{label} backward", shape, m_bwd, t_bwd)]

    px = np.maximum(arr(BATCH, 6, 28, 28), 0)
    pdy = arr(BATCH, 6, 14, 14)
    ptx = tt(px, True)

    def m_pool():
        y, ctx = xp.pool2d_forward(px, "max", (2, 2), (2, 2), (0, 0))
        xp.pool2d_backward(pdy, px, y, ctx, "max", (2, 2), (2, 2), (0, 0))

    cases.append((
        "maxpool 2x2 fwd+bwd", f"x{px.shape}", m_pool,
        (lambda: torch.autograd.grad(torch.nn.functional.max_pool2d(ptx, 2), (ptx,), tt(pdy))) if torch else None,
    ))  # fmt: skip

    x, w, b = arr(BATCH, 784), arr(784, 512), arr(512)
    dy = arr(BATCH, 512)
    tx, tw, tb = tt(x, True), tt(w.T.copy(), True), tt(b, True)

    def m_dense():
        y = xp.matmul(x, w)
        y += b
        xp.matmul(dy, w, transpose_b=True)
        xp.matmul(x, dy, transpose_a=True)
        xp.bias_grad(dy)

    def t_dense():
        y = torch.nn.functional.linear(tx, tw, tb)
        torch.autograd.grad(y, (tx, tw, tb), tt(dy))

    cases.append(("dense 784->512 fwd+bwd", f"x{x.shape}", m_dense, t_dense if torch else None))

    h = arr(BATCH, 512)

    def m_relu():
        y = xp.activation_forward(h, "relu")
        xp.activation_backward(dy, h, y, "relu")

    th = tt(h, True)
    cases.append((
        "relu fwd+bwd", f"x{h.shape}", m_relu,
        (lambda: torch.autograd.grad(torch.relu(th), (th,), tt(dy))) if torch else None,
    ))  # fmt: skip

    logits, labels = arr(BATCH, 10), rng.integers(0, 10, BATCH)
    ones = np.full(BATCH, 1.0 / BATCH, dtype=np.float32)

    def m_ce():
        loss, probs = xp.softmax_cross_entropy(logits, labels)
        loss.mean()
        xp.softmax_cross_entropy_backward(probs, labels, ones)

    tl, tlab = tt(logits, True), torch.from_numpy(labels) if torch is not None else None
    cases.append((
        "softmax-CE fwd+bwd", f"logits{logits.shape}", m_ce,
        (lambda: torch.autograd.grad(torch.nn.functional.cross_entropy(tl, tlab), (tl,))) if torch else None,
    ))  # fmt: skip
    return cases


def run(repeats: int = 10, threads: int | None = None, rounds: int = 3) -> list[dict]:
    """Time every op in blocks of ``repeats`` per framework, ``rounds`` times (see the module docstring)."""
    from magmadnn import backend

    xp = backend.get("host")
    threads = threads or os.cpu_count() or 1
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    try:  # the same thread count for NumPy's BLAS
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(threads, user_api="blas")
    except ImportError:
        limits = None
    try:
        return _measure(_cases(xp, torch, np.random.default_rng(0)), repeats, threads, rounds)
    finally:
        if limits is not None:
            limits.restore_original_limits()


SETTLE_S = 0.1  # pause before each block: the other framework's spinning worker threads go back to sleep


def _block(fn, repeats: int, number: int) -> list[float]:
    """A settling pause and one warm-up call, then ``repeats`` timings of ``number`` calls each (ms per call)."""
    time.sleep(SETTLE_S)
    fn()
    return [_time(fn, number) for _ in range(repeats)]


def _measure(cases, repeats: int, threads: int, rounds: int = 3) -> list[dict]:
    from magmadnn.backend import _host_jit

    rows = []
    number = 5
    jit = _host_jit.kernels is not None  # the optional numba kernels (``pip install magmadnn[jit]``)
    for name, shape, m_fn, t_fn in cases:
        m_times, t_times = [], []
        for _ in range(max(rounds, 1)):
            m_times += _block(m_fn, repeats, number)
            if t_fn:
                t_times += _block(t_fn, repeats, number)
        m_ms, m_min = statistics.median(m_times), min(m_times)
        t_ms, t_min = (statistics.median(t_times), min(t_times)) if t_times else (None, None)
        rows.append({
            "op": name, "shape": shape, "threads": threads, "host_jit": jit, "magmadnn_ms": round(m_ms, 4),
            "torch_ms": None if t_ms is None else round(t_ms, 4),
            "ratio": None if t_ms is None else round(t_ms / m_ms, 3),
            # best repeat of each: less sensitive to other processes on a shared machine
            "magmadnn_min_ms": round(m_min, 4), "torch_min_ms": None if t_min is None else round(t_min, 4),
            "ratio_min": None if t_min is None else round(t_min / m_min, 3),
        })  # fmt: skip
    return rows


def format_table(rows: list[dict]) -> str:
    def num(v, fmt=".3f"):
        return "-" if v is None else format(v, fmt)

    jit = "on" if rows and rows[0].get("host_jit") else "off"
    header = f"{'op (median / best of repeats)':30s} {'magmadnn ms':>16s} {'torch ms':>16s} {'torch/magmadnn':>16s}"
    lines = [f"host JIT kernels: {jit}", header]
    for r in rows:
        lines.append(
            f"{r['op']:30s} {num(r['magmadnn_ms']):>7s} / {num(r['magmadnn_min_ms']):>6s} "
            f"{num(r['torch_ms']):>7s} / {num(r['torch_min_ms']):>6s} {num(r['ratio'], '.2f'):>7s} / "
            f"{num(r['ratio_min'], '.2f'):>6s}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="blocks per framework (alternating block by block)")
    args = parser.parse_args(argv)
    print(format_table(run(args.repeats, args.threads, args.rounds)))


if __name__ == "__main__":
    main()
