"""Fill the row template of ``docs/gpu-runs.md`` from a ``gpu_check.sh`` output folder: date, commit, device, driver,
library versions, per-tier counts (pass/fail/timeout/skip, never ran), figures and the failures.

    python scripts/gpu_record.py OUT            # print the row
    python scripts/gpu_record.py OUT --write    # and add it under the table's header in docs/gpu-runs.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from magmadnn._atomic import write_text  # noqa: E402

DOC = ROOT / "docs" / "gpu-runs.md"
TEMPLATE = re.compile(r"<!-- row template: (\|.*\|) -->")
HEADER = "| date | commit |"


def _cell(text) -> str:
    return str(text).replace("|", "/").replace("\n", " ").strip() or "-"


def fields(out: Path) -> dict:
    env = json.loads((out / "environment.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    checks = [json.loads(x) for x in (out / "checks.jsonl").read_text().splitlines() if x.strip()]
    by_name = {c["check"]: c for c in checks}
    libs = by_name.get("libraries", {}).get("figures", {})
    smi = [s.strip() for s in env.get("nvidia_smi", "").split(",")]
    tiers = []
    for tier, t in sorted(summary["tiers"].items()):
        never = t["planned"] - t["pass"] - t["fail"] - t["timeout"] - t["skip"]
        tiers.append(f"{tier}: {t['pass']}/{t['fail']}/{t['timeout']}/{t['skip']}/{never}")
    figures = []
    for c in checks:
        f = c.get("figures") or {}
        if c["check"].startswith(("gpu_tests", "tier1_tests")):
            f = {k: f.get(k) for k in ("passed", "failed", "skipped")}
        elif c["check"] == "libraries":
            continue
        if f:
            figures.append(f"{c['check']} {c['seconds']:.0f}s: " + json.dumps(f, separators=(",", ":")))
    failures = [f"{c['check']} ({c['status']}): {(c.get('error') or '').strip().splitlines()[-1:] or ['']}"[:300]
                for c in checks if c["status"] not in ("pass", "skip")]
    return {
        "date": env.get("date", "?")[:10], "commit": env.get("commit", "?"),
        "device": libs.get("device") or (smi[0] if smi and smi[0] else "?"),
        "driver": libs.get("driver") or (smi[1] if len(smi) > 1 else "?"),
        "libraries": ", ".join(f"{k} {libs[k]}" for k in ("cuda_runtime", "cudnn", "cublas", "nvrtc", "magma", "cufft",
                                                          "torch") if k in libs) or "?",
        "tiers": "; ".join(tiers),
        "figures": "; ".join(figures) or "-",
        "failures": "; ".join(failures) + (f"; never ran: {', '.join(summary['never_ran'])}"
                                           if summary["never_ran"] else "") or "none",
    }


def row(out: Path, doc: str) -> str:
    found = TEMPLATE.search(doc)
    if not found:
        raise SystemExit(f"no '<!-- row template: | ... | -->' line in {DOC}")
    values = {k: _cell(v) for k, v in fields(out).items()}
    return found.group(1).format(**values)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the $OUT folder of a gpu_check.sh run")
    parser.add_argument("--write", action="store_true", help=f"add the row to {DOC.relative_to(ROOT)}")
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    doc = args.doc.read_text()
    line = row(args.out, doc)
    print(line)
    if args.write:
        lines = doc.splitlines(keepends=True)
        at = next(i for i, x in enumerate(lines) if x.startswith(HEADER)) + 2  # below the header and |---|
        lines.insert(at, line + "\n")
        write_text(args.doc, "".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
