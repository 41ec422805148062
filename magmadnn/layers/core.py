"""Dense, Activation, Dropout, Flatten, BatchNorm and Add."""

from __future__ import annotations

import math

from .. import _checks, initializers
from .. import functional as F
from ..backend import geometry
from .base import Layer, ShapeMismatchError, derive_seed, register, shape_str

__all__ = ["Dense", "Activation", "LeakyReLU", "Dropout", "Flatten", "BatchNorm", "Add", "apply_activation"]

_DEFAULT_ALPHA = geometry.DEFAULT_ALPHA


def apply_activation(x, kind, alpha=None, axis=None):
    """``kind`` applied to the Tensor ``x``; softmax runs over ``axis``, by default the channels of NCHW (axis 1)
    input and the last axis (features) of any other rank."""
    if kind is None:
        return x
    if kind == "softmax":
        return F.softmax(x, axis=(1 if x.ndim == 4 else -1) if axis is None else axis)
    return F.activation(x, kind, _DEFAULT_ALPHA.get(kind, 0.0) if alpha is None else alpha)


@register
class Dense(Layer):
    """``y = act(x @ kernel + bias)`` with kernel (in, units) on the last axis of the input, of any rank (Keras):
    per-sample shape (..., in) -> (..., units)."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras

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
        self.add_weight("kernel", (input_shape[-1], self.units), self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.units,), self.bias_initializer)

    def call(self, x, training=False):
        y = F.dense(x, self._params["kernel"], self._params.get("bias"))
        return apply_activation(y, self.activation, axis=-1)

    def get_config(self):
        return {"units": self.units, "activation": self.activation, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


@register
class Activation(Layer):
    """An activation function as a layer, by a name of ``geometry.ACTIVATION_NAMES`` (Keras 3's function of that
    name: "gelu" exact, "gelu_tanh" the tanh approximation, "swish" = "silu"; softmax over the channels of NCHW
    input, the last axis of any other rank), on inputs of any rank. ``alpha``: the leaky-ReLU slope (default Keras'
    0.2) or ELU scale (1.0)."""

    supports_masking = True  # a mask (Embedding(mask_zero=True)) passes through, as in Keras

    def __init__(self, kind: str, alpha: float | None = None, **kwargs):
        super().__init__(**kwargs)
        if kind is None:
            raise ValueError(f"Activation {self.name!r}: kind must be one of {geometry.ACTIVATION_NAMES}")
        self.kind = geometry.activation_name(kind, f"Activation {self.name!r}")
        self.alpha = None if alpha is None else _checks.real(alpha, "alpha", f"Activation {self.name!r}")

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def call(self, x, training=False):
        return apply_activation(x, self.kind, self.alpha)

    def get_config(self):
        return {"kind": self.kind or "linear", "alpha": self.alpha, **super().get_config()}


@register
class LeakyReLU(Activation):
    """Keras' ``LeakyReLU(negative_slope=0.3)``: ``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.3, **kwargs):
        if "alpha" in kwargs:  # Keras 2's name
            negative_slope = kwargs.pop("alpha")
        kwargs.pop("kind", None)  # a config written by Activation.get_config
        super().__init__("leaky_relu", alpha=negative_slope, **kwargs)
        self.negative_slope = self.alpha

    def get_config(self):
        config = super().get_config()
        del config["kind"], config["alpha"]
        return {"negative_slope": self.negative_slope, **config}


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

    def get_config(self):
        return {"rate": self.rate, **super().get_config()}


@register
class Flatten(Layer):
    """(N, d1, d2, ...) -> (N, d1*d2*...)."""

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)

    def compute_output_shape(self, input_shape):
        return (math.prod(input_shape),)

    def call(self, x, training=False):
        return F.flatten(x)


@register
class BatchNorm(Layer):
    """Batch normalisation over features (input (F,)) or channels (input (C, H, W), statistics over N, H, W).

    Training uses batch statistics and updates ``running = momentum * running + (1 - momentum) * batch``; evaluation
    uses the running statistics, and so does training with ``trainable = False`` (as Keras). ``sync``: None
    (statistics of the local batch), or a data-parallel group whose ranks share the statistics of the global batch
    (set by ``fit(distributed=Options(sync_batchnorm=True))``).
    """

    _computes_in_float32 = True  # statistics in float32 under a mixed policy (Keras)

    #: The running variance takes the unbiased batch variance (PyTorch); Keras' BatchNormalization the biased one.
    unbiased_running_var = True

    def __init__(self, momentum: float = 0.9, eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        self.momentum = _checks.real(momentum, "momentum", owner, 0.0, 1.0, open_high=True)
        self.eps = _checks.real(eps, "eps", owner, 0.0, open_low=True)
        self.sync = None

    def check_input_shape(self, input_shape):
        self.check_rank(input_shape, (1, 3), "a per-sample input (features,) or (C, H, W)")

    def create_weights(self, input_shape):
        channels = input_shape[0]
        self.add_weight("gamma", (channels,), "ones")
        self.add_weight("beta", (channels,), "zeros")
        self.add_state("running_mean", self.xp.zeros((channels,), self.dtype))
        self.add_state("running_var", self.xp.ones((channels,), self.dtype))

    def call(self, x, training=False):
        training = training and self._trainable  # Keras: a frozen BatchNorm runs in inference mode
        return F.batch_norm(x, self._params["gamma"], self._params["beta"], self._state["running_mean"],
                            self._state["running_var"], training, momentum=self.momentum, eps=self.eps,
                            sync=self.sync, unbiased=self.unbiased_running_var)

    def get_config(self):
        return {"momentum": self.momentum, "eps": self.eps, **super().get_config()}


@register
class Add(Layer):
    """Element-wise sum of two or more inputs of the same shape (residual connections)."""

    def check_input_shape(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < 2:
            raise self.shape_error("a list of at least two inputs", input_shape)
        if any(s != input_shape[0] for s in input_shape):
            shapes = ", ".join(shape_str(s) for s in input_shape)
            raise ShapeMismatchError(f"Add layer {self.name!r} needs inputs of one shape; got {shapes} "
                                     f"from {self._source}")

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def call(self, xs, training=False):
        total = xs[0]
        for x in xs[1:]:
            total = F.add(total, x)
        return total
