"""The layering of docs/architecture.md, checked on the source: no import circle, and none of the imports the
architecture rules out.  Function-local imports count like the others."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: No circle is allowed: the operators of DeviceArray and Tensor reach the floor above through a table that floor
#: fills when it is imported (pymagma.array.UPPER, magmadnn.autograd.UPPER), as NumPy's ndarray reaches its ufuncs.
ALLOWED_CIRCLES: list[set[str]] = []


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    base = ROOT / package
    found = {}
    for path in base.rglob("*.py"):
        if package == "scripts":  # run as programs: they import one another by bare name
            found[path.stem] = (path, False)
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def import_graph(packages) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (anywhere in its body)."""
    modules = {}
    for package in packages:
        modules.update(_modules(package))

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, (path, is_package) in modules.items():
        here = module if is_package else module.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                full = (base + ("." + node.module if node.module else "")) if node.level else node.module
                for alias in node.names:
                    target = full + "." + alias.name
                    found = target if target in modules else known(full)
                    if found:
                        deps.add(found)
        deps.discard(module)
        graph[module] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("packages", [("pymagma",), ("magmadnn",), ("scripts",)])
def test_no_import_circle(packages):
    found = circles(import_graph(packages))
    unexpected = [sorted(c) for c in found if c not in ALLOWED_CIRCLES]
    assert not unexpected, f"import circles: {unexpected}"


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def _imports(module: str, graph) -> set[str]:
    return graph.get(module, set())


def test_the_rules_the_architecture_names():
    graph = import_graph(("pymagma", "magmadnn"))
    for module, deps in graph.items():
        if module.startswith("pymagma"):
            assert not any(d.startswith("magmadnn") for d in deps), f"{module} imports magmadnn"
        if module == "magmadnn.backend.host" or module.startswith(("magmadnn.layers", "magmadnn.models")):
            assert not any(d.startswith("pymagma") for d in deps), f"{module} reaches past the op set into pymagma"
        if module.startswith("magmadnn.models"):
            assert not any(d.startswith("magmadnn.distributed") for d in deps), f"{module} imports distributed"


def kernel_folders() -> list[Path]:
    """The folders that hold kernel programs (``.cu`` files): pymagma's and magmadnn's."""
    return sorted({path.parent for package in ("pymagma", "magmadnn") for path in (ROOT / package).rglob("*.cu")})


def test_every_kernel_program_has_its_own_launcher_module():
    """``pool.cu`` beside ``pool.py``, which launches that program and no other (a ``.cu`` that is only included
    by others, as a header, has no launcher)."""
    folders = kernel_folders()
    assert ROOT / "pymagma" / "kernels" in folders
    for folder in folders:
        for source in folder.glob("*.cu"):
            launcher = source.with_suffix(".py")
            assert launcher.is_file(), f"{source.relative_to(ROOT)} has no launcher module {launcher.name}"
            launched = set(re.findall(r'_run\(\s*"(\w+)"|PROGRAM = "(\w+)"', launcher.read_text()))
            names = {n for pair in launched for n in pair if n}
            assert names == {source.stem}, f"{launcher.relative_to(ROOT)} launches {sorted(names)}, not only " \
                                           f"{source.stem!r}"


@pytest.mark.xfail(strict=True, reason="issue 34: the optimizer kernels' Keras flag leaves with them for magmadnn")
def test_pymagma_says_nothing_of_keras():
    """Keras' conventions belong to magmadnn; pymagma is a general binding."""
    for path in (ROOT / "pymagma").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".cu", ".cuh", ".h", ".md"):
            assert "keras" not in path.read_text().lower(), f"{path.relative_to(ROOT)} mentions Keras"


#: The kernel programs only deep learning needs (optimizer updates, losses, dropout, attention, recurrent cells,
#: normalisation rows, embeddings, pooling with saved offsets, value checks into a fault record): magmadnn's.
DEEP_LEARNING_PROGRAMS = {"loss", "optim", "step", "attention", "norm", "embeddings", "recurrent", "pool", "check"}


@pytest.mark.xfail(strict=True, reason="issue 34: these programs move to magmadnn's device backend once it is a "
                                       "package (magmadnn/backend/device/kernels/)")
def test_pymagma_holds_no_deep_learning_kernel():
    shipped = {path.stem for path in (ROOT / "pymagma" / "kernels").glob("*.cu")}
    assert not shipped & DEEP_LEARNING_PROGRAMS, sorted(shipped & DEEP_LEARNING_PROGRAMS)
