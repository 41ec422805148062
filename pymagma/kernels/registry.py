"""Kernel programs by name: register CUDA C++ (source text or a ``.cu`` file) once, then compile it with NVRTC
(cached in memory and on disk), launch it on a queue (recorded when the queue is being captured into a graph) or run
it on the simulator, whose launcher builds the same source with the host compiler against ``cuda_host.h``.

pymagma's own programs are registered here too (:mod:`.programs`), and every launch of any program goes through the
launcher in use (``_native.current.launcher``): one path for all.  Example::

    saxpy = kernels.register("saxpy", source=SOURCE, expressions=["saxpy<float>"])
    saxpy.launch("saxpy<float>", [ctypes.c_float(2.0), x, y, ctypes.c_longlong(x.size)], items=x.size)

``#include "name"`` resolves in the program's own folder (a file's), then in ``include_dirs``, then in pymagma's
kernels folder (``common.cuh``: ``i64``, ``half_t``, ``bf16_t``, ``Strides3``, block reductions), for NVRTC and the
simulator alike.
"""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import _native
from ..array import DeviceArray
from . import compiler

#: pymagma's kernels folder: its ``.cu`` programs and the headers any program may include (common.cuh).
KERNELS_DIR = Path(__file__).resolve().parent
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True, eq=False)
class Program:
    """One NVRTC compilation: its source, the template instantiations (name expressions) it holds, where its
    includes resolve.  Made by :func:`register`; launched by name through the launcher in use."""

    name: str
    source: str
    expressions: tuple[str, ...]
    filename: str
    include_dirs: tuple[Path, ...]
    _headers: dict = field(default_factory=dict, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """Every file the source includes with ``#include "..."`` (recursively), name -> text, as NVRTC takes them."""
        if not self._headers:
            self._headers.update(_headers(self.source, self.include_dirs))
        return self._headers

    def compile(self, arch="sm_80", kind: str = "ptx") -> compiler.CompiledProgram:
        """Compile with NVRTC for ``arch`` to ``kind`` ("ptx" | "cubin"), or fetch it from the caches."""
        return compiler.compile_source(self.source, self.name, self.expressions, arch=arch, kind=kind,
                                       headers=self.headers)

    def launch(self, expression: str, args, *, items: int | None = None, grid: int | None = None,
               block: int | None = None, queue=None, device: int | None = None) -> None:
        """Launch kernel ``expression`` with ``args`` (ctypes values; a DeviceArray passes its pointer) on ``queue``
        (default: the default queue of ``device``, else of the current device).  ``grid``: blocks (default: enough
        for ``items`` with grid-stride loops, see :func:`~pymagma.kernels.grid_for`); ``block``: threads per block
        (default :data:`~pymagma.kernels.THREADS`)."""
        from ..queue import default_queue

        if expression not in self.expressions:
            raise LookupError(f"{expression!r} is not a kernel of program {self.name!r}; its kernels: "
                              f"{list(self.expressions)}")
        if grid is None:
            if items is None:
                raise TypeError(f"launch of {expression}: give grid= (blocks) or items= (elements to cover)")
            grid = grid_for(items, block or THREADS)
        queue = default_queue(device) if queue is None else queue
        values = [ctypes.c_void_p(a.ptr) if isinstance(a, DeviceArray) else a for a in args]
        _native.current.launcher.launch(self.name, expression, queue.device, queue.stream, grid, block or THREADS,
                                        values)


def _headers(source: str, include_dirs) -> dict[str, str]:
    found: dict[str, str] = {}
    pending = list(_INCLUDE.findall(source))
    while pending:
        name = pending.pop()
        if name in found:
            continue
        for folder in include_dirs:
            path = Path(folder) / name
            if path.is_file():
                found[name] = path.read_text()
                pending.extend(_INCLUDE.findall(found[name]))
                break
        # an include found nowhere is left to the compiler, which names it
    return found


THREADS = 256  #: threads per block of pymagma's launches
MAX_BLOCKS = 65535


def grid_for(n: int, threads: int = THREADS, per_thread: int = 1) -> int:
    """Blocks for ``n`` items with grid-stride loops (at least one block, at most MAX_BLOCKS)."""
    return max(1, min(MAX_BLOCKS, -(-int(n) // (threads * per_thread))))


#: name -> Program: every registered program, pymagma's own included.
PROGRAMS: dict[str, Program] = {}
_lock = threading.Lock()


def register(name: str, *, source: str | None = None, path=None, expressions, include_dirs=()) -> Program:
    """Register program ``name`` from ``source`` text or the ``.cu`` file at ``path`` with the template
    instantiations ``expressions`` (e.g. ``["scale<float>", "scale<double>"]``; a plain ``extern "C"`` kernel is
    its own name).  Registering the same program again returns it; another program under a taken name is a
    ValueError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"a program name is an identifier (dots allowed), got {name!r}")
    if (source is None) == (path is None):
        raise TypeError(f"register({name!r}): give exactly one of source= (text) and path= (a .cu file)")
    folders = [Path(d).resolve() for d in include_dirs]
    if path is not None:
        path = Path(path).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"register({name!r}): no kernel source at {path}")
        source, filename = path.read_text(), path.name
        folders.insert(0, path.parent)
    elif not isinstance(source, str):
        raise TypeError(f"register({name!r}): source must be CUDA C++ text, got {type(source).__name__}")
    else:
        filename = f"{name}.cu"
    if isinstance(expressions, str) or not all(isinstance(e, str) and e for e in expressions):
        raise TypeError(f"register({name!r}): expressions must be a sequence of kernel name expressions")
    if KERNELS_DIR not in folders:
        folders.append(KERNELS_DIR)
    program = Program(name, source, tuple(expressions), filename, tuple(folders))
    with _lock:
        known = PROGRAMS.get(name)
        if known is None:
            PROGRAMS[name] = program
            return program
    if (known.source, known.expressions, known.include_dirs) == (program.source, program.expressions,
                                                                 program.include_dirs):
        return known
    raise ValueError(f"a different kernel program is registered as {name!r} ({known.filename}); choose another name")


def program(name: str) -> Program:
    """The registered program ``name`` (a KeyError naming the registered ones otherwise)."""
    try:
        return PROGRAMS[name]
    except KeyError:
        raise KeyError(f"no kernel program {name!r}; registered: {sorted(PROGRAMS)}") from None
