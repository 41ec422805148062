"""The public API end to end on a *simulated* device: device memory is host memory, the CUDA runtime calls are
memmove/memset, and each MAGMA routine is a plain NumPy model of its documented column-major semantics, called
with the arguments our code passes (checked against our tables: arity, integer sizes, enum values, scalar
ctypes).  This exercises every executor's argument order on the CPU; the real device runs are the ``gpu`` tests.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _magma, blas, linalg, memory
from pymagma import queue as queue_module
from pymagma import runtime as rt

from .helpers import BF16_CASE
from .helpers import random_values as values

M = _magma
ENUMS = {M.MagmaNoTrans, M.MagmaTrans, M.MagmaConjTrans, M.MagmaUpper, M.MagmaLower, M.MagmaFull, M.MagmaUnit,
         M.MagmaNonUnit, M.MagmaLeft, M.MagmaRight, M.MagmaNoVec, M.MagmaVec, M.MagmaAllVec, M.MagmaSomeVec}


# ----------------------------------------------------------------------------------------------------- memory model
def view(ptr, shape, strides, dtype):
    """A writable NumPy view of simulated device memory (shape and strides in elements)."""
    dtype = np.dtype(dtype)
    if 0 in shape:
        return np.zeros(shape, dtype)
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(ptr)
    return np.ndarray(shape, dtype, buffer=buf, strides=tuple(s * dtype.itemsize for s in strides))


def cm(ptr, rows, cols, ld, dtype):
    assert ld >= max(1, rows), f"leading dimension {ld} < rows {rows}: MAGMA would reject this"
    return view(ptr, (rows, cols), (1, ld), dtype)


def op(x, trans):
    return {M.MagmaNoTrans: x, M.MagmaTrans: x.T, M.MagmaConjTrans: np.conj(x.T)}[trans]


def address(x) -> int:
    if x is None:
        return 0
    if isinstance(x, int):
        return x
    if type(x).__name__ == "CArgObject":
        return ctypes.addressof(x._obj)
    return ctypes.addressof(x)


def value(x):
    if isinstance(x, ctypes.Structure):
        return complex(x.real, x.imag)
    return getattr(x, "value", x)


# ----------------------------------------------------------------------------------------------------- MAGMA model
def _ints(ptr, n):
    return view(address(ptr), (n,), (1,), M.MAGMA_INT)


def gemm(k, dt):  # as in BLAS, beta = 0 means C is not read (it may hold NaNs)
    A = cm(k["dA"], *((k["m"], k["k"]) if k["transA"] == M.MagmaNoTrans else (k["k"], k["m"])), k["ldda"], dt)
    B = cm(k["dB"], *((k["k"], k["n"]) if k["transB"] == M.MagmaNoTrans else (k["n"], k["k"])), k["lddb"], dt)
    C = cm(k["dC"], k["m"], k["n"], k["lddc"], dt)
    C[...] = k["alpha"] * (op(A, k["transA"]) @ op(B, k["transB"])) + (k["beta"] * C if k["beta"] else 0)


def gemm_batched(k, dt):
    ptrs = [view(k[f"d{x}_array"], (k["batchCount"],), (1,), np.int64) for x in "ABC"]
    for a, b, c in zip(*ptrs):
        gemm(dict(k, dA=int(a), dB=int(b), dC=int(c)), dt)


def gemm_strided(k, dt):
    item = np.dtype(dt).itemsize
    for i in range(k["batchCount"]):
        gemm(dict(k, dA=k["dA"] + i * k["strideA"] * item, dB=k["dB"] + i * k["strideB"] * item,
                  dC=k["dC"] + i * k["strideC"] * item), dt)


def gemv(k, dt):
    A = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    lx, ly = (k["n"], k["m"]) if k["transA"] == M.MagmaNoTrans else (k["m"], k["n"])
    x = view(k["dx"], (lx,), (k["incx"],), dt).copy()
    y = view(k["dy"], (ly,), (k["incy"],), dt)
    y[...] = k["alpha"] * (op(A, k["transA"]) @ x) + (k["beta"] * y if k["beta"] else 0)


def trsm(k, dt):
    na = k["m"] if k["side"] == M.MagmaLeft else k["n"]
    A = cm(k["dA"], na, na, k["ldda"], dt).copy()
    A = np.tril(A) if k["uplo"] == M.MagmaLower else np.triu(A)
    if k["diag"] == M.MagmaUnit:
        np.fill_diagonal(A, 1)
    B = cm(k["dB"], k["m"], k["n"], k["lddb"], dt)
    opA = op(A, k["trans"])
    B[...] = np.linalg.solve(opA, k["alpha"] * B) if k["side"] == M.MagmaLeft else \
        np.linalg.solve(opA.T, (k["alpha"] * B).T).T


def syrk(k, dt):
    n = k["n"]
    A = cm(k["dA"], *((n, k["k"]) if k["trans"] == M.MagmaNoTrans else (k["k"], n)), k["ldda"], dt)
    C = cm(k["dC"], n, n, k["lddc"], dt)
    full = k["alpha"] * (A @ A.T if k["trans"] == M.MagmaNoTrans else A.T @ A) + (k["beta"] * C if k["beta"] else 0)
    mask = np.tril(np.ones((n, n), bool)) if k["uplo"] == M.MagmaLower else np.triu(np.ones((n, n), bool))
    C[mask] = full[mask]


def transpose(k, dt):
    src = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    cm(k["dAT"], k["n"], k["m"], k["lddat"], dt)[...] = src.T


def laswp(k, dt):  # the matrix is stored row-wise: row i starts at dAT + i * ldda
    assert k["ldda"] >= k["n"] and k["inci"] == 1
    piv = view(address(k["ipiv"]), (k["k2"],), (1,), M.MAGMA_INT)
    rows = view(k["dAT"], (k["k2"], k["n"]), (k["ldda"], 1), dt)
    for i in range(k["k1"] - 1, k["k2"]):
        j = piv[i] - 1
        if j >= rows.shape[0]:
            rows = view(k["dAT"], (j + 1, k["n"]), (k["ldda"], 1), dt)
        rows[[i, j]] = rows[[j, i]]


def getrf(k, dt):
    m, n = k["m"], k["n"]
    A = cm(k["dA"], m, n, k["ldda"], dt)
    ipiv, info = _ints(k["ipiv"], min(m, n)), _ints(k["info"], 1)
    info[0] = 0
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(A[j:, j])))
        ipiv[j] = p + 1
        A[[j, p]] = A[[p, j]]
        if A[j, j] == 0:
            info[0] = info[0] or j + 1
            continue
        A[j + 1:, j] /= A[j, j]
        A[j + 1:, j + 1:] -= np.outer(A[j + 1:, j], A[j, j + 1:])
    return int(info[0])


def trsm_batched(k, dt):
    a = view(k["dA_array"], (k["batchCount"],), (1,), np.int64)
    b = view(k["dB_array"], (k["batchCount"],), (1,), np.int64)
    for pa, pb in zip(a, b):
        trsm(dict(k, dA=int(pa), dB=int(pb), trans=k["transA"]), dt)


def transpose_batched(k, dt):
    src = view(k["dA_array"], (k["batchCount"],), (1,), np.int64)
    dst = view(k["dAT_array"], (k["batchCount"],), (1,), np.int64)
    for a, at in zip(src, dst):
        transpose(dict(k, dA=int(a), dAT=int(at)), dt)


def getrf_batched(k, dt):
    count, item = k["batchCount"], np.dtype(M.MAGMA_INT).itemsize
    mats = view(k["dA_array"], (count,), (1,), np.int64)
    pivs = view(k["ipiv_array"], (count,), (1,), np.int64)
    for i in range(count):
        getrf(dict(k, dA=int(mats[i]), ldda=k["lda"], ipiv=int(pivs[i]), info=k["info_array"] + i * item), dt)
    return 0


def potrf(k, dt):
    assert k["uplo"] == M.MagmaLower
    n = k["n"]
    A = cm(k["dA"], n, n, k["ldda"], dt)
    info = _ints(k["info"], 1)
    for order in range(1, n + 1):
        try:
            np.linalg.cholesky(A[:order, :order])
        except np.linalg.LinAlgError:
            info[0] = order
            return order
    A[...] = np.where(np.tril(np.ones((n, n), bool)), np.linalg.cholesky(A), A)
    info[0] = 0
    return 0


def potrf_batched(k, dt):
    count, item = k["batchCount"], np.dtype(M.MAGMA_INT).itemsize
    for i, ptr in enumerate(view(k["dA_array"], (count,), (1,), np.int64)):
        potrf(dict(k, dA=int(ptr), ldda=k["lda"], info=k["info_array"] + i * item), dt)
    return 0


def potrs(k, dt):
    assert k["uplo"] == M.MagmaLower
    n = k["n"]
    L = np.tril(cm(k["dA"], n, n, k["ldda"], dt))
    B = cm(k["dB"], n, k["nrhs"], k["lddb"], dt)
    B[...] = np.linalg.solve(L @ np.conj(L.T), B)
    _ints(k["info"], 1)[0] = 0
    return 0


def potrs_batched(k, dt):
    pairs = zip(*(view(k[f"d{x}_array"], (k["batchCount"],), (1,), np.int64) for x in "AB"))
    for a, b in pairs:
        potrs(dict(k, dA=int(a), dB=int(b), info=ctypes.byref(M.MAGMA_INT())), dt)
    return 0


def laset(k, dt):
    A = cm(k["dA"], k["m"], k["n"], k["ldda"], dt)
    r, c = np.indices(A.shape)
    part = {M.MagmaLower: r > c, M.MagmaUpper: r < c, M.MagmaFull: r != c}[k["uplo"]]
    A[part] = k["offdiag"]
    np.fill_diagonal(A, k["diag"])


# LAPACK drivers (the QR model keeps the Q that LAPACK would encode in the reflectors in a side table keyed by tau)
_Q_BY_TAU: dict[int, np.ndarray] = {}
NB = 32


def _set_info(k, v):
    _ints(k["info"], 1)[0] = v
    return v


def geqrf2(k, dt):
    m, n = k["m"], k["n"]
    A = cm(k["dA"], m, n, k["ldda"], dt)
    q, r = np.linalg.qr(A)
    _Q_BY_TAU[address(k["tau"])] = q
    A[: r.shape[0], :] = np.where(np.triu(np.ones(r.shape, bool)), r, A[: r.shape[0], :])
    return _set_info(k, 0)


def orgqr2(k, dt):
    q = _Q_BY_TAU[address(k["tau"])]
    assert k["k"] == q.shape[1] and k["m"] == q.shape[0]
    cm(address(k["A"]), k["m"], k["n"], k["lda"], dt)[...] = q[:, : k["n"]]
    return _set_info(k, 0)


def gels(k, dt):
    assert k["trans"] == M.MagmaNoTrans
    m, n = k["m"], k["n"]
    need = (m - n + NB) * (k["nrhs"] + NB) + k["nrhs"] * NB  # MAGMA's minimum (m >= n), also its query answer
    if k["lwork"] == -1:
        view(address(k["hwork"]), (1,), (1,), dt)[0] = need
        return _set_info(k, 0)
    assert k["lwork"] >= need, f"hwork: {k['lwork']} < {need}"
    A = cm(k["dA"], m, n, k["ldda"], dt)
    B = cm(k["dB"], m, k["nrhs"], k["lddb"], dt)
    q, r = np.linalg.qr(A, mode="complete")
    qb = np.conj(q.T) @ B
    B[:n] = np.linalg.solve(r[:n, :n], qb[:n])
    B[n:] = qb[n:]
    return _set_info(k, 0)


def _query(k, sizes):
    """Workspace query (lwork = -1): report sizes; otherwise check the caller gave at least that much."""
    if k["lwork"] == -1:
        for name, size in sizes.items():
            view(address(k[name]), (1,), (1,), np.float64 if name == "rwork" else k["_dt"] if name == "work"
                 else M.MAGMA_INT)[0] = size
        return True
    for name, size in sizes.items():
        assert k["l" + name] >= size, f"{name}: {k['l' + name]} < {size}"
    return False


def syevd(k, dt):
    n = k["n"]
    real = np.float32 if np.dtype(dt) in (np.float32, np.complex64) else np.float64
    k["_dt"] = dt
    sizes = {"work": 2 * n * n + 6 * n + 1, "iwork": 5 * n + 3}
    if np.iscomplexobj(np.zeros(1, dt)):
        sizes["rwork"] = 2 * n * n + 5 * n + 1
    if "rwork" in k and k["lwork"] == -1:
        view(address(k["rwork"]), (1,), (1,), real)[0] = sizes.pop("rwork")
    if _query(k, sizes):
        return _set_info(k, 0)
    assert k["ldwa"] >= n and k["jobz"] == M.MagmaVec
    A = cm(k["dA"], n, n, k["ldda"], dt)
    w, v = np.linalg.eigh(A, UPLO="L" if k["uplo"] == M.MagmaLower else "U")
    view(address(k["w"]), (n,), (1,), real)[...] = w
    A[...] = v
    return _set_info(k, 0)


def gesdd(k, dt):
    m, n = k["m"], k["n"]
    kk = min(m, n)
    k["_dt"] = dt
    if _query(k, {"work": 3 * kk + max(m, n) + 5 * kk * kk}):
        return _set_info(k, 0)
    real = np.float32 if np.dtype(dt) in (np.float32, np.complex64) else np.float64
    A = cm(address(k["A"]), m, n, k["lda"], dt)
    u, s, vt = np.linalg.svd(A, full_matrices=k["jobz"] == M.MagmaAllVec)
    view(address(k["s"]), (kk,), (1,), real)[...] = s
    if k["jobz"] != M.MagmaNoVec:
        cm(address(k["U"]), m, u.shape[1], k["ldu"], dt)[...] = u
        cm(address(k["VT"]), vt.shape[0], n, k["ldvt"], dt)[...] = vt
    return _set_info(k, 0)


def geev(k, dt):
    n = k["n"]
    k["_dt"] = dt
    if _query(k, {"work": 4 * n + 1}):
        return _set_info(k, 0)
    assert k["jobvl"] == M.MagmaNoVec and k["jobvr"] == M.MagmaVec
    A = cm(address(k["A"]), n, n, k["lda"], dt)
    w, v = np.linalg.eig(A)
    VR = cm(address(k["VR"]), n, n, k["ldvr"], dt)
    if "w" in k:
        view(address(k["w"]), (n,), (1,), dt)[...] = w
        VR[...] = v
        return _set_info(k, 0)
    view(address(k["wr"]), (n,), (1,), dt)[...] = w.real
    view(address(k["wi"]), (n,), (1,), dt)[...] = w.imag
    j = 0
    while j < n:  # LAPACK's real layout: a conjugate pair stores Re and Im of the first vector
        if w[j].imag != 0:
            VR[:, j], VR[:, j + 1] = v[:, j].real, v[:, j].imag
            j += 2
        else:
            VR[:, j] = v[:, j].real
            j += 1
    return _set_info(k, 0)


def vec(k, name, dt, n_key="n"):
    return view(k[f"d{name}"], (k[n_key],), (k[f"inc{name}"],), dt)


MODEL = {
    "magma_?gemm": gemm, "magmablas_?gemm_batched": gemm_batched, "magmablas_?gemm_batched_strided": gemm_strided,
    "magma_?gemv": gemv, "magma_?trsm": trsm, "magma_?syrk": syrk, "magmablas_?transpose": transpose,
    "magmablas_?laswp": laswp, "magma_?getrf_gpu": getrf, "magmablas_?transpose_batched": transpose_batched,
    "magma_?getrf_batched": getrf_batched, "magmablas_?trsm_batched": trsm_batched, "magma_?potrf_gpu": potrf,
    "magma_?potrf_batched": potrf_batched, "magma_?potrs_batched": potrs_batched,
    "magma_?potrs_gpu": potrs,
    "magmablas_?laset": laset, "magma_?geqrf2_gpu": geqrf2, "magma_?orgqr2": orgqr2, "magma_?gels_gpu": gels,
    "magma_get_?geqrf_nb": lambda k, dt: NB, "magma_?syevd_gpu": syevd, "magma_?gesdd": gesdd, "magma_?geev": geev,
    "magma_?axpy": lambda k, dt: vec(k, "y", dt).__setitem__(Ellipsis, vec(k, "y", dt) + k["alpha"] * vec(k, "x", dt)),
    "magma_?scal": lambda k, dt: vec(k, "x", dt).__setitem__(Ellipsis, k["alpha"] * vec(k, "x", dt)),
    "magma_?copy": lambda k, dt: vec(k, "y", dt).__setitem__(Ellipsis, vec(k, "x", dt).copy()),
    "magma_?dot": lambda k, dt: np.dot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?dotu": lambda k, dt: np.dot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?dotc": lambda k, dt: np.vdot(vec(k, "x", dt), vec(k, "y", dt)).item(),
    "magma_?nrm2": lambda k, dt: float(np.linalg.norm(vec(k, "x", dt))),
}


class SimulatedMagma:
    """Looks up a routine in our tables, checks the call against its signature, runs the NumPy model."""

    def __init__(self):
        self.calls: list[str] = []
        self.hidden: set[str] = set()  # families to report as not exported (exercises fallbacks)

    def bind(self, name):
        return getattr(self, name)

    def has(self, name):
        return name in M.SIGNATURES and M.SIGNATURES[name].family in MODEL and \
            M.SIGNATURES[name].family not in self.hidden

    def __getattr__(self, name):
        if name not in M.SIGNATURES:
            raise AttributeError(name)
        sig = M.SIGNATURES[name]
        model = MODEL.get(sig.family)
        if model is None:
            raise NotImplementedError(f"no simulation for {name}")

        def call(*args):
            """Check the Python-side arguments, then pass them through a real ctypes function pointer built from
            our prototype, so ctypes converts them exactly as for the native library."""
            assert len(args) == len(sig.args), f"{name}: {len(args)} arguments, the table has {len(sig.args)}"
            for (token, arg), v in zip(sig.args, args):
                if token in ("I", "E"):
                    assert type(v) is int or isinstance(v, np.integer), f"{name}({arg}) got {type(v).__name__}"
                    assert token == "I" or v in ENUMS, f"{name}({arg}) = {v} is not a MAGMA enum"
                elif token in ("S", "R"):
                    assert type(v) is M.ctype_of(token, sig.precision), f"{name}({arg}) got {type(v).__name__}"
            self.calls.append(name)
            dtype = np.dtype(M.PRECISIONS[sig.precision][3])
            restype, argtypes = sig.prototype()
            if isinstance(restype, type) and issubclass(restype, ctypes.Structure):  # callbacks cannot return these
                return model(_kwargs(sig, args), dtype)
            failure = []

            def native(*converted):
                try:
                    return model(_kwargs(sig, converted), dtype)
                except BaseException as exc:  # ctypes would swallow it: keep it for the caller
                    failure.append(exc)
                    return None if restype is None else restype().value

            result = ctypes.CFUNCTYPE(restype, *argtypes)(native)(*args)
            if failure:
                raise failure[0]
            return result

        return call


def _kwargs(sig, values_):
    out = {}
    for (token, arg), v in zip(sig.args, values_):
        if token in ("S", "R"):
            out[arg] = value(v)
        elif token in ("I", "E", "Q", "IH"):
            out[arg] = v
        else:
            out[arg] = address(v)
    return out


class FakeQueue:
    handle, stream, device = None, 0, 0

    def synchronize(self):
        pass


@pytest.fixture
def device(monkeypatch):
    """Host memory as device memory, the CUDA runtime as memmove, MAGMA as NumPy models."""
    return simulate_device(monkeypatch)


def simulate_device(monkeypatch) -> SimulatedMagma:
    """Install the simulated device with ``monkeypatch`` (a pytest MonkeyPatch); returns the simulated MAGMA."""
    blocks: dict[int, ctypes.Array] = {}

    def malloc(nbytes):
        buf = (ctypes.c_char * max(int(nbytes), 1))()
        blocks[ctypes.addressof(buf)] = buf
        return ctypes.addressof(buf)

    def copy2d(dst, dpitch, src, spitch, width, height, stream=None):
        assert dpitch >= width and spitch >= width, "cudaMemcpy2D rejects a pitch below the row width"
        for r in range(height):
            ctypes.memmove(dst + r * dpitch, src + r * spitch, width)

    monkeypatch.setattr(rt, "require_device", lambda: 1)
    monkeypatch.setattr(rt, "get_device", lambda: 0)
    monkeypatch.setattr(rt, "set_device", lambda device: None if device == 0 else pytest.fail(f"device {device}"))
    monkeypatch.setattr(rt, "_thread", threading.local())  # no "context bound" flag survives the fake device
    monkeypatch.setattr(rt, "malloc", malloc)
    monkeypatch.setattr(rt, "free", lambda ptr: blocks.pop(ptr, None))
    monkeypatch.setattr(rt, "memcpy_htod", lambda dst, src, stream=None: ctypes.memmove(dst, src.ctypes.data,
                                                                                        src.nbytes))
    monkeypatch.setattr(rt, "memcpy_dtoh", lambda dst, src, stream=None: ctypes.memmove(dst.ctypes.data, src,
                                                                                        dst.nbytes) and dst)
    monkeypatch.setattr(rt, "memcpy_dtod", lambda dst, src, n, stream=None: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(rt, "memcpy_2d", copy2d)
    monkeypatch.setattr(rt, "memset", lambda ptr, v, n, stream=None: ctypes.memset(ptr, v, n))
    monkeypatch.setattr(queue_module, "default_queue", lambda device=None: FakeQueue())
    sim = SimulatedMagma()
    monkeypatch.setattr(M, "initialized", lambda: sim)
    monkeypatch.setattr(memory, "_POOL", memory._Pool())
    return sim


# ----------------------------------------------------------------------------------------------------- tests
REUSE = [HealthCheck.function_scoped_fixture]  # the simulated device is stateless between examples
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype):
    return {"rtol": 1e-3, "atol": 1e-3} if np.dtype(dtype) in (np.float32, np.complex64) else \
        {"rtol": 1e-9, "atol": 1e-9}


def test_arrays_round_trip_through_simulated_memory(device):
    host = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    d = pymagma.asarray(host)
    np.testing.assert_array_equal(d.get(), host)
    np.testing.assert_array_equal(d.T.get(), host.T)
    np.testing.assert_array_equal(d[:, 1:, ::2].copy().get(), host[:, 1:, ::2])
    np.testing.assert_array_equal(pymagma.zeros((2, 2)).get(), 0)
    np.testing.assert_array_equal(pymagma.ones(3, np.complex64).get(), 1)
    assert memory.pool_stats()["in_use_bytes"] > 0


def test_bfloat16_arrays_convert_and_round_trip(device):
    pytest.importorskip("ml_dtypes")
    host = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    bf16 = pymagma.asarray(host).astype("bfloat16")
    assert bf16.dtype == pymagma.dtypes.bfloat16() and bf16.nbytes == host.size * 2
    np.testing.assert_array_equal(bf16.T.get(), host.T.astype(bf16.dtype))
    np.testing.assert_array_equal(bf16.astype(np.float32).get(), host)  # small integers are exact in bfloat16


def test_zero_dim_and_reversed_arrays(device):
    assert pymagma.asarray(3.5).shape == () and pymagma.asarray(3.5).get().shape == ()
    assert pymagma.ones((), np.float64).get().shape == ()
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = pymagma.asarray(host)
    for key in ((slice(None), slice(None, None, -1)), (slice(None, None, -1), slice(None), slice(1, None)),
                (Ellipsis, slice(None, None, -2))):
        np.testing.assert_array_equal(d[key].copy().get(), host[key])


@pytest.mark.parametrize("dtype", [*DTYPES, np.int32, np.float16, BF16_CASE])
def test_column_major_copies_transpose_on_the_device(device, dtype):
    host = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(dtype)
    d = pymagma.asarray(host)
    device.calls.clear()
    part = host[:, :2, 1:]
    for view, expected in ((d.mT, np.swapaxes(host, -1, -2)), (d[1].T, host[1].T),
                           (d[:, :2, 1:].mT, np.swapaxes(part, -1, -2))):
        np.testing.assert_array_equal(view.copy().get(), expected)
    transposed = [c for c in device.calls if c.startswith("magmablas_") and c.endswith("transpose")]
    assert len(transposed) == (5 if np.dtype(dtype) in DTYPES else 0)  # one per matrix; other dtypes via the host


@settings(max_examples=20, deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 6), k=st.integers(0, 6), n=st.integers(1, 6), ta=st.booleans(), tb=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_gemm_gemv(device, m, k, n, ta, tb, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (k, m) if ta else (m, k), dtype)
    b = values(rng, (n, k) if tb else (k, n), dtype)
    ea, eb = (a.T if ta else a), (b.T if tb else b)
    got = blas.gemm(pymagma.asarray(a), pymagma.asarray(b), trans_a=ta, trans_b=tb).get()
    np.testing.assert_allclose(got, ea @ eb, **tol(dtype))
    out = pymagma.asarray(np.ones((m, n), dtype)).T.copy().T  # a column-major output
    blas.gemm(pymagma.asarray(ea), pymagma.asarray(eb), out=out, alpha=2.0, beta=1.0)
    np.testing.assert_allclose(out.get(), 2 * ea @ eb + 1, **tol(dtype))
    if k:
        x = values(rng, (k,), dtype)
        np.testing.assert_allclose(blas.gemv(pymagma.asarray(ea), pymagma.asarray(x)).get(), ea @ x, **tol(dtype))


@settings(max_examples=15, deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2), m=st.integers(1, 4), k=st.integers(1, 4),
       n=st.integers(1, 4), method=st.sampled_from(["auto", "pointers"]), bcast=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_batched_and_matmul(device, batch, m, k, n, method, bcast, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (*batch, m, k), dtype)
    b = values(rng, (k, n) if bcast else (*batch, k, n), dtype)
    got = blas.gemm_batched(pymagma.asarray(a), pymagma.asarray(b), method=method).get()
    np.testing.assert_allclose(got, a @ b, **tol(dtype))
    expected_routine = f"magmablas_{M.precision_of(dtype)}gemm_batched" + ("_strided" if method == "auto" else "")
    assert device.calls[-1] == expected_routine
    np.testing.assert_allclose((pymagma.asarray(a) @ pymagma.asarray(b)).get(), a @ b, **tol(dtype))
    v = values(rng, (k,), dtype)
    np.testing.assert_allclose(blas.matmul(pymagma.asarray(a), pymagma.asarray(v)).get(), a @ v, **tol(dtype))
    np.testing.assert_allclose(blas.matmul(pymagma.asarray(v), pymagma.asarray(b)).get(), v @ b, **tol(dtype))


@pytest.mark.parametrize("rcond", [None, -1, 0.5])
@pytest.mark.parametrize("on_device", [False, True])
def test_lstsq_rcond_follows_numpy_including_negative(device, rcond, on_device):
    a = np.zeros((4, 3))
    a[[0, 1], [0, 1]] = 3.0, 1.0  # singular values 3, 1, 0 exactly; rcond=0.5 also drops the 1
    b = np.arange(1.0, 5.0)
    wrap = pymagma.asarray if on_device else (lambda v: v)
    x, res, rank, s = (pymagma.to_numpy(v) if isinstance(v, pymagma.DeviceArray) else v
                       for v in linalg.lstsq(wrap(a), wrap(b), rcond))
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond)
    assert rank == erank == (1 if rcond == 0.5 else 2)
    np.testing.assert_allclose(x, ex, atol=1e-12)
    assert res.shape == eres.shape == (0,)
    np.testing.assert_allclose(s, es)


def test_magma_calls_run_on_the_arrays_device_when_there_are_several(device, monkeypatch):
    """Two GPUs, device 0 current, arrays on device 1: each MAGMA call runs with device 1 current (its queue and
    cuBLAS handle belong there) and device 0 is current again afterwards."""
    current = {"device": 0}
    monkeypatch.setattr(rt, "device_count", lambda: 2)
    monkeypatch.setattr(rt, "require_device", lambda: 2)
    monkeypatch.setattr(rt, "get_device", lambda: current["device"])
    monkeypatch.setattr(rt, "set_device", lambda d: current.update(device=int(d)))

    class DeviceLog(list):
        def append(self, name):
            super().append((name, current["device"]))

    rng = np.random.default_rng(0)
    a, b = values(rng, (4, 4), np.float64) + 4 * np.eye(4), values(rng, (4, 2), np.float64)
    da, db = pymagma.asarray(a, device=1), pymagma.asarray(b, device=1)
    device.calls = DeviceLog()
    np.testing.assert_allclose((da @ db).get(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(linalg.solve(da, db).get(), np.linalg.solve(a, b), rtol=1e-10)
    assert device.calls and {d for _, d in device.calls} == {1}, device.calls
    assert current["device"] == 0


def test_huge_strided_batches_are_split_below_magmas_offset_range(device, monkeypatch):
    """MAGMA forms i * stride in 32-bit magma_int_t; with the limit shrunk to 50 elements, a batch of 7 (3, 4) @
    (4, 2) products (largest stride 12) runs as calls of at most 4 matrices, with the same result."""
    monkeypatch.setattr(blas, "MAX_BATCH_OFFSET", 50)
    rng = np.random.default_rng(0)
    a, b = values(rng, (7, 3, 4), np.float64), values(rng, (7, 4, 2), np.float64)
    device.calls.clear()
    np.testing.assert_allclose(blas.gemm_batched(pymagma.asarray(a), pymagma.asarray(b)).get(), a @ b, rtol=1e-12)
    assert [c for c in device.calls if c.endswith("strided")] == ["magmablas_dgemm_batched_strided"] * 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_level1(device, dtype):
    rng = np.random.default_rng(0)
    x, y = values(rng, (9,), dtype), values(rng, (9,), dtype)
    dy = pymagma.asarray(y)
    blas.axpy(2.0, pymagma.asarray(x), dy)
    np.testing.assert_allclose(dy.get(), y + 2 * x, **tol(dtype))
    dx = pymagma.asarray(x)
    blas.scal(3.0, dx)
    np.testing.assert_allclose(dx.get(), 3 * x, **tol(dtype))
    np.testing.assert_allclose(blas.dot(pymagma.asarray(x), pymagma.asarray(y)), np.dot(x, y), **tol(dtype))
    np.testing.assert_allclose(blas.dot(pymagma.asarray(x), pymagma.asarray(y), conjugate=True), np.vdot(x, y),
                               **tol(dtype))
    np.testing.assert_allclose(blas.nrm2(pymagma.asarray(x)), np.linalg.norm(x), **tol(dtype))


@settings(max_examples=15, deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), k=st.integers(1, 4), side=st.sampled_from(["left", "right"]), lower=st.booleans(),
       trans=st.booleans(), unit=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_trsm_syrk(device, n, k, side, lower, trans, unit, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (n, n), dtype) + 4 * np.eye(n, dtype=dtype)
    b = values(rng, (n, k) if side == "left" else (k, n), dtype)
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        np.fill_diagonal(tri, 1)
    opa = tri.T if trans else tri
    db = pymagma.asarray(b)
    blas.trsm(pymagma.asarray(a), db, side=side, lower=lower, trans=trans, unit_diagonal=unit)
    expected = np.linalg.solve(opa, b) if side == "left" else b @ np.linalg.inv(opa)
    np.testing.assert_allclose(db.get(), expected, **tol(dtype))
    c = blas.syrk(pymagma.asarray(b), lower=lower).get()
    t = np.tril if lower else np.triu
    np.testing.assert_allclose(t(c), t(b @ b.T), **tol(dtype))


@settings(max_examples=15, deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 2), max_size=2), n=st.integers(1, 6), k=st.integers(1, 3),
       vector=st.booleans(), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999),
       batched=st.booleans())
def test_lu_family(device, batch, n, k, vector, on_device, dtype, seed, batched):
    device.hidden = set() if batched else {"magma_?getrf_batched", "magmablas_?trsm_batched"}
    device.calls.clear()
    rng = np.random.default_rng(seed)
    a = values(rng, (*batch, n, n), dtype) + n * np.eye(n, dtype=dtype)
    b = values(rng, (n,) if vector else (*batch, n, k), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    x = linalg.solve(wrap(a), wrap(b))
    assert isinstance(x, pymagma.DeviceArray) == on_device
    expected = np.linalg.solve(a, b[..., None])[..., 0] if vector else np.linalg.solve(a, b)
    np.testing.assert_allclose(pymagma.to_numpy(x), expected, **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.inv(wrap(a))), np.linalg.inv(a), **tol(dtype))
    np.testing.assert_allclose(linalg.det(wrap(a)), np.linalg.det(a), rtol=1e-3 if tol(dtype)["rtol"] > 1e-6
                               else 1e-9)
    sign, logdet = linalg.slogdet(a)
    esign, elogdet = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, esign, **tol(dtype))
    np.testing.assert_allclose(logdet, elogdet, **tol(dtype))
    lu, piv = linalg.lu_factor(wrap(a))
    lu = pymagma.to_numpy(lu)
    assert piv.dtype == np.int32 and piv.shape == (*batch, n) and piv.min() >= 0
    for idx in np.ndindex(*batch):  # P A = L U for every matrix
        perm = np.arange(n)
        for i, p in enumerate(piv[idx]):
            perm[[i, p]] = perm[[p, i]]
        lower, upper = np.tril(lu[idx], -1) + np.eye(n), np.triu(lu[idx])
        np.testing.assert_allclose(lower @ upper, a[idx][perm], **tol(dtype))
    if batch:
        assert any(c.endswith("getrf_batched") for c in device.calls) == batched
        assert any(c.endswith("trsm_batched") for c in device.calls) == batched


def test_singular_matrix_names_the_pivot(device):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match="pivot 2"):
        linalg.solve(a, np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix \(1,\) is singular: pivot 2"):
        linalg.solve(np.stack([np.eye(2), a]), np.ones((2, 2, 1)))
    assert linalg.det(a) == 0
    sign, logdet = linalg.slogdet(a)
    assert sign == 0 and logdet == -np.inf


@settings(max_examples=10, deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_cholesky_family(device, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (n, n), dtype)
    a = (g @ np.conj(g.T) + n * np.eye(n)).astype(dtype)
    b = values(rng, (n, 2), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    c = linalg.cholesky(wrap(a))
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.cho_solve((c, True), wrap(b))), np.linalg.solve(a, b),
                               **tol(dtype))
    with pytest.raises(np.linalg.LinAlgError, match="leading minor of order 2"):
        linalg.cholesky(np.array([[1, 2], [2, 1]], dtype))


@settings(max_examples=10, deadline=None, suppress_health_check=REUSE)
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2), n=st.integers(1, 5), on_device=st.booleans(),
       batched=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_stacked_cholesky_and_cho_solve_use_batched_routines(device, batch, n, on_device, batched, dtype, seed):
    device.hidden = set() if batched else {"magma_?potrf_batched", "magma_?potrs_batched"}
    device.calls.clear()
    rng = np.random.default_rng(seed)
    g = values(rng, (*batch, n, n), dtype)
    a = (g @ np.conj(np.swapaxes(g, -1, -2)) + n * np.eye(n)).astype(dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    c = linalg.cholesky(wrap(a))
    assert isinstance(c, pymagma.DeviceArray) == on_device
    np.testing.assert_allclose(pymagma.to_numpy(c), np.linalg.cholesky(a), **tol(dtype))
    for b in (values(rng, (*batch, n, 2), dtype), values(rng, (n, 1), dtype)):  # a stack, and one b broadcast
        x = linalg.cho_solve((c, True), wrap(b))
        np.testing.assert_allclose(pymagma.to_numpy(x), np.linalg.solve(a, b), **tol(dtype))
    assert any(name.endswith("potrf_batched") for name in device.calls) == batched
    assert any(name.endswith("potrs_batched") for name in device.calls) == batched
    bad = np.array(a)
    bad[(0,) * len(batch)] = np.diag(np.r_[1.0, -1.0, np.ones(n)][:n]) if n > 1 else -1
    with pytest.raises(np.linalg.LinAlgError, match=f"leading minor of order {min(n, 2)}"):
        linalg.cholesky(bad)


@settings(max_examples=15, deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 6), n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 999))
def test_qr(device, m, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    a = values(rng, (m, n), dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    q, r = linalg.qr(wrap(a))
    q, r = pymagma.to_numpy(q), pymagma.to_numpy(r)
    np.testing.assert_allclose(q @ r, a, **tol(dtype))
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    np.testing.assert_allclose(np.conj(q.T) @ q, np.eye(min(m, n)), **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.qr(wrap(a), mode="r")), r, **tol(dtype))


@settings(max_examples=25, deadline=None, suppress_health_check=REUSE)
@given(m=st.integers(1, 7), n=st.integers(1, 7), rank=st.integers(0, 7), cols=st.sampled_from([None, 3, 40]),
       on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_lstsq_matches_numpy_for_every_shape_and_rank(device, m, n, rank, cols, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    rank = min(rank, m, n)
    u, v = np.linalg.qr(values(rng, (m, m), np.complex128 if np.iscomplexobj(dtype(0)) else np.float64))[0], \
        np.linalg.qr(values(rng, (n, n), np.complex128 if np.iscomplexobj(dtype(0)) else np.float64))[0]
    sigma = np.zeros((m, n))
    sigma[range(rank), range(rank)] = rng.uniform(1.0, 2.0, rank)  # exactly `rank` singular values, well apart
    a = (u @ sigma @ v).astype(dtype)
    b = values(rng, (m,) if cols is None else (m, cols), dtype)  # 40 columns: more than MAGMA's block size
    rcond = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    wrap = pymagma.asarray if on_device else (lambda v: v)
    x, res, r, s = linalg.lstsq(wrap(a), wrap(b), rcond=rcond)
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond=rcond)
    assert isinstance(x, pymagma.DeviceArray) == on_device
    assert r == erank == rank
    for got, want in ((x, ex), (res, eres), (s, es)):
        got = pymagma.to_numpy(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **tol(dtype))
    if rank == n <= m:  # full column rank: MAGMA's gels gives the same answer on the device
        x, res, r, s = linalg.lstsq(wrap(a), wrap(b), method="qr")
        assert (r, s) == (n, None)
        for got, want in ((x, ex), (res, eres)):
            got = pymagma.to_numpy(got)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, **tol(dtype))


@settings(max_examples=15, deadline=None, suppress_health_check=REUSE)
@given(n=st.integers(1, 6), on_device=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 999))
def test_eigh_svd_eig(device, n, on_device, dtype, seed):
    rng = np.random.default_rng(seed)
    g = values(rng, (n, n), dtype)
    h = (g + np.conj(g.T)).astype(dtype)
    wrap = pymagma.asarray if on_device else (lambda x: x)
    w, v = linalg.eigh(wrap(h))
    w, v = pymagma.to_numpy(w), pymagma.to_numpy(v)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), **tol(dtype))
    np.testing.assert_allclose(h @ v, v * w, **tol(dtype))
    t = values(rng, (n + 1, n), dtype)
    for full in (True, False):
        u, s, vt = (pymagma.to_numpy(x) for x in linalg.svd(wrap(t), full_matrices=full))
        assert u.shape == ((n + 1, n + 1) if full else (n + 1, n))
        np.testing.assert_allclose((u[:, :n] * s) @ vt, t, **tol(dtype))
    np.testing.assert_allclose(pymagma.to_numpy(linalg.svd(wrap(t), compute_uv=False)),
                               np.linalg.svd(t, compute_uv=False), **tol(dtype))
    w, v = (pymagma.to_numpy(x) for x in linalg.eig(wrap(g)))
    np.testing.assert_allclose(g @ v, v * w, **tol(dtype))
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.linalg.eigvals(g)), **tol(dtype))


@pytest.mark.parametrize("on_device", [False, True])
def test_empty_stacks_give_empty_results_like_numpy(device, on_device):
    wrap = pymagma.asarray if on_device else (lambda x: x)
    a, b, v = np.zeros((0, 3, 3)), np.zeros((0, 3, 2)), np.zeros(3)
    expected = {
        "solve vector": (linalg.solve(wrap(a), wrap(v)), np.linalg.solve(a, v)),
        "cho_solve vector": (linalg.cho_solve((wrap(a), True), wrap(v)), np.linalg.solve(a, v)),
        "solve": (linalg.solve(wrap(a), wrap(b)), np.linalg.solve(a, b)),
        "inv": (linalg.inv(wrap(a)), np.linalg.inv(a)),
        "det": (linalg.det(wrap(a)), np.linalg.det(a)),
        "cholesky": (linalg.cholesky(wrap(a)), np.linalg.cholesky(a)),
        "cho_solve": (linalg.cho_solve((wrap(a), True), wrap(b)), np.linalg.solve(a, b)),
        "qr": (linalg.qr(wrap(b)), np.linalg.qr(b)),
        "qr r": (linalg.qr(wrap(b), mode="r"), np.linalg.qr(b, mode="r")),
        "eigh": (linalg.eigh(wrap(a)), np.linalg.eigh(a)),
        "svd": (linalg.svd(wrap(b)), np.linalg.svd(b)),
        "svd reduced": (linalg.svd(wrap(b), full_matrices=False), np.linalg.svd(b, full_matrices=False)),
        "svd values": (linalg.svd(wrap(b), compute_uv=False), np.linalg.svd(b, compute_uv=False)),
        "eig": (linalg.eig(wrap(a)), np.linalg.eig(a)),
    }
    lu, piv = linalg.lu_factor(wrap(a))
    assert lu.shape == (0, 3, 3) and piv.shape == (0, 3)
    expected["lu_solve"] = (linalg.lu_solve((lu, piv), wrap(b)), np.linalg.solve(a, b))
    for name, (got, want) in expected.items():
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, pymagma.DeviceArray) == (on_device and name != "det"), name
            g = pymagma.to_numpy(g)
            assert (g.shape, g.dtype) == (w.shape, w.dtype), name
