"""Compare two collections of test ids (``pytest --co -q`` output) across moved and split test files.

    python scripts/compare_test_ids.py BEFORE.txt AFTER.txt [--base REV] [--map OLD=NEW[,NEW...]]...

Renames come from ``git diff -M --name-status REV`` (files renamed under tests/ since REV) and from ``--map``
(a file split into several: its ids may land in any of the new files). An id before is kept when the same test
(the part after the file, ``::name[params]``) is collected after from the file it moved to. Prints, per old file,
the ids before, kept and lost, then the totals, and the ids of new files that match nothing (tests added meanwhile).
Exits 1 when an id was lost.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict


def read_ids(path: str) -> list[str]:
    """The test ids of a ``pytest --co -q`` listing (lines holding ``::``)."""
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if "::" in line and not line.startswith(("ERROR", "FAILED"))]


def git_renames(base: str) -> dict[str, list[str]]:
    """Test files renamed since ``base`` (``git diff -M``), old path -> [new path]."""
    out = subprocess.run(["git", "diff", "-M", "--name-status", base, "--", "tests"], check=True,
                         capture_output=True, text=True).stdout
    renames: dict[str, list[str]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R") and len(parts) == 3:
            renames[parts[1]] = [parts[2]]
    return renames


def compare(before: list[str], after: list[str], renames: dict[str, list[str]]):
    """(per old file: [before, kept], lost ids, after ids nothing before maps to)."""
    after_set = set(after)
    used: set[str] = set()
    per_file: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lost = []
    for test_id in before:
        path, rest = test_id.split("::", 1)
        per_file[path][0] += 1
        for target in renames.get(path, [path]):
            candidate = f"{target}::{rest}"
            if candidate in after_set and candidate not in used:
                used.add(candidate)
                per_file[path][1] += 1
                break
        else:
            lost.append(test_id)
    return dict(per_file), lost, [t for t in after if t not in used]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--base", help="the revision the 'before' listing was collected at (renames from git)")
    parser.add_argument("--map", action="append", default=[], metavar="OLD=NEW[,NEW...]",
                        help="an extra rename or split (repeatable); overrides git's entry for OLD")
    args = parser.parse_args(argv)
    renames = git_renames(args.base) if args.base else {}
    for item in args.map:
        old, _, new = item.partition("=")
        if not new:
            parser.error(f"--map {item!r}: expected OLD=NEW[,NEW...]")
        renames[old] = new.split(",")
    before, after = read_ids(args.before), read_ids(args.after)
    per_file, lost, new = compare(before, after, renames)
    for path in sorted(per_file):
        n, kept = per_file[path]
        targets = renames.get(path)
        where = f" -> {', '.join(targets)}" if targets else ""
        flag = "" if kept == n else f"  LOST {n - kept}"
        print(f"{n:5d} {kept:5d}  {path}{where}{flag}")
    print(f"before {len(before)}, after {len(after)}, kept {len(before) - len(lost)}, lost {len(lost)}, "
          f"new {len(new)}")
    for test_id in lost:
        print("lost:", test_id)
    for test_id in new:
        print("new:", test_id)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
