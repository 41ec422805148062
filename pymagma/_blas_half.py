"""float16 and bfloat16 gemms of :mod:`pymagma.blas`: cuBLAS GemmEx (or MAGMA's hgemmx) with float32 accumulation,
on the queue's cuBLAS handle, and the result dtype rules of ``out_dtype``."""

from __future__ import annotations

import ctypes
import numbers

import numpy as np

from . import _cublas
from ._blas_plans import BatchedGemm, GemmCall
from ._colmajor import N, magma
from .array import DeviceArray

HALF_NAMES = ("float16", "bfloat16")  #: gemm operand dtypes computed by cuBLAS GemmEx with float32 accumulation


def _result_dtype(routine: str, a, b, out, out_dtype) -> np.dtype:
    """The dtype of a gemm's result: ``out_dtype``, else ``out``'s, else the operands'; float32 or the half type for
    float16/bfloat16 operands, the operands' dtype otherwise (a TypeError naming what is allowed)."""
    if a.dtype != b.dtype:
        raise TypeError(f"{routine}: operands have different dtypes {a.dtype.name} and {b.dtype.name}; convert them "
                        "to one type first")
    wanted = np.dtype(out_dtype) if out_dtype is not None else (out.dtype if out is not None else a.dtype)
    allowed = (a.dtype, np.dtype("float32")) if a.dtype.name in HALF_NAMES else (a.dtype,)
    if wanted not in allowed:
        raise TypeError(f"{routine}: out_dtype {wanted.name} for {a.dtype.name} operands; expected one of "
                        f"{[d.name for d in allowed]} (a float32 result is for float16/bfloat16 operands)")
    if out is not None and out.dtype != wanted:
        raise TypeError(f"{routine}: out has dtype {out.dtype.name}, but out_dtype is {wanted.name}")
    return wanted


#: cuBLAS takes 32-bit int sizes and leading dimensions
_CUBLAS_INT_MAX = 2**31 - 1


def _gemm_ex_arguments(c: GemmCall, atype, out: DeviceArray, alpha, beta) -> tuple:
    """The head of a GemmEx call on ``out``'s queue: handle, flags, sizes, float32 alpha (by reference)."""
    for name, v in (("m", c.m), ("n", c.n), ("k", c.k), ("lda", c.A.ld), ("ldb", c.B.ld), ("ldc", c.C.ld)):
        if v > _CUBLAS_INT_MAX:
            raise ValueError(f"{name} = {v} exceeds cuBLAS's 32-bit int; split the product")
    for v in (alpha, beta):
        if not isinstance(v, numbers.Real) or isinstance(v, bool):
            raise TypeError(f"alpha/beta of a half gemm must be real numbers, got {v!r}")
    handle = magma().magma_queue_get_cublas_handle(out.queue.handle)
    scalars = ctypes.c_float(alpha), ctypes.c_float(beta)
    return handle, scalars, _cublas.data_type(atype), _cublas.data_type(out.dtype)


def _gemm_half(c: GemmCall, a, b, out, alpha, beta) -> DeviceArray:
    """2-D gemm ``c`` (checked) of float16/bfloat16 operands: cublasGemmEx, float32 compute, on the queue's cuBLAS
    handle."""
    first, second = (b.ptr, a.ptr) if c.swapped else (a.ptr, b.ptr)
    if a.dtype == np.float16 and out.dtype == np.float32 and magma().has("magma_hgemmx"):  # MAGMA's own
        magma().magma_hgemmx(c.transA, c.transB, c.m, c.n, c.k, ctypes.c_float(alpha), first, c.A.ld, second,
                             c.B.ld, ctypes.c_float(beta), out.ptr, c.C.ld, out.queue.handle)
        return out
    handle, (al, be), at, ct = _gemm_ex_arguments(c, a.dtype, out, alpha, beta)
    _cublas.call("cublasGemmEx", handle, c.transA - N, c.transB - N, c.m, c.n, c.k, ctypes.byref(al), first, at,
                 c.A.ld, second, at, c.B.ld, ctypes.byref(be), out.ptr, ct, c.C.ld,
                 _cublas.ComputeType.COMPUTE_32F, _cublas.GEMM_DEFAULT)
    return out


def _gemm_batched_half(plan: BatchedGemm, atype, out, alpha, beta, method: str) -> DeviceArray:
    """Batched gemm of float16/bfloat16 operands: one cublasGemmStridedBatchedEx, or one GemmEx per matrix."""
    c, count = plan.call, len(plan.c_ptrs)
    if count > _CUBLAS_INT_MAX:
        raise ValueError(f"batch count {count} exceeds cuBLAS's 32-bit int; split the batch")
    if method == "strided" and plan.strides is None:
        raise ValueError("the batch strides are not uniform; use method='pointers'")
    handle, (al, be), at, ct = _gemm_ex_arguments(c, atype, out, alpha, beta)
    head = (handle, c.transA - N, c.transB - N, c.m, c.n, c.k, ctypes.byref(al))
    tail = (_cublas.ComputeType.COMPUTE_32F, _cublas.GEMM_DEFAULT)
    if method != "pointers" and plan.strides is not None:
        sa, sb, sc = plan.strides
        _cublas.call("cublasGemmStridedBatchedEx", *head, c.A.ptr, at, c.A.ld, sa, c.B.ptr, at, c.B.ld, sb,
                     ctypes.byref(be), c.C.ptr, ct, c.C.ld, sc, count, *tail)
        return out
    for pa, pb, pc in zip(plan.a_ptrs, plan.b_ptrs, plan.c_ptrs):
        _cublas.call("cublasGemmEx", *head, pa, at, c.A.ld, pb, at, c.B.ld, ctypes.byref(be), pc, ct, c.C.ld, *tail)
    return out
