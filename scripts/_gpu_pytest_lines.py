"""A pytest plugin of ``gpu_check.sh`` (``-p _gpu_pytest_lines``): one JSON line per test in ``$GPU_CHECK_LINES``,
written the moment the test ends, and a "running" line while it runs, so a run cut off by its time limit still says
what passed, what failed (error verbatim) and which test was running."""

from __future__ import annotations

import json
import os

from magmadnn._atomic import write_text

_lines: dict[str, dict] = {}


def _write() -> None:
    path = os.environ.get("GPU_CHECK_LINES")
    if path:
        write_text(path, "".join(json.dumps(x) + "\n" for x in _lines.values()))


def pytest_runtest_logstart(nodeid, location):
    _lines[nodeid] = {"nodeid": nodeid, "outcome": "running"}
    _write()


def pytest_runtest_logreport(report):
    line = _lines.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "running"})
    if report.failed:
        line.update(outcome="failed", error=line.get("error", "") + f"[{report.when}] {report.longreprtext}"[-4000:])
    elif report.skipped and line["outcome"] == "running":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        line.update(outcome="skipped", reason=reason)
    elif report.when == "call" and line["outcome"] == "running":
        line["outcome"] = "passed"
    line["seconds"] = round(line.get("seconds", 0) + report.duration, 3)
    _write()
