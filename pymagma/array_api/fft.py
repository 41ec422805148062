"""The standard's ``fft`` extension (2024.12) as ``pymagma.array_api.fft``: DeviceArrays in, DeviceArrays out.

Every transform runs on cuFFT (:mod:`pymagma._fft`: plans cached per layout, on the array's MAGMA queue, recorded
by a CUDA graph capture); ``fftshift``/``ifftshift`` are block copies on the device; ``fftfreq``/``rfftfreq`` are
built like ``arange``.  Dtypes: complex64/complex128 transforms keep their precision; ``fft``, ``ifft``, ``fftn``,
``ifftn``, ``irfft``, ``irfftn`` and ``hfft`` also take real floating input, promoted to the complex dtype of its
precision (as NumPy and CuPy do); ``rfft``, ``rfftn`` and ``ihfft`` take real floating input only.  Integer and
boolean input is a TypeError naming the function (cast with ``astype``).
"""

from __future__ import annotations

from .. import fft as _face
from ..array import DeviceArray
from . import _creation

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def _floating(x, what: str, real: bool = False) -> DeviceArray:
    if not isinstance(x, DeviceArray):
        raise TypeError(f"fft.{what}: expected a pymagma DeviceArray, got {type(x).__name__} (use "
                        "pymagma.array_api.asarray for host data)")
    kinds = "f" if real else "fc"
    if x.dtype.kind not in kinds or x.dtype.itemsize not in (4, 8, 16) or (x.dtype.kind == "f" and x.itemsize > 8):
        wanted = "a real floating dtype (float32, float64)" if real else \
            "a floating dtype (complex64, complex128, or float32/float64, promoted)"
        raise TypeError(f"fft.{what} needs {wanted}, got {x.dtype} (cast with astype)")
    return x


def _norm(norm) -> str:
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f'norm must be "backward", "ortho" or "forward", got {norm!r}')
    return norm


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.fft(_floating(x, "fft"), n, axis, _norm(norm))


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.ifft(_floating(x, "ifft"), n, axis, _norm(norm))


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    return _face._raw("c2c", _floating(x, "fftn"), s, axes, _norm(norm), None, "fftn")


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    return _face._raw("c2c", _floating(x, "ifftn"), s, axes, _norm(norm), None, "ifftn", forward=False)


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.rfft(_floating(x, "rfft", real=True), n, axis, _norm(norm))


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.irfft(_floating(x, "irfft"), n, axis, _norm(norm))


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    return _face._raw("r2c", _floating(x, "rfftn", real=True), s, axes, _norm(norm), None, "rfftn")


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    x = _floating(x, "irfftn")
    s, axes = _face._c2r_sizes(x, s, axes)
    return _face._raw("c2r", x, s, axes, _norm(norm), None, "irfftn", forward=False)


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.hfft(_floating(x, "hfft"), n, axis, _norm(norm))


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    return _face.ihfft(_floating(x, "ihfft", real=True), n, axis, _norm(norm))


def _freq_dtype(dtype, what: str):
    import numpy as np

    dtype = np.dtype("float64" if dtype is None else dtype)
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):
        raise TypeError(f"fft.{what}: dtype must be a real floating dtype (float32, float64), got {dtype}")
    return dtype


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _face.frequencies(n, d, False, _freq_dtype(dtype, "fftfreq"), _creation._device(device))


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _face.frequencies(n, d, True, _freq_dtype(dtype, "rfftfreq"), _creation._device(device))


def fftshift(x, /, *, axes=None):
    if not isinstance(x, DeviceArray):
        raise TypeError(f"fft.fftshift: expected a pymagma DeviceArray, got {type(x).__name__}")
    return _face.shift(x, axes, False)


def ifftshift(x, /, *, axes=None):
    if not isinstance(x, DeviceArray):
        raise TypeError(f"fft.ifftshift: expected a pymagma DeviceArray, got {type(x).__name__}")
    return _face.shift(x, axes, True)
