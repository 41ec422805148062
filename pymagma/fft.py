"""``numpy.fft`` on the device: every function of NumPy's FFT module, computed by cuFFT (:mod:`pymagma._fft`).

A DeviceArray in gives a DeviceArray out; host input (a NumPy array, a list) is copied to the device, transformed
and copied back, as :mod:`pymagma.linalg` does.  Arguments, dtypes and errors are NumPy's: float32/complex64 stay in
single precision, other real and integer input computes in double precision (float16 in single), ``n``/``s``
shorter than an axis crop it and longer ones zero-pad it, ``norm`` is "backward" (default), "ortho" or "forward",
``out`` receives the result.  ``fftfreq``/``rfftfreq`` take ``device`` as NumPy 2 does; ``fftshift``/``ifftshift``
move blocks of the array on the device.  :mod:`pymagma.array_api.fft` is the array API standard's face of the same
transforms.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from . import _fft, array
from .array import DeviceArray

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


# ----------------------------------------------------------------------------------------------------- arguments
def check_norm(norm) -> str:
    if norm is None:
        return "backward"
    if norm not in _fft.NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return norm


def check_points(n, what: str = "n") -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{what} must be an integer number of FFT points, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


def normalize_axis(axis, ndim: int) -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, got {type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def shape_and_axes(x, s, axes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """NumPy's rules for ``s`` and ``axes`` of the n-dimensional transforms: every axis when both are None, the last
    ``len(s)`` axes when only ``s`` is given; ``-1`` (or None) in ``s`` keeps an axis' length."""
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(normalize_axis(a, x.ndim) for a in axes)
    if s is None:
        s = tuple(x.shape[a] for a in axes)
    s = tuple(s)
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    return tuple(x.shape[a] if v in (-1, None) else v for v, a in zip(s, axes)), axes


def numpy_deprecations(s, axes) -> None:
    """NumPy 2's DeprecationWarnings for ``s`` without ``axes`` and for None in ``s`` (the NumPy face only)."""
    if s is None:
        return
    if axes is None:
        warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0); pass the axes "
                      "[0, ..., k-1] explicitly", DeprecationWarning, stacklevel=3)
    if any(v is None for v in s):
        warnings.warn("Passing an array containing `None` values to `s` is deprecated in NumPy 2.0; pass the "
                      "length (or -1) instead", DeprecationWarning, stacklevel=3)


def working_dtype(dtype, what: str) -> np.dtype:
    """The dtype a transform computes in: NumPy's (float32/complex64 single, float16 single, the rest double)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c" and dtype.itemsize <= 16:
        return dtype
    if dtype.kind == "f" and dtype.itemsize <= 8:
        return np.dtype(np.float32 if dtype.itemsize <= 4 else np.float64)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    raise TypeError(f"{what}: array type {dtype} is unsupported (cuFFT computes in single and double precision; "
                    "cast with astype)")


_WORKING = {np.dtype(n): np.dtype(n) for n in ("float32", "float64", "complex64", "complex128")}


# ----------------------------------------------------------------------------------------------------- host/device
def _device_input(a, what: str) -> tuple[DeviceArray, bool]:
    """``a`` as a DeviceArray of a dtype cuFFT takes, and whether it came from the host."""
    if isinstance(a, DeviceArray):
        want = _WORKING.get(a.dtype) or working_dtype(a.dtype, what)
        return (a if a.dtype == want else a.astype(want)), False
    host = np.asarray(a)
    return array.asarray(np.ascontiguousarray(host, dtype=working_dtype(host.dtype, what))), True


def _finish(result: DeviceArray, from_host: bool, out):
    if out is not None:
        if isinstance(out, DeviceArray):
            if out.shape != result.shape or out.dtype != result.dtype:
                raise ValueError(f"out has shape {out.shape} and dtype {out.dtype}, expected {result.shape} "
                                 f"{result.dtype}")
            _fft.copy(result, out)
            return out
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be of ArrayType (a NumPy array or a pymagma DeviceArray), got "
                            f"{type(out).__name__}")
        if out.shape != result.shape:
            raise ValueError(f"out has wrong shape {out.shape}; expected {result.shape}")
        if not np.can_cast(result.dtype, out.dtype, casting="same_kind"):
            raise TypeError(f"Cannot cast the result {result.dtype} to out's dtype {out.dtype}")
        out[...] = result.get()
        return out
    return result.get() if from_host else result


_COOKED: dict = {}  # (kind, shape, s, axes, norm) -> the checked (s, axes, norm): pure, bounded


def _cook(kind, x, s, axes, norm, what):
    norm = check_norm(norm)
    if x.ndim == 0:
        raise ValueError(f"{what}: a 0-d array has no axis to transform")
    s, axes = shape_and_axes(x, s, axes)
    return tuple(check_points(v) for v in s), axes, norm


def _raw(kind: str, a, s, axes, norm, out, what: str, forward: bool = True):
    x, from_host = _device_input(a, what)
    try:
        key = (kind, x.shape, s, axes, norm)
        cooked = _COOKED.get(key)
    except TypeError:  # lists for s or axes: checked every time
        key = cooked = None
    if cooked is None:
        cooked = _cook(kind, x, s, axes, norm, what)
        if key is not None and len(_COOKED) < 4096:
            _COOKED[key] = cooked
    s, axes, norm = cooked
    if kind == "r2c" and x.dtype.kind == "c":
        raise TypeError(f"{what} needs real input, got {x.dtype}")
    if len(set(axes)) != len(axes):  # a repeated axis: one transform per entry, as NumPy
        result = x
        if kind == "c2r":
            for ax, n in reversed(list(zip(axes[:-1], s[:-1]))):
                result = _fft.c2c(result, (ax,), (n,), False, norm)
            return _finish(_fft.c2r(result, axes[-1:], s[-1:], norm), from_host, out)
        if kind == "r2c":
            result = _fft.r2c(result, axes[-1:], s[-1:], norm)
            axes, s = axes[:-1], s[:-1]
        for ax, n in reversed(list(zip(axes, s))):
            result = _fft.c2c(result, (ax,), (n,), forward, norm)
        return _finish(result, from_host, out)
    if kind == "c2c":
        result = _fft.c2c(x, axes, s, forward, norm)
    elif kind == "r2c":
        result = _fft.r2c(x, axes, s, norm)
    else:
        result = _fft.c2r(x, axes, s, norm)
    return _finish(result, from_host, out)


def _one_axis(a, n, axis):
    ndim = a.ndim if isinstance(a, DeviceArray) else np.ndim(a)
    axis = normalize_axis(axis, max(ndim, 1))
    return (None if n is None else (n,)), (axis,)


# ----------------------------------------------------------------------------------------------------- transforms
def fft(a, n=None, axis=-1, norm=None, out=None):
    """The 1-D discrete Fourier transform (``numpy.fft.fft``)."""
    s, axes = _one_axis(a, n, axis)
    return _raw("c2c", a, s, axes, norm, out, "fft")


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """The 1-D inverse transform (``numpy.fft.ifft``)."""
    s, axes = _one_axis(a, n, axis)
    return _raw("c2c", a, s, axes, norm, out, "ifft", forward=False)


def fftn(a, s=None, axes=None, norm=None, out=None):
    """The n-D transform over ``axes`` (``numpy.fft.fftn``)."""
    numpy_deprecations(s, axes)
    return _raw("c2c", a, s, axes, norm, out, "fftn")


def ifftn(a, s=None, axes=None, norm=None, out=None):
    numpy_deprecations(s, axes)
    return _raw("c2c", a, s, axes, norm, out, "ifftn", forward=False)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    numpy_deprecations(s, axes)
    return _raw("c2c", a, s, axes, norm, out, "fft2")


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    numpy_deprecations(s, axes)
    return _raw("c2c", a, s, axes, norm, out, "ifft2", forward=False)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """The 1-D transform of real input, its ``n // 2 + 1`` non-negative frequencies (``numpy.fft.rfft``)."""
    s, axes = _one_axis(a, n, axis)
    return _raw("r2c", a, s, axes, norm, out, "rfft")


def rfftn(a, s=None, axes=None, norm=None, out=None):
    numpy_deprecations(s, axes)
    return _raw("r2c", a, s, axes, norm, out, "rfftn")


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    numpy_deprecations(s, axes)
    return _raw("r2c", a, s, axes, norm, out, "rfft2")


def _c2r_sizes(x, s, axes):
    """NumPy's irfftn defaults: the last axis' real length is ``2 * (m - 1)`` of its ``m`` complex values."""
    ndim = x.ndim if isinstance(x, DeviceArray) else np.ndim(x)
    shape = x.shape if isinstance(x, DeviceArray) else np.shape(x)
    if axes is None:
        axes = tuple(range(ndim)) if s is None else tuple(range(ndim - len(s), ndim))
    axes = tuple(normalize_axis(a, max(ndim, 1)) for a in axes)
    if s is None:
        s = [shape[a] for a in axes]
        if axes:
            s[-1] = (shape[axes[-1]] - 1) * 2
    else:
        s = list(s)
        if s and s[-1] in (-1, None):
            s[-1] = (shape[axes[-1]] - 1) * 2
    return tuple(s), axes


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of :func:`rfft`: ``n`` real points (default ``2 * (m - 1)``) (``numpy.fft.irfft``)."""
    s, axes = _c2r_sizes(a, None if n is None else (n,), (axis,))
    return _raw("c2r", a, s, axes, norm, out, "irfft", forward=False)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    numpy_deprecations(s, axes)
    s, axes = _c2r_sizes(a, s, axes)
    return _raw("c2r", a, s, axes, norm, out, "irfftn", forward=False)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    numpy_deprecations(s, axes)
    s, axes = _c2r_sizes(a, s, axes)
    return _raw("c2r", a, s, axes, norm, out, "irfft2", forward=False)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """The transform of a Hermitian-symmetric signal given by its first half: real output (``numpy.fft.hfft``)."""
    x, from_host = _device_input(a, "hfft")
    x = x.astype(_fft.COMPLEX[x.dtype]) if x.dtype.kind != "c" else x
    s, axes = _c2r_sizes(x, None if n is None else (n,), (axis,))
    n_points = check_points(s[0])
    norm = _SWAP[check_norm(norm)]
    spectrum, _ = _fft.prepare(x, axes, (_fft.half(n_points),), x.dtype, contiguous=True)
    _fft.conjugate(spectrum)
    return _finish(_fft.c2r(spectrum, axes, (n_points,), norm), from_host, out)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of :func:`hfft`: the half spectrum of a real signal, conjugated (``numpy.fft.ihfft``)."""
    x, from_host = _device_input(a, "ihfft")
    if x.dtype.kind == "c":
        raise TypeError(f"ihfft needs real input, got {x.dtype}")
    s, axes = _one_axis(x, n, axis)
    s = (check_points(x.shape[axes[0]] if s is None else s[0]),)
    result = _fft.r2c(x, axes, s, _SWAP[check_norm(norm)])
    if not result.is_c_contiguous:
        result, _ = _fft.prepare(result, (), (), result.dtype, contiguous=True)
    _fft.conjugate(result)
    return _finish(result, from_host, out)


# ----------------------------------------------------------------------------------------------------- helpers
def frequencies(n, d, real: bool, dtype, device) -> DeviceArray:
    """The sample frequencies of an ``n``-point transform (``real``: the ``n // 2 + 1`` of :func:`rfft`)."""
    n = check_points(n)
    values = (np.fft.rfftfreq if real else np.fft.fftfreq)(n, d)  # index arithmetic, as arange builds on the host
    return array.asarray(values.astype(dtype), device=device)


def fftfreq(n, d=1.0, device=None, dtype=np.float64):
    """``[0, 1, ..., n/2 - 1, -n/2, ..., -1] / (d * n)`` (``numpy.fft.fftfreq``): a NumPy array, as NumPy's, or a
    DeviceArray on ``device`` (a device index)."""
    if device is None or device == "cpu":
        return np.fft.fftfreq(check_points(n), d).astype(dtype)
    return frequencies(n, d, False, dtype, device)


def rfftfreq(n, d=1.0, device=None, dtype=np.float64):
    """``[0, 1, ..., n // 2] / (d * n)`` (``numpy.fft.rfftfreq``): NumPy's, or a DeviceArray on ``device``."""
    if device is None or device == "cpu":
        return np.fft.rfftfreq(check_points(n), d).astype(dtype)
    return frequencies(n, d, True, dtype, device)


def shift(x: DeviceArray, axes, inverse: bool) -> DeviceArray:
    """``x`` rolled by ``n // 2`` (``inverse``: ``-(n // 2)``) along each of ``axes``: one block copy per corner."""
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int) or np.ndim(axes) == 0:
        axes = (axes,)
    axes = tuple(normalize_axis(a, max(x.ndim, 1)) for a in axes)
    out = array.empty(x.shape, x.dtype, device=x.device)
    if out.size == 0:
        return out
    moves = {}
    for a in set(axes):
        n = x.shape[a]
        k = (sum(n // 2 for b in axes if b == a) * (-1 if inverse else 1)) % n if n else 0
        moves[a] = k
    blocks = [()]
    for a in range(x.ndim):
        k = moves.get(a, 0)
        n = x.shape[a]
        parts = [(slice(0, n - k), slice(k, n))] + ([(slice(n - k, n), slice(0, k))] if k else [])
        blocks = [b + (p,) for b in blocks for p in parts]
    for block in blocks:
        src = tuple(p[0] for p in block)
        dst = tuple(p[1] for p in block)
        _fft.copy(x[src], out[dst])
    return out


def fftshift(x, axes=None):
    """The zero frequency moved to the centre (``numpy.fft.fftshift``)."""
    if not isinstance(x, DeviceArray):
        return shift(array.asarray(np.asarray(x)), axes, False).get()
    return shift(x, axes, False)


def ifftshift(x, axes=None):
    """The inverse of :func:`fftshift`."""
    if not isinstance(x, DeviceArray):
        return shift(array.asarray(np.asarray(x)), axes, True).get()
    return shift(x, axes, True)
