"""Norms and products on MAGMA's BLAS (nrm2, asum, gemm) and on :func:`svd` / :func:`inv`: ``norm``,
``matrix_power``, ``multi_dot``."""

from __future__ import annotations

import numpy as np

from .. import _checks, blas
from ..array import DeviceArray, asarray, on_arrays_device
from ..errors import LinAlgError
from ._common import _as_operand, _keeps_subclass, _real, _result, _square, _to_device
from .lu import inv
from .svd import svd

try:
    from numpy.lib.array_utils import normalize_axis_index
except ImportError:  # NumPy 1
    from numpy.core.multiarray import normalize_axis_index


def _numpy_only(x, integers: bool) -> bool:
    """Whether ``x`` is host data MAGMA has no routine for, left to NumPy so that results keep NumPy's dtypes:
    anything but MAGMA's four dtypes (byte order aside), except integers and bool when ``integers`` (they become
    float64, as numpy.linalg converts them)."""
    if isinstance(x, DeviceArray):
        return False
    dt = np.asarray(x).dtype
    return not (dt.newbyteorder("=") in blas.BLAS_DTYPES or (integers and dt.kind in "biu"))


def _host_scalar_or_array(res, on_host: bool, device):
    """A norm's value as numpy.linalg returns it: a NumPy scalar when 0-d, else an array (a DeviceArray on
    ``device`` for DeviceArray input)."""
    res = np.asarray(res)
    if res.ndim == 0:
        return res[()]
    return res if on_host else asarray(np.ascontiguousarray(res), device=device)


#: BLAS-1 reductions of :func:`norm`: the routine, and how the values of parts of one block combine.
_BLAS1 = {"nrm2": (blas.nrm2, np.hypot.reduce), "asum": (blas.asum, np.sum)}


def _reduce_block(block: DeviceArray, kind: str):
    """nrm2 or asum of all elements of a non-empty ``block``, on the device: one call when its elements form one
    strided vector (a 1-D view, or a block whose axes, by decreasing stride, each step over the next one's whole
    length, e.g. a contiguous block or every k-th element of one; the order of the elements does not matter), else
    one per sub-block along its largest stride, combined on the host in double."""
    routine, combine = _BLAS1[kind]
    if block.ndim == 1:
        ok = block.shape[0] == 1 or (block.strides[0] > 0 and block.strides[0] % block.itemsize == 0)
        return routine(block if ok else block.copy())
    dims = sorted(((n, st) for n, st in zip(block.shape, block.strides) if n != 1), key=lambda d: -d[1])
    if all(outer[1] == inner[1] * inner[0] for outer, inner in zip(dims, dims[1:])):
        return _reduce_block(block._view(0, (block.size,), (dims[-1][1] if dims else block.itemsize,)), kind)
    block = block.transpose(*np.argsort([-st for st in block.strides], kind="stable"))
    return combine(np.array([_reduce_block(block[i], kind) for i in range(block.shape[0])], np.float64))


def _blas1(d: DeviceArray, axes: tuple, kind: str) -> np.ndarray:
    """nrm2 or asum (``kind``) of every block of ``d`` over ``axes`` on the device: a host array of the other axes'
    shape, in the real dtype."""
    kept = [i for i in range(d.ndim) if i not in axes]
    y = d.transpose(*kept, *axes) if d.ndim else d
    out = np.zeros(tuple(d.shape[i] for i in kept), _real(d.dtype))
    for idx in np.ndindex(*out.shape):
        block = y[idx] if idx else y
        if block.size:
            out[idx] = _reduce_block(block.reshape(1) if block.ndim == 0 else block, kind)
    return out


def _norm_axes(axis, nd: int) -> tuple:
    """NumPy's ``axis`` for ``norm`` as a tuple of integers (a float is a TypeError, not truncated as NumPy does)."""
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, tuple):
        return tuple(_checks.integer(a, f"axis[{i}]") for i, a in enumerate(axis))
    try:
        return (_checks.integer(axis, "axis"),)
    except TypeError:
        raise TypeError(f"'axis' must be None, an integer or a tuple of integers, got {axis!r}") from None


@on_arrays_device
def norm(x, ord=None, axis=None, keepdims=False):
    """Matrix or vector norm like ``numpy.linalg.norm``: the same ``ord``, ``axis`` and ``keepdims`` rules, result
    shapes, dtypes (the real dtype of ``x``; integers become float64) and errors.

    On the device: the 2-norm of vectors and the Frobenius norm (``ord`` None/2/'fro', and the default whole-array
    norm) by MAGMA's nrm2, one call per vector or matrix (per row of a matrix that is no contiguous block, the
    parts combined on the host); for real dtypes the 1-norm of vectors and the column/row sums of the 1/-1/inf/-inf
    matrix norms by MAGMA's asum, one call per vector, column or row, their max/min then taken on the host;
    2/-2/'nuc' from the singular values of :func:`svd` (native or hybrid), reduced on the host.  The other vector
    orders (inf, -inf, 0, any p) and the complex 1/inf norms are computed by ``numpy.linalg.norm`` on the host after
    one copy of ``x``, and so is host input of dtypes MAGMA has no routine for (float16, long double, object).

    Returns a NumPy scalar where numpy.linalg does (a 0-d result), also for DeviceArray input; array results are
    NumPy arrays for NumPy input and DeviceArrays for DeviceArray input.  Unlike NumPy, ``axis`` must hold integers
    (``axis=1.0`` is a TypeError, not truncated)."""
    if _numpy_only(x, integers=True):
        return np.linalg.norm(x, ord, axis, keepdims)
    a, on_host = _as_operand(x, "x")
    nd, real_dtype = a.ndim, a.dtype.kind != "c"
    axes = _norm_axes(axis, nd)
    whole = axis is None and (ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1))
    if whole:
        plan = ("nrm2", axes)
    elif len(axes) == 1:
        axes = (normalize_axis_index(axes[0], nd),)
        if isinstance(ord, str):
            raise ValueError(f"Invalid norm order '{ord}' for vectors")
        plan = ("nrm2", axes) if ord is None or ord == 2 else ("asum", axes) if ord == 1 and real_dtype else None
    elif len(axes) == 2:
        row, col = (normalize_axis_index(i, nd) for i in axes)
        if row == col:
            raise ValueError("Duplicate axes given.")
        axes = (row, col)
        if ord in (None, "fro", "f"):
            plan = ("nrm2", axes)
        elif ord in (2, -2, "nuc"):
            plan = ("svd", axes)
        elif ord in (1, -1, np.inf, -np.inf):
            plan = ("sums", axes) if real_dtype else None
        else:
            raise ValueError("Invalid norm order for matrices.")
    else:
        raise ValueError("Improper number of dimensions to norm.")
    if plan is None:
        res = np.linalg.norm(a if on_host else a.get(), ord, axes, keepdims)
        return _host_scalar_or_array(res, on_host, None if on_host else a.device)
    dev = _to_device(a, on_host)
    res = _device_norm(dev, ord, *plan)
    if keepdims:
        res = np.reshape(res, [1 if i in axes else n for i, n in enumerate(dev.shape)])
    return _host_scalar_or_array(res, on_host, dev.device)


def _device_norm(d: DeviceArray, ord, kind: str, axes: tuple) -> np.ndarray:
    """The device part of :func:`norm` (``kind``: nrm2 / asum over ``axes``, sums = the 1/inf matrix norms, svd),
    as a host array shaped like NumPy's result without ``keepdims``."""
    if kind in _BLAS1:
        return _blas1(d, axes, kind)
    row, col = axes
    if kind == "sums":  # NumPy's formulation: abs sums along one axis, then max/min along the other
        summed, other = (row, col) if ord in (1, -1) else (col, row)
        sums = _blas1(d, (summed,), "asum")
        other -= other > summed
        return sums.max(axis=other, initial=0) if ord > 0 else sums.min(axis=other)
    rest = [i for i in range(d.ndim) if i not in axes]
    s = svd(d.transpose(*rest, row, col), compute_uv=False)
    s = s if isinstance(s, np.ndarray) else s.get()
    if ord == 2:
        return np.amax(s, axis=-1, initial=0)
    return np.amin(s, axis=-1) if ord == -2 else np.sum(s, axis=-1)


@on_arrays_device
@_keeps_subclass("a", 0)
def matrix_power(a, n):
    """``a`` to the integer power ``n`` like ``numpy.linalg.matrix_power``, for square matrices and stacks of them:
    repeated squaring with device gemm (:func:`pymagma.blas.matmul`, batched for stacks); ``n < 0`` inverts first
    with :func:`inv` (a singular matrix raises LinAlgError); ``n == 0`` gives identities of ``a``'s dtype.  A
    non-integer ``n`` is a TypeError and non-square matrices a LinAlgError, as in NumPy.  Host input of dtypes MAGMA
    has no gemm for (integers, bool, float16, ...) is powered by NumPy, so the result keeps its dtype as in NumPy.
    ``n == 1`` returns a copy (NumPy returns ``a`` itself)."""
    if _numpy_only(a, integers=False):
        return np.linalg.matrix_power(a, n)
    op, on_host = _as_operand(a, "a")
    _square(op)
    n = _checks.integer(n, "exponent")
    if n == 0:
        eye = np.broadcast_to(np.eye(op.shape[-1], dtype=op.dtype), op.shape)
        return eye.copy() if on_host else asarray(np.ascontiguousarray(eye), device=op.device)
    base = _to_device(op, on_host)
    if n < 0:
        base = inv(base)
    z = result = None
    for bit in bin(abs(n))[:1:-1]:  # bits from the least significant: z runs through base**(2**k)
        z = base if z is None else blas.matmul(z, z)
        if bit == "1":
            result = z if result is None else blas.matmul(result, z)
    if result is a:
        result = result.copy()
    return _result(result, on_host)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The optimal parenthesization of a matrix chain with shapes (dims[i], dims[i + 1]) (dynamic programming over
    sub-chains, the cost of a product being m * k * n): ``split[i][j]`` is where the product i..j is split, the first
    split on ties (NumPy's choice)."""
    count = len(dims) - 1
    cost = [[0.0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = np.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(mats: list, split, i: int, j: int, out=None) -> DeviceArray:
    if i == j:
        return mats[i]
    k = split[i][j]
    return blas.gemm(_chain_product(mats, split, i, k), _chain_product(mats, split, k + 1, j), out)


@on_arrays_device
def multi_dot(arrays, *, out=None):
    """``arrays[0] @ arrays[1] @ ...`` like ``numpy.linalg.multi_dot``, in the cheapest order (NumPy's dynamic
    programming over the chain), each product a device gemm.  A 1-D first argument is a row vector and a 1-D last
    one a column vector (then the result is 1-D, or a NumPy scalar when both are); every other argument must be 2-D
    (LinAlgError otherwise).  Mixed dtypes promote as in NumPy (every operand is converted to the result's dtype
    first, so a float32 pair in a float64 chain is multiplied in float64, not float32 as NumPy does).  Any
    DeviceArray argument makes the result a DeviceArray (on its device); host input of dtypes MAGMA has no gemm for
    (integers, bool, ...) is multiplied by NumPy so the result keeps NumPy's dtype.  A host result keeps the
    ndarray subclass of the first array, as with NumPy's ``dot``.

    ``out``: a C-contiguous array of the result's dtype (NumPy for a NumPy result, DeviceArray for a DeviceArray
    one), shaped like the result or like the 2-D product before 1-D ends are dropped; it is filled and returned
    (as a view when the result is 1-D).  Deliberate difference: NumPy's two-array case is ``numpy.dot``, which also
    takes 0-d and N-D arrays; here two arrays follow the same rules as more."""
    count = len(arrays)
    if count < 2:
        raise ValueError("Expecting at least two arrays.")
    arrays = list(arrays)
    first, last = (np.ndim(x) if not isinstance(x, DeviceArray) else x.ndim for x in (arrays[0], arrays[-1]))
    for i, x in enumerate(arrays):
        nd = x.ndim if isinstance(x, DeviceArray) else np.ndim(x)
        if nd != 2 and not (nd == 1 and i in (0, count - 1)):
            raise LinAlgError(f"{nd}-dimensional array given (argument {i}). Array must be two-dimensional")
    on_host = not any(isinstance(x, DeviceArray) for x in arrays)
    if on_host and any(_numpy_only(x, integers=False) for x in arrays):
        return np.linalg.multi_dot(arrays, out=out)
    dtype = np.result_type(*(x.dtype if isinstance(x, DeviceArray) else np.asarray(x).dtype for x in arrays))
    if dtype not in blas.BLAS_DTYPES:
        raise TypeError(f"multi_dot: the arguments promote to {dtype}; MAGMA computes float32, float64, complex64 "
                        "and complex128")
    device = None if on_host else next(x for x in arrays if isinstance(x, DeviceArray)).device
    mats = [x if isinstance(x, DeviceArray) and x.dtype == dtype else
            x.astype(dtype) if isinstance(x, DeviceArray) else asarray(np.asarray(x, dtype, order="C"), device=device)
            for x in arrays]
    if first == 1:
        mats[0] = mats[0].reshape(1, -1)
    if last == 1:
        mats[-1] = mats[-1].reshape(-1, 1)
    for i in range(count - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise ValueError(f"shapes {mats[i].shape} and {mats[i + 1].shape} (arguments {i}, {i + 1}) not aligned")
    shape2d = (mats[0].shape[0], mats[-1].shape[1])
    shape = () if first == last == 1 else (shape2d[1],) if first == 1 else (shape2d[0],) if last == 1 else shape2d
    target = None if out is None else _out_2d(out, on_host, dtype, shape, shape2d)
    split = _chain_order([mats[0].shape[0], *(m.shape[1] for m in mats)])
    result = _chain_product(mats, split, 0, count - 1, None if on_host else target)  # the last gemm fills target
    if on_host:
        result = result.get()
        if target is not None:
            target[...] = result
            result = target
    if first == last == 1:
        return (result if on_host else result.get())[0, 0]
    if out is not None and len(shape) == 2:
        return out  # the array passed, as NumPy returns it
    result, first = result.reshape(shape), arrays[0]
    if type(result) is np.ndarray and isinstance(first, np.ndarray) and type(first) is not np.ndarray:
        result = first.__array_wrap__(result)  # the first array's subclass, as the outermost numpy.dot gives
    return result


def _out_2d(out, on_host: bool, dtype, shape: tuple, shape2d: tuple):
    """``out`` of :func:`multi_dot` checked and viewed as the 2-D product."""
    if on_host != isinstance(out, np.ndarray) or not isinstance(out, (np.ndarray, DeviceArray)):
        want = "a NumPy array" if on_host else "a DeviceArray"
        raise TypeError(f"multi_dot: out must be {want} for this result, got {type(out).__name__}")
    contiguous = out.flags.c_contiguous if on_host else out.is_c_contiguous
    if out.dtype != dtype or out.shape not in (shape, shape2d) or not contiguous:
        raise ValueError(f"output array is not acceptable: need a C-contiguous {dtype} array of shape {shape} or "
                         f"{shape2d}, got {out.dtype} {out.shape}")
    return out.reshape(shape2d)
