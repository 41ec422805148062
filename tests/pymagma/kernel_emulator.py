"""pymagma's kernels run on the CPU: each program's CUDA C++ source compiled by the host C++ compiler against a small
emulation of CUDA's device language (``emulator/cuda_host.h``: a std::thread per GPU thread, std::barrier for
__syncthreads), launched with exactly the argument lists pymagma builds for cuLaunchKernel.  With the simulated
device (host memory as device memory) the public kernels API runs end to end without a GPU."""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from pymagma.kernels import programs

PRELUDE = Path(__file__).parent / "emulator" / "cuda_host.h"


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


def _source(program: str) -> str:
    filename, expressions = programs.PROGRAMS[program]
    source_path = resources.files("pymagma.kernels") / filename
    table = ",\n".join(f'        {{"{e}", [](void** a) {{ pm_call(&{e}, a); }}}}' for e in expressions)
    return f"""#include "{PRELUDE}"
#include "{source_path}"
#include <map>
#include <string>

extern "C" int pm_launch(const char* expression, unsigned grid, unsigned block, void** args) {{
    static const std::map<std::string, void (*)(void**)> kernels = {{
{table}
    }};
    auto found = kernels.find(expression);
    if (found == kernels.end()) return 1;
    pm_run(found->second, args, grid, block);
    return 0;
}}
"""


def build(program: str, directory: Path) -> ctypes.CDLL:
    """Compile ``program`` for the CPU (cached in ``directory`` by source hash) and load it."""
    source = _source(program)
    digest = hashlib.sha256((source + PRELUDE.read_text() + programs.read_text(programs.PROGRAMS[program][0])
                             + "".join(programs.read_text(h) for h in programs.HEADERS)).encode()).hexdigest()[:16]
    library = directory / f"{program}-{digest}.so"
    if not library.exists():
        cpp = directory / f"{program}-{digest}.cpp"
        cpp.write_text(source)
        barriers = "__syncthreads" in programs.read_text(programs.PROGRAMS[program][0])
        subprocess.run([compiler(), "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
                        *([] if barriers else ["-DPM_NO_BARRIERS"]), "-o", str(library), str(cpp)],
                       check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(library))
    lib.pm_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
    lib.pm_launch.restype = ctypes.c_int
    return lib


class Launcher:
    """Stands in for ``pymagma.kernels.launch``; compiles each program on its first launch."""

    def __init__(self, directory: Path):
        self.directory, self.libraries, self.launched = directory, {}, []

    def __call__(self, program: str, expression: str, device: int, stream: int, grid: int, block: int, args):
        lib = self.libraries.get(program)
        if lib is None:
            lib = self.libraries[program] = build(program, self.directory)
        holders = [a if isinstance(a, ctypes._SimpleCData | ctypes.Structure) else ctypes.c_void_p(a) for a in args]
        pointers = (ctypes.c_void_p * len(holders))(*(ctypes.addressof(h) for h in holders))
        if lib.pm_launch(expression.encode(), int(grid), int(block), pointers) != 0:
            raise LookupError(f"{expression} is not a kernel of program {program}")
        self.launched.append(expression)
