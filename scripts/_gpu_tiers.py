"""The runner of ``scripts/gpu_check.sh``: the checks of tiers 1-3, each under its own time limit, each result written
to ``$OUT`` the moment it is known.

* tier 1 (<= 3 min): the functions of ``scripts/_gpu_checks.py`` (run one after another in a worker process, a fresh
  one after a failure or a time-out, so a broken CUDA context cannot spoil the next check) and the pytest group of
  the tests marked ``gpu`` and ``tier1``;
* tier 2: the other ``gpu`` tests in three pytest groups, and LeNet-5 trained on MNIST;
* tier 3: the benchmarks (scripts/bench*.py), each its own process.

Files in ``OUT``: ``environment.json`` (date, commit, nvidia-smi), ``checks.jsonl`` (one line per finished check:
name, tier, status pass/fail/timeout/skip, seconds, limit, figures, error verbatim), ``summary.json`` (counts per tier
and the checks that never ran: written before the first check and after each), ``tests-<check>.jsonl`` (one line per
test of a pytest group), ``logs/`` (each check's output). Every file is rewritten whole, atomically.

    python scripts/_gpu_tiers.py --out DIR [--tier 1,2,3] [--dry-run] [--budget S] [--data DIR] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(SCRIPTS))

import _gpu_checks  # noqa: E402
import _gpu_validate  # noqa: E402

from magmadnn._atomic import write_text  # noqa: E402

ERROR_CHARS = 4000  # the verbatim error kept in a result line (its end: the exception and the innermost frames)
#: a dry run's limits are the device's times this: a shared CPU and the simulator stand in, their times prove nothing
DRY_RUN_SLACK = 4


@dataclass(frozen=True)
class Item:
    """One planned check: ``kind`` "py" (a tier-1 function), "pytest" (``spec``: marker expression and paths) or
    "cmd" (``spec``: the argv after python, and the validator of its JSON in ``_gpu_validate``)."""
    name: str
    tier: int
    limit_s: int
    kind: str
    what: str
    spec: dict = field(default_factory=dict)


def tier1_files(root: Path = ROOT / "tests") -> tuple[str, ...]:
    """The test files that mark a test ``tier1`` (read as text, so the group collects only them, in seconds)."""
    return tuple(os.path.relpath(p, ROOT) for p in sorted(root.rglob("test_*.py"))
                 if re.search(r"pytest\.mark\.tier1\b", p.read_text(errors="replace")))


def _pytest(name, tier, limit_s, what, marks, *paths, ignore=()) -> Item:
    return Item(name, tier, limit_s, "pytest", what, {"marks": marks, "paths": paths, "ignore": ignore})


def _bench(name, limit_s, what, argv, dry_argv, json_name, dry_json_name) -> Item:
    return Item(name, 3, limit_s, "cmd", what, {"argv": argv, "dry_argv": dry_argv, "json": json_name,
                                                  "dry_json": dry_json_name})


def plan(tiers=(1, 2, 3), data: str = "../shared/data/mnist") -> list[Item]:
    """Every check of ``tiers`` in running order, with its time limit."""
    items = [Item(c.name, 1, c.limit_s, "py", c.what) for c in _gpu_checks.TIER1]
    items.append(_pytest("tier1_tests", 1, _gpu_checks.TIER1_TESTS_LIMIT_S, "the tests marked gpu and tier1",
                         "gpu and tier1", *tier1_files()))
    items += [
        _pytest("gpu_tests_pymagma", 2, 120, "pymagma's other gpu tests", "gpu and not tier1", "tests/pymagma"),
        _pytest("gpu_tests_magmadnn", 2, 120, "magmadnn's other gpu tests (conformance, parity, replay)",
                "gpu and not tier1", "tests/magmadnn"),
        _pytest("gpu_tests_other", 2, 30, "the remaining gpu tests", "gpu and not tier1", "tests",
                ignore=("tests/pymagma", "tests/magmadnn")),
        Item("lenet5_mnist", 2, 60, "cmd", "LeNet-5 trained 3 epochs on MNIST on the GPU: >= 97 % test accuracy",
             {"argv": ["examples/lenet5.py", "--data", data, "--device", "gpu", "--epochs", "3", "--quiet"],
              "dry_argv": ["examples/lenet5.py", "--help"], "json": None, "dry_json": None, "needs": data}),
        _bench("bench_gpu", 80, "training MLP and LeNet-5 at batch 128 against PyTorch eager",
               ["scripts/bench.py", "--recipe", "", "--gpu", "--data", data, "--json", "{json}"],
               ["scripts/bench.py", "--recipe", "", "--gpu", "--dry-run", "--json", "{json}"],
               "bench-gpu.json", "bench-gpu-dry.json"),
        _bench("bench_hybrid", 45, "hybrid LAPACK drivers against torch.linalg",
               ["scripts/bench_pymagma.py", "--hybrid", "--json", "{json}"],
               ["scripts/bench_pymagma.py", "--hybrid", "--dry-run", "--json", "{json}"],
               "bench-hybrid.json", "bench-hybrid-dry.json"),
        _bench("bench_graphs", 40, "a training step eager and replayed against PyTorch eager and CUDA graphs",
               ["scripts/bench_graphs.py", "--json", "{json}"],
               ["scripts/bench_graphs.py", "--dry-run", "--json", "{json}"],
               "bench-graphs.json", "bench-graphs-dry.json"),
        _bench("bench_overhead", 45, "the host's cost per step on the GPU: eager and replayed steps, fit's replay "
               "loop per batch, native calls per step (the null device's figures, on hardware)",
               ["scripts/bench.py", "--overhead", "--on-gpu", "--batches", "1", "--json", "{json}"],
               ["scripts/bench.py", "--overhead", "--models", "mlp", "--batches", "1", "--steps", "2", "--json",
                "{json}"], "bench-overhead-gpu.json", "bench-overhead-dry.json"),
        _bench("bench_mixed", 40, "bf16/fp16 gemm and mixed-precision training against torch.autocast",
               ["scripts/bench_mixed.py", "--json", "{json}"],
               ["scripts/bench_mixed.py", "--dry-run", "--json", "{json}"], "bench-mixed.json", "bench-mixed-dry.json"),
        _bench("bench_models", 75, "real-size models at batch 128 in bf16 (ResNet-style, transformer) against "
               "PyTorch, images/s", ["scripts/bench_models.py", "--json", "{json}"],
               ["scripts/bench_models.py", "--dry-run", "--json", "{json}"], "bench-models.json",
               "bench-models-dry.json"),
    ]
    return [i for i in items if i.tier in tiers]


# ---------------------------------------------------------------------------------------------------- output
class Recorder:
    """``checks.jsonl`` and ``summary.json``, rewritten whole (atomically) after every check."""

    def __init__(self, out: Path, items: list[Item], dry_run: bool):
        self.out, self.items, self.dry_run, self.lines = out, items, dry_run, []
        self._write()

    def add(self, item: Item, status: str, seconds: float, figures=None, error: str | None = None) -> dict:
        line = {"check": item.name, "tier": item.tier, "status": status, "seconds": round(seconds, 2),
                "limit_s": item.limit_s, "figures": figures or {}}
        if error:
            line["error"] = error[-ERROR_CHARS:]
        self.lines.append(line)
        self._write()
        mark = {"pass": "ok  ", "skip": "skip"}.get(status, "FAIL")
        print(f"[tier {item.tier}] {mark} {item.name} ({status}, {seconds:.1f} s of {item.limit_s})"
              + (f": {error.strip().splitlines()[-1]}" if error and error.strip() else ""), flush=True)
        return line

    def _write(self) -> None:
        write_text(self.out / "checks.jsonl", "".join(json.dumps(x, default=str) + "\n" for x in self.lines))
        done = {x["check"] for x in self.lines}
        tiers = {}
        for item in self.items:
            t = tiers.setdefault(str(item.tier), {"planned": 0, "pass": 0, "fail": 0, "timeout": 0, "skip": 0,
                                                   "limit_s": 0})
            t["planned"] += 1
            t["limit_s"] += item.limit_s
        for x in self.lines:
            tiers[str(x["tier"])][x["status"] if x["status"] in ("pass", "skip", "timeout") else "fail"] += 1
        summary = {"dry_run": self.dry_run, "finished": len(done) == len(self.items), "tiers": tiers,
                   "failed": [x["check"] for x in self.lines if x["status"] not in ("pass", "skip")],
                   "never_ran": [i.name for i in self.items if i.name not in done]}
        write_text(self.out / "summary.json", json.dumps(summary, indent=2))


def environment(out: Path, dry_run: bool, tiers) -> None:
    def run(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=ROOT).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unavailable ({exc})"

    env = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "commit": run(["git", "rev-parse", "--short", "HEAD"]) or "unknown", "dry_run": dry_run,
           "tiers": list(tiers), "python": sys.version.split()[0],
           "nvidia_smi": "" if dry_run else run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                                 "--format=csv,noheader"])}
    write_text(out / "environment.json", json.dumps(env, indent=2))
    print(f"commit {env['commit']}; {env['nvidia_smi'] or 'dry run: no device'}", flush=True)


# ---------------------------------------------------------------------------------------- tier 1: the worker
def worker(dry_run: bool) -> int:
    """Run tier-1 checks named on stdin, one JSON line each on the original stdout (library output goes to
    stderr, so nothing else can land in the protocol)."""
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if dry_run:
        from pymagma import simulator

        simulator.enable("full")
    ctx = _gpu_checks.Ctx(dry_run)
    checks = {c.name: c for c in _gpu_checks.TIER1}
    for name in sys.stdin:
        check = checks[name.strip()]
        try:
            line = {"status": "pass", "figures": check.run(ctx)}
        except BaseException:  # noqa: BLE001 - recorded verbatim, the runner decides what comes next
            line = {"status": "fail", "error": traceback.format_exc()}
        proto.write(json.dumps(line, default=str) + "\n")
        proto.flush()
    return 0


class Worker:
    def __init__(self, dry_run: bool, log):
        argv = [sys.executable, str(SCRIPTS / "_gpu_tiers.py"), "--worker"] + (["--dry-run"] if dry_run else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                     cwd=ROOT)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, name: str, limit: float) -> dict:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        try:
            line = self.lines.get(timeout=limit)
        except queue.Empty:
            return {"status": "timeout", "error": f"no answer within its limit of {limit:.0f} s"}
        if line is None:
            return {"status": "fail", "error": f"the worker died (exit {self.proc.wait()}); see logs/tier1-worker.log"}
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


# ------------------------------------------------------------------------------------------- pytest groups
def _run_pytest(item: Item, out: Path, limit: float, dry_run: bool, log) -> tuple[str, dict, str | None]:
    spec = item.spec
    if not spec["paths"]:
        return "skip", {"collected": 0}, None  # no test file marks a test tier1 yet
    argv = [sys.executable, "-m", "pytest", "-m", spec["marks"], *spec["paths"], "-p", "no:cacheprovider", "-q",
            *(f"--ignore={p}" for p in spec["ignore"])]
    if dry_run:
        # collecting only: no assert statement runs, so none is rewritten (a third of a collection's time)
        done = subprocess.run(argv + ["--collect-only", "--assert=plain"], capture_output=True, text=True,
                              timeout=limit, cwd=ROOT)
        log.write(done.stdout + done.stderr)
        nodes = [n for n in done.stdout.splitlines() if "::" in n]
        if done.returncode not in (0, 5):
            return "fail", {}, done.stdout[-ERROR_CHARS:] + done.stderr[-ERROR_CHARS:]
        return ("pass" if nodes else "skip"), {"collected": len(nodes), "tests": nodes[:50]}, None
    lines = out / f"tests-{item.name}.jsonl"
    env = {**os.environ, "GPU_CHECK_LINES": str(lines)}
    argv += ["-p", "_gpu_pytest_lines", "-rfE"]
    try:
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=limit, cwd=ROOT, env=env).returncode
        timed_out = False
    except subprocess.TimeoutExpired:
        rc, timed_out = None, True
    tests = [json.loads(x) for x in lines.read_text().splitlines()] if lines.exists() else []
    counts = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failed", "skipped")}
    failures = [f"{t['nodeid']}: {t.get('error', '')}" for t in tests if t["outcome"] == "failed"]
    running = [t["nodeid"] for t in tests if t["outcome"] == "running"]
    figures = {**counts, "failed_tests": [t["nodeid"] for t in tests if t["outcome"] == "failed"]}
    if timed_out:
        return "timeout", figures, f"time limit {limit:.0f} s reached while running {running or 'collection'}"
    if rc == 5:
        return "skip", figures, None  # no test selected (no test is marked tier1 yet)
    if rc != 0:
        return "fail", figures, "\n\n".join(failures) or f"pytest exit {rc}; see logs/{item.name}.log"
    return "pass", figures, None


# ---------------------------------------------------------------------------------------------- commands
def _run_cmd(item: Item, out: Path, limit: float, dry_run: bool, log) -> tuple[str, dict, str | None]:
    spec = item.spec
    if not dry_run and spec.get("needs") and not Path(spec["needs"]).exists():
        return "skip", {}, f"no {spec['needs']} (pass --data DIR)"
    json_name = spec["dry_json"] if dry_run else spec["json"]
    argv = [a.replace("{json}", str(out / json_name)) if json_name else a
            for a in (spec["dry_argv"] if dry_run else spec["argv"])]
    try:
        done = subprocess.run([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=limit, cwd=ROOT)
        log.write(done.stdout)
    except subprocess.TimeoutExpired as exc:
        log.write((exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or "")
        figures = _validated(item, out / json_name, dry_run)[1] if json_name and (out / json_name).exists() else {}
        return "timeout", figures, f"time limit {limit:.0f} s reached (rows measured so far are in {json_name})"
    if done.returncode != 0:
        return "fail", {}, done.stdout[-ERROR_CHARS:]
    if not json_name:
        return _gpu_validate.command_output(item.name, done.stdout, dry_run)
    return _validated(item, out / json_name, dry_run)


def _validated(item: Item, path: Path, dry_run: bool) -> tuple[str, dict, str | None]:
    try:
        return "pass", _gpu_validate.VALIDATORS[item.name](json.loads(path.read_text()), dry_run), None
    except Exception:  # noqa: BLE001
        return "fail", {}, traceback.format_exc()


# ------------------------------------------------------------------------------------------------- the run
def run(items: list[Item], out: Path, dry_run: bool, budget: float | None) -> dict:
    (out / "logs").mkdir(parents=True, exist_ok=True)
    rec = Recorder(out, items, dry_run)
    start, work = time.monotonic(), None
    with open(out / "logs" / "tier1-worker.log", "a") as worker_log:
        for item in items:
            limit = float(item.limit_s * (DRY_RUN_SLACK if dry_run else 1))
            if budget is not None and limit > budget - (time.monotonic() - start):
                print(f"[tier {item.tier}] not run: {item.name} (its {item.limit_s} s no longer fit the budget of "
                      f"{budget:.0f} s)", flush=True)
                continue
            t = time.monotonic()
            if item.kind == "py":
                work = work or Worker(dry_run, worker_log)
                answer = work.run(item.name, limit)
                if answer["status"] != "pass":  # a fresh process for the next check
                    work.close()
                    work = None
                rec.add(item, answer["status"], time.monotonic() - t, answer.get("figures"), answer.get("error"))
                continue
            if work is not None:  # tier 1's functions are done: free the device for the others
                work.close()
                work = None
            with open(out / "logs" / f"{item.name}.log", "w") as log:
                try:
                    runner = _run_pytest if item.kind == "pytest" else _run_cmd
                    status, figures, error = runner(item, out, limit, dry_run, log)
                except subprocess.TimeoutExpired:
                    status, figures, error = "timeout", {}, f"time limit {limit:.0f} s reached"
            rec.add(item, status, time.monotonic() - t, figures, error)
        if work is not None:
            work.close()
    return json.loads((out / "summary.json").read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tier", default="1,2,3", help="comma-separated tiers to run, in this order (default all)")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--budget", type=float, help="seconds for the whole run: checks that no longer fit are not "
                        "started (listed as never ran)")
    parser.add_argument("--data", default="../shared/data/mnist")
    parser.add_argument("--list", action="store_true", help="print the planned checks and their limits")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.dry_run)
    try:
        tiers = [int(t) for t in args.tier.split(",")]
        if not tiers or set(tiers) - {1, 2, 3}:
            raise ValueError
    except ValueError:
        parser.error(f"--tier: expected 1, 2, 3 or a comma-separated list of them, got {args.tier!r}")
    items = sorted(plan(tiers, args.data), key=lambda i: tiers.index(i.tier))
    for tier in tiers:
        chosen = [i for i in items if i.tier == tier]
        print(f"tier {tier}: {len(chosen)} checks, limits add up to {sum(i.limit_s for i in chosen)} s")
        for i in chosen:
            print(f"  {i.name:22} {i.limit_s:4d} s  {i.what}")
    if args.list:
        return 0
    if args.out is None:
        parser.error("--out DIR is required to run checks")
    args.out.mkdir(parents=True, exist_ok=True)
    environment(args.out, args.dry_run, tiers)
    summary = run(items, args.out, args.dry_run, args.budget)
    for tier, t in summary["tiers"].items():
        print(f"tier {tier}: {t['pass']} passed, {t['fail']} failed, {t['timeout']} timed out, {t['skip']} skipped"
              f" of {t['planned']}")
    if summary["never_ran"]:
        print(f"never ran: {', '.join(summary['never_ran'])}")
    ok = not summary["failed"] and not summary["never_ran"]
    print(("dry run " if args.dry_run else "") + ("passed" if ok else "failed"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
