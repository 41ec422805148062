#!/usr/bin/env python3
"""pymagma BLAS/LAPACK against PyTorch on the same GPU, in the same process.

``run(repeats)`` returns one dict per row with the keys bench, case, pymagma, torch, unit, ratio:
  gemm      sgemm / dgemm N=8192, TFLOP/s; ratio = pymagma / torch.matmul (goal >= 0.95)
  batched   10,000 x 32x32 sgemm (magmablas strided batched) vs torch.bmm, TFLOP/s
  getrf     dgetrf N=8192 (magma_dgetrf_gpu) vs torch.linalg.lu_factor, seconds; ratio = torch / pymagma
  hybrid    dpotrf / dgeqrf N=4096, dsyevd / dgesdd N=2048 through pymagma.linalg (cholesky, qr mode 'r', eigh, svd),
            each path the provider allows ("hybrid": pymagma.hybrid, "native": MAGMA's driver) vs torch.linalg,
            wall seconds; ratio = torch / pymagma (goals: cholesky and qr >= 0.8, eigh and svd >= 0.5)
  overhead  Python time per call of a 4x4 sgemm into a preallocated output (no sync), microseconds
            (goal <= 5 us); torch column: torch.matmul(out=) on the same sizes
Without a CUDA device (or without PyTorch with CUDA) it returns no rows.  Run directly to print a table.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _gpu_bench import main, row, time_pymagma, time_torch  # noqa: E402


def gemm_rows(torch, repeats: int, n: int = 8192) -> list[dict]:
    import pymagma
    from pymagma import blas

    rows = []
    for name, dtype, tdtype in (("sgemm", np.float32, torch.float32), ("dgemm", np.float64, torch.float64)):
        a = pymagma.asarray(np.random.default_rng(0).standard_normal((n, n)).astype(dtype))
        b = pymagma.asarray(np.random.default_rng(1).standard_normal((n, n)).astype(dtype))
        c = pymagma.empty((n, n), dtype)
        ours = time_pymagma(lambda a=a, b=b, c=c: blas.gemm(a, b, out=c), repeats, c.queue) / 1e3
        ta, tb = torch.randn(n, n, dtype=tdtype, device="cuda"), torch.randn(n, n, dtype=tdtype, device="cuda")
        theirs = time_torch(torch, lambda ta=ta, tb=tb: torch.matmul(ta, tb), repeats) / 1e3
        flops = 2.0 * n**3
        rows.append(row("gemm", f"{name} N={n}", flops / ours / 1e12, flops / theirs / 1e12, "TFLOP/s"))
        del a, b, c, ta, tb
    return rows


def batched_rows(torch, repeats: int, batch: int = 10000, n: int = 32) -> list[dict]:
    import pymagma
    from pymagma import blas

    rng = np.random.default_rng(0)
    a = pymagma.asarray(rng.standard_normal((batch, n, n)).astype(np.float32))
    b = pymagma.asarray(rng.standard_normal((batch, n, n)).astype(np.float32))
    c = pymagma.empty((batch, n, n), np.float32)
    ours = time_pymagma(lambda: blas.gemm_batched(a, b, out=c), repeats, c.queue) / 1e3
    ta = torch.randn(batch, n, n, device="cuda")
    tb = torch.randn(batch, n, n, device="cuda")
    theirs = time_torch(torch, lambda: torch.bmm(ta, tb), repeats) / 1e3
    flops = 2.0 * batch * n**3
    return [row("batched", f"sgemm {batch} x {n}x{n}", flops / ours / 1e12, flops / theirs / 1e12, "TFLOP/s")]


def getrf_rows(torch, repeats: int, n: int = 8192) -> list[dict]:
    import pymagma
    from pymagma import linalg

    host = np.random.default_rng(0).standard_normal((n, n)) + n * np.eye(n)
    a = pymagma.asarray(host)
    times = []
    for _ in range(max(2, repeats // 3)):
        copy = linalg.colmajor_copy(a)
        copy.queue.synchronize()
        t0 = time.perf_counter()
        linalg._getrf(copy)
        times.append(time.perf_counter() - t0)  # magma_dgetrf_gpu returns after synchronizing
    ours = statistics.median(times)
    ta = torch.from_numpy(host).cuda()
    theirs = time_torch(torch, lambda: torch.linalg.lu_factor(ta), max(2, repeats // 3)) / 1e3
    return [row("getrf", f"dgetrf N={n}", ours, theirs, "s", higher_is_better=False)]


def _wall_s(fn, sync, repeats: int) -> float:
    """Median wall seconds of ``fn`` followed by ``sync`` (after one warm-up call)."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def hybrid_rows(torch, repeats: int, n: int = 4096, n_eigh: int = 2048) -> list[dict]:
    import pymagma
    from pymagma import linalg

    rng = np.random.default_rng(0)
    g = rng.standard_normal((n, n))
    spd = g @ g.T + n * np.eye(n)
    sym = g[:n_eigh, :n_eigh] + g[:n_eigh, :n_eigh].T
    cases = [("cholesky", f"dpotrf N={n}", spd, lambda a, m: linalg.cholesky(a, method=m), torch.linalg.cholesky),
             ("qr", f"dgeqrf N={n}", g, lambda a, m: linalg.qr(a, mode="r", method=m),
              lambda t: torch.linalg.qr(t, mode="r")),
             ("eigh", f"dsyevd N={n_eigh}", sym, lambda a, m: linalg.eigh(a, method=m), torch.linalg.eigh),
             ("svd", f"dgesdd N={n_eigh}", g[:n_eigh, :n_eigh], lambda a, m: linalg.svd(a, method=m),
              torch.linalg.svd)]
    paths = linalg.paths(np.float64)
    rows = []
    for name, case, host, ours_fn, theirs_fn in cases:
        a, t = pymagma.asarray(host), torch.from_numpy(host).cuda()
        reps = max(2, repeats // 3)
        theirs = _wall_s(lambda t=t, f=theirs_fn: f(t), torch.cuda.synchronize, reps)
        for method in ("hybrid", "native") if paths[name] == "native" else ("hybrid",):
            ours = _wall_s(lambda a=a, f=ours_fn, m=method: f(a, m), a.queue.synchronize, reps)
            rows.append(row("hybrid", f"{case} {method}", ours, theirs, "s", higher_is_better=False))
    return rows


def _per_call_us(fn, sync, repeats: int, calls: int) -> float:
    """Median host-side microseconds per call of ``fn`` over ``calls`` back-to-back calls (launch overhead)."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
        sync()
    return statistics.median(samples) * 1e6


def overhead_rows(torch, repeats: int, calls: int = 2000) -> list[dict]:
    import pymagma
    from pymagma import blas

    a = pymagma.asarray(np.ones((4, 4), np.float32))
    c = pymagma.empty((4, 4), np.float32)
    ta, tc = torch.ones(4, 4, device="cuda"), torch.empty(4, 4, device="cuda")
    ours = _per_call_us(lambda: blas.gemm(a, a, out=c), c.queue.synchronize, repeats, calls)
    theirs = _per_call_us(lambda: torch.matmul(ta, ta, out=tc), torch.cuda.synchronize, repeats, calls)
    return [row("overhead", "sgemm 4x4 per call", ours, theirs, "us", higher_is_better=False)]


def run(repeats: int = 10) -> list[dict]:
    """All rows; none without a CUDA device or without PyTorch built with CUDA."""
    from pymagma import runtime

    if not runtime.device_count():
        return []
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    rows = overhead_rows(torch, repeats)
    rows += batched_rows(torch, repeats)
    rows += gemm_rows(torch, repeats)
    rows += getrf_rows(torch, repeats)
    rows += hybrid_rows(torch, repeats)
    return rows


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__.splitlines()[0]))
