"""cuBLAS on the simulator: the functions of :data:`pymagma._cublas.PROTOTYPES`, on the cuBLAS handles of simulated
MAGMA queues (``magma_queue_get_cublas_handle``), modelled as cuBLAS documents them.

GemmEx (and its strided-batched form): operands read as stored (column-major, ``lda``/``ldb``/``ldc``, transposes),
widened to float32 (exact for float16 and bfloat16), float32 operands rounded to TF32 when the handle's math mode is
``CUBLAS_TF32_TENSOR_OP_MATH``, products accumulated in float32, ``alpha``/``beta`` (host floats) applied in float32
and the result rounded once to ``Ctype``; ``beta == 0`` does not read C.  cuBLAS's own checks come first: a negative
size, a bad ``trans`` or a short leading dimension is ``CUBLAS_STATUS_INVALID_VALUE`` and an unsupported type
combination ``CUBLAS_STATUS_NOT_SUPPORTED``, nothing computed (recorded in ``rejected``).  Work runs in the order of
the queue's stream, as MAGMA's does.
"""

from __future__ import annotations

import collections
import ctypes

import numpy as np

from .. import _cublas as B
from ..dtypes import bfloat16
from ..errors import NotSimulatedError
from ._table import TableLibrary
from .cudnn.numerics import tf32
from .magma import address, view

LIBRARY_NAME = "pymagma's simulated cuBLAS"
#: (Atype, Ctype) pairs GemmEx supports with CUBLAS_COMPUTE_32F (A and B of one type; cuBLAS's GemmEx table)
SUPPORTED = frozenset({(B.DataType.R_16F, B.DataType.R_16F), (B.DataType.R_16F, B.DataType.R_32F),
                       (B.DataType.R_16BF, B.DataType.R_16BF), (B.DataType.R_16BF, B.DataType.R_32F),
                       (B.DataType.R_32F, B.DataType.R_32F)})


def _dtype(t: int) -> np.dtype:
    return bfloat16() if t == B.DataType.R_16BF else np.dtype({B.DataType.R_16F: "float16", B.DataType.R_32F:
                                                                "float32"}[t])


def _float(ptr) -> float:
    return float(ctypes.c_float.from_address(address(ptr)).value)


def gemm_invalid(transa, transb, m, n, k, lda, ldb, ldc, alpha, beta) -> str | None:
    """Why cuBLAS answers CUBLAS_STATUS_INVALID_VALUE to a gemm (None: it does not), as its documentation lists."""
    if m < 0 or n < 0 or k < 0:
        return f"m, n, k = {m}, {n}, {k}: a negative size"
    if transa not in (0, 1, 2) or transb not in (0, 1, 2):
        return f"transa, transb = {transa}, {transb}: not CUBLAS_OP_N/T/C"
    if lda < max(1, m if transa == B.Operation.N else k):
        return f"lda = {lda} < max(1, {m if transa == B.Operation.N else k})"
    if ldb < max(1, k if transb == B.Operation.N else n):
        return f"ldb = {ldb} < max(1, {k if transb == B.Operation.N else n})"
    if ldc < max(1, m):
        return f"ldc = {ldc} < max(1, {m})"
    if not address(alpha) or not address(beta):
        return "alpha or beta is NULL"
    return None


class SimulatedCublas(TableLibrary):
    """The simulated cuBLAS library object: ``bind``/``has``/``missing`` and attribute calls like
    :class:`~pymagma._ffi.NativeLibrary`.  ``magma`` is the simulated MAGMA whose queues own the handles; ``streams``
    the simulated runtime.  ``math_modes`` holds each handle's math mode; ``calls`` the latest calls' names;
    ``rejected`` ``(call, status, why)`` for each call cuBLAS refused."""

    PROTOTYPES, LABEL = B.PROTOTYPES, "cuBLAS"

    def __init__(self, magma, streams=None):
        self.magma, self.streams = magma, streams
        self.math_modes: dict[int, int] = magma.cublas_math_modes  # MAGMA's sgemm reads them too
        self.calls: collections.deque[str] = collections.deque(maxlen=100_000)
        self.rejected: list[tuple[str, int, str]] = []
        self._models = {"cublasSetMathMode": self._set_math_mode, "cublasGetMathMode": self._get_math_mode,
                        "cublasGemmEx": self._gemm_ex, "cublasGemmStridedBatchedEx": self._gemm_strided_ex}

    path = LIBRARY_NAME

    # ------------------------------------------------------------------------------------------------- handles
    def _stream(self, handle) -> int | None:
        """The stream of the queue that owns ``handle`` (None: not a handle of a live queue)."""
        queue = self.magma.queue_of_cublas_handle(address(handle))
        return None if queue is None else self.magma.queues[queue][1]

    def _set_math_mode(self, handle, mode) -> int:
        if self._stream(handle) is None:
            return B.Status.NOT_INITIALIZED
        if int(mode) & B.MATH_MODE_MASK not in tuple(B.Math):
            return self._reject("cublasSetMathMode", B.Status.INVALID_VALUE, f"mode = {mode}")
        self.math_modes[address(handle)] = int(mode)
        return B.Status.SUCCESS

    def _get_math_mode(self, handle, out) -> int:
        if self._stream(handle) is None:
            return B.Status.NOT_INITIALIZED
        ctypes.c_int.from_address(address(out)).value = self.math_modes.get(address(handle), B.Math.DEFAULT)
        return B.Status.SUCCESS

    def _reject(self, name: str, status: int, why: str) -> int:
        self.rejected.append((name, int(status), why))
        return status

    # ------------------------------------------------------------------------------------------------- gemm
    def _gemm_ex(self, handle, transa, transb, m, n, k, alpha, A, atype, lda, B_, btype, ldb, beta, C, ctype, ldc,
                 compute, algo) -> int:
        return self._gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, atype, lda, 0, B_, btype, ldb,
                          0, beta, C, ctype, ldc, 0, 1, compute)

    def _gemm_strided_ex(self, handle, transa, transb, m, n, k, alpha, A, atype, lda, sa, B_, btype, ldb, sb, beta,
                         C, ctype, ldc, sc, count, compute, algo) -> int:
        if count < 0:
            return self._reject("cublasGemmStridedBatchedEx", B.Status.INVALID_VALUE, f"batchCount = {count}")
        return self._gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, atype, lda, sa,
                          B_, btype, ldb, sb, beta, C, ctype, ldc, sc, count, compute)

    def _gemm(self, name, handle, ta, tb, m, n, k, alpha, A, atype, lda, sa, B_, btype, ldb, sb, beta, C, ctype,
              ldc, sc, count, compute) -> int:
        stream = self._stream(handle)
        if stream is None:
            return B.Status.NOT_INITIALIZED
        why = gemm_invalid(ta, tb, m, n, k, lda, ldb, ldc, alpha, beta)
        if why is not None:
            return self._reject(name, B.Status.INVALID_VALUE, why)
        if compute != B.ComputeType.COMPUTE_32F:
            raise NotSimulatedError(f"{name}: computeType {compute} is not simulated (only CUBLAS_COMPUTE_32F)")
        if atype != btype or (atype, ctype) not in SUPPORTED:
            return self._reject(name, B.Status.NOT_SUPPORTED, f"Atype, Btype, Ctype = {atype}, {btype}, {ctype}")
        if m == 0 or n == 0 or count == 0:
            return B.Status.SUCCESS
        a_, b_ = _float(alpha), _float(beta)  # host scalars: read at the call, as cuBLAS's host pointer mode does
        rounds = atype == B.DataType.R_32F and \
            self.math_modes.get(address(handle), 0) & B.MATH_MODE_MASK == B.Math.TF32_TENSOR_OP
        shape_a = (m, k) if ta == B.Operation.N else (k, m)
        shape_b = (k, n) if tb == B.Operation.N else (n, k)
        pa, pb, pc = address(A), address(B_), address(C)
        at, ct = _dtype(atype), _dtype(ctype)

        def run():
            if getattr(self.streams, "null", False):
                return
            with np.errstate(all="ignore"):  # a GPU computes inf/NaN silently (an overflow is no warning there)
                compute_all()

        def compute_all():
            for i in range(count):
                Am = view(pa + i * sa * at.itemsize, shape_a, (1, lda), at).astype(np.float32)
                Bm = view(pb + i * sb * at.itemsize, shape_b, (1, ldb), at).astype(np.float32)
                Cm = view(pc + i * sc * ct.itemsize, (m, n), (1, ldc), ct)
                if rounds:
                    Am, Bm = tf32(Am), tf32(Bm)
                product = (Am if ta == B.Operation.N else Am.T) @ (Bm if tb == B.Operation.N else Bm.T)
                result = np.float32(a_) * product
                if b_:
                    result = result + np.float32(b_) * Cm.astype(np.float32)
                Cm[...] = result.astype(ct)

        streams = self.streams
        if stream and streams is not None and (streams.capturing(stream) or streams.position(stream) is not None):
            streams.submit(stream, run)
        else:
            run()
        return B.Status.SUCCESS
