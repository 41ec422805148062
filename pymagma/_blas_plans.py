"""The pure plans of :mod:`pymagma.blas`: each matrix routine's column-major call (flags, sizes, pointers, leading
dimensions) computed from its row-major operands' layouts, no device needed (tested on the CPU by interpreting the
call with NumPy). ``pymagma.blas`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _magma
from ._colmajor import LEFT, LOWER, RIGHT, UPPER, N, Stored, T, stored


def _stored_or_raise(x, what: str) -> tuple[Stored, bool]:
    s = stored(x)
    if s is None:
        raise ValueError(f"{what} has strides {x.strides} that BLAS cannot address; pass a contiguous array "
                         "(or a transposed view of one)")
    return s


@dataclass(frozen=True)
class GemmCall:
    """``C = alpha op(A) op(B) + beta C`` in column-major terms."""

    transA: int
    transB: int
    m: int
    n: int
    k: int
    A: Stored
    B: Stored
    C: Stored
    swapped: bool = False  # True when the call computes C^T = B^T A^T (B's matrix comes first)


def plan_gemm(a, b, c) -> GemmCall:
    """The column-major gemm that computes row-major ``c = a @ b`` (2-D operands)."""
    (m, k), (_, n) = a.shape, b.shape
    sa, at = _stored_or_raise(a, "A")
    sb, bt = _stored_or_raise(b, "B")
    sc, ct = _stored_or_raise(c, "C")
    if not ct:  # C stored as itself: C = op(SA) op(SB)
        return GemmCall(T if at else N, T if bt else N, m, n, k, sa, sb, sc)
    # C stored transposed: C^T = B^T A^T, with B^T = SB when B is stored transposed
    return GemmCall(N if bt else T, N if at else T, n, m, k, sb, sa, sc, swapped=True)


@dataclass(frozen=True)
class GemvCall:
    trans: int
    m: int
    n: int
    A: Stored
    x: int
    incx: int
    y: int
    incy: int


def _inc(v, what: str) -> int:
    if v.shape[0] <= 1:
        return 1
    step = v.strides[0] // v.dtype.itemsize
    if step <= 0 or v.strides[0] % v.dtype.itemsize:
        raise ValueError(f"{what} needs a positive element stride, got {v.strides[0]} bytes")
    return step


def plan_gemv(a, x, y) -> GemvCall:
    """The column-major gemv for row-major ``y = a @ x``."""
    sa, at = _stored_or_raise(a, "A")
    return GemvCall(T if at else N, sa.rows, sa.cols, sa, x.ptr, _inc(x, "x"), y.ptr, _inc(y, "y"))


@dataclass(frozen=True)
class TrsmCall:
    side: int
    uplo: int
    trans: int
    diag: int
    m: int
    n: int
    A: Stored
    B: Stored


def plan_trsm(a, b, left: bool, lower: bool, trans_a: bool, unit: bool) -> TrsmCall:
    """Column-major trsm solving row-major ``op(a) X = B`` (left) or ``X op(a) = B`` (right) in place of ``b``."""
    sa, at = _stored_or_raise(a, "A")
    sb, bt = _stored_or_raise(b, "B")
    side = LEFT if left != bt else RIGHT
    uplo = LOWER if lower != at else UPPER
    trans = T if (trans_a != at) != bt else N
    return TrsmCall(side, uplo, trans, _magma.MagmaUnit if unit else _magma.MagmaNonUnit, sb.rows, sb.cols, sa, sb)


@dataclass(frozen=True)
class SyrkCall:
    uplo: int
    trans: int
    n: int
    k: int
    A: Stored
    C: Stored


def plan_syrk(a, c, lower: bool, trans: bool) -> SyrkCall:
    """Column-major syrk for row-major ``c = a @ a.T`` (``trans`` False) or ``a.T @ a``; only ``lower``/upper set."""
    sa, at = _stored_or_raise(a, "A")
    sc, ct = _stored_or_raise(c, "C")
    op = T if at != trans else N  # op(SA) op(SA)^T must equal op(a) op(a)^T
    k = sa.cols if op == N else sa.rows
    return SyrkCall(LOWER if lower != ct else UPPER, op, c.shape[0], k, sa, sc)


@dataclass(frozen=True)
class BatchedGemm:
    """One gemm shape over a batch: per-matrix pointers, and the common element strides when they are uniform."""

    call: GemmCall
    a_ptrs: tuple[int, ...]
    b_ptrs: tuple[int, ...]
    c_ptrs: tuple[int, ...]
    strides: tuple[int, int, int] | None


def _batch_offsets(shape, strides) -> list[int]:
    return [sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)]


def _uniform_stride(offsets: list[int]) -> int | None:
    if len(offsets) <= 1:
        return 0
    step = offsets[1] - offsets[0]
    return step if all(o == offsets[0] + i * step for i, o in enumerate(offsets)) else None


def plan_gemm_batched(a, b, c) -> BatchedGemm:
    """Batched row-major ``c[i] = a[i] @ b[i]`` over broadcast leading dimensions (``c`` has the full batch)."""
    batch = c.shape[:-2]
    first = [x[(0,) * (x.ndim - 2)] if x.ndim > 2 else x for x in (a, b, c)]
    call = plan_gemm(*first)
    offsets = []
    for x in (a, b, c):
        lead = x.ndim - 2
        bshape = (1,) * (len(batch) - lead) + tuple(x.shape[:lead])
        bstrides = (0,) * (len(batch) - lead) + tuple(x.strides[:lead])
        bstrides = tuple(0 if n == 1 else s for n, s in zip(bshape, bstrides))
        offsets.append(_batch_offsets(batch, bstrides))
    if call.swapped:  # the column-major call takes B's matrices first, then A's
        offsets[0], offsets[1] = offsets[1], offsets[0]
    items = [x.dtype.itemsize for x in (b, a, c) if call.swapped] or [x.dtype.itemsize for x in (a, b, c)]
    uniform = [_uniform_stride(o) for o in offsets]
    strides = None
    if all(u is not None and u % item == 0 for u, item in zip(uniform, items)):
        strides = tuple(u // item for u, item in zip(uniform, items))
    ptrs = [tuple(base + o for o in offs) for base, offs in zip((call.A.ptr, call.B.ptr, call.C.ptr), offsets)]
    return BatchedGemm(call, *ptrs, strides)


class _Layout:
    """Shape, strides and dtype of an operand at pointer 0: what a cached plan depends on (``blas.gemm``'s plans)."""

    __slots__ = ("shape", "strides", "dtype", "ptr")

    def __init__(self, shape, strides, dtype):
        self.shape, self.strides, self.dtype, self.ptr = shape, strides, dtype, 0
