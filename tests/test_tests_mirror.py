"""The tests mirror the source tree (docs/testing.md, "Where the tests live").

A test of one module sits in its package's folder under the module's name: the tests of ``magmadnn/models/replay.py``
in ``tests/magmadnn/models/test_replay.py``; a test that spans a package sits beside that package's folder, named
after it (``tests/pymagma/test_simulator.py``). The backend's topics count once for the three floors:
``tests/magmadnn/backend/test_normalization.py`` holds the tests of ``ops/``, ``host/`` and ``device/``'s
``normalization.py``. A name may go on with an aspect after an underscore (``test_replay_faults.py``,
``test_normalization_keras.py``); a leading underscore of a private module is dropped (``test_native_seam.py`` for
``_native.py``). Cross-cutting suites (Keras programs, bad inputs, parity, examples, end to end) live in a
``suites`` folder; the repository's own checks (layering, docs, scripts) in ``tests/`` itself.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
PACKAGES = ("magmadnn", "pymagma")

#: Source packages whose subpackages' modules count as the package's own names (one test file per topic).
FLATTENED = {"magmadnn/backend": ("ops", "host", "device")}

#: Test files that mirror no module yet, with what they test. This list may only shrink: an entry whose file is
#: gone or now mirrors a module fails, so remove it.
EXCEPTIONS = {
    "tests/magmadnn/layers/test_sequence_layers.py": "Conv1D, 1-D pooling, Bidirectional, recurrent states, masks "
                                                     "against Keras (conv, pooling, recurrent, bidirectional)",
    "tests/magmadnn/layers/test_sequence_layers_model.py": "the sequence layers in models (several layer topics)",
}


def _names(source: Path) -> set[str]:
    """The module and subpackage names of a source package, a private module's leading underscore dropped."""
    names = set()
    for entry in source.iterdir():
        if entry.suffix == ".py" and entry.stem != "__init__":
            names.add(entry.stem.lstrip("_"))
        elif entry.is_dir() and (entry / "__init__.py").exists():
            names.add(entry.name.lstrip("_"))
    for sub in FLATTENED.get(source.relative_to(ROOT).as_posix(), ()):
        names |= _names(source / sub)
    return names


def _mirrors(test: Path) -> bool:
    source = ROOT / test.parent.relative_to(TESTS)
    if not (source / "__init__.py").exists():
        return False
    stem = test.stem.removeprefix("test_")
    return any(stem == name or stem.startswith(name + "_") for name in _names(source))


def _test_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (TESTS / package).rglob("test_*.py")
                  if "suites" not in p.relative_to(TESTS).parts)


def test_every_test_file_mirrors_a_source_module_or_package():
    strays = [p.relative_to(ROOT).as_posix() for p in _test_files() if not _mirrors(p)]
    unexplained = sorted(set(strays) - set(EXCEPTIONS))
    assert not unexplained, (
        "test files that mirror no source module or package (tests/<package>/<subpackage>/test_<module>[_<aspect>].py; "
        f"cross-cutting suites go in a suites/ folder): {unexplained}")


def test_the_exceptions_only_shrink():
    stale = [path for path in EXCEPTIONS if not (ROOT / path).exists() or _mirrors(ROOT / path)]
    assert not stale, f"remove these entries of EXCEPTIONS (the file is gone or now mirrors a module): {stale}"


def test_every_test_folder_is_a_package_named_after_a_source_package_or_suites():
    """Each folder is a package (``__init__.py``), so test files of the same name in two folders stay apart; and
    each is a source package's mirror or a ``suites`` folder."""
    problems = []
    for folder in sorted({p.parent for p in TESTS.rglob("test_*.py")}):
        rel = folder.relative_to(TESTS)
        if not (folder / "__init__.py").exists():
            problems.append(f"{rel}: no __init__.py")
        if rel.parts and rel.parts[-1] != "suites" and not (ROOT / rel / "__init__.py").exists():
            problems.append(f"{rel}: no source package {rel.as_posix()}")
    assert not problems, problems


def test_the_rule_tells_a_mirror_from_a_stray():
    """The rule itself, on this tree's own names: a module, a topic of the backend's three floors, an aspect, a
    private module, a package beside its folder; and names that mirror nothing."""
    def ok(rel: str) -> bool:
        return _mirrors(TESTS / rel)

    assert ok("magmadnn/models/test_replay.py") and ok("magmadnn/models/test_replay_faults.py")
    assert ok("magmadnn/backend/test_normalization.py") and ok("magmadnn/backend/test_graphs.py")
    assert ok("pymagma/test_native_seam.py") and ok("pymagma/test_simulator.py")
    assert not ok("magmadnn/test_normalization.py")  # a layer topic, not a module of magmadnn/ itself
    assert not ok("magmadnn/models/test_replayed.py")  # no module replayed, and no aspect of replay
    assert not ok("magmadnn/nowhere/test_core.py")  # no such source package
