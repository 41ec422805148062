"""A framework's matmul op on :mod:`pymagma.blas`'s gemm plans (:func:`planned_matmul`, the device backend's
``matmul``): a planned call runs in the op's one Python frame."""

from __future__ import annotations

from . import _native, runtime
from . import array as _array
from . import blas as _blas
from ._checks import Plans
from .array import DeviceArray, _empty


def _plain(x) -> bool:
    """Whether the 2-D ``x`` is C-contiguous or the transposed view of a C-contiguous array."""
    return x.is_c_contiguous or x.T.is_c_contiguous


def planned_matmul(checked):
    """A framework's matmul op ``(a, b, transpose_a=False, transpose_b=False)``, ``op(a) @ op(b)``, whose calls on
    2-D DeviceArrays of one dtype, each C-contiguous or the transposed view of a C-contiguous array, are gemm's (alpha
    1, beta 0, a new output), planned by their layouts, dtypes and flags: a call planned before runs its plan in this
    one Python frame, the output's allocation and the gemm through :data:`pymagma._native.current`'s MAGMA at the
    call (its ``bind``, a C-level look-up; the queue's TF32 mode as ``blas.allow_tf32`` is now).  Any other call (not
    such operands, another device, several devices) is ``checked(a, b, transpose_a, transpose_b)``, which must compute
    such operands as :func:`pymagma.blas.gemm` does."""
    plans = Plans()  # (a's shape, strides, dtype, b's shape, strides, dtype, flags) -> _gemm_plan's tuple
    device_array, empty_, array_module, blas = DeviceArray, _empty, _array, _blas

    def matmul(a, b, transpose_a=False, transpose_b=False):
        if a.__class__ is device_array and b.__class__ is device_array:
            signature = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, transpose_a, transpose_b)
            try:
                plan = plans.get(signature)
            except TypeError:  # an unhashable flag: the checked path names what is wrong
                return checked(a, b, transpose_a, transpose_b)
            if plan is None:
                if a.ndim == 2 and b.ndim == 2 and a.dtype is b.dtype and _plain(a) and _plain(b):
                    return blas._gemm(a, b, None, alpha=1.0, beta=0.0, trans_a=bool(transpose_a),
                                      trans_b=bool(transpose_b), out_dtype=None, key=signature, plans=plans)
            elif a.device == b.device:
                libraries = _native.current
                if 1 == libraries.__dict__.get("device_count") and \
                        runtime.device_count is array_module._device_count:  # (one device: none to make current)
                    # _run_gemm, inline: the op's one Python frame between the framework and MAGMA
                    (shape, dtype, routine, flag_a, flag_b, m, n, k, ld_first, ld_second, ld_out, swapped, one, zero,
                     tf32) = plan
                    device = a.device
                    out = empty_(shape, dtype, device)
                    queue = libraries.default_queues.get(device) or out.queue
                    if tf32 and bool(blas.allow_tf32) != queue.tf32:
                        blas._set_tf32(queue, bool(blas.allow_tf32))
                    x, y = (b.ptr, a.ptr) if swapped else (a.ptr, b.ptr)
                    (libraries.__dict__.get("magma_initialized") or blas.magma()).bind(routine)(
                        flag_a, flag_b, m, n, k, one, x, ld_first, y, ld_second, zero, out.ptr, ld_out, queue.handle)
                    return out
        return checked(a, b, transpose_a, transpose_b)

    matmul.__doc__, matmul.__wrapped__, matmul.plans = checked.__doc__, checked, plans
    return matmul
