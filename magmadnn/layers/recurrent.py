"""Recurrent layers: LSTM, GRU and SimpleRNN over (batch, time, features) sequences, from a zero initial state.

Keras' names and weight shapes, PyTorch's and cuDNN's math, so weights move between them by transposition and the
gate order alone: ``kernel`` (features, G units), ``recurrent_kernel`` (units, G units), ``bias`` (G units,) with G
gate blocks side by side (LSTM: i, f, g, o; GRU: r, z, n, plus ``recurrent_bias`` (3 units,)).

``return_state``: the outputs ``[output, h, c]`` (LSTM) or ``[output, h]`` (GRU), as Keras. A mask from
``Embedding(mask_zero=True)`` skips masked steps as Keras does (states and output carry over). Both run step by step
as compositions of differentiable functions (``F.lstm_steps``/``F.gru_steps``); the fused recurrence serves the rest.
"""

from __future__ import annotations

import numpy as np

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from .activations import apply_activation
from .base import Layer, register

__all__ = ["LSTM", "GRU", "SimpleRNN"]


class _Recurrent(Layer):
    """What LSTM and GRU share: the arguments, the input check, the weights, the config."""

    gates = states = 0  # gate blocks; states returned with return_state

    supports_masking = uses_mask = True
    _weight_options = ("kernel", "recurrent", "bias")  # kernel_regularizer=, recurrent_constraint=, ...

    def __init__(self, units: int, return_sequences: bool = False, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", return_state: bool = False,
                 go_backwards: bool = False, zero_output_for_mask: bool = False, **kwargs):
        super().__init__(**kwargs)
        who = f"{type(self).__name__} {self.name!r}"
        self.units = _checks.integer(units, "units", who, minimum=1)
        for flag, value in (("return_sequences", return_sequences), ("return_state", return_state),
                            ("go_backwards", go_backwards), ("zero_output_for_mask", zero_output_for_mask)):
            if not isinstance(value, bool):
                raise TypeError(f"{who}: {flag} must be True or False, got {value!r}")
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards, self.zero_output_for_mask = go_backwards, zero_output_for_mask
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def __call__(self, inputs, training: bool = False, initial_state=None):
        """``layer(x)``, or ``layer(x, initial_state=[h, c])`` (LSTM) / ``[h]`` (GRU) to start from given states
        (Keras: e.g. a decoder from an encoder's ``return_state`` outputs); gradients reach the states."""
        if initial_state is not None:
            states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
            if len(states) != self.states:
                raise ValueError(f"{type(self).__name__} {self.name!r}: initial_state must hold {self.states} "
                                 f"state(s) {'[h, c]' if self.states == 2 else '[h]'}, got {len(states)}")
            inputs = [inputs, *states]
        return super().__call__(inputs, training=training)

    def check_input_shape(self, input_shape):
        sequence = input_shape[0] if isinstance(input_shape, list) else input_shape
        self.check_rank(sequence, (2,), "a per-sample sequence (time, features), i.e. batches (N, time, features)")
        if isinstance(input_shape, list) and any(tuple(s) != (self.units,) for s in input_shape[1:]):
            raise self.shape_error(f"a sequence and initial states of per-sample shape ({self.units},)", input_shape)

    def compute_output_shape(self, input_shape):
        sequence = input_shape[0] if isinstance(input_shape, list) else input_shape
        output = (sequence[0], self.units) if self.return_sequences else (self.units,)
        return [output] + [(self.units,)] * (self.states) if self.return_state else output

    def output_masked(self, masked):
        out = self.return_sequences and (masked[0] if isinstance(masked, list) else masked)
        return [out] + [False] * (self.states) if self.return_state else out

    def compute_mask(self, inputs, mask):
        mask = mask[0] if isinstance(mask, list) else mask
        out = mask if self.return_sequences else None
        return [out] + [None] * (self.states) if self.return_state else out

    @staticmethod
    def _split(x, mask):
        """(sequence, initial states or None, the sequence's mask) of what ``call`` received."""
        if isinstance(x, list):
            return x[0], x[1:], mask[0] if isinstance(mask, list) else mask
        return x, None, mask

    def _flags(self) -> dict:
        return {"return_sequences": self.return_sequences, "go_backwards": self.go_backwards,
                "zero_output_for_mask": self.zero_output_for_mask}

    def create_weights(self, input_shape):
        input_shape = input_shape[0] if isinstance(input_shape, list) else input_shape
        width = self.gates * self.units
        self.add_weight("kernel", (input_shape[1], width), self.kernel_initializer, **self._weight_kwargs("kernel"))
        self.add_weight("recurrent_kernel", (self.units, width), self.recurrent_initializer,
                        **self._weight_kwargs("recurrent"))
        self.add_weight("bias", (width,), self.bias_initializer, **self._weight_kwargs("bias"))

    def get_config(self):
        flags = {k: v for k, v in (("return_state", self.return_state), ("go_backwards", self.go_backwards),
                                   ("zero_output_for_mask", self.zero_output_for_mask)) if v}
        return {"units": self.units, "return_sequences": self.return_sequences, **flags,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "recurrent_initializer": self.recurrent_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


@register
class LSTM(_Recurrent):
    """Long short-term memory: per step z = x W + h U + b, gates i, f, g, o (sigmoid, sigmoid, tanh, sigmoid),
    c = f c + i g, h = o tanh(c). Output: the last h (units,) or every step's (time, units)."""

    gates, states = 4, 2

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

    def call(self, x, training=False, mask=None):
        p = self._params
        weights = (p["kernel"], p["recurrent_kernel"], p["bias"])
        x, states, mask = self._split(x, mask)
        if mask is None and states is None and not self.return_state and not self.go_backwards:
            return F.lstm(x, *weights, self.return_sequences)
        output, h, c = F.lstm_steps(x, *weights, mask=mask, initial_state=states, **self._flags())
        return [output, h, c] if self.return_state else output


@register
class GRU(_Recurrent):
    """Gated recurrent unit (cuDNN's and PyTorch's formulation): q = h U + b_r; r, z = sigmoid(x W + b + q) of their
    blocks; n = tanh(x W_n + b_n + r q_n); h = (1 - z) n + z h."""

    gates, states = 3, 1

    def __init__(self, units: int, return_sequences: bool = False, reset_after: bool = True, **kwargs):
        super().__init__(units, return_sequences, **kwargs)
        if reset_after is not True:
            raise ValueError(f"GRU {self.name!r}: only reset_after=True (Keras' default: the reset gate applied "
                             f"after the recurrent product, cuDNN's and PyTorch's GRU) is available, got "
                             f"{reset_after!r}")

    def create_weights(self, input_shape):
        super().create_weights(input_shape)
        self.add_weight("recurrent_bias", (self.gates * self.units,), self.bias_initializer,
                        **self._weight_kwargs("bias"))  # Keras' one bias (2, 3 units) holds both

    def call(self, x, training=False, mask=None):
        p = self._params
        weights = (p["kernel"], p["recurrent_kernel"], p["bias"], p["recurrent_bias"])
        x, states, mask = self._split(x, mask)
        if mask is None and states is None and not self.go_backwards:
            output = F.gru(x, *weights, self.return_sequences or self.return_state)
            if not self.return_state:
                return output
            steps = x.shape[1]
            h = F.reshape(F.slice_axis(output, 1, steps - 1, steps), (x.shape[0], self.units))
            return [output if self.return_sequences else h, h]
        output, h = F.gru_steps(x, *weights, mask=mask, initial_state=states, **self._flags())
        return [output, h] if self.return_state else output


@register
class SimpleRNN(_Recurrent):
    """Keras' fully connected recurrence: h = activation(x W + b + h U) (tanh by default), output the last h
    (units,) or every step's (time, units); ``use_bias``, masks, ``return_state`` ([output, h]), ``go_backwards``
    and ``initial_state`` as Keras. Weights: ``kernel`` (features, units), ``recurrent_kernel`` (units, units),
    ``bias`` (units,)."""

    gates, states = 1, 1

    def __init__(self, units: int, activation="tanh", use_bias: bool = True, return_sequences: bool = False,
                 **kwargs):
        super().__init__(units, return_sequences, **kwargs)
        self.activation = geometry.activation_name(activation, f"SimpleRNN {self.name!r}")
        if not isinstance(use_bias, bool):
            raise TypeError(f"SimpleRNN {self.name!r}: use_bias must be True or False, got {use_bias!r}")
        self.use_bias = use_bias

    def create_weights(self, input_shape):
        input_shape = input_shape[0] if isinstance(input_shape, list) else input_shape
        self.add_weight("kernel", (input_shape[1], self.units), self.kernel_initializer,
                        **self._weight_kwargs("kernel"))
        self.add_weight("recurrent_kernel", (self.units, self.units), self.recurrent_initializer,
                        **self._weight_kwargs("recurrent"))
        if self.use_bias:
            self.add_weight("bias", (self.units,), self.bias_initializer, **self._weight_kwargs("bias"))

    def get_config(self):
        return {**super().get_config(), "activation": self.activation, "use_bias": self.use_bias}

    def call(self, x, training=False, mask=None):
        p = self._params
        x, states, mask = self._split(x, mask)
        output, h = F.simple_rnn_steps(x, p["kernel"], p["recurrent_kernel"], p.get("bias"),
                                       lambda z: apply_activation(z, self.activation, axis=-1), mask=mask,
                                       initial_state=states, **self._flags())
        return [output, h] if self.return_state else output
