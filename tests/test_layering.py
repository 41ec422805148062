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
        if module == "magmadnn.backend.host" or module.startswith(("magmadnn.backend.host.", "magmadnn.backend.ops",
                                                                   "magmadnn.layers", "magmadnn.models")):
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
    assert {ROOT / "pymagma" / "kernels", ROOT / "magmadnn" / "backend" / "device" / "kernels"} <= set(folders)
    for folder in folders:
        for source in folder.glob("*.cu"):
            launcher = source.with_suffix(".py")
            assert launcher.is_file(), f"{source.relative_to(ROOT)} has no launcher module {launcher.name}"
            launched = set(re.findall(r'_run\(\s*"(\w+)"|PROGRAM = "(\w+)"', launcher.read_text()))
            names = {n for pair in launched for n in pair if n}
            assert names == {source.stem}, f"{launcher.relative_to(ROOT)} launches {sorted(names)}, not only " \
                                           f"{source.stem!r}"


def test_pymagma_says_nothing_of_keras():
    """Keras' conventions belong to magmadnn; pymagma is a general binding."""
    for path in (ROOT / "pymagma").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".cu", ".cuh", ".h", ".md"):
            assert "keras" not in path.read_text().lower(), f"{path.relative_to(ROOT)} mentions Keras"


#: The kernel programs only deep learning needs (optimizer updates, losses, dropout, attention, recurrent cells,
#: normalisation rows, embeddings, pooling with saved offsets): magmadnn's. (The value checks into a fault record,
#: ``check.cu``, are pymagma's: its array API checks integer indices with them.)
DEEP_LEARNING_PROGRAMS = {"loss", "optim", "step", "attention", "norm", "embeddings", "recurrent", "pool", "dropout"}
#: Kernel names (``__global__`` functions) of those programs, which no program of pymagma may define either.
DEEP_LEARNING_KERNELS = {"dropout", "sgd", "adam", "rmsprop", "adagrad", "softmax_xent_index", "max_pool_forward",
                         "masked_softmax", "norm_forward", "embedding_gather", "lstm_gates_forward"}


def test_pymagma_holds_no_deep_learning_kernel():
    shipped = {path.stem for path in (ROOT / "pymagma" / "kernels").glob("*.cu")}
    assert not shipped & DEEP_LEARNING_PROGRAMS, sorted(shipped & DEEP_LEARNING_PROGRAMS)
    magmadnn = {path.stem for path in (BACKEND / "device" / "kernels").glob("*.cu")}
    assert DEEP_LEARNING_PROGRAMS <= magmadnn, sorted(DEEP_LEARNING_PROGRAMS - magmadnn)
    for path in (ROOT / "pymagma").rglob("*.cu*"):
        defined = set(re.findall(r"__global__\s+void\s+(\w+)", path.read_text()))
        found = sorted(defined & DEEP_LEARNING_KERNELS)
        assert not found, f"{path.relative_to(ROOT)} defines {found}"


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
    "pymagma/simulator/cudnn/dispatch.py": 883,
    "pymagma/dnn.py": 869,
    "magmadnn/onnx/importers.py": 863,
    "pymagma/simulator/magma.py": 800,
    "pymagma/array.py": 698,
    "magmadnn/callbacks.py": 640,
    "magmadnn/optimizers.py": 621,
    "magmadnn/losses.py": 631,
    "pymagma/_cudnn.py": 510,
    "pymagma/simulator/runtime.py": 533,
    "magmadnn/metrics.py": 532,
}


def test_modules_keep_to_the_size_budget():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for package in ("pymagma", "magmadnn") for p in (ROOT / package).rglob("*.py")}
    grown = {m: (n, OVERSIZE[m]) for m, n in sizes.items() if m in OVERSIZE and n > OVERSIZE[m]}
    assert not grown, f"listed oversize modules grew (lines now, recorded): {grown}; split them instead"
    new = {m: n for m, n in sizes.items() if n > SIZE_BUDGET and m not in OVERSIZE}
    assert not new, f"modules over {SIZE_BUDGET} lines: {new}; split them by topic"


def test_import_magmadnn_loads_neither_pymagma_nor_ml_dtypes():
    """The device backend (pymagma) and bfloat16 (ml_dtypes, about half a second to import) load on first use: every
    process that imports magmadnn -- each test subprocess among them -- would pay for them otherwise."""
    import subprocess
    import sys

    code = "import sys, magmadnn; print(sorted({'pymagma', 'ml_dtypes'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import magmadnn loaded {done.stdout.strip()}"
