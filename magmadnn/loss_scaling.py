"""Keras 3's ``LossScaleOptimizer`` (``magmadnn.optimizers.LossScaleOptimizer``): dynamic loss scaling decided on
the backend.

The training step multiplies the loss by ``dynamic_scale`` before backward (:meth:`LossScaleOptimizer.scale_loss`);
the step divides the gradients by it and hands them to the inner optimizer. When any gradient holds inf or NaN the
step is skipped (weights and slots as they were) and the scale halved; after ``dynamic_growth_steps`` finite steps
in a row it is doubled. The flag, the skip and the scale are backend arrays (ops ``finite_flag``, ``revert_update``,
``loss_scale_update``): the update runs and a select keeps or undoes it, so no value is read back per step and a
step captured as a graph (``compile(graph=True)``) replays the decision. A skipped step is not an error for ``fit``.

One difference from Keras: the host cannot know, without a read, that a step was skipped, so the inner optimizer's
``iterations`` (the step a schedule and Adam's bias correction see) counts skipped steps too; Keras counts applied
steps only. The scale and its counter live beside the inner optimizer's slots (``slot_arrays``, under
``"loss_scale"``), so fit's rollback snapshot, ``Model.to`` and graph replay carry them like any slot.
"""

from __future__ import annotations

import numbers

import numpy as np

from .autograd import Tensor
from .optimizers import Optimizer

__all__ = ["LossScaleOptimizer"]

_KEY = "loss_scale"  # the entry of the inner optimizer's slot dict holding {"scale", "counter"}
# Keras' base-optimizer arguments LossScaleOptimizer refuses unless at their defaults
_BASE_DEFAULTS = {"weight_decay": None, "clipnorm": None, "global_clipnorm": None, "clipvalue": None,
                  "use_ema": False, "ema_momentum": 0.99, "ema_overwrite_frequency": None, "loss_scale_factor": None,
                  "gradient_accumulation_steps": None}


class LossScaleOptimizer(Optimizer):
    """Keras 3's ``LossScaleOptimizer(inner_optimizer, initial_scale=2**15, dynamic_growth_steps=2000)``: the scale
    is halved and the step skipped when any gradient is inf/NaN, doubled after ``dynamic_growth_steps`` finite
    steps in a row; ``dynamic_scale`` reads it (one host read). ``learning_rate``, ``lr`` and ``iterations`` are
    the inner optimizer's."""

    _volatile = Optimizer._volatile | {"_pending"}
    _pending = None  # a loaded (scale, counter), placed on the backend by the next step

    def __init__(self, inner_optimizer, initial_scale=2.0**15, dynamic_growth_steps=2000, name=None, **kwargs):
        if not kwargs.pop("dynamic", True):
            raise ValueError("LossScaleOptimizer: dynamic=False is not supported (as in Keras 3); set the loss "
                             "scale yourself instead")
        for key, default in _BASE_DEFAULTS.items():
            if key in kwargs and kwargs.pop(key) != default:
                raise ValueError(f"LossScaleOptimizer does not support {key}=; set it on the inner optimizer")
        if kwargs:
            raise TypeError(f"LossScaleOptimizer: unexpected arguments {sorted(kwargs)}")
        if not isinstance(inner_optimizer, Optimizer) or isinstance(inner_optimizer, LossScaleOptimizer):
            raise TypeError("LossScaleOptimizer: inner_optimizer must be a magmadnn optimizer (not a "
                            f"LossScaleOptimizer), got {inner_optimizer!r}")
        if isinstance(initial_scale, bool) or not isinstance(initial_scale, numbers.Real):
            raise TypeError(f"LossScaleOptimizer: initial_scale must be a number, got {initial_scale!r}")
        if not (np.isfinite(initial_scale) and initial_scale > 0):
            raise ValueError(f"LossScaleOptimizer: initial_scale must be a finite number > 0, got {initial_scale!r}")
        if isinstance(dynamic_growth_steps, bool) or not isinstance(dynamic_growth_steps, numbers.Integral):
            raise TypeError(f"LossScaleOptimizer: dynamic_growth_steps must be an int, got {dynamic_growth_steps!r}")
        if not 1 <= dynamic_growth_steps <= 2**24:  # counted exactly in a float32 array
            raise ValueError(f"LossScaleOptimizer: dynamic_growth_steps must be in [1, 2**24], got "
                             f"{dynamic_growth_steps!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"LossScaleOptimizer: name must be a string or None, got {name!r}")
        self.inner_optimizer = inner_optimizer
        self.initial_scale = float(initial_scale)
        self.dynamic_growth_steps = int(dynamic_growth_steps)
        self.name = name

    # -- what is the inner optimizer's
    iterations = property(lambda self: self.inner_optimizer.iterations,
                          lambda self, value: setattr(self.inner_optimizer, "iterations", value))
    lr = property(lambda self: self.inner_optimizer.lr, lambda self, value: setattr(self.inner_optimizer, "lr", value))
    learning_rate = property(lambda self: self.inner_optimizer.learning_rate,
                             lambda self, value: setattr(self.inner_optimizer, "learning_rate", value))
    slots = property(lambda self: self.inner_optimizer.slots)
    _count = property(lambda self: self.inner_optimizer._count,
                      lambda self, value: setattr(self.inner_optimizer, "_count", value))

    @property
    def slot_arrays(self) -> dict:
        """The inner optimizer's slot dict, which also holds the scale state under ``"loss_scale"``."""
        return self.inner_optimizer._state

    def move_slots(self, move) -> None:
        self.inner_optimizer.move_slots(move)

    def _advance(self) -> float:
        return self.inner_optimizer._advance()

    def step_values(self, lr: float) -> tuple[float, ...]:
        return self.inner_optimizer.step_values(lr)

    # -- the scale
    def _scale_state(self, xp, like) -> dict:
        """``{"scale", "counter"}`` (0-d arrays in ``like``'s dtype), made on first use."""
        state = self.slot_arrays.get(_KEY)
        if state is None or self._pending is not None:
            scale, counter = (self.initial_scale, 0.0) if self._pending is None else self._pending
            dtype = np.dtype(like.dtype)
            state = self.slot_arrays[_KEY] = {"scale": xp.asarray(np.array(scale, dtype)),
                                              "counter": xp.asarray(np.array(counter, dtype))}
            self._pending = None
        return state

    @property
    def dynamic_scale(self) -> float:
        """The current loss scale (``initial_scale`` before the first step; one host read after)."""
        if self._pending is not None:
            return self._pending[0]
        state = self.slot_arrays.get(_KEY)
        return self.initial_scale if state is None else _host_value(state["scale"])

    def scale_loss(self, loss):
        """``loss * dynamic_scale`` (a Tensor, differentiable; the training step back-propagates it)."""
        if not isinstance(loss, Tensor):
            raise TypeError(f"LossScaleOptimizer.scale_loss: expected a magmadnn Tensor, got {type(loss).__name__}")
        scale = self._scale_state(loss.xp, loss.data)["scale"]
        if np.dtype(scale.dtype) != np.dtype(loss.dtype):
            raise TypeError(f"LossScaleOptimizer.scale_loss: the loss is {loss.dtype} but the scale is kept in "
                            f"{scale.dtype} (the dtype of the first loss or gradients it saw)")
        return loss * Tensor._of(scale, loss.xp)

    # -- the step
    def step(self, params) -> None:
        """Unscale the gradients, run the inner optimizer's step and undo it (weights and slots) unless every
        gradient was finite; then update the scale. Nothing is read back."""
        params = list(params)
        inner = self.inner_optimizer
        live = [(i, p) for i, p in enumerate(params) if p.grad is not None and getattr(p, "trainable", True)]
        if not live:
            return inner.step(params)
        xp = live[0][1].xp
        state = self._scale_state(xp, live[0][1].grad)
        scale, grads = state["scale"], [p.grad for _, p in live]
        finite = xp.finite_flag(grads)
        saved = []
        for (index, param), grad in zip(live, grads):
            param.grad = xp.divide(grad, scale)
            slots = inner._state.get(index)
            if slots is None:  # made here rather than in the inner step, so that a skipped first step undoes them
                slots = inner._state[index] = {name: inner._new_slot(xp, param.data, name) for name in inner.slots}
            saved += [(param.data, xp.copy(param.data))] + [(a, xp.copy(a)) for a in slots.values()]
        inner._device_values = self._device_values
        try:
            inner.step(params)
        finally:
            inner._device_values = None
        for array, copy in saved:
            xp.revert_update(array, copy, finite)
        xp.loss_scale_update(scale, state["counter"], finite, self.dynamic_growth_steps)

    def zero_grad(self, params) -> None:
        self.inner_optimizer.zero_grad(params)

    # -- configuration and state
    def get_config(self) -> dict:
        return {"name": self.name, "inner_optimizer": self.inner_optimizer.to_config(),
                "initial_scale": self.initial_scale, "dynamic_growth_steps": self.dynamic_growth_steps}

    @classmethod
    def from_config(cls, config: dict) -> LossScaleOptimizer:
        from .optimizers import get  # noqa: PLC0415 - optimizers imports this module at its end

        config = dict(config)
        return cls(get(config.pop("inner_optimizer")), **config)

    def state_dict(self) -> dict:
        """The inner optimizer's state, with ``"loss_scale": {"scale", "counter"}`` as host numbers (one read each
        when the scale exists)."""
        state = self.inner_optimizer.state_dict()
        scaling = state["slots"].pop(_KEY, None)
        if scaling is not None:
            state["loss_scale"] = {key: _host_value(a) for key, a in scaling.items()}
        elif self._pending is not None:
            state["loss_scale"] = dict(zip(("scale", "counter"), self._pending))
        return state

    def load_state_dict(self, state: dict) -> None:
        """The inner optimizer's state; ``"loss_scale"`` (when present) is placed on the backend by the next
        step (in the dtype of its gradients)."""
        state = dict(state)
        scaling = state.pop("loss_scale", None)
        if scaling is not None:
            if not isinstance(scaling, dict):
                raise ValueError(f"LossScaleOptimizer.load_state_dict: loss_scale must be a dict, got {scaling!r}")
            for key in ("scale", "counter"):
                value = scaling.get(key)
                if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
                        or value < 0:
                    raise ValueError(f"LossScaleOptimizer.load_state_dict: loss_scale {key} must be a finite number "
                                     f">= 0, got {value!r}")
        self.inner_optimizer.load_state_dict(state)
        if scaling is not None:
            self._pending = (float(scaling["scale"]), float(scaling["counter"]))

    def __repr__(self):
        return (f"LossScaleOptimizer({self.inner_optimizer!r}, initial_scale={self.initial_scale!r}, "
                f"dynamic_growth_steps={self.dynamic_growth_steps!r})")


def _host_value(array) -> float:
    """A 0-d backend array as a float (one read for a device array)."""
    return float(np.asarray(array if isinstance(array, np.ndarray) else array.get()))
