"""Device matrix products (pymagma.blas: gemm on the row-major identity, transposes as flags, stacks by
gemm_batched) and the bias of dense and convolution layers, with its activation in one launch (the epilogue)."""

from __future__ import annotations

from pymagma import blas as _blas
from pymagma import kernels as _k
from pymagma._blas_matmul import planned_matmul
from pymagma.kernels.elementwise import planned_bias_add as _planned_bias_add
from pymagma.kernels.reductions import planned_channel_sum

from . import kernels as _dk
from ._common import (
    _same_dtype,
)
from .reductions import _channel_sum


def _blas_operand(a):
    """``a`` when BLAS can address its matrices (contiguous or a transposed view of contiguous), else a copy."""
    if a.is_c_contiguous or (a.ndim >= 2 and a.mT.is_c_contiguous):
        return a
    return _k.copy(a)


def _matmul(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)``: gemm for 2-D operands, gemm_batched for stacks; transposes are views BLAS takes as flags."""
    if a.dtype is not b.dtype:
        _same_dtype("matmul", a, b)
    if not a.is_c_contiguous:  # (contiguous operands, the common case, need no call)
        a = _blas_operand(a)
    if not b.is_c_contiguous:
        b = _blas_operand(b)
    if a.ndim == 2 and b.ndim == 2:
        return _blas.gemm(a, b, trans_a=bool(transpose_a), trans_b=bool(transpose_b))
    a = a.mT if transpose_a else a
    b = b.mT if transpose_b else b
    if a.ndim < 2 or b.ndim < 2:
        return _blas.matmul(a, b)
    return _blas.gemm_batched(a, b)


#: the op: 2-D operands of one dtype stored as themselves or transposed run a planned gemm in one frame
#: (pymagma._blas_matmul.planned_matmul, which computes them as _matmul does); any other call is _matmul's
matmul = planned_matmul(_matmul)


def _bias_add(x, b):
    if x.dtype is not b.dtype:
        _same_dtype("bias_add", x, b)
    return _k.bias_add(x, b)


def _bias_grad(dy):  # (a function of its own: the op set names its argument dy)
    return _channel_sum(dy)


_bias_add.__name__, _bias_grad.__name__ = "bias_add", "bias_grad"
#: the ops: a call planned before launches in its one frame (pymagma's planned_bias_add, planned_channel_sum); any
#: other call is the checked one above (the op set's "does not promote" error included)
bias_add = _planned_bias_add(_bias_add)
bias_grad = planned_channel_sum(_bias_grad)


#: ``(act(x + b), x + b or None)`` in one launch (kernels/epilogue.cu), x + b kept, in x's memory, only where the
#: gradient reads it; and ``(dx, db)``, the activation's gradient and the bias gradient in one launch: the launchers
#: themselves, whose planned calls launch in their one frame
bias_activation = _dk.bias_activation
bias_activation_backward = _dk.bias_activation_backward
