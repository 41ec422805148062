"""Recurrent layers: LSTM and GRU over (batch, time, features) sequences, from a zero initial state.

Keras' names and weight shapes, PyTorch's and cuDNN's math, so weights move between them by transposition and the
gate order alone: ``kernel`` (features, G units), ``recurrent_kernel`` (units, G units), ``bias`` (G units,) with G
gate blocks side by side (LSTM: i, f, g, o; GRU: r, z, n, plus ``recurrent_bias`` (3 units,)).
"""

from __future__ import annotations

import numpy as np

from .. import _checks, initializers
from .. import functional as F
from .base import Layer, register

__all__ = ["LSTM", "GRU"]


class _Recurrent(Layer):
    """What LSTM and GRU share: the arguments, the input check, the weights, the config."""

    gates = 0

    def __init__(self, units: int, return_sequences: bool = False, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        who = f"{type(self).__name__} {self.name!r}"
        self.units = _checks.integer(units, "units", who, minimum=1)
        if not isinstance(return_sequences, bool):
            raise TypeError(f"{who}: return_sequences must be True or False, got {return_sequences!r}")
        self.return_sequences = return_sequences
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (2,), "a per-sample sequence (time, features), i.e. batches (N, time, "
                                           "features)")

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.units) if self.return_sequences else (self.units,)

    def create_weights(self, input_shape):
        width = self.gates * self.units
        self.add_weight("kernel", (input_shape[1], width), self.kernel_initializer)
        self.add_weight("recurrent_kernel", (self.units, width), self.recurrent_initializer)
        self.add_weight("bias", (width,), self.bias_initializer)

    def get_config(self):
        return {"units": self.units, "return_sequences": self.return_sequences,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "recurrent_initializer": self.recurrent_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


@register
class LSTM(_Recurrent):
    """Long short-term memory: per step z = x W + h U + b, gates i, f, g, o (sigmoid, sigmoid, tanh, sigmoid),
    c = f c + i g, h = o tanh(c). Output: the last h (units,) or every step's (time, units)."""

    gates = 4

    def __init__(self, units: int, return_sequences: bool = False, unit_forget_bias: bool = True, **kwargs):
        super().__init__(units, return_sequences, **kwargs)
        if not isinstance(unit_forget_bias, bool):
            raise TypeError(f"LSTM {self.name!r}: unit_forget_bias must be True or False, got {unit_forget_bias!r}")
        self.unit_forget_bias = unit_forget_bias

    def create_weights(self, input_shape):
        super().create_weights(input_shape)
        if self.unit_forget_bias:  # Keras: the forget gate's bias starts at 1 (Jozefowicz et al., 2015)
            bias = self._params["bias"]
            host = np.array(self.xp.to_numpy(bias.data))
            host[self.units:2 * self.units] = 1.0
            bias.data = self.xp.asarray(host, self.dtype)

    def get_config(self):
        return {**super().get_config(), "unit_forget_bias": self.unit_forget_bias}

    def call(self, x, training=False):
        p = self._params
        return F.lstm(x, p["kernel"], p["recurrent_kernel"], p["bias"], self.return_sequences)


@register
class GRU(_Recurrent):
    """Gated recurrent unit (cuDNN's and PyTorch's formulation): q = h U + b_r; r, z = sigmoid(x W + b + q) of their
    blocks; n = tanh(x W_n + b_n + r q_n); h = (1 - z) n + z h."""

    gates = 3

    def create_weights(self, input_shape):
        super().create_weights(input_shape)
        self.add_weight("recurrent_bias", (self.gates * self.units,), self.bias_initializer)

    def call(self, x, training=False):
        p = self._params
        return F.gru(x, p["kernel"], p["recurrent_kernel"], p["bias"], p["recurrent_bias"], self.return_sequences)
