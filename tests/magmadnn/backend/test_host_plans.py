"""The host's planned geometry (convolution and pooling, found by the identity of their geometry tuples) against the
same ops worked out afresh, bit for bit; the reductions and the data check on their one-call paths."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.backend import host
from magmadnn.backend.host import _common, conv, pooling, reductions


def _fresh(value):
    """An equal value that is a new object (nested tuples rebuilt), so that no identity matches a kept plan."""
    return tuple(_fresh(v) for v in value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("stride,padding,dilation", [((1, 1), ((2, 2), (2, 2)), (1, 1)),
                                                     ((2, 1), ((0, 1), (1, 0)), (1, 2))])
@pytest.mark.parametrize("c,k", [(1, 6), (6, 16)])
def test_a_planned_convolution_equals_the_unplanned_one_bit_for_bit(stride, padding, dilation, c, k):
    rng = np.random.default_rng(c * k)
    x = rng.standard_normal((4, c, 12, 11)).astype(np.float32)
    w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    conv._plan.seen.clear()
    results = []
    for geometry in [(stride, padding, dilation)] * 2 + [tuple(map(_fresh, (stride, padding, dilation)))]:
        saved = {}
        y = host.conv2d_forward(x, w, *geometry, 1, bias=b, saved=saved, activation="relu")
        dy = np.ones_like(y)
        results.append((y, host.conv2d_backward_data(dy, w, x.shape, *geometry),
                        host.conv2d_backward_filter(dy, x, w.shape, *geometry, saved=saved)))
    assert len(conv._plan.seen) == 2  # the same objects found their plan; equal new ones made another
    for got in results[1:]:
        for a, e in zip(got, results[0]):
            np.testing.assert_array_equal(a, e)
    # the plan holds the geometry the ops would work out again
    plan = conv._plan(x.shape, w.shape, stride, padding, dilation)
    again = conv._ConvPlan(x.shape, w.shape, stride, padding, dilation)
    assert vars(plan) == vars(again)


def test_geometry_in_lists_is_never_kept_and_bad_geometry_raises_every_time():
    x = np.ones((2, 1, 6, 6), np.float32)
    w = np.ones((2, 1, 3, 3), np.float32)
    conv._plan.seen.clear()
    stride = [1, 1]  # a list may change in place: planned each call, never kept
    y = host.conv2d_forward(x, w, stride, ((0, 0), (0, 0)), (1, 1), 1, saved={})
    stride[0] = 2
    y2 = host.conv2d_forward(x, w, stride, ((0, 0), (0, 0)), (1, 1), 1, saved={})
    assert y.shape == (2, 2, 4, 4) and y2.shape == (2, 2, 2, 4)
    assert conv._plan.seen == {}
    bad = ((-1, 0), (0, 0))
    for _ in range(2):
        with pytest.raises(ValueError):
            host.conv2d_forward(x, w, (1, 1), bad, (1, 1), 1, saved={})
    assert conv._plan.seen == {}


def test_same_objects_keys_by_identity_keeps_the_objects_alive_and_clears_at_its_limit():
    calls = []

    def answer(shape, geometry):
        calls.append(geometry)
        return (shape, geometry)

    planned = _common.same_objects(answer, by_value=1, limit=2)
    g = (1, (2, 3))
    assert planned((4,), g) == ((4,), g) and planned((4,), g) == ((4,), g) and len(calls) == 1
    assert planned((5,), g) == ((5,), g) and len(calls) == 2  # the shapes are keyed by value
    assert planned((4,), _fresh(g)) == ((4,), g) and len(calls) == 3  # an equal new object: worked out again
    assert len(planned.seen) == 1  # the limit of 2 cleared the table before the third was kept
    (objects, _), = planned.seen.values()
    assert objects[0] is not g  # the kept object is held, so its id cannot name another object


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("window,stride,padding", [((2, 2), (2, 2), ((0, 0), (0, 0))),
                                                   ((3, 3), (2, 2), ((1, 1), (1, 1)))])
def test_planned_pooling_equals_the_unplanned_one_bit_for_bit(mode, window, stride, padding):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 9, 8)).astype(np.float32)
    pooling._pool_geometry.seen.clear()
    outs = []
    for geometry in [(window, stride, padding)] * 2 + [tuple(map(_fresh, (window, stride, padding)))]:
        y, ctx = host.pool2d_forward(x, mode, *geometry)
        dx = host.pool2d_backward(np.ones_like(y), x, y, ctx, mode, *geometry)
        outs.append((y, ctx, dx))
    assert len(pooling._pool_geometry.seen) == 2
    for got in outs[1:]:
        for a, e in zip(got, outs[0]):
            np.testing.assert_array_equal(a, e)
    assert pooling._pool_geometry(x.shape, window, stride, padding) == pooling._geometry(x.shape, window, stride,
                                                                                         padding)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_the_host_sum_is_ndarray_sum_bit_for_bit(dtype, axis, keepdims):
    """The op itself (``host.sum`` reads half operands as float32 around it)."""
    a = (np.random.default_rng(1).standard_normal((7, 130, 5)) * 100).astype(dtype)
    got, want = reductions.sum(a, axis=axis, keepdims=keepdims), a.sum(axis=axis, keepdims=keepdims)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(64, 10), (8, 6, 7, 9), (3, 4, 130)])
def test_channel_sum_is_numpys_sum_in_the_same_order(shape):
    a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    want = a.sum(axis=0) if a.ndim == 2 else a.reshape(shape[0], shape[1], -1).sum(axis=0).sum(axis=1)
    np.testing.assert_array_equal(host.channel_sum(a), want)


def test_reshape_of_an_array_and_of_a_list():
    a = np.arange(6.0)
    assert host.reshape(a, (2, 3)).base is a
    np.testing.assert_array_equal(host.reshape([1.0, 2.0], (2, 1)), np.array([[1.0], [2.0]]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_data_check_finds_one_bad_entry_in_a_large_array_contiguous_or_not(dtype, bad):
    """Large enough for BLAS's threaded dot; a strided view takes the summing path."""
    from magmadnn._checks import finite_array

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 1, 28, 28)).astype(dtype)
    finite_array(x, "inputs", "fit")
    finite_array(x[::2], "inputs", "fit")
    where = (int(rng.integers(300)), 0, int(rng.integers(28)), int(rng.integers(28)))
    x[where] = bad
    with pytest.raises(ValueError, match=rf"fit: inputs hold non-finite values \(1 of {x.size}; .* at index "
                                         rf"\({where[0]}, 0, {where[2]}, {where[3]}\)\)"):
        finite_array(x, "inputs", "fit")
    view = x[where[0] % 2::2]
    with pytest.raises(ValueError, match="non-finite"):
        finite_array(view, "inputs", "fit")


# ------------------------------------------------------------- fit's data check: whole once, then batch by batch


def _model():
    from magmadnn import zoo

    return zoo.mlp((4,), 2, hidden=(3,)).compile("sgd", "cross_entropy", seed=0)


@pytest.mark.parametrize("shuffle", [False, True])
def test_an_array_changed_in_place_after_a_fit_is_refused_at_its_bad_batch(shuffle):
    """The first fit reads the whole array; a later fit of the same array object checks each batch as it is made,
    so a value made NaN in place between fits is still refused before a step reads it, naming its row in x."""
    from magmadnn._checks import found_finite

    model = _model()
    x, y = np.ones((8, 4), np.float32), np.zeros(8, np.int64)
    assert not found_finite(x)
    model.fit(x, y, batch_size=4, shuffle=shuffle, verbose=0)
    assert found_finite(x) and not found_finite(x.copy()) and not found_finite(x[:4])
    x[5, 1] = np.nan
    assert found_finite(x)  # (the same object: its values are what the batches check)
    with pytest.raises(ValueError, match=r"fit: the inputs x \(input .*\) hold non-finite values \(a batch: 1 of its "
                                         r"16 entries; the first is nan at index \(5, 1\)\)"):
        model.fit(x, y, batch_size=4, shuffle=shuffle, verbose=0)
    assert all(np.isfinite(p.data).all() for p in model.parameters())
    x[5, 1] = 1.0
    x64 = x.astype(np.float64)  # a cast copy: never deferred, its original checked whole
    model.fit(x64, y, batch_size=4, verbose=0)
    x64[2, 3] = np.inf
    with pytest.raises(ValueError, match=r"hold non-finite values \(1 of 32; the first is inf at index \(2, 3\)\)"):
        model.fit(x64, y, batch_size=4, verbose=0)


def test_a_later_fit_reads_the_data_once_per_batch_not_whole_first():
    import magmadnn.models.batches as batches
    import magmadnn.models.inputs as inputs

    model = _model()
    x, y = np.ones((12, 4), np.float32), np.zeros(12, np.int64)
    calls = {"whole": 0, "batch": 0}
    whole, batch = inputs.finite_array, batches.finite_array

    def count(kind, fn):
        def call(*args):
            calls[kind] += 1
            return fn(*args)
        return call

    inputs.finite_array, batches.finite_array = count("whole", whole), count("batch", batch)
    try:
        model.fit(x, y, batch_size=4, verbose=0)
        first = dict(calls)
        model.fit(x, y, batch_size=4, verbose=0, epochs=2)
    finally:
        inputs.finite_array, batches.finite_array = whole, batch
    assert first == {"whole": 2, "batch": 0}  # x and y whole
    assert calls == {"whole": 3, "batch": 6}  # then y whole (integers: no pass) and x batch by batch, each epoch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 3, 4, 6), (1, 2, 3, 3), (0, 3, 2, 2), (7, 16, 10, 10)])
@pytest.mark.parametrize("bias", [True, False])
def test_a_convolutions_relu_backward_in_one_pass_equals_the_two_pass_path_bit_for_bit(dtype, shape, bias):
    """The samples as rows through the dense kernel (dx and the sums over the samples in one pass), then the sums
    over each channel's pixels: the same bits as the mask pass and channel_sum, NaN from an infinite dy included."""
    from magmadnn.backend import _host_jit

    if _host_jit.kernels is None:
        pytest.skip("no numba")
    rng = np.random.default_rng(sum(shape))
    dy = rng.standard_normal(shape).astype(dtype)
    y = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    if dy.size:
        dy.reshape(-1)[:: 7] *= 1e30  # large and mixed magnitudes: the order of the sums shows
        dy.reshape(-1)[3] = np.inf
        y.reshape(-1)[3] = 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        dx, db = host.bias_activation_backward(dy, None, y, "relu", bias=bias)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_host_jit, "kernels", None)
            want_dx, want_db = host.bias_activation_backward(dy, None, y, "relu", bias=bias)
    np.testing.assert_array_equal(dx, want_dx)
    assert dx.dtype == want_dx.dtype == dtype
    if bias:
        assert db.dtype == want_db.dtype and db.shape == (shape[1],)
        np.testing.assert_array_equal(db, want_db)
    else:
        assert db is None and want_db is None
