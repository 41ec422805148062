"""``numpy.linalg``-shaped linear algebra on MAGMA: NumPy in -> NumPy out, DeviceArray in -> DeviceArray out, stacks of
matrices over leading dimensions.

LAPACK routines work on column-major data, so each input matrix is transposed on the device once into a
column-major work copy (results come back as views with column-major strides, no second copy); the copies, leading
dimensions and BLAS calls on them are the column-major face :mod:`pymagma._colmajor`, shared with the hybrid
drivers.  Where the provider lacks a driver but has its parts (PyTorch's bundled MAGMA has getrf, laswp and trsm but
no getrs/gesv) the solve is composed exactly from them.  ``info < 0`` becomes ``ValueError`` naming MAGMA's
argument; ``info > 0`` becomes :class:`pymagma.LinAlgError` naming the failing pivot or minor.

Where the provider lacks a driver entirely, ``cholesky``, ``cho_solve``, ``qr``, ``lstsq``, ``eigh`` and ``svd`` run
the hybrid CPU+GPU drivers of :mod:`pymagma.hybrid` (panels and small dense solvers on the host, BLAS updates on the
device) and ``eig`` runs NumPy's LAPACK on the host.  ``method="native"|"hybrid"`` forces a path; :func:`paths` says
which one ``"auto"`` takes for each function on the current provider.  Results are NumPy 2's named tuples
(``EighResult``, ``SVDResult``, ...); NumPy results keep an input's ndarray subclass where numpy.linalg does, and
dtypes numpy.linalg refuses are its TypeError.  ``norm``, ``matrix_power`` and ``multi_dot`` are built on MAGMA's
BLAS (nrm2, asum, gemm) and on :func:`svd` / :func:`inv`.
"""

from __future__ import annotations

import ctypes
import functools
from collections import namedtuple

import numpy as np

from . import _checks, _colmajor, _magma, blas, hybrid
from ._colmajor import copy as colmajor_copy
from ._colmajor import ld as _ld
from ._colmajor import magma, pointer_array
from .array import DeviceArray, asarray, copy_into, empty, on_arrays_device
from .errors import LinAlgError, MagmaError

__all__ = ["solve", "lu_factor", "lu_solve", "inv", "det", "slogdet", "cholesky", "cho_solve", "qr", "lstsq",
           "eigh", "svd", "eig", "eigvalsh", "eigvals", "pinv", "matrix_rank", "cond", "norm", "matrix_power",
           "multi_dot", "paths", "LinAlgError",
           "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]

try:  # NumPy 2's own result types, so isinstance checks and field names match numpy.linalg exactly
    from numpy.linalg._linalg import EighResult, EigResult, QRResult, SlogdetResult, SVDResult
except ImportError:  # NumPy 1: the same field names
    EigResult = namedtuple("EigResult", "eigenvalues eigenvectors")
    EighResult = namedtuple("EighResult", "eigenvalues eigenvectors")
    QRResult = namedtuple("QRResult", "Q R")
    SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
    SVDResult = namedtuple("SVDResult", "U S Vh")

METHODS = ("auto", "native", "hybrid")
#: Per function: the MAGMA routines (``?`` = precision, ``{or}`` = or/un, ``{sy}`` = sy/he) its native path needs,
#: and what runs when they are missing ("hybrid": pymagma.hybrid on the device; "host": NumPy's LAPACK).
NATIVE_NEEDS = {
    "solve": (("magma_?getrf_gpu",), "native"), "lu_factor": (("magma_?getrf_gpu",), "native"),
    "cholesky": (("magma_?potrf_gpu",), "hybrid"), "cho_solve": (("magma_?potrs_gpu",), "hybrid"),
    "qr": (("magma_?geqrf2_gpu", "magma_?{or}gqr2"), "hybrid"), "lstsq(method='qr')": (("magma_?gels_gpu",), "hybrid"),
    "lstsq(method='svd')": (("magma_?gesdd",), "hybrid"), "eigh": (("magma_?{sy}evd_gpu",), "hybrid"),
    "svd": (("magma_?gesdd",), "hybrid"), "eig": (("magma_?geev",), "host"),
}
#: Functions that take the path of the one they are built on, and those built on MAGMA's BLAS alone (always native).
BUILT_ON = {"inv": "solve", "det": "lu_factor", "slogdet": "lu_factor", "eigvalsh": "eigh", "eigvals": "eig",
            "pinv": "svd", "matrix_rank": "svd", "cond": "svd", "norm(ord=2/-2/'nuc')": "svd"}
BLAS_ONLY = ("lu_solve", "matrix_power", "multi_dot")


# ----------------------------------------------------------------------------------------------------- input checks
def _unsupported(dtype, what: str) -> TypeError:
    """numpy.linalg's refusal of a dtype ("array type float16 is unsupported in linalg"), naming the argument."""
    return TypeError(f"array type {dtype.name} is unsupported in linalg ({what} has dtype {dtype}; MAGMA computes "
                     "float32, float64, complex64 and complex128)")


def _as_operand(a, what: str):
    """(array, on_host): NumPy/array-likes stay on the host side until moved; dtypes follow numpy.linalg (integers
    and bool become float64; float16, long double, object, strings, ... are a TypeError)."""
    if isinstance(a, DeviceArray):
        if a.dtype not in blas.BLAS_DTYPES:
            raise _unsupported(a.dtype, what)
        return a, False
    host = np.asarray(a)
    if not host.dtype.isnative:  # byte-swapped ('>f4' on little-endian): convert, as numpy.linalg does
        host = host.astype(host.dtype.newbyteorder("="))
    if host.dtype.kind in "biu":
        host = host.astype(np.float64)
    if host.dtype not in blas.BLAS_DTYPES:
        raise _unsupported(host.dtype, what)
    return host, True


#: The fields of NumPy's result tuples that numpy.linalg passes through ``wrap`` (the others stay ndarrays).
_WRAPPED_FIELDS = {QRResult: (0, 1), SVDResult: (0, 2), EighResult: (1,), EigResult: (1,)}


def _keeps_subclass(name: str, position: int, *, tuple_fields: tuple = (0,), whole: bool = True):
    """Decorator: NumPy's result wrapping (``_makearray``).  When argument ``name`` (at ``position``) is an ndarray
    subclass (``np.matrix``, ...), the NumPy arrays of the result go through its ``__array_wrap__`` as in
    numpy.linalg: an array result (if ``whole``), the fields of a NumPy result tuple that NumPy wraps
    (``_WRAPPED_FIELDS``) and the entries ``tuple_fields`` of a plain tuple.  DeviceArrays are never wrapped."""

    def decorate(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            res = fn(*args, **kwargs)
            src = args[position] if len(args) > position else kwargs.get(name)
            if not isinstance(src, np.ndarray) or type(src) is np.ndarray:
                return res

            def wrap(r):
                return src.__array_wrap__(r) if type(r) is np.ndarray else r

            if type(res) in _WRAPPED_FIELDS or type(res) is tuple:
                fields = _WRAPPED_FIELDS.get(type(res), tuple_fields)
                items = [wrap(r) if i in fields else r for i, r in enumerate(res)]
                return tuple(items) if type(res) is tuple else type(res)(*items)
            return wrap(res) if whole else res

        return run

    return decorate


def _square(a, what: str = "a") -> None:
    if a.ndim < 2:
        raise LinAlgError(f"{what} is {a.ndim}-dimensional; at least two dimensions are needed")
    if a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"last 2 dimensions of {what} must be square, got {a.shape[-2:]}")


def check_info(info: int, routine: str, numerical: str | None = None) -> None:
    """Turn MAGMA's ``info`` into an exception: <0 argument error (by MAGMA's name), >0 numerical failure."""
    if info == 0:
        return
    sig = _magma.SIGNATURES.get(routine)
    if info < 0 and sig is not None and -info <= len(sig.args):
        raise ValueError(f"{routine}: argument {-info} ({sig.arg_names[-info - 1]}) had an illegal value")
    if info < 0:
        raise MagmaError(info, _magma.strerror(info), routine)
    raise LinAlgError(f"{routine}: {numerical.format(info=info) if numerical else f'info = {info}'}")


# ----------------------------------------------------------------------------------------------------- device helpers
def _routine(family: str, p: str) -> str:
    return family.replace("?", p).replace("{or}", "un" if p in "cz" else "or").replace(
        "{sy}", "he" if p in "cz" else "sy")


def _native(method: str, dtype, *families: str) -> bool:
    """Whether to run the native MAGMA path: ``"auto"`` when the provider exports every routine, ``"native"``
    always (a missing routine raises MissingSymbolError naming it), ``"hybrid"`` never."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "hybrid":
        return False
    names = [_routine(f, _magma.precision_of(dtype)) for f in families]
    if method == "native":
        for name in names:
            magma().bind(name)  # raises MissingSymbolError with the provider's path
        return True
    return all(magma().has(name) for name in names)


def paths(dtype=np.float64) -> dict[str, str]:
    """Which path ``method="auto"`` takes per function on the current MAGMA provider for ``dtype``: "native"
    (MAGMA's driver, or MAGMA's BLAS alone), "hybrid" (:mod:`pymagma.hybrid`: host panels, device BLAS-3) or "host"
    (NumPy's LAPACK).  Functions built on another one (``inv`` on ``solve``, ``pinv`` on ``svd``, ...) take its
    path.  Only symbols are looked up: no device is needed."""
    p, lib = _magma.precision_of(np.dtype(dtype)), _magma.library()  # symbols only: no magma_init, no device
    out = {fn: "native" if all(lib.has(_routine(f, p)) for f in needs) else fallback
           for fn, (needs, fallback) in NATIVE_NEEDS.items()}
    out.update({fn: out[base] for fn, base in BUILT_ON.items()})
    return out | dict.fromkeys(BLAS_ONLY, "native")


def _sync(x: DeviceArray) -> None:
    """LAPACK drivers run on MAGMA's own queues: finish our queue's work first."""
    x.queue.synchronize()


def _host_int_array(n: int):
    return (_magma.MAGMA_INT * max(n, 1))()


def _getrf(w: DeviceArray) -> tuple[np.ndarray, int]:
    """LU of the column-major ``w`` in place (magma_?getrf_gpu); returns (1-based pivots, info)."""
    m, n = w.shape
    ipiv, info = _host_int_array(min(m, n)), _magma.MAGMA_INT(0)
    if m and n:
        _sync(w)
        p = blas.precision(w)
        getattr(magma(), f"magma_{p}getrf_gpu")(m, n, w.ptr, _ld(w), ipiv, ctypes.byref(info))
    return np.ctypeslib.as_array(ipiv)[: min(m, n)].astype(np.int32), int(info.value)


def _laswp_rows(b: DeviceArray, piv1: np.ndarray) -> None:
    """Apply LAPACK row interchanges (1-based ``piv1``, in order) to the rows of a C-contiguous 2-D ``b``."""
    n, k = b.shape
    if not n or not k:
        return
    ipiv = (_magma.MAGMA_INT * n)(*piv1.tolist())
    p = blas.precision(b)
    # magmablas_laswp works on a matrix stored row-wise: exactly a C-ordered b (ldda = its row length)
    getattr(magma(), f"magmablas_{p}laswp")(k, b.ptr, k, 1, n, ipiv, 1, b.queue.handle)


def _solve_lu_device(lu: DeviceArray, piv1: np.ndarray, b: DeviceArray) -> DeviceArray:
    """x = A^{-1} b from A's LU (column-major ``lu``, 1-based pivots): laswp + two trsm (no getrs needed)."""
    x = b.copy()
    _laswp_rows(x, piv1)
    blas.trsm(lu, x, side="left", lower=True, unit_diagonal=True)
    blas.trsm(lu, x, side="left", lower=False)
    return x


def _solve_lu_batched(lu: DeviceArray, piv: np.ndarray, b: DeviceArray, batch: tuple) -> DeviceArray:
    """Stacked ``lu_solve``: row interchanges per matrix (magmablas_?laswp), then the two triangular solves for
    the whole stack at once (magmablas_?trsm_batched)."""
    n, k = lu.shape[-1], b.shape[-1]
    x = empty((*batch, n, k), b.dtype, device=b.device)
    lus, xs = [], []
    for idx in np.ndindex(*batch):
        xi = x[idx]
        copy_into(xi, _matrix(b, idx, batch))
        _laswp_rows(xi, _matrix(piv, idx, batch, core=1) + 1)
        lus.append(_matrix(lu, idx, batch))
        xs.append(xi)
    p, q = blas.precision(lu), x.queue.handle
    a_array = pointer_array([m.ptr for m in lus], x.device)
    b_array = pointer_array([m.ptr for m in xs], x.device)
    _checks.native_sizes(f"magmablas_{p}trsm_batched", batch_count=len(xs))
    trsm = getattr(magma(), f"magmablas_{p}trsm_batched")
    for lower, unit in ((True, True), (False, False)):  # L y = P b, then U x = y
        c = blas.plan_trsm(lus[0], xs[0], True, lower, False, unit)
        trsm(c.side, c.uplo, c.trans, c.diag, c.m, c.n, blas.scalar(1, p), a_array.ptr, c.A.ld, b_array.ptr, c.B.ld,
             len(xs), q)
    x.queue.synchronize()  # the pointer arrays must outlive the kernels
    return x


def _matrix(x, idx: tuple, batch: tuple, core: int = 2):
    """The matrix (or, with ``core=1``, vector) of a stacked ``x`` at batch index ``idx``, broadcasting ``x``'s
    leading dimensions against ``batch``."""
    lead = x.ndim - core
    sub = tuple(0 if x.shape[i] == 1 else idx[len(batch) - lead + i] for i in range(lead))
    return x[sub] if sub else x


def _stack_map(fn, *arrays):
    """Apply ``fn`` to the matrices of stacked arrays (leading dimensions broadcast): (batch shape, results)."""
    batch = np.broadcast_shapes(*(x.shape[:-2] for x in arrays))
    return batch, [fn(*(_matrix(x, idx, batch) for x in arrays)) for idx in np.ndindex(*batch)]


def _stack_device(batch, mats: list[DeviceArray]) -> DeviceArray:
    """Stack equal-shaped DeviceArrays into one new array of shape batch + shape (column-major matrices stay
    column-major: the result is then a view with the last two axes swapped)."""
    if not batch:
        return mats[0]
    colmajor = mats[0].ndim == 2 and not mats[0].is_c_contiguous and mats[0].T.is_c_contiguous
    shape = mats[0].T.shape if colmajor else mats[0].shape
    out = empty((*batch, *shape), mats[0].dtype, device=mats[0].device)
    for i, idx in enumerate(np.ndindex(*batch)):
        copy_into(out[idx], mats[i].T if colmajor else mats[i])
    return out.mT if colmajor else out


def _empty_stack(batch) -> bool:
    """Whether a batch shape holds no matrix at all (then there is nothing to compute, as in NumPy)."""
    return 0 in tuple(batch)


def _empties(on_host: bool, device: int, *specs):
    """Results of an empty stack, one per ``(shape, dtype)``: NumPy arrays or DeviceArrays."""
    out = tuple(np.empty(shape, dtype) if on_host else empty(shape, dtype, device=device) for shape, dtype in specs)
    return out if len(out) > 1 else out[0]


def _real(dtype) -> np.dtype:
    return np.dtype(_magma.PRECISIONS[_magma.precision_of(dtype)][1])


def _to_device(x, on_host: bool) -> DeviceArray:
    return asarray(np.asarray(x, order="C")) if on_host else x


def _result(x: DeviceArray, on_host: bool):
    return x.get() if on_host else x


# ----------------------------------------------------------------------------------------------------- LU family
@on_arrays_device
def lu_factor(a, *, check_singular: bool = True):
    """LU with partial pivoting, ``P A = L U`` (like ``scipy.linalg.lu_factor``): returns ``(lu, piv)``, ``piv``
    0-based row interchanges (a NumPy int32 array, ``(..., min(m, n))``).  ``lu`` is NumPy for NumPy input, else a
    DeviceArray with column-major strides.  A singular matrix raises ``LinAlgError`` unless ``check_singular`` is
    False."""
    a, on_host = _as_operand(a, "a")
    if a.ndim < 2:
        raise LinAlgError(f"a is {a.ndim}-dimensional; at least two dimensions are needed")
    dev = _to_device(a, on_host)
    if _empty_stack(dev.shape[:-2]):
        m, n = dev.shape[-2:]
        return _empties(on_host, dev.device, (dev.shape, dev.dtype)), np.zeros((*dev.shape[:-2], min(m, n)), np.int32)

    def one(m):
        w = colmajor_copy(m)
        piv, info = _getrf(w)
        name = f"magma_{blas.precision(m)}getrf_gpu"
        check_info(min(info, 0), name)
        if check_singular:
            check_info(info, name, "the matrix is singular: pivot {info} (U[{info}-1, {info}-1]) is exactly zero")
        return w, piv

    if dev.ndim > 2 and dev.size and _lib_has(f"magma_{blas.precision(dev)}getrf_batched"):
        lu, piv, infos = _getrf_batched(dev)
        for idx in np.ndindex(*infos.shape):
            check_info(min(int(infos[idx]), 0), f"magma_{blas.precision(dev)}getrf_batched")
            if check_singular and infos[idx] > 0:
                raise LinAlgError(f"magma_{blas.precision(dev)}getrf_batched: matrix {idx} is singular: pivot "
                                  f"{int(infos[idx])} is exactly zero")
        return _result(lu, on_host), piv
    batch, results = _stack_map(one, dev)
    lu = _stack_device(batch, [w for w, _ in results]) if batch else results[0][0]
    piv = np.stack([p for _, p in results]).reshape(*batch, -1) - 1
    return _result(lu, on_host), piv.astype(np.int32)


def _lib_has(name: str) -> bool:
    return magma().has(name)


def _getrf_batched(stack: DeviceArray):
    """LU of every matrix of a stack with MAGMA's batched routines: one batched transpose into column-major work
    copies, then magma_?getrf_batched.  Returns (lu view with column-major strides, 0-based pivots, infos)."""
    batch, (m, n) = stack.shape[:-2], stack.shape[-2:]
    k, p, q = min(m, n), blas.precision(stack), stack.queue.handle
    lu, w_ptrs, count = _colmajor.copy_stack(stack)
    lib = magma()
    int_dtype = np.dtype(_magma.MAGMA_INT)
    ipiv = empty((count, max(k, 1)), int_dtype, device=stack.device)
    ipiv_ptrs = pointer_array([ipiv.ptr + i * max(k, 1) * int_dtype.itemsize for i in range(count)], stack.device)
    infos = empty((count,), int_dtype, device=stack.device)
    status = getattr(lib, f"magma_{p}getrf_batched")(m, n, w_ptrs.ptr, m, ipiv_ptrs.ptr, infos.ptr, count, q)
    check_info(int(status), f"magma_{p}getrf_batched")
    stack.queue.synchronize()
    piv = (ipiv.get()[:, :k] - 1).astype(np.int32).reshape(*batch, k)
    return lu, piv, infos.get().reshape(batch)


@on_arrays_device
def lu_solve(lu_and_piv, b):
    """Solve ``A x = b`` from ``lu_factor(A)``; ``b`` is ``(..., n)`` or ``(..., n, k)``."""
    lu, piv = lu_and_piv
    lu, on_host = _as_operand(lu, "lu")
    b, b_host = _as_operand(b, "b")
    _square(lu, "lu")
    piv = np.asarray(piv)
    n = lu.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"b has shape {b.shape}; expected ({n},) or (..., {n}, k) to match lu {lu.shape}")
    if piv.shape[-1] != n:
        raise ValueError(f"piv has shape {piv.shape}; expected (..., {n})")
    dlu = _to_device(lu, on_host)
    db = _to_device(b, b_host)
    if vector:
        db = db.reshape(n, 1)
    batch = np.broadcast_shapes(dlu.shape[:-2], db.shape[:-2], piv.shape[:-1])
    if _empty_stack(batch):
        return _empties(on_host and b_host, db.device, ((*batch, *((n,) if vector else db.shape[-2:])), db.dtype))
    if batch and _lib_has(f"magmablas_{blas.precision(dlu)}trsm_batched"):
        x = _solve_lu_batched(dlu, piv, db, batch)
    else:
        xs = [_solve_lu_device(_matrix(dlu, idx, batch), _matrix(piv, idx, batch, core=1) + 1,
                               _matrix(db, idx, batch)) for idx in np.ndindex(*batch)]
        x = _stack_device(batch, xs)
    if vector:
        x = x.reshape(x.shape[:-1])
    return _result(x, on_host and b_host)


@on_arrays_device
@_keeps_subclass("b", 1)
def solve(a, b):
    """Solve ``a x = b`` (``numpy.linalg.solve`` semantics: ``b`` is a vector only when 1-D)."""
    a, a_host = _as_operand(a, "a")
    b, b_host = _as_operand(b, "b")
    _square(a)
    if a.dtype != b.dtype:
        raise TypeError(f"a and b have different dtypes ({a.dtype}, {b.dtype})")
    n = a.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"solve: b has shape {b.shape}, incompatible with a {a.shape}")
    lu, piv = lu_factor(_to_device(a, a_host))
    x = lu_solve((lu, piv), _to_device(b, b_host))
    return _result(x, a_host and b_host)


@on_arrays_device
@_keeps_subclass("a", 0)
def inv(a):
    """Inverse of square matrices (``solve(a, I)``)."""
    a, on_host = _as_operand(a, "a")
    _square(a)
    eye = np.ascontiguousarray(np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape))
    return solve(a, eye if on_host else asarray(eye, device=a.device))


def _lu_diag_and_sign(a):
    a, on_host = _as_operand(a, "a")
    _square(a)
    lu, piv = lu_factor(_to_device(a, on_host), check_singular=False)
    diag = np.diagonal(lu.get() if isinstance(lu, DeviceArray) else lu, axis1=-2, axis2=-1)
    swaps = np.count_nonzero(piv != np.arange(piv.shape[-1]), axis=-1)
    return diag, np.where(swaps % 2, -1, 1).astype(a.dtype), a.dtype


@on_arrays_device
def det(a):
    """Determinant (from the LU factors; a NumPy value)."""
    diag, sign, dtype = _lu_diag_and_sign(a)
    return (sign * np.prod(diag, axis=-1)).astype(dtype)


@on_arrays_device
def slogdet(a):
    """``SlogdetResult(sign, logabsdet)`` like ``numpy.linalg.slogdet``.  The phase of a complex determinant is
    accumulated in double precision and renormalized, so ``|sign|`` is 1 to the dtype's rounding."""
    diag, sign, dtype = _lu_diag_and_sign(a)
    wide = diag.astype(np.complex128 if np.iscomplexobj(diag) else np.float64)
    absd = np.abs(wide)
    phase = np.prod(np.where(absd == 0, 0, wide / np.where(absd == 0, 1, absd)), axis=-1)
    if np.iscomplexobj(phase):
        mod = np.abs(phase)
        phase = np.where(mod == 0, 0, phase / np.where(mod == 0, 1, mod))
    with np.errstate(divide="ignore"):  # a zero pivot gives log|det| = -inf, as in NumPy
        logdet = np.sum(np.log(absd), axis=-1)
    return SlogdetResult((sign * phase).astype(dtype), logdet.astype(np.finfo(dtype).dtype))


# ----------------------------------------------------------------------------------------------------- Cholesky
_NOT_PD = "the matrix is not positive definite: the leading minor of order {info} is not positive"


def _zero_upper(w: DeviceArray) -> None:
    if _lib_has(f"magmablas_{blas.precision(w)}laset"):
        _colmajor.zero_strict_triangle(w, upper=True)
    else:  # PyTorch's MAGMA has no complex laset
        hybrid.zero_upper(w)


@on_arrays_device
@_keeps_subclass("a", 0)
def cholesky(a, /, *, upper: bool = False, method: str = "auto"):
    """Cholesky factor like ``numpy.linalg.cholesky``: lower ``L`` with ``a = L L^H``, or with ``upper=True``
    ``U = L^H`` (``a = U^H U``).  Not positive definite -> LinAlgError naming the leading minor.

    ``method``: "native" (magma_?potrf_gpu, or potrf_batched for stacks), "hybrid" (:func:`pymagma.hybrid.potrf`:
    diagonal blocks on the host, trsm + syrk/herk on the device), "auto" (native when the provider exports it)."""
    a, on_host = _as_operand(a, "a")
    _square(a)
    native = _native(method, a.dtype, "magma_?potrf_gpu")
    dev = _to_device(a, on_host)
    if _empty_stack(dev.shape[:-2]):
        return _empties(on_host, dev.device, (dev.shape, dev.dtype))

    def one(m):
        w = colmajor_copy(m)
        n = w.shape[0]
        p = blas.precision(w)
        if not native:
            check_info(hybrid.potrf(w) if n else 0, "pymagma.hybrid.potrf", _NOT_PD)
        else:
            info = _magma.MAGMA_INT(0)
            if n:
                _sync(w)
                getattr(magma(), f"magma_{p}potrf_gpu")(_magma.MagmaLower, n, w.ptr, _ld(w), ctypes.byref(info))
            check_info(int(info.value), f"magma_{p}potrf_gpu", _NOT_PD)
        if not on_host:
            _zero_upper(w)
        return w

    if native and dev.ndim > 2 and dev.size and _lib_has(f"magma_{blas.precision(dev)}potrf_batched"):
        out = _potrf_batched(dev)
        if not on_host:
            for idx in np.ndindex(*out.shape[:-2]):
                _zero_upper(out[idx])
    else:
        batch, results = _stack_map(one, dev)
        out = _stack_device(batch, results) if batch else results[0]
    if on_host:
        low = np.tril(out.get())
        return np.conj(np.swapaxes(low, -1, -2)) if upper else low
    if not upper:
        return out
    if np.iscomplexobj(np.zeros(0, out.dtype)):  # no device conjugation here: one round trip through the host
        return asarray(np.ascontiguousarray(np.conj(np.swapaxes(out.get(), -1, -2))), device=out.device)
    return out.mT


def _potrf_batched(stack: DeviceArray) -> DeviceArray:
    """Lower Cholesky factors of a stack with magma_?potrf_batched (a view with column-major strides)."""
    n, name = stack.shape[-1], f"magma_{blas.precision(stack)}potrf_batched"
    factors, ptrs, count = _colmajor.copy_stack(stack)
    infos = empty((count,), _magma.MAGMA_INT, device=stack.device)
    check_info(int(getattr(magma(), name)(_magma.MagmaLower, n, ptrs.ptr, n, infos.ptr, count, stack.queue.handle)),
               name)
    stack.queue.synchronize()  # the pointer array must outlive the kernels
    for i, info in enumerate(infos.get()):
        check_info(min(int(info), 0), name)
        if info > 0:
            where = tuple(map(int, np.unravel_index(i, stack.shape[:-2])))
            raise LinAlgError(f"{name}: matrix {where} is not positive definite: the leading minor of order "
                              f"{int(info)} is not positive")
    return factors


@on_arrays_device
def cho_solve(c_and_lower, b, *, method: str = "auto"):
    """Solve ``a x = b`` from ``c = cholesky(a)`` (``(c, lower)`` like SciPy; ``lower`` must be True: our factors are
    lower) with magma_?potrs_gpu, or magma_?potrs_batched for stacks where the provider has it; ``method="hybrid"``
    (or "auto" without potrs): two device trsm (:func:`pymagma.hybrid.potrs`)."""
    c, lower = c_and_lower if isinstance(c_and_lower, tuple) else (c_and_lower, True)
    if not lower:
        raise ValueError("cho_solve takes the lower factor from pymagma.linalg.cholesky (lower=True)")
    c, c_host = _as_operand(c, "c")
    b, b_host = _as_operand(b, "b")
    _square(c, "c")
    n = c.shape[-1]
    vector = b.ndim == 1
    if b.shape[-1 if vector else -2] != n:
        raise ValueError(f"cho_solve: b has shape {b.shape}, incompatible with c {c.shape}")
    native = _native(method, c.dtype, "magma_?potrs_gpu")
    dc, db = _to_device(c, c_host), _to_device(b, b_host)
    if vector:
        db = db.reshape(n, 1)
    batch = np.broadcast_shapes(dc.shape[:-2], db.shape[:-2])
    if _empty_stack(batch):
        return _empties(c_host and b_host, db.device, ((*batch, *((n,) if vector else db.shape[-2:])), db.dtype))

    def one(cm, bm):
        layout = _colmajor.stored(cm)
        w = cm if layout is not None and not layout[1] else colmajor_copy(cm)
        x = colmajor_copy(bm)
        if not native:
            hybrid.potrs(w, x)
            return x.copy()
        info = _magma.MAGMA_INT(0)
        p = blas.precision(w)
        _sync(x)
        getattr(magma(), f"magma_{p}potrs_gpu")(_magma.MagmaLower, n, x.shape[1], w.ptr, _ld(w), x.ptr, _ld(x),
                                               ctypes.byref(info))
        check_info(int(info.value), f"magma_{p}potrs_gpu")
        return x.copy()

    if native and batch and _lib_has(f"magma_{blas.precision(dc)}potrs_batched"):
        x = _potrs_batched(dc, db, batch)
    else:
        batch, xs = _stack_map(one, dc, db)
        x = _stack_device(batch, xs)
    if vector:
        x = x.reshape(x.shape[:-1])
    return _result(x, c_host and b_host)


def _potrs_batched(c: DeviceArray, b: DeviceArray, batch: tuple) -> DeviceArray:
    """Stacked ``cho_solve``: column-major copies of every factor and right-hand side (leading dimensions
    broadcast), then one magma_?potrs_batched for the whole stack."""
    idxs = list(np.ndindex(*batch))
    factors = [colmajor_copy(_matrix(c, i, batch)) for i in idxs]
    xs = [colmajor_copy(_matrix(b, i, batch)) for i in idxs]
    name, q = f"magma_{blas.precision(c)}potrs_batched", b.queue.handle
    a_ptrs, b_ptrs = (pointer_array([m.ptr for m in ms], b.device) for ms in (factors, xs))
    n, nrhs = xs[0].shape
    _checks.native_sizes(name, batch_count=len(xs), n=n, nrhs=nrhs)
    check_info(int(getattr(magma(), name)(_magma.MagmaLower, n, nrhs, a_ptrs.ptr, _ld(factors[0]), b_ptrs.ptr,
                                         _ld(xs[0]), len(xs), q)), name)
    b.queue.synchronize()  # the pointer arrays must outlive the kernels
    return _stack_device(batch, xs)


# ----------------------------------------------------------------------------------------------------- QR, lstsq
@on_arrays_device
@_keeps_subclass("a", 0)
def qr(a, mode: str = "reduced", *, method: str = "auto"):
    """QR decomposition like ``numpy.linalg.qr``: ``mode`` 'reduced' / 'complete' -> ``QRResult(Q, R)``, 'r' -> R,
    'raw' -> ``(h, tau)`` (LAPACK's reflectors, ``h`` transposed as NumPy returns it).

    Native path: R from magma_?geqrf2_gpu (the LAPACK-compatible variant: R whole in the matrix, unlike geqrf_gpu
    which keeps R's diagonal blocks inverted in its T workspace); Q from magma_?orgqr2/ungqr2 (CPU interface, on the
    reflectors copied to the host).  Hybrid path (``method="hybrid"``, "auto" without those routines, and 'complete'
    with m > n): :func:`pymagma.hybrid.geqrf` / :func:`~pymagma.hybrid.orgqr`, Q built on the device."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    a, on_host = _as_operand(a, "a")
    if a.ndim < 2:
        raise LinAlgError("qr needs at least two dimensions")
    native = _native(method, a.dtype, "magma_?geqrf2_gpu", *(() if mode in ("r", "raw") else ("magma_?{or}gqr2",)))
    dev = _to_device(a, on_host)
    *batch, m, n = dev.shape
    k = min(m, n)
    qcols = m if mode == "complete" else k
    rrows = m if mode == "complete" else k
    if _empty_stack(batch) or (mode == "raw" and k == 0):
        if mode == "raw":
            return _empties(on_host, dev.device, ((*batch, n, m), dev.dtype), ((*batch, k), dev.dtype))
        r = ((*batch, rrows, n), dev.dtype)
        return _empties(on_host, dev.device, r) if mode == "r" else \
            QRResult(*_empties(on_host, dev.device, ((*batch, m, qcols), dev.dtype), r))

    def one(mat):
        w = colmajor_copy(mat)
        if native and not (mode == "complete" and m > n):
            return _qr_native(w, mode, on_host)
        f = hybrid.geqrf(w)
        if mode == "raw":
            return w.T.get() if on_host else w.T.copy(), f.tau
        q = None if mode == "r" else hybrid.orgqr(f, qcols)
        r = np.triu(w[:rrows, :].get())
        return (r if on_host else asarray(r, device=mat.device)), \
            (None if q is None else (q.get() if on_host else q))

    batch_, results = _stack_map(one, dev)
    if mode == "raw":
        hs = _stack_any(batch_, [h for h, _ in results], on_host)
        return hs, np.stack([t for _, t in results]).reshape(*batch_, k) if on_host else \
            asarray(np.stack([t for _, t in results]).reshape(*batch_, k), device=dev.device)
    rs = _stack_any(batch_, [r for r, _ in results], on_host)
    if mode == "r":
        return rs
    return QRResult(_stack_any(batch_, [q for _, q in results], on_host), rs)


def _stack_any(batch, mats, on_host: bool):
    if on_host:
        return np.stack(mats).reshape(*batch, *mats[0].shape)
    return _stack_device(batch, mats) if batch else mats[0]


def _qr_native(w: DeviceArray, mode: str, on_host: bool):
    """One matrix through magma_?geqrf2_gpu (+ magma_?orgqr2): (R, Q) or, for 'raw', (h, tau)."""
    m, n = w.shape
    k = min(m, n)
    p = blas.precision(w)
    tau = np.zeros(max(k, 1), w.dtype)
    info = _magma.MAGMA_INT(0)
    if k:
        _sync(w)
        getattr(magma(), f"magma_{p}geqrf2_gpu")(m, n, w.ptr, _ld(w), tau.ctypes.data, ctypes.byref(info))
        check_info(int(info.value), f"magma_{p}geqrf2_gpu")
    if mode == "raw":
        return (w.T.get() if on_host else w.T.copy()), tau[:k]
    r = colmajor_copy(w[:k, :])
    if on_host:
        r_out = np.triu(r.get())
    else:
        r_out = r
        _colmajor.zero_strict_triangle(r[:, :k], upper=False)
    if mode == "r":
        return r_out, None
    reflectors = np.asfortranarray(w[:, :k].get())
    if k:
        name = f"magma_{p}{'un' if p in 'cz' else 'or'}gqr2"
        getattr(magma(), name)(m, k, k, reflectors.ctypes.data, max(m, 1), tau.ctypes.data, ctypes.byref(info))
        check_info(int(info.value), name)
    q = np.ascontiguousarray(reflectors)
    return r_out, (q if on_host else asarray(q, device=w.device))


@on_arrays_device
@_keeps_subclass("b", 1, tuple_fields=(0, 1))
def lstsq(a, b, rcond=None, *, method: str = "svd"):
    """Least squares ``min ||a x - b||_2`` like ``numpy.linalg.lstsq``: returns ``(x, residuals, rank, s)``.

    ``method="svd"`` (default, NumPy's semantics): any shape and rank, through :func:`svd` (magma_?gesdd, or the
    hybrid SVD where the provider lacks it); singular values ``<= rcond * s.max()`` count as zero (``rcond=None``:
    machine epsilon times ``max(m, n)``; a negative ``rcond``: LAPACK's relative machine precision ``eps / 2``) and
    ``x`` is the minimum-norm solution.  As in NumPy, float32 and complex64 are solved in double precision (with
    double's epsilon) and rounded.  ``method="qr"``: magma_?gels_gpu, all on the device and cheaper, for ``a``
    of full column rank with ``m >= n`` only: the rank is checked on R's diagonal (``|R_ii| > max(m, n) * eps *
    max|R_ii|``, NumPy's matrix_rank tolerance; with gels this costs one more QR, as gels keeps R's diagonal blocks
    in a workspace it frees) and a rank-deficient ``a`` is a LinAlgError naming the rank (no silent fallback: use
    ``method="svd"``); it takes no ``rcond`` and reports rank ``n`` and ``s = None``.  Where
    the provider lacks gels, and with ``method="hybrid"``, the same is computed by :func:`pymagma.hybrid.geqrf` +
    ``Q^H b`` on the device + a device ``trsm``.  Incompatible shapes raise LinAlgError, as in NumPy.  ``residuals``
    holds the squared 2-norm of each column of ``b - a x`` when the rank is ``n`` and ``m > n``, and is empty
    otherwise.
    """
    if method not in ("svd", "qr", "hybrid"):
        raise ValueError(f"method must be 'svd', 'qr' or 'hybrid', got {method!r}")
    a, a_host = _as_operand(a, "a")
    b, b_host = _as_operand(b, "b")
    for what, v in (("a", a), ("b", b)):
        if v.ndim != 2 and not (what == "b" and v.ndim == 1):
            raise LinAlgError(f"{v.ndim}-dimensional array given. Array must be two-dimensional ({what} has shape "
                              f"{v.shape})")
    m, n = a.shape
    if b.shape[0] != m:
        raise LinAlgError(f"Incompatible dimensions: b has shape {b.shape}, incompatible with a of shape {a.shape} "
                          f"(b needs {m} rows)")
    if a.dtype != b.dtype:
        raise TypeError(f"lstsq: a and b have different dtypes ({a.dtype}, {b.dtype}); convert one of them")
    on_host = a_host and b_host
    device = None if on_host else (b if a_host else a).device
    if method in ("qr", "hybrid"):
        if rcond is not None:
            raise ValueError("rcond applies to method='svd' only (gels assumes full column rank)")
        if m < n:
            raise ValueError(f"method={method!r} (QR, like MAGMA's gels) solves only m >= n, got a of shape "
                             f"{a.shape}; use method='svd' for the minimum-norm solution")
        da, db = _to_device(a, a_host), _to_device(b, b_host)
        if method == "qr" and _native("auto", a.dtype, "magma_?gels_gpu"):
            # gels factors with geqrf_gpu, which keeps R's diagonal blocks (inverted) in a workspace it frees: the
            # rank is read from R of a separate factorization (geqrf2, or the hybrid one), before solving
            if min(m, n):
                _check_rank(qr(da, mode="r"), a.shape)
            x, residuals = _lstsq_gels(da, db)
        else:
            x, residuals = _lstsq_hybrid(da, db)
        x, rank, s = _result(x, on_host), n, None
    else:
        a_h, b_h = (v if host else v.get() for v, host in ((a, a_host), (b, b_host)))
        x, residuals, rank, s = _lstsq_svd(a_h, b_h, rcond)
        if not on_host:
            x, s = asarray(x, device=device), asarray(s, device=device)
    if not on_host:
        residuals = asarray(residuals, device=device)
    return x, residuals, np.int32(rank), s  # NumPy's rank is an int32 too


def _residuals(a: np.ndarray, x: np.ndarray, b: np.ndarray, rank: int) -> np.ndarray:
    """NumPy's residuals: squared column norms of ``b - a x`` when rank == n < m, else an empty array."""
    m, n = a.shape
    real = _real(a.dtype)
    if rank != n or m <= n:
        return np.zeros(0, real)
    r = b - a @ x
    return np.sum((r * np.conj(r)).real, axis=0, dtype=real).reshape(-1)


def _lstsq_svd(a: np.ndarray, b: np.ndarray, rcond):
    """NumPy's lstsq by the SVD of ``a`` (:func:`svd`).  Single precision is solved in double and rounded, as
    numpy.linalg does (its dgelsd/zgelsd runs in double for every dtype): the same default cut (double ``eps *
    max(m, n)``), rank decisions and accuracy."""
    dtype, real = a.dtype, _real(a.dtype)
    wide = np.result_type(dtype, np.float64)  # float32 -> float64, complex64 -> complex128
    a, b = a.astype(wide, copy=False), b.astype(wide, copy=False)
    m, n = a.shape
    if min(m, n) == 0:
        x = np.zeros((n, *b.shape[1:]), dtype)
        return x, _residuals(a, x, b, 0).astype(real), 0, np.zeros(0, real)
    u, s, vt = svd(a, full_matrices=False)
    eps = np.finfo(_real(wide)).eps
    relative = eps * max(m, n) if rcond is None else (eps / 2 if rcond < 0 else float(rcond))  # LAPACK's dlamch('E')
    keep = s > relative * s.max()
    coeffs = np.conj(u[:, keep].T) @ b
    coeffs = coeffs / (s[keep] if b.ndim == 1 else s[keep, None])
    x = np.conj(vt[keep].T) @ coeffs
    rank = int(keep.sum())
    return x.astype(dtype), _residuals(a, x, b, rank).astype(real), rank, s.astype(real)


def _lstsq_gels(a: DeviceArray, b: DeviceArray):
    m, n = a.shape
    vector = b.ndim == 1
    if vector:
        b = b.reshape(m, 1)
    nrhs = b.shape[1]
    w, x = colmajor_copy(a), colmajor_copy(b)
    name = f"magma_{blas.precision(w)}gels_gpu"
    gels, info = getattr(magma(), name), _magma.MAGMA_INT(0)

    def call(work: np.ndarray, lwork: int) -> None:
        gels(_magma.MagmaNoTrans, m, n, nrhs, w.ptr, _ld(w), x.ptr, _ld(x), work.ctypes.data, lwork,
             ctypes.byref(info))
        check_info(int(info.value), name)

    if min(m, n, nrhs):
        query = np.zeros(1, w.dtype)
        call(query, -1)  # MAGMA's own workspace size: its formula changed across versions
        lwork = max(1, int(query[0].real))
        _sync(w)
        call(np.zeros(lwork, w.dtype), lwork)
    tail = x[n:, :].get()  # rows n.. of the overwritten b: the residual in Q's coordinates
    residuals = np.sum(np.abs(tail) ** 2, axis=0, dtype=_real(w.dtype)) if m > n else np.zeros(0, _real(w.dtype))
    sol = x[:n, :].copy()
    return (sol.reshape(n) if vector else sol), residuals


def _check_rank(w, shape) -> None:
    """LinAlgError when the QR factor in ``w`` (R in its upper n x n triangle) shows ``a`` rank-deficient: rank =
    the count of ``|R_ii| > max(m, n) * eps * max|R_ii|`` (NumPy's matrix_rank tolerance, on R's diagonal)."""
    m, n = shape
    diagonal = np.abs(np.diagonal(w[:n, :n].get()))
    top = float(diagonal.max()) if diagonal.size else 0.0
    tol = max(m, n) * float(np.finfo(_real(w.dtype)).eps) * top
    rank = int(np.count_nonzero(diagonal > tol))
    if rank < n:
        raise LinAlgError(f"lstsq(method='qr'): a of shape {shape} has rank {rank} < {n} columns (|R_ii| <= {tol:.3g} "
                          f"on R's diagonal); QR least squares needs full column rank: use method='svd' for the "
                          "minimum-norm solution")


def _lstsq_hybrid(a: DeviceArray, b: DeviceArray):
    """Full-column-rank least squares by the hybrid QR: ``R x = (Q^H b)[:n]``; residuals from the rest."""
    m, n = a.shape
    vector = b.ndim == 1
    x = colmajor_copy(b.reshape(m, 1) if vector else b)
    real = _real(a.dtype)
    if min(m, n, x.shape[1]):
        f = hybrid.geqrf(colmajor_copy(a))
        _check_rank(f.w, a.shape)
        hybrid.ormqr_h(f, x)
        _colmajor.trsm(_colmajor.LEFT, _colmajor.UPPER, _colmajor.N, 1.0, f.w[:n, :n], x[:n, :])
    tail = x[n:, :].get()
    residuals = np.sum(np.abs(tail) ** 2, axis=0, dtype=real) if m > n else np.zeros(0, real)
    sol = x[:n, :].copy()
    return (sol.reshape(n) if vector else sol), residuals


# ----------------------------------------------------------------------------------------------------- eigen, SVD
def _host_lapack(fn, a, on_host: bool, *args):
    """Run a ``numpy.linalg`` function on the host (the fallback where the provider lacks MAGMA's driver): NumPy
    results for NumPy input, DeviceArrays on ``a``'s device otherwise; the result type is NumPy's."""
    res = fn(a if on_host else a.get(), *args)
    if on_host:
        return res
    up = [asarray(np.ascontiguousarray(r), device=a.device) for r in (res if isinstance(res, tuple) else (res,))]
    return type(res)(*up) if isinstance(res, tuple) else up[0]


def _uplo(UPLO) -> str:
    up = UPLO.upper() if isinstance(UPLO, str) else UPLO
    if up not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U' (either case), got {UPLO!r}")
    return up


@on_arrays_device
@_keeps_subclass("a", 0)
def eigh(a, UPLO: str = "L", *, method: str = "auto"):
    """``EighResult(eigenvalues, eigenvectors)`` of Hermitian matrices like ``numpy.linalg.eigh`` (eigenvalues
    ascending, eigenvectors in columns): magma_?syevd/heevd_gpu natively; ``method="hybrid"`` (and "auto" without
    syevd): :func:`pymagma.hybrid.syevd` (tridiagonal reduction with device symv/syr2k, tridiagonal eigensolver on
    the host, back-transformation on the device)."""
    UPLO = _uplo(UPLO)
    a, on_host = _as_operand(a, "a")
    _square(a)
    dev = _to_device(a, on_host)
    if not _native(method, a.dtype, "magma_?{sy}evd_gpu"):
        return _eigh_hybrid(dev, on_host, UPLO)
    if _empty_stack(dev.shape[:-2]):
        return EighResult(*_empties(on_host, dev.device, (dev.shape[:-1], _real(dev.dtype)), (dev.shape, dev.dtype)))

    def one(mat):
        n = mat.shape[0]
        w = colmajor_copy(mat)
        p = blas.precision(w)
        real = np.dtype(_magma.PRECISIONS[p][1])
        vals = np.zeros(max(n, 1), real)
        if n == 0:
            return vals[:0], w
        name = f"magma_{p}{'he' if p in 'cz' else 'sy'}evd_gpu"
        fn = getattr(magma(), name)
        uplo = _magma.MagmaLower if UPLO == "L" else _magma.MagmaUpper
        wa = np.zeros((n, n), w.dtype)
        info = _magma.MAGMA_INT(0)
        qwork, qrwork, qiwork = np.zeros(1, w.dtype), np.zeros(1, real), _host_int_array(1)

        def call(work, lwork, rwork, lrwork, iwork, liwork):
            args = [_magma.MagmaVec, uplo, n, w.ptr, _ld(w), vals.ctypes.data, wa.ctypes.data, n,
                    work.ctypes.data, lwork]
            if p in "cz":
                args += [rwork.ctypes.data, lrwork]
            fn(*args, iwork, liwork, ctypes.byref(info))

        _sync(w)
        call(qwork, -1, qrwork, -1, qiwork, -1)  # workspace query
        check_info(int(info.value), name)
        lwork, lrwork, liwork = int(qwork[0].real), int(qrwork[0]), int(qiwork[0])
        work, rwork = np.zeros(max(lwork, 1), w.dtype), np.zeros(max(lrwork, 1), real)
        call(work, lwork, rwork, lrwork, _host_int_array(liwork), liwork)
        check_info(int(info.value), name, "the eigenvalue algorithm failed to converge ({info})")
        return vals[:n], w

    batch, results = _stack_map(one, dev)
    vals = np.stack([v for v, _ in results]).reshape(*batch, a.shape[-1])
    vecs = _stack_device(batch, [v for _, v in results]) if batch else results[0][1]
    return EighResult(vals, vecs.get()) if on_host else EighResult(asarray(vals, device=dev.device), vecs)


def _eigh_hybrid(dev: DeviceArray, on_host: bool, UPLO: str):
    """eigh through :func:`pymagma.hybrid.syevd`, one matrix at a time.  ``UPLO='U'`` reduces the lower triangle of
    the transpose, which defines ``conj(A)``: same eigenvalues, conjugate eigenvectors (undone in the reflectors)."""
    if _empty_stack(dev.shape[:-2]):
        return EighResult(*_empties(on_host, dev.device, (dev.shape[:-1], _real(dev.dtype)), (dev.shape, dev.dtype)))
    flip = UPLO == "U"
    cplx = np.iscomplexobj(np.zeros(0, dev.dtype))
    batch, results = _stack_map(lambda m: hybrid.syevd(colmajor_copy(m.T if flip else m), conj=flip and cplx), dev)
    vals = np.stack([v for v, _ in results]).reshape(dev.shape[:-1])
    vecs = _stack_device(batch, [v for _, v in results]) if batch else results[0][1]
    return EighResult(vals, vecs.get()) if on_host else EighResult(asarray(vals, device=dev.device), vecs)


def _host_matrices(a, what):
    """(host copy, on_host, device of the results) for the routines with a CPU interface."""
    a, on_host = _as_operand(a, what)
    return (a, True, None) if on_host else (a.get(), False, a.device)


def _svd_hermitian(a, on_host: bool, compute_uv: bool, method: str):
    """NumPy's ``svd(hermitian=True)`` from :func:`eigh`: |eigenvalues| descending, signs moved into ``Vh``."""
    w, v = (x if on_host else x.get() for x in eigh(a, method=method))
    sgn, s = np.copysign(1.0, w).astype(w.dtype), np.abs(w)  # a zero eigenvalue keeps its vector (unitary Vh)
    order = np.argsort(s, axis=-1)[..., ::-1]
    s = np.take_along_axis(s, order, -1)
    if not compute_uv:
        return s if on_host else asarray(np.ascontiguousarray(s), device=a.device)
    sgn = np.take_along_axis(sgn, order, -1)
    u = np.take_along_axis(v, order[..., None, :], -1)
    vt = np.conj(np.swapaxes(u * sgn[..., None, :], -1, -2))
    res = SVDResult(u, s, vt)
    return res if on_host else SVDResult(*(asarray(np.ascontiguousarray(x), device=a.device) for x in res))


def _svd_empty(host: np.ndarray, on_host: bool, device, full_matrices: bool, compute_uv: bool):
    """svd with nothing to compute (an empty stack, or m or n zero) as NumPy gives it: no singular values and, for
    ``full_matrices``, identities in ``U`` (n == 0) or ``Vh`` (m == 0)."""
    *batch, m, n = host.shape
    k = min(m, n)
    s = np.zeros((*batch, k), _real(host.dtype))
    if not compute_uv:
        return s if on_host else asarray(s, device=device)
    ucols, vtrows = (m, n) if full_matrices else (k, k)
    u, vh = (np.ascontiguousarray(np.broadcast_to(np.eye(rows, cols, dtype=host.dtype), (*batch, rows, cols)))
             for rows, cols in ((m, ucols), (vtrows, n)))
    return SVDResult(u, s, vh) if on_host else SVDResult(*(asarray(x, device=device) for x in (u, s, vh)))


def _svd_scale(w: DeviceArray) -> float:
    """LAPACK's ?gesdd scaling: a power of two bringing the largest |entry| of a real ``w`` into
    [sqrt(tiny) / eps, eps / sqrt(tiny)] when it lies outside (so the host reflectors neither overflow nor
    underflow), else 1.  One device max-reduction and one scalar read; complex matrices are not scaled."""
    if w.dtype.kind != "f" or not w.size:
        return 1.0
    from . import kernels

    anrm = float(kernels.reduce("max", kernels.unary("abs", w.T)).get())
    fi = np.finfo(w.dtype)
    small = float(np.sqrt(fi.tiny)) / float(fi.eps)
    if not np.isfinite(anrm) or anrm == 0 or small <= anrm <= 1 / small:
        return 1.0
    return float(2.0 ** np.round(np.log2((1 / small if anrm > 1 / small else small) / anrm)))


def _svd_hybrid(dev: DeviceArray, on_host: bool, full_matrices: bool, compute_uv: bool):
    """svd through :func:`pymagma.hybrid.gesvd`, one matrix at a time (a wide matrix through its transpose)."""
    *batch, m, n = dev.shape
    if _empty_stack(batch) or min(m, n) == 0:
        return _svd_empty(np.empty(dev.shape, dev.dtype), on_host, dev.device, full_matrices, compute_uv)
    wide = m < n

    def one(mat):
        w = colmajor_copy(mat.T if wide else mat)
        factor = _svd_scale(w)
        if factor != 1:
            blas.scal(factor, w.T)  # (w.T is C-contiguous)
        res = hybrid.gesvd(w, full_matrices, compute_uv)
        if not compute_uv:
            return (res / res.dtype.type(factor),)
        u, s, conj_v = res
        s = s / s.dtype.type(factor)
        return (conj_v, s, u.T) if wide else (u, s, conj_v.T)

    batch, results = _stack_map(one, dev)
    s = np.stack([r[1 if compute_uv else 0] for r in results]).reshape(*batch, min(m, n))
    if not compute_uv:
        return s if on_host else asarray(s, device=dev.device)
    u, vh = (_stack_device(batch, [r[i] for r in results]) if batch else results[0][i] for i in (0, 2))
    if on_host:
        return SVDResult(u.get(), s, vh.get())
    return SVDResult(u, asarray(s, device=dev.device), vh)


@on_arrays_device
@_keeps_subclass("a", 0, whole=False)
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False, *, method: str = "auto"):
    """Singular value decomposition like ``numpy.linalg.svd``: ``SVDResult(U, S, Vh)``, or ``S`` alone.

    Native: magma_?gesdd (MAGMA's CPU interface: the matrix goes through host memory and MAGMA moves panels to the
    GPU itself); ``method="hybrid"`` (and "auto" without gesdd): :func:`pymagma.hybrid.gesvd` (bidiagonal reduction
    on the device, bidiagonal SVD on the host, back-transformation on the device).
    ``hermitian=True`` takes the eigen-decomposition of :func:`eigh` as NumPy does."""
    operand, operand_host = _as_operand(a, "a")
    if operand.ndim < 2:
        raise LinAlgError("svd needs at least two dimensions")
    if hermitian:
        _square(operand)
        return _svd_hermitian(operand, operand_host, compute_uv, method)
    if not _native(method, operand.dtype, "magma_?gesdd"):
        return _svd_hybrid(_to_device(operand, operand_host), operand_host, full_matrices, compute_uv)
    host, on_host, device = _host_matrices(a, "a")
    if _empty_stack(host.shape[:-2]) or min(host.shape[-2:]) == 0:
        return _svd_empty(host, on_host, device, full_matrices, compute_uv)

    def one(mat):
        m, n = mat.shape
        k = min(m, n)
        p = _magma.precision_of(mat.dtype)
        real = np.dtype(_magma.PRECISIONS[p][1])
        A = np.asfortranarray(mat.copy())
        s = np.zeros(max(k, 1), real)
        if not compute_uv:
            job, ucols, vtrows = _magma.MagmaNoVec, 1, 1
        elif full_matrices:
            job, ucols, vtrows = _magma.MagmaAllVec, m, n
        else:
            job, ucols, vtrows = _magma.MagmaSomeVec, k, k
        U = np.zeros((max(m, 1), max(ucols, 1)), mat.dtype, order="F")
        VT = np.zeros((max(vtrows, 1), max(n, 1)), mat.dtype, order="F")
        iwork = _host_int_array(8 * k)
        lrwork = max(1, 7 * k if job == _magma.MagmaNoVec else k * max(5 * k + 7, 2 * max(m, n) + 2 * k + 1))
        rwork = np.zeros(lrwork, real)
        info = _magma.MAGMA_INT(0)
        name = f"magma_{p}gesdd"
        fn = getattr(magma(), name)

        def call(work, lwork):
            args = [job, m, n, A.ctypes.data, max(m, 1), s.ctypes.data, U.ctypes.data, U.shape[0], VT.ctypes.data,
                    VT.shape[0], work.ctypes.data, lwork]
            if p in "cz":
                args.append(rwork.ctypes.data)
            fn(*args, iwork, ctypes.byref(info))

        query = np.zeros(1, mat.dtype)
        call(query, -1)
        check_info(int(info.value), name)
        call(np.zeros(max(int(query[0].real), 1), mat.dtype), max(int(query[0].real), 1))
        check_info(int(info.value), name, "the SVD did not converge ({info})")
        return np.ascontiguousarray(U[:m, :ucols]), s[:k], np.ascontiguousarray(VT[:vtrows, :n])

    batch = host.shape[:-2]
    results = [one(host[idx]) for idx in np.ndindex(*batch)] if batch else [one(host)]
    u, s, vt = (np.stack([r[i] for r in results]).reshape(*batch, *results[0][i].shape) for i in range(3))
    if not compute_uv:
        return s if on_host else asarray(s, device=device)
    return SVDResult(u, s, vt) if on_host else SVDResult(*(asarray(x, device=device) for x in (u, s, vt)))


@on_arrays_device
@_keeps_subclass("a", 0)
def eig(a, *, method: str = "auto"):
    """``EigResult(eigenvalues, eigenvectors)`` of general square matrices like ``numpy.linalg.eig`` (magma_?geev,
    CPU interface; ``method="hybrid"`` and "auto" without geev: ``numpy.linalg.eig`` on the host).  Real input gives
    complex results when any eigenvalue is complex, as in NumPy."""
    operand, operand_host = _as_operand(a, "a")
    _square(operand)
    if not _native(method, operand.dtype, "magma_?geev"):
        return _host_lapack(np.linalg.eig, operand, operand_host)
    host, on_host, device = _host_matrices(a, "a")
    if _empty_stack(host.shape[:-2]):  # NumPy: real results for real input when no eigenvalue is complex
        return EigResult(*_empties(on_host, device, (host.shape[:-1], host.dtype), (host.shape, host.dtype)))

    def one(mat):
        n = mat.shape[0]
        p = _magma.precision_of(mat.dtype)
        real = np.dtype(_magma.PRECISIONS[p][1])
        A = np.asfortranarray(mat.copy())
        VR = np.zeros((max(n, 1), max(n, 1)), mat.dtype, order="F")
        VL = np.zeros((1, 1), mat.dtype)
        info = _magma.MAGMA_INT(0)
        name = f"magma_{p}geev"
        fn = getattr(magma(), name)
        if p in "cz":
            w = np.zeros(max(n, 1), mat.dtype)
            rwork = np.zeros(max(2 * n, 1), real)
            head = [w.ctypes.data]
        else:
            wr, wi = np.zeros(max(n, 1), real), np.zeros(max(n, 1), real)
            head = [wr.ctypes.data, wi.ctypes.data]

        def call(work, lwork):
            args = [_magma.MagmaNoVec, _magma.MagmaVec, n, A.ctypes.data, max(n, 1), *head, VL.ctypes.data, 1,
                    VR.ctypes.data, max(n, 1), work.ctypes.data, lwork]
            if p in "cz":
                args.append(rwork.ctypes.data)
            fn(*args, ctypes.byref(info))

        query = np.zeros(1, mat.dtype)
        call(query, -1)
        check_info(int(info.value), name)
        lwork = max(int(query[0].real), 1)
        call(np.zeros(lwork, mat.dtype), lwork)
        check_info(int(info.value), name, "the QR algorithm failed to compute all eigenvalues ({info})")
        if p in "cz":
            return w[:n], np.ascontiguousarray(VR[:n, :n])
        return real_eigvecs(wr[:n], wi[:n], VR[:n, :n])

    batch = host.shape[:-2]
    results = [one(host[idx]) for idx in np.ndindex(*batch)] if batch else [one(host)]
    w = np.stack([r[0] for r in results]).reshape(*batch, host.shape[-1])
    v = np.stack([r[1] for r in results]).reshape(host.shape[:-2] + (host.shape[-1],) * 2)
    if np.iscomplexobj(w) and not np.iscomplexobj(host) and not np.any(w.imag):
        w, v = w.real, v.real
    return EigResult(w, v) if on_host else EigResult(asarray(w, device=device), asarray(v, device=device))


def real_eigvecs(wr: np.ndarray, wi: np.ndarray, vr: np.ndarray):
    """LAPACK's real geev output (pairs of columns for complex-conjugate eigenvalues) as NumPy returns it."""
    w = wr + 1j * wi
    if not np.any(wi):
        return wr.copy(), vr.copy()
    v = vr.astype(np.result_type(vr.dtype, np.complex64))
    j = 0
    while j < len(wr):
        if wi[j] != 0 and j + 1 < len(wr):
            v[:, j] = vr[:, j] + 1j * vr[:, j + 1]
            v[:, j + 1] = vr[:, j] - 1j * vr[:, j + 1]
            j += 2
        else:
            j += 1
    return w, v


# ----------------------------------------------------------------------------------------------------- derived
_UNSET = object()


@on_arrays_device
def eigvalsh(a, UPLO: str = "L", *, method: str = "auto"):
    """Eigenvalues of Hermitian matrices, ascending, like ``numpy.linalg.eigvalsh`` (through :func:`eigh`)."""
    return eigh(a, UPLO, method=method).eigenvalues


@on_arrays_device
def eigvals(a, *, method: str = "auto"):
    """Eigenvalues of general square matrices like ``numpy.linalg.eigvals`` (through :func:`eig`)."""
    return eig(a, method=method).eigenvalues


def _svd_host(a, **kwargs):
    return tuple(x if isinstance(x, np.ndarray) else x.get() for x in svd(a, **kwargs))


@on_arrays_device
@_keeps_subclass("a", 0)
def pinv(a, rcond=None, hermitian: bool = False, *, rtol=_UNSET, method: str = "auto"):
    """Moore-Penrose pseudo-inverse like ``numpy.linalg.pinv`` (same ``rcond``/``rtol`` rules): the SVD by
    :func:`svd` (native or hybrid), the small-value cut and the product ``V S^+ U^H`` on the host.  A NumPy
    array for NumPy input, else a DeviceArray."""
    operand, on_host = _as_operand(a, "a")
    if operand.ndim < 2:
        raise LinAlgError(f"pinv needs at least two dimensions, got shape {operand.shape}")
    *batch, m, n = operand.shape
    if rcond is not None and rtol is not _UNSET:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    if rcond is None:
        rcond = 1e-15 if rtol is _UNSET else (max(m, n) * np.finfo(operand.dtype).eps if rtol is None else rtol)
    if _empty_stack(batch) or min(m, n) == 0:
        out = np.zeros((*batch, n, m), operand.dtype)
    else:
        u, s, vh = _svd_host(operand, full_matrices=False, hermitian=hermitian, method=method)
        large = s > np.asarray(rcond)[..., None] * np.max(s, axis=-1, keepdims=True)
        inv_s = np.where(large, 1 / np.where(large, s, 1), 0).astype(s.dtype)
        out = (np.conj(np.swapaxes(vh, -1, -2)) * inv_s[..., None, :]) @ np.conj(np.swapaxes(u, -1, -2))
    return out if on_host else asarray(np.ascontiguousarray(out), device=operand.device)


@on_arrays_device
def matrix_rank(A, tol=None, hermitian: bool = False, *, rtol=None, method: str = "auto"):
    """Rank by the SVD like ``numpy.linalg.matrix_rank``: singular values above ``tol`` (default
    ``S.max() * rtol``, ``rtol`` defaulting to ``max(m, n) * eps``).  Always NumPy integers."""
    if rtol is not None and tol is not None:
        raise ValueError("`tol` and `rtol` can't be both set.")
    operand, on_host = _as_operand(A, "A")
    if operand.ndim < 2:
        host = operand if on_host else operand.get()
        return int(not np.all(host == 0))
    m, n = operand.shape[-2:]
    s = svd(operand, compute_uv=False, hermitian=hermitian, method=method)
    s = s if isinstance(s, np.ndarray) else s.get()
    if tol is None:
        rtol = max(m, n) * np.finfo(s.dtype).eps if rtol is None else np.asarray(rtol)[..., None]
        tol = np.max(s, axis=-1, keepdims=True, initial=0) * rtol
    else:
        tol = np.asarray(tol)[..., None]
    return np.count_nonzero(s > tol, axis=-1)


@on_arrays_device
def cond(x, p=None, *, method: str = "auto"):
    """Condition number like ``numpy.linalg.cond`` (NumPy values): ``p`` None, 2 or -2 from the singular values of
    :func:`svd`; any other norm as ``norm(x, p) * norm(inv(x), p)`` (:func:`inv` of the whole stack, or matrix by
    matrix when one is singular).  As in NumPy, a singular matrix (a NaN ratio, or a failed inverse) gives inf
    unless it holds NaNs, and empty matrices raise LinAlgError."""
    operand, on_host = _as_operand(x, "x")
    if operand.ndim < 2:
        raise LinAlgError(f"{operand.ndim}-dimensional array given. Array must be at least two-dimensional")
    if operand.size == 0 and 0 in operand.shape[-2:]:
        raise LinAlgError("cond is not defined on empty arrays")
    host = operand if on_host else operand.get()
    if p is None or p in (2, -2):
        s = svd(operand, compute_uv=False, method=method)
        s = s if isinstance(s, np.ndarray) else s.get()
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        _square(operand)
        r = _cond_by_inverse(host, p)
    nan = np.isnan(r) & ~np.isnan(host).any(axis=(-2, -1))
    if np.ndim(r):
        r[nan] = np.inf
    elif nan:
        r = r.dtype.type(np.inf)
    return r


def _cond_by_inverse(host: np.ndarray, p):
    """``norm(a, p) * norm(inv(a), p)`` per matrix of a non-empty stack (NaN where the inverse fails)."""
    real = _real(host.dtype)
    with np.errstate(all="ignore"):
        try:
            return (np.linalg.norm(host, p, axis=(-2, -1)) * np.linalg.norm(inv(host), p, axis=(-2, -1))).astype(real)
        except LinAlgError:
            pass
        flat = host.reshape(-1, *host.shape[-2:])
        out = np.empty(len(flat), real)
        for i, mat in enumerate(flat):
            try:
                out[i] = np.linalg.norm(mat, p) * np.linalg.norm(inv(mat), p)
            except LinAlgError:
                out[i] = np.nan
    return out.reshape(host.shape[:-2]) if host.ndim > 2 else out[0]


# ----------------------------------------------------------------------------------------------------- norms, products
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
