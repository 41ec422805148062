"""Shared pieces of the GPU benchmarks: result rows, CUDA-event timing for pymagma and PyTorch, a printed table."""

from __future__ import annotations

import argparse
import statistics


def row(bench, case, ours, theirs, unit, higher_is_better=True, **extra) -> dict:
    """One result; ``ratio`` is pymagma relative to PyTorch, above 1 meaning pymagma is better; ``extra`` columns
    follow."""
    ratio = None
    if ours and theirs:
        ratio = round(ours / theirs if higher_is_better else theirs / ours, 3)
    return {"bench": bench, "case": case, "pymagma": None if ours is None else round(ours, 4),
            "torch": None if theirs is None else round(theirs, 4), "unit": unit, "ratio": ratio, **extra}


def columns(rows: list[dict]) -> list[str]:
    """Every key of the rows, in first-seen order (rows may carry extra columns)."""
    return list(dict.fromkeys(k for r in rows for k in r))


def print_rows(rows: list[dict]) -> None:
    keys = columns(rows)
    cells = [["" if r.get(k) is None else str(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths)))
    for c in cells:
        print("  ".join(v.rjust(w) for v, w in zip(c, widths)))


def _median_ms(fn, repeats: int, make_events, warmup) -> float:
    warmup()
    times = []
    for _ in range(repeats):
        start, end, record = make_events()
        record(start)
        fn()
        record(end)
        end.synchronize()
        times.append(start.elapsed_ms(end) if hasattr(start, "elapsed_ms") else start.elapsed_time(end))
    return statistics.median(times)


def time_pymagma(fn, repeats: int, queue=None) -> float:
    """Median milliseconds of ``fn`` on a pymagma queue's stream (the default queue), timed with CUDA events."""
    from pymagma import queue as queues
    from pymagma import runtime

    q = queue or queues.default_queue()

    def events():
        return runtime.Event(), runtime.Event(), lambda e: e.record(q.stream)

    def warmup():
        for _ in range(3):
            fn()
        q.synchronize()

    return _median_ms(fn, repeats, events, warmup)


def time_torch(torch, fn, repeats: int) -> float:
    """Median milliseconds of ``fn`` on PyTorch's current CUDA stream, timed with CUDA events."""

    def events():
        return (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
                lambda e: e.record())

    def warmup():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()

    return _median_ms(fn, repeats, events, warmup)


def per_call_ms(fn, calls: int, repeats: int, cuda: bool) -> float:
    """Median over ``repeats`` of the milliseconds per call of ``calls`` calls of ``fn``: pymagma's CUDA events on
    the default queue, or wall time when ``cuda`` is false (a dry run)."""
    import time

    times = []
    for _ in range(repeats):
        if cuda:
            from pymagma import queue as queues
            from pymagma import runtime

            q = queues.default_queue()
            start, end = runtime.Event(), runtime.Event()
            start.record(q.stream)
            for _ in range(calls):
                fn()
            end.record(q.stream)
            end.synchronize()
            times.append(start.elapsed_ms(end) / calls)
        else:
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t) * 1e3 / calls)
    return statistics.median(times)


def torch_per_call_ms(fn, calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the milliseconds per call of ``calls`` calls of ``fn`` on PyTorch's current CUDA
    stream (CUDA events)."""
    import torch

    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def main(run, description: str) -> int:
    """Command line of a benchmark module: ``--repeats``, then a table of ``run(repeats)``'s rows."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=10)
    rows = run(parser.parse_args().repeats)
    if not rows:
        print("no CUDA device (or no PyTorch with CUDA): nothing to measure")
        return 0
    print_rows(rows)
    return 0
