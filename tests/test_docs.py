"""The documentation as a reader meets it: README.md is short, every docs/ page is reachable from it, every
```python block of a page runs when pasted in order into one fresh interpreter (on the CPU simulator), and every
PYMAGMA_* / MAGMADNN_* environment variable the packages read is documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 200

_FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.S | re.M)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)(?:#([^)]*))?\)")
_REPO_PATH = re.compile(r"\b(?:scripts|examples|tests|pymagma|magmadnn|docs)/[\w./*-]+\.(?:py|sh|cu|md)\b")
_ENV_NAME = re.compile(r"\b(?:PYMAGMA|MAGMADNN)_[A-Z0-9_]*[A-Z0-9]\b")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the block's first source line, source) of each ```python block, in order."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(3)) for m in _FENCE.finditer(text)
            if m.group(2).strip().lower() == "python"]


def local_links(page: Path) -> list[tuple[Path, str]]:
    """(file, anchor) of each link of this page by relative path (web addresses and pure anchors left out)."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [((page.parent / target).resolve(), anchor) for target, anchor in _LINK.findall(text)
            if "://" not in target and not target.startswith("mailto:")]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_readme_is_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines, at most {MAX_README_LINES}: move it to docs/"


def test_every_doc_page_is_reachable_from_the_readme_and_links_resolve():
    seen, todo, broken = {README.resolve()}, [README.resolve()], []
    while todo:
        page = todo.pop()
        for target, anchor in local_links(page):
            if not target.exists() or (anchor and target.suffix == ".md" and anchor not in anchors(target)):
                where = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
                broken.append(f"{_name(page)} -> {where}{'#' + anchor if anchor else ''}")
            elif target.suffix == ".md" and target not in seen:
                seen.add(target)
                todo.append(target)
    assert not broken, f"links to files or headings that do not exist: {broken}"
    unreachable = [_name(p) for p in PAGES if p.resolve() not in seen]
    assert not unreachable, f"pages no link path from README.md reaches: {unreachable}"


def test_every_file_the_pages_name_exists():
    missing = sorted({f"{_name(page)}: {path}" for page in PAGES
                      for path in _REPO_PATH.findall(page.read_text(encoding="utf-8")) if not any(ROOT.glob(path))})
    assert not missing, f"the pages name scripts, examples or modules that do not exist: {missing}"


# Runs one page's blocks in order in one namespace, as a reader pasting them into one interpreter; on the first error it
# prints the block's line and the traceback and exits 1.
_RUNNER = r"""
import json, sys, traceback
page, blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for line, source in blocks:
    try:
        exec(compile(source, f"{page}, block at line {line}", "exec"), namespace)
    except BaseException:
        print(f"{page}: the ```python block starting at line {line} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


@pytest.mark.native  # device examples run on the simulator, which reads real cuDNN descriptors
@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p.read_text(encoding="utf-8"))], ids=_name)
def test_python_blocks_run_as_pasted(page, tmp_path):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    env = dict(os.environ, PYMAGMA_SIMULATOR="1", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for name in ("MAGMADNN_BACKEND", "MAGMADNN_JIT", "PYMAGMA_MAGMA_LIBRARY", "PYMAGMA_ILP64"):
        env.pop(name, None)  # the pages describe the defaults
    done = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps([_name(page), blocks]), cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{_name(page)}:\n{done.stderr[-6000:]}"


def _variables_read() -> set[str]:
    names = set()
    for package in ("pymagma", "magmadnn"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(_ENV_NAME.findall(path.read_text(encoding="utf-8")))
    return names


def test_every_environment_variable_is_documented():
    read = _variables_read()
    assert {"PYMAGMA_SIMULATOR", "MAGMADNN_BACKEND"} <= read  # the grep itself works
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    missing = sorted(n for n in read if not re.search(rf"\b{n}\b", text))
    assert not missing, f"environment variables the packages name but README.md and docs/ do not: {missing}"
