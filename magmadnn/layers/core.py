"""Core layers: Dense. (Input is in :mod:`.base`, Embedding in :mod:`.embedding`, Lambda in :mod:`.lambda_layer`.)

Activation, LeakyReLU, Dropout, Flatten, BatchNorm and Add lived here; they are in their topics' modules now
(:mod:`.activations`, :mod:`.regularization`, :mod:`.reshaping`, :mod:`.normalization`, :mod:`.merging`) and stay
importable from here."""

from __future__ import annotations

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from . import plans as _plans
from .activations import Activation, LeakyReLU, apply_activation
from .base import Layer, register
from .merging import Add
from .normalization import BatchNorm
from .regularization import Dropout
from .reshaping import Flatten

__all__ = ["Dense", "Activation", "LeakyReLU", "Dropout", "Flatten", "BatchNorm", "Add", "apply_activation"]


@register
class Dense(Layer):
    """``y = act(x @ kernel + bias)`` with kernel (in, units) on the last axis of the input, of any rank (Keras):
    per-sample shape (..., in) -> (..., units)."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras
    _weight_options = ("kernel", "bias")  # kernel_regularizer=, bias_constraint=, ... (magmadnn.regularizers)

    def __init__(self, units: int, activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units = _checks.integer(units, "units", f"Dense {self.name!r}", minimum=1)
        self.use_bias = bool(use_bias)
        self.activation = geometry.activation_name(activation, f"Dense {self.name!r}")
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) < 1:
            raise self.shape_error("one input of per-sample shape (..., features), i.e. batches (N, ..., features)",
                                   input_shape)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.units)

    def create_weights(self, input_shape):
        self.add_weight("kernel", (input_shape[-1], self.units), self.kernel_initializer,
                        **self._weight_kwargs("kernel"))
        if self.use_bias:
            self.add_weight("bias", (self.units,), self.bias_initializer, **self._weight_kwargs("bias"))

    def call(self, x, training=False):
        bias, kind = self._params.get("bias"), self.activation
        if bias is not None and kind in geometry.ACTIVATIONS:  # bias + activation as one op (the epilogue)
            return F.dense(x, self._params["kernel"], bias, kind, geometry.DEFAULT_ALPHA.get(kind, 0.0))
        y = F.dense(x, self._params["kernel"], bias)
        return apply_activation(y, self.activation, axis=-1)

    def _plan_call(self, x, training):
        p = self._params
        bias, kind = p.get("bias"), self.activation
        names = ("kernel",) if bias is None else ("kernel", "bias")
        fused = bias is not None and kind in geometry.ACTIVATIONS
        params = F.dense_arguments(x, p["kernel"], bias, kind if fused else None)
        if fused:
            params["alpha"] = float(geometry.DEFAULT_ALPHA.get(kind, 0.0))
        after = None if fused or kind is None else (lambda y: apply_activation(y, kind, axis=-1))
        return _plans.op_plan(self, training, F.DenseFunction.apply, names, params, after)

    def get_config(self):
        return {"units": self.units, "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}
