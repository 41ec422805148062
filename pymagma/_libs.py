"""Find and load the native libraries: MAGMA (see ``find_magma``) and NVIDIA's CUDA libraries via cuda.pathfinder."""

from __future__ import annotations

import ctypes
import functools

from .errors import LibraryNotFoundError

#: pip packages that provide each NVIDIA library, for "what to install" messages.
NVIDIA_REMEDIES = {
    "cudnn": "pip install nvidia-cudnn-cu13  (or pip install 'magmadnn[native]')",
    "nvrtc": "pip install nvidia-cuda-nvrtc",
    "cublas": "pip install nvidia-cublas",
    "cudart": "pip install nvidia-cuda-runtime",
}


@functools.cache
def load_nvidia(name: str) -> ctypes.CDLL:
    """Load an NVIDIA library (``cudnn``, ``nvrtc``, ``cublas``, ``cudart``) found by cuda.pathfinder."""
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
