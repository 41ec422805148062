"""The standard's products: ``matmul``, ``tensordot``, ``vecdot``, ``matrix_transpose`` (top level and in
``linalg``).  Floating operands run MAGMA's gemm (:func:`pymagma.blas.matmul`, batched over broadcast leading
dimensions); integer operands, which BLAS has no routine for, are multiplied exactly by the elementwise kernels
(one multiply and one add per term of the inner dimension: they wrap on overflow as NumPy's do)."""

from __future__ import annotations

import operator

import numpy as np

from .. import array as _array
from .. import blas
from . import _dtypes, _elementwise, _manipulation


def numeric(x, what: str):
    """``x`` as a DeviceArray of a numeric dtype (bool is a TypeError, as the standard's products take numbers)."""
    x = _elementwise._require(x, what)
    if x.dtype.kind not in "iufc":
        raise TypeError(f"{what} takes numeric arrays (integers, floating, complex), not {x.dtype}")
    return x


def promoted(x1, x2, what: str):
    """Two numeric DeviceArrays on one device, converted to their promoted dtype (the cast kernel where needed)."""
    x1, x2 = numeric(x1, what), numeric(x2, what)
    if x1.device != x2.device:
        raise ValueError(f"{what}: arrays on different devices ({x1.device} and {x2.device})")
    dtype = _dtypes.promote(x1.dtype, x2.dtype)
    return _elementwise._as(x1, dtype), _elementwise._as(x2, dtype)


def _batch(a, b, what: str) -> tuple:
    try:
        return tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ValueError(f"{what}: the stacks {a.shape[:-2]} and {b.shape[:-2]} do not broadcast") from None


def _integer_matmul(a, b, batch: tuple):
    """``a @ b`` of 2-D-or-more integer arrays: sum over j of a[..., :, j] b[..., j, :], elementwise (exact)."""
    k = a.shape[-1]
    shape = (*batch, a.shape[-2], b.shape[-1])
    if k == 0:
        return _array.zeros(shape, a.dtype, device=a.device)
    multiply, add = _elementwise.FUNCTIONS["multiply"], _elementwise.FUNCTIONS["add"]
    acc = None
    for j in range(k):
        term = multiply(a[..., :, j:j + 1], b[..., j:j + 1, :])
        acc = term if acc is None else add(acc, term)
    return acc


def matmul(x1, x2, /):
    """``x1 @ x2`` with the standard's rules: 1-D operands are promoted to matrices and the added axis removed,
    leading dimensions broadcast; dtypes promote.  Floats: MAGMA's gemm (gemm_batched for stacks)."""
    x1, x2 = promoted(x1, x2, "matmul")
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension (0-d arrays are not matrices)")
    a = x1._view(0, (1, x1.shape[0]), (0, x1.strides[0])) if x1.ndim == 1 else x1
    b = x2._view(0, (x2.shape[0], 1), (x2.strides[0], 0)) if x2.ndim == 1 else x2
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {x1.shape} and {x2.shape} are not aligned ({a.shape[-1]} != "
                         f"{b.shape[-2]} in the contracted dimension)")
    batch = _batch(a, b, "matmul")
    shape = (*batch, a.shape[-2], b.shape[-1])
    if x1.dtype.kind not in "fc":
        out = _integer_matmul(a, b, batch)
    elif 0 in shape or a.shape[-1] == 0:  # nothing to multiply, or an empty sum: zeros (no gemm call)
        out = _array.zeros(shape, x1.dtype, device=x1.device)
    else:
        out = blas.matmul(x1, x2)
    final = (*batch, *a.shape[-2:-1][x1.ndim == 1:], *b.shape[-1:][x2.ndim == 1:])
    return out if out.shape == final else out.reshape(final)


def matrix_transpose(x, /):
    """The last two axes of ``x`` swapped: a view (no copy)."""
    x = _elementwise._require(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got shape {x.shape}")
    return x.mT


def move_last(x, axes: list):
    """A view of ``x`` with ``axes`` moved, in that order, to the end."""
    return _manipulation.permute_dims(x, [*(i for i in range(x.ndim) if i not in axes), *axes])


_axis = _manipulation._axis


def tensordot(x1, x2, /, *, axes=2):
    """The contraction of ``x1`` and ``x2`` over ``axes``: an int N (the last N axes of ``x1`` with the first N of
    ``x2``) or a pair of sequences of axes; the contracted axes must have equal sizes (no broadcasting).  The
    operands are permuted (views) and reshaped into one matrix product (:func:`matmul`)."""
    x1, x2 = promoted(x1, x2, "tensordot")
    if isinstance(axes, tuple | list) and len(axes) == 2 and not isinstance(axes[0], int):
        a1 = [_axis(i, x1.ndim, "tensordot") for i in axes[0]]
        a2 = [_axis(i, x2.ndim, "tensordot") for i in axes[1]]
        if len(a1) != len(a2):
            raise ValueError(f"tensordot: axes {axes} must name as many axes of x1 as of x2")
    else:
        try:
            n = operator.index(axes)
        except TypeError:
            raise TypeError(f"tensordot: axes must be an int or a pair of sequences of ints, got {axes!r}") from None
        if n < 0 or n > min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot: axes={n} must be in [0, {min(x1.ndim, x2.ndim)}] for shapes {x1.shape} "
                             f"and {x2.shape}")
        a1, a2 = list(range(x1.ndim - n, x1.ndim)), list(range(n))
    if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
        raise ValueError(f"tensordot: repeated axes in {axes}")
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(f"tensordot: contracted axes {i} of x1 and {j} of x2 have sizes {x1.shape[i]} and "
                             f"{x2.shape[j]} (they must be equal)")
    left = move_last(x1, a1)
    right = x2.transpose(*a2, *[i for i in range(x2.ndim) if i not in a2])
    kept1, kept2 = left.shape[:left.ndim - len(a1)], right.shape[len(a2):]
    k = int(np.prod([x1.shape[i] for i in a1], dtype=np.int64))
    from ._reductions import reshape

    a = reshape(left, (int(np.prod(kept1, dtype=np.int64)), k))
    b = reshape(right, (k, int(np.prod(kept2, dtype=np.int64))))
    return matmul(a, b).reshape(*kept1, *kept2)


def vecdot(x1, x2, /, *, axis=-1):
    """The dot product of the vectors of ``x1`` and ``x2`` along ``axis`` (counted from the end of each; the other
    axes broadcast): one batched gemm of (1, n) by (n, 1) matrices (floats) on views of the operands; complex
    ``x1`` is conjugated first, as the standard defines it."""
    x1, x2 = promoted(x1, x2, "vecdot")
    if x1.dtype.kind == "c":
        x1 = _elementwise.FUNCTIONS["conj"](x1)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("vecdot: operands must have at least one dimension")
    n = min(x1.ndim, x2.ndim)
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"vecdot: axis must be an integer, got {axis!r}") from None
    if not -n <= axis < 0:
        raise ValueError(f"vecdot: axis {axis} must be in [-{n}, -1] for shapes {x1.shape} and {x2.shape}")
    a, b = move_last(x1, [x1.ndim + axis]), move_last(x2, [x2.ndim + axis])
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"vecdot: the vectors along axis {axis} have sizes {a.shape[-1]} and {b.shape[-1]}")
    try:
        lead = tuple(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    except ValueError:
        raise ValueError(f"vecdot: shapes {x1.shape} and {x2.shape} do not broadcast") from None
    k = a.shape[-1]
    rows = a._view(0, (*a.shape[:-1], 1, k), (*a.strides[:-1], 0, a.strides[-1]))
    cols = b._view(0, (*b.shape[:-1], k, 1), (*b.strides[:-1], b.strides[-1], 0))
    spread = _manipulation.broadcast_to
    return matmul(spread(rows, (*lead, 1, k)), spread(cols, (*lead, k, 1))).reshape(lead)
