"""Kernel programs on the simulator: each registered program's real CUDA C++ source (pymagma's own and any other,
see :mod:`pymagma.kernels.registry`) compiled by the host C++ compiler against a
small emulation of CUDA's device language (``cuda_host.h``: a std::thread per GPU thread, std::barrier for
__syncthreads), launched with exactly the argument lists pymagma builds for cuLaunchKernel.

A program is compiled on its first launch and cached on disk in ``$PYMAGMA_CACHE/simulator`` (default
``~/.cache/pymagma/simulator``), keyed by a hash of the sources, the flags and the compiler.  Nothing here touches
NVRTC or the CUDA driver.

CUDA promises no order between the blocks of a launch: here they run one after another in a shuffled order, a new one
per launch, drawn from a seeded generator (``Launcher(seed=...)``, default ``PYMAGMA_SIMULATOR_SEED`` or 0), so a
kernel that depends on block order fails here, reproducibly.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np

from ..errors import PymagmaError
from ..kernels import registry

PRELUDE = Path(__file__).with_name("cuda_host.h")
COMPILERS = ("g++", "clang++")
FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w")
INSTALL_HINT = ("the simulator compiles pymagma's kernels with a host C++ compiler (g++ or clang++, C++20) and "
                "found neither on PATH; install one: apt-get install g++ (Debian/Ubuntu package 'g++'; or 'clang')")
MAX_THREADS_PER_BLOCK = 1024


class SimulatorError(PymagmaError, RuntimeError):
    """The simulator cannot do what was asked (no host compiler, a kernel that does not build, a driver call)."""


def compiler() -> str | None:
    """The host C++ compiler: ``$CXX`` when it names one on PATH, else g++, else clang++ (None: none found)."""
    for name in (os.environ.get("CXX"), *COMPILERS):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


@functools.cache
def _compiler_identity(path: str) -> str:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return path
    return path + "\n" + (done.stdout.splitlines() or [""])[0]


def cache_dir() -> Path:
    """Where compiled programs are kept: ``$PYMAGMA_CACHE/simulator`` (default ``~/.cache/pymagma/simulator``)."""
    root = os.environ.get("PYMAGMA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pymagma")
    return Path(root) / "simulator"


def translation_unit(program: str) -> str:
    """The C++ file compiled for ``program``: the emulation, the program's source and an ``extern "C"`` launcher
    that maps each name expression to its instantiation."""
    found = registry.program(program)
    table = ",\n".join(f'        {{"{e}", [](void** a) {{ pm_call(&{e}, a); }}}}' for e in found.expressions)
    return f"""#include "{PRELUDE.name}"
#line 1 "{found.filename}"
{found.source}
#include <map>
#include <string>

extern "C" int pm_launch(const char* expression, unsigned grid, unsigned block, void** args, const unsigned* order) {{
    static const std::map<std::string, void (*)(void**)> kernels = {{
{table}
    }};
    auto found = kernels.find(expression);
    if (found == kernels.end()) return 1;
    pm_run(found->second, args, grid, block, order);
    return 0;
}}
"""


#: What marks a program whose threads meet at barriers: __syncthreads itself, or common.cuh's helpers that call it.
BARRIER_CALLS = ("__syncthreads", "pm_block_reduce")


def _flags(program: str) -> tuple[str, ...]:
    source = registry.program(program).source
    barriers = any(call in source for call in BARRIER_CALLS)
    return FLAGS if barriers else (*FLAGS, "-DPM_NO_BARRIERS")


def build(program: str, directory: Path | None = None) -> ctypes.CDLL:
    """Compile ``program`` for the CPU (or reuse the cached build in ``directory``) and load it."""
    cxx = compiler()
    if cxx is None:
        raise SimulatorError(INSTALL_HINT)
    source, flags, found = translation_unit(program), _flags(program), registry.program(program)
    digest = hashlib.sha256("\0".join((
        source, PRELUDE.read_text(), *(f"{k}\0{v}" for k, v in sorted(found.headers.items())),
        *map(str, found.include_dirs), *flags, _compiler_identity(cxx))).encode()).hexdigest()[:20]
    directory = cache_dir() if directory is None else Path(directory)
    library = directory / f"{program}-{digest}.so"
    if not library.exists():
        directory.mkdir(parents=True, exist_ok=True)
        with _exclusive(directory / f"{program}-{digest}.lock"):
            if not library.exists():  # another process may have built it while this one waited
                _compile(cxx, program, source, flags, directory, digest, library)
    lib = ctypes.CDLL(str(library))
    lib.pm_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
    lib.pm_launch.restype = ctypes.c_int
    return lib


@contextlib.contextmanager
def _exclusive(path: Path):
    """An advisory lock on ``path`` (POSIX ``flock``): processes sharing the cache compile a program once, not
    each (e.g. parallel test workers on a cold cache).  Without ``fcntl`` or a writable lock file: no lock."""
    try:
        import fcntl

        handle = open(path, "a")  # noqa: SIM115 - closed below
    except (ImportError, OSError):
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield


def _compile(cxx: str, program: str, source: str, flags, directory: Path, digest: str, library: Path) -> None:
    unique = f"{os.getpid()}-{threading.get_ident()}"
    cpp, partial = directory / f"{program}-{digest}-{unique}.cpp", directory / f"{program}-{digest}-{unique}.so"
    cpp.write_text(source)
    includes = [arg for folder in registry.program(program).include_dirs for arg in ("-I", str(folder))]
    command = [cxx, *flags, "-I", str(PRELUDE.parent), *includes, "-o", str(partial), str(cpp)]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SimulatorError(f"{os.path.basename(cxx)} could not compile kernel program {program!r} for the "
                                 f"simulator ({' '.join(command)}):\n{done.stderr}")
        os.replace(partial, library)  # atomic: concurrent processes never load a half-written file
    finally:
        cpp.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)


class Launcher:
    """Stands in for the kernel launcher (:class:`pymagma.kernels.loader.DriverLauncher`): compiles each program
    on its first launch, then runs the kernel on the calling thread in the order of its launch stream (queued on a
    stream the program created, see :mod:`pymagma.simulator.runtime`; at once without ``streams``), its blocks in
    a shuffled order (``seed``; None: ascending).  ``launched`` holds every name expression launched so far."""

    def __init__(self, directory: Path | None = None, streams=None, seed: int | None = 0, null: bool = False):
        self.directory = directory
        self.streams = streams  #: the simulated runtime whose streams the launches are queued on
        self.libraries: dict[str, ctypes.CDLL] = {}
        self.launched: set[str] = set()
        self._lock = threading.Lock()
        self._orders = None if seed is None else np.random.default_rng(seed)
        self.null = null  #: check each launch, then drop it (nothing compiled, nothing run)

    def library(self, program: str) -> ctypes.CDLL:
        lib = self.libraries.get(program)
        if lib is None:
            with self._lock:
                lib = self.libraries.get(program)
                if lib is None:
                    lib = self.libraries[program] = build(program, self.directory)
        return lib

    def program(self, name: str, device: int):
        """Never: the simulator builds programs with the host compiler, not NVRTC and the CUDA driver."""
        raise SimulatorError(f"kernel program {name!r}: the simulator launches kernels through the host compiler, "
                             "never through NVRTC and the CUDA driver")

    def launch(self, program: str, expression: str, device: int, stream: int, grid: int, block: int, args):
        grid, block = int(grid), int(block)
        if grid < 1 or not 1 <= block <= MAX_THREADS_PER_BLOCK:
            raise ValueError(f"launch of {expression} with grid {grid}, block {block}: a grid needs at least one "
                             f"block and a block 1..{MAX_THREADS_PER_BLOCK} threads (cudaErrorInvalidConfiguration)")
        if expression not in registry.program(program).expressions:
            raise LookupError(f"{expression} is not a kernel of program {program}")
        self.launched.add(expression)
        if self.null:
            return
        lib = self.library(program)
        # the arguments are copied at the launch, as cuLaunchKernel does: the holders go with the queued work
        holders = [a if isinstance(a, ctypes._SimpleCData | ctypes.Structure) else ctypes.c_void_p(a) for a in args]
        pointers = (ctypes.c_void_p * len(holders))(*(ctypes.addressof(h) for h in holders))
        order = None
        if self._orders is not None and grid > 1:
            with self._lock:
                order = np.ascontiguousarray(self._orders.permutation(grid), np.uint32)

        def run(_keep=holders):  # the holders live as long as the launch (a graph node runs again at each replay)
            at = None if order is None else order.ctypes.data
            if lib.pm_launch(expression.encode(), grid, block, pointers, at) != 0:  # pragma: no cover - checked
                raise LookupError(f"{expression} is not a kernel of program {program}")

        if self.streams is None:
            run()
        else:
            self.streams.submit(stream, run)
