"""``pymagma.info()``: every native provider (path, version, where it came from), the devices, and what is missing
with how to install it.  Works on a machine without GPU, driver, MAGMA or cuDNN."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import sys

import numpy as np

from . import _libs
from ._version import __version__

NVIDIA_LIBRARIES = ("cudart", "cublas", "cufft", "cudnn", "nvrtc")


class Info(dict):
    """A dict of the environment report; ``str(info)`` is the human-readable report."""

    def __str__(self) -> str:
        return format_report(self)


def _package_version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvidia_version(name: str, lib: ctypes.CDLL) -> str | None:
    try:
        if name == "cudnn":
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            v = int(lib.cudnnGetVersion())
            return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
        if name == "nvrtc":
            major, minor = ctypes.c_int(), ctypes.c_int()
            lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
            return f"{major.value}.{minor.value}"
        if name == "cublas":
            parts = []
            for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                value = ctypes.c_int()
                lib.cublasGetProperty(prop, ctypes.byref(value))
                parts.append(str(value.value))
            return ".".join(parts)
        if name == "cufft":
            v = ctypes.c_int()
            lib.cufftGetVersion(ctypes.byref(v))
            return f"{v.value // 1000}.{v.value % 1000 // 100}.{v.value % 100}"
        if name == "cudart":
            v = ctypes.c_int()
            lib.cudaRuntimeGetVersion(ctypes.byref(v))
            return f"{v.value // 1000}.{v.value % 1000 // 10}"
    except AttributeError:
        return None
    return None


def _magma_version(lib) -> tuple[int, int, int]:
    from . import _magma

    parts = [_magma.MAGMA_INT() for _ in range(3)]
    lib.magma_version(*(ctypes.byref(p) for p in parts))
    return tuple(p.value for p in parts)


def _magma_section(missing: list) -> dict:
    """The real MAGMA provider (also when the simulator is on: then its MAGMA stands in for this one)."""
    from . import _magma, simulator

    try:
        provider = _libs.magma_provider()
    except Exception as exc:  # noqa: BLE001 - report every discovery failure as "missing"
        missing.append(("MAGMA", str(exc)))
        return {"found": False, "error": str(exc)}
    section = {"found": True, "path": provider.path, "source": provider.source, "partial": provider.partial,
               "ilp64": _libs.magma_ilp64()}
    try:
        lib = simulator.current().real_magma if simulator.is_enabled() else _magma.library()
        section["version"] = ".".join(map(str, _magma_version(lib)))
        absent = lib.missing()
        families = sorted({_magma.SIGNATURES[n].family for n in absent})
        section["missing_routines"] = families
        section["partly_missing"] = [f for f in families if not set(_magma.names_for(f)) <= set(absent)]
        section["bound_routines"] = len(_magma.SIGNATURES) - len(absent)
    except Exception as exc:  # noqa: BLE001 - a library that is found but does not load is reported, not raised
        section["error"] = str(exc)
        missing.append(("MAGMA", str(exc)))
        return section
    if provider.partial:
        section["note"] = provider.note
        missing.append(("full MAGMA (potrf, geqrf, getrs/gesv, syevd, gesdd, geev)", _libs.FULL_MAGMA_REMEDY))
    return section


#: the dtypes whose linalg paths the report compares with float64's
LINALG_DTYPES = ("float32", "complex128", "complex64")
PATH_KINDS = ("native", "hybrid", "host")


def _linalg_section() -> dict:
    """Which path ``method="auto"`` takes per linalg function on the MAGMA provider (the simulated exports when the
    simulator is on): float64's, and per other dtype only the functions whose path differs."""
    from . import linalg

    try:
        base = linalg.paths(np.float64)
        differs = {name: {fn: path for fn, path in linalg.paths(name).items() if path != base[fn]}
                   for name in LINALG_DTYPES}
    except Exception as exc:  # noqa: BLE001 - no (loadable) MAGMA: reported, not raised
        return {"error": str(exc)}
    return {"float64": base, "differs": {name: d for name, d in differs.items() if d}}


def _cuda_version(v: int) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


def _cuda_section(missing: list) -> dict:
    from . import runtime

    section: dict = {"cuda-python": _package_version("cuda-python") or _package_version("cuda-bindings")}
    try:
        section["runtime_version"] = _cuda_version(runtime.runtime_version())
        section["driver_version"] = _cuda_version(runtime.driver_version())
    except Exception as exc:  # noqa: BLE001
        section["error"] = str(exc)
    section["device_count"] = runtime.device_count()
    if section["device_count"]:
        section["devices"] = [runtime.device_properties(i) for i in range(section["device_count"])]
    else:
        section["no_device_reason"] = runtime.no_device_reason()
        missing.append(("a CUDA device", "device functions need an NVIDIA GPU with a driver "
                                         f"({section['no_device_reason']})"))
    return section


def _nvidia_section(missing: list) -> dict:
    section = {}
    for name in NVIDIA_LIBRARIES:
        try:
            lib = _libs.load_nvidia(name)
        except Exception as exc:  # noqa: BLE001
            section[name] = {"found": False}
            missing.append((name, _libs.NVIDIA_REMEDIES.get(name, str(exc))))
            continue
        section[name] = {"found": True, "path": os.path.realpath(lib._name), "version": _nvidia_version(name, lib)}
        if name in ("cublas", "cufft"):  # pymagma's own tables (half gemm, TF32 math mode; the FFTs)
            from . import _cublas, _cufft

            table = {"cublas": _cublas, "cufft": _cufft}[name]
            absent = table.lib.missing()
            section[name]["table"] = {"declared": len(table.PROTOTYPES), "missing": absent}
            if absent:
                missing.append((f"{table.lib._name} functions {', '.join(absent)}", _libs.NVIDIA_REMEDIES[name]))
    return section


def _simulator_section(missing: list) -> dict:
    from . import simulator

    section: dict = {"enabled": simulator.is_enabled(), "mode": simulator.mode(),
                     "environment": os.environ.get(simulator.ENV_VAR)}
    active = simulator.current()
    if active is None:
        return section
    from .simulator import kernels

    compiler = kernels.compiler()
    section.update(magma_routines=len(active.magma.exported()), magma_exports=active.magma.source,
                   kernel_compiler=compiler, kernel_cache=str(kernels.cache_dir()), cudnn=active.cudnn is not None)
    if compiler is None:
        missing.append(("a host C++ compiler (the simulator's kernels)", kernels.INSTALL_HINT))
    return section


def _python_packages() -> dict:
    out = {}
    for module, dist in (("numpy", "numpy"), ("torch", "torch"), ("cupy", "cupy")):
        found = importlib.util.find_spec(module) is not None  # found, never imported
        out[module] = _package_version(dist) if found else None
        if module == "cupy" and found and out[module] is None:
            out[module] = next((v for v in (_package_version(d) for d in ("cupy-cuda13x", "cupy-cuda12x")) if v),
                               "installed")
    return out


def info() -> Info:
    """Collect the report (nothing here raises: failures are reported as missing pieces)."""
    missing: list[tuple[str, str]] = []
    report = Info(
        pymagma=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=_python_packages(),
        simulator=_simulator_section(missing),
        magma=_magma_section(missing),
        linalg=_linalg_section(),
        cuda=_cuda_section(missing),
        nvidia=_nvidia_section(missing),
    )
    report["missing"] = [{"what": what, "how": how} for what, how in missing]
    return report


def format_report(r: dict) -> str:
    lines = [f"pymagma {r['pymagma']}  (Python {r['python']}, {r['platform']})"]
    pk = r["packages"]
    lines.append("packages: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in pk.items()))
    lines.extend(_format_simulator(r.get("simulator", {})))
    m = r["magma"]
    if m.get("found"):
        kind = "partial provider" if m.get("partial") else "full provider"
        lines.append(f"MAGMA {m.get('version', '?')}: {m['path']}  (from {m['source']}; {kind}; "
                     f"magma_int_t {'64' if m.get('ilp64') else '32'}-bit)")
        if "bound_routines" in m:
            names = [f + (" (some precisions)" if f in m.get("partly_missing", ()) else "")
                     for f in m["missing_routines"]]
            lines.append(f"  routines available: {m['bound_routines']}; missing: " + (", ".join(names) or "none"))
        if m.get("note"):
            lines.append(f"  note: {m['note']}")
    else:
        lines.append("MAGMA: not found")
    lines.extend(_format_linalg(r.get("linalg", {})))
    c = r["cuda"]
    lines.append(f"CUDA: cuda-python {c.get('cuda-python')}, runtime {c.get('runtime_version')}, "
                 f"driver {c.get('driver_version') or 'none'}")
    for d in c.get("devices", []):
        lines.append(f"  device {d['device']}: {d['name']} (sm_{d['compute_capability'][0]}"
                     f"{d['compute_capability'][1]}, {d['total_memory'] / 2**30:.1f} GiB, "
                     f"{d['multiprocessors']} SMs)")
    if not c.get("device_count"):
        lines.append(f"  no device: {c.get('no_device_reason')}")
    for name, lib in r["nvidia"].items():
        lines.append(f"{name}: {lib['path']} (version {lib.get('version') or '?'})" if lib["found"]
                     else f"{name}: not found")
        if "table" in lib:
            table = lib["table"]
            label = "FFT" if name == "cufft" else "half gemm"
            lines[-1] += (f"; {label} table: {table['declared'] - len(table['missing'])} of {table['declared']} "
                          "functions" + (f" (missing {', '.join(table['missing'])})" if table["missing"] else ""))
    if r["missing"]:
        lines.append("missing:")
        lines.extend(f"  - {m['what']}: {m['how']}" for m in r["missing"])
    else:
        lines.append("missing: nothing")
    return "\n".join(lines)


def _format_simulator(sim: dict) -> list[str]:
    if not sim.get("enabled"):
        return ["simulator: off (PYMAGMA_SIMULATOR=1 or pymagma.simulator.enable() runs on the CPU simulator)"]
    return [
        f"SIMULATOR ON (mode {sim['mode']}): no GPU is used; device memory is host memory, the device below is "
        "simulated",
        f"  MAGMA: NumPy models of {sim['magma_routines']} routines (exports {sim['magma_exports']})",
        f"  kernels: compiled by {sim['kernel_compiler'] or 'no host C++ compiler found'} "
        f"(cache {sim['kernel_cache']})",
        f"  cuDNN: {'NumPy models of the handle-taking calls' if sim['cudnn'] else 'not simulated'}",
    ]


def _format_linalg(section: dict) -> list[str]:
    if "error" in section:
        return [f"linalg paths (method='auto'): unknown ({section['error']})"]
    if "float64" not in section:
        return []
    lines = ["linalg paths (method='auto', float64):"]
    for kind in PATH_KINDS:
        fns = [fn for fn, path in section["float64"].items() if path == kind]
        if fns:
            lines.append(f"  {kind}: " + ", ".join(fns))
    differs = section.get("differs", {})
    for name, diff in differs.items():
        lines.append(f"  {name} differs: " + ", ".join(f"{fn} {path}" for fn, path in diff.items()))
    if not differs:
        lines.append(f"  {', '.join(LINALG_DTYPES)}: the same")
    return lines
