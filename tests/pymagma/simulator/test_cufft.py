"""The simulated cuFFT against cuFFT's documentation, called as pymagma calls it (raw device pointers and layout
arguments): the advanced layout's element formula, the basic layout of NULL embeds, the R2C/C2R half spectrum,
unnormalised transforms, in-place and out-of-place rules, and every refusal leaving the output untouched.  The
reference is independent of numpy.fft: each element gathered by the documented index formula in Python loops and
transformed by explicit DFT matrices."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

import pymagma
from pymagma import _cufft as F
from pymagma import simulator
from pymagma.errors import CufftError


@pytest.fixture
def sim():
    with simulator.simulated("full") as s:
        yield s


def dft(x: np.ndarray, axes, sign: int) -> np.ndarray:
    """The unnormalised DFT over ``axes`` by explicit matrices (sign -1 forward, +1 inverse)."""
    for a in axes:
        n = x.shape[a]
        k = np.arange(n)
        m = np.exp(sign * 2j * np.pi * np.outer(k, k) / n)
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, a, 0), axes=1), 0, a)
    return x


def gather(flat: np.ndarray, batch, shape, embed, stride, dist) -> np.ndarray:
    """Element (b, x, y, z) at ``b * dist + ((x * embed[1] + y) * embed[2] + z) * stride`` (cuFFT's formula)."""
    out = np.empty((batch, *shape), flat.dtype)
    for b in range(batch):
        for idx in itertools.product(*map(range, shape)):
            offset = 0
            for k, i in enumerate(idx):
                offset = offset * (embed[k] if k else 1) + i
            out[(b, *idx)] = flat[b * dist + offset * stride]
    return out


def positions(batch, shape, embed, stride, dist) -> set[int]:
    marks = gather(np.arange(10**6), batch, shape, embed, stride, dist)
    return set(marks.ravel().tolist())


def plan(sim, type_, n, inembed, istride, idist, onembed, ostride, odist, batch) -> tuple[int, int]:
    handle = ctypes.c_int()
    assert sim.cufft.cufftCreate(ctypes.byref(handle)) == 0

    def arr(v):
        return None if v is None else (ctypes.c_longlong * len(v))(*v)

    status = sim.cufft.cufftMakePlanMany64(handle.value, len(n), arr(n), arr(inembed), istride, idist, arr(onembed),
                                           ostride, odist, int(type_), batch, ctypes.byref(ctypes.c_size_t()))
    return handle.value, status


SENTINEL = 12345.0


def buffers(rng, in_size, in_dtype, out_size, out_dtype):
    x = rng.standard_normal(in_size) + (1j * rng.standard_normal(in_size) if np.dtype(in_dtype).kind == "c" else 0)
    d_in = pymagma.asarray(x.astype(in_dtype))
    d_out = pymagma.asarray(np.full(out_size, SENTINEL, out_dtype))
    return x.astype(in_dtype), d_in, d_out


def test_c2c_reads_and_writes_through_the_advanced_layout(sim):
    n, batch = (3, 4), 2
    inembed, istride, idist = (3, 5), 2, 40  # rows of 5 elements, every other element: gaps everywhere
    onembed, ostride, odist = (3, 4), 1, 13
    x, d_in, d_out = buffers(np.random.default_rng(0), 80, np.complex128, 26, np.complex128)
    h, status = plan(sim, F.Type.Z2Z, n, inembed, istride, idist, onembed, ostride, odist, batch)
    assert status == 0
    assert sim.cufft.cufftExecZ2Z(h, d_in.ptr, d_out.ptr, F.FORWARD) == 0
    out = d_out.get()
    want = dft(gather(x, batch, n, inembed, istride, idist), (1, 2), -1)
    np.testing.assert_allclose(gather(out, batch, n, onembed, ostride, odist), want, atol=1e-10)
    untouched = sorted(set(range(26)) - positions(batch, n, onembed, ostride, odist))
    assert untouched == [12, 25] and np.all(out[untouched] == SENTINEL)
    np.testing.assert_array_equal(d_in.get(), x)  # C2C out of place leaves its input


def test_inverse_is_unnormalised(sim):
    x, d_in, d_out = buffers(np.random.default_rng(1), 8, np.complex64, 8, np.complex64)
    h, _ = plan(sim, F.Type.C2C, (8,), (8,), 1, 8, (8,), 1, 8, 1)
    sim.cufft.cufftExecC2C(h, d_in.ptr, d_out.ptr, F.FORWARD)
    sim.cufft.cufftExecC2C(h, d_out.ptr, d_in.ptr, F.INVERSE)
    np.testing.assert_allclose(d_in.get(), 8 * x, rtol=1e-5, atol=1e-5)


def test_r2c_writes_the_half_spectrum_with_interleaved_batches(sim):
    """Three real signals interleaved (istride 3, idist 1); the output keeps n // 2 + 1 values each."""
    n, batch = 7, 3
    x, d_in, d_out = buffers(np.random.default_rng(2), 21, np.float64, 3 * 4 + 1, np.complex128)
    h, status = plan(sim, F.Type.D2Z, (n,), (n,), 3, 1, (4,), 1, 4, batch)
    assert status == 0 and sim.cufft.cufftExecD2Z(h, d_in.ptr, d_out.ptr) == 0
    signals = gather(x, batch, (n,), (n,), 3, 1)
    out = d_out.get()
    np.testing.assert_allclose(gather(out, batch, (4,), (4,), 1, 4), dft(signals, (1,), -1)[:, :4], atol=1e-10)
    assert out[12] == SENTINEL


def test_c2r_reads_the_half_spectrum_and_overwrites_its_input(sim):
    """Rank 2: the complex side is n0 x (n1 // 2 + 1); the result is unnormalised; out of place, the input is
    overwritten (as documented)."""
    n = (4, 6)
    spectrum = dft(np.random.default_rng(3).standard_normal(n), (0, 1), -1)[:, :4]  # Hermitian half
    d_in = pymagma.asarray(spectrum.astype(np.complex128).ravel())
    d_out = pymagma.asarray(np.full(24, SENTINEL))
    h, status = plan(sim, F.Type.Z2D, n, (4, 4), 1, 16, (4, 6), 1, 24, 1)
    assert status == 0 and sim.cufft.cufftExecZ2D(h, d_in.ptr, d_out.ptr) == 0
    full = np.concatenate([spectrum, np.conj(spectrum[(-np.arange(4)) % 4][:, 1:3][:, ::-1])], axis=1)
    np.testing.assert_allclose(d_out.get().reshape(n), dft(full, (0, 1), 1).real, atol=1e-9)
    assert np.isnan(d_in.get()).all()


def test_null_embeds_are_the_basic_layout_and_ignore_strides(sim):
    x, d_in, d_out = buffers(np.random.default_rng(4), 10, np.complex128, 10, np.complex128)
    h, status = plan(sim, F.Type.Z2Z, (5,), None, 7, 99, None, 3, 99, 2)
    assert status == 0 and sim.cufft.cufftExecZ2Z(h, d_in.ptr, d_out.ptr, F.FORWARD) == 0
    np.testing.assert_allclose(d_out.get().reshape(2, 5), dft(x.reshape(2, 5), (1,), -1), atol=1e-10)


def test_in_place_r2c_needs_the_padded_layout(sim):
    """In place, the real row of n = 6 is padded to 2 * (6 // 2 + 1) = 8 reals: each complex row of 4 values sits
    over its own real row."""
    x = np.random.default_rng(5).standard_normal((2, 8))
    d = pymagma.asarray(x.copy().ravel())
    h, status = plan(sim, F.Type.D2Z, (6,), (8,), 1, 8, (4,), 1, 4, 2)
    assert status == 0 and sim.cufft.cufftExecD2Z(h, d.ptr, d.ptr) == 0
    got = d.get().view(np.complex128).reshape(2, 4)
    np.testing.assert_allclose(got, dft(x[:, :6], (1,), -1)[:, :4], atol=1e-10)
    h2, _ = plan(sim, F.Type.D2Z, (6,), (6,), 1, 6, (4,), 1, 4, 2)  # unpadded: outputs overrun their inputs
    assert sim.cufft.cufftExecD2Z(h2, d.ptr, d.ptr) == F.Result.INVALID_VALUE


@pytest.mark.parametrize(("args", "status"), [
    (dict(type_=F.Type.Z2Z, n=(2, 2, 2, 2)), F.Result.INVALID_VALUE),
    (dict(type_=F.Type.Z2Z, n=(0,)), F.Result.INVALID_SIZE),
    (dict(type_=F.Type.Z2Z, n=(4,), batch=0), F.Result.INVALID_SIZE),
    (dict(type_=0x77, n=(4,)), F.Result.INVALID_TYPE),
    (dict(type_=F.Type.Z2Z, n=(4, 4), inembed=(4, 3)), F.Result.INVALID_VALUE),
    (dict(type_=F.Type.Z2Z, n=(4,), istride=0), F.Result.INVALID_VALUE),
    (dict(type_=F.Type.D2Z, n=(4, 6), onembed=(4, 3)), F.Result.INVALID_VALUE),
])
def test_bad_plans_are_refused_with_cuffts_status(sim, args, status):
    n = args["n"]
    full = {**dict(inembed=n, istride=1, idist=64, onembed=n, ostride=1, odist=64, batch=1), **args}
    h, got = plan(sim, full["type_"], n, full["inembed"], full["istride"], full["idist"], full["onembed"],
                  full["ostride"], full["odist"], full["batch"])
    assert got == status and sim.cufft.rejected[-1][1] == status
    assert sim.cufft.cufftExecZ2Z(h, 1, 1, F.FORWARD) == F.Result.INVALID_PLAN  # never made: not executable


def test_refused_executions_compute_nothing(sim):
    x, d_in, d_out = buffers(np.random.default_rng(6), 8, np.complex128, 8, np.complex128)
    h, _ = plan(sim, F.Type.Z2Z, (8,), (8,), 1, 8, (8,), 1, 8, 1)
    assert sim.cufft.cufftExecC2C(h, d_in.ptr, d_out.ptr, F.FORWARD) == F.Result.INVALID_VALUE  # wrong precision
    assert sim.cufft.cufftExecZ2Z(h, d_in.ptr, d_out.ptr, 0) == F.Result.INVALID_VALUE  # no direction 0
    assert sim.cufft.cufftExecZ2Z(h, 0, d_out.ptr, F.FORWARD) == F.Result.INVALID_VALUE
    assert sim.cufft.cufftExecZ2Z(h + 1000, d_in.ptr, d_out.ptr, F.FORWARD) == F.Result.INVALID_PLAN
    h2, _ = plan(sim, F.Type.Z2Z, (4,), (4,), 2, 8, (4,), 1, 8, 1)  # in place, other positions: refused
    assert sim.cufft.cufftExecZ2Z(h2, d_in.ptr, d_in.ptr, F.FORWARD) == F.Result.INVALID_VALUE
    assert sim.cufft.cufftDestroy(h) == 0 and sim.cufft.cufftDestroy(h) == F.Result.INVALID_PLAN
    assert sim.cufft.cufftExecZ2Z(h, d_in.ptr, d_out.ptr, F.FORWARD) == F.Result.INVALID_PLAN
    np.testing.assert_array_equal(d_out.get(), np.full(8, SENTINEL))
    np.testing.assert_array_equal(d_in.get(), x)


def test_a_layout_past_the_allocation_is_a_device_memory_error(sim):
    d = pymagma.asarray(np.zeros(8, np.complex128))
    h, _ = plan(sim, F.Type.Z2Z, (8,), (8,), 10**5, 16, (8,), 1, 8, 1)
    with pytest.raises(pymagma.DeviceMemoryError, match="cufftExecZ2Z input"):
        sim.cufft.cufftExecZ2Z(h, d.ptr, pymagma.empty(8, np.complex128).ptr, F.FORWARD)


def test_the_binding_raises_cufft_errors_by_name(sim):
    with pytest.raises(CufftError, match="cufftMakePlanMany64: CUFFT_INVALID_SIZE"):
        F.Plan(F.Layout(F.Type.Z2Z, (0,), (1,), 1, 1, (1,), 1, 1, 1))
    assert F.version() == 12000
