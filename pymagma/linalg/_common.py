"""Shared parts of :mod:`pymagma.linalg`: NumPy's result types, the per-function native/hybrid/host paths, input
checks and the device helpers (LU pivots, stacks of matrices) the topics build on."""

from __future__ import annotations

import ctypes
import functools
from collections import namedtuple

import numpy as np

from .. import _checks, _magma, blas
from .._colmajor import ld as _ld
from .._colmajor import magma, pointer_array
from ..array import DeviceArray, asarray, copy_into, empty
from ..errors import LinAlgError, MagmaError

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


def _lib_has(name: str) -> bool:
    return magma().has(name)


def _host_matrices(a, what):
    """(host copy, on_host, device of the results) for the routines with a CPU interface."""
    a, on_host = _as_operand(a, what)
    return (a, True, None) if on_host else (a.get(), False, a.device)
