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
                    "pymagma.linalg", "pymagma.hybrid", "pymagma.hybrid._block_size", "pymagma.hybrid._cholesky",
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
        if module == "magmadnn.backend.host" or module.startswith(("magmadnn.backend.host.", "magmadnn.backend.ops",
                                                                   "magmadnn.layers", "magmadnn.models")):
            assert not any(d.startswith("pymagma") for d in deps), f"{module} reaches past the op set into pymagma"
        if module.startswith("magmadnn.models"):
            assert not any(d.startswith("magmadnn.distributed") for d in deps), f"{module} imports distributed"


# ------------------------------------------------------------------------------------- the backend by topic
BACKEND = ROOT / "magmadnn" / "backend"
#: topics only the device has: graph replay, device checks, data-parallel exchange (the op set declares their
#: optional ops in modules of the same names)
DEVICE_ONLY = {"graphs", "faults", "collectives"}


def _topics(floor: str) -> set[str]:
    """The topic modules of ``backend/<floor>/`` (private helpers, ``_*.py``, are not topics)."""
    return {p.stem for p in (BACKEND / floor).glob("*.py") if not p.stem.startswith("_")}


def _declared(topic: str) -> dict[str, set[str]]:
    """The ops ``ops/<topic>.py`` declares, by decorator: {"op": {...}, "optional": {...}}."""
    found = {"op": set(), "optional": set()}
    for node in ast.parse((BACKEND / "ops" / f"{topic}.py").read_text()).body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Name) and deco.id in found:
                    found[deco.id].add(node.name)
    return found


def _defined(path: Path) -> set[str]:
    """Names a module defines: functions at any depth (``_creation_ops`` makes some per GPU) and module-level
    assignments (``sum_to_shape = ...``)."""
    tree = ast.parse(path.read_text())
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_ops_host_and_device_have_the_same_topic_modules():
    ops, host, device = _topics("ops"), _topics("host"), _topics("device")
    assert ops - {"__init__"} - DEVICE_ONLY == host - {"__init__"}, "ops/ and host/ topic modules differ"
    assert device - ops == set(), f"device/ modules without an op-set topic: {sorted(device - ops)}"
    assert ops - device == set(), f"op-set topics the device lacks: {sorted(ops - device)}"
    assert host & DEVICE_ONLY == set(), "graphs, faults and collectives are the device's alone"


@pytest.mark.parametrize("topic", sorted(_topics("ops") - {"__init__"}))
def test_every_op_of_a_topic_is_implemented_in_the_same_topic_of_each_backend(topic):
    declared = _declared(topic)
    assert declared["op"] or declared["optional"], f"ops/{topic}.py declares nothing"
    if topic not in DEVICE_ONLY:
        missing = declared["op"] - _defined(BACKEND / "host" / f"{topic}.py")
        assert not missing, f"host/{topic}.py lacks {sorted(missing)}"
    device = _defined(BACKEND / "device" / f"{topic}.py")
    missing = declared["op"] - device
    assert not missing, f"device/{topic}.py lacks {sorted(missing)}"
    missing = declared["optional"] - device - _defined(BACKEND / "device" / "__init__.py")  # for_index: the package
    assert not missing, f"device/{topic}.py lacks the optional {sorted(missing)}"


def test_the_topic_check_sees_a_missing_op(tmp_path):
    (tmp_path / "t.py").write_text("def _creation_ops(d):\n    def uniform(): ...\n\nsum_to_shape = None\n")
    assert _defined(tmp_path / "t.py") == {"_creation_ops", "uniform", "sum_to_shape"}
    assert "relu" not in _defined(tmp_path / "t.py")


#: Modules over the size budget (about 500 lines), with their line counts when the budget was set: a listed module
#: may shrink (then lower its count, or drop it once under the budget) but never grow; no other module may pass it.
SIZE_BUDGET = 500
OVERSIZE = {
    "pymagma/linalg.py": 1505,
    "pymagma/kernels/__init__.py": 1066,
    "pymagma/simulator/cudnn/dispatch.py": 883,
    "pymagma/dnn.py": 869,
    "magmadnn/onnx/importers.py": 863,
    "pymagma/simulator/magma.py": 800,
    "pymagma/array.py": 746,
    "pymagma/blas.py": 673,
    "magmadnn/callbacks.py": 646,
    "magmadnn/optimizers.py": 641,
    "magmadnn/losses.py": 635,
    "pymagma/_cudnn.py": 605,
    "pymagma/simulator/runtime.py": 604,
    "magmadnn/metrics.py": 565,
}


def test_modules_keep_to_the_size_budget():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for package in ("pymagma", "magmadnn") for p in (ROOT / package).rglob("*.py")}
    grown = {m: (n, OVERSIZE[m]) for m, n in sizes.items() if m in OVERSIZE and n > OVERSIZE[m]}
    assert not grown, f"listed oversize modules grew (lines now, recorded): {grown}; split them instead"
    new = {m: n for m, n in sizes.items() if n > SIZE_BUDGET and m not in OVERSIZE}
    assert not new, f"modules over {SIZE_BUDGET} lines: {new}; split them by topic"
