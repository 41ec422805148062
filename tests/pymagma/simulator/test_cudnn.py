"""pymagma.dnn end to end on the simulated device with the simulated cuDNN (pymagma.simulator.cudnn): results
against the independent references of tests/reference.py (checked against PyTorch in test_dnn_reference), NumPy
definitions and finite differences; plus what the models promise: descriptors read from the real libcudnn,
alpha/beta blending, beta = 0 never reading the output, the running statistics, dropout masks reused by backward,
cuDNN statuses."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_double, c_float, c_void_p

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymagma
from pymagma import _cudnn as cd
from pymagma import dnn, simulator
from pymagma.errors import CudnnError, NotSimulatedError
from pymagma.simulator.cudnn import HOST_CALLS
from tests import reference
from tests.pymagma.helpers import BF16_CASE
from tests.pymagma.test_dnn_calls import run_every_dnn_function
from tests.strategies import conv_cases, pool_cases

pytestmark = pytest.mark.native
REUSE = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
FLOATS = st.sampled_from([np.float32, np.float64])
SCALARS = st.sampled_from([-1.5, -0.5, 0.0, 1.0, 2.0])  # exact in float32, as cuDNN reads them


@pytest.fixture
def sim():
    """Host memory as device memory and the simulated cuDNN (``pymagma.simulator.simulated("full")``)."""
    try:
        cd.lib.cdll  # noqa: B018
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cuDNN is not installed: {exc}")
    with simulator.simulated("full") as simulation:
        yield simulation.cudnn


def tol(dtype) -> dict:
    return {"rtol": 1e-9, "atol": 1e-9} if np.dtype(dtype) == np.float64 else {"rtol": 2e-4, "atol": 2e-4}


def dev(host, dtype=None):
    return pymagma.asarray(np.asarray(host, dtype=dtype))


def scalar(dtype, value):
    return c_double(value) if np.dtype(dtype) == np.float64 else c_float(value)


def cudnn_type(dtype) -> cd.DataType:
    return dnn.data_type(np.dtype(dtype))


def handle() -> int:
    return dnn.handle().value


def numerical_grad(f, x, dy, h=1e-6):
    """d(sum(f(x) * dy))/dx by central differences (float64)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = ((f(x + e) - f(x - e)) * dy).sum() / (2 * h)
    return g


# ----------------------------------------------------------------------------------------------- convolution
@REUSE
@given(conv_cases(), FLOATS, st.booleans())
def test_conv2d_matches_the_reference(sim, case, dtype, autotune):
    x, w, _, s, p, d, g = case
    x, w = x.astype(dtype), w.astype(dtype)
    kw = {"stride": s, "padding": p, "dilation": d, "groups": g, "autotune": autotune}
    y = dnn.conv2d_forward(dev(x), dev(w), **kw).get()
    np.testing.assert_allclose(y, reference.conv2d_ref(x, w, s, p, d, g), **tol(dtype))
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    dx_ref, dw_ref, db_ref = reference.conv2d_backward_ref(x, w, dy, s, p, d, g)
    np.testing.assert_allclose(dnn.conv2d_backward_data(dev(dy), dev(w), x.shape, **kw).get(), dx_ref, **tol(dtype))
    np.testing.assert_allclose(dnn.conv2d_backward_filter(dev(x), dev(dy), w.shape, **kw).get(), dw_ref,
                               **tol(dtype))
    np.testing.assert_allclose(dnn.conv2d_backward_bias(dev(dy)).get(), db_ref, **tol(dtype))


def test_autotuned_strided_conv2d_keeps_each_operand_in_its_own_buffer(sim):
    """Autotuning (cudnnFind*AlgorithmEx, which runs the algorithms on the buffers it is given) with x and dy of very
    different sizes: an operand passed in another's place would overrun that buffer (DeviceMemoryError)."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 2, 32, 32)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    kw = {"stride": 3, "padding": 0, "autotune": True}
    y = dnn.conv2d_forward(dev(x), dev(w), **kw)
    np.testing.assert_allclose(y.get(), reference.conv2d_ref(x, w, (3, 3)), **tol(np.float32))
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, w, dy, (3, 3))
    np.testing.assert_allclose(dnn.conv2d_backward_filter(dev(x), dev(dy), w.shape, **kw).get(), dw_ref,
                               **tol(np.float32))
    np.testing.assert_allclose(dnn.conv2d_backward_data(dev(dy), dev(w), x.shape, **kw).get(), dx_ref,
                               **tol(np.float32))


def test_conv2d_bias_is_added_per_channel(sim):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    y = dnn.conv2d_forward(dev(x), dev(w), dev(b), padding=1).get()
    np.testing.assert_allclose(y, reference.conv2d_ref(x, w, padding=(1, 1)) + b[None, :, None, None], rtol=1e-10)


def _layout(shape, order):
    """Element strides of ``shape`` stored in axis ``order`` (outermost first), e.g. NHWC = (0, 2, 3, 1)."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


def _stored(host: np.ndarray, strides):
    """A device buffer holding ``host`` with element ``strides``, as (device array keeping it alive, its pointer)."""
    size = sum((n - 1) * s for n, s in zip(host.shape, strides)) + 1
    buf = pymagma.zeros((size,), host.dtype)
    view = np.zeros(size, host.dtype)
    np.lib.stride_tricks.as_strided(view, host.shape, [s * host.itemsize for s in strides])[...] = host
    buf.set(view)
    return buf


def _read(buf, shape, strides):
    flat = buf.get()
    return np.lib.stride_tricks.as_strided(flat, shape, [s * flat.itemsize for s in strides]).copy()


@REUSE
@given(conv_cases(), FLOATS, st.sampled_from([(0, 1, 2, 3), (0, 2, 3, 1), (1, 0, 3, 2)]),
       st.sampled_from([cd.ConvolutionMode.CROSS_CORRELATION, cd.ConvolutionMode.CONVOLUTION]),
       SCALARS, st.sampled_from([0.0, 0.5]))
def test_convolution_calls_follow_their_descriptors(sim, case, dtype, order, mode, alpha, beta):
    """Direct cuDNN calls: strided (e.g. NHWC) tensors, true convolution (flipped filter), alpha/beta blending."""
    x, w, _, s, p, d, g = case
    x, w = x.astype(dtype), w.astype(dtype)
    flip = w[:, :, ::-1, ::-1] if mode == cd.ConvolutionMode.CONVOLUTION else w
    y_ref = reference.conv2d_ref(x, flip, s, p, d, g)
    dy = np.random.default_rng(2).standard_normal(y_ref.shape).astype(dtype)
    dx_ref, dw_ref, _ = reference.conv2d_backward_ref(x, flip, dy, s, p, d, g)
    if mode == cd.ConvolutionMode.CONVOLUTION:
        dw_ref = dw_ref[:, :, ::-1, ::-1]
    kind = cudnn_type(dtype)
    conv = cd.ConvolutionDescriptor(p, s, d, dnn.compute_type(np.dtype(dtype)), g, mode=mode)
    wd = cd.FilterDescriptor(w.shape, kind)
    xs, ys = _layout(x.shape, order), _layout(y_ref.shape, order)
    xd, yd = cd.TensorDescriptor(x.shape, kind, xs), cd.TensorDescriptor(y_ref.shape, kind, ys)
    y0 = np.random.default_rng(3).standard_normal(y_ref.shape).astype(dtype)
    xb, wb, yb, dyb = _stored(x, xs), dev(w), _stored(y0, ys), _stored(dy, ys)
    a, b = scalar(dtype, alpha), scalar(dtype, beta)
    cd.call("cudnnConvolutionForward", handle(), byref(a), xd, c_void_p(xb.ptr), wd, c_void_p(wb.ptr), conv, 0,
            c_void_p(), 0, byref(b), yd, c_void_p(yb.ptr))
    np.testing.assert_allclose(_read(yb, y_ref.shape, ys), alpha * y_ref + beta * y0, **tol(dtype))
    dxb = _stored(x, xs)
    cd.call("cudnnConvolutionBackwardData", handle(), byref(a), wd, c_void_p(wb.ptr), yd, c_void_p(dyb.ptr), conv,
            0, c_void_p(), 0, byref(b), xd, c_void_p(dxb.ptr))
    np.testing.assert_allclose(_read(dxb, x.shape, xs), alpha * dx_ref + beta * x, **tol(dtype))
    dwb = dev(w)
    cd.call("cudnnConvolutionBackwardFilter", handle(), byref(a), xd, c_void_p(xb.ptr), yd, c_void_p(dyb.ptr), conv,
            0, c_void_p(), 0, byref(b), wd, c_void_p(dwb.ptr))
    np.testing.assert_allclose(dwb.get(), alpha * dw_ref + beta * w, **tol(dtype))


def test_three_dimensional_convolution(sim):
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 2, 4, 5, 3)), rng.standard_normal((3, 2, 2, 3, 2))
    conv = cd.ConvolutionDescriptor((1, 0, 1), (1, 2, 1), (1, 1, 2), cd.DataType.DOUBLE)
    xd, wd = cd.TensorDescriptor(x.shape, cd.DataType.DOUBLE), cd.FilterDescriptor(w.shape, cd.DataType.DOUBLE)
    out = conv.output_shape(xd, wd)
    yb = pymagma.empty(out, np.float64)
    xb, wb = dev(x), dev(w)
    one, zero = c_double(1), c_double(0)
    cd.call("cudnnConvolutionForward", handle(), byref(one), xd, c_void_p(xb.ptr), wd, c_void_p(wb.ptr), conv, 0,
            c_void_p(), 0, byref(zero), cd.TensorDescriptor(out, cd.DataType.DOUBLE), c_void_p(yb.ptr))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0), (1, 1)))
    expected = np.zeros(out)
    for n, k, i, j, l in np.ndindex(*out):
        patch = xp[n, :, i:i + 2, 2 * j:2 * j + 3, l:l + 3:2]
        expected[n, k, i, j, l] = (patch * w[k]).sum()
    np.testing.assert_allclose(yb.get(), expected, rtol=1e-10, atol=1e-10)


def test_algorithm_queries_return_usable_algorithms(sim):
    problem = dnn._problem((2, 3, 6, 6), (4, 3, 3, 3), np.dtype(np.float32), 1, 1, 1, 1, None)
    for kind in ("forward", "backward_data", "backward_filter"):
        choice = dnn.choose_algorithm(kind, problem, device=0)
        assert choice.workspace == sim.workspace_size(kind, choice.algo) > 0
        assert dnn.choose_algorithm(kind, problem, device=0, workspace_limit=0).workspace == 0
    # a workspace smaller than the algorithm asks for is refused, as cuDNN does
    x, w = dev(np.ones((2, 3, 6, 6), np.float32)), dev(np.ones((4, 3, 3, 3), np.float32))
    xd, wd, conv, yd = problem.descriptors
    y = pymagma.empty(problem.y_shape)
    one, zero = c_float(1), c_float(0)
    with pytest.raises(CudnnError, match="needs 256 bytes of workspace") as err:
        cd.call("cudnnConvolutionForward", handle(), byref(one), xd, c_void_p(x.ptr), wd, c_void_p(w.ptr), conv, 1,
                c_void_p(), 0, byref(zero), yd, c_void_p(y.ptr))
    assert err.value.status == cd.Status.BAD_PARAM


def test_wrong_output_shape_and_foreign_handles_are_cudnn_errors(sim):
    x = dev(np.ones((1, 1, 4, 4), np.float32))
    w = dev(np.ones((1, 1, 3, 3), np.float32))
    xd, wd = cd.TensorDescriptor(x.shape, cd.DataType.FLOAT), cd.FilterDescriptor(w.shape, cd.DataType.FLOAT)
    conv = cd.ConvolutionDescriptor((0, 0), (1, 1), (1, 1), cd.DataType.FLOAT)
    wrong = cd.TensorDescriptor((1, 1, 3, 3), cd.DataType.FLOAT)
    y = pymagma.empty((1, 1, 3, 3))
    one, zero = c_float(1), c_float(0)
    args = (byref(one), xd, c_void_p(x.ptr), wd, c_void_p(w.ptr), conv, 0, c_void_p(), 0, byref(zero), wrong,
            c_void_p(y.ptr))
    with pytest.raises(CudnnError, match=r"y has shape \(1, 1, 3, 3\).*\(1, 1, 2, 2\)"):
        cd.call("cudnnConvolutionForward", handle(), *args)
    with pytest.raises(CudnnError, match="was not made by cudnnCreate"):
        cd.call("cudnnConvolutionForward", 0x1234, *args)
    with pytest.raises(ctypes.ArgumentError):  # the prototype converts (and refuses) exactly as for the library
        cd.call("cudnnConvolutionForward", handle(), *args[:-1], 1.5)
    with pytest.raises(TypeError):
        cd.call("cudnnConvolutionForward", handle(), *args[:-1])


# ---------------------------------------------------------------------------------------------------- pooling
@REUSE
@given(pool_cases(pad_limit=lambda k: (k - 1) // 2, batch=2, channels=3), FLOATS,
       st.sampled_from(["max", "avg", "avg_exclude_pad"]), st.booleans())
def test_pooling_matches_the_reference(sim, case, dtype, mode, transposed):
    x, window, stride, padding = case
    x = x.astype(dtype)
    xa = dev(x.transpose(0, 1, 3, 2).copy()).transpose(0, 1, 3, 2) if transposed else dev(x)  # strided x
    y = dnn.pool2d_forward(xa, window, stride, padding, mode).get()
    np.testing.assert_allclose(y, reference.pool2d_ref(x, window, stride, padding, mode), **tol(dtype))
    dy = np.random.default_rng(5).standard_normal(y.shape)
    dx_ref = reference.pool2d_backward_ref(x, dy, window, stride, padding, mode)
    dx = dnn.pool2d_backward(dev(y), dev(dy.astype(dtype)), xa, window, stride, padding, mode).get()
    np.testing.assert_allclose(dx, dx_ref, **{k: max(v, 1e-5) for k, v in tol(dtype).items()})


def test_max_pooling_ties_send_the_gradient_to_one_of_the_tied_maxima(sim):
    """cuDNN does not document which tied maximum gets a window's gradient: the model picks one at random per call
    (magmadnn's first-maximum rule therefore comes from its own kernel, not from cuDNN)."""
    x = np.zeros((1, 1, 6, 6), np.float32)
    x[0, 0, ::2, ::2] = -1.0  # each 2x2 window: one smaller element, three tied maxima
    dy = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    y = dnn.pool2d_forward(dev(x), 2, stride=2)
    picks = set()
    for _ in range(4):
        dx = dnn.pool2d_backward(y, dev(dy), dev(x), 2, stride=2).get()[0, 0]
        windows = dx.reshape(3, 2, 3, 2).transpose(0, 2, 1, 3).reshape(3, 3, 4)
        assert np.array_equal(windows.sum(axis=-1), dy[0, 0])  # each window's gradient goes whole ...
        assert ((windows != 0).sum(axis=-1) == 1).all() and not dx[::2, ::2].any()  # ... to one of its maxima
        picks.add(tuple(np.argmax(windows != 0, axis=-1).ravel()))
    assert len(picks) > 1  # not a fixed rule


def test_max_pooling_never_picks_padding(sim):
    x = -np.ones((1, 1, 2, 2), np.float64) * np.arange(1, 5).reshape(1, 1, 2, 2)
    y = dnn.pool2d_forward(dev(x), 3, stride=1, padding=1).get()
    np.testing.assert_array_equal(y, np.full((1, 1, 2, 2), -1.0))


# ------------------------------------------------------------------------------------------------- activation
@REUSE
@given(st.sampled_from(sorted(dnn.ACTIVATION_MODES)), st.floats(0.25, 3), FLOATS, st.booleans(),
       st.integers(0, 2**32 - 1))
def test_activations_and_their_gradients(sim, mode, coef, dtype, sliced, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4, 5)) * 2
    x = np.where(np.abs(x) < 1e-3, 0.5, x)  # keep finite differences away from the kinks
    x = np.where(np.abs(x - coef) < 1e-3, coef + 0.5, x)
    full = dev(np.concatenate([x, x], axis=2).astype(dtype))
    xa = full[:, :, ::2] if sliced else dev(x.astype(dtype))  # strided input, read through its descriptor
    xs = np.concatenate([x, x], axis=2)[:, :, ::2] if sliced else x
    y = dnn.activation_forward(xa, mode, coef).get()
    np.testing.assert_allclose(y, reference.activation_ref(mode, xs, coef), **tol(dtype))
    dy = rng.standard_normal(xs.shape)
    dx = dnn.activation_backward(dev(y), dev(dy.astype(dtype)), xa, mode, coef).get()
    expected = numerical_grad(lambda v: reference.activation_ref(mode, v, coef), xs, dy)
    np.testing.assert_allclose(dx, expected, rtol=1e-4, atol=1e-4)


def test_identity_activation_is_not_supported(sim):
    desc = cd.ActivationDescriptor(cd.ActivationMode.IDENTITY)
    x = dev(np.ones((1, 1, 1, 2), np.float32))
    xd = cd.TensorDescriptor(x.shape, cd.DataType.FLOAT)
    one, zero = c_float(1), c_float(0)
    with pytest.raises(CudnnError, match="IDENTITY") as err:
        cd.call("cudnnActivationForward", handle(), desc, byref(one), xd, c_void_p(x.ptr), byref(zero), xd,
                c_void_p(x.ptr))
    assert err.value.status == cd.Status.NOT_SUPPORTED


# ---------------------------------------------------------------------------------------------------- softmax
@REUSE
@given(st.sampled_from([(4, 7), (2, 3, 2, 3)]), st.sampled_from(["instance", "channel"]), st.booleans(), FLOATS,
       st.integers(0, 2**32 - 1))
def test_softmax_and_its_gradient(sim, shape, mode, log, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    axes = tuple(range(1, len(shape))) if mode == "instance" else (1,)
    y = dnn.softmax_forward(dev(x.astype(dtype)), log=log, mode=mode).get()
    np.testing.assert_allclose(y, reference.softmax_ref(x, axes, log), **tol(dtype))
    dy = rng.standard_normal(shape)
    dx = dnn.softmax_backward(dev(y), dev(dy.astype(dtype)), log=log, mode=mode).get()
    expected = numerical_grad(lambda v: reference.softmax_ref(v, axes, log), x, dy)
    np.testing.assert_allclose(dx, expected, rtol=1e-4, atol=1e-4)


def test_fast_softmax_skips_the_max_shift(sim):
    for values, finite in ((np.array([[1.0, 2.0, 3.0]]), True), (np.array([[100.0, 101.0]]), False)):
        x = dev(values.reshape(1, -1, 1, 1).astype(np.float32))
        y = pymagma.empty(x.shape)
        xd = cd.TensorDescriptor(x.shape, cd.DataType.FLOAT)
        one, zero = c_float(1), c_float(0)
        cd.call("cudnnSoftmaxForward", handle(), int(cd.SoftmaxAlgorithm.FAST), int(cd.SoftmaxMode.INSTANCE),
                byref(one), xd, c_void_p(x.ptr), byref(zero), xd, c_void_p(y.ptr))
        if finite:
            np.testing.assert_allclose(y.get().ravel(), reference.softmax_ref(values, (1,)).ravel(), rtol=1e-6)
        else:  # exp(100) overflows float32 without the shift cuDNN's FAST algorithm omits
            assert not np.isfinite(y.get()).all()


# ------------------------------------------------------------------------------------------------- batch norm
@REUSE
@given(st.sampled_from(["spatial", "per_activation"]), FLOATS, st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_batch_norm_training_inference_and_backward(sim, mode, dtype, momentum, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4, 2, 3)) * 2 + 1
    axes = (0, 2, 3) if mode == "spatial" else (0,)
    pshape = (4,) if mode == "spatial" else (4, 2, 3)
    kshape = (1, *pshape, *(1,) * (3 - len(pshape)))  # the parameters broadcast over x
    scale, bias = rng.standard_normal(pshape), rng.standard_normal(pshape)
    rmean, rvar = rng.standard_normal(pshape), rng.random(pshape) + 0.5
    eps = 1e-4
    rm, rv = dev(rmean, dtype), dev(rvar, dtype)
    y, save_mean, save_inv = dnn.batch_norm_forward_training(dev(x, dtype), dev(scale, dtype), dev(bias, dtype),
                                                             rm, rv, momentum=momentum, eps=eps, mode=mode)
    y_ref, mean, inv, unbiased = reference.batch_norm_ref(x, scale.reshape(kshape), bias.reshape(kshape), eps, axes)
    np.testing.assert_allclose(y.get(), y_ref, **tol(dtype))
    np.testing.assert_allclose(save_mean.get(), mean.reshape(pshape), **tol(dtype))
    np.testing.assert_allclose(save_inv.get(), inv.reshape(pshape), **tol(dtype))  # 1/sqrt(biased var + eps)
    np.testing.assert_allclose(rm.get(), (1 - momentum) * rmean + momentum * mean.reshape(pshape), **tol(dtype))
    np.testing.assert_allclose(rv.get(), (1 - momentum) * rvar + momentum * unbiased.reshape(pshape), **tol(dtype))

    inferred = dnn.batch_norm_forward_inference(dev(x, dtype), dev(scale, dtype), dev(bias, dtype), dev(rmean, dtype),
                                                dev(rvar, dtype), eps=eps, mode=mode).get()
    expected = scale.reshape(kshape) * (x - rmean.reshape(kshape)) / np.sqrt(rvar.reshape(kshape) + eps) \
        + bias.reshape(kshape)
    np.testing.assert_allclose(inferred, expected, **tol(dtype))

    dy = rng.standard_normal(x.shape)
    dx_ref, dscale_ref, dbias_ref = reference.batch_norm_backward_ref(x, dy, scale.reshape(kshape), eps, axes)
    for saved in ((save_mean, save_inv), (None, None)):  # with the saved statistics, and recomputed from x
        dx, dscale, dbias = dnn.batch_norm_backward(dev(x, dtype), dev(dy, dtype), dev(scale, dtype), *saved,
                                                    eps=eps, mode=mode)
        np.testing.assert_allclose(dx.get(), dx_ref, **tol(dtype))
        np.testing.assert_allclose(dscale.get(), dscale_ref.reshape(pshape), **tol(dtype))
        np.testing.assert_allclose(dbias.get(), dbias_ref.reshape(pshape), **tol(dtype))


def test_batch_norm_backward_blends_data_and_parameter_gradients(sim):
    rng = np.random.default_rng(6)
    x, dy = rng.standard_normal((4, 3, 2, 2)), rng.standard_normal((4, 3, 2, 2))
    scale, old_dx = rng.standard_normal(3), rng.standard_normal(x.shape)
    old_ds, old_db = rng.standard_normal(3), rng.standard_normal(3)
    xd = cd.TensorDescriptor(x.shape, cd.DataType.DOUBLE)
    bn = cd.derive_bn_descriptor(xd, cd.BatchNormMode.SPATIAL)
    xb, dyb, sb, dxb, dsb, dbb = (dev(v) for v in (x, dy, scale, old_dx, old_ds, old_db))
    ad, bd, ap, bp = c_double(2.0), c_double(0.5), c_double(-1.0), c_double(3.0)
    cd.call("cudnnBatchNormalizationBackward", handle(), int(cd.BatchNormMode.SPATIAL), byref(ad), byref(bd),
            byref(ap), byref(bp), xd, c_void_p(xb.ptr), xd, c_void_p(dyb.ptr), xd, c_void_p(dxb.ptr), bn,
            c_void_p(sb.ptr), c_void_p(dsb.ptr), c_void_p(dbb.ptr), 1e-5, c_void_p(), c_void_p())
    dx_ref, ds_ref, db_ref = reference.batch_norm_backward_ref(x, dy, scale.reshape(1, 3, 1, 1), 1e-5, (0, 2, 3))
    np.testing.assert_allclose(dxb.get(), 2.0 * dx_ref + 0.5 * old_dx, rtol=1e-10)
    np.testing.assert_allclose(dsb.get(), -ds_ref.ravel() + 3.0 * old_ds, rtol=1e-10)
    np.testing.assert_allclose(dbb.get(), -db_ref.ravel() + 3.0 * old_db, rtol=1e-10)


# ---------------------------------------------------------------------------------------------------- dropout
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_backward_reuses_the_forward_mask(sim, dtype):
    rng = np.random.default_rng(7)
    x = rng.random((8, 5, 6, 7)).astype(dtype) + 0.5  # nonzero: a zero in y means dropped
    rate = 0.25  # cuDNN keeps the rate as a float: choose one it holds exactly
    y, reserve = dnn.dropout_forward(dev(x), rate, seed=11)
    kept = y.get() != 0
    np.testing.assert_allclose(y.get()[kept], x[kept] / (1 - rate), **tol(dtype))
    assert abs(1 - kept.mean() - rate) < 0.03  # 1680 draws: the dropped fraction is near the rate
    dy = rng.standard_normal(x.shape).astype(dtype)
    dx = dnn.dropout_backward(dev(dy), reserve, rate, seed=11).get()
    np.testing.assert_allclose(dx, np.where(kept, dy / (1 - rate), 0), **tol(dtype))
    y2, _ = dnn.dropout_forward(dev(x), rate, seed=11)
    assert ((y2.get() != 0) != kept).any()  # the generator state advances between calls


def test_dropout_masks_are_reproducible_from_the_seed(sim):
    x = dev(np.ones((4, 64), np.float32))
    masks = []
    for seed in (5, 5, 6):
        state = dnn.DropoutState(seed=seed, rate=0.5)
        masks.append([dnn.dropout_forward(x, 0.5, state=state)[0].get() != 0 for _ in range(2)])
    np.testing.assert_array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[0][0], masks[2][0])


def test_dropout_without_a_set_descriptor_is_refused(sim):
    desc = cd.DropoutDescriptor()
    x = dev(np.ones((1, 1, 2, 2), np.float32))
    xd = cd.TensorDescriptor(x.shape, cd.DataType.FLOAT)
    reserve = pymagma.empty((cd.reserve_space_size(xd),), np.uint8)
    with pytest.raises(CudnnError, match="never set"):
        cd.call("cudnnDropoutForward", handle(), desc, xd, c_void_p(x.ptr), xd, c_void_p(x.ptr),
                c_void_p(reserve.ptr), reserve.nbytes)


# ----------------------------------------------------------------------------------------------- tensor ops
BROADCASTS = st.sampled_from([((2, 3, 4, 5), (1, 3, 1, 1)), ((2, 3, 4, 5), (2, 3, 4, 5)), ((4, 6), (1, 6)),
                              ((2, 3, 4, 5), (1, 1, 4, 1))])


@REUSE
@given(BROADCASTS, FLOATS, SCALARS, SCALARS, st.integers(0, 2**32 - 1))
def test_add_tensor_broadcasts_and_blends(sim, shapes, dtype, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    c0, a = rng.standard_normal(shapes[0]).astype(dtype), rng.standard_normal(shapes[1]).astype(dtype)
    c = dev(c0)
    dnn.add_tensor(dev(a), c, alpha, beta)
    np.testing.assert_allclose(c.get(), alpha * a + beta * c0, **tol(dtype))


def test_strided_lower_rank_operands_broadcast_from_the_right(sim):
    """A strided (3, 1, 1) view broadcasts over (2, 3, 4, 5) as NumPy aligns it: against the trailing axes."""
    base = np.arange(6.0).reshape(3, 2)
    a = dev(base.reshape(3, 2, 1))[:, :1]
    assert not a.is_c_contiguous and a.shape == (3, 1, 1)
    c = dev(np.zeros((2, 3, 4, 5)))
    dnn.add_tensor(a, c, 1.0, 0.0)
    np.testing.assert_array_equal(c.get(), np.broadcast_to(base[:, :1].reshape(3, 1, 1), (2, 3, 4, 5)))


def test_data_type_accepts_scalar_types_and_names():
    assert dnn.data_type(np.float32) == dnn.data_type(np.dtype("float32")) == dnn.data_type("float32")
    with pytest.raises(TypeError, match="float32, float64, float16 or bfloat16 arrays, got int64"):
        dnn.data_type(np.int64)


@REUSE
@given(BROADCASTS, st.sampled_from(sorted(dnn.OP_TENSOR_OPS)), FLOATS, SCALARS, SCALARS,
       st.sampled_from([0.0, 0.5]), st.integers(0, 2**32 - 1))
def test_op_tensor(sim, shapes, op, dtype, alpha1, alpha2, beta, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shapes[0]).astype(dtype), rng.standard_normal(shapes[1]).astype(dtype)
    if op == "not":
        a[..., 0] = 0
    c0 = rng.standard_normal(shapes[0]).astype(dtype)
    out = dev(c0)
    dnn.op_tensor(op, dev(a), dev(b), alpha1=alpha1, alpha2=alpha2, beta=beta, out=out)
    x, y = alpha1 * a.astype(np.float64), alpha2 * b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        expected = {"add": lambda: x + y, "mul": lambda: x * y, "min": lambda: np.minimum(x, y),
                    "max": lambda: np.maximum(x, y), "sqrt": lambda: np.sqrt(x),
                    "not": lambda: (x == 0).astype(float)}[op]() + beta * c0
    np.testing.assert_allclose(out.get(), expected, **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_and_set_tensor(sim, dtype):
    x0 = np.random.default_rng(8).standard_normal((2, 3, 4)).astype(dtype)
    x = dev(x0)
    np.testing.assert_allclose(dnn.scale_tensor(x, -1.5).get(), -1.5 * x0, **tol(dtype))
    part = x[:, 1:, ::2]  # strided: only the described elements change
    dnn.set_tensor(part, 2.25)
    expected = -1.5 * x0
    expected[:, 1:, ::2] = 2.25
    np.testing.assert_allclose(x.get(), expected, **tol(dtype))


REDUCERS = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "amax": lambda v, **k: np.abs(v).max(**k),
            "mean": np.mean, "norm1": lambda v, **k: np.abs(v).sum(**k),
            "norm2": lambda v, **k: np.sqrt((v * v).sum(**k))}


@REUSE
@given(st.sampled_from(sorted(REDUCERS)), FLOATS, st.sets(st.integers(0, 3), min_size=1), st.integers(0, 2**32 - 1))
def test_reduce_tensor(sim, op, dtype, axes, seed):
    x = np.random.default_rng(seed).standard_normal((2, 3, 4, 5)).astype(dtype)
    out = dnn.reduce_tensor(op, dev(x), tuple(axes)).get()
    expected = REDUCERS[op](x.astype(np.float64), axis=tuple(sorted(axes)), keepdims=True)
    np.testing.assert_allclose(out, expected, **tol(dtype))


def test_reduce_tensor_writes_flattened_indices(sim):
    x = np.random.default_rng(9).standard_normal((2, 3, 4, 1)).astype(np.float32)
    desc = cd.ReduceTensorDescriptor(cd.ReduceTensorOp.AMAX, cd.DataType.FLOAT,
                                     cd.ReduceTensorIndices.FLATTENED_INDICES)
    xd, cdesc = cd.TensorDescriptor(x.shape, cd.DataType.FLOAT), cd.TensorDescriptor((2, 1, 1, 1), cd.DataType.FLOAT)
    h, size, isize = handle(), ctypes.c_size_t(), ctypes.c_size_t()
    cd.call("cudnnGetReductionWorkspaceSize", h, desc, xd, cdesc, byref(size))
    cd.call("cudnnGetReductionIndicesSize", h, desc, xd, cdesc, byref(isize))
    assert isize.value == 2 * 4
    xb, c = dev(x), pymagma.empty((2, 1, 1, 1))
    indices, space = pymagma.empty((2,), np.int32), pymagma.empty((max(size.value, 1),), np.uint8)
    one, zero = c_float(1), c_float(0)
    cd.call("cudnnReduceTensor", h, desc, c_void_p(indices.ptr), isize.value, c_void_p(space.ptr), size.value,
            byref(one), xd, c_void_p(xb.ptr), byref(zero), cdesc, c_void_p(c.ptr))
    flat = np.abs(x.reshape(2, -1))
    np.testing.assert_array_equal(indices.get(), flat.argmax(axis=1))
    np.testing.assert_allclose(c.get().ravel(), flat.max(axis=1))


# ------------------------------------------------------------------------------------------ blending and NaNs
def test_beta_zero_never_reads_the_output(sim):
    """cuDNN's beta = 0 means "overwrite": outputs full of NaN must not leak into the results."""
    rng = np.random.default_rng(10)
    x, w = dev(rng.standard_normal((2, 3, 6, 6))), dev(rng.standard_normal((4, 3, 3, 3)))

    def nans(shape):
        return dev(np.full(shape, np.nan))

    outputs = [dnn.conv2d_forward(x, w, padding=1, out=nans((2, 4, 6, 6))),
               dnn.conv2d_backward_data(dnn.conv2d_forward(x, w), w, (2, 3, 6, 6), out=nans((2, 3, 6, 6))),
               dnn.conv2d_backward_filter(x, dnn.conv2d_forward(x, w), (4, 3, 3, 3), out=nans((4, 3, 3, 3))),
               dnn.conv2d_backward_bias(x, out=nans((3,))),
               dnn.pool2d_forward(x, 2, out=nans((2, 3, 3, 3))),
               dnn.activation_forward(x, "tanh", out=nans((2, 3, 6, 6))),
               dnn.softmax_forward(x, out=nans((2, 3, 6, 6))),
               dnn.op_tensor("add", x, x, out=nans((2, 3, 6, 6))),
               dnn.batch_norm_forward_training(x, dev(np.ones(3)), dev(np.zeros(3)), out=nans((2, 3, 6, 6)))[0]]
    for out in outputs:
        assert np.isfinite(out.get()).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_alpha_and_beta_blend_pooling_activation_and_softmax(sim, dtype):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 4, 4)).astype(dtype)
    kind = cudnn_type(dtype)
    xd, xb = cd.TensorDescriptor(x.shape, kind), dev(x)
    alpha, beta = scalar(dtype, 1.5), scalar(dtype, -0.25)
    pool = cd.PoolingDescriptor(cd.PoolingMode.MAX, (2, 2), (0, 0), (2, 2))
    cases = [("cudnnPoolingForward", (pool,), (2, 3, 2, 2), reference.pool2d_ref(x, (2, 2), (2, 2), (0, 0), "max")),
             ("cudnnActivationForward", (cd.ActivationDescriptor(cd.ActivationMode.SIGMOID),), x.shape,
              reference.activation_ref("sigmoid", x)),
             ("cudnnSoftmaxForward", (int(cd.SoftmaxAlgorithm.ACCURATE), int(cd.SoftmaxMode.CHANNEL)), x.shape,
              reference.softmax_ref(x, (1,)))]
    for name, head, shape, value in cases:
        y0 = rng.standard_normal(shape).astype(dtype)
        y = dev(y0)
        cd.call(name, handle(), *head, byref(alpha), xd, c_void_p(xb.ptr), byref(beta),
                cd.TensorDescriptor(shape, kind), c_void_p(y.ptr))
        np.testing.assert_allclose(y.get(), 1.5 * value - 0.25 * y0, **tol(dtype), err_msg=name)


# ------------------------------------------------------------------------------------------------- plumbing
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16_CASE])
def test_every_dnn_function_runs_on_the_simulator(sim, dtype):
    class OnDevice:
        @staticmethod
        def device_array(host):
            return pymagma.asarray(host)

    run_every_dnn_function(OnDevice(), dtype)
    assert {"cudnnCreate", "cudnnSetStream", "cudnnConvolutionForward", "cudnnDropoutForward",
            "cudnnReduceTensor"} <= set(sim.calls)


def test_the_simulated_cudnn_models_device_calls_and_lets_the_real_library_answer_host_calls(sim):
    """Handle-taking calls are models; descriptor, size and version calls are the real libcudnn's; a declared
    function in neither list is NotSimulatedError, never a silent call into the real library."""
    assert cd.library() is sim and sim.real is cd.lib
    assert "cudnnConvolutionForward" in sim.names and "cudnnSetTensorNdDescriptor" in HOST_CALLS
    assert sim.bind("cudnnSetTensorNdDescriptor") is not None and sim.has("cudnnConvolutionForward")
    assert not sim.names & HOST_CALLS
    sim._models.pop("cudnnAddTensor")
    sim._bound.pop("cudnnAddTensor", None)
    with pytest.raises(NotSimulatedError, match="cudnnAddTensor is not simulated"):
        sim.bind("cudnnAddTensor")
    assert "cudnnAddTensor" in sim.missing()


# ---------------------------------------------------------------------------------- every input read, y included
@pytest.mark.parametrize("mode", ["relu", "sigmoid", "tanh", "elu"])
def test_activation_backward_refuses_a_y_that_is_not_the_forward_of_x(sim, mode):
    """cuDNN reads y (sigmoid's and tanh's derivatives come from it): a binding that passes x or dy in y's place
    would train wrongly on a GPU, so the model checks y against the forward of x and names the call."""
    from pymagma.simulator.cudnn import ModelError

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    dx, ddy = dev(x), dev(dy)
    y = dnn.activation_forward(dx, mode)
    good = dnn.activation_backward(y, ddy, dx, mode).get()  # the true forward passes
    assert np.isfinite(good).all()
    for wrong in (dx, ddy):
        with pytest.raises(ModelError, match="cudnnActivationBackward: y is not the forward of x"):
            dnn.activation_backward(wrong, ddy, dx, mode).get()


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pooling_backward_reads_y_and_refuses_one_that_is_not_the_forward(sim, mode):
    from pymagma.simulator.cudnn import ModelError

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    dx = dev(x)
    y = dnn.pool2d_forward(dx, (2, 2), mode=mode)
    dy = dev(np.ones(y.shape, np.float32))
    assert np.isfinite(dnn.pool2d_backward(y, dy, dx, (2, 2), mode=mode).get()).all()
    shifted = dev(y.get() + 1.0)
    with pytest.raises(ModelError, match="cudnnPoolingBackward: y is not the forward of x"):
        dnn.pool2d_backward(shifted, dy, dx, (2, 2), mode=mode).get()


@pytest.mark.parametrize("capability, winograd", [((9, 0), False), ((8, 0), True)])
def test_algorithm_availability_follows_the_simulated_architecture(sim, capability, winograd):
    """cuDNN 9's header: Winograd forward and backward-data do not run on Hopper and newer (the simulator's default
    device); the heuristics report them NOT_SUPPORTED there (listed first: the caller must read the status) and a
    call that insists fails; on Ampere they run."""
    simulator.current().runtime.compute_capability = capability
    problem = dnn._problem((2, 3, 6, 6), (4, 3, 3, 3), np.dtype(np.float32), 1, 1, 1, 1, None)
    h = handle()
    for kind, algo in (("forward", cd.ConvFwdAlgo.WINOGRAD), ("backward_data", cd.ConvBwdDataAlgo.WINOGRAD)):
        get_v7, max_count = dnn._ALGO_CALLS[kind][0], dnn._ALGO_CALLS[kind][3]
        count, returned = ctypes.c_int(), ctypes.c_int()
        cd.call(max_count, h, byref(count))
        results = (cd._AlgoPerf * count.value)()
        cd.call(get_v7, h, *dnn._ordered_descs(kind, problem), count.value, byref(returned), results)
        status = {int(r.algo): int(r.status) for r in results[: returned.value]}
        assert (status[int(algo)] == 0) == winograd
        assert dnn.choose_algorithm(kind, problem, device=0).algo != (-1 if winograd else int(algo))
    x, w = dev(np.ones((2, 3, 6, 6), np.float32)), dev(np.ones((4, 3, 3, 3), np.float32))
    xd, wd, conv, yd = problem.descriptors
    y = pymagma.empty(problem.y_shape)
    space = pymagma.empty((4096,), np.uint8)
    one, zero = c_float(1), c_float(0)

    def run():
        cd.call("cudnnConvolutionForward", h, byref(one), xd, c_void_p(x.ptr), wd, c_void_p(w.ptr), conv,
                int(cd.ConvFwdAlgo.WINOGRAD), c_void_p(space.ptr), 4096, byref(zero), yd, c_void_p(y.ptr))
        return y.get()

    if winograd:
        np.testing.assert_allclose(run()[0, 0, 1:-1, 1:-1], 27.0)
    else:
        with pytest.raises(CudnnError, match="WINOGRAD does not run on compute capability") as err:
            run()
        assert err.value.status == cd.Status.NOT_SUPPORTED


def test_tf32_rounding_of_float32_convolutions_is_modelled_on_request(sim, monkeypatch):
    """With the simulator's TF32 option on, float32 convolutions whose math type allows it read their operands as
    TF32 (10 mantissa bits), as Ampere+ tensor cores do; pymagma.dnn.allow_tf32 = False (FMA math) keeps them exact."""
    from pymagma.simulator.cudnn.numerics import tf32

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    exact = reference.conv2d_ref(x, w)
    rounded = reference.conv2d_ref(tf32(x), tf32(w))
    assert np.abs(exact - rounded).max() > 1e-4  # TF32 is visibly coarser than float32
    assert sim.tf32 is False
    np.testing.assert_allclose(dnn.conv2d_forward(dev(x), dev(w)).get(), exact, rtol=1e-5, atol=1e-5)  # off: exact
    sim.tf32 = True
    dnn.clear_caches()
    np.testing.assert_allclose(dnn.conv2d_forward(dev(x), dev(w)).get(), rounded, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(dnn, "allow_tf32", False)
    dnn.clear_caches()
    np.testing.assert_allclose(dnn.conv2d_forward(dev(x), dev(w)).get(), exact, rtol=1e-5, atol=1e-5)
    assert tf32(np.float32([1 + 2**-11, 1 + 3 * 2**-11, np.inf])).tolist() == [1.0, 1 + 2**-9, np.inf]  # ties to even


def test_batch_norm_backward_refuses_saved_statistics_that_are_not_the_forwards(sim):
    """cuDNN reads savedMean/savedInvVariance as the forward's cache for this x: swapped or stale ones would give
    wrong gradients on a GPU, so the model checks them against the batch and names the argument."""
    from pymagma.simulator.cudnn import ModelError

    rng = np.random.default_rng(4)
    x = dev(rng.standard_normal((4, 3, 2, 2)).astype(np.float32) * 3 + 1)
    dy = dev(rng.standard_normal((4, 3, 2, 2)).astype(np.float32))
    scale, bias = dev(np.ones(3, np.float32)), dev(np.zeros(3, np.float32))
    _, mean, inv = dnn.batch_norm_forward_training(x, scale, bias)
    dx, _, _ = dnn.batch_norm_backward(x, dy, scale, mean, inv)
    assert np.isfinite(dx.get()).all()
    with pytest.raises(ModelError, match="savedMean is not the forward's"):
        dnn.batch_norm_backward(x, dy, scale, inv, mean)[0].get()
