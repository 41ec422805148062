"""Kernel programs registered from outside pymagma (:mod:`pymagma.kernels.registry`): source text and ``.cu`` files,
compiled with NVRTC (when present), launched on a queue, captured in a graph and run on the simulator's host build."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pymagma
from pymagma import graphs, kernels, simulator
from pymagma.kernels import compiler, registry
from pymagma.simulator import kernels as simulated_kernels

SCALE = r"""#include "common.cuh"
template <typename T>
__global__ void scale_add(const T* x, T* y, T a, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}
"""


@pytest.fixture
def names():
    """Registers under unique names and forgets them afterwards (the registry is process-wide)."""
    made = []

    def name(stem: str) -> str:
        made.append(f"test_{stem}_{len(registry.PROGRAMS)}")
        return made[-1]

    yield name
    for n in made:
        registry.PROGRAMS.pop(n, None)


@pytest.fixture
def sim(tmp_path, monkeypatch):
    if simulated_kernels.compiler() is None:
        pytest.skip("no host C++ compiler (g++ or clang++) to build the kernel emulation")
    monkeypatch.setenv("PYMAGMA_CACHE", str(tmp_path))
    with simulator.simulated("full") as simulation:
        yield simulation


def _launch(program, x, y, a):
    program.launch("scale_add<float>", [x, y, ctypes.c_float(a), ctypes.c_longlong(x.size)], items=x.size)


def test_a_program_from_source_text_runs_on_the_simulator_and_in_a_graph(names, sim):
    program = kernels.register(names("text"), source=SCALE, expressions=["scale_add<float>", "scale_add<double>"])
    rng = np.random.default_rng(0)
    xh, yh = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    x, y = pymagma.asarray(xh), pymagma.asarray(yh)
    _launch(program, x, y, 2.5)
    expected = np.float32(2.5) * xh + yh
    np.testing.assert_array_equal(y.get(), expected)
    assert "scale_add<float>" in sim.kernels.launched
    with graphs.capture() as graph:  # recorded on the default queue, not run
        _launch(program, x, y, -1.0)
    np.testing.assert_array_equal(y.get(), expected)
    graph.launch()
    graph.launch()
    np.testing.assert_array_equal(y.get(), (expected - xh) - xh)


def test_a_program_from_a_file_includes_from_its_own_folder(names, sim, tmp_path):
    folder = tmp_path / "mykernels"
    folder.mkdir()
    (folder / "twice.cuh").write_text("template <typename T> __device__ T twice(T v) { return v + v; }\n")
    (folder / "double_it.cu").write_text('#include "common.cuh"\n#include "twice.cuh"\n'
                                         'extern "C" __global__ void double_it(float* x, i64 n) {\n'
                                         "    for (i64 i = threadIdx.x; i < n; i += blockDim.x)\n"
                                         "        x[i] = twice(x[i]);\n}\n")
    program = kernels.register(names("file"), path=folder / "double_it.cu", expressions=["double_it"])
    assert set(program.headers) == {"common.cuh", "twice.cuh"}
    x = pymagma.asarray(np.arange(7, dtype=np.float32))
    program.launch("double_it", [x, ctypes.c_longlong(7)], grid=1, block=32, queue=pymagma.default_queue())
    np.testing.assert_array_equal(x.get(), 2 * np.arange(7, dtype=np.float32))


def test_registering_is_idempotent_and_names_are_checked(names, tmp_path):
    name = names("same")
    first = kernels.register(name, source=SCALE, expressions=["scale_add<float>"])
    assert kernels.register(name, source=SCALE, expressions=["scale_add<float>"]) is first
    assert kernels.program(name) is first
    with pytest.raises(ValueError, match="different kernel program is registered"):
        kernels.register(name, source=SCALE + "\n", expressions=["scale_add<float>"])
    with pytest.raises(ValueError, match="identifier"):
        kernels.register("no spaces", source=SCALE, expressions=["scale_add<float>"])
    with pytest.raises(TypeError, match="exactly one of source"):
        kernels.register(names("neither"), expressions=["k"])
    with pytest.raises(FileNotFoundError, match="no kernel source"):
        kernels.register(names("missing"), path=tmp_path / "nope.cu", expressions=["k"])
    with pytest.raises(TypeError, match="expressions"):
        kernels.register(names("bad"), source=SCALE, expressions="scale_add<float>")
    with pytest.raises(KeyError, match="registered"):
        kernels.program("never_registered")


def test_launch_refuses_an_unknown_kernel_and_a_missing_grid(names):
    program = kernels.register(names("refuse"), source=SCALE, expressions=["scale_add<float>"])
    with pytest.raises(LookupError, match="not a kernel of program"):
        program.launch("scale_add<int>", [], grid=1)
    with pytest.raises(TypeError, match="grid= .* or items="):
        program.launch("scale_add<float>", [])


def test_pymagma_programs_are_registered_through_the_same_api():
    for name, (filename, expressions) in kernels.programs.SHIPPED.items():
        program = kernels.program(name)
        assert (program.filename, program.expressions) == (filename, tuple(expressions))
        assert program.include_dirs[0] == registry.KERNELS_DIR


@pytest.mark.native
def test_a_registered_program_compiles_with_nvrtc(names, tmp_path, monkeypatch):
    monkeypatch.setenv("PYMAGMA_CACHE", str(tmp_path))
    try:
        compiler.nvrtc_version()
    except Exception as exc:
        pytest.skip(f"NVRTC is not available: {exc}")
    program = kernels.register(names("nvrtc"), source=SCALE, expressions=["scale_add<float>", "scale_add<double>"])
    compiled = program.compile("sm_80", "ptx")
    assert set(compiled.lowered) == {"scale_add<float>", "scale_add<double>"}
    assert kernels.compile_program(program.name, "sm_80", "ptx") is compiled  # the memory cache
