"""Load compiled programs on a device and launch their kernels on a stream (driver API via cuda.bindings).

Programs are compiled on first use for the current device's arch (CUBIN when NVRTC knows the arch, else PTX for
the newest arch it knows, which the driver JIT-compiles), loaded once per device with ``cuModuleLoadData`` and
launched with ``cuLaunchKernel``.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from .. import _native, runtime
from ..errors import CudaError
from . import compiler, registry
from .registry import MAX_BLOCKS, THREADS, grid_for  # noqa: F401 (their old home)


@functools.cache
def _driver():
    from cuda.bindings import driver

    return driver


def _dcheck(result, call: str):
    err = result[0]
    if int(err) != 0:
        driver = _driver()
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise CudaError(int(err), name.decode() if isinstance(name, bytes) else str(name),
                        text.decode() if isinstance(text, bytes) else str(text), call)
    return result[1] if len(result) == 2 else result[1:]


def device_arch(device: int) -> tuple[int, int]:
    props = runtime.device_properties(device)
    return tuple(props["compute_capability"])


def target_for(device: int) -> tuple[str, str]:
    """(arch, kind) to compile for ``device``: its own CUBIN, or PTX of the newest arch NVRTC supports below it."""
    major, minor = device_arch(device)
    number = major * 10 + minor
    known = compiler.supported_archs()
    if number in known:
        return f"sm_{number}", "cubin"
    older = [a for a in known if a <= number]
    return f"compute_{max(older) if older else min(known)}", "ptx"


def compile_program(name: str, arch: str, kind: str) -> compiler.CompiledProgram:
    """Compile (or fetch from the caches) registered program ``name`` for an explicit arch and output kind."""
    return registry.program(name).compile(arch, kind)


class LoadedProgram:
    """A program's module on one device and its functions, looked up by name expression."""

    def __init__(self, program: compiler.CompiledProgram, device: int):
        driver = _driver()
        self.program, self.device = program, device
        with runtime.on_device(device):
            runtime.check(runtime._rt().cudaFree(0), "cudaFree(0)")  # makes the device's primary context current
            self.module = _dcheck(driver.cuModuleLoadData(program.image), "cuModuleLoadData")
        self._functions: dict = {}

    def function(self, expression: str):
        fn = self._functions.get(expression)
        if fn is None:
            symbol = self.program.symbol(expression)
            fn = _dcheck(_driver().cuModuleGetFunction(self.module, symbol.encode()), "cuModuleGetFunction")
            self._functions[expression] = fn
        return fn


def loaded_program(name: str, device: int) -> LoadedProgram:
    """Program ``name`` loaded on ``device`` by the launcher in use (compiled and loaded on first use)."""
    return _native.current.launcher.program(name, device)


class DriverLauncher:
    """The real kernel launcher: NVRTC-compiled programs loaded with the CUDA driver (once per program and device),
    kernels launched with ``cuLaunchKernel``."""

    def __init__(self):
        self._loaded: dict[tuple[str, int], LoadedProgram] = {}
        self._lock = threading.Lock()

    def program(self, name: str, device: int) -> LoadedProgram:
        key = (name, device)
        with self._lock:
            loaded = self._loaded.get(key)
        if loaded is None:
            arch, kind = target_for(device)
            loaded = LoadedProgram(compile_program(name, arch, kind), device)
            with self._lock:
                loaded = self._loaded.setdefault(key, loaded)
        return loaded

    def launch(self, program: str, expression: str, device: int, stream: int, grid: int, block: int, args) -> None:
        loaded = self.program(program, device)
        holders = [a if isinstance(a, ctypes._SimpleCData | ctypes.Structure) else ctypes.c_void_p(a) for a in args]
        pointers = (ctypes.c_void_p * len(holders))(*(ctypes.addressof(h) for h in holders))
        driver = _driver()
        with runtime.on_device(device):  # the module lives in the device's primary context
            fn = loaded.function(expression)
            _dcheck(driver.cuLaunchKernel(fn, int(grid), 1, 1, int(block), 1, 1, 0, driver.CUstream(int(stream)),
                                          ctypes.addressof(pointers), 0), f"cuLaunchKernel({expression})")


_native.register("launcher", DriverLauncher, lambda: ("launch",))


def launch(program: str, expression: str, device: int, stream: int, grid: int, block: int, args) -> None:
    """Launch ``expression`` of ``program`` with ``args``: a sequence of ctypes values (pointers as c_void_p, or as
    plain ints: every launcher packs a value that is not a ctypes one as a c_void_p), through the launcher in use
    (the simulator's when it is on)."""
    _native.current.launcher.launch(program, expression, device, stream, grid, block, args)
