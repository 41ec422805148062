"""Images are NCHW: an input that looks channels-last (Keras' default) gets an error, or a warning where the window
still fits, naming the layout and the transpose that fixes it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from magmadnn import layers as L
from magmadnn.layers.base import ShapeMismatchError
from magmadnn.models import Sequential

HINT = ["NCHW", "x.transpose(0, 3, 1, 2)"]


def check_hint(message: str, nchw: tuple) -> None:
    for words in (*HINT, f"Input({nchw})"):
        assert words in message, message


@pytest.mark.parametrize("layer", [lambda: L.Conv2D(4, 3), lambda: L.MaxPool2D(2), lambda: L.AvgPool2D(2),
                                   lambda: L.DepthwiseConv2D(3), lambda: L.Conv2D(4, 3, padding="valid")])
def test_a_channels_last_input_whose_window_does_not_fit_names_the_layout(layer):
    with pytest.raises(ShapeMismatchError) as caught:
        Sequential([L.Input((28, 28, 1)), layer()])
    check_hint(str(caught.value), (1, 28, 28))


def test_channels_last_data_for_an_nchw_model_names_the_transpose():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 8, 8, 3)).astype(np.float32), rng.integers(0, 2, 8)
    model = Sequential([L.Input((3, 8, 8)), L.Conv2D(4, 3), L.Flatten(), L.Dense(2)], seed=0)
    model.compile("sgd")
    for call in (lambda: model.fit(x, y, verbose=0), lambda: model.predict(x), lambda: model.evaluate(x, y)):
        with pytest.raises(ShapeMismatchError) as caught:
            call()
        check_hint(str(caught.value), (3, 8, 8))
    history = model.fit(x.transpose(0, 3, 1, 2), y, verbose=0)  # the fix the message gives
    assert np.isfinite(history.history["loss"]).all()

    conv = L.Conv2D(4, 3)
    conv(x.transpose(0, 3, 1, 2))
    with pytest.raises(ShapeMismatchError) as caught:  # a built layer given the other layout
        conv(x)
    check_hint(str(caught.value), (3, 8, 8))


def test_a_channels_last_input_that_still_convolves_warns():
    """(32, 32, 3) read as NCHW is 32 channels of 32x3 images: a 3x3 kernel still fits, so a warning says it."""
    with pytest.warns(UserWarning) as caught:
        Sequential([L.Input((32, 32, 3)), L.Conv2D(8, 3, padding="same")])
    check_hint(str(caught[0].message), (3, 32, 32))


def test_nchw_inputs_give_no_layout_hint():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Sequential([L.Input((1, 28, 28)), L.Conv2D(4, 3), L.MaxPool2D(2), L.Conv2D(8, 3)])
        Sequential([L.Input((3, 32, 32)), L.Conv2D(4, 3), L.GlobalAvgPool2D()])
        Sequential([L.Input((16, 8, 8)), L.Conv2D(32, 3), L.Conv2D(16, 3)])  # a 3x3 map after an NCHW layer
    with pytest.raises(ShapeMismatchError) as caught:
        Sequential([L.Input((1, 2, 2)), L.Conv2D(4, 3)])
    assert "transpose" not in str(caught.value)


def test_the_hint_on_the_simulated_device():
    from pymagma import simulator

    with simulator.simulated("full"):
        model = Sequential([L.Input((1, 8, 8)), L.Conv2D(2, 3), L.Flatten(), L.Dense(2)], seed=0)
        model.compile("sgd", device="gpu")
        with pytest.raises(ShapeMismatchError) as caught:
            model.fit(np.zeros((4, 8, 8, 1), np.float32), np.zeros(4, np.int64), verbose=0)
        check_hint(str(caught.value), (1, 8, 8))
        model.fit(np.zeros((4, 1, 8, 8), np.float32), np.zeros(4, np.int64), verbose=0)
