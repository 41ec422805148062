"""Raw cuBLAS binding: the few functions pymagma calls itself, on the cuBLAS handle of a MAGMA queue.

MAGMA has no bfloat16 gemm, and PyTorch's MAGMA no half gemm at all; cuBLAS's ``cublasGemmEx`` and
``cublasGemmStridedBatchedEx`` with half operands and ``CUBLAS_COMPUTE_32F`` are what MAGMA itself calls for half
precision.  pymagma calls them on the handle ``magma_queue_get_cublas_handle`` returns, so they run on the queue's
stream, in order with MAGMA's work.  Prototypes and enum values as cuBLAS 13's ``cublas_api.h`` and CUDA's
``library_types.h`` declare them.  Nothing here knows about arrays: callers pass device pointers as ints.
"""

from __future__ import annotations

import enum
from ctypes import POINTER, c_int, c_longlong, c_void_p

import numpy as np

from . import _native
from ._ffi import NativeLibrary
from ._libs import NVIDIA_REMEDIES, load_nvidia
from .dtypes import is_bfloat16
from .errors import CublasError


class Status(enum.IntEnum):
    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 3
    INVALID_VALUE = 7
    ARCH_MISMATCH = 8
    MAPPING_ERROR = 11
    EXECUTION_FAILED = 13
    INTERNAL_ERROR = 14
    NOT_SUPPORTED = 15
    LICENSE_ERROR = 16


class Operation(enum.IntEnum):
    N = 0
    T = 1
    C = 2


class DataType(enum.IntEnum):
    """cudaDataType (``library_types.h``): the operand types pymagma passes."""

    R_32F = 0
    R_16F = 2
    R_16BF = 14


class ComputeType(enum.IntEnum):
    COMPUTE_32F = 68
    COMPUTE_32F_FAST_TF32 = 77


class Math(enum.IntEnum):
    """cublasMath_t: the handle's math mode (a flag, DISALLOW_REDUCED_PRECISION_REDUCTION = 16, may be or-ed in)."""

    DEFAULT = 0
    TENSOR_OP = 1
    PEDANTIC = 2
    TF32_TENSOR_OP = 3


GEMM_DEFAULT = -1  #: cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT
MATH_MODE_MASK = 0xF  #: the mode proper; the bits above it are flags

_st, _h, _p, _i, _ll = c_int, c_void_p, c_void_p, c_int, c_longlong
PROTOTYPES = {
    "cublasSetMathMode": (_st, (_h, _i)),
    "cublasGetMathMode": (_st, (_h, POINTER(c_int))),
    # handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo
    "cublasGemmEx": (_st, (_h, _i, _i, _i, _i, _i, _p, _p, _i, _i, _p, _i, _i, _p, _p, _i, _i, _i, _i)),
    # ... lda, strideA, ..., ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo
    "cublasGemmStridedBatchedEx": (_st, (_h, _i, _i, _i, _i, _i, _p, _p, _i, _i, _ll, _p, _i, _i, _ll, _p, _p, _i,
                                         _i, _ll, _i, _i, _i)),
}

lib = NativeLibrary("cuBLAS", lambda: load_nvidia("cublas"), PROTOTYPES,
                    remedy=f"cuBLAS 13 is required: {NVIDIA_REMEDIES['cublas']}")  #: the real libcublas
_native.register("cublas", lambda: lib, lambda: tuple(PROTOTYPES))


def library():
    """The cuBLAS in use (the simulator's when it is on)."""
    return _native.current.cublas


def status_name(status: int) -> str:
    try:
        return f"CUBLAS_STATUS_{Status(int(status)).name}"
    except ValueError:
        return f"CUBLAS_STATUS({int(status)})"


def check(status: int, call: str) -> None:
    """Raise :class:`CublasError` unless ``status`` is success."""
    if status != 0:
        raise CublasError(status, status_name(status), call)


def call(name: str, *args) -> None:
    """Call a status-returning cuBLAS function and check its result."""
    check(library().bind(name)(*args), name)


def data_type(dtype) -> DataType:
    """The cudaDataType of a NumPy dtype among float32, float16 and bfloat16."""
    if is_bfloat16(dtype):
        return DataType.R_16BF
    name = np.dtype(dtype).name
    if name == "float16":
        return DataType.R_16F
    if name == "float32":
        return DataType.R_32F
    raise TypeError(f"cuBLAS GemmEx in pymagma takes float16, bfloat16 or float32, got {name}")
