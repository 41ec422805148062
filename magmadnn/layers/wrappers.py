"""TimeDistributed: one layer applied to every time step, the time axis folded into the batch."""

from __future__ import annotations

from .. import functional as F
from .base import Layer, derive_seed, register
from .bidirectional import _config, _from_config

__all__ = ["TimeDistributed"]


@register
class TimeDistributed(Layer):
    """Keras' ``TimeDistributed(layer)``: per-sample input (T, ...) -> (T, *layer's output for ...). The batch
    (N, T, ...) runs through ``layer`` as one batch of N·T samples and is reshaped back; a layer with state
    (BatchNormalization) runs step by step instead, as Keras 3 runs every layer (its batch statistics per step,
    its moving statistics updated T times). The weights are the wrapped layer's (one set shared by every step,
    under its names). A mask (N, T) passes through."""

    _casts_weights = False  # the wrapped layer casts its own (as Bidirectional's)
    supports_masking = True

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        layer = _from_config(layer)
        if not isinstance(layer, Layer):
            raise TypeError(f"TimeDistributed {self.name!r}: wraps a layer, got {layer!r}")
        self.layer = layer

    @property
    def rng(self):  # the wrapped layer's random stream (Dropout's), seen by graph replay as this layer's
        return getattr(self.layer, "rng", None)

    @rng.setter
    def rng(self, stream) -> None:
        self.layer.rng = stream

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) < 2:
            raise self.shape_error("one input of per-sample shape (time, ...), i.e. batches (N, T, ...) with at "
                                   "least one axis after time", input_shape)
        self.layer.check_input_shape(tuple(input_shape[1:]))

    def compute_output_shape(self, input_shape):
        inner = self.layer.compute_output_shape(tuple(input_shape[1:]))
        if isinstance(inner, list):
            raise self.shape_error(f"a wrapped layer with one output ({type(self.layer).__name__} gives "
                                   f"{len(inner)})", input_shape)
        return (input_shape[0], *inner)

    def create_weights(self, input_shape):
        layer = self.layer
        layer.xp, layer.dtype, layer._build_seed = self.xp, self.dtype, derive_seed(self._build_seed, 1)
        layer._params.clear()
        layer.built = False
        layer._source = self._source
        layer.build(tuple(input_shape[1:]))
        self._params.update(layer._params)
        self._state = layer._state  # one dict: the wrapped layer's running statistics are this layer's

    def move_to(self, backend, move) -> None:
        super().move_to(backend, move)
        self.layer.xp = backend  # its Parameters are this layer's, moved above

    def compute_mask(self, inputs, mask):
        return mask

    def call(self, x, training=False):
        n, t = x.shape[0], x.shape[1]
        layer = self.layer
        if layer._user_policy is None:
            layer._policy, layer._compute = self._policy, self._compute
        if layer._state:
            steps = [layer._run(F.reshape(F.slice_axis(x, 1, i, i + 1), (n, *x.shape[2:])), training)
                     for i in range(t)]
            return F.concatenate([F.reshape(y, (n, 1, *y.shape[1:])) for y in steps], axis=1)
        y = layer._run(F.reshape(x, (n * t, *x.shape[2:])), training)
        return F.reshape(y, (n, t, *y.shape[1:]))

    def get_config(self):
        return {"layer": _config(self.layer), **super().get_config()}
