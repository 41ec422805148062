"""BLAS on DeviceArrays with NumPy's row-major semantics, mapped onto MAGMA's column-major BLAS without copies.

A C-ordered ``r x c`` matrix with row stride ``ld`` is, read column-major, the ``c x r`` matrix ``X^T`` with leading
dimension ``ld``; a transposed view is ``X`` itself (:func:`stored`, from the column-major face
:mod:`pymagma._colmajor` that linalg and the hybrid drivers call MAGMA through).  Every matrix routine (gemm,
gemm_batched, gemv, trsm, syrk) first computes its column-major call with a pure *plan* function (flags, sizes,
pointers, leading dimensions; tested on the CPU by interpreting the call with NumPy) and then executes it with the
precision's MAGMA routine (``s``/``d``/``c``/``z`` by dtype); the vector routines pass their element strides as
increments.

Every function takes ``DeviceArray`` operands only (host data is a ``TypeError`` that names ``pymagma.asarray``:
no hidden upload) of one dtype among float32, float64, complex64, complex128 (gemm, gemm_batched and matmul also
float16 and bfloat16: cuBLAS GemmEx with float32 accumulation, ``out_dtype=``), and returns a ``DeviceArray`` (``dot``
and ``nrm2``: a NumPy scalar).  Every size, leading dimension, increment and batch count is checked to be a
non-negative ``magma_int_t`` before MAGMA is called.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _colmajor, _cublas, _magma, _native, runtime
from . import array as _array
from ._blas_half import HALF_NAMES, _gemm_batched_half, _gemm_half, _result_dtype
from ._blas_plans import (  # noqa: F401 - the plans, pymagma.blas's own names
    BatchedGemm,
    GemmCall,
    GemvCall,
    SyrkCall,
    TrsmCall,
    _batch_offsets,
    _inc,
    _Layout,
    _stored_or_raise,
    _uniform_stride,
    plan_gemm,
    plan_gemm_batched,
    plan_gemv,
    plan_syrk,
    plan_trsm,
)
from ._checks import Plans
from ._checks import native_sizes as check_native_sizes
from ._colmajor import LEFT, LOWER, RIGHT, UPPER, N, Stored, T, magma, pointer_array, stored  # noqa: F401
from .array import DeviceArray, _empty, empty, on_arrays_device, require_device_array

BLAS_DTYPES = tuple(np.dtype(d) for d in ("float32", "float64", "complex64", "complex128"))
#: Let float32 :func:`gemm` (and 2-D :func:`matmul`) run on TF32 tensor cores (operands rounded to 10 mantissa
#: bits, float32 accumulation), as ``torch.backends.cuda.matmul.allow_tf32``; off by default, as PyTorch's.  The
#: next float32 gemm on a queue sets its cuBLAS handle's math mode (CUBLAS_TF32_TENSOR_OP_MATH or
#: CUBLAS_DEFAULT_MATH), which MAGMA's sgemm runs with.
allow_tf32 = False


# ----------------------------------------------------------------------------------------------------- execution
def precision(*arrays) -> str:
    """The MAGMA precision letter shared by ``arrays`` (a clear error on mixed or unsupported dtypes)."""
    dtypes = {x.dtype for x in arrays}
    if len(dtypes) != 1:
        raise TypeError(f"operands have different dtypes {sorted(str(d) for d in dtypes)}; convert them to one of "
                        "float32, float64, complex64, complex128 first")
    return _magma.precision_of(dtypes.pop())


def scalar(value, p: str):
    """A Python number as the ctypes scalar MAGMA takes for precision ``p``."""
    if not isinstance(value, numbers.Number) or isinstance(value, bool):
        raise TypeError(f"alpha/beta must be a number, got {value!r} ({type(value).__name__})")
    if p in "sd" and isinstance(value, complex) and value.imag:
        raise TypeError(f"a complex scalar {value} cannot be used with a real dtype")
    return _colmajor.scalar(value, p)


def _check_gemm(routine: str, c: GemmCall) -> GemmCall:
    check_native_sizes(routine, m=c.m, n=c.n, k=c.k, lda=c.A.ld, ldb=c.B.ld, ldc=c.C.ld)
    return c


def _same_device(*arrays) -> int:
    devices = {x.device for x in arrays}
    if len(devices) != 1:
        raise ValueError(f"operands live on different devices {sorted(devices)}")
    return devices.pop()


def _device_arrays(routine: str, **operands) -> list[DeviceArray]:
    """The operands, each checked to be a DeviceArray (a TypeError names the routine, the argument and the fix)."""
    return [x if isinstance(x, DeviceArray) else require_device_array(x, f"{routine}: {name}")
            for name, x in operands.items()]


def _queue(x: DeviceArray):
    return x.queue.handle


_PRECISION = {np.dtype(d): p for p, (_, _, _, d) in _magma.PRECISIONS.items()}
#: (a's shape, strides, dtype, b's shape, strides, dtype, trans_a, trans_b, alpha, its type, beta, its type, out's
#: shape, strides and dtype or None) -> the plan of a gemm (:func:`_gemm_plan`): what :func:`gemm` decided for those
#: layouts and options, every check made once (a bool alpha, an unhashable flag or a half dtype is never planned)
_GEMM_PLANS = Plans()


def _gemm_plan(a_shape, a_strides, b_shape, b_strides, c_shape, c_strides, dtype: np.dtype, p: str, alpha,
               beta) -> tuple:
    """A gemm's plan for operands of ``dtype`` (precision ``p``) at pointer 0: (output shape, dtype, MAGMA routine,
    transA, transB, m, n, k, lda, ldb, ldc, whether B's matrix comes first, ctypes alpha, ctypes beta, whether the
    queue's TF32 mode applies); its sizes checked (a ValueError for a layout BLAS cannot address)."""
    c = _check_gemm("gemm", plan_gemm(_Layout(a_shape, a_strides, dtype), _Layout(b_shape, b_strides, dtype),
                                      _Layout(c_shape, c_strides, dtype)))
    return (c_shape, dtype, _GEMM_NAMES[p], c.transA, c.transB, c.m, c.n, c.k, c.A.ld, c.B.ld, c.C.ld, c.swapped,
            scalar(alpha, p), scalar(beta, p), p == "s")


def _run_gemm(plan: tuple, a, b, out, libraries) -> DeviceArray:
    """Execute a gemm ``plan`` on ``a``, ``b`` (its operands' layouts) into ``out`` on ``out``'s queue."""
    _, _, routine, trans_a, trans_b, m, n, k, lda, ldb, ldc, swapped, alpha_p, beta_p, tf32 = plan
    queue = libraries.default_queues.get(out.device) or out.queue  # (DeviceArray.queue's fast path, inline)
    if tf32 and queue.tf32 != bool(allow_tf32):
        _set_tf32(queue, bool(allow_tf32))
    first, second = (b.ptr, a.ptr) if swapped else (a.ptr, b.ptr)
    # the MAGMA library in use after magma_init (magma(), inline once it is made)
    lib = libraries.__dict__.get("magma_initialized") or magma()
    lib.bind(routine)(trans_a, trans_b, m, n, k, alpha_p, first, lda, second, ldb, beta_p, out.ptr, ldc,
                      queue.handle)
    return out


# ----------------------------------------------------------------------------------------------------- public API
def gemm(a, b, out=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None) -> DeviceArray:
    """``out = alpha * op(a) @ op(b) + beta * out`` for 2-D DeviceArrays (``op`` = transpose when asked: a flag).

    float16 and bfloat16 operands (both of one type) are multiplied by cuBLAS GemmEx on the queue's cuBLAS handle
    with float32 accumulation; ``out_dtype`` (or ``out``'s dtype) is float32 or the operands' type (the default),
    the float32 result rounded once to it."""
    key = None
    if out_dtype is None and a.__class__ is DeviceArray and b.__class__ is DeviceArray and (
            out is None or out.__class__ is DeviceArray):
        key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, trans_a, trans_b, alpha, alpha.__class__,
               beta, beta.__class__, None if out is None else (out.shape, out.strides, out.dtype))
        try:  # operands (and out) whose layouts and options were planned before: the plan's call
            plan = _GEMM_PLANS.get(key)
        except TypeError:  # an unhashable option: the checked path names what is wrong
            plan = key = None
        libraries = _native.current
        if plan is not None and a.device == b.device and (out is None or out.device == a.device) and \
                libraries.__dict__.get("device_count") == 1 and runtime.device_count is _array._device_count:
            # (one device: on_arrays_device has nothing to do); _run_gemm, inline: gemm's one Python frame
            (shape, dtype, routine, flag_a, flag_b, m, n, k, ld_first, ld_second, ld_out, swapped, alpha_p, beta_p,
             tf32) = plan
            out = _empty(shape, dtype, a.device) if out is None else out
            queue = libraries.default_queues.get(a.device) or out.queue
            if tf32 and queue.tf32 != bool(allow_tf32):
                _set_tf32(queue, bool(allow_tf32))
            (libraries.__dict__.get("magma_initialized") or magma()).bind(routine)(
                flag_a, flag_b, m, n, k, alpha_p, *((b.ptr, ld_first, a.ptr) if swapped else (a.ptr, ld_first, b.ptr)),
                ld_second, beta_p, out.ptr, ld_out, queue.handle)
            return out
    return _gemm(a, b, out, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, out_dtype=out_dtype, key=key)


@on_arrays_device
def _gemm(a, b, out, *, alpha, beta, trans_a, trans_b, out_dtype, key, plans=_GEMM_PLANS) -> DeviceArray:
    """:func:`gemm`, every argument checked; its plan kept in ``plans`` under ``key`` (hashable) when given."""
    if a.__class__ is not DeviceArray or b.__class__ is not DeviceArray:
        a, b = _device_arrays("gemm", a=a, b=b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm needs 2-D operands, got {a.ndim}-D and {b.ndim}-D (use matmul or gemm_batched)")
    half = (a.itemsize == 2 or b.itemsize == 2) and (a.dtype.name in HALF_NAMES or b.dtype.name in HALF_NAMES)
    if half or out_dtype is not None:  # op(a), op(b) as views; else (the hot path) as shapes and strides only
        a, b, trans_a, trans_b = (a.T if trans_a else a), (b.T if trans_b else b), False, False
    a_shape, a_strides = (a.shape[::-1], a.strides[::-1]) if trans_a else (a.shape, a.strides)
    b_shape, b_strides = (b.shape[::-1], b.strides[::-1]) if trans_b else (b.shape, b.strides)
    if a_shape[1] != b_shape[0]:
        raise ValueError(f"gemm: inner dimensions differ: {a_shape} @ {b_shape}")
    out_dtype = _result_dtype("gemm", a, b, out, out_dtype) if half or out_dtype is not None else None
    if out is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an existing out array")
        out = _empty((a_shape[0], b_shape[1]), out_dtype or a.dtype, a.device)  # sizes of checked operands
    elif _device_arrays("gemm", out=out)[0].shape != (a_shape[0], b_shape[1]):
        raise ValueError(f"gemm: out has shape {out.shape}, expected {(a_shape[0], b_shape[1])}")
    if half and out.size and a_shape[1]:
        try:
            c = _check_gemm("gemm", plan_gemm(a, b, out))
        except ValueError:  # a layout BLAS cannot address: work on contiguous copies (CuPy's way)
            return _gemm_on_copies(gemm, a, b, out, alpha=alpha, beta=beta)
        return _gemm_half(c, a, b, out, alpha, beta)
    p = _PRECISION.get(a.dtype) if a.dtype == b.dtype == out.dtype else None
    if p is None and not half:
        p = precision(a, b, out)
    if not a.device == b.device == out.device:
        _same_device(a, b, out)
    if out.size == 0:
        return out
    if a_shape[1] == 0:  # an empty sum: out = beta * out
        _scale_any(out, beta)
        return out
    try:
        plan = _gemm_plan(a_shape, a_strides, b_shape, b_strides, out.shape, out.strides, a.dtype, p, alpha, beta)
    except ValueError:  # a layout BLAS cannot address: work on contiguous copies (CuPy's way), off the hot path
        return _gemm_on_copies(gemm, a.T if trans_a else a, b.T if trans_b else b, out, alpha=alpha, beta=beta)
    if key is not None:
        plans.keep(key, plan)
    return _run_gemm(plan, a, b, out, _native.current)


_GEMM_NAMES = {p: f"magma_{p}gemm" for p in _magma.PRECISIONS}


def _set_tf32(queue, on: bool) -> None:
    """Set the math mode of ``queue``'s cuBLAS handle: TF32 tensor-op math or cuBLAS's default."""
    handle = magma().magma_queue_get_cublas_handle(queue.handle)
    _cublas.call("cublasSetMathMode", handle, _cublas.Math.TF32_TENSOR_OP if on else _cublas.Math.DEFAULT)
    queue.tf32 = on


def _gemm_on_copies(routine, a, b, out, **options):
    """``routine(a, b, out)`` where ``a`` or ``b`` has strides BLAS cannot address (``a[::2]``, ``b[:, ::2]``): those
    operands in contiguous work copies, as CuPy does. ``out`` is written in place, so it must be addressable."""

    def addressable(x):
        return stored(_Layout(x.shape[-2:], x.strides[-2:], x.dtype)) is not None

    if not addressable(out):
        raise ValueError(f"out has strides {out.strides} that BLAS cannot write; pass a contiguous out (or a "
                         "transposed view of one)")
    return routine(a if addressable(a) else a.copy(), b if addressable(b) else b.copy(), out, **options)


def _zero(x: DeviceArray) -> None:
    from . import runtime

    runtime.memset(x.ptr, 0, x.nbytes)


def _scale_any(x: DeviceArray, beta) -> None:
    """``x *= beta`` for any layout (a zero beta clears x, NaNs included, as BLAS does)."""
    if x.is_c_contiguous and (beta == 0 or x.dtype.name not in HALF_NAMES):
        _zero(x) if beta == 0 else scal(beta, x)
    else:
        x.set(np.zeros(x.shape, x.dtype) if beta == 0 else beta * x.get())


#: Largest element offset one strided-batched call may compute (MAGMA forms i * stride in 32-bit magma_int_t).
MAX_BATCH_OFFSET = 2**31 - 1


@on_arrays_device
def gemm_batched(a, b, out=None, *, alpha=1.0, beta=0.0, method: str = "auto", out_dtype=None) -> DeviceArray:
    """Batched ``out[i] = alpha * a[i] @ b[i] + beta * out[i]`` over (broadcast) leading dimensions.

    ``method``: ``"strided"`` (magmablas ?gemm_batched_strided, needs uniform batch strides), ``"pointers"``
    (magmablas ?gemm_batched with device arrays of pointers) or ``"auto"`` (strided when possible).  float16 and
    bfloat16 operands: cuBLAS GemmStridedBatchedEx (``"strided"``) or one GemmEx per matrix (``"pointers"``), with
    float32 accumulation and ``out_dtype`` as in :func:`gemm`.
    """
    a, b = _device_arrays("gemm_batched", a=a, b=b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("gemm_batched needs operands with at least 2 dimensions")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"gemm_batched: inner dimensions differ: {a.shape} @ {b.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = (*batch, a.shape[-2], b.shape[-1])
    half = a.dtype.name in HALF_NAMES or b.dtype.name in HALF_NAMES
    if half or out_dtype is not None:
        out_dtype = _result_dtype("gemm_batched", a, b, out, out_dtype)
    if out is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an existing out array")
        out = empty(shape, out_dtype or a.dtype, device=a.device)
    elif _device_arrays("gemm_batched", out=out)[0].shape != shape:
        raise ValueError(f"gemm_batched: out has shape {out.shape}, expected {shape}")
    p = "h" if half else precision(a, b, out)
    _same_device(a, b, out)
    if out.size == 0:
        return out
    if a.shape[-1] == 0:
        _scale_any(out, beta)
        return out
    if method not in ("auto", "strided", "pointers"):
        raise ValueError(f"method must be 'auto', 'strided' or 'pointers', got {method!r}")
    try:
        plan = plan_gemm_batched(a, b, out)
    except ValueError:  # a layout BLAS cannot address: work on contiguous copies (CuPy's way)
        return _gemm_on_copies(gemm_batched, a, b, out, alpha=alpha, beta=beta, method=method)
    c, count, q = _check_gemm("gemm_batched", plan.call), len(plan.c_ptrs), _queue(out)
    check_native_sizes("gemm_batched", batch_count=count)
    if half:
        return _gemm_batched_half(plan, a.dtype, out, alpha, beta, method)
    if method == "strided" and plan.strides is None:
        raise ValueError("the batch strides are not uniform; use method='pointers'")
    if method != "pointers" and plan.strides is not None:
        sa, sb, sc = plan.strides
        check_native_sizes("gemm_batched", stride_a=sa, stride_b=sb, stride_c=sc)
        fn, size = getattr(magma(), f"magmablas_{p}gemm_batched_strided"), out.itemsize
        # MAGMA offsets each matrix by i * stride in magma_int_t: keep every offset of one call below its range.
        step = max(1, MAX_BATCH_OFFSET // max(sa, sb, sc, 1))
        for first in range(0, count, step):
            fn(c.transA, c.transB, c.m, c.n, c.k, scalar(alpha, p), c.A.ptr + first * sa * size, c.A.ld, sa,
               c.B.ptr + first * sb * size, c.B.ld, sb, scalar(beta, p), c.C.ptr + first * sc * size, c.C.ld, sc,
               min(step, count - first), q)
        return out
    arrays = [pointer_array(ptrs, out.device) for ptrs in (plan.a_ptrs, plan.b_ptrs, plan.c_ptrs)]
    getattr(magma(), f"magmablas_{p}gemm_batched")(
        c.transA, c.transB, c.m, c.n, c.k, scalar(alpha, p), arrays[0].ptr, c.A.ld, arrays[1].ptr, c.B.ld,
        scalar(beta, p), arrays[2].ptr, c.C.ld, count, q)
    out.queue.synchronize()  # the pointer arrays must outlive the kernel
    return out


def matmul(a, b, out=None, *, out_dtype=None) -> DeviceArray:
    """``a @ b`` with NumPy's rules for DeviceArrays ``a``, ``b`` (1-D operands promoted and squeezed, leading
    dimensions broadcast); returns a new DeviceArray, or ``out`` (a DeviceArray of the result's shape) filled.
    float16/bfloat16 operands accumulate in float32; ``out_dtype`` as in :func:`gemm`."""
    a, b = _device_arrays("matmul", a=a, b=b)
    if out is not None:
        _device_arrays("matmul", out=out)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must not be scalars (0-d)")
    squeeze = []
    if a.ndim == 1:
        a = a._view(0, (1, a.shape[0]), (a.shape[0] * a.itemsize, a.strides[0]))
        squeeze.append(-2)
    if b.ndim == 1:
        b = b._view(0, (b.shape[0], 1), (b.strides[0], b.itemsize))
        squeeze.append(-1)
    if out_dtype is None and out is not None and a.dtype.name in HALF_NAMES:
        out_dtype = out.dtype
    result = gemm(a, b, out_dtype=out_dtype) if a.ndim == 2 and b.ndim == 2 else \
        gemm_batched(a, b, out_dtype=out_dtype)
    if squeeze:
        shape = list(result.shape)
        for axis in sorted(squeeze):
            shape.pop(axis if axis == -1 else len(shape) - 2)
        result = result.reshape(tuple(shape))
    if out is not None:
        from .array import copy_into

        copy_into(out, result)
        return out
    return result


@on_arrays_device
def gemv(a, x, y=None, *, alpha=1.0, beta=0.0) -> DeviceArray:
    """``y = alpha * a @ x + beta * y`` for a 2-D ``a`` and 1-D ``x``."""
    a, x = _device_arrays("gemv", a=a, x=x)
    if a.ndim != 2 or x.ndim != 1 or a.shape[1] != x.shape[0]:
        raise ValueError(f"gemv needs a (m, n) matrix and an (n,) vector, got {a.shape} and {x.shape}")
    if y is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an existing y")
        y = empty((a.shape[0],), a.dtype, device=a.device)
    elif _device_arrays("gemv", y=y)[0].shape != (a.shape[0],):
        raise ValueError(f"gemv: y has shape {y.shape}, expected {(a.shape[0],)}")
    p = precision(a, x, y)
    _same_device(a, x, y)
    if y.size == 0:
        return y
    if x.size == 0:  # a @ x is zero: y = beta * y, whatever y's layout
        _scale_any(y, beta)
        return y
    c = plan_gemv(a, x, y)
    check_native_sizes("gemv", m=c.m, n=c.n, lda=c.A.ld, incx=c.incx, incy=c.incy)
    getattr(magma(), f"magma_{p}gemv")(c.trans, c.m, c.n, scalar(alpha, p), c.A.ptr, c.A.ld, c.x, c.incx,
                                      scalar(beta, p), c.y, c.incy, _queue(y))
    return y


def _vector(x, what: str) -> DeviceArray:
    if x.ndim != 1:
        if not x.is_c_contiguous:
            raise ValueError(f"{what} must be 1-D or contiguous, got shape {x.shape} strides {x.strides}")
        x = x.reshape(-1)
    return x


def _vector_pair(x, y, what: str) -> tuple[DeviceArray, DeviceArray, str]:
    """Two same-size vectors on one device, and their MAGMA precision."""
    x, y = _device_arrays(what, x=x, y=y)
    x, y = _vector(x, "x"), _vector(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"{what}: sizes differ: {x.shape} vs {y.shape}")
    p = precision(x, y)
    _same_device(x, y)
    return x, y, p


@on_arrays_device
def axpy(alpha, x, y) -> DeviceArray:
    """``y += alpha * x`` in place (vectors, or contiguous arrays of the same size)."""
    x, y, p = _vector_pair(x, y, "axpy")
    if x.size:
        check_native_sizes("axpy", n=x.size, incx=_inc(x, "x"), incy=_inc(y, "y"))
        getattr(magma(), f"magma_{p}axpy")(x.size, scalar(alpha, p), x.ptr, _inc(x, "x"), y.ptr, _inc(y, "y"),
                                          _queue(y))
    return y


@on_arrays_device
def scal(alpha, x) -> DeviceArray:
    """``x *= alpha`` in place."""
    (x,) = _device_arrays("scal", x=x)
    v = _vector(x, "x")
    p = precision(v)
    if v.size:
        check_native_sizes("scal", n=v.size, incx=_inc(v, "x"))
        getattr(magma(), f"magma_{p}scal")(v.size, scalar(alpha, p), v.ptr, _inc(v, "x"), _queue(v))
    return x


@on_arrays_device
def dot(x, y, *, conjugate: bool = False):
    """``sum(x * y)`` (``conjugate``: ``sum(conj(x) * y)``, like ``numpy.vdot``) as a NumPy scalar."""
    x, y, p = _vector_pair(x, y, "dot")
    name = f"magma_{p}dot" if p in "sd" else f"magma_{p}dot{'c' if conjugate else 'u'}"
    check_native_sizes("dot", n=x.size, incx=_inc(x, "x"), incy=_inc(y, "y"))
    r = getattr(magma(), name)(x.size, x.ptr, _inc(x, "x"), y.ptr, _inc(y, "y"), _queue(y))
    return x.dtype.type(complex(r.real, r.imag) if p in "cz" else r)


def _real_reduction(x, what: str, names: dict):
    """One BLAS-1 reduction with a real result (nrm2, asum) of a vector, as a NumPy scalar of the real dtype."""
    (x,) = _device_arrays(what, x=x)
    v = _vector(x, "x")
    p = precision(v)
    check_native_sizes(what, n=v.size, incx=_inc(v, "x"))
    return np.dtype(_magma.PRECISIONS[p][1]).type(getattr(magma(), f"magma_{names[p]}")(v.size, v.ptr, _inc(v, "x"),
                                                                                       _queue(v)))


@on_arrays_device
def nrm2(x):
    """Euclidean norm of a vector (or of a contiguous array's elements)."""
    return _real_reduction(x, "nrm2", {"s": "snrm2", "d": "dnrm2", "c": "scnrm2", "z": "dznrm2"})


@on_arrays_device
def asum(x):
    """``sum(|x|)`` of a real vector (or contiguous array); for complex dtypes BLAS's ``sum(|Re x| + |Im x|)``."""
    return _real_reduction(x, "asum", {"s": "sasum", "d": "dasum", "c": "scasum", "z": "dzasum"})


@on_arrays_device
def trsm(a, b, *, side: str = "left", lower: bool = False, trans: bool = False, unit_diagonal: bool = False,
         alpha=1.0) -> DeviceArray:
    """Solve ``op(a) X = alpha b`` (``side='left'``) or ``X op(a) = alpha b`` for triangular ``a``; X overwrites b."""
    a, b = _device_arrays("trsm", a=a, b=b)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if a.ndim != 2 or a.shape[0] != a.shape[1] or b.ndim != 2:
        raise ValueError(f"trsm needs a square 2-D a and a 2-D b, got {a.shape} and {b.shape}")
    need = b.shape[0] if side == "left" else b.shape[1]
    if a.shape[0] != need:
        raise ValueError(f"trsm: a is {a.shape} but b is {b.shape} (side={side})")
    p = precision(a, b)
    _same_device(a, b)
    if b.size == 0:
        return b
    c = plan_trsm(a, b, side == "left", lower, trans, unit_diagonal)
    check_native_sizes("trsm", m=c.m, n=c.n, lda=c.A.ld, ldb=c.B.ld)
    getattr(magma(), f"magma_{p}trsm")(c.side, c.uplo, c.trans, c.diag, c.m, c.n, scalar(alpha, p), c.A.ptr, c.A.ld,
                                      c.B.ptr, c.B.ld, _queue(b))
    return b


@on_arrays_device
def syrk(a, out=None, *, lower: bool = True, trans: bool = False, alpha=1.0, beta=0.0) -> DeviceArray:
    """``out = alpha * a @ a.T + beta * out`` (``trans``: ``a.T @ a``); only the ``lower`` (or upper) triangle is
    written, as in BLAS."""
    (a,) = _device_arrays("syrk", a=a)
    if a.ndim != 2:
        raise ValueError(f"syrk needs a 2-D a, got shape {a.shape}")
    n = a.shape[1] if trans else a.shape[0]
    if out is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an existing out array")
        out = zeros_like_shape((n, n), a)
    elif _device_arrays("syrk", out=out)[0].shape != (n, n):
        raise ValueError(f"syrk: out has shape {out.shape}, expected {(n, n)}")
    p = precision(a, out)
    _same_device(a, out)
    if n == 0:
        return out
    c = plan_syrk(a, out, lower, trans)
    check_native_sizes("syrk", n=c.n, k=c.k, lda=c.A.ld, ldc=c.C.ld)
    getattr(magma(), f"magma_{p}syrk")(c.uplo, c.trans, c.n, c.k, scalar(alpha, p), c.A.ptr, c.A.ld,
                                      scalar(beta, p), c.C.ptr, c.C.ld, _queue(out))
    return out


def zeros_like_shape(shape, like: DeviceArray) -> DeviceArray:
    out = empty(shape, like.dtype, device=like.device)
    _zero(out)
    return out


_array.UPPER["gemm"] = matmul  # ``a @ b`` of two arrays of one BLAS or half dtype (DeviceArray.__matmul__)
