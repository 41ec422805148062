"""LayerNorm, RMSNorm and GroupNorm: normalisation over each sample (no batch statistics, the same in training and
inference). Weights as Keras names them, math as PyTorch computes it (biased variance, ``eps`` inside the root).
BatchNorm (PyTorch's defaults) and BatchNormalization (Keras' batch norm): statistics over the batch."""

from __future__ import annotations

from .. import _checks
from .. import autograd as _autograd
from .. import functional as F
from ..autograd import Parameter, Tensor
from . import plans as _plans
from .base import Layer, register

__all__ = ["BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm", "BatchNormalization", "LayerNormalization",
           "GroupNormalization"]


def _epsilon(epsilon, kwargs: dict) -> float:
    """Keras' ``epsilon=`` or magmadnn's alias ``eps=`` (taken out of ``kwargs``)."""
    return kwargs.pop("eps") if "eps" in kwargs else epsilon


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

    def _plan_call(self, x, training):
        if self.sync is not None:
            return None
        if training and self._trainable:
            apply = F.BatchNormTrainFunction.apply
            params = {"momentum": self.momentum, "eps": self.eps, "unbiased": bool(self.unbiased_running_var)}
        else:
            apply, params = F.BatchNormInferFunction.apply, {"eps": self.eps}
        p = self._params
        planned = (p["gamma"].data.shape, p["gamma"].data.dtype, p["beta"].data.shape, p["beta"].data.dtype,
                   *(tuple(self._state[n].shape) for n in ("running_mean", "running_var")))

        def run(layer, x):
            p, s = layer._params, layer._state
            gamma, beta, mean, var = p["gamma"], p["beta"], s["running_mean"], s["running_var"]
            g, b = gamma.data, beta.data
            if (g.shape, g.dtype, b.shape, b.dtype, tuple(mean.shape), tuple(var.shape)) != planned:
                return layer._run(x, training)
            if x.__class__ is not Tensor or gamma.__class__ is not Parameter or beta.__class__ is not Parameter:
                return apply(x, gamma, beta, running_mean=mean, running_var=var, **params)
            xp = x.xp  # Function.apply(x, gamma, beta, running_mean=mean, running_var=var, **params), inline
            fn = cls()
            fn.xp = xp
            data = fn.forward(x.data, g, b, running_mean=mean, running_var=var, **params)
            last = _autograd._LAST_OWN
            if last[1] is not data.__class__ or last[0] is not xp:
                data = _own_array(xp, data)
            y = _new(Tensor)
            y.xp, y.data, y.grad = xp, data, None
            if (x.requires_grad or gamma.requires_grad or beta.requires_grad) and _state.enabled:
                fn.inputs = (x, gamma, beta)
                fn.needs_input_grad = (x.requires_grad, gamma.requires_grad, beta.requires_grad)
                y.requires_grad, y._fn = True, fn
            else:
                y.requires_grad, y._fn = False, None
            return y

        cls = apply.__self__
        return run

    def get_config(self):
        return {"momentum": self.momentum, "eps": self.eps, **super().get_config()}


@register
class BatchNormalization(BatchNorm):
    """Keras 3's ``BatchNormalization``: ``momentum=0.99``, ``epsilon=1e-3`` (``eps=`` accepted too), moving variance
    from the biased batch variance, ``moving = momentum * moving + (1 - momentum) * batch``. ``axis=None`` (the
    default): the features (last axis) of sequences (N, T, F), else axis 1 (the channels of NCHW images, Keras'
    -1 of its NHWC). An explicit ``axis`` is Keras' for any rank (statistics over all the other axes).
    ``BatchNorm`` keeps PyTorch's defaults (momentum 0.9 in this convention, eps 1e-5, unbiased running
    variance)."""

    unbiased_running_var = False

    def __init__(self, axis=None, momentum: float = 0.99, epsilon: float = 1e-3, **kwargs):
        super().__init__(momentum=momentum, eps=_epsilon(epsilon, kwargs), **kwargs)
        self.axis = None if axis is None else _checks.integer(axis, "axis", f"BatchNormalization {self.name!r}")

    @property
    def epsilon(self) -> float:
        return self.eps

    def _axis(self, rank: int) -> int:
        """The normalised axis of an input of ``rank`` axes (batch included). Default: the last axis of sequences
        (N, T, F) (Keras' features, as after Conv1D), else axis 1 (the channels of NCHW images, or (N, F)'s
        features)."""
        if self.axis is None:
            return rank - 1 if rank == 3 else 1
        return self.axis % rank

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) < 1:
            raise self.shape_error("one input of shape (N, ...) with at least one axis beside the batch axis",
                                   input_shape)
        rank = len(input_shape) + 1
        if self.axis is not None and (not (-rank <= self.axis < rank) or self.axis % rank == 0):
            raise self.shape_error(f"axis={self.axis} to be a non-batch axis of its (N, ...) input, i.e. in "
                                   f"[1, {rank - 1}] or [-{rank - 1}, -1]", input_shape)
        if self.axis == -1 and rank == 4:  # Keras' NHWC channels: here the width of an NCHW image
            raise ValueError(f"BatchNormalization {self.name!r}: axis=-1 of an image is its width here: images are "
                             "NCHW, not Keras' NHWC, so the channels are axis=1 (the default); pass axis=3 if "
                             "the width is what you mean")

    def create_weights(self, input_shape):
        size = input_shape[self._axis(len(input_shape) + 1) - 1]
        self.add_weight("gamma", (size,), "ones")
        self.add_weight("beta", (size,), "zeros")
        self.add_state("running_mean", self.xp.zeros((size,), self.dtype))
        self.add_state("running_var", self.xp.ones((size,), self.dtype))

    def call(self, x, training=False):
        axis = self._axis(x.ndim)
        if axis == 1 and x.ndim in (2, 4):
            return super().call(x, training)
        # Any other layout: the normalised axis last, the rest flattened to rows of (M, size), as Keras computes it.
        order = [d for d in range(x.ndim) if d != axis] + [axis]
        moved = F.transpose(x, order) if axis != x.ndim - 1 else x
        out = F.reshape(super().call(F.reshape(moved, (-1, x.shape[axis])), training), moved.shape)
        return F.transpose(out, [order.index(d) for d in range(x.ndim)]) if axis != x.ndim - 1 else out

    def _plan_call(self, x, training):
        if self._axis(x.ndim) != 1 or x.ndim not in (2, 4):  # (another layout runs in full)
            return None
        return super()._plan_call(x, training)

    def get_config(self):
        config = super().get_config()
        del config["eps"]
        return {"axis": self.axis, "epsilon": self.eps, **config}


class _LastAxisNorm(Layer):
    """A normalisation over one axis of each sample (``axis`` counts the batch axis, as in Keras; -1 the last)."""

    _computes_in_float32 = True  # statistics in float32 under a mixed policy (Keras)

    def __init__(self, axis: int = -1, eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        self.axis = _checks.integer(axis, "axis", owner)
        self.eps = _checks.real(eps, "eps", owner, 0.0, open_low=True)

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input", input_shape)
        rank = len(input_shape) + 1
        if not (-rank <= self.axis < rank) or self.axis % rank == 0:
            raise self.shape_error(f"axis={self.axis} to be a non-batch axis of its (N, ...) input, i.e. in "
                                   f"[1, {rank - 1}] or [-{rank - 1}, -1]", input_shape)
        if self._size(input_shape) < 1:
            raise self.shape_error(f"a normalised axis (axis={self.axis}) of size >= 1", input_shape)

    def _normalised_axis(self, ndim: int) -> int:
        return self.axis % ndim

    def _size(self, input_shape) -> int:
        return input_shape[self._normalised_axis(len(input_shape) + 1) - 1]

    def call(self, x, training=False):
        axis = self._normalised_axis(x.ndim)
        if axis == x.ndim - 1:
            return self.normalise_last(x)
        order = [d for d in range(x.ndim) if d != axis] + [axis]
        back = [order.index(d) for d in range(x.ndim)]
        return F.transpose(self.normalise_last(F.transpose(x, order)), back)

    def normalise_last(self, x):
        raise NotImplementedError

    def get_config(self):
        return {"axis": self.axis, "eps": self.eps, **super().get_config()}


@register
class LayerNorm(_LastAxisNorm):
    """Layer normalisation over ``axis`` of each sample: ``(x - mean) / sqrt(var + eps) * gamma + beta``; weights
    ``gamma`` (ones) and ``beta`` (zeros) of the normalised axis's size."""

    supports_masking = True  # per position: a mask passes through, as in Keras

    def create_weights(self, input_shape):
        size = self._size(input_shape)
        self.add_weight("gamma", (size,), "ones")
        self.add_weight("beta", (size,), "zeros")

    def normalise_last(self, x):
        return F.layer_norm(x, self._params["gamma"], self._params["beta"], self.eps)

    def _plan_call(self, x, training):
        if self._normalised_axis(x.ndim) != x.ndim - 1:  # (a transposed axis runs in full)
            return None
        params = {"eps": float(self.eps), "rms": False}
        return _plans.op_plan(self, training, F.LayerNormFunction.apply, ("gamma", "beta"), params)


@register
class RMSNorm(_LastAxisNorm):
    """Root-mean-square normalisation over ``axis``: ``x / sqrt(mean(x^2) + eps) * gamma``; weight ``gamma``
    (ones)."""

    def __init__(self, eps: float = 1e-6, axis: int = -1, **kwargs):
        super().__init__(axis=axis, eps=eps, **kwargs)

    def create_weights(self, input_shape):
        self.add_weight("gamma", (self._size(input_shape),), "ones")

    def normalise_last(self, x):
        return F.rms_norm(x, self._params["gamma"], self.eps)


@register
class GroupNorm(Layer):
    """Group normalisation of (C, H, W) (or (C, ...), or (C,) as PyTorch) samples: the C channels in ``groups``
    consecutive groups, each normalised over its channels and positions, then ``* gamma + beta`` per channel
    (weights of shape (C,))."""

    _computes_in_float32 = True  # statistics in float32 under a mixed policy (Keras)

    def __init__(self, groups: int, eps: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        owner = f"GroupNorm {self.name!r}"
        self.groups = _checks.integer(groups, "groups", owner, minimum=1)
        self.eps = _checks.real(eps, "eps", owner, 0.0, open_low=True)

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list) or len(input_shape) < 1 or min(input_shape) < 1:
            raise self.shape_error("a per-sample input (C,) or (C, H, W, ...) (channels first) with sizes >= 1",
                                   input_shape)
        if input_shape[0] % self.groups:
            raise self.shape_error(f"a channel count divisible by groups={self.groups}", input_shape)

    def create_weights(self, input_shape):
        self.add_weight("gamma", (input_shape[0],), "ones")
        self.add_weight("beta", (input_shape[0],), "zeros")

    def call(self, x, training=False):
        return F.group_norm(x, self.groups, self._params["gamma"], self._params["beta"], self.eps)

    def get_config(self):
        return {"groups": self.groups, "eps": self.eps, **super().get_config()}


@register
class LayerNormalization(LayerNorm):
    """Keras 3's ``LayerNormalization(axis=-1, epsilon=1e-3)`` (``eps=`` accepted too); ``LayerNorm`` keeps
    PyTorch's eps 1e-5."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-3, **kwargs):
        super().__init__(axis=axis, eps=_epsilon(epsilon, kwargs), **kwargs)

    @property
    def epsilon(self) -> float:
        return self.eps

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = config.pop("eps")
        return config


@register
class GroupNormalization(GroupNorm):
    """Keras 3's ``GroupNormalization(groups=32, epsilon=1e-3)`` (``eps=`` accepted too) over the channels, axis 1
    here (NCHW; Keras' default axis -1 is the channels of its NHWC); ``GroupNorm`` keeps PyTorch's eps 1e-5."""

    def __init__(self, groups: int = 32, axis: int = 1, epsilon: float = 1e-3, **kwargs):
        super().__init__(groups, eps=_epsilon(epsilon, kwargs), **kwargs)
        self.axis = _checks.integer(axis, "axis", f"GroupNormalization {self.name!r}")
        if self.axis != 1:
            raise ValueError(f"GroupNormalization {self.name!r}: axis={self.axis} is not supported; the channels "
                             "are axis 1 here (NCHW, not Keras' NHWC)")

    @property
    def epsilon(self) -> float:
        return self.eps

    def get_config(self):
        config = super().get_config()
        del config["eps"]
        return {"axis": self.axis, "epsilon": self.eps, **config}


_own_array, _state, _new = _autograd._own_array, _autograd._state, object.__new__
