"""FFTs of DeviceArrays on cuFFT: the engine of :mod:`pymagma.fft` and :mod:`pymagma.array_api.fft`.

A transform over some axes runs as cuFFT plans of at most three axes each (cuFFT's ranks), in one pass when the
axes are at most three.  Each pass describes its operands to cuFFT as they lie in memory: the transform axes by
``inembed``/``istride`` (their strides must nest: each a whole multiple of the next, the innermost at least 1) and the
other axes by ``batch``/``idist`` (they must merge into one axis of uniform stride); an operand that cannot be so
described is first copied with the transform axes last (the strided copy kernel).  Results are fresh C-ordered
arrays, in the input's axis order when cuFFT can write that, else with the transform axes last and returned as a
view in the input's order.  Sizes ``n`` shorter than an axis read a slice of it; longer ones and real input to a
complex transform go through one zero-filled copy (real parts written through a strided view).  cuFFT's transforms
are unnormalised: the ``norm`` factor is one MAGMA ``scal`` over the result (a complex result as its real and
imaginary parts: a real factor, the cheaper call).  A C2R transform overwrites its input
(cuFFT documents it), so it only ever reads a buffer made here.  Passes after the first run in place.
"""

from __future__ import annotations

import math

import numpy as np

from . import _colmajor, _cufft, _magma, _native, array, blas, runtime
from .array import DeviceArray
from .errors import GraphCaptureError

NORMS = ("backward", "ortho", "forward")
MAX_RECIPES = 1024  #: cached call recipes per set of libraries (the plans they use stay cached)
COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
REAL = {c: r for r, c in COMPLEX.items()}
_TYPES = {("c2c", np.dtype(np.complex64)): _cufft.Type.C2C, ("c2c", np.dtype(np.complex128)): _cufft.Type.Z2Z,
          ("r2c", np.dtype(np.float32)): _cufft.Type.R2C, ("r2c", np.dtype(np.float64)): _cufft.Type.D2Z,
          ("c2r", np.dtype(np.complex64)): _cufft.Type.C2R, ("c2r", np.dtype(np.complex128)): _cufft.Type.Z2D}


# ----------------------------------------------------------------------------------------------------- layouts
def half(n: int) -> int:
    """The length of the non-redundant half spectrum of ``n`` real points (R2C's output, C2R's input)."""
    return n // 2 + 1


def direction(forward: bool) -> int:
    """cuFFT's sign of the exponent: CUFFT_FORWARD (-1) or CUFFT_INVERSE (+1)."""
    return _cufft.FORWARD if forward else _cufft.INVERSE


def describe(shape, strides, itemsize, axes):
    """``(n, embed, stride, batch, dist)`` of the transforms over ``axes`` of an operand with byte ``strides``, in
    elements; None when cuFFT's advanced layout cannot express it."""
    if any(s % itemsize for s in strides):
        return None
    el = [s // itemsize for s in strides]
    n = tuple(shape[a] for a in axes)
    st = [el[a] for a in axes]
    if st[-1] < 1:
        return None
    embed = [n[0]]
    for k in range(1, len(axes)):
        if st[k - 1] < 1 or st[k - 1] % st[k] or st[k - 1] // st[k] < n[k]:
            return None
        embed.append(st[k - 1] // st[k])
    rest = [(shape[a], el[a]) for a in range(len(shape)) if a not in axes and shape[a] != 1]
    if not rest:
        return n, tuple(embed), st[-1], 1, st[0] * n[0]
    batch, dist = rest[-1]
    for count, step in reversed(rest[:-1]):
        if step != dist * batch:
            return None
        batch *= count
    if dist < 0:
        return None
    return n, tuple(embed), st[-1], batch, dist


def _moved(x: DeviceArray, axes) -> tuple[DeviceArray, tuple[int, ...], list[int]]:
    """``x`` as a view with ``axes`` last (in their order), those axes' new positions, and the permutation."""
    perm = [a for a in range(x.ndim) if a not in axes] + list(axes)
    return x.transpose(perm), tuple(range(x.ndim - len(axes), x.ndim)), perm


def _unmoved(y: DeviceArray, perm: list[int]) -> DeviceArray:
    return y.transpose(list(np.argsort(perm)))


def _real_view(x: DeviceArray, part: int = 0) -> DeviceArray:
    """The real (``part`` 0) or imaginary (1) parts of a complex array as a real strided view of the same memory."""
    r = REAL[x.dtype]
    return DeviceArray._trusted(x.shape, r, x.ptr + part * r.itemsize, x.strides, x, x.device)


#: itemsize -> the dtype the copy kernel moves such elements as (bits, not values: every dtype copies)
_BITS = {1: np.dtype(np.uint8), 2: np.dtype(np.float16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}


def _as_bits(x: DeviceArray, itemsize: int) -> DeviceArray:
    """``x`` as elements of ``itemsize`` bytes (a 16-byte element as two 8-byte ones along a new last axis)."""
    if x.itemsize == itemsize:
        return DeviceArray._trusted(x.shape, _BITS[itemsize], x.ptr, x.strides, x, x.device)
    return DeviceArray._trusted((*x.shape, 2), _BITS[itemsize], x.ptr, (*x.strides, itemsize), x, x.device)


def copy(src: DeviceArray, dst: DeviceArray) -> None:
    """``src`` into the strided view ``dst`` of the same shape and dtype, or a real ``src`` into the real parts of
    a complex ``dst`` of its precision (the strided copy kernel, moving bits)."""
    from . import kernels

    if src.size == 0:
        return
    if dst.dtype != src.dtype:
        dst = _real_view(dst)
    size = src.itemsize if src.itemsize in _BITS else src.itemsize // 2
    kernels.copy(_as_bits(src, size), out=_as_bits(dst, size))


def prepare(x: DeviceArray, axes, sizes, dtype, contiguous: bool = False) -> tuple[DeviceArray, bool]:
    """``x`` sliced or zero-padded to ``sizes`` along ``axes`` and of ``dtype`` (real x into a complex dtype: the
    real parts): a view of ``x`` when nothing else changes and ``contiguous`` is not asked, else a fresh C-ordered
    copy.  Returns the array and whether it is a fresh buffer (which a transform may overwrite)."""
    key = [slice(None)] * x.ndim
    padded = list(x.shape)
    for a, n in zip(axes, sizes):
        if n < x.shape[a]:
            key[a] = slice(0, n)
        padded[a] = n
    view = x[tuple(key)] if any(k != slice(None) for k in key) else x
    if view.shape == tuple(padded) and view.dtype == dtype and not contiguous:
        return view, False
    out = (array.zeros if view.shape != tuple(padded) or view.dtype != dtype else array.empty)(
        tuple(padded), dtype, device=x.device)
    copy(view, out[tuple(slice(0, n) for n in view.shape)] if out.shape != view.shape else out)
    return out, True


# ----------------------------------------------------------------------------------------------------- passes
def _plan(layout: _cufft.Layout, device: int) -> _cufft.Plan:
    found = runtime_plans().get((device, layout))
    if found is not None:
        return found
    if runtime.capture_state.__dict__.get("graph") is not None:
        raise GraphCaptureError(0, "cudaErrorStreamCaptureUnsupported", "making a cuFFT plan allocates its work "
                                "area, which a CUDA graph cannot record: run the same transform once before the "
                                "capture (plans are cached)", "cufftMakePlanMany64")
    return _cufft.plan(layout, device)


def runtime_plans() -> dict:
    from . import _native

    return _native.current.fft_plans


def run_pass(src: DeviceArray, axes, kind: str, forward: bool, n_last: int | None = None,
             in_place: bool = False) -> tuple[DeviceArray, DeviceArray]:
    """One cuFFT execution over ``axes`` (at most three) of ``src``: ``kind`` "c2c", "r2c" or "c2r" (``n_last``: the
    real length of the last axis; ``in_place``: C2C may overwrite ``src``, a buffer made here).  Returns (the result
    in ``src``'s axis order, the C-ordered buffer holding it, or None when that is ``src``'s own)."""
    t = _TYPES[(kind, src.dtype)]
    out_dtype = np.dtype(_cufft.EXEC[t][3])
    shape = list(src.shape)
    if kind == "r2c":
        shape[axes[-1]] = half(src.shape[axes[-1]])
    elif kind == "c2r":
        shape[axes[-1]] = n_last
    described = describe(src.shape, src.strides, src.itemsize, axes)
    perm = copied = None
    if described is None:  # copy with the transform axes last
        moved, axes, perm = _moved(src, axes)
        src, _ = prepare(moved, (), (), src.dtype, contiguous=True)
        copied, shape = src, [shape[p] for p in perm]
        described = describe(src.shape, src.strides, src.itemsize, axes)
        in_place = True  # a fresh copy: a C2C transform may run in place
    if in_place and kind == "c2c":
        out, base, o = src, copied, described
    else:
        out = base = array.empty(tuple(shape), out_dtype, device=src.device)
        o = describe(out.shape, out.strides, out.itemsize, axes)
        if o is None or o[3] != described[3]:  # the output's batch cannot follow the input's: transform axes last
            _, axes2, perm2 = _moved(src, axes)
            out = base = array.empty(tuple(shape[p] for p in perm2), out_dtype, device=src.device)
            o = describe(out.shape, out.strides, out.itemsize, axes2)
            out = _unmoved(out, perm2)
    n, iembed, istride, batch, idist = described
    if kind == "c2r":
        n = (*n[:-1], n_last)
    _, oembed, ostride, _, odist = o
    layout = _cufft.Layout(t, n, iembed, istride, idist, oembed, ostride, odist, batch)
    if out.size and batch:
        plan = _plan(layout, src.device)
        plan.execute(src.ptr, out.ptr, src.queue.stream, direction(forward))
    if perm is not None:
        out = _unmoved(out, perm)
    return out, base


def groups(axes) -> list[tuple[int, ...]]:
    """``axes`` in runs of at most three, the last run first (the order the passes take)."""
    axes = tuple(axes)
    out = []
    while axes:
        out.append(axes[-_cufft.MAX_RANK:])
        axes = axes[:-_cufft.MAX_RANK]
    return out


def scale(base: DeviceArray | None, result: DeviceArray, factor: float) -> None:
    """``result *= factor`` through its C-ordered buffer ``base`` (one MAGMA scal)."""
    if factor == 1.0 or result.size == 0:
        return
    buffer = base if base is not None else result
    real = REAL.get(buffer.dtype, buffer.dtype)  # a complex buffer scaled as its (re, im) reals
    count = buffer.nbytes // real.itemsize
    blas.scal(factor, DeviceArray._trusted((count,), real, buffer.ptr, (real.itemsize,), buffer, buffer.device))


def conjugate(x: DeviceArray) -> None:
    """``x = conj(x)`` in place for a C-contiguous complex array: its imaginary parts scaled by -1."""
    if x.size:
        r = REAL[x.dtype]
        imag = DeviceArray._trusted((x.size,), r, x.ptr + r.itemsize, (2 * r.itemsize,), x, x.device)
        blas.scal(-1.0, imag)


def factor(norm: str, forward: bool, count: int) -> float:
    """The normalisation of a transform of ``count`` points: ``norm`` names the direction that is scaled."""
    if norm == "ortho":
        return 1.0 / math.sqrt(count)
    return 1.0 / count if (norm == "forward") == forward else 1.0


# ----------------------------------------------------------------------------------------------------- recipes
@_native.resource("fft_recipes")
def _recipes(libraries) -> dict:
    """(kind, shape, strides, dtype, axes, sizes, forward, norm, device) -> :class:`Recipe`, per set of libraries."""
    return {}


class Recipe:
    """A transform that is one cuFFT execution on its input as it lies (and at most one scal): everything but the
    output's allocation worked out once.  Calling it runs the transform of an array of the same layout."""

    __slots__ = ("shape", "dtype", "plan", "stream", "direction", "scal", "alpha", "queue", "count")

    def __init__(self, shape, dtype, plan, queue, direction, factor):
        self.shape, self.dtype, self.plan, self.direction = shape, dtype, plan, direction
        self.queue, self.stream = queue, queue.stream
        self.scal = self.alpha = None
        self.count = math.prod(shape) * (2 if dtype.kind == "c" else 1)  # complex scaled as (re, im) reals
        if factor != 1.0:
            p = _magma.precision_of(REAL.get(dtype, dtype))
            self.scal, self.alpha = f"magma_{p}scal", _colmajor.scalar(factor, p)

    def __call__(self, x: DeviceArray) -> DeviceArray:
        out = array._empty(self.shape, self.dtype, x.device)
        self.plan.execute(x.ptr, out.ptr, self.stream, self.direction)
        if self.scal is not None:
            _magma.initialized().bind(self.scal)(self.count, self.alpha, out.ptr, 1, self.queue.handle)
        return out


def _recipe(x: DeviceArray, kind: str, axes, sizes, forward: bool, norm: str) -> Recipe | None:
    """A :class:`Recipe` when the transform is one pass over ``x`` as it lies, into an output in ``x``'s axis order
    (made before any capture: it needs the plan)."""
    if kind == "c2r" or len(axes) > _cufft.MAX_RANK or x.dtype.kind not in ("c" if kind == "c2c" else "f") or \
            any(n != x.shape[a] for a, n in zip(axes, sizes)) or x.size == 0:
        return None
    described = describe(x.shape, x.strides, x.itemsize, axes)
    if described is None:
        return None
    t = _TYPES.get((kind, x.dtype))
    if t is None:
        return None
    out_dtype = np.dtype(_cufft.EXEC[t][3])
    shape = list(x.shape)
    if kind == "r2c":
        shape[axes[-1]] = half(x.shape[axes[-1]])
    out_strides = array.c_strides(tuple(shape), out_dtype.itemsize)
    o = describe(tuple(shape), out_strides, out_dtype.itemsize, axes)
    if o is None or o[3] != described[3]:
        return None
    n, iembed, istride, batch, idist = described
    layout = _cufft.Layout(t, n, iembed, istride, idist, o[1], o[2], o[4], batch)
    queue = x.queue
    return Recipe(tuple(shape), out_dtype, _plan(layout, x.device), queue,
                  direction(forward), factor(norm, forward, math.prod(sizes)))


def cached(x: DeviceArray, kind: str, axes, sizes, forward: bool, norm: str):
    """The transform through its :class:`Recipe` when it has one (made on first use), else None."""
    recipes = _native.current.fft_recipes
    key = (kind, x.shape, x.strides, x.dtype, axes, sizes, forward, norm, x.device)
    recipe = recipes.get(key, False)
    if recipe is False:
        if len(recipes) >= MAX_RECIPES:  # a program cycling through many layouts: start over
            recipes.clear()
        recipe = recipes[key] = _recipe(x, kind, axes, sizes, forward, norm)
    return None if recipe is None else recipe(x)


# ----------------------------------------------------------------------------------------------------- transforms
def c2c(x: DeviceArray, axes, sizes, forward: bool, norm: str) -> DeviceArray:
    """The complex transform of ``x`` (real x is promoted) over ``axes`` with lengths ``sizes``."""
    done = cached(x, "c2c", axes, sizes, forward, norm)
    if done is not None:
        return done
    dtype = x.dtype if x.dtype.kind == "c" else COMPLEX[x.dtype]
    src, owned = prepare(x, axes, sizes, dtype)
    base = src if owned else None
    for group in groups(axes):
        src, made = run_pass(src, group, "c2c", forward, in_place=owned)
        base, owned = (base if made is None else made), True
    scale(base, src, factor(norm, forward, math.prod(sizes)))
    return src


def r2c(x: DeviceArray, axes, sizes, norm: str) -> DeviceArray:
    """The half-spectrum transform of real ``x`` over ``axes`` (the last one halved to ``sizes[-1] // 2 + 1``)."""
    done = cached(x, "r2c", axes, sizes, True, norm)
    if done is not None:
        return done
    src, _ = prepare(x, axes, sizes, x.dtype)
    first, *others = groups(axes)
    src, base = run_pass(src, first, "r2c", True)
    for group in others:
        src, made = run_pass(src, group, "c2c", True, in_place=True)
        base = base if made is None else made
    scale(base, src, factor(norm, True, math.prod(sizes)))
    return src


def c2r(x: DeviceArray, axes, sizes, norm: str) -> DeviceArray:
    """The real inverse of the half spectrum ``x`` over ``axes``: real lengths ``sizes`` (the last axis read as
    ``sizes[-1] // 2 + 1`` complex values)."""
    dtype = x.dtype if x.dtype.kind == "c" else COMPLEX[x.dtype]
    src, owned = prepare(x, axes, (*sizes[:-1], half(sizes[-1])), dtype)
    base = src if owned else None
    last, *others = groups(axes)
    for group in reversed(others):
        src, made = run_pass(src, group, "c2c", False, in_place=owned)
        base, owned = (base if made is None else made), True
    if not owned:  # C2R overwrites what it reads
        src, _ = prepare(src, (), (), src.dtype, contiguous=True)
    src, base = run_pass(src, last, "c2r", False, n_last=sizes[-1])
    scale(base, src, factor(norm, False, math.prod(sizes)))
    return src
