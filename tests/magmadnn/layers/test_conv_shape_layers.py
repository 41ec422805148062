"""The conv/shape layers: Conv2DTranspose, Conv2D(groups=), DepthwiseConv2D, Concatenate, Reshape, Permute,
UpSampling2D, GlobalMaxPool2D and Add over any rank.

Forward against the independent references of ``tests/reference.py`` (the transposed-convolution reference against
PyTorch too), float64 finite-difference gradients of layers and functions, save/load, and host vs simulated-device
training (same losses step by step, no device-to-host copy outside the progress reads).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import F, Tensor, models, optimizers
from magmadnn import layers as L
from magmadnn.models import Model
from tests.conftest import examples
from tests.magmadnn._gradcheck import check_gradients, spread_values
from tests.magmadnn.backends import open_backend
from tests.magmadnn.test_layers import built, check_layer_gradients
from tests.reference import concatenate_ref, conv2d_ref, conv_transpose2d_ref, same_pads, upsample_nearest2d_ref

RNG = np.random.default_rng(18)


def run(layer, x):
    """``layer`` on the batch ``x`` (float64, host) as NumPy."""
    return layer(Tensor(np.asarray(x, np.float64))).numpy()


# ------------------------------------------------------------------------------------ transposed convolution


def _transpose_geometry(in_hw, k, s, padding, extra, d):
    """(pads, out) from the definitions: "same" -> in * s padded as a "same" convolution of the output would be."""
    if padding == "same":
        out = (in_hw[0] * s[0], in_hw[1] * s[1])
        return (same_pads(out[0], k[0], s[0], d[0]), same_pads(out[1], k[1], s[1], d[1])), out
    p = (0, 0) if padding == "valid" else padding
    out = tuple((n - 1) * si - 2 * pi + di * (ki - 1) + 1 + ei
                for n, si, pi, di, ki, ei in zip(in_hw, s, p, d, k, extra))
    return ((p[0], p[0]), (p[1], p[1])), out


@st.composite
def transpose_cases(draw):
    k, s, d = ((draw(st.integers(1, hi)), draw(st.integers(1, hi))) for hi in (3, 3, 2))
    padding = draw(st.sampled_from(["valid", "same", "pair"]))
    extra = (0, 0)
    if padding == "pair":
        padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
        extra = (draw(st.integers(0, s[0] - 1)), draw(st.integers(0, s[1] - 1)))
    in_hw = (draw(st.integers(2, 4)), draw(st.integers(2, 4)))
    return in_hw, k, s, padding, extra, d, draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(0, 99))


@settings(max_examples=examples(30))
@given(case=transpose_cases())
def test_conv2d_transpose_layer_against_the_scatter_reference(case):
    in_hw, k, s, padding, extra, d, cin, filters, seed = case
    pads, out = _transpose_geometry(in_hw, k, s, padding, extra, d)
    if min(out) < 1:
        return
    layer = built(L.Conv2DTranspose(filters, k, strides=s, padding=padding, output_padding=extra, dilation=d,
                                    bias_initializer="glorot_uniform"), (cin, *in_hw), seed)
    x = np.random.default_rng(seed).standard_normal((2, cin, *in_hw))
    w, b = layer.params["kernel"].numpy(), layer.params["bias"].numpy()
    assert w.shape == (cin, filters, *k) and layer.output_shape == (filters, *out)
    expected = conv_transpose2d_ref(x, w, s, pads, d, out) + b[None, :, None, None]
    np.testing.assert_allclose(run(layer, x), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("stride, padding, extra, dilation", [(1, 0, 0, 1), (2, 1, 1, 1), (3, (1, 2), 2, 2),
                                                               (2, 0, (1, 0), (1, 2))])
def test_conv_transpose2d_and_its_reference_match_pytorch(stride, padding, extra, dilation):
    torch = pytest.importorskip("torch")
    x, w, b = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((3, 2, 3, 2)), RNG.standard_normal(2)
    expected = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=stride,
                                                    padding=padding, output_padding=extra, dilation=dilation).numpy()
    got = F.conv_transpose2d(x, w, b, stride=stride, padding=padding, output_padding=extra, dilation=dilation)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-12)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    p = pair(padding)
    ref = conv_transpose2d_ref(x, w, pair(stride), ((p[0], p[0]), (p[1], p[1])), pair(dilation), expected.shape[2:])
    np.testing.assert_allclose(ref + b[None, :, None, None], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("stride, padding, extra, dilation", [(1, "valid", 0, 1), (2, "same", 0, 1),
                                                               (3, "same", 0, 1), (2, (1, 0), (1, 0), (1, 2))])
def test_conv_transpose2d_gradients(stride, padding, extra, dilation):
    x, w, b = RNG.uniform(-1, 1, (2, 2, 3, 3)), RNG.uniform(-1, 1, (2, 3, 2, 3)), RNG.uniform(-1, 1, 3)
    check_gradients(lambda x_, w_, b_: F.conv_transpose2d(x_, w_, b_, stride, padding, extra, dilation), x, w, b)


def test_conv2d_transpose_layer_gradients_and_same_output_size():
    layer = built(L.Conv2DTranspose(2, 3, strides=2, padding="same", activation="tanh",
                                    bias_initializer="glorot_uniform"), (2, 3, 2))
    assert layer.output_shape == (2, 6, 4)
    check_layer_gradients(layer, RNG.uniform(-1, 1, (2, 2, 3, 2)))


# ---------------------------------------------------------------------------------------- grouped, depthwise


@settings(max_examples=examples(20))
@given(groups=st.sampled_from([1, 2, 3]), per_group=st.integers(1, 2), filters_per=st.integers(1, 2),
       padding=st.sampled_from(["valid", "same", 1]), seed=st.integers(0, 99))
def test_grouped_conv2d_against_the_reference(groups, per_group, filters_per, padding, seed):
    c, k = groups * per_group, groups * filters_per
    layer = built(L.Conv2D(k, 3, padding=padding, groups=groups, bias_initializer="glorot_uniform"), (c, 5, 4), seed)
    w, b = layer.params["kernel"].numpy(), layer.params["bias"].numpy()
    assert w.shape == (k, per_group, 3, 3)
    x = np.random.default_rng(seed).standard_normal((2, c, 5, 4))
    pads = ((same_pads(5, 3, 1), same_pads(4, 3, 1)) if padding == "same"
            else ((padding, padding), (padding, padding)) if padding == 1 else (0, 0))
    expected = conv2d_ref(x, w, padding=pads, groups=groups) + b[None, :, None, None]
    np.testing.assert_allclose(run(layer, x), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv2d_convolves_each_channel_with_its_own_kernels(multiplier):
    layer = built(L.DepthwiseConv2D(3, depth_multiplier=multiplier, strides=(1, 2), padding="same",
                                    bias_initializer="glorot_uniform"), (3, 5, 6))
    w, b = layer.params["depthwise_kernel"].numpy(), layer.params["bias"].numpy()
    assert w.shape == (3 * multiplier, 1, 3, 3) and layer.output_shape == (3 * multiplier, 5, 3)
    x = RNG.standard_normal((2, 3, 5, 6))
    y = run(layer, x)
    pads = (same_pads(5, 3, 1), same_pads(6, 3, 2))
    for c in range(3):  # output channel c * multiplier + m: channel c with its m-th kernel
        for m in range(multiplier):
            o = c * multiplier + m
            one = conv2d_ref(x[:, c:c + 1], w[o:o + 1], (1, 2), pads)[:, 0] + b[o]
            np.testing.assert_allclose(y[:, o], one, rtol=1e-10, atol=1e-12)
    check_layer_gradients(built(L.DepthwiseConv2D(2, depth_multiplier=multiplier, bias_initializer="ones"),
                                (2, 3, 3)), RNG.uniform(-1, 1, (2, 2, 3, 3)))


def test_grouped_conv2d_gradients():
    layer = built(L.Conv2D(4, 2, groups=2, padding="same", bias_initializer="glorot_uniform"), (2, 3, 3))
    check_layer_gradients(layer, RNG.uniform(-1, 1, (2, 2, 3, 3)))


# --------------------------------------------------------------------------------------- shape and routing


@settings(max_examples=examples(25))
@given(rank=st.integers(1, 3), data=st.data())
def test_concatenate_joins_along_keras_axes(rank, data):
    axis = data.draw(st.sampled_from([a for a in range(-rank, rank + 1) if a != 0]))
    sample_axis = axis - 1 if axis > 0 else rank + axis
    base = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=3))
    shapes = [tuple(s if d == sample_axis else n for d, n in enumerate(base)) for s in sizes]
    inputs = [L.Input(s) for s in shapes]
    model = Model(inputs, L.Concatenate(axis=axis)(inputs))
    xs = [RNG.standard_normal((2, *s)).astype(np.float32) for s in shapes]
    np.testing.assert_array_equal(model.predict(xs), concatenate_ref(xs, sample_axis + 1))


def test_concatenate_gradient_splits_back():
    check_gradients(lambda a, b, c: F.concatenate([a, b, c], axis=1), RNG.uniform(-1, 1, (2, 1, 3)),
                    RNG.uniform(-1, 1, (2, 3, 3)), RNG.uniform(-1, 1, (2, 2, 3)))
    check_gradients(lambda a, b: L.Concatenate()([a, b]), RNG.uniform(-1, 1, (2, 3)), RNG.uniform(-1, 1, (2, 1)))


@settings(max_examples=examples(20))
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), data=st.data())
def test_reshape_and_permute_against_numpy(shape, data):
    x = RNG.standard_normal((2, *shape))
    dims = tuple(int(d) + 1 for d in data.draw(st.permutations(range(len(shape)))))
    np.testing.assert_array_equal(run(L.Permute(dims), x), np.transpose(x, (0, *dims)))
    target = (-1, shape[0]) if data.draw(st.booleans()) else (int(np.prod(shape)),)
    layer = L.Reshape(target)
    np.testing.assert_array_equal(run(layer, x), x.reshape(2, *target))
    assert layer.output_shape == x.reshape(2, *target).shape[1:]
    check_gradients(lambda a: L.Reshape(target)(L.Permute(dims)(a)), x)


@settings(max_examples=examples(15))
@given(size=st.tuples(st.integers(1, 3), st.integers(1, 3)), hw=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_upsampling2d_nearest_against_the_reference(size, hw):
    x = RNG.standard_normal((2, 2, *hw))
    layer = L.UpSampling2D(size)
    np.testing.assert_array_equal(run(layer, x), upsample_nearest2d_ref(x, size))
    assert layer.output_shape == (2, hw[0] * size[0], hw[1] * size[1])
    check_gradients(lambda a: L.UpSampling2D(size)(a), x)


def test_upsampling_and_global_max_pool_gradients():
    check_gradients(lambda a: F.upsample_nearest2d(a, (2, 3)), RNG.uniform(-1, 1, (2, 2, 2, 3)))
    x = spread_values(RNG, (2, 3, 3, 4), gap=0.05)
    check_gradients(F.global_max_pool2d, x)
    np.testing.assert_array_equal(run(L.GlobalMaxPool2D(), x), x.max(axis=(2, 3)))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4, 2)])
def test_add_over_any_rank(shape):
    a, b = L.Input(shape), L.Input(shape)
    model = Model([a, b], L.Add()([a, b]))
    xs = [RNG.standard_normal((2, *shape)).astype(np.float32) for _ in range(2)]
    np.testing.assert_array_equal(model.predict(xs), xs[0] + xs[1])


# ---------------------------------------------------------------------------- a model of them all, two backends


def decoder(seed=0):
    """A small U-Net-style model that uses every layer of this module."""
    x = L.Input((2, 4, 4))
    down = L.Conv2D(4, 3, strides=2, padding="same", activation="relu")(x)
    depth = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same")(down)
    grouped = L.Conv2D(4, 1, groups=2, activation="tanh")(depth)
    up = L.Conv2DTranspose(2, 3, strides=2, padding="same", activation="relu")(grouped)
    near = L.UpSampling2D(2)(grouped)
    skip = L.Concatenate(axis=1)([up, x, L.Conv2D(2, 1)(near)])
    pooled = L.GlobalMaxPool2D()(skip)
    tokens = L.Reshape((-1, 4))(L.Permute((2, 3, 1))(L.Conv2D(4, 1)(skip)))
    mixed = L.Add()([tokens, L.Permute((1, 2))(tokens)])
    head = L.Concatenate()([pooled, L.Flatten()(mixed)])
    return Model(x, L.Dense(3)(head), seed=seed)


def _batches(n=4):
    rng = np.random.default_rng(5)
    return rng.standard_normal((n, 8, 2, 4, 4)).astype(np.float32), rng.integers(0, 3, (n, 8))


def test_a_model_of_every_layer_saves_and_loads(tmp_path):
    model = decoder().compile(optimizers.Adam(1e-2), seed=1)
    x, y = _batches(2)
    model.train_on_batch(x[0], y[0])
    for suffix in (".npz", ".safetensors"):
        loaded = models.load(model.save(tmp_path / f"m{suffix}"))
        assert [type(la).__name__ for la in loaded.layers] == [type(la).__name__ for la in model.layers]
        assert loaded.get_config() == model.get_config()
        np.testing.assert_array_equal(loaded.predict(x[1]), model.predict(x[1]))


@pytest.fixture(scope="module", params=[pytest.param("device", marks=pytest.mark.native),
                                        pytest.param("gpu", marks=pytest.mark.gpu)])
def device_backend(request):
    yield from open_backend(request.param)


def test_host_and_device_train_a_model_of_every_layer_to_the_same_losses(device_backend):
    x, y = _batches()

    def train(device):
        model = decoder().compile(optimizers.Adam(1e-2), seed=2, device=device)
        return [model.train_on_batch(xb, yb) for xb, yb in zip(x, y)], model.get_weights()

    (host, host_weights), (dev, dev_weights) = train("host"), train(device_backend)
    assert np.isfinite(host).all() and host[-1] < host[0]
    np.testing.assert_allclose(dev, host, rtol=2e-4, atol=2e-5)
    for d, h in zip(dev_weights, host_weights, strict=True):
        np.testing.assert_allclose(d, h, rtol=1e-3, atol=1e-4)


@pytest.mark.native
def test_training_and_inference_of_every_layer_stay_on_the_device(monkeypatch):
    from pymagma import runtime, simulator

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    x, y = _batches(2)
    with simulator.simulated():
        model = decoder().compile(optimizers.SGD(1e-2, momentum=0.9), metrics=["accuracy"], seed=3, device="gpu")
        model.progress_interval = float("inf")  # one progress read: the epoch end
        model.fit(x.reshape(16, 2, 4, 4), y.reshape(16), batch_size=8, epochs=1, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in an epoch of 2 steps: {reads}"
        reads.clear()
        out = model.predict(x[0], batch_size=8)
        assert out.shape == (8, 3) and reads == [out.nbytes], f"inference read {reads}"


# --------------------------------------------------------------------------------------------------- the zoo


@pytest.mark.parametrize("name, convs", [("vgg", 13), ("alexnet", 5)])
@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 8, 8)])
def test_vgg_and_alexnet_fit_any_image_size(name, convs, shape):
    from magmadnn import zoo

    model = zoo.build(name, shape, 7, width=0.0625)
    assert sum(type(la).__name__ == "Conv2D" for la in model.layers) == convs
    assert model.predict(RNG.standard_normal((2, *shape)).astype(np.float32)).shape == (2, 7)
