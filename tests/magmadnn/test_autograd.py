"""Autograd semantics: accumulation, multi-use nodes, no_grad, graph release, errors, Tensor operators."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import magmadnn as md
from magmadnn import F, Function, Parameter, Tensor, no_grad
from magmadnn.autograd import GraphReleasedError, enable_grad, is_grad_enabled


def test_tensor_basics():
    t = Tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == np.float32 and t.shape == (2, 2) and t.ndim == 2 and t.backend.name == "host"
    assert not t.requires_grad and t.grad is None and t.is_leaf
    assert isinstance(t.numpy(), np.ndarray)
    assert Tensor(np.float64(3.0)).item() == 3.0
    with pytest.raises(ValueError, match="one element"):
        t.item()
    p = Parameter(np.zeros(3, np.float32), name="bias")
    assert p.requires_grad and p.name == "bias" and "bias" in repr(p)
    assert md.Tensor is Tensor and md.F is F


def test_gradient_accumulates_over_backward_calls_until_zero_grad():
    x = Parameter(np.array([1.0, 2.0, 3.0]))
    for _ in range(2):
        (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * 2 * np.array([1.0, 2.0, 3.0]))
    x.zero_grad()
    assert x.grad is None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 3.0, 3.0])


def test_multi_use_node_and_residual_connection():
    x = Parameter(np.array([0.5, -1.0, 2.0]))
    h = x * x  # used twice below
    y = (h + h * 3.0 + x).sum()  # d/dx = 8x + 1
    y.backward()
    np.testing.assert_allclose(x.grad, 8 * x.numpy() + 1)

    w = Parameter(np.array([[0.3, -0.2], [0.1, 0.4]]))
    a = Parameter(np.array([[1.0, 2.0]]))
    h = F.tanh(a @ w)
    out = (h + F.tanh(h @ w)).sum()  # residual: h feeds both the skip and the block
    out.backward()
    # reference by hand: d/dh of [h + tanh(h w)] summed, then through tanh(a w)
    hv = np.tanh(a.numpy() @ w.numpy())
    inner = np.tanh(hv @ w.numpy())
    dh = 1 + (1 - inner**2) @ w.numpy().T
    np.testing.assert_allclose(a.grad, (dh * (1 - hv**2)) @ w.numpy().T, rtol=1e-6)


def test_leaf_gradients_never_share_memory():
    a, b = Parameter(np.ones((2, 3))), Parameter(np.ones((2, 3)))
    c = Parameter(np.ones(6))
    (a + b + c.reshape(2, 3)).sum().backward()
    assert not np.shares_memory(a.grad, b.grad) and not np.shares_memory(a.grad, c.grad)
    a.grad *= 5.0  # in-place edits of one gradient (e.g. clipping) leave the others alone
    np.testing.assert_allclose(b.grad, 1.0)
    np.testing.assert_allclose(c.grad, 1.0)


def test_no_grad_records_nothing_and_restores_state():
    x = Parameter(np.ones(3))
    with no_grad():
        assert not is_grad_enabled()
        y = x * 2.0
        with enable_grad():
            assert is_grad_enabled()
    assert is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()

    @no_grad()
    def infer(t):
        return t * 2.0

    assert not infer(x).requires_grad and is_grad_enabled()
    assert not (x.detach() * 2.0).requires_grad


def test_constants_do_not_require_grad_and_get_no_grad():
    x = Parameter(np.array([1.0, 2.0]))
    c = Tensor(np.array([3.0, 4.0]))
    (x * c).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 4.0])
    assert c.grad is None


def test_graph_is_released_after_backward():
    x = Parameter(np.random.default_rng(0).standard_normal((4, 3)))
    w = Parameter(np.random.default_rng(1).standard_normal((3, 2)))
    h = F.relu(x @ w)
    loss = h.sum()
    fn_ref = weakref.ref(h.grad_fn)
    saved_ref = weakref.ref(h.grad_fn.x)  # the matmul output the activation saved for backward
    loss.backward()
    gc.collect()
    assert saved_ref() is None, "saved forward arrays must be freed by backward()"
    assert fn_ref() is None or fn_ref().released
    with pytest.raises(GraphReleasedError, match="already released.*second time"):
        loss.backward()


def test_backward_errors():
    x = Parameter(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"one-element tensor.*\(2, 2\)"):
        (x * 2.0).backward()
    with pytest.raises(ValueError, match=r"grad has shape \(3,\), expected \(2, 2\)"):
        (x * 2.0).backward(np.ones(3))
    (x * 2.0).backward(np.full((2, 2), 0.5))
    np.testing.assert_allclose(x.grad, np.ones((2, 2)))


def test_custom_function_and_shape_check():
    class Cube(Function):
        def forward(self, a):
            self.a = a
            return self.xp.power(a, 3)

        def backward(self, g):
            return (self.xp.multiply(g, self.xp.multiply(self.xp.multiply(self.a, self.a), 3.0)),)

    class Broken(Function):
        def forward(self, a):
            return self.xp.sum(a, keepdims=True)

        def backward(self, g):
            return (g,)  # wrong shape on purpose

    x = Parameter(np.array([1.0, 2.0]))
    Cube.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 12.0])
    with pytest.raises(RuntimeError, match=r"Broken.backward returned a gradient of shape \(1,\) for an input"):
        Broken.apply(x).sum().backward()


def test_operators_scalars_and_dtype():
    x = Parameter(np.array([1.0, 2.0, 4.0], np.float32))
    y = (2.0 - x) * 3.0 + 1.0 / x - (-x) / 2.0 + x**2
    assert y.dtype == np.float32
    y.sum().backward()
    xv = x.numpy().astype(np.float64)
    np.testing.assert_allclose(x.grad, -3.0 - 1.0 / xv**2 + 0.5 + 2 * xv, rtol=1e-6)
    assert x.grad.dtype == np.float32
    m = Parameter(np.arange(6.0).reshape(2, 3))
    assert m.T.shape == (3, 2) and m.reshape(3, 2).shape == (3, 2) and m.reshape((6,)).shape == (6,)
    (m.T.reshape(6) * np.arange(6.0)).sum().backward()
    np.testing.assert_allclose(m.grad, np.arange(6.0).reshape(3, 2).T)
    mm = Parameter(np.eye(2))
    (np.array([[1.0, 2.0]]) @ mm).sum().backward()
    np.testing.assert_allclose(mm.grad, [[1.0, 1.0], [2.0, 2.0]])


def test_mean_sum_axes_and_broadcast_grads():
    x = Parameter(np.ones((2, 3, 4)))
    b = Parameter(np.ones((3, 1)))
    (x * b).mean(axis=(0, 2)).sum().backward()
    np.testing.assert_allclose(x.grad, np.full((2, 3, 4), 1 / 8))
    np.testing.assert_allclose(b.grad, np.ones((3, 1)))


def test_two_layer_mlp_trains_by_hand_written_loop():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    xp = md.backend.get()
    params = [Parameter(xp.normal(xp.rng(1), (8, 32), 0, 0.3)), Parameter(xp.zeros((32,))),
              Parameter(xp.normal(xp.rng(2), (32, 3), 0, 0.3)), Parameter(xp.zeros((3,)))]  # fmt: skip
    w1, b1, w2, b2 = params
    velocity = [xp.zeros_like(p.data) for p in params]

    def logits(inp):
        return F.dense(F.relu(F.dense(inp, w1, b1)), w2, b2)

    first = None
    for _ in range(40):
        for i in range(0, 256, 32):
            loss = F.softmax_cross_entropy(logits(x[i : i + 32]), y[i : i + 32])
            first = loss.item() if first is None else first
            for p in params:
                p.zero_grad()
            loss.backward()
            for p, v in zip(params, velocity):
                xp.sgd_update(p.data, p.grad, v, 0.05, momentum=0.9)
    with no_grad():
        acc = (logits(x).numpy().argmax(axis=1) == y).mean()
    assert loss.item() < 0.5 * first and acc > 0.9
    assert all(p.dtype == np.float32 for p in params)


def test_leaf_ready_hook_fires_once_per_leaf_when_its_gradient_is_final():
    """The data-parallel bucket hook: a shared weight is ready only after its last use; the leaf used last in the
    forward pass (first in the backward pass) is ready first; constants are never reported."""
    w1 = Parameter(np.array([[1.0, 2.0], [3.0, 4.0]]), name="w1")
    w2 = Parameter(np.array([[0.5], [-1.0]]), name="w2")
    b = Parameter(np.array([0.1, 0.2]), name="b")
    unused = Parameter(np.ones(3), name="unused")
    x = Tensor(np.array([[1.0, -1.0]]))
    h = F.tanh(x @ w1 + b)
    h = F.tanh(h @ w1)  # w1 used twice
    loss = (h @ w2).sum()
    seen = []

    def ready(leaf):
        seen.append((leaf.name, None if leaf.grad is None else leaf.grad.copy()))

    loss.backward(on_leaf_ready=ready)
    assert [name for name, _ in seen] == ["w2", "b", "w1"]  # w1 waits for its first use (x @ w1)
    for name, grad in seen:
        final = {"w1": w1, "w2": w2, "b": b}[name].grad
        np.testing.assert_array_equal(grad, final)  # nothing was added after the hook saw it
    assert unused.grad is None

    leaf = Parameter(np.array(2.0), name="alone")
    got = []
    leaf.backward(on_leaf_ready=lambda t: got.append(t.name))
    assert got == ["alone"]


def test_the_implicit_gradient_one_of_a_fused_mean_loss_equals_an_explicit_one():
    """``loss.backward()`` on the fused mean softmax cross-entropy folds the upstream gradient 1 into its op
    (``backward_of_one``, no array of ones): the same gradients as an explicit ``backward(1.0)`` and as the mean of
    the per-row losses."""
    rng = np.random.default_rng(0)
    logits, labels = rng.standard_normal((5, 4)).astype(np.float32), rng.integers(0, 4, 5)
    grads = []
    for how in ("implicit", "explicit", "per-row"):
        x = Parameter(logits.copy())
        if how == "per-row":
            F.softmax_cross_entropy(x, labels, reduction="none").mean().backward()
        else:
            loss = F.softmax_cross_entropy(x, labels)
            assert hasattr(loss._fn, "backward_of_one")
            loss.backward() if how == "implicit" else loss.backward(np.float32(1.0))
        grads.append(np.asarray(x.grad))
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_allclose(grads[0], grads[2], rtol=1e-6, atol=1e-7)


def test_a_kept_seed_never_becomes_a_leafs_gradient():
    """A backend that keeps constants seeds ``backward()`` with a kept array of ones: a leaf reached by the seed
    itself (a scalar parameter as the loss, or through a reshape) gets a copy, so writing into its ``.grad`` leaves
    the next seed whole."""

    class Keeping:  # the host backend plus a constant cache, as the device backend keeps constants
        def __init__(self):
            self.kept = {}

        def __getattr__(self, name):
            return getattr(md.backend.get("host"), name)

        def constant(self, value, dtype=None):
            host = np.asarray(value, dtype)
            return self.kept.setdefault((host.dtype.str, host.shape), host)

    xp = Keeping()
    for make in (lambda w: w, lambda w: w.reshape(())):
        w = Parameter(np.asarray(3.0, np.float32), backend=xp)
        make(w).backward()
        w.grad *= 7.0
        w.zero_grad()
        make(w).backward()
        np.testing.assert_array_equal(w.grad, 1.0)


def test_a_functions_output_is_always_a_backend_array_and_its_own_release_runs():
    """Function.apply converts what a forward returns (a NumPy scalar from a reduction, a list) with ``asarray``,
    however often a backend's own arrays passed through; backward calls a Function's own ``release`` and takes a
    tuple subclass of gradients; a wrong count of gradients is still named."""
    from collections import namedtuple

    pair = namedtuple("pair", "a b")
    released = []

    class Scalar(Function):  # NumPy's sum of a 1-D array is a NumPy scalar, not an array
        def forward(self, a):
            self.shape = a.shape
            return np.float32(a.sum())

        def backward(self, g):
            return (np.broadcast_to(g, self.shape).astype(np.float32),)

    class Both(Function):
        def forward(self, a, b):
            return a * b

        def backward(self, g):
            return pair(g * 2.0, g * 3.0)

        def release(self):
            released.append(type(self).__name__)
            super().release()

    class Miscounted(Function):
        def forward(self, a, b):
            return a + b

        def backward(self, g):
            return (g,)

    x, y = Parameter(np.ones(3, np.float32)), Parameter(np.ones(3, np.float32))
    for _ in range(3):  # the ndarray class is known after the first apply; a scalar is converted each time
        s = Scalar.apply(x * 1.0)
        assert type(s.data) is np.ndarray and s.data.shape == () and s.data.dtype == np.float32
    x.grad = None
    (Both.apply(x, y).sum() + Scalar.apply(x)).backward()
    assert released == ["Both"]
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(y.grad, [3.0, 3.0, 3.0])
    with pytest.raises(RuntimeError, match="Miscounted.backward returned 1 gradients for 2 inputs"):
        Miscounted.apply(x, y).sum().backward()


def test_the_tape_walk_visits_every_function_once_in_reverse_topological_order():
    """A diamond with a shared input: each Function's backward runs once, after every consumer of its output."""
    seen = []

    class Tag(Function):
        def forward(self, a, name):
            self.name = name
            return a * 1.0

        def backward(self, g):
            seen.append(self.name)
            return (g,)

    x = Parameter(np.ones(2))
    a = Tag.apply(x, name="a")
    b, c = Tag.apply(a, name="b"), Tag.apply(a, name="c")
    Tag.apply(b + c, name="d").sum().backward()
    assert sorted(seen) == ["a", "b", "c", "d"] and seen[0] == "d" and seen[-1] == "a"
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])
