"""pymagma's kernel sources compiled with the real NVRTC on the CPU (no device needed), and the compile caches."""

from __future__ import annotations

import ctypes
import re
import time
import types

import numpy as np
import pytest

from pymagma import kernels
from pymagma.array import DeviceArray
from pymagma.errors import KernelCompileError
from pymagma.kernels import compiler, programs

from .helpers import BF16

pytestmark = pytest.mark.native


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Each test compiles into its own empty disk cache and starts with an empty memory cache."""
    monkeypatch.setenv("PYMAGMA_CACHE", str(tmp_path))
    compiler.clear_memory_cache()
    try:
        compiler.nvrtc_version()
    except Exception as exc:
        pytest.skip(f"NVRTC is not available: {exc}")
    yield
    compiler.clear_memory_cache()


def shipped() -> dict:
    """The programs shipped with the packages (name -> registry.Program), each with its launcher module."""
    return {name: kernels.program(name) for name in programs.SHIPPED}


@pytest.fixture(scope="module")
def every_program():
    """``every_program(arch, kind)``: every program compiled by ``kernels.compile_program`` (into the calling test's
    empty cache), once per target for the module: NVRTC's time is most of this module's."""
    done = {}

    def compiled(arch: str, kind: str) -> dict:
        if (arch, kind) not in done:
            done[arch, kind] = {name: kernels.compile_program(name, arch, kind) for name in shipped()}
        return done[arch, kind]

    return compiled


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ptx", "cubin"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_program_compiles_with_every_instantiation(arch, kind, every_program):
    """One NVRTC call per program holds all of its dtype instantiations; every one must be in the image."""
    start = time.perf_counter()
    compiled = every_program(arch, kind)
    for name, registered in shipped().items():
        program = compiled[name]
        assert set(program.lowered) == set(registered.expressions)
        number = arch.split("_")[1]
        if kind == "ptx":
            text = program.image.decode()
            assert re.search(rf"\.target\s+sm_{number}\b", text)
            entries = set(re.findall(r"\.entry\s+(\S+?)\s*\(", text))
            assert entries >= set(program.lowered.values())
        else:
            assert program.image[:4] == b"\x7fELF"
            for symbol in program.lowered.values():
                assert symbol.encode() in program.image
    elapsed = time.perf_counter() - start
    print(f"compiled all programs for {arch}/{kind} in {elapsed:.2f}s")


def test_the_array_api_kernels_are_instantiated_for_every_array_api_dtype():
    from pymagma.array_api import _dtypes

    expressions = set(kernels.program("array_api").expressions)
    names = [d.name for d in _dtypes.SUPPORTED if d.name in programs.API_C_TYPES]  # complex: array_api_complex
    for kernel in ("aa_binary", "aa_compare", "aa_unary"):
        assert {_api_expression(kernel, n) for n in names} <= expressions
    assert {_api_expression("aa_cast", s, d) for s in names for d in names} <= expressions


def _api_expression(kernel, *names):
    return f"{kernel}<{', '.join(programs.API_C_TYPES[n] for n in names)}>"


def test_every_float_dtype_is_instantiated_for_every_float_kernel():
    for name, registered in shipped().items():
        expressions = registered.expressions
        if name in ("array_api", "array_api_reduce", "array_api_complex"):  # the array API's dtypes (tests below)
            continue
        kernels_in = {e.split("<")[0] for e in expressions if e.split("<")[0] not in ("cast", "copy_strided")}
        for kernel in kernels_in:
            for dtype in programs.FLOAT_DTYPES:
                assert programs.expression(kernel, dtype) in expressions
    elementwise = kernels.program("elementwise").expressions
    for src in programs.CAST_SOURCES:
        for dst in programs.CAST_TARGETS:
            assert programs.expression("cast", src, dst) in elementwise


def test_broken_source_raises_kernel_compile_error_with_the_log():
    source = "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name + 1; }\n"
    with pytest.raises(KernelCompileError) as info:
        kernels.compile_source(source, "broken", arch="sm_80", kind="ptx")
    err = info.value
    assert err.kernel == "broken"
    assert "undefined_name" in err.log and "error" in err.log
    assert "--gpu-architecture=compute_80" in err.options
    assert err.log in str(err)


def test_a_clean_compile_leaves_python_bytes_intact():
    """NVRTC writes its log (one NUL byte after a clean compile) into our buffer: it must be a fresh, writable one,
    not an immutable bytes object such as CPython's shared b" "."""
    program = kernels.compile_source('extern "C" __global__ void ok(float* x) { x[0] = 1.0f; }\n', "ok",
                                     arch="sm_80", kind="ptx", use_cache=False)
    assert program.log == ""
    assert bytes([32])[0] == 32 and b"a b".split(b" ") == [b"a", b"b"]


def test_broken_template_instantiation_is_reported():
    source = "template <typename T> __global__ void k(T* x) { x[0] = T::nope; }\n"
    with pytest.raises(KernelCompileError, match="nope"):
        kernels.compile_source(source, "tmpl", ["k<float>"], arch="sm_90", kind="cubin")


def test_strides_struct_layout_matches_the_c_struct():
    # The PTX of a kernel reading each field shows the offsets NVRTC gave them; they must match the ctypes mirror.
    S = kernels.Strides3
    source = ('#include "common.cuh"\n__global__ void probe(Strides3 s, i64* out) {\n'
              "  out[0] = s.ndim; out[1] = s.shape[0]; out[2] = s.s0[0]; out[3] = s.s1[0]; out[4] = s.s2[0];\n}\n")
    program = kernels.compile_source(source, "probe", arch="sm_80", kind="ptx", headers=programs.headers())
    text = program.image.decode()
    offsets = [int(m or 0) for m in re.findall(r"ld\.param\.\w+\s+%\w+, \[\w+_param_0(?:\+(\d+))?\]", text)]
    assert offsets == [getattr(S, f).offset for f in ("ndim", "shape", "s0", "s1", "s2")]
    size = int(re.search(r"\.param \.align \d+ \.b8 \w+_param_0\[(\d+)\]", text).group(1))
    assert size == ctypes.sizeof(S)


def test_compile_cache_memory_then_disk(tmp_path):
    before = dict(compiler.stats)
    first = kernels.compile_program("random", "sm_80", "ptx")
    assert compiler.stats["compiles"] == before["compiles"] + 1
    assert kernels.compile_program("random", "sm_80", "ptx") is first
    assert compiler.stats["memory_hits"] == before["memory_hits"] + 1
    assert list((tmp_path / "kernels").glob("*.ptx"))
    compiler.clear_memory_cache()
    again = kernels.compile_program("random", "sm_80", "ptx")
    assert compiler.stats["disk_hits"] == before["disk_hits"] + 1
    assert again.image == first.image and again.lowered == first.lowered


def test_cache_key_depends_on_source_arch_kind_and_options():
    base = compiler.cache_key("src", {}, ["k<float>"], ["-O3"], "sm_80", "cubin")
    assert base == compiler.cache_key("src", {}, ["k<float>"], ["-O3"], "sm_80", "cubin")
    others = [compiler.cache_key("src2", {}, ["k<float>"], ["-O3"], "sm_80", "cubin"),
              compiler.cache_key("src", {"a.cuh": "x"}, ["k<float>"], ["-O3"], "sm_80", "cubin"),
              compiler.cache_key("src", {}, ["k<double>"], ["-O3"], "sm_80", "cubin"),
              compiler.cache_key("src", {}, ["k<float>"], [], "sm_80", "cubin"),
              compiler.cache_key("src", {}, ["k<float>"], ["-O3"], "sm_90", "cubin"),
              compiler.cache_key("src", {}, ["k<float>"], ["-O3"], "sm_80", "ptx")]
    assert len({base, *others}) == 7


def test_cache_key_includes_the_nvrtc_version(monkeypatch):
    base = compiler.cache_key("src", {}, [], [], "sm_80", "ptx")
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (99, 9))
    assert compiler.cache_key("src", {}, [], [], "sm_80", "ptx") != base


def test_unwritable_cache_dir_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PYMAGMA_CACHE", str(blocker))
    program = kernels.compile_source("__global__ void k() {}", "k", arch="sm_80", kind="ptx")
    assert b".entry" in program.image


@pytest.mark.parametrize("arch, kind, expected", [
    ("sm_80", "ptx", "compute_80"), ("sm_90", "cubin", "sm_90"), ("compute_90", "cubin", "sm_90"),
    (86, "cubin", "sm_86"), ((9, 0), "ptx", "compute_90"), ("sm_90a", "cubin", "sm_90a")])
def test_normalize_arch(arch, kind, expected):
    assert compiler.normalize_arch(arch, kind) == expected


@pytest.mark.parametrize("arch, kind", [("ampere", "ptx"), ("sm_80", "fatbin"), ("sm80", "ptx")])
def test_bad_arch_or_kind_is_a_value_error(arch, kind):
    with pytest.raises(ValueError):
        compiler.normalize_arch(arch, kind)


def test_nvrtc_supports_the_architectures_we_target():
    assert {80, 90} <= set(compiler.supported_archs())


def test_cold_and_warm_compile_times_are_measured(capsys):
    start = time.perf_counter()
    kernels.compile_program("random", "sm_90", "ptx")
    cold = time.perf_counter() - start
    compiler.clear_memory_cache()
    start = time.perf_counter()
    kernels.compile_program("random", "sm_90", "ptx")
    disk = time.perf_counter() - start
    start = time.perf_counter()
    kernels.compile_program("random", "sm_90", "ptx")
    memory = time.perf_counter() - start
    print(f"random sm_90 PTX: cold {cold:.3f}s, disk cache {disk * 1e3:.2f}ms, memory cache {memory * 1e6:.1f}us")
    assert disk < cold and memory < cold


# ------------------------------------------------------------------------------ validation before any device use
def fake_array(shape, dtype, strides=None) -> DeviceArray:
    """A DeviceArray at a null pointer: what the kernels' argument checks read (no device memory is touched)."""
    return DeviceArray(shape, dtype, 0, strides)


def capture_launches(monkeypatch, launches: list, modules) -> None:
    """Every launch of fake arrays appended to ``launches`` as (program, expression, arguments): the checked path's
    ``_run`` in each of ``modules``, and a planned launcher's inline launch (a repeated call) through the launcher in
    use and the device's default queue; outputs are fake arrays."""
    from pymagma import _native, array

    for module in modules:
        monkeypatch.setattr(module, "_run", lambda program, expression, like, n, args, grid=None:
                            launches.append((program, expression, args)))
    monkeypatch.setattr(_native.current, "launcher", types.SimpleNamespace(
        launch=lambda program, expression, device, stream, grid, threads, args:
        launches.append((program, expression, args))))
    monkeypatch.setattr(_native.current, "default_queues", {0: types.SimpleNamespace(stream=0)})
    monkeypatch.setattr(array, "empty", lambda shape, dtype=np.float32, device=None: fake_array(shape, dtype))
    monkeypatch.setattr(array, "_empty", lambda shape, dtype, device: fake_array(shape, dtype))


def test_argument_errors_are_typed_and_explicit():
    x = fake_array((2, 3), np.float32)
    with pytest.raises(ValueError, match="unknown unary op"):
        kernels.unary("cube", x)
    with pytest.raises(ValueError, match="unknown binary op"):
        kernels.binary("hypot", x, x)
    with pytest.raises(TypeError, match="floating dtype"):
        kernels.unary("relu", fake_array((2,), np.int32))
    with pytest.raises(TypeError, match="dtypes differ"):
        kernels.binary("add", x, fake_array((2, 3), np.float64))
    with pytest.raises(ValueError, match="do not broadcast"):
        kernels.binary("add", x, fake_array((4,), np.float32))
    with pytest.raises(ValueError, match="unknown reduction"):
        kernels.reduce("median", x)
    with pytest.raises(ValueError, match="out of range"):
        kernels.reduce("sum", x, axis=2)
    with pytest.raises(ValueError, match="bias must have shape"):
        kernels.bias_add(x, fake_array((2,), np.float32))
    with pytest.raises(TypeError, match="cast from"):
        kernels.cast(x, np.complex64)
    with pytest.raises(TypeError, match="not supported"):
        programs.c_type(np.complex64)


def test_broadcast_strides_and_strides3_packing():
    a = fake_array((3, 1), np.float32)  # broadcast to (2, 3, 4): leading axis new, last axis stretched
    assert kernels.elementwise._broadcast_strides(a, (2, 3, 4)) == (0, 1, 0)
    t = fake_array((4, 3), np.float64, strides=(8, 32))  # a transposed view
    assert kernels.elementwise._broadcast_strides(t, (4, 3)) == (1, 4)
    s = kernels.make_strides3((2, 3), (3, 1), (0, 1), (3, 1))
    assert s.ndim == 2 and list(s.shape[:2]) == [2, 3] and list(s.s1[:2]) == [0, 1]
    with pytest.raises(ValueError, match="at most 8"):
        kernels.make_strides3((1,) * 9)


def test_axes_normalisation():
    assert kernels.reductions._axes(None, 3) == (0, 1, 2)
    assert kernels.reductions._axes(-1, 3) == (2,)
    assert kernels.reductions._axes((2, 0), 3) == (0, 2)
    with pytest.raises(ValueError, match="repeated"):
        kernels.reductions._axes((1, -2), 3)


def test_launch_grid_and_target_selection(monkeypatch):
    from pymagma.kernels import loader

    assert loader.grid_for(0) == 1 and loader.grid_for(256) == 1 and loader.grid_for(257) == 2
    assert loader.grid_for(10**12) == loader.MAX_BLOCKS
    monkeypatch.setattr(loader, "device_arch", lambda device: (9, 0))
    assert loader.target_for(0) == ("sm_90", "cubin")
    newest = max(compiler.supported_archs())
    monkeypatch.setattr(loader, "device_arch", lambda device: (newest // 10 + 5, 0))
    assert loader.target_for(0) == (f"compute_{newest}", "ptx")


# ------------------------------------------------------------------- launch arguments against the compiled kernels
_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z])(\d+)\s+\w+?(?:\[(\d+)\])?\s*[,)]")


def ptx_parameters(program, expression: str) -> list[tuple[int, bool]]:
    """(bytes, is_floating) of each parameter of a kernel, as NVRTC laid them out in the PTX of our sources."""
    text = program.image.decode()
    head = text[text.index(f".entry {program.symbol(expression)}("):]
    head = head[: head.index("{")]
    return [(int(count) if count else int(bits) // 8, kind == "f") for kind, bits, count in _PTX_PARAM.findall(head)]


def launcher_modules() -> list:
    """Every launcher module of the kernel programs (each launches through its own ``_run``)."""
    import importlib

    return [importlib.import_module(f"pymagma.kernels.{name}") for name in shipped()]


def launch_parameters(args) -> list[tuple[int, bool]]:
    """(size, floating) of each argument as cuLaunchKernel gets it: a plain int is a pointer, which every launcher
    packs as a c_void_p (a kernel parameter of another size or kind then fails the comparison)."""
    return [(ctypes.sizeof(ctypes.c_void_p if type(a) is int else type(a)),
             isinstance(a, ctypes.c_double | ctypes.c_float)) for a in args]


def test_launch_arguments_match_the_compiled_kernel_parameters(monkeypatch, every_program):
    """What each public function passes to cuLaunchKernel, in order, has the size and kind (floating or not) of the
    parameters of the kernel it launches: a missing, extra or swapped argument fails here, without a GPU."""
    launches = []
    capture_launches(monkeypatch, launches, launcher_modules())
    for dtype in (np.float32, np.float64, np.float16) + ((BF16,) if BF16 is not None else ()):
        _launch_every_kernel(dtype)
    launched = {expression.split("<")[0] for _, expression, _ in launches}
    # the array API's indexing kernels read a count back between launches (fake arrays cannot): their arguments are
    # checked by running them on the CPU emulation of the same source (test_kernels_emulated.py)
    indexing = {"aa_assign", "aa_tri", "aa_gather", "aa_mask_move", "aa_index_offsets", "aa_mask_count",
                "aa_mask_scan", "aa_mask_positions"}
    # so are the complex program's kernels (fake arrays hold no complex dtype): every one of their instantiations
    # runs on the CPU emulation (test_kernels_emulated.py's check that every instantiation ran)
    indexing |= {e.split("<")[0] for e in kernels.program("array_api_complex").expressions}
    assert launched | indexing == {e.split("<")[0] for p in shipped().values() for e in p.expressions}
    for program, expression, args in launches:
        compiled = every_program("sm_80", "ptx")[program]
        assert launch_parameters(args) == ptx_parameters(compiled, expression), expression


def _launch_every_kernel(dtype) -> None:
    x, row = fake_array((4, 3), dtype), fake_array((3,), dtype)
    kernels.relu(x)
    kernels.affine(x, 2.0, 1.0)
    kernels.add(x, x)
    kernels.add(x, row)
    kernels.bias_add(fake_array((2, 3, 5), dtype), row)
    kernels.fill(x, 1.0)
    kernels.cast(x, np.int32)
    kernels.copy(x.T)
    kernels.broadcast_divide(row, (2, 4, 3), 3)
    kernels.reduce("mean", x, axis=0)
    kernels.argmax(x)
    kernels.uniform(out=x, seed=1)
    kernels.normal(out=x, seed=1)
    kernels.add(x, 2.0)
    kernels.where(x, x, row)
    kernels.activation_backward("elu", x, x, x, 1.0)
    # check.cu: float values here, integer ones (their bounds are int64 parameters) once per call of this function
    record = fake_array((kernels.FAULT_RECORD,), np.int64)
    for values in (x, fake_array((2, 5), np.int64), fake_array((3,), np.int32)):
        kernels.check_range(values, 0, 7, record, 1)
        kernels.check_binary(values, record, 2)
    # array_api.cu: each family once per call of this function (the float dtypes among its instantiations)
    if np.dtype(dtype) in (np.float32, np.float64):
        from pymagma.kernels import array_api as api

        api.binary("add", x, row, (4, 3))
        api.compare("less", x, x.T.T, (4, 3))
        api.unary("exp", x.T)
        api.test("isnan", x)
        api.cast(x, np.dtype(np.int8))
        # array_api_reduce.cu: each family once (the float dtypes among its instantiations)
        from pymagma.kernels import array_api_reduce as rk

        flat, index = fake_array((12,), dtype), fake_array((12,), np.int64)
        rk.reduce("var", x, (0,), 1.0)
        rk.argreduce(True, x, 1)
        rk.scan("sum", x, 0, True)
        rk.sort(x, 1, False, True, True)
        rk.where(fake_array((4, 3), np.bool_), x, row, (4, 3))
        rk.searchsorted(flat, x, True)
        rk.take(flat, index)
        rk.nonzero(fake_array((12,), np.bool_), index, 4, (4, 3))
        rk.unique_flags(flat)
        rk.unique(flat, index, index, 5, True, True, (4, 3))
