"""The zoo's transformers (char_transformer, vit_tiny): they learn, round-trip through save/load, keep causality,
and train on the simulated device as on the host without reading the device."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn import models, optimizers, zoo


def tiny_char_transformer():
    return zoo.char_transformer((8,), 11, dim=8, heads=2, blocks=1)


def tiny_vit():
    return zoo.vit_tiny((1, 8, 8), 3, patch=4, dim=8, heads=2, blocks=1)


def tokens(n=16, t=8, vocab=11, seed=0):
    """Sequences that count up modulo ``vocab``: the next token is learnable from the current one."""
    start = np.random.default_rng(seed).integers(0, vocab, (n, 1))
    seq = (start + np.arange(t + 1)) % vocab
    return seq[:, :-1].astype(np.int64), seq[:, 1:].astype(np.int64)


def test_zoo_char_transformer_learns_and_round_trips(tmp_path):
    x, y = tokens()
    model = tiny_char_transformer()
    assert model.output_shape == (8, 11) and "char_transformer" in zoo.BUILDERS
    model.compile(optimizers.Adam(1e-2), loss="cross_entropy", seed=0)
    before = model.evaluate(x, y, return_dict=True)["loss"]
    model.fit(x, y, batch_size=8, epochs=20, verbose=0)
    assert model.evaluate(x, y, return_dict=True)["loss"] < 0.5 * before
    loaded = models.load(model.save(tmp_path / "gpt.npz"))
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    # causal: changing the last token changes no earlier position's logits
    changed = x.copy()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    np.testing.assert_allclose(model.predict(changed)[:, :-1], model.predict(x)[:, :-1], rtol=1e-5, atol=1e-6)


def test_zoo_vit_tiny_trains_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 24)
    x = (rng.normal(size=(3, 1, 8, 8))[y] + 0.3 * rng.normal(size=(24, 1, 8, 8))).astype(np.float32)
    model = tiny_vit()
    assert model.output_shape == (3,) and "vit_tiny" in zoo.BUILDERS
    model.compile(optimizers.Adam(1e-2), seed=0)
    before = model.evaluate(x, y, return_dict=True)["loss"]
    model.fit(x, y, batch_size=8, epochs=6, verbose=0)
    assert model.evaluate(x, y, return_dict=True)["loss"] < 0.7 * before
    loaded = models.load(model.save(tmp_path / "vit.safetensors"))
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))


@pytest.mark.native
@pytest.mark.parametrize("build", [tiny_char_transformer, tiny_vit])
def test_zoo_transformers_train_on_the_simulated_device_without_host_reads(build, monkeypatch):
    from pymagma import runtime, simulator

    reads = []
    copy = runtime.memcpy_dtoh
    monkeypatch.setattr(runtime, "memcpy_dtoh", lambda dst, src, stream=None: reads.append(dst.nbytes)
                        or copy(dst, src, stream))
    if build is tiny_char_transformer:
        x, y = tokens()
    else:
        rng = np.random.default_rng(1)
        x, y = rng.normal(size=(16, 1, 8, 8)).astype(np.float32), rng.integers(0, 3, 16)
    with simulator.simulated():
        host = build()
        host.compile(optimizers.SGD(0.05, momentum=0.9), loss="cross_entropy", seed=1)
        device = build()
        device.compile(optimizers.SGD(0.05, momentum=0.9), loss="cross_entropy", seed=1, device="gpu")
        device.progress_interval = float("inf")
        reads.clear()
        host.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        device.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)  # first epoch: builds what it needs
        reads.clear()
        device.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        assert len(reads) == 1, f"{len(reads)} device-to-host copies in one epoch of 2 steps: {reads}"
        np.testing.assert_allclose(device.predict(x), host.predict(x), rtol=1e-3, atol=1e-4)
