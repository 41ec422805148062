#!/usr/bin/env python3
"""pymagma BLAS/LAPACK against PyTorch on the same GPU, in the same process.

``run(repeats)`` returns one dict per row with the keys bench, case, pymagma, torch, unit, ratio:
  gemm      sgemm / dgemm N=8192, TFLOP/s; ratio = pymagma / torch.matmul (goal >= 0.95)
  batched   10,000 x 32x32 sgemm (magmablas strided batched) vs torch.bmm, TFLOP/s
  getrf     dgetrf N=8192 (magma_dgetrf_gpu) vs torch.linalg.lu_factor, seconds; ratio = torch / pymagma
  overhead  Python time per call of a 4x4 sgemm into a preallocated output (no sync), microseconds
            (goal <= 5 us); torch column: torch.matmul(out=) on the same sizes; the same for a cached 64-point
            complex FFT (pymagma.array_api.fft.fft vs torch.fft.fft)
  fft       batched 2-D FFT, 64 x 512x512 complex64 (xp.fft.fftn over the last two axes: one cached cuFFT plan) vs
            torch.fft.fft2, GFLOP/s by the usual 5 N log2 N count; ratio = pymagma / torch (goal >= 0.9)
  cgemm     complex64 gemm N=4096 (magma_cgemm) vs torch.matmul, TFLOP/s (8 N^3 real flops; goal >= 0.95)
``hybrid_run(repeats, sizes, eig_sizes)`` (``--hybrid``) returns the LAPACK driver rows, bench "hybrid":
  cholesky, qr (mode 'r'), eigh, svd in float64 through pymagma.linalg, each path the provider allows ("hybrid":
  pymagma.hybrid with look-ahead, "native": MAGMA's driver) vs torch.linalg on the same GPU, wall seconds per call
  (median; inputs already on the device); ratio = torch / pymagma (goals: cholesky and qr >= 0.8, eigh and svd
  >= 0.5); host_s = seconds per call the hybrid driver spent in host-side work (pymagma.hybrid.host_seconds:
  panels, reflectors, the tridiagonal/bidiagonal solver; with look-ahead much of it overlaps the device).
  Default sizes: cholesky and qr at N = 2048, 4096, 8192; eigh and svd at N = 2048, 4096 (--eig-sizes for
  more; above 2048 one timed call each, without warm-up, after every other row).  Their reductions are blocked
  (panels of 32) but still make two host round trips per column (svd; eigh one), and the host then solves the
  N x N tridiagonal / bidiagonal problem: with SciPy (the run prints which solvers it found) by LAPACK's divide
  and conquer, measured on 2 CPU cores (--host-solvers) at 2.0 s (tridiagonal) and 5.3 s (bidiagonal) for N = 4096,
  6x faster than the dense NumPy fallback (12 s, 32 s); the reductions' host work was ~165 us (eigh) and ~250 us
  (svd) per column at N = 2048 on the simulator.  Estimated on the GPU machine: ~3 s (eigh) and ~5 s (svd) per
  call at 4096, plus torch's; 8192 (~4x the host work per call, and torch's own svd) stays opt-in.  The default
  set is estimated at ~40 s (no GPU run yet); the JSON is rewritten after every row, so a time limit loses only
  the rows not yet run.
``host_solver_rows(sizes)`` (``--host-solvers``, CPU only) times the eigh/svd host solvers with SciPy and without.
Without a CUDA device (or without PyTorch with CUDA) both return no rows.  ``--hybrid --dry-run`` runs the hybrid
rows' logic on the CPU in seconds: pymagma's simulator for the device, PyTorch on the CPU, tiny sizes.
Run directly to print a table (``--json PATH`` writes the rows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _gpu_bench import print_rows, row, time_pymagma, time_torch  # noqa: E402

from magmadnn._atomic import write_text  # noqa: E402

#: hybrid rows run by default: (cholesky, qr sizes), (eigh, svd sizes); see the module docstring for why
HYBRID_SIZES, EIG_SIZES = (2048, 4096, 8192), (2048, 4096)
DRY_SIZES, DRY_EIG_SIZES = (48, 160), (40,)  # --dry-run: around and across the simulator's block sizes
HOST_SOLVER_SIZES = (1024, 2048, 4096)  # --host-solvers (CPU only)
GOALS = {"cholesky": 0.8, "qr": 0.8, "eigh": 0.5, "svd": 0.5}


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


def fft_rows(torch, repeats: int, batch: int = 64, n: int = 512) -> list[dict]:
    """A batched 2-D complex FFT (one cached plan) and a complex gemm, each against PyTorch on the same GPU."""
    import math

    import pymagma
    import pymagma.array_api as xp
    from pymagma import blas

    rng = np.random.default_rng(0)
    x = pymagma.asarray((rng.standard_normal((batch, n, n)) + 1j * rng.standard_normal((batch, n, n))).astype(
        np.complex64))
    ours = time_pymagma(lambda x=x: xp.fft.fftn(x, axes=(-2, -1)), repeats, x.queue) / 1e3
    tx = torch.randn(batch, n, n, dtype=torch.complex64, device="cuda")
    theirs = time_torch(torch, lambda tx=tx: torch.fft.fft2(tx), repeats) / 1e3
    flops = 5.0 * batch * n * n * math.log2(n * n)
    rows = [row("fft", f"fft2 {batch} x {n}x{n} complex64", flops / ours / 1e9, flops / theirs / 1e9, "GFLOP/s")]
    del x, tx
    m = 4096
    a = pymagma.asarray((rng.standard_normal((m, m)) + 1j * rng.standard_normal((m, m))).astype(np.complex64))
    c = pymagma.empty((m, m), np.complex64)
    ours = time_pymagma(lambda: blas.gemm(a, a, out=c), repeats, c.queue) / 1e3
    ta = torch.randn(m, m, dtype=torch.complex64, device="cuda")
    theirs = time_torch(torch, lambda: torch.matmul(ta, ta), repeats) / 1e3
    rows.append(row("cgemm", f"cgemm N={m}", 8.0 * m**3 / ours / 1e12, 8.0 * m**3 / theirs / 1e12, "TFLOP/s"))
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


def _wall_s(fn, sync, repeats: int, warmup: bool = True) -> float:
    """Median wall seconds of ``fn`` followed by ``sync`` (after one warm-up call unless ``warmup`` is False)."""
    if warmup:
        fn()
        sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _hybrid_cases(torch):
    """(name, LAPACK routine, make input from a float64 torch matrix g, pymagma call, torch call)."""
    from pymagma import linalg

    n_eye = lambda g: torch.eye(g.shape[0], dtype=g.dtype, device=g.device)  # noqa: E731
    return [
        ("cholesky", "dpotrf", lambda g: g @ g.T + g.shape[0] * n_eye(g),
         lambda a, m: linalg.cholesky(a, method=m), torch.linalg.cholesky),
        ("qr", "dgeqrf", lambda g: g, lambda a, m: linalg.qr(a, mode="r", method=m),
         lambda t: torch.linalg.qr(t, mode="r")),
        ("eigh", "dsyevd", lambda g: g + g.T, lambda a, m: linalg.eigh(a, method=m), torch.linalg.eigh),
        ("svd", "dgesdd", lambda g: g, lambda a, m: linalg.svd(a, method=m), torch.linalg.svd),
    ]


def hybrid_rows(torch, repeats: int, sizes=HYBRID_SIZES, eig_sizes=EIG_SIZES, device: str = "cuda",
                on_row=None) -> list[dict]:
    """The hybrid LAPACK rows (see the module docstring).  ``device="cpu"``: PyTorch on the CPU and pymagma on
    whatever device layer is active (the simulator in a dry run).  ``on_row(rows)`` after every row."""
    import pymagma
    from pymagma import hybrid, linalg

    paths = linalg.paths(np.float64)
    gen = torch.Generator(device=device).manual_seed(0)
    sync_torch = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows = []
    jobs = [(case, n) for case in _hybrid_cases(torch) for n in (eig_sizes if case[0] in ("eigh", "svd") else sizes)]
    costly = lambda name, n: name in ("eigh", "svd") and n > 2048  # noqa: E731
    for (name, routine, make, ours_fn, theirs_fn), n in sorted(jobs, key=lambda job: costly(job[0][0], job[1])):
        t = make(torch.randn(n, n, dtype=torch.float64, device=device, generator=gen)).contiguous()
        a = pymagma.asarray(t if device == "cuda" else t.numpy())  # the same matrix, no copy on a GPU
        # the costly sizes run last, one timed call without warm-up (the smaller ones warmed everything up)
        reps, warmup = (1, False) if costly(name, n) else (max(2, repeats // 3), True)
        theirs = _wall_s(lambda t=t, f=theirs_fn: f(t), sync_torch, reps, warmup)
        for method in ("hybrid", "native") if paths[name] == "native" else ("hybrid",):
            call = lambda a=a, f=ours_fn, m=method: f(a, m)  # noqa: E731
            if warmup:
                call()
                a.queue.synchronize()
            with hybrid.host_time() as host:
                ours = _wall_s(call, a.queue.synchronize, reps, warmup=False)
            rows.append(row("hybrid", f"{name} {routine} N={n} {method}", ours, theirs, "s",
                            higher_is_better=False,
                            host_s=round(host.seconds / reps, 4) if method == "hybrid" else None,
                            goal=GOALS[name]))
            if on_row is not None:
                on_row(rows)
        del a, t
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
    rows = [row("overhead", "sgemm 4x4 per call", ours, theirs, "us", higher_is_better=False)]
    import pymagma.array_api as xp

    z = pymagma.asarray(np.ones(64, np.complex64))
    tz = torch.ones(64, dtype=torch.complex64, device="cuda")
    ours = _per_call_us(lambda: xp.fft.fft(z), z.queue.synchronize, repeats, calls)
    theirs = _per_call_us(lambda: torch.fft.fft(tz), torch.cuda.synchronize, repeats, calls)
    rows.append(row("overhead", "fft 64 points per call (cached plan)", ours, theirs, "us", higher_is_better=False))
    return rows


def _torch_cuda():
    """PyTorch when it and a CUDA device are usable by both libraries, else None."""
    from pymagma import runtime

    if not runtime.device_count():
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def run(repeats: int = 10) -> list[dict]:
    """The BLAS, getrf and overhead rows; none without a CUDA device or without PyTorch built with CUDA."""
    torch = _torch_cuda()
    if torch is None:
        return []
    rows = overhead_rows(torch, repeats)
    rows += batched_rows(torch, repeats)
    rows += fft_rows(torch, repeats)
    rows += gemm_rows(torch, repeats)
    rows += getrf_rows(torch, repeats)
    return rows


def hybrid_run(repeats: int = 10, sizes=HYBRID_SIZES, eig_sizes=EIG_SIZES, on_row=None) -> list[dict]:
    """The hybrid LAPACK rows on the GPU; none without a CUDA device or without PyTorch built with CUDA."""
    torch = _torch_cuda()
    return [] if torch is None else hybrid_rows(torch, repeats, sizes, eig_sizes, on_row=on_row)


def dry_run(repeats: int = 2, on_row=None) -> list[dict]:
    """The hybrid rows' logic on the CPU: the simulator (MAGMA exports as found) for the device, PyTorch on the
    CPU, sizes around the block sizes.  The numbers mean nothing."""
    import torch

    from pymagma import simulator

    with simulator.simulated("partial"):
        return hybrid_rows(torch, repeats, DRY_SIZES, DRY_EIG_SIZES, device="cpu", on_row=on_row)


@contextlib.contextmanager
def _without_scipy():
    """A context in which ``import scipy`` fails (pymagma.hybrid's host solvers take their NumPy fallbacks)."""
    saved = {k: v for k, v in sys.modules.items() if k == "scipy" or k.startswith("scipy.")}
    sys.modules.update(dict.fromkeys({*saved, "scipy"}))
    try:
        yield
    finally:
        for k in {*saved, "scipy"}:
            del sys.modules[k]
        sys.modules.update(saved)


def host_solver_rows(sizes=HOST_SOLVER_SIZES, repeats: int = 1) -> list[dict]:
    """Seconds (best of ``repeats``) of the hybrid eigh/svd's host solvers on the CPU, float64, with SciPy (LAPACK
    divide and conquer: ?stevd, ?bdsdc) and without it (dense numpy.linalg.eigh / svd of the n x n matrix), on the
    tridiagonal and bidiagonal forms of random matrices (GOE and Gaussian: chi-distributed off-diagonals)."""
    from pymagma import hybrid

    rng = np.random.default_rng(0)

    def best(fn):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    rows = []
    for n in sizes:
        off = np.sqrt(rng.chisquare(np.arange(n - 1, 0, -1)))
        cases = [("tridiagonal (eigh)", hybrid.stedc, (rng.standard_normal(n) * np.sqrt(2), off)),
                 ("bidiagonal (svd)", hybrid.bdsdc, (np.sqrt(rng.chisquare(np.arange(n, 0, -1))), off))]
        for name, solver, args in cases:
            dc = best(lambda solver=solver, args=args: solver(*args))
            with _without_scipy():
                dense = best(lambda solver=solver, args=args: solver(*args))
            rows.append({"bench": "host", "case": f"{name} N={n}", "scipy_dc_s": round(dc, 3),
                         "numpy_dense_s": round(dense, 3), "speedup": round(dense / dc, 1)})
    return rows


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--hybrid", action="store_true", help="the hybrid LAPACK rows instead of the BLAS rows")
    p.add_argument("--sizes", type=_sizes, default=",".join(map(str, HYBRID_SIZES)),
                   help="cholesky and qr sizes (default %(default)s)")
    p.add_argument("--eig-sizes", type=_sizes, default=",".join(map(str, EIG_SIZES)),
                   help="eigh and svd sizes (default %(default)s; 8192 adds minutes)")
    p.add_argument("--dry-run", action="store_true", help="with --hybrid: the rows' logic on the CPU simulator")
    p.add_argument("--host-solvers", type=_sizes, nargs="?", const=HOST_SOLVER_SIZES, default=None, metavar="SIZES",
                   help="CPU only: the eigh/svd host solvers with and without SciPy (sizes default "
                        f"{','.join(map(str, HOST_SOLVER_SIZES))})")
    p.add_argument("--json", default=None, help="write the rows to this file")
    args = p.parse_args(argv)
    if args.dry_run and not args.hybrid:
        p.error("--dry-run goes with --hybrid")
    if args.host_solvers:
        rows = host_solver_rows(args.host_solvers, max(1, min(args.repeats, 3)))
        title = f"host solvers on the CPU, float64, {os.cpu_count()} cores (seconds per call)"
    elif args.hybrid:
        def save(rows):  # after every row: a time limit keeps the rows measured so far
            if args.json:
                write_text(args.json, json.dumps(rows, indent=2))

        rows = dry_run(on_row=save) if args.dry_run else hybrid_run(args.repeats, args.sizes, args.eig_sizes, save)
        from pymagma import hybrid

        title = ("hybrid LAPACK vs torch.linalg (wall s per call; ratio = torch / pymagma; host_s = host-side "
                 "seconds per call)" + (" [dry run: simulator and CPU, numbers mean nothing]" if args.dry_run else "")
                 + "\nhost solvers: " + "; ".join(f"{k}: {v}" for k, v in hybrid.host_solvers().items()))
    else:
        rows, title = run(args.repeats), "pymagma vs PyTorch"
    if not rows:
        print("no CUDA device (or no PyTorch with CUDA): nothing to measure")
    else:
        print(title)
        print_rows(rows)
    if args.json:
        write_text(args.json, json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
