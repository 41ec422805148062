"""A framework's planned matmul (``pymagma._blas_matmul.planned_matmul``): 2-D operands of one dtype, each
C-contiguous or a transposed view of a C-contiguous array, run gemm's plan in the op's own frame once their layouts,
dtypes and flags were seen; every such call equals the checked gemm and NumPy bit for bit, goes through the native
seam in use at the call, and a plan never answers for another layout, flag, dtype, device or device count.  Anything
else is the framework's checked matmul."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pymagma
from pymagma import _native, blas, simulator
from pymagma import runtime as rt
from pymagma._blas_matmul import planned_matmul


@pytest.fixture(autouse=True)
def simulated():
    with simulator.simulated("full") as sim:
        yield sim


class Checked:
    """The framework's checked matmul: gemm with the flags (as the device backend's), each call recorded."""

    def __init__(self):
        self.calls = []

    def __call__(self, a, b, transpose_a=False, transpose_b=False):
        self.calls.append((a.shape, a.strides, b.shape, b.strides, transpose_a, transpose_b))
        if isinstance(a, pymagma.DeviceArray) and not (a.is_c_contiguous or a.T.is_c_contiguous):
            a = a.copy()
        if isinstance(b, pymagma.DeviceArray) and not (b.is_c_contiguous or b.T.is_c_contiguous):
            b = b.copy()
        return blas.gemm(a, b, trans_a=bool(transpose_a), trans_b=bool(transpose_b))


def _operand(host, transposed: bool):
    """``host`` on the device, as itself or as the transposed view of its stored transpose (the same shape)."""
    return pymagma.asarray(np.ascontiguousarray(host.T)).T if transposed else pymagma.asarray(host)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_planned_calls_equal_the_checked_gemm_and_numpy_for_every_layout_and_flag(dtype):
    checked = Checked()
    matmul = planned_matmul(checked)
    rng = np.random.default_rng(0)
    m, k, n = 3, 5, 4
    first = {}
    # layouts and flags alternate with the same shapes: a plan that answered for another one computes garbage
    for _ in range(3):
        for ta, tb, sa, sb in itertools.product((False, True), repeat=4):
            a_host = first.setdefault(("a", ta, sa), rng.standard_normal((k, m) if ta else (m, k)).astype(dtype))
            b_host = first.setdefault(("b", tb, sb), rng.standard_normal((n, k) if tb else (k, n)).astype(dtype))
            a, b = _operand(a_host, sa), _operand(b_host, sb)
            out = matmul(a, b, ta, tb)
            assert out.shape == (m, n) and out.dtype == dtype and out.is_c_contiguous
            got = out.get()
            want = blas.gemm(a, b, trans_a=ta, trans_b=tb).get()  # the checked call (gemm's own path)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(got, first.setdefault((ta, tb, sa, sb), got))  # planned == first call
            np.testing.assert_allclose(got, (a_host.T if ta else a_host) @ (b_host.T if tb else b_host),
                                       rtol=1e-4 if np.finfo(dtype).bits <= 32 else 1e-12, atol=1e-5)
    assert checked.calls == [] and len(matmul.plans) == 16  # every call planned by its layouts and flags


def test_every_planned_call_goes_through_the_native_seam_in_use(simulated, monkeypatch):
    checked = Checked()
    matmul = planned_matmul(checked)
    a, b = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    matmul(a, b)  # planned
    lib = _native.current.magma_initialized
    calls, bind = [], lib.bind

    def counted(name):
        fn = bind(name)
        return lambda *args: (calls.append((name, args)), fn(*args))[1]

    monkeypatch.setattr(lib, "bind", counted)
    outs = [matmul(a, b) for _ in range(3)]
    assert [name for name, _ in calls] == ["magma_sgemm"] * 3
    assert [args[11] for _, args in calls] == [o.ptr for o in outs]  # each call writes its own output
    for out in outs:
        np.testing.assert_array_equal(out.get(), np.full((2, 4), 3, np.float32))
    monkeypatch.undo()
    # other libraries put in use: the plan's call reaches them (nothing is bound at plan time)
    other = simulator.libraries("full")
    previous = _native.use(other)
    try:
        a2, b2 = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
        before = len(simulated.magma.calls)
        np.testing.assert_array_equal(matmul(a2, b2).get(), np.full((2, 4), 3, np.float32))
        assert list(other.magma.calls).count("magma_sgemm") == 1 and len(simulated.magma.calls) == before
        assert checked.calls == []  # the planned call
    finally:
        _native.use(previous)


def test_a_plan_never_answers_for_another_layout_dtype_or_a_bad_call():
    checked = Checked()
    matmul = planned_matmul(checked)
    rng = np.random.default_rng(3)
    host = rng.standard_normal((4, 6))
    a, b = pymagma.asarray(host[:, :3].copy()), pymagma.asarray(host[:3, :4].copy())
    matmul(a, b)
    strided = pymagma.asarray(host)[:, :3]  # the same shape, strides BLAS can address but not a plain layout
    for _ in range(2):
        np.testing.assert_allclose(matmul(strided, b).get(), host[:, :3] @ host[:3, :4], rtol=1e-12)
    assert len(checked.calls) == 2  # the framework's path (its copy) each time, never planned
    assert len(matmul.plans) == 1
    b32 = pymagma.asarray(host[:3, :4].astype(np.float32))
    for _ in range(2):
        with pytest.raises(TypeError, match="different dtypes"):
            matmul(a, b32)  # float64 @ float32: the checked path's error, every time
        with pytest.raises(ValueError, match="inner dimensions"):
            matmul(a, b, True)
        np.testing.assert_array_equal(matmul(a, b, []).get(), matmul(a, b).get())  # an unhashable (falsy) flag:
    assert len(checked.calls) == 6 and len(matmul.plans) == 1  # the checked path each time
    with pytest.raises(TypeError, match="pymagma.asarray"):
        matmul(host[:, :3], b)  # host data: never planned, the checked path's TypeError


def test_a_plan_follows_allow_tf32_the_devices_and_the_device_count(simulated, monkeypatch):
    checked = Checked()
    matmul = planned_matmul(checked)
    a, b = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    matmul(a, b)
    monkeypatch.setattr(blas, "allow_tf32", True)
    matmul(a, b)  # planned: the queue's math mode still follows the flag
    assert a.queue.tf32 is True
    monkeypatch.setattr(blas, "allow_tf32", False)
    matmul(a, b)
    assert a.queue.tf32 is False and checked.calls == []
    monkeypatch.setattr(simulated.runtime, "device_count", 2)
    monkeypatch.delattr(simulated.libraries, "device_count", raising=False)
    with rt.on_device(1):
        a1, b1 = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    seen, run = [], blas._run_gemm
    monkeypatch.setattr(blas, "_run_gemm", lambda *args: (seen.append(rt.get_device()), run(*args))[1])
    for _ in range(2):
        out = matmul(a1, b1)  # the same layouts as planned on device 0: with two devices, the checked path
        assert out.device == 1
        np.testing.assert_array_equal(out.get(), np.full((2, 4), 3, np.float32))
    assert seen == [1, 1] and rt.get_device() == 0 and len(checked.calls) == 2
    for _ in range(2):
        with pytest.raises(ValueError, match="different devices"):
            matmul(a, b1)
    # one device counted again, with arrays on two devices about: a plan still never multiplies across devices
    monkeypatch.setattr(simulated.libraries, "device_count", 1, raising=False)
    for _ in range(2):
        with pytest.raises(ValueError, match="different devices"):
            matmul(a, b1)
    np.testing.assert_array_equal(matmul(a, b).get(), np.full((2, 4), 3, np.float32))


def test_plans_are_dropped_when_full_and_calls_stay_right(monkeypatch):
    matmul = planned_matmul(Checked())
    monkeypatch.setattr(matmul.plans, "limit", 4)
    rng = np.random.default_rng(1)
    for n in list(range(1, 9)) * 2:
        a_host, b_host = rng.standard_normal((2, n)), rng.standard_normal((n, 3))
        np.testing.assert_allclose(matmul(pymagma.asarray(a_host), pymagma.asarray(b_host)).get(), a_host @ b_host,
                                   rtol=1e-12)
        assert len(matmul.plans) <= 4


def test_empty_products_and_half_operands_are_never_planned():
    checked = Checked()
    matmul = planned_matmul(checked)
    for _ in range(2):
        z = matmul(pymagma.asarray(np.ones((2, 0))), pymagma.asarray(np.ones((0, 3))))
        np.testing.assert_array_equal(z.get(), np.zeros((2, 3)))
        assert matmul(pymagma.asarray(np.ones((0, 2))), pymagma.asarray(np.ones((2, 3)))).shape == (0, 3)
        h = pymagma.asarray(np.full((2, 3), 0.5, np.float16))
        half = matmul(h, h, False, True)  # cuBLAS GemmEx, float32 sums
        assert half.dtype == np.float16
        np.testing.assert_array_equal(half.get(), np.full((2, 2), 0.75, np.float16))
    assert len(matmul.plans) == 0
