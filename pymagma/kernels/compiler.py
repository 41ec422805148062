"""Compile CUDA C++ with NVRTC (``cuda.bindings.nvrtc``) to PTX or CUBIN, cached in memory and on disk.

The cache key is a hash of the source, its headers, the name expressions, the options, the target arch, the output
kind and the NVRTC version.  The disk cache lives in ``$PYMAGMA_CACHE`` (default ``~/.cache/pymagma``)/kernels.
Nothing here needs a GPU or a driver: the target arch is explicit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from .._atomic import write_bytes
from ..errors import KernelCompileError, LibraryNotFoundError

#: Options every pymagma kernel is compiled with.
BASE_OPTIONS = ("-std=c++17", "--device-as-default-execution-space")
OUTPUT_KINDS = ("ptx", "cubin")
_ARCH = re.compile(r"^(?:sm|compute)_(\d+)([a-z]?)$")


@dataclass(frozen=True)
class CompiledProgram:
    """A compiled image (PTX text or CUBIN bytes) and the mangled names of its instantiated kernels."""

    name: str
    arch: str
    kind: str
    image: bytes
    lowered: dict  # name expression -> mangled symbol
    log: str = ""

    def symbol(self, expression: str) -> str:
        try:
            return self.lowered[expression]
        except KeyError:
            raise KeyError(f"kernel {expression!r} is not instantiated in program {self.name!r}; "
                           f"instantiated: {sorted(self.lowered)[:8]}...") from None


@functools.cache
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - cuda-python is a core dependency
        raise LibraryNotFoundError("cuda-python is not installed: pip install cuda-python") from exc
    return nvrtc


def _check(result, call: str):
    err = result[0]
    if int(err) != 0:
        nvrtc = _nvrtc()
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise RuntimeError(f"{call} failed: {text.decode() if isinstance(text, bytes) else text}")
    return result[1] if len(result) == 2 else result[1:]


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    try:
        major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    except Exception as exc:
        raise LibraryNotFoundError(f"NVRTC could not be loaded ({exc}); pip install nvidia-cuda-nvrtc") from exc
    return int(major), int(minor)


@functools.cache
def supported_archs() -> tuple[int, ...]:
    """The compute capabilities (e.g. 80, 90) this NVRTC can target."""
    return tuple(int(a) for a in _check(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def normalize_arch(arch: str | int | tuple, kind: str) -> str:
    """``"sm_80"``, ``"compute_80"``, ``80`` or ``(8, 0)`` -> the option value NVRTC wants for ``kind``."""
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"output kind must be one of {OUTPUT_KINDS}, got {kind!r}")
    if isinstance(arch, tuple):
        number, suffix = arch[0] * 10 + arch[1], ""
    elif isinstance(arch, int):
        number, suffix = arch, ""
    else:
        match = _ARCH.match(str(arch))
        if not match:
            raise ValueError(f"arch must look like 'sm_80' or 'compute_90', got {arch!r}")
        number, suffix = int(match.group(1)), match.group(2)
    return f"{'sm' if kind == 'cubin' else 'compute'}_{number}{suffix}"


def cache_dir() -> Path:
    root = os.environ.get("PYMAGMA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pymagma")
    return Path(root) / "kernels"


def cache_key(source: str, headers: dict, expressions, options, arch: str, kind: str) -> str:
    digest = hashlib.sha256()
    parts = [source, json.dumps(sorted(headers.items())), json.dumps(list(expressions)), json.dumps(list(options)),
             arch, kind, "nvrtc-{}.{}".format(*nvrtc_version())]
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


_memory: dict[str, CompiledProgram] = {}
_lock = threading.Lock()
stats = {"memory_hits": 0, "disk_hits": 0, "compiles": 0}


def _read_disk(key: str, name: str, arch: str, kind: str) -> CompiledProgram | None:
    base = cache_dir() / key
    try:
        image = base.with_suffix("." + kind).read_bytes()
        lowered = json.loads(base.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None
    return CompiledProgram(name, arch, kind, image, lowered)


def _write_disk(key: str, program: CompiledProgram) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((program.kind, program.image), ("json", json.dumps(program.lowered).encode())):
            write_bytes(folder / f"{key}.{suffix}", data)  # atomic: a full disk never leaves a torn cache entry
    except OSError:  # a read-only or full cache directory only costs a recompile next time
        pass


def _compile_uncached(source: str, name: str, headers: dict, expressions, options):
    nvrtc = _nvrtc()
    header_names = [h.encode() for h in headers]
    header_sources = [headers[h].encode() for h in headers]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), len(headers), header_sources,
                                           header_names), "nvrtcCreateProgram")
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()), "nvrtcAddNameExpression")
        encoded = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = bytearray(size)  # a writable buffer: b" " * 1 would be CPython's shared one-byte object
        _check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        log_text = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if int(status) != 0:
            raise KernelCompileError(name, log_text or str(status), tuple(options))
        lowered = {}
        for expression in expressions:
            symbol = _check(nvrtc.nvrtcGetLoweredName(prog, expression.encode()), "nvrtcGetLoweredName")
            lowered[expression] = symbol.decode() if isinstance(symbol, bytes) else str(symbol)
        return prog, lowered, log_text
    except BaseException:
        nvrtc.nvrtcDestroyProgram(prog)
        raise


def _image(prog, kind: str) -> bytes:
    nvrtc = _nvrtc()
    if kind == "cubin":
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        buf = bytearray(size)
        _check(nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
    else:
        size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        buf = bytearray(size)
        _check(nvrtc.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
    return bytes(buf)


def compile_source(source: str, name: str, expressions=(), *, arch="sm_80", kind: str = "ptx",
                   headers: dict | None = None, options=(), use_cache: bool = True) -> CompiledProgram:
    """Compile ``source`` for ``arch`` to ``kind`` ("ptx" | "cubin") with the template ``expressions`` instantiated.

    Raises :class:`KernelCompileError` carrying NVRTC's log when the source does not compile.
    """
    headers = dict(headers or {})
    target = normalize_arch(arch, kind)
    options = (*BASE_OPTIONS, f"--gpu-architecture={target}", *options)
    expressions = tuple(expressions)
    key = cache_key(source, headers, expressions, options, target, kind)
    if use_cache:
        with _lock:
            hit = _memory.get(key)
        if hit is not None:
            stats["memory_hits"] += 1
            return hit
        hit = _read_disk(key, name, target, kind)
        if hit is not None:
            stats["disk_hits"] += 1
            with _lock:
                _memory[key] = hit
            return hit
    prog, lowered, log = _compile_uncached(source, name, headers, expressions, options)
    try:
        image = _image(prog, kind)
    finally:
        _nvrtc().nvrtcDestroyProgram(prog)
    stats["compiles"] += 1
    program = CompiledProgram(name, target, kind, image, lowered, log)
    if use_cache:
        with _lock:
            _memory[key] = program
        _write_disk(key, program)
    return program


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()
