"""Tier 1 of ``gpu_check.sh``: the checks that settle the core on a GPU in its first minutes (3 at most).

Each check is one function registered with :func:`tier1` and its time limit; it returns its figures (a dict) and
raises on a wrong answer (the runner records the error verbatim). ``Ctx`` says where it runs: on a GPU against
PyTorch on CUDA, or in a dry run on pymagma's simulator against PyTorch on the CPU (the same logic, small sizes).
A new device feature that can change results adds its check here (or marks its gpu test ``tier1``), keeping the
sum of the limits at most :data:`TIER1_BUDGET_S` (``tests/test_gpu_check.py`` checks it).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: tier 1's planned time limits add up to at most this (seconds), the pytest group of ``tier1``-marked tests included
TIER1_BUDGET_S = 180
#: losses and weights of the GPU against the simulator: the tolerance of tests/magmadnn/suites/test_parity.py
LOSS_TOL = {"rtol": 2e-4, "atol": 2e-5}
WEIGHT_TOL = {"rtol": 2e-3, "atol": 2e-4}
#: a mixed-precision (bfloat16) step: one bfloat16 ulp relative (tests/magmadnn/test_mixed_precision.py)
MIXED_RTOL = 2.0**-8


@dataclass(frozen=True)
class Ctx:
    dry_run: bool

    @property
    def torch_device(self) -> str:
        return "cpu" if self.dry_run else "cuda"

    def size(self, gpu: int, dry: int) -> int:
        return dry if self.dry_run else gpu


@dataclass(frozen=True)
class Check:
    name: str
    limit_s: int
    what: str
    run: Callable[[Ctx], dict]


TIER1: list[Check] = []


def tier1(limit_s: int, what: str):
    """Register a tier-1 check with its time limit (seconds, the worker's imports included for the first)."""
    def decorate(fn):
        TIER1.append(Check(fn.__name__, limit_s, what, fn))
        return fn
    return decorate


def _torch():
    import torch

    return torch


def _rel_err(got, ref) -> float:
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def _no_worse(name: str, ours: float, theirs: float, floor: float) -> None:
    """pymagma's error against float64 is at most twice PyTorch's on the same device (or under ``floor``)."""
    if ours > max(2 * theirs, floor):
        raise AssertionError(f"{name}: pymagma's relative error {ours:.3e} > 2x PyTorch's {theirs:.3e}")


# ------------------------------------------------------------------------------------------------- libraries
@tier1(25, "MAGMA (PyTorch's wheel), cuDNN, cuBLAS, NVRTC, cuFFT found and loaded; the device seen")
def libraries(ctx: Ctx) -> dict:
    import pymagma

    torch = _torch()
    report = pymagma.info()
    nv = report["nvidia"]
    missing = [name for name in ("cudart", "cublas", "cudnn", "nvrtc") if not nv.get(name, {}).get("found")]
    if not report["magma"]["found"]:
        missing.append("magma")
    if "cufft" in nv and not nv["cufft"].get("found"):  # checked once pymagma binds cuFFT
        missing.append("cufft")
    if missing:
        raise AssertionError(f"not found: {missing}; pymagma.info(): {report.get('missing')}")
    figures = {"magma": f"{report['magma'].get('version')} ({report['magma'].get('source')})",
               "cudnn": nv["cudnn"].get("version"), "cublas": nv["cublas"].get("version"),
               "nvrtc": nv["nvrtc"].get("version"), "cuda_runtime": report["cuda"].get("runtime_version"),
               "cufft": nv["cufft"].get("version") if "cufft" in nv else "not bound by pymagma yet",
               "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    if not ctx.dry_run:
        cuda = report["cuda"]
        if not cuda.get("device_count"):
            raise AssertionError(f"no CUDA device: {cuda.get('no_device_reason')}")
        props = pymagma.runtime.device_properties(0)
        figures.update(driver=cuda.get("driver_version"), device=props.get("name"),
                       compute_capability=".".join(map(str, props.get("compute_capability", ()))))
        pymagma.asarray(np.ones(4, np.float32)).get()  # the context and a round trip
    return figures


# ------------------------------------------------------------------------------------------------------ BLAS
def _gemm_case(ctx: Ctx, m: int, k: int, n: int, half: str | None, seed: int) -> tuple[float, float]:
    import pymagma
    from pymagma import blas

    torch = _torch()
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    if half:
        import ml_dtypes

        a, b = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
        ours = blas.matmul(pymagma.asarray(a), pymagma.asarray(b), out_dtype="float32").get()
        ta, tb = (torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).to(ctx.torch_device) for x in (a, b))
        # PyTorch's CPU has no mm.dtype: there float32 sums of the (exact) bf16 products, as cuBLAS does
        theirs = (torch.mm(ta.float(), tb.float()) if ctx.dry_run else torch.mm(ta, tb, out_dtype=torch.float32))
        theirs = theirs.cpu().numpy()
    else:
        ours = blas.matmul(pymagma.asarray(a), pymagma.asarray(b)).get()
        theirs = torch.mm(torch.from_numpy(a).to(ctx.torch_device), torch.from_numpy(b).to(ctx.torch_device))
        theirs = theirs.cpu().numpy()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    return _rel_err(ours, exact), _rel_err(theirs, exact)


@tier1(15, "gemm small and large, float32 and bf16 (float32 out), batched gemm, against torch and float64")
def gemm(ctx: Ctx) -> dict:
    import pymagma
    from pymagma import blas

    torch = _torch()
    torch.backends.cuda.matmul.allow_tf32 = False  # pymagma.blas.allow_tf32 is False too: plain float32
    large = ctx.size(4096, 192)
    figures = {}
    for label, (m, k, n) in {"small": (37, 53, 29), "large": (large, large, large)}.items():
        ours, theirs = _gemm_case(ctx, m, k, n, None, 1)
        _no_worse(f"float32 {label}", ours, theirs, 1e-6)
        figures[f"float32_{label}_err"] = f"{ours:.2e} (torch {theirs:.2e})"
        try:
            ours, theirs = _gemm_case(ctx, m, k, n, "bfloat16", 2)
        except ImportError:
            figures[f"bf16_{label}_err"] = "skipped: ml_dtypes is not installed"
            continue
        _no_worse(f"bf16 {label}", ours, theirs, 1e-5)
        figures[f"bf16_{label}_err"] = f"{ours:.2e} (torch {theirs:.2e})"
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((8, 64, 32)).astype(np.float32), rng.standard_normal((8, 32, 48)).astype(np.float32)
    ours = blas.gemm_batched(pymagma.asarray(a), pymagma.asarray(b)).get()
    theirs = torch.bmm(torch.from_numpy(a).to(ctx.torch_device), torch.from_numpy(b).to(ctx.torch_device))
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    e_ours, e_theirs = _rel_err(ours, exact), _rel_err(theirs.cpu().numpy(), exact)
    _no_worse("batched", e_ours, e_theirs, 1e-6)
    figures["batched_err"] = f"{e_ours:.2e} (torch {e_theirs:.2e})"
    return figures


# ---------------------------------------------------------------------------------------------------- LAPACK
@tier1(10, "linalg.solve and cholesky, float32 and float64, against NumPy")
def linalg(ctx: Ctx) -> dict:
    import pymagma
    from pymagma import linalg as la

    n = ctx.size(1024, 96)
    rng = np.random.default_rng(4)
    figures = {}
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-3)):
        a = rng.standard_normal((n, n)) + n**0.5 * np.eye(n)
        spd = a @ a.T + n * np.eye(n)
        b = rng.standard_normal((n, 3))
        x = la.solve(pymagma.asarray(a.astype(dtype)), pymagma.asarray(b.astype(dtype))).get()
        err = _rel_err(x, np.linalg.solve(a, b))
        c = la.cholesky(pymagma.asarray(spd.astype(dtype))).get()
        err_c = _rel_err(np.tril(c), np.linalg.cholesky(spd))
        name = np.dtype(dtype).name
        if err > tol or err_c > tol:
            raise AssertionError(f"{name}: solve error {err:.2e}, cholesky error {err_c:.2e} > {tol:g} (n={n})")
        figures[f"{name}_solve_err"], figures[f"{name}_cholesky_err"] = f"{err:.2e}", f"{err_c:.2e}"
    figures["paths"] = {k: v for k, v in la.paths(np.float64).items() if k in ("solve", "cholesky")}
    return figures


# ------------------------------------------------------------------------------------------------------ cuDNN
@tier1(10, "convolution forward/backward and max/average pooling forward/backward against torch.nn.functional")
def conv_pool(ctx: Ctx) -> dict:
    import pymagma
    from pymagma import dnn

    torch = _torch()
    F = torch.nn.functional
    torch.backends.cudnn.allow_tf32 = False
    tf32, dnn.allow_tf32 = dnn.allow_tf32, False  # plain float32 on both sides
    try:
        rng = np.random.default_rng(5)
        x = rng.standard_normal((8, 3, 28, 28)).astype(np.float32)
        w = rng.standard_normal((16, 3, 5, 5)).astype(np.float32)
        bias = rng.standard_normal(16).astype(np.float32)
        tx, tw, tb = (torch.from_numpy(v).to(ctx.torch_device).requires_grad_() for v in (x, w, bias))
        ty = F.conv2d(tx, tw, tb, stride=1, padding=2)
        dy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(dy).to(ctx.torch_device))
        dx_, dw_, dy_ = (pymagma.asarray(v) for v in (x, w, dy))
        got = {"forward": dnn.conv2d_forward(dx_, dw_, pymagma.asarray(bias), stride=1, padding=2).get(),
               "backward_data": dnn.conv2d_backward_data(dy_, dw_, x.shape, stride=1, padding=2).get(),
               "backward_filter": dnn.conv2d_backward_filter(dx_, dy_, w.shape, stride=1, padding=2).get(),
               "backward_bias": dnn.conv2d_backward_bias(dy_).get()}
        want = {"forward": ty, "backward_data": tx.grad, "backward_filter": tw.grad, "backward_bias": tb.grad}
        figures, pool_grads = {}, {}
        for mode, fn in (("max", F.max_pool2d), ("avg", F.avg_pool2d)):
            px = torch.from_numpy(x).to(ctx.torch_device).requires_grad_()
            py = fn(px, 2, 2)
            pdy = rng.standard_normal(tuple(py.shape)).astype(np.float32)
            py.backward(torch.from_numpy(pdy).to(ctx.torch_device))
            pool_grads[mode] = pdy
            y = dnn.pool2d_forward(dx_, 2, 2, mode=mode)
            got[f"{mode}_pool"] = y.get()
            got[f"{mode}_pool_backward"] = dnn.pool2d_backward(y, pymagma.asarray(pdy), dx_, 2, 2, mode=mode).get()
            want[f"{mode}_pool"], want[f"{mode}_pool_backward"] = py, px.grad
        exact = _float64_conv_pool(torch, x, w, bias, dy, pool_grads)
        bad = []
        for key, ref in want.items():
            ref = ref.detach().cpu().numpy()
            ours, theirs = _rel_err(got[key], exact[key]), _rel_err(ref, exact[key])
            figures[f"{key}_err"] = f"{ours:.1e} (torch {theirs:.1e})"
            if got[key].shape != ref.shape or ours > max(2 * theirs, 1e-5):
                bad.append(f"{key}: shape {got[key].shape} vs torch {ref.shape}, relative error {ours:.2e} against "
                           f"float64 (torch's {theirs:.2e})")
        if bad:
            raise AssertionError("; ".join(bad))
        return figures
    finally:
        dnn.allow_tf32 = tf32


def _float64_conv_pool(torch, x, w, bias, dy, pool_grads) -> dict:
    """The float64 answers on PyTorch's CPU: the reference both float32 results are measured against."""
    F = torch.nn.functional
    tx, tw, tb = (torch.from_numpy(v).double().requires_grad_() for v in (x, w, bias))
    y = F.conv2d(tx, tw, tb, padding=2)
    y.backward(torch.from_numpy(dy).double())
    out = {"forward": y, "backward_data": tx.grad, "backward_filter": tw.grad, "backward_bias": tb.grad}
    for mode, fn in (("max", F.max_pool2d), ("avg", F.avg_pool2d)):
        px = torch.from_numpy(x).double().requires_grad_()
        py = fn(px, 2, 2)
        py.backward(torch.from_numpy(pool_grads[mode]).double())
        out[f"{mode}_pool"], out[f"{mode}_pool_backward"] = py, px.grad
    return {k: v.detach().numpy() for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------- NVRTC
@tier1(35, "every NVRTC kernel program (pymagma's and magmadnn's) compiled for the device (its cubin, else PTX of "
          "the newest arch below; a dry run compiles one)")
def nvrtc(ctx: Ctx) -> dict:
    import time
    from concurrent.futures import ThreadPoolExecutor

    import magmadnn.backend.device.kernels  # noqa: F401  (registers the device backend's own programs)
    from pymagma import kernels

    supported = kernels.compiler.supported_archs()
    if ctx.dry_run:
        number = 90  # the H100/H200's sm_90
    else:
        from pymagma import runtime

        major, minor = runtime.device_properties(0)["compute_capability"]
        number = major * 10 + minor
    arch, kind = (f"sm_{number}", "cubin") if number in supported else \
        (f"compute_{max(a for a in supported if a <= number)}", "ptx")
    # pymagma's programs and the device backend's (registered above); dry run: the logic, one small program
    names = ["check"] if ctx.dry_run else sorted(kernels.PROGRAMS)

    def build(name):
        t = time.perf_counter()
        kernels.compile_program(name, arch, kind)
        return name, round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:  # NVRTC compiles concurrently; the wall time is the slowest
        seconds = dict(pool.map(build, names))
    wall = time.perf_counter() - t
    return {"target": f"{arch} {kind}", "nvrtc": ".".join(map(str, kernels.nvrtc_version())),
            "programs": len(seconds), "wall_s": round(wall, 1), "compile_s": round(sum(seconds.values()), 1),
            "slowest": max(seconds, key=seconds.get)}


# ----------------------------------------------------------------------------------------------- array API
@tier1(15, "the array API namespace's elementwise and reduction kernels against NumPy")
def array_api(ctx: Ctx) -> dict:
    import pymagma
    from pymagma import array_api as xp

    rng = np.random.default_rng(6)
    checked = 0
    for dtype in ("float32", "float64", "int64"):
        a = (rng.standard_normal((33, 70)) * 10).astype(dtype)
        b = (rng.standard_normal((33, 70)) * 10 + 0.5).astype(dtype)
        da, db = pymagma.asarray(a), pymagma.asarray(b)
        cases = {"add": (xp.add(da, db), a + b), "multiply": (xp.multiply(da, db), a * b),
                 "maximum": (xp.maximum(da, db), np.maximum(a, b)), "less": (xp.less(da, db), a < b),
                 "where": (xp.where(xp.less(da, db), da, db), np.where(a < b, a, b)),
                 "abs": (xp.abs(da), np.abs(a)), "sum": (xp.sum(da, axis=1), a.sum(axis=1)),
                 "max": (xp.max(da, axis=0), a.max(axis=0)), "argmax": (xp.argmax(da, axis=1), a.argmax(axis=1)),
                 "cumulative_sum": (xp.cumulative_sum(da, axis=1), np.cumsum(a, axis=1)),
                 "sort": (xp.sort(da, axis=1), np.sort(a, axis=1)), "mean_all": (None, None)}
        if dtype != "int64":
            cases.update(exp=(xp.exp(da / 10), np.exp(a / 10)), mean_all=(xp.mean(da), a.mean()),
                         sqrt_abs=(xp.sqrt(xp.abs(da)), np.sqrt(np.abs(a))))
        for op, (got, want) in cases.items():
            if got is None:
                continue
            got = np.asarray(got.get() if hasattr(got, "get") else got)
            rtol = {"float32": 1e-5, "float64": 1e-12}.get(dtype, 0)
            if got.shape != np.shape(want) or not np.allclose(got, want, rtol=rtol, atol=rtol):
                raise AssertionError(f"{op} {dtype}: got {got.ravel()[:4]}..., NumPy {np.ravel(want)[:4]}...")
            checked += 1
    return {"cases": checked}


# ----------------------------------------------------------------------------------------------- training
def _fit(recipe: str, graph, steps: int):
    """``fit`` over ``steps`` batches, one epoch, no shuffle, then ``evaluate``, ``predict`` and two
    ``train_on_batch``: the history (with the figures of the calls after it) and the weights after. ``graph``:
    False (eager) or "auto" (compile's default: every step replayed after its first batch; checked to be)."""
    from magmadnn import optimizers, zoo
    from magmadnn.models import replay

    rng = np.random.default_rng(7)
    if recipe == "mlp":
        model, shape = zoo.mlp((1, 12, 12), 10, hidden=(64, 32), dropout=0.2, seed=3), (1, 12, 12)
        opt = optimizers.Adam(1e-3)
    else:
        model, shape = zoo.lenet5((1, 28, 28), 10), (1, 28, 28)
        opt = optimizers.SGD(0.05, momentum=0.9)
    batch = 16
    x = rng.standard_normal((steps * batch, *shape)).astype(np.float32)
    y = rng.integers(0, 10, steps * batch)
    model.compile(opt, "cross_entropy", seed=11, device="gpu", **({} if graph == "auto" else {"graph": graph}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "the train step could not be captured" fails the check
        history = model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0).history
        history["evaluate"] = model.evaluate(x, y, batch_size=batch)
        history["predict"] = model.predict(x, batch_size=batch).tolist()
        history["train_on_batch"] = [model.train_on_batch(x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])
                                     for i in range(2)]
    if graph == "auto" and getattr(model.xp, "graph_capture", None) is not None:
        kinds = {s.kind for s in model._graphs.steps.values() if isinstance(s, replay._Step) and s.graph.launches}
        if kinds != {"train", "evaluate", "predict", "train_checked"}:
            raise AssertionError(f"{recipe}: compile's default replayed only {sorted(kinds)}")
    return history, model.get_weights()


def _simulated(fn, *args):
    from pymagma import simulator

    with simulator.simulated("full"):
        return fn(*args)


def _compare_runs(label: str, eager, replayed, reference, loss_tol: dict, weight_tol: dict) -> dict:
    (h_e, w_e), (h_r, w_r), (h_s, w_s) = eager, replayed, reference
    if h_e != h_r:
        raise AssertionError(f"{label}: replayed history {h_r} != eager {h_e}")
    for i, (a, b) in enumerate(zip(w_e, w_r, strict=True)):
        if not np.array_equal(a, b):
            raise AssertionError(f"{label}: replayed weight {i} differs from eager (max |d| "
                                 f"{np.abs(a.astype(np.float64) - b).max():.3e})")
    np.testing.assert_allclose(h_e["loss"], h_s["loss"], **loss_tol, err_msg=f"{label}: GPU vs simulator loss")
    for a, b in zip(w_e, w_s, strict=True):
        np.testing.assert_allclose(a, b, **weight_tol, err_msg=f"{label}: GPU vs simulator weights")
    return {f"{label}_loss": round(float(h_e["loss"][-1]), 6),
            f"{label}_vs_simulator": f"{_rel_err(h_e['loss'], h_s['loss']):.1e}"}


@tier1(35, "fit, evaluate, predict, train_on_batch of the MLP and LeNet-5 (4 batches): eager == compile's default "
           "(CUDA-graph replay) bit for bit, == simulator within the parity tolerance")
def fit(ctx: Ctx) -> dict:
    figures = {}
    for recipe in ("mlp", "lenet5"):
        runs = [_fit(recipe, False, 4), _fit(recipe, "auto", 4), _simulated(_fit, recipe, False, 4)]
        figures.update(_compare_runs(recipe, *runs, LOSS_TOL, WEIGHT_TOL))
    return figures


def _mixed(graph: bool):
    import magmadnn as mdnn
    from magmadnn import layers as L

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((32, 1, 12, 12)).astype(np.float32), rng.integers(0, 4, 32)
    model = mdnn.Sequential([L.Input((1, 12, 12)), L.Conv2D(4, 3, activation="relu"), L.MaxPool2D(2), L.Flatten(),
                             L.Dense(4, activation="softmax")], seed=5, dtype="mixed_bfloat16")
    model.compile(mdnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", device="gpu", graph=graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history
    return history, model.get_weights()


@tier1(20, "a mixed_bfloat16 fit (bf16 compute, float32 weights): eager == replay, == simulator within a bf16 ulp")
def mixed_precision(ctx: Ctx) -> dict:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError as exc:
        raise AssertionError("mixed precision needs ml_dtypes on this machine: pip install ml-dtypes") from exc
    runs = [_mixed(False), _mixed(True), _simulated(_mixed, False)]
    return _compare_runs("mixed_bfloat16", *runs, {"rtol": MIXED_RTOL}, {"rtol": 2e-2, "atol": 2e-3})


#: the pytest group of tests marked both ``gpu`` and ``tier1`` (run by the runner, listed in a dry run)
TIER1_TESTS_LIMIT_S = 15
