"""The planned gemm (pymagma.blas): a gemm with a new output whose operands' layouts and options were seen before runs
the plan made then (flags, sizes, leading dimensions, scalars: checked once), through the same native seam.  Planned
calls equal the checked call bit for bit and NumPy's product; a plan never answers for another layout, flag, scalar
type or device; bad input meets the checked path's errors however often it comes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pymagma
from pymagma import blas, simulator
from pymagma import runtime as rt


@pytest.fixture(autouse=True)
def simulated():
    with simulator.simulated("full") as sim:
        blas._GEMM_PLANS.clear()
        yield sim


def _operand(host: np.ndarray, transposed: bool):
    """``host`` on the device, stored as itself or as the transposed view of its transpose (another layout, the same
    shape)."""
    if transposed:
        return pymagma.asarray(np.ascontiguousarray(host.T)).T
    return pymagma.asarray(host)


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", DTYPES)
def test_planned_calls_equal_the_checked_call_and_numpy_for_every_layout_and_flag(dtype):
    rng = np.random.default_rng(0)
    m, k, n = 3, 5, 4
    results = {}
    # layouts and flags alternate with the same shapes, so a plan that answered for another one computes garbage
    for _ in range(3):
        for ta, tb, sa, sb, alpha in itertools.product((False, True), (False, True), (False, True), (False, True),
                                                      (1.0, -0.5, 2)):
            key = (ta, tb, sa, sb, alpha)
            a_host = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
            b_host = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
            a_host, b_host = results.setdefault(("in", key), (a_host, b_host))  # the same inputs every round
            out = blas.gemm(_operand(a_host, sa), _operand(b_host, sb), alpha=alpha, trans_a=ta, trans_b=tb)
            got = out.get()
            want = alpha * (a_host.T if ta else a_host) @ (b_host.T if tb else b_host)
            np.testing.assert_allclose(got, want, rtol=1e-4 if np.finfo(dtype).bits <= 32 else 1e-12, atol=1e-5)
            assert out.shape == (m, n) and out.dtype == dtype and out.is_c_contiguous
            first = results.setdefault(key, got)
            np.testing.assert_array_equal(got, first)  # planned == the first (checked) call, bit for bit
    assert len(blas._GEMM_PLANS) == 2 * 2 * 2 * 2 * 3


def test_every_planned_call_goes_through_the_native_seam(simulated, monkeypatch):
    a, b = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    lib = pymagma._native.current.magma_initialized
    calls = []
    bind = lib.bind

    def counted(name):
        fn = bind(name)
        return lambda *args: (calls.append((name, args)), fn(*args))[1]

    blas.gemm(a, b)  # planned
    monkeypatch.setattr(lib, "bind", counted)
    outs = [blas.gemm(a, b) for _ in range(3)]
    assert [name for name, _ in calls] == ["magma_sgemm"] * 3
    assert [args[11] for _, args in calls] == [o.ptr for o in outs]  # each call writes its own output
    for out in outs:
        np.testing.assert_array_equal(out.get(), np.full((2, 4), 3, np.float32))


def test_a_plan_never_answers_for_another_scalar_type_or_a_bad_one():
    a, b = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    blas.gemm(a, b, alpha=1.0)
    blas.gemm(a, b, alpha=1.0)  # planned
    for _ in range(2):
        with pytest.raises(TypeError, match="alpha/beta must be a number"):
            blas.gemm(a, b, alpha=True)  # equal to 1.0 and hashed alike, but a bool
        with pytest.raises(TypeError, match="complex scalar"):
            blas.gemm(a, b, alpha=1 + 2j)
        with pytest.raises(ValueError, match="beta != 0 needs an existing out"):
            blas.gemm(a, b, beta=1.0)
        with pytest.raises(ValueError, match="inner dimensions"):
            blas.gemm(a, b, trans_a=True)
    np.testing.assert_array_equal(blas.gemm(a, b, alpha=np.float32(2)).get(), np.full((2, 4), 6, np.float32))
    assert blas.gemm(a, b, trans_b=[]).shape == (2, 4)  # an unhashable (falsy) flag: the checked path, no plan


def test_a_plan_follows_allow_tf32_and_the_operands_device(simulated, monkeypatch):
    a, b = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    blas.gemm(a, b)
    monkeypatch.setattr(blas, "allow_tf32", True)
    blas.gemm(a, b)  # planned: the queue's math mode still follows the flag
    assert a.queue.tf32 is True
    monkeypatch.setattr(blas, "allow_tf32", False)
    blas.gemm(a, b)
    assert a.queue.tf32 is False
    # with two devices, the operands' device is made current for the call, planned or not
    monkeypatch.setattr(simulated.runtime, "device_count", 2)
    monkeypatch.delattr(simulated.libraries, "device_count", raising=False)
    with rt.on_device(1):
        a1, b1 = pymagma.asarray(np.ones((2, 3), np.float32)), pymagma.asarray(np.ones((3, 4), np.float32))
    seen, run = [], blas._run_gemm
    monkeypatch.setattr(blas, "_run_gemm", lambda *args: (seen.append(rt.get_device()), run(*args))[1])
    for _ in range(2):
        out = blas.gemm(a1, b1)
        assert out.device == 1
        np.testing.assert_array_equal(out.get(), np.full((2, 4), 3, np.float32))
    assert seen == [1, 1] and rt.get_device() == 0
    with pytest.raises(ValueError, match="different devices"):
        blas.gemm(a, b1)


def test_plans_are_dropped_when_full_and_calls_stay_right(monkeypatch):
    monkeypatch.setattr(blas._GEMM_PLANS, "limit", 4)
    rng = np.random.default_rng(1)
    for n in list(range(1, 9)) * 2:
        a_host, b_host = rng.standard_normal((2, n)), rng.standard_normal((n, 3))
        np.testing.assert_allclose(blas.gemm(pymagma.asarray(a_host), pymagma.asarray(b_host)).get(),
                                   a_host @ b_host, rtol=1e-12)
        assert len(blas._GEMM_PLANS) <= 4


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_planned_calls_into_out_follow_its_layout_and_beta(dtype):
    """A gemm into ``out`` is planned with out's layout: a transposed view of the same shape, or another beta, gets
    its own plan (out is accumulated into as BLAS does)."""
    rng = np.random.default_rng(2)
    a_host, b_host = rng.standard_normal((3, 5)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
    a, b = pymagma.asarray(a_host), pymagma.asarray(b_host)
    for _ in range(2):
        for transposed in (False, True):
            for alpha, beta in ((1.0, 0.0), (2.0, 0.5), (1.0, 1.0)):
                c_host = rng.standard_normal((3, 4)).astype(dtype)
                out = _operand(c_host, transposed)
                ptr = out.ptr
                assert blas.gemm(a, b, out=out, alpha=alpha, beta=beta) is out and out.ptr == ptr
                np.testing.assert_allclose(out.get(), alpha * a_host @ b_host + beta * c_host,
                                           rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    with pytest.raises(ValueError, match="out has shape"):
        blas.gemm(a, b, out=pymagma.empty((4, 3), dtype))
