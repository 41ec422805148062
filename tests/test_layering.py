"""The layering of docs/architecture.md, checked on the source: no import circle but the two operator overloading
needs, and none of the imports the architecture rules out.  Function-local imports count like the others."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the only circles allowed: operator overloading (Tensor.__add__ calls functional; DeviceArray.__matmul__ calls blas,
#: which calls MAGMA through the column-major face, which makes arrays; DeviceArray.__add__, astype and
#: __array_namespace__ call the array API namespace, whose kernels make arrays)
ALLOWED_CIRCLES = [{"magmadnn.autograd", "magmadnn.functional.operators", "magmadnn.functional._base"},
                   {"pymagma.array", "pymagma.blas", "pymagma._colmajor", "pymagma.kernels", "pymagma.array_api",
                    "pymagma.array_api._creation", "pymagma.array_api._elementwise", "pymagma.array_api._kernels",
                    "pymagma.array_api._reductions", "pymagma.array_api._reduce_kernels",
                    "pymagma.array_api._searching", "pymagma.array_api._sets", "pymagma.array_api._sorting",
                    "pymagma.array_api._statistics", "pymagma.array_api._indexing", "pymagma.array_api._manipulation",
                    # the array API's linalg extension runs pymagma.linalg and the hybrid drivers
                    "pymagma.array_api._norms", "pymagma.array_api._products", "pymagma.array_api.linalg",
                    "pymagma.linalg", "pymagma.linalg._common", "pymagma.linalg.cholesky", "pymagma.linalg.eigen",
                    "pymagma.linalg.lu", "pymagma.linalg.norms", "pymagma.linalg.qr", "pymagma.linalg.svd",
                    "pymagma.hybrid", "pymagma.hybrid._block_size", "pymagma.hybrid._cholesky",
                    "pymagma.hybrid._eigh", "pymagma.hybrid._lookahead", "pymagma.hybrid._qr",
                    "pymagma.hybrid._reflectors", "pymagma.hybrid._svd"}]


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
def test_no_import_circle_but_operator_overloading(packages):
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
