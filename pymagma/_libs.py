"""Find and load the native libraries: MAGMA (see ``find_magma``) and NVIDIA's CUDA libraries via cuda.pathfinder."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import LibraryNotFoundError

#: pip packages that provide each NVIDIA library, for "what to install" messages.
NVIDIA_REMEDIES = {
    "cudnn": "pip install nvidia-cudnn-cu13  (or pip install 'magmadnn[native]')",
    "nvrtc": "pip install nvidia-cuda-nvrtc",
    "cublas": "pip install nvidia-cublas",
    "cufft": "pip install nvidia-cufft  (or pip install 'magmadnn[native]')",
    "cudart": "pip install nvidia-cuda-runtime",
}


@functools.cache
def load_nvidia(name: str) -> ctypes.CDLL:
    """Load an NVIDIA library (``cudnn``, ``nvrtc``, ``cublas``, ``cufft``, ``cudart``) found by cuda.pathfinder."""
    try:
        from cuda import pathfinder
    except ImportError as exc:  # pragma: no cover - cuda-python is a core dependency
        raise LibraryNotFoundError("cuda-python is not installed: pip install cuda-python") from exc
    try:
        loaded = pathfinder.load_nvidia_dynamic_lib(name)
    except Exception as exc:
        raise LibraryNotFoundError(
            f"the {name} library was not found ({exc}); install it: {NVIDIA_REMEDIES.get(name, 'the CUDA toolkit')}"
        ) from exc
    return ctypes.CDLL(loaded.abs_path)


def nvidia_path(name: str) -> str:
    """Absolute path of a loaded NVIDIA library."""
    return load_nvidia(name)._name


# ----------------------------------------------------------------------------------------------------- MAGMA
MAGMA_FILENAMES = ("libmagma.so", "libmagma.dylib", "magma.dll")
MAGMA_DIR_VARIABLES = ("MAGMA_ROOT", "MAGMA_HOME", "MAGMA_DIR")
TORCH_MAGMA_FILE = "libtorch_cuda_linalg.so"
FULL_MAGMA_REMEDY = (
    "install MAGMA (conda install -c conda-forge magma, or build it from https://icl.utk.edu/magma) and set "
    "PYMAGMA_MAGMA_LIBRARY to libmagma.so or MAGMA_ROOT to its prefix"
)
MAGMA_REMEDY = FULL_MAGMA_REMEDY + "; or pip install torch (its CUDA wheel bundles a partial MAGMA 2.x)"
TORCH_PARTIAL_NOTE = (
    "PyTorch's bundled MAGMA: BLAS, batched gemm/trsm, the getrf family and sytrf only "
    "(no potrf, geqrf, getrs/gesv, syevd, gesdd, geev)"
)


@dataclass(frozen=True)
class MagmaProvider:
    """Where MAGMA was found: ``path`` (a file, or a loader name), ``source`` (how), ``partial`` (a subset)."""

    path: str
    source: str
    partial: bool = False
    note: str = ""


def _magma_file_in(directory: str) -> str | None:
    for name in MAGMA_FILENAMES:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _torch_magma() -> tuple[str | None, str]:
    """PyTorch's bundled MAGMA, located without importing torch: (path or None, why not)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as exc:
        return None, f"torch: cannot locate the package ({exc})"
    if spec is None or not spec.submodule_search_locations:
        return None, "torch: not installed"
    for root in spec.submodule_search_locations:
        candidate = os.path.join(root, "lib", TORCH_MAGMA_FILE)
        if os.path.isfile(candidate):
            return candidate, ""
    return None, f"torch: no lib/{TORCH_MAGMA_FILE} in {list(spec.submodule_search_locations)} (a CPU-only build?)"


def find_magma(environ: Mapping[str, str] | None = None) -> MagmaProvider:
    """Find MAGMA in the documented order; raise ``LibraryNotFoundError`` listing every place looked at.

    1. ``PYMAGMA_MAGMA_LIBRARY`` (a file; an explicit setting that is wrong is an error, not skipped);
    2. ``MAGMA_ROOT`` / ``MAGMA_HOME`` / ``MAGMA_DIR`` (``lib``, ``lib64``); 3. ``CONDA_PREFIX/lib``;
    4. the loader's search (``ctypes.util.find_library('magma')``); 5. PyTorch's bundled MAGMA (partial).
    """
    env = os.environ if environ is None else environ
    explicit = env.get("PYMAGMA_MAGMA_LIBRARY")
    if explicit:
        if os.path.isfile(explicit):
            return MagmaProvider(explicit, "PYMAGMA_MAGMA_LIBRARY")
        raise LibraryNotFoundError(
            f"PYMAGMA_MAGMA_LIBRARY={explicit!r} is not a file; point it at libmagma.so (or unset it to search)")
    looked: list[str] = []
    for var in MAGMA_DIR_VARIABLES:
        prefix = env.get(var)
        if not prefix:
            continue
        for sub in ("lib", "lib64"):
            found = _magma_file_in(os.path.join(prefix, sub))
            if found:
                return MagmaProvider(found, var)
        looked.append(f"{var}={prefix}: no {'/'.join(MAGMA_FILENAMES)} in lib or lib64")
    conda = env.get("CONDA_PREFIX")
    if conda:
        found = _magma_file_in(os.path.join(conda, "lib"))
        if found:
            return MagmaProvider(found, "CONDA_PREFIX")
        looked.append(f"CONDA_PREFIX={conda}: no libmagma in lib")
    name = ctypes.util.find_library("magma")
    if name:
        return MagmaProvider(name, "loader")
    looked.append("the dynamic loader's search path: no libmagma")
    torch_path, why = _torch_magma()
    if torch_path:
        return MagmaProvider(torch_path, "torch", partial=True, note=TORCH_PARTIAL_NOTE)
    looked.append(why)
    raise LibraryNotFoundError("MAGMA was not found (looked at: " + "; ".join(looked) + "); " + MAGMA_REMEDY)


@functools.cache
def magma_provider() -> MagmaProvider:
    """The MAGMA provider of this process (found once)."""
    return find_magma()


@functools.cache
def load_magma() -> ctypes.CDLL:
    """Load the MAGMA library of :func:`magma_provider` (``LibraryNotFoundError`` when missing or unloadable)."""
    provider = magma_provider()
    try:
        return ctypes.CDLL(provider.path)
    except OSError as exc:
        raise LibraryNotFoundError(
            f"MAGMA found at {provider.path} (from {provider.source}) but it does not load: {exc}; {MAGMA_REMEDY}"
        ) from exc


def magma_ilp64(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``magma_int_t`` is 64-bit (``PYMAGMA_ILP64=1``, for a MAGMA built with ILP64)."""
    env = os.environ if environ is None else environ
    return env.get("PYMAGMA_ILP64", "0").strip().lower() in ("1", "true", "yes", "on")
