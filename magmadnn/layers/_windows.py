"""The window and layout checks the convolution and pooling layers share: sizes and padding as layers take them,
the output extent of a window, the NCHW layout of images (an input that looks channels-last is named in the error
with the transpose that fixes it) and the (time, features) layout of sequences."""

from __future__ import annotations

import warnings

from .. import _checks
from .. import functional as F
from ..backend import geometry
from .base import shape_str


def _sizes(value, what: str, owner: str, minimum: int = 1) -> tuple[int, int]:
    """:func:`geometry.int_pair`, with every bad value a ValueError (as layers report bad sizes)."""
    try:
        return geometry.int_pair(value, what, owner, minimum)
    except TypeError as exc:  # layers report every bad size as a ValueError
        raise ValueError(str(exc)) from None


def _padding(value, owner: str):
    if isinstance(value, str):
        if value.lower() not in ("same", "valid"):
            raise ValueError(f"{owner}: padding must be 'same', 'valid', an int, a pair or ((top, bottom), "
                             f"(left, right)), got {value!r}")
        return value.lower()
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (tuple, list)) for v in value):
        return _sizes(value[0], "padding", owner, minimum=0), _sizes(value[1], "padding", owner, minimum=0)
    return _sizes(value, "padding", owner, minimum=0)


def _padding_config(padding):
    """``padding`` as JSON: the mode, ``[ph, pw]`` or ``[[top, bottom], [left, right]]``."""
    if isinstance(padding, str):
        return padding
    return [list(p) if isinstance(p, tuple) else p for p in padding]


def _output_hw(layer, input_shape, kernel, stride, padding, dilation, what):
    """Spatial output size, or a ShapeMismatchError when the window does not fit the input."""
    spatial = input_shape[1:]
    if None in spatial:  # an axis known only at run time (Input((C, None, None))): its output size is too
        known = F.conv2d_output_shape(tuple(1 << 20 if s is None else s for s in spatial), kernel, stride, padding,
                                      dilation)
        out = tuple(None if s is None else int(o) for s, o in zip(spatial, known))
        if any(o is not None and o < 1 for o in out):
            raise layer.shape_error(f"an input of at least the {what} extent {shape_str(kernel)}", input_shape)
        return out
    out = F.conv2d_output_shape(spatial, kernel, stride, padding, dilation)
    if min(out) < 1:
        raise layer.shape_error(f"an input of at least the {what} extent {shape_str(kernel)} (dilation "
                                f"{shape_str(dilation)}, padding {padding!r}); the output would be {shape_str(out)}",
                                input_shape)
    return tuple(int(v) for v in out)


def looks_channels_last(shape) -> bool:
    """A per-sample image shape that reads as (H, W, C) with 1 or 3 channels rather than (C, H, W)."""
    return (isinstance(shape, tuple) and len(shape) == 3 and shape[-1] in (1, 3) and shape[0] > 4)


def layout_hint(shape) -> str:
    """The sentence that names the NCHW layout and the transpose, for a ``shape`` that looks channels-last."""
    h, w, c = shape
    return (f". Images here are NCHW, per-sample (C, H, W); {shape_str(shape)} looks channels-last (H, W, C) as "
            f"in Keras: transpose the batches with x.transpose(0, 3, 1, 2) (giving per-sample ({c}, {h}, {w})) and "
            f"declare Input(({c}, {h}, {w}))")


class _NCHW:
    """Mixin: shape errors that name the NCHW layout when the input looks channels-last, and a warning when such
    an input comes from the data or an Input and builds without an error."""

    def shape_error(self, expected, got):
        error = super().shape_error(expected, got)
        if looks_channels_last(got):
            error.args = (error.args[0] + layout_hint(got),)
        return error

    def _warn_layout(self, input_shape) -> None:
        source = getattr(self, "_source", "")
        if None not in input_shape and looks_channels_last(input_shape) and (
                source == "the data" or source.endswith("(Input)")):
            warnings.warn(f"{type(self).__name__} layer {self.name!r} reads per-sample shape "
                          f"{shape_str(input_shape)} from {source} as {input_shape[0]} channels of "
                          f"{input_shape[1]}x{input_shape[2]} images" + layout_hint(input_shape), stacklevel=4)


def _check_chw(layer, input_shape) -> None:
    """A per-sample (C, H, W) input with no empty axis (a zero-size axis has nothing to convolve or pool)."""
    layer.check_rank(input_shape, (3,), "a per-sample input (C, H, W), i.e. batches (N, C, H, W)")
    if input_shape[0] is None:
        raise layer.shape_error("a per-sample input (C, H, W) with the channels C known (H and W may be None)",
                                input_shape)
    if min(s for s in input_shape if s is not None) < 1:
        raise layer.shape_error("a per-sample input (C, H, W) with sizes >= 1", input_shape)


_SEQUENCE = "a per-sample sequence (time, features), i.e. batches (N, time, features)"


def _positive(value, what: str, owner: str) -> int:
    """A size given as an int or a 1-tuple (Keras accepts both)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return _checks.integer(value, what, owner, minimum=1)


def _mode(value, allowed: tuple[str, ...], owner: str) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise ValueError(f"{owner}: padding must be one of {allowed}, got {value!r}")
    return value.lower()


def _data_format(value, owner: str) -> None:
    if value not in (None, "channels_last"):
        raise ValueError(f"{owner}: only data_format='channels_last' (sequences (N, time, features)) is supported, "
                         f"got {value!r}; transpose (N, features, time) input with Permute((2, 1)) first")


def _steps_out(steps: int, window: int, stride: int, padding: str, dilation: int = 1) -> int:
    if steps is None:  # known only at run time
        return None
    if padding in ("same", "causal"):
        return -(-steps // stride) if padding == "same" else (steps - 1) // stride + 1
    return (steps - dilation * (window - 1) - 1) // stride + 1


def _check_sequence(layer, input_shape) -> None:
    layer.check_rank(input_shape, (2,), _SEQUENCE)
    if input_shape[1] is None:
        raise layer.shape_error(f"{_SEQUENCE} with the features known (time may be None)", input_shape)
    if min(s for s in input_shape if s is not None) < 1:
        raise layer.shape_error(f"{_SEQUENCE} with sizes >= 1", input_shape)
