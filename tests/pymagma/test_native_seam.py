"""pymagma reaches native code through one seam (pymagma._native), and the simulator stands in for all of it: every
native function pymagma may call is declared there (or in the MAGMA/cuDNN prototype tables it names), and each one
is modelled by the simulator or raises NotSimulatedError, so new code cannot bypass the simulator unnoticed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pymagma
from pymagma import _cublas, _cudnn, _cufft, _magma, _native, simulator
from pymagma.errors import NotSimulatedError
from pymagma.simulator import cudnn as sim_cudnn

PACKAGE = Path(pymagma.__file__).parent
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "simulator" not in p.relative_to(PACKAGE).parts)
#: the only modules that may import cuda-python, and what for
CUDA_BINDINGS_USERS = {
    "_libs.py": "cuda.pathfinder: finding the libraries, no call into them",
    "runtime.py": "the real CUDA runtime object of the seam",
    "kernels/loader.py": "the driver API, inside the real kernel launcher",
    "kernels/compiler.py": "NVRTC: compiling on the host, no device",
}


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def test_every_cuda_runtime_name_pymagma_uses_is_declared_in_the_seam():
    declared = set(_native.CUDART_ENTRY_POINTS) | set(_native.CUDART_DATA)
    used = {}
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and re.match(r"cuda[A-Z]", node.attr):
                member = isinstance(node.value, ast.Attribute) and node.value.attr in _native.CUDART_DATA
                if not member:  # an enum's member (cudaError_t.cudaErrorX) is data of a declared name
                    used.setdefault(node.attr, str(path.relative_to(PACKAGE)))
    assert used, "the scan found no CUDA runtime call at all"
    undeclared = {name: where for name, where in used.items() if name not in declared}
    assert not undeclared, f"CUDA runtime names used but not declared in pymagma._native: {undeclared}"


def test_only_the_seams_modules_import_cuda_bindings_or_load_libraries():
    for path in SOURCES:
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cuda"):
                assert rel in CUDA_BINDINGS_USERS, f"{rel} imports {node.module}: go through pymagma._native"
            loads = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("CDLL", "LoadLibrary")
            assert not loads or rel == "_libs.py", f"{rel} loads a shared library itself: go through _libs"


def test_the_real_runtime_object_offers_only_the_declared_functions():
    cudart = _native.real().cudart
    for name in _native.CUDART_ENTRY_POINTS:
        assert callable(getattr(cudart, name))
    with pytest.raises(AttributeError):
        cudart.cudaGraphCreate  # noqa: B018 - declared nowhere: not reachable


def test_every_declared_entry_point_is_declared_once_per_library():
    points = _native.entry_points()
    assert set(points) == {"cudart", "magma", "cudnn", "cublas", "cufft", "launcher"}
    assert set(points["magma"]) == set(_magma.SIGNATURES) and set(points["cudnn"]) == set(_cudnn.PROTOTYPES)
    assert set(points["cublas"]) == set(_cublas.PROTOTYPES) and set(points["cufft"]) == set(_cufft.PROTOTYPES)
    for library, names in points.items():
        assert len(names) == len(set(names)), library


def _outcome(call):
    try:
        call()
    except NotSimulatedError as exc:
        return "not simulated", str(exc)
    return "modelled", ""


@pytest.mark.native
def test_every_native_entry_point_is_modelled_by_the_simulator_or_not_simulated():
    """Each declared function of each library: the simulator has a model (or, for cuDNN's host-side calls, the real
    library answers on the CPU), or using it raises NotSimulatedError naming it."""
    with simulator.simulated("full") as sim:
        libs = sim.libraries
        summary = {}
        for name in _native.entry_points()["cudart"]:
            assert callable(getattr(libs.cudart, name)), f"{name}: the simulated CUDA runtime has no model"
        summary["cudart"] = len(_native.CUDART_ENTRY_POINTS)
        modelled = 0
        for name in _native.entry_points()["magma"]:
            kind, text = _outcome(lambda name=name: libs.magma.bind(name))
            assert kind == "modelled" or name in text, (name, text)
            modelled += kind == "modelled"
        summary["magma"] = modelled
        for name in _native.entry_points()["cudnn"]:
            kind, text = _outcome(lambda name=name: libs.cudnn.bind(name))
            assert kind == "modelled", (name, text)
            assert (name in libs.cudnn.names) != (name in sim_cudnn.HOST_CALLS), name
        for name in _native.entry_points()["cublas"]:
            kind, text = _outcome(lambda name=name: libs.cublas.bind(name))
            assert kind == "modelled", (name, text)
        for name in _native.entry_points()["cufft"]:
            kind, text = _outcome(lambda name=name: libs.cufft.bind(name))
            assert kind == "modelled", (name, text)
        assert libs.magma.has("magma_queue_get_cublas_handle")  # the handle the cuBLAS calls run on
        for name in _native.entry_points()["launcher"]:
            assert callable(getattr(libs.launcher, name)), name
        assert summary["magma"] > 100  # BLAS, batched, LAPACK and the queue routines at least


def test_the_real_cufft_table_matches_the_library():
    """Every cuFFT function of the table is exported by the libcufft cuda.pathfinder finds (the wheel of the
    ``native`` extra), and the simulated library answers the same names and nothing else."""
    pytest.importorskip("cuda.pathfinder")
    try:
        missing = _cufft.lib.missing()
    except Exception as exc:  # noqa: BLE001 - no libcufft: the skip names why
        pytest.skip(f"libcufft not found: {exc}")
    assert missing == []
    assert _cufft.version(_cufft.lib) >= 11000
    with simulator.simulated("full") as sim:
        assert all(sim.cufft.has(name) for name in _cufft.PROTOTYPES) and not sim.cufft.has("cufftPlan1d")
        with pytest.raises(AttributeError, match="no prototype for 'cufftPlan1d'"):
            sim.cufft.bind("cufftPlan1d")


def test_undeclared_cuda_runtime_calls_are_not_simulated():
    with simulator.simulated("full") as sim:
        with pytest.raises(NotSimulatedError, match="cudaGraphCreate is not simulated"):
            sim.runtime.cudaGraphCreate(0)


def test_the_simulator_swaps_libraries_and_resources_together():
    """Queues, the memory pool and cuDNN handles made on the simulator belong to its libraries: turning it off
    brings back the real ones' (nothing made on one side is used on the other)."""
    if simulator.is_enabled():
        pytest.skip("the simulator is on for the whole session (PYMAGMA_SIMULATOR)")
    real = _native.current
    with simulator.simulated("full") as sim:
        pymagma.zeros(4)
        pymagma.default_queue()
        assert sim.libraries.default_queues and sim.libraries.memory_pool.stats["requests"] >= 1
        assert "default_queues" not in vars(real) or not real.default_queues
    assert _native.current is real


def test_libraries_refuse_unknown_names():
    with pytest.raises(TypeError, match="unknown library 'cusparse'"):
        _native.Libraries("x", cusparse=object())
    with pytest.raises(AttributeError, match="no native library or resource named 'nothing'"):
        _native.Libraries("x").nothing  # noqa: B018
    with pytest.raises(TypeError, match="needs a Libraries"):
        _native.use(object())
