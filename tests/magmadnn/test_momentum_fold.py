"""SGD's momentum folded into the dense weight-gradient GEMM of a host training step (``magmadnn._momentum_fold``)
and the BLAS calls it uses (``backend.host._blas``): against float64 and fused multiply-add references, PyTorch's
SGD, the unfolded path, and with the BLAS lookup switched off."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magmadnn import _momentum_fold, mixed_precision, zoo
from magmadnn.backend.host import _blas
from magmadnn.optimizers import SGD, Adam

torch = pytest.importorskip("torch")
needs_blas = pytest.mark.skipif(not _blas.available(), reason="NumPy's BLAS is not an OpenBLAS found here")


@pytest.fixture
def no_blas(monkeypatch):
    """As where NumPy's BLAS is not found: nothing folds."""
    monkeypatch.setattr(_blas, "_ROUTINES", None)
    monkeypatch.setattr(_blas, "_LOADED", True)


# ------------------------------------------------------------------------------------------ the BLAS calls


@needs_blas
@settings(max_examples=30, deadline=None)
@given(st.sampled_from([np.float32, np.float64]), st.integers(0, 70), st.integers(1, 40), st.integers(1, 40),
       st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_gemm_tn_into_accumulates_the_product_into_its_output(dtype, k, m, n, beta, seed):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal(shape).astype(dtype) for shape in ((k, m), (k, n), (m, n)))
    ref = a.astype(np.float64).T @ b.astype(np.float64) + dtype(beta).astype(np.float64) * c.astype(np.float64)
    a0, b0 = a.copy(), b.copy()
    assert _blas.gemm_tn_into(a, b, c, beta)
    eps = 1e-5 if dtype == np.float32 else 1e-12
    tol = {"rtol": eps, "atol": eps * max(k, 1)}
    np.testing.assert_allclose(c, ref, **tol)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@needs_blas
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 50_000), st.floats(-1.0, 1.0, width=32), st.integers(0, 2**32 - 1))
def test_axpy_rounds_each_element_once_or_as_numpy_does(size, alpha, seed):
    """float32 y += alpha x: each element is the exact y + alpha x rounded once (a fused multiply-add, PyTorch's
    rounding of ``p.add_(v, alpha=-lr)``: float64 holds a float32 product exactly) or, where OpenBLAS's kernel runs
    scalar code, NumPy's ``y + alpha x`` (the product rounded first); sizes past 10,000 take OpenBLAS's threads."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32)
    a = np.float32(alpha)
    fused = (y.astype(np.float64) + np.float64(a) * x.astype(np.float64)).astype(np.float32)
    twice = y + a * x
    assert _blas.axpy(alpha, x, y)
    assert np.all((y == fused) | (y == twice))
    if size >= 1024 and alpha:
        assert np.mean(y == fused) > 0.99  # the vector kernel's elements: one rounding


def test_the_blas_calls_decline_what_they_do_not_take(no_blas):
    a = np.ones((4, 3), np.float32)
    assert not _blas.gemm_tn_into(a, a, np.ones((3, 3), np.float32), 0.5)
    assert not _blas.axpy(1.0, a, a.copy())
    assert not _blas.available()


def test_the_blas_lookup_is_switched_off_by_the_environment_and_survives_finding_nothing(monkeypatch):
    monkeypatch.setenv("MAGMADNN_HOST_BLAS", "0")
    assert _blas._load() is None
    monkeypatch.setenv("MAGMADNN_HOST_BLAS", "1")
    monkeypatch.setattr(_blas, "_openblas_paths", lambda: [])
    assert _blas._load() is None
    monkeypatch.setattr(_blas, "_openblas_paths", lambda: ["/nonexistent/libopenblas.so"])
    assert _blas._load() is None


@needs_blas
def test_the_blas_calls_decline_strided_mixed_or_misshapen_arrays():
    a, c = np.ones((4, 3), np.float32), np.ones((3, 3), np.float32)
    before = c.copy()
    assert not _blas.gemm_tn_into(np.ones((4, 6), np.float32)[:, ::2], a, c, 0.5)  # strided
    assert not _blas.gemm_tn_into(a, a.astype(np.float64), c, 0.5)  # mixed dtypes
    assert not _blas.gemm_tn_into(a, a, np.ones((3, 4), np.float32), 0.5)  # wrong output shape
    assert not _blas.gemm_tn_into(a.astype(np.int32), a.astype(np.int32), c.astype(np.int32), 0.5)
    assert not _blas.axpy(1.0, a, np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(c, before)


@needs_blas
def test_the_compiled_address_reader_agrees_with_numpy_and_is_optional(monkeypatch):
    """The BLAS calls read their arrays' addresses through numba where the host's kernels are; each address is the
    one NumPy reports, and without the kernels the calls read NumPy's and compute the same."""
    from magmadnn.backend import _host_jit

    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 8)).astype(np.float32)
    arrays = [base, base[2:], base.astype(np.float64), np.zeros(0, np.float32), base.reshape(-1)[5:]]
    frozen = base.copy()
    frozen.flags.writeable = False
    arrays.append(frozen)
    _blas.available()
    two, three = _blas._address_readers()
    if _host_jit.kernels is not None:
        assert two is not _blas._interface_addresses
    at = base.__array_interface__["data"][0]
    for a in arrays:  # (each kind of array once in each place: every new kind compiles once)
        want = a.__array_interface__["data"][0]
        assert tuple(two(a, base)) == (want, at) and tuple(two(base, a)) == (at, want)
        assert tuple(three(a, base, base)) == (want, at, at) and tuple(three(base, base, a)) == (at, at, want)
    a, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    v = rng.standard_normal((3, 4)).astype(np.float32)
    results = []
    for readers in ((two, three), (_blas._interface_addresses, _blas._interface_addresses)):
        monkeypatch.setattr(_blas, "_addresses2", readers[0])
        monkeypatch.setattr(_blas, "_addresses3", readers[1])
        c, p = v.copy(), v.copy()
        assert _blas.gemm_tn_into(a, b, c, 0.9) and _blas.axpy(-0.5, c, p)
        results.append((c, p))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    monkeypatch.setattr(_host_jit, "kernels", None)
    assert _blas._address_readers() == (_blas._interface_addresses, _blas._interface_addresses)


# ------------------------------------------------------------------------------------------ the fold in training


def _data(n=96, features=12, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, features)).astype(np.float32), rng.integers(0, classes, n)


def _model(optimizer, features=12, classes=4, dtype="float32"):
    mixed_precision.set_global_policy(dtype)
    try:
        model = zoo.mlp((features,), classes, hidden=(16, 8))
    finally:
        mixed_precision.set_global_policy("float32")
    return model.compile(optimizer=optimizer, loss="cross_entropy", seed=3)


def _torch_trained(model, x, y, batch, lr, momentum, epochs):
    """PyTorch's SGD from the model's current weights over the same batches (no shuffling); its weights, Keras'
    layout."""
    weights = model.get_weights()
    layers = []
    for i in range(0, len(weights), 2):
        linear = torch.nn.Linear(*weights[i].shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(weights[i].T.copy()))
            linear.bias.copy_(torch.from_numpy(weights[i + 1].copy()))
        layers += [linear, torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    for _ in range(epochs):
        for s in range(0, len(x), batch):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x[s:s + batch])),
                                                     torch.from_numpy(y[s:s + batch]))
            loss.backward()
            opt.step()
    return [a for layer in net if isinstance(layer, torch.nn.Linear)
            for a in (layer.weight.detach().numpy().T, layer.bias.detach().numpy())]


def _count_folds(monkeypatch):
    calls = []
    fold = _momentum_fold.Sink.fold

    def counted(self, x, dy):
        out = fold(self, x, dy)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_momentum_fold.Sink, "fold", counted)
    return calls


@needs_blas
def test_fit_with_folded_momentum_trains_as_pytorch_sgd(monkeypatch):
    """fit with SGD(momentum) folds every dense weight's momentum from the second step on (the first makes the
    velocities) and ends where PyTorch's SGD ends."""
    x, y = _data()
    calls = _count_folds(monkeypatch)
    model = _model(SGD(0.1, momentum=0.9))
    ref = _torch_trained(model, x, y, 16, 0.1, 0.9, epochs=2)
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    steps = 2 * len(x) // 16
    assert calls == [True] * (3 * (steps - 1))  # three dense weights, every step after the first
    for got, want in zip(model.get_weights(), ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@needs_blas
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_fold_changes_nothing_but_the_last_rounding_of_the_update(monkeypatch, dtype):
    """Folded and unfolded training (the BLAS lookup off) agree to the dtype's rounding."""
    x, y = _data()
    x = x.astype(dtype)
    folded, plain = _model(SGD(0.05, momentum=0.8), dtype=dtype), _model(SGD(0.05, momentum=0.8), dtype=dtype)
    calls = _count_folds(monkeypatch)
    folded.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    assert calls and all(calls)
    calls.clear()
    monkeypatch.setattr(_blas, "_ROUTINES", None)
    monkeypatch.setattr(_blas, "_LOADED", True)
    plain.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    assert calls == []
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}
    for a, b in zip(folded.get_weights(), plain.get_weights(), strict=True):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, **tol)


@needs_blas
@pytest.mark.parametrize("optimizer", [
    lambda: SGD(0.1, momentum=0.9, nesterov=True), lambda: SGD(0.1, momentum=0.9, weight_decay=0.01),
    lambda: SGD(0.1, momentum=0.9, clipnorm=1.0), lambda: SGD(0.1), lambda: Adam(0.01)])
def test_rules_the_fold_does_not_cover_never_fold(monkeypatch, optimizer):
    calls = _count_folds(monkeypatch)
    x, y = _data()
    _model(optimizer()).fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
    assert calls == []


def _fitted():
    """(x, y, a model fitted one epoch with SGD(momentum), its optimizer, copies of the velocities)."""
    x, y = _data()
    model = _model(SGD(0.1, momentum=0.9))
    model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    opt = model.optimizer
    return x, y, model, opt, [s["velocity"].copy() for s in opt.slot_arrays.values()]


@needs_blas
def test_a_backward_outside_the_training_step_leaves_the_velocity_alone(monkeypatch):
    """After fit, a user's own backward computes plain gradients: the velocities are not touched."""
    from magmadnn import autograd

    x, y, model, opt, velocities = _fitted()
    calls = _count_folds(monkeypatch)
    loss = model.loss(model(x[:8], training=True), y[:8])
    grads = autograd.grad(loss, model.trainable_weights)
    assert calls == [] and all(g is not None for g in grads)
    for before, state in zip(velocities, opt.slot_arrays.values(), strict=True):
        np.testing.assert_array_equal(state["velocity"], before)


@needs_blas
def test_a_custom_step_through_scale_loss_sees_plain_gradients(monkeypatch):
    """After fit, a Keras-style custom step (``optimizer.scale_loss(loss).backward()``, then reading each weight's
    ``.grad``) gets the gradients themselves, not velocities: only fit's own step arms the fold."""
    x, y, model, opt, velocities = _fitted()
    calls = _count_folds(monkeypatch)
    weights = model.trainable_weights
    for w in weights:
        w.grad = None
    opt.scale_loss(model.loss(model(x[:8], training=True), y[:8])).backward()
    grads = [w.grad for w in weights]
    from magmadnn import autograd

    for w in weights:
        w.grad = None
    expected = autograd.grad(model.loss(model(x[:8], training=True), y[:8]), weights)
    assert calls == []
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(getattr(want, "data", want)))
    for before, state in zip(velocities, opt.slot_arrays.values(), strict=True):
        np.testing.assert_array_equal(state["velocity"], before)


@needs_blas
def test_a_weight_used_twice_gets_both_gradients_in_its_velocity():
    """One Dense layer applied twice: the first gradient folds, the tape adds the second onto the velocity, and the
    step puts the sum back: the same training as without the fold."""
    from magmadnn import layers as L
    from magmadnn.models import Model

    def build():
        inp = L.Input((6,))
        shared = L.Dense(6, activation="relu")
        out = L.Dense(3)(shared(shared(inp)))
        return Model(inp, out).compile(optimizer=SGD(0.05, momentum=0.9), loss="cross_entropy", seed=1)

    x, y = _data(64, 6, 3)
    folded = build()
    folded.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_blas, "_ROUTINES", None)
        mp.setattr(_blas, "_LOADED", True)
        plain = build()
        plain.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(folded.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_without_blas_fit_trains_as_pytorch_sgd(no_blas):
    x, y = _data()
    model = _model(SGD(0.1, momentum=0.9))
    ref = _torch_trained(model, x, y, 16, 0.1, 0.9, epochs=1)
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), ref, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@needs_blas
def test_changes_between_steps_are_seen_before_the_next_fold(monkeypatch):
    """A weight frozen after a step keeps its velocity, a new momentum folds with the new value (the same training
    as without the fold), and clipping set later stops the fold."""
    x, y = _data()

    def run(model):
        model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        model.layers[-1].trainable = False
        model.optimizer.momentum = 0.5
        frozen = model.optimizer.slot_arrays[len(model.optimizer.slot_arrays) - 2]["velocity"].copy()
        model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        return frozen, model.optimizer.slot_arrays[len(model.optimizer.slot_arrays) - 2]["velocity"]

    folded = _model(SGD(0.05, momentum=0.9))
    calls = _count_folds(monkeypatch)
    before, after = run(folded)
    np.testing.assert_array_equal(after, before)
    assert calls and all(calls)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_blas, "_ROUTINES", None)
        mp.setattr(_blas, "_LOADED", True)
        plain = _model(SGD(0.05, momentum=0.9))
        run(plain)
    for a, b in zip(folded.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    calls.clear()
    folded.optimizer.clipnorm = 1.0
    folded.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    assert calls == []


@needs_blas
def test_arrays_replaced_between_steps_are_the_ones_the_next_step_updates():
    """A velocity or a weight array replaced between steps by a new array (``load_state_dict`` puts new velocities,
    ``Model.to`` moves them) is the one the next folded step reads and writes, as without the fold (the plan made
    by the last step held the old velocity: the first step folded into it)."""
    x, y = _data()

    def run(model):
        model.fit(x[:32], y[:32], batch_size=32, epochs=1, shuffle=False, verbose=0)
        slots = model.optimizer.slot_arrays
        slots[0]["velocity"] = slots[0]["velocity"].copy()
        weight = model.trainable_weights[2]
        weight.data = weight.data.copy()
        model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        return slots[0]["velocity"], weight.data

    folded = _model(SGD(0.05, momentum=0.9))
    velocity, weight = run(folded)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_blas, "_ROUTINES", None)
        mp.setattr(_blas, "_LOADED", True)
        plain = _model(SGD(0.05, momentum=0.9))
        want_velocity, want_weight = run(plain)
    np.testing.assert_allclose(velocity, want_velocity, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight, want_weight, rtol=1e-5, atol=1e-6)
    assert np.abs(velocity).max() > 0
