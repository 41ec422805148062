"""pymagma.array_api.fft and pymagma.fft against numpy.fft: every function, every norm, n/s and axes drawn by
hypothesis, strided and transposed inputs (cuFFT's advanced layouts and the copy when none fits), bad inputs, the
plan cache, CUDA graph capture.  On the simulator (cuFFT modelled from its documentation); test_fft_gpu.py runs
the same tests on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import simulator
from tests.conftest import examples

FEW = settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NORMS = ["backward", "ortho", "forward"]
TOL = {np.dtype(np.complex64): dict(rtol=2e-4, atol=2e-4), np.dtype(np.float32): dict(rtol=2e-4, atol=2e-4),
       np.dtype(np.complex128): dict(rtol=1e-10, atol=1e-10), np.dtype(np.float64): dict(rtol=1e-10, atol=1e-10)}
COMPLEX_FUNCTIONS = ["fft", "ifft", "irfft", "hfft"]
REAL_FUNCTIONS = ["rfft", "ihfft"]
ND_FUNCTIONS = ["fftn", "ifftn", "rfftn", "irfftn"]


@pytest.fixture
def device():
    """Where the tests run: the simulator here (test_fft_gpu.py overrides it with the GPU)."""
    with simulator.simulated("full") as sim:
        yield sim


def xp():
    import pymagma.array_api

    return pymagma.array_api


def values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close(got, want, dtype=None):
    got_host = got.get() if isinstance(got, pymagma.DeviceArray) else got
    want = np.asarray(want)
    assert got_host.shape == want.shape, (got_host.shape, want.shape)
    assert got_host.dtype == want.dtype, (got_host.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    tol = TOL[np.dtype(dtype or want.dtype)]
    np.testing.assert_allclose(got_host, want, rtol=tol["rtol"], atol=tol["atol"] * scale)


shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)


@FEW
@given(shape=shapes, data=st.data())
@pytest.mark.parametrize("fn", COMPLEX_FUNCTIONS + REAL_FUNCTIONS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32, np.float64])
def test_one_axis_transforms_match_numpy(device, fn, dtype, shape, data):
    real_only = fn in REAL_FUNCTIONS
    if real_only and np.dtype(dtype).kind == "c":
        return
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    n = data.draw(st.none() | st.integers(1, 9), label="n")
    norm = data.draw(st.sampled_from(NORMS), label="norm")
    if fn in ("irfft", "hfft") and n is None and shape[axis] < 2:
        n = 2
    x = values(np.random.default_rng(len(shape) + (n or 0)), shape, dtype)
    want = getattr(np.fft, fn)(x, n=n, axis=axis, norm=norm)
    got = getattr(xp().fft, fn)(pymagma.asarray(x), n=n, axis=axis, norm=norm)
    close(got, want)


@FEW
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=5).map(tuple), data=st.data())
@pytest.mark.parametrize("fn", ND_FUNCTIONS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float64])
def test_n_dimensional_transforms_match_numpy(device, fn, dtype, shape, data):
    """Up to five axes: cuFFT plans of at most three axes each, one after the other."""
    if fn == "rfftn" and np.dtype(dtype).kind == "c":
        dtype = np.float32 if dtype == np.complex64 else np.float64
    ndim = len(shape)
    axes = data.draw(st.none() | st.permutations(range(ndim)).flatmap(
        lambda p: st.integers(1, ndim).map(lambda k: tuple(p[:k]))), label="axes")
    count = ndim if axes is None else len(axes)
    s = data.draw(st.none() | st.lists(st.integers(1, 6), min_size=count, max_size=count).map(tuple), label="s")
    norm = data.draw(st.sampled_from(NORMS), label="norm")
    if fn == "irfftn" and s is None and shape[(axes or range(ndim))[-1]] < 2:
        s = tuple(shape[a] for a in (axes or range(ndim)))[:-1] + (2,)
    x = values(np.random.default_rng(ndim), shape, dtype)
    if s is not None and axes is None:
        axes = tuple(range(ndim - len(s), ndim))
    want = getattr(np.fft, fn)(x, s=s, axes=axes, norm=norm)
    got = getattr(xp().fft, fn)(pymagma.asarray(x), s=s, axes=axes, norm=norm)
    close(got, want)


def _views(base: np.ndarray):
    """Views whose strides cuFFT's advanced layout expresses (slices, steps, transposes) and ones it cannot."""
    return {"step": (lambda a: a[:, ::2]), "transposed": (lambda a: a.T), "corner": (lambda a: a[1:, 1:3]),
            "reversed": (lambda a: a[::-1]), "moved": (lambda a: np.moveaxis(a.reshape(2, 3, -1), 0, -1))}


@pytest.mark.parametrize("view", list(_views(np.zeros((1, 1)))))
@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft", "fftn", "rfftn", "irfftn", "hfft", "ihfft"])
@pytest.mark.parametrize("axis", [0, -1])
def test_strided_views_match_numpy(device, view, fn, axis):
    real = fn in ("rfft", "rfftn", "ihfft")
    base = values(np.random.default_rng(3), (6, 8), np.float64 if real else np.complex128)
    x = _views(base)[view](base)
    d = _views(base)[view](pymagma.asarray(base)) if view != "moved" else \
        pymagma.asarray(base).reshape(2, 3, 8).transpose(1, 2, 0)
    kwargs = {"axes": (axis,)} if fn.endswith("n") else {"axis": axis}
    close(getattr(xp().fft, fn)(d, **kwargs), getattr(np.fft, fn)(x, **kwargs))


@pytest.mark.parametrize("view", ["step", "transposed", "corner", "reversed"])
@pytest.mark.parametrize("fn", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_two_dimensional_transforms_of_views_match_numpy(device, view, fn):
    """Rows of a view lie ``inembed[1]`` elements apart (a padded pitch) or need the copy."""
    base = values(np.random.default_rng(5), (6, 8), np.float64 if fn == "rfftn" else np.complex128)
    close(getattr(xp().fft, fn)(_views(base)[view](pymagma.asarray(base))), getattr(np.fft, fn)(_views(base)[view](
        base)))


@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "rfftn", "irfftn",
                                "fftshift"])
def test_inputs_are_never_modified(device, fn):
    """cuFFT's C2R overwrites its input: pymagma hands it a copy (and every other path reads only)."""
    real = fn in ("rfft", "ihfft", "rfftn")
    x = values(np.random.default_rng(6), (4, 6), np.float64 if real else np.complex128)
    d = pymagma.asarray(x)
    getattr(xp().fft, fn)(d)
    getattr(xp().fft, fn)(d[:, :4])
    np.testing.assert_array_equal(d.get(), x)


@pytest.mark.parametrize("fn", ["fft", "ifft", "fftn", "ifftn", "irfft", "irfftn", "hfft"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_real_input_is_promoted_to_complex_like_numpy(device, fn, dtype):
    x = values(np.random.default_rng(1), (4, 6), dtype)
    got = getattr(xp().fft, fn)(pymagma.asarray(x))
    want = getattr(np.fft, fn)(x)
    close(got, want)


def test_the_numpy_face_takes_host_data_and_gives_host_results(device):
    x = values(np.random.default_rng(2), (3, 5), np.complex128)
    for fn in ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "hfft", "ihfft"):
        arg = x.real if fn in ("rfft2", "ihfft") else x
        got = getattr(pymagma.fft, fn)(arg.tolist())
        assert isinstance(got, np.ndarray)
        close(got, getattr(np.fft, fn)(arg))
    out = np.empty((3, 5), np.complex128)
    assert pymagma.fft.fft(x, out=out) is out
    close(out, np.fft.fft(x))
    dout = pymagma.empty((3, 5), np.complex128)
    assert pymagma.fft.fft(pymagma.asarray(x), out=dout) is dout
    close(dout, np.fft.fft(x))
    ints = np.arange(6)
    close(pymagma.fft.fft(ints), np.fft.fft(ints))  # integers compute in double precision, as NumPy


@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 4, 5), (0, 4)])
@pytest.mark.parametrize("dtype", [np.complex64, np.float64, np.int32])
def test_shifts_match_numpy(device, shape, dtype):
    x = (np.arange(int(np.prod(shape))).reshape(shape) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)).astype(
        dtype)
    axes_choices = [None] + list(range(len(shape))) + ([(0, -1), (-1, 0, 0)] if len(shape) > 1 else [])
    for axes in axes_choices:
        for name in ("fftshift", "ifftshift"):
            got = getattr(xp().fft, name)(pymagma.asarray(x), axes=axes)
            np.testing.assert_array_equal(got.get(), getattr(np.fft, name)(x, axes=axes))


@pytest.mark.parametrize("n", [1, 2, 7, 8])
@pytest.mark.parametrize("d", [1.0, 0.25])
@pytest.mark.parametrize("dtype", [None, np.float32])
def test_frequencies_match_numpy(device, n, d, dtype):
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(xp().fft, name)(n, d=d, dtype=dtype)
        want = getattr(np.fft, name)(n, d).astype(dtype or np.float64)
        close(got, want)


# ----------------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda f, x: f.fft(x, n=0), ValueError, r"Invalid number of FFT data points \(0\)"),
    (lambda f, x: f.fft(x, norm="none"), ValueError, "norm must be"),
    (lambda f, x: f.fft(x, axis=2), np.exceptions.AxisError, "axis 2 is out of bounds"),
    (lambda f, x: f.fftn(x, s=(2, 2), axes=(0,)), ValueError, "Shape and axes have different lengths"),
    (lambda f, x: f.rfft(x), TypeError, r"fft.rfft needs a real floating dtype.*complex128"),
    (lambda f, x: f.ihfft(x), TypeError, r"fft.ihfft needs a real floating dtype"),
    (lambda f, x: f.fft(x.get()), TypeError, "expected a pymagma DeviceArray, got ndarray"),
    (lambda f, x: f.fft(pymagma.asarray(np.arange(4))), TypeError, r"fft.fft needs a floating dtype.*int64"),
    (lambda f, x: f.fft(x, n=2.5), TypeError, "n must be an integer"),
    (lambda f, x: f.irfft(x, n=-3), ValueError, r"Invalid number of FFT data points \(-3\)"),
    (lambda f, x: f.fftfreq(0), ValueError, r"Invalid number of FFT data points \(0\)"),
    (lambda f, x: f.fftfreq(4, dtype=np.int32), TypeError, "real floating dtype"),
    (lambda f, x: f.fftshift(x.get()), TypeError, "expected a pymagma DeviceArray"),
])
def test_bad_inputs_are_clear_typed_errors(device, call, error, match):
    x = pymagma.asarray(np.ones((3, 4), np.complex128))
    with pytest.raises(error, match=match):
        call(xp().fft, x)


def test_the_numpy_face_refuses_what_numpy_refuses(device):
    for bad in (lambda f: f.fft([1, 2], 0), lambda f: f.fft([1, 2], norm="x"), lambda f: f.fft([1, 2], axis=1),
                lambda f: f.fft(np.ones((2, 2)), out=np.empty((3, 3), complex)), lambda f: f.irfft([1, 2], n=0)):
        with pytest.raises((ValueError, IndexError)) as want:
            bad(np.fft)
        with pytest.raises(type(want.value)):
            bad(pymagma.fft)
    with pytest.raises(TypeError, match="rfft needs real input, got complex128"):
        pymagma.fft.rfft(np.ones(3, complex))
    with pytest.raises(TypeError, match="array type float128 is unsupported"):  # NumPy computes it on the host
        pymagma.fft.fft(np.ones(3, np.longdouble))


# ----------------------------------------------------------------------------------------------------- cuFFT use
def _calls(sim, name: str) -> int:
    return sum(c == name for c in sim.cufft.calls) if sim is not None else 0


def test_plans_are_made_once_per_layout_and_run_on_the_queue_stream(device):
    if device is None:
        pytest.skip("counts the simulated cuFFT's calls")
    x = pymagma.asarray(values(np.random.default_rng(0), (4, 16), np.complex64))
    xp().fft.fft(x)
    made = _calls(device, "cufftMakePlanMany64")
    for _ in range(3):
        xp().fft.fft(x)
    assert _calls(device, "cufftMakePlanMany64") == made  # cached
    xp().fft.fft(x, axis=0)  # another layout: another plan
    assert _calls(device, "cufftMakePlanMany64") == made + 1
    plans = [p for p in device.cufft.plans.values() if p["layout"] is not None]
    assert plans and all(p["stream"] == x.queue.stream for p in plans)


def test_fft_along_axis_0_reads_the_array_in_place_through_istride(device):
    """A C-contiguous (n, m) array transformed along axis 0: istride m, idist 1, batch m; no copy kernel."""
    if device is None:
        pytest.skip("reads the simulated cuFFT's plans")
    x = pymagma.asarray(values(np.random.default_rng(0), (8, 3), np.complex128))
    launches = len(device.kernels.launches) if hasattr(device.kernels, "launches") else None
    got = xp().fft.fft(x, axis=0)
    close(got, np.fft.fft(x.get(), axis=0))
    layouts = [p["layout"] for p in device.cufft.plans.values() if p["layout"] is not None]
    assert any(lay["in"][2:] == (3, 1) and lay["batch"] == 3 for lay in layouts), layouts
    if launches is not None:
        assert len(device.kernels.launches) == launches


def test_a_transform_is_captured_in_a_cuda_graph_and_replayed(device):
    rng = np.random.default_rng(4)
    x = pymagma.asarray(values(rng, (3, 8, 8), np.complex64))
    xp().fft.fftn(x, axes=(1, 2), norm="ortho")  # the plan is made before the capture
    with pymagma.graphs.capture() as graph:
        y = xp().fft.fftn(x, axes=(1, 2), norm="ortho")
    for _ in range(2):
        new = values(rng, (3, 8, 8), np.complex64)
        x.set(new)
        graph.launch()
        graph.queue.synchronize()
        close(y, np.fft.fftn(new, axes=(1, 2), norm="ortho"))
    graph.destroy()


def test_making_a_plan_during_a_capture_is_refused_naming_the_fix(device):
    x = pymagma.asarray(np.ones((5, 7), np.complex128))
    with pytest.raises(pymagma.GraphCaptureError, match="run the same transform once before the capture"):
        with pymagma.graphs.capture():
            xp().fft.fft(x)


def test_empty_batches_give_empty_results(device):
    for shape, fn in (((0, 4), "fft"), ((0, 4), "rfft"), ((3, 0, 4), "fftn")):
        x = np.zeros(shape, np.float64 if fn == "rfft" else np.complex128)
        kwargs = {"axes": (0, 2)} if fn == "fftn" else {}
        close(getattr(xp().fft, fn)(pymagma.asarray(x), **kwargs), getattr(np.fft, fn)(x, **kwargs))


def test_null_device_checks_every_call_and_computes_nothing():
    with simulator.simulated("null") as sim:
        x = pymagma.asarray(np.ones((4, 4), np.complex64))
        y = xp().fft.fft2(x) if hasattr(xp().fft, "fft2") else xp().fft.fftn(x)
        assert y.shape == (4, 4) and sim.cufft.rejected == []
        assert "cufftExecC2C" in sim.cufft.calls
