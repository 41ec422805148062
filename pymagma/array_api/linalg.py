"""The standard's ``linalg`` extension (2024.12) as ``pymagma.array_api.linalg``: DeviceArrays in, DeviceArrays out.

The factorizations run :mod:`pymagma.linalg` (MAGMA's LAPACK, or the hybrid drivers of :mod:`pymagma.hybrid` where
the provider lacks a routine): ``solve``/``inv``/``det``/``slogdet`` on getrf, ``cholesky`` on potrf, ``qr`` on
geqrf + orgqr, ``eigh``/``eigvalsh`` on syevd, ``svd``/``svdvals``/``pinv``/``matrix_rank`` on gesdd;
``matmul``/``tensordot``/``vecdot`` on gemm.  Stacks of matrices loop or use MAGMA's batched routines as
:mod:`pymagma.linalg` does.  The factorizations take float32 and float64 (their dtype stays); integers are a TypeError
naming the function (cast with ``astype``).  Results that MAGMA's interface leaves on the host (the pivots' product of
``det``, eigenvalues, singular values, ranks) are copied to the array's device once.
"""

from __future__ import annotations

import numpy as np

from .. import linalg as _magma
from . import _elementwise
from ._manipulation import broadcast_to
from ._norms import diagonal, matrix_norm, trace, vector_norm
from ._products import matmul, matrix_transpose, move_last, promoted, tensordot, vecdot

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]

EighResult, QRResult, SlogdetResult, SVDResult = _magma.EighResult, _magma.QRResult, _magma.SlogdetResult, \
    _magma.SVDResult


def _floating(x, what: str, matrices: bool = True):
    """``x`` as a floating (real or complex) DeviceArray (of at least 2 dimensions when ``matrices``)."""
    x = _elementwise._require(x, what)
    if x.dtype.kind not in "fc":
        raise TypeError(f"linalg.{what} takes floating arrays (float32, float64, complex64, complex128), not "
                        f"{x.dtype}: MAGMA's LAPACK has no integer routines (cast with astype)")
    if matrices and x.ndim < 2:
        raise ValueError(f"linalg.{what} needs a matrix or a stack of matrices, got shape {x.shape}")
    return x


def _square(x, what: str):
    x = _floating(x, what)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.{what} needs square matrices, got shape {x.shape}")
    return x


def _on_device(value, like, dtype):
    """A host result (NumPy scalar or array) as a DeviceArray of ``dtype`` on ``like``'s device."""
    from . import _creation

    return _creation.asarray(np.array(value, dtype=dtype, order="C"), device=like.device)  # (0-d stays 0-d)


def _host_tolerance(rtol, what: str):
    """``rtol`` (None, a Python number or an array broadcast against the stack) as a host value."""
    if rtol is None or isinstance(rtol, int | float):
        return rtol
    rtol = _elementwise._require(rtol, f"linalg.{what}: rtol")
    return np.from_dlpack(rtol, device="cpu")


def cholesky(x, /, *, upper: bool = False):
    """The Cholesky factor: lower ``L`` with ``x = L L^T``, or ``U = L^T`` (``upper=True``); potrf (potrf_batched for
    stacks).  A matrix that is not positive definite raises LinAlgError."""
    return _magma.cholesky(_square(x, "cholesky"), upper=upper)


def det(x, /):
    """The determinants of square matrices (getrf, the product of the pivots on the host)."""
    x = _square(x, "det")
    return _on_device(_magma.det(x), x, x.dtype)


def slogdet(x, /):
    """``SlogdetResult(sign, logabsdet)`` of square matrices (getrf); a singular matrix gives sign 0 and -inf."""
    x = _square(x, "slogdet")
    res = _magma.slogdet(x)
    real = np.finfo(x.dtype).dtype  # logabsdet is real for complex matrices too
    return SlogdetResult(_on_device(res.sign, x, x.dtype), _on_device(res.logabsdet, x, real))


def inv(x, /):
    """The inverses of square matrices (getrf, then the triangular solves against the identity)."""
    return _magma.inv(_square(x, "inv"))


def solve(x1, x2, /):
    """The solution of ``x1 @ x = x2`` for square ``x1``: ``x2`` is a vector only when it is 1-D (shape ``(M,)``),
    else ``(..., M, K)``; the stacks broadcast.  getrf, then laswp and two trsm (batched for stacks)."""
    x1, x2 = promoted(_square(x1, "solve"), _floating(x2, "solve", matrices=False), "solve")
    n = x1.shape[-1]
    if x2.ndim == 1:
        if x2.shape[0] != n:
            raise ValueError(f"linalg.solve: x2 has shape {x2.shape}, incompatible with x1 {x1.shape}")
        return solve(x1, x2._view(0, (n, 1), (x2.strides[0], 0))).reshape(x1.shape[:-1])
    if x2.shape[-2] != n:
        raise ValueError(f"linalg.solve: x2 has shape {x2.shape}, incompatible with x1 {x1.shape}")
    try:
        batch = tuple(np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    except ValueError:
        raise ValueError(f"linalg.solve: the stacks of {x1.shape} and {x2.shape} do not broadcast") from None
    return _magma.solve(broadcast_to(x1, (*batch, n, n)), broadcast_to(x2, (*batch, *x2.shape[-2:])))


def eigh(x, /):
    """``EighResult(eigenvalues, eigenvectors)`` of symmetric matrices (the lower triangle is read), eigenvalues
    ascending: syevd (or the hybrid tridiagonal reduction)."""
    return _magma.eigh(_square(x, "eigh"))


def eigvalsh(x, /):
    """The eigenvalues of symmetric matrices, ascending (syevd)."""
    return _magma.eigvalsh(_square(x, "eigvalsh"))


def qr(x, /, *, mode: str = "reduced"):
    """``QRResult(Q, R)``: ``mode`` "reduced" (Q is (..., M, K), K = min(M, N)) or "complete" (Q is (..., M, M));
    geqrf + orgqr (or the hybrid blocked QR)."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return _magma.qr(_floating(x, "qr"), mode)


def svd(x, /, *, full_matrices: bool = True):
    """``SVDResult(U, S, Vh)`` with ``x = U diag(S) Vh``, singular values descending (gesdd, or the hybrid
    bidiagonal reduction)."""
    return _magma.svd(_floating(x, "svd"), full_matrices=bool(full_matrices))


def svdvals(x, /):
    """The singular values, descending (gesdd without vectors)."""
    return _magma.svd(_floating(x, "svdvals"), compute_uv=False)


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse from the SVD; singular values at most ``rtol`` times the largest are zeroed
    (default ``max(M, N) * eps``)."""
    return _magma.pinv(_floating(x, "pinv"), rtol=_host_tolerance(rtol, "pinv"))


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above ``rtol`` times the largest (default ``max(M, N) * eps``), an int64
    array of the stack's shape."""
    x = _floating(x, "matrix_rank")
    rank = _magma.matrix_rank(x, rtol=_host_tolerance(rtol, "matrix_rank"))
    return _on_device(rank, x, np.int64)


def matrix_power(x, n, /):
    """``x`` to the integer power ``n`` by repeated squaring with gemm; ``n < 0`` inverts first (getrf).  Integer
    matrices take ``n >= 0``: exact products (the integer matmul), wrapping as NumPy's."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"linalg.matrix_power: n must be an integer, got {n!r}")
    x, n = _elementwise._require(x, "linalg.matrix_power"), int(n)
    if x.dtype.kind not in "iu" or n < 0:
        return _magma.matrix_power(_square(x, "matrix_power"), n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.matrix_power needs square matrices, got shape {x.shape}")
    if n == 0:
        return _on_device(np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape), x, x.dtype)
    z = result = None
    for bit in bin(n)[:1:-1]:  # bits from the least significant: z runs through x**(2**k)
        z = x if z is None else matmul(z, z)
        if bit == "1":
            result = z if result is None else matmul(result, z)
    return _elementwise.FUNCTIONS["positive"](result) if result is x else result


def outer(x1, x2, /):
    """The outer product of two vectors, ``(M,)`` and ``(N,)`` -> ``(M, N)``: one broadcast elementwise multiply
    (each element one IEEE product, as the standard defines it; no gemm)."""
    x1, x2 = promoted(x1, x2, "outer")
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer takes two 1-D arrays, got shapes {x1.shape} and {x2.shape}")
    column, row = x1._view(0, (x1.shape[0], 1), (x1.strides[0], 0)), x2._view(0, (1, x2.shape[0]), (0, x2.strides[0]))
    return _elementwise.FUNCTIONS["multiply"](column, row)


def cross(x1, x2, /, *, axis: int = -1):
    """The cross product of 3-element vectors along ``axis`` (counted from the end of each; the other axes
    broadcast), by the elementwise kernels."""
    x1, x2 = promoted(x1, x2, "cross")
    n = min(x1.ndim, x2.ndim)
    if isinstance(axis, bool) or not isinstance(axis, int) or not -n <= axis < 0:
        raise ValueError(f"linalg.cross: axis must be an integer in [-{n}, -1] for shapes {x1.shape} and "
                         f"{x2.shape}, got {axis!r}")
    a, b = move_last(x1, [x1.ndim + axis]), move_last(x2, [x2.ndim + axis])
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(f"linalg.cross: the vectors along axis {axis} must have 3 elements, got shapes {x1.shape} "
                         f"and {x2.shape}")
    try:
        lead = tuple(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]))
    except ValueError:
        raise ValueError(f"linalg.cross: shapes {x1.shape} and {x2.shape} do not broadcast") from None
    from .. import array as _array

    mul, sub = _elementwise.FUNCTIONS["multiply"], _elementwise.FUNCTIONS["subtract"]
    out = _array.empty((*lead, 3), a.dtype, device=a.device)
    for i, (j, k) in enumerate(((1, 2), (2, 0), (0, 1))):
        part = sub(mul(a[..., j], b[..., k]), mul(a[..., k], b[..., j]))
        _array._write_into(out[..., i], part)
    position = len(lead) + 1 + axis  # the vectors' axis back where ``axis`` counts it in the result
    order = [*range(position), len(lead), *range(position, len(lead))]
    return out.transpose(*order)
