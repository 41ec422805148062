"""Regularization layers: Dropout, SpatialDropout1D/2D, GaussianNoise."""

from __future__ import annotations

from .. import _checks
from .. import functional as F
from ..autograd import Tensor
from .base import Layer, register
from .registry import derive_seed

__all__ = ["Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise"]


def _identity(layer, x):
    """The plan of a call that returns its input (Dropout at inference)."""
    return x


@register
class Dropout(Layer):
    """Inverted dropout while training (drop with probability ``rate``), identity at inference."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras

    def __init__(self, rate: float, **kwargs):
        super().__init__(**kwargs)
        self.rate = _checks.real(rate, "rate", f"Dropout {self.name!r}", 0.0, 1.0, open_high=True)
        self.rng = None

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def create_weights(self, input_shape):
        self.rng = self.xp.rng(derive_seed(self._build_seed, 1))

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        return F.dropout(x, self.rate, True, self.rng)

    def _plan_call(self, x, training):
        if not training or self.rate == 0.0:
            return _identity
        apply, rate = F.DropoutFunction.apply, float(self.rate)
        return lambda layer, x: apply(x, rate=rate, rng=layer.rng)

    def get_config(self):
        return {"rate": self.rate, **super().get_config()}


def _rate(rate, layer):
    return _checks.real(rate, "rate", f"{type(layer).__name__} {layer.name!r}", 0.0, 1.0, open_high=True)


class _SpatialDropout(Dropout):
    """Dropout of whole feature maps: one draw per (sample, channel), the same for every position."""

    _rank = 0  # per-sample rank of the input
    _layout = ""

    def __init__(self, rate: float, **kwargs):
        Layer.__init__(self, **kwargs)
        self.rate = _rate(rate, self)
        self.rng = None

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) != self._rank:
            raise self.shape_error(f"one input of per-sample shape {self._layout}", input_shape)

    def _noise_shape(self, shape):
        raise NotImplementedError

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        xp = self.xp
        # the mask comes from the dropout op (replayable: its offset is read on the device in a captured step)
        mask, _ = xp.dropout_forward(xp.ones(self._noise_shape(x.shape), x.dtype), self.rate, self.rng)
        return x * Tensor._of(mask, xp)


@register
class SpatialDropout1D(_SpatialDropout):
    """Keras' SpatialDropout1D on (N, T, F): each sample's feature columns are dropped whole (noise shape (N, 1, F)),
    the kept ones scaled by 1/(1-rate); identity at inference."""

    _rank, _layout = 2, "(time, features)"

    def _noise_shape(self, shape):
        return (shape[0], 1, shape[2])


@register
class SpatialDropout2D(_SpatialDropout):
    """Keras' SpatialDropout2D on NCHW images (Keras' channels_first): each sample's channels are dropped whole
    (noise shape (N, C, 1, 1)), the kept ones scaled by 1/(1-rate); identity at inference."""

    _rank, _layout = 3, "(C, H, W)"

    def __init__(self, rate: float, data_format=None, **kwargs):
        super().__init__(rate, **kwargs)
        if data_format not in (None, "channels_first"):
            raise ValueError(f"SpatialDropout2D {self.name!r}: data_format={data_format!r}; magmadnn's images are "
                             "NCHW (channels_first): transpose NHWC data with Permute((3, 1, 2))")

    def _noise_shape(self, shape):
        return (shape[0], shape[1], 1, 1)


@register
class GaussianNoise(Layer):
    """Keras' GaussianNoise: adds zero-mean normal noise of standard deviation ``stddev`` while training; identity
    at inference. The draw is not the dropout op's, so a model with it trains eagerly under ``graph=True``."""

    supports_masking = True

    def __init__(self, stddev: float, **kwargs):
        super().__init__(**kwargs)
        self.stddev = _checks.real(stddev, "stddev", f"GaussianNoise {self.name!r}", 0.0)
        self.rng = None

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def create_weights(self, input_shape):
        self.rng = self.xp.rng(derive_seed(self._build_seed, 1))

    def call(self, x, training=False):
        if not training or self.stddev == 0.0:
            return x
        noise = self.xp.normal(self.rng, x.shape, 0.0, self.stddev, x.dtype)
        return x + Tensor._of(noise, self.xp)

    def get_config(self):
        return {"stddev": self.stddev, **super().get_config()}
