"""Optimizers: SGD (momentum, Nesterov), Adagrad, RMSprop, Adam, AdamW (Keras 3's rules, defaults and argument names,
magmadnn's ``lr``/``beta1``/``beta2``/``eps`` as aliases), and magmadnn's own PyTorch-style AdaGrad and RMSProp.

``optimizer.step(params)`` updates every trainable Parameter that has a gradient, in place (a Parameter whose
``trainable`` is False, a frozen layer's, is left as it is: no update, weight decay or slot; clipping norms count
the trainable gradients only), through the backend's ``*_update`` ops, then applies its ``constraint`` (Keras');
slot arrays (momentum, moments, accumulators) are allocated once per parameter with ``zeros_like`` and are indexed
by the parameter's position in ``params`` (always the same list). No step reads back: lr and step are host numbers.

``lr`` is a number or a ``magmadnn.schedules`` schedule evaluated at the number of steps done so far.
``state_dict()`` / ``load_state_dict()`` carry the step count, the current lr and the slot arrays (as backend
arrays) for checkpoints. The update formulas (``g`` the gradient, ``wd`` the weight decay, ``t`` the step from 1):

* Keras' weight decay (SGD, Adagrad, RMSprop, Adam, AdamW) is decoupled: ``p *= 1 - lr wd`` before the update;
  AdaGrad and RMSProp add ``wd p`` to ``g`` (L2).
* SGD: ``v = momentum v + g; p -= lr (g + momentum v)`` if Nesterov else ``p -= lr v`` (Keras' rule for a constant
  learning rate; Keras keeps ``lr`` inside ``v``, so the two differ while a schedule changes it).
* Adagrad: ``s += g^2; p -= lr g / sqrt(s + eps)`` from ``s = 0.1``; AdaGrad: ``p -= lr g / (sqrt(s) + eps)`` from 0.
* RMSprop: ``s = rho s + (1 - rho) g^2; p -= lr g / sqrt(s + eps)``; RMSProp: ``p -= lr g / (sqrt(s) + eps)``.
* Adam, AdamW: ``m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) +
  eps)`` (Keras' epsilon placement).

``LossScaleOptimizer(inner)``: Keras 3's dynamic loss scaling, decided on the backend (see the class). Every
optimizer takes one of Keras' ``clipnorm=c`` (each gradient times ``c / max(||g||, c)``), ``global_clipnorm=c``
(all times ``c / max(||all||, c)``), ``clipvalue=c`` (elements clipped to [-c, c]), on the backend, no host read.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import _foreach, clipping, constraints, schedules
from ._configurable import Configurable
from ._keras_apply import KerasApply
from ._registry import resolve
from .autograd import Tensor
from .backend.ops.optim import adam_bias_corrections

__all__ = ["Optimizer", "SGD", "AdaGrad", "Adagrad", "RMSProp", "RMSprop", "Adam", "AdamW", "LossScaleOptimizer",
           "get"]


def _check(name: str, value, low=0.0, high=None, open_low=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"optimizer: {name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value) or value < low or (open_low and value == low) or (high is not None and value >= high):
        bounds = f"{'(' if open_low else '['}{low}, {high if high is not None else 'inf'})"
        raise ValueError(f"optimizer: {name} must be in {bounds}, got {value!r}")
    return value


class Optimizer(KerasApply, Configurable):
    """Base class. Subclasses list their slot names in ``slots`` and implement ``update(param, grad, state)``.
    Every hyperparameter but the learning rate is a constant of a captured step: setting one recaptures it."""

    slots: tuple[str, ...] = ()
    skips_nonfinite = False  # True: the step itself skips non-finite gradients; fit's non-finite checks stand back
    # what changes as it runs, or is read from device memory by a replayed step (the learning rate)
    _volatile = frozenset({"iterations", "lr", "learning_rate", "_lr", "_count", "_state", "_device_values"})

    def __init__(self, lr=0.01, weight_decay: float = 0.0, clipnorm: float | None = None,
                 global_clipnorm: float | None = None, clipvalue: float | None = None, **keras_only):
        _refuse_keras_only(type(self).__name__, keras_only)
        self.lr = lr
        self.weight_decay = _check("weight_decay", weight_decay)
        self.clipnorm, self.global_clipnorm, self.clipvalue = clipping.options(  # each None or finite > 0, one
            clipnorm, global_clipnorm, clipvalue, lambda name, v: _check(name, v, open_low=True))  # at most (Keras)
        self.iterations = 0
        self._state: dict[int, dict] = {}
        self._count = None

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, value):
        self._lr = schedules.get(value)

    @property
    def learning_rate(self) -> float:
        """The learning rate the next step will use."""
        return self._lr if not callable(self._lr) else schedules.checked_rate(  # a number >= 0, or a ValueError
            self._lr(self.iterations), self._lr, f"at step {self.iterations}", type(self).__name__)

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        """Keras' ``model.optimizer.learning_rate = 1e-4``: the same as setting ``lr``."""
        self.lr = value

    def step(self, params) -> None:
        """Apply one update to every parameter in ``params`` that has a gradient, then its ``constraint``."""
        params = list(params)
        if self._count is None:
            self._count = len(params)
        elif len(params) != self._count:
            raise ValueError(f"{type(self).__name__}.step: got {len(params)} parameters, but this optimizer was "
                             f"used with {self._count}; use one optimizer per parameter list")
        if self._step_plan is not None and _foreach.planned_step(self, params):  # the step as planned, or:
            return
        lr = self._advance()
        if self._device_values is not None:  # graph capture: the kernels read this step's values on the device
            lr = self._device_values
        grads, made = self._clipped_grads(params), self._state  # (slots made already: read without a frame)
        if not _foreach.step_columns(self, params, grads, made, lr):  # the common step, a column at a time, or:
            live = [(p, g, made[i] if i in made else self._slots(i, p)) for i, (p, g) in
                    enumerate(zip(params, grads)) if g is not None]
            if not _foreach.update_all(self, live, lr):  # one op for all (one launch per dtype on the device), or
                for param, grad, state in live:  # each
                    self.update(param.xp, param.data, grad, state, lr)
            constraints.apply(params, grads)
        object.__setattr__(self, "_step_plan", _foreach.StepPlan.of(self, Optimizer))  # (see StepPlan)

    def _slots(self, index: int, param) -> dict:  # parameter index's slot arrays, made at its first update
        if (state := self._state.get(index)) is None:
            state = self._state[index] = {name: self._new_slot(param.xp, param.data, name) for name in self.slots}
        return state

    def update(self, xp, p, g, state, lr) -> None:
        raise NotImplementedError

    def _new_slot(self, xp, p, name):
        """A slot array's initial value: zeros (Keras' Adagrad starts its accumulator elsewhere)."""
        return xp.zeros_like(p)

    # -- gradient clipping
    def _clipped_grads(self, params) -> list:
        """The gradients the update uses (None where a parameter has none), clipped as :mod:`.clipping` says."""
        grads = _foreach.trainable_grads(params)  # (None for a frozen parameter)
        return clipping.clip(params, grads, self.clipnorm, self.global_clipnorm, self.clipvalue)

    # -- device-resident step values (graph replay, magmadnn.models.replay); the step's plan
    _step_plan = None  # the _foreach.StepPlan of this configuration (made by a full step), or None
    _device_values = None  # a float64 backend vector holding step_values() while a step is captured, else None

    def _advance(self) -> float:
        """The learning rate of the next step (checked by ``learning_rate``); count the step."""
        lr = self.learning_rate
        object.__setattr__(self, "iterations", self.iterations + 1)  # (volatile: Configurable's setattr adds a frame)
        return lr

    def step_values(self, lr: float) -> tuple[float, ...]:
        """What the update kernels read from device memory in a replayed step (after :meth:`_advance`):
        ``(lr,)``; Adam adds its bias corrections."""
        return (lr,)

    def scale_loss(self, loss):
        """What the training step back-propagates: the loss itself (Keras' name; ``LossScaleOptimizer`` scales it)."""
        return loss

    def zero_grad(self, params) -> None:
        for param in params:
            param.zero_grad()

    # -- configuration and checkpoint state
    def get_config(self) -> dict:
        if isinstance(self._lr, schedules.Schedule):
            lr = self._lr.to_config()
        elif callable(self._lr):
            raise TypeError(
                f"{type(self).__name__}: a plain callable learning rate ({self._lr!r}) cannot be saved; use a "
                "magmadnn.schedules Schedule (Constant, StepDecay, CosineDecay) or a LearningRateScheduler callback")
        else:
            lr = self._lr
        config = {"lr": lr, "weight_decay": self.weight_decay}
        config.update({name: getattr(self, name) for name in ("clipnorm", "global_clipnorm", "clipvalue")
                       if getattr(self, name) is not None})  # only when set, so older configs read the same
        return config

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    @property
    def slot_arrays(self) -> dict[int, dict]:
        """The live slot arrays, ``{parameter index: {slot: backend array}}`` (fit's rollback snapshot uses it)."""
        return self._state

    def move_slots(self, move) -> None:
        """Replace every slot array ``a`` by ``move(a)`` (``Model.to`` moves them to another backend)."""
        self._state = {index: {name: move(a) for name, a in slots.items()} for index, slots in self._state.items()}

    def state_dict(self) -> dict:
        """``{"iterations", "lr", "slots": {index: {slot: backend array}}}`` (arrays are not copied)."""
        return {"iterations": self.iterations, "lr": self.get_config()["lr"],
                "slots": {index: dict(state) for index, state in self._state.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.iterations = int(state["iterations"])
        if "lr" in state:
            self.lr = state["lr"]
        self._state = {int(index): dict(slots) for index, slots in state.get("slots", {}).items()}
        for index, slots in self._state.items():
            if set(slots) != set(self.slots):
                raise ValueError(f"{type(self).__name__}.load_state_dict: parameter {index} has slots "
                                 f"{sorted(slots)}, expected {sorted(self.slots)}")

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


# ------------------------------------------------------------------------------------- Keras-only arguments
_KERAS_DEFAULTS = {"amsgrad": False, "use_ema": False, "ema_momentum": 0.99, "ema_overwrite_frequency": None,
                   "loss_scale_factor": None, "gradient_accumulation_steps": None, "name": None}


def _refuse_keras_only(who: str, arguments: dict) -> None:
    """Keras optimizer arguments at their default values are accepted; others are a TypeError naming the way."""
    for key, value in sorted(arguments.items()):
        if key not in _KERAS_DEFAULTS:
            raise TypeError(f"{who}: unexpected argument {key!r}")
        if key != "name" and value != _KERAS_DEFAULTS[key]:
            raise TypeError(f"{who}: Keras' argument {key}={value!r} is not supported; leave it at Keras' default "
                            f"{_KERAS_DEFAULTS[key]!r}")


def _pick(owner: str, keras_name: str, value, own_name: str, own_value, default):
    """A hyperparameter given by its Keras name or magmadnn's own (an alias), not both; else ``default``."""
    if value is not None and own_value is not None:
        raise TypeError(f"{owner}: pass {keras_name}= or its alias {own_name}=, not both")
    return default if value is None and own_value is None else (own_value if value is None else value)


class SGD(Optimizer):
    """Keras 3's SGD: ``learning_rate=0.01``, ``momentum=0.0``, ``nesterov=False``; ``weight_decay`` decoupled
    (``p -= lr wd p`` before the step, as every Keras optimizer applies it). ``lr=`` is an alias."""

    keras = True

    def __init__(self, learning_rate=None, momentum: float = 0.0, nesterov: bool = False, weight_decay=None, *,
                 lr=None, **clip):
        lr = _pick("SGD", "learning_rate", learning_rate, "lr", lr, 0.01)
        super().__init__(lr, weight_decay or 0.0, **clip)
        self.momentum = _check("momentum", momentum, 0.0, 1.0)
        if nesterov and not self.momentum:
            raise ValueError("SGD: nesterov=True needs a momentum > 0")
        self.nesterov = bool(nesterov)
        self.slots = ("velocity",) if self.momentum else ()

    def update(self, xp, p, g, state, lr):
        xp.sgd_update(p, g, state.get("velocity"), lr, momentum=self.momentum, nesterov=self.nesterov,
                      weight_decay=self.weight_decay, keras=True)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class AdaGrad(Optimizer):
    """magmadnn's (PyTorch-style) AdaGrad: ``p -= lr g / (sqrt(s) + eps)`` from ``s = 0``, L2 weight decay; Keras'
    rule is :class:`Adagrad`."""

    slots = ("accumulator",)
    keras = False

    def __init__(self, lr=0.01, eps: float = 1e-7, weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.eps = _check("eps", eps, open_low=True)

    def update(self, xp, p, g, state, lr):
        xp.adagrad_update(p, g, state["accumulator"], lr, eps=self.eps, weight_decay=self.weight_decay,
                          keras=self.keras)

    def get_config(self):
        return {**super().get_config(), "eps": self.eps}


class Adagrad(AdaGrad):
    """Keras 3's Adagrad: ``learning_rate=0.001``, ``initial_accumulator_value=0.1``, ``epsilon=1e-7`` inside the
    root (``p -= lr g / sqrt(s + eps)``), decoupled weight decay. ``lr=``/``eps=`` are aliases."""

    keras = True

    def __init__(self, learning_rate=None, initial_accumulator_value: float = 0.1, epsilon=None, weight_decay=None,
                 *, lr=None, eps=None, **clip):
        super().__init__(_pick("Adagrad", "learning_rate", learning_rate, "lr", lr, 0.001),
                         _pick("Adagrad", "epsilon", epsilon, "eps", eps, 1e-7), weight_decay or 0.0, **clip)
        self.initial_accumulator_value = _check("initial_accumulator_value", initial_accumulator_value)

    def _new_slot(self, xp, p, name):
        return xp.add(xp.zeros_like(p), self.initial_accumulator_value)

    def get_config(self):
        return {**super().get_config(), "initial_accumulator_value": self.initial_accumulator_value}


class RMSProp(Optimizer):
    """magmadnn's (PyTorch-style) RMSProp: ``p -= lr g / (sqrt(s) + eps)``, L2 weight decay; Keras' rule (epsilon
    inside the root) is :class:`RMSprop`."""

    slots = ("mean_square",)
    keras = False

    def __init__(self, lr=0.001, rho: float = 0.9, eps: float = 1e-7, weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.rho = _check("rho", rho, 0.0, 1.0)
        self.eps = _check("eps", eps, open_low=True)

    def update(self, xp, p, g, state, lr):
        xp.rmsprop_update(p, g, state["mean_square"], lr, rho=self.rho, eps=self.eps, weight_decay=self.weight_decay,
                          keras=self.keras)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "eps": self.eps}


class RMSprop(RMSProp):
    """Keras 3's RMSprop: ``learning_rate=0.001``, ``rho=0.9``, ``momentum=0.0``, ``epsilon=1e-7`` inside the root
    (``p -= lr g / sqrt(s + eps)``), ``centered=False``, decoupled weight decay. ``lr=``/``eps=`` are aliases.
    With ``momentum`` or ``centered`` the step is composed of backend ops (``mom = momentum mom + g / sqrt(s - a^2 +
    eps)``, ``p -= lr mom``: Keras' rule for a constant learning rate, Keras keeping ``lr`` inside ``mom``)."""

    keras = True

    def __init__(self, learning_rate=None, rho: float = 0.9, momentum: float = 0.0, epsilon=None,
                 centered: bool = False, weight_decay=None, *, lr=None, eps=None, **clip):
        super().__init__(_pick("RMSprop", "learning_rate", learning_rate, "lr", lr, 0.001), rho,
                         _pick("RMSprop", "epsilon", epsilon, "eps", eps, 1e-7), weight_decay or 0.0, **clip)
        self.momentum = _check("momentum", momentum, 0.0, 1.0)
        self.centered = bool(centered)
        self.slots = (("mean_square",) + (("momentum",) if self.momentum else ())
                      + (("average_gradient",) if self.centered else ()))

    def update(self, xp, p, g, state, lr):
        if not (self.momentum or self.centered):
            return super().update(xp, p, g, state, lr)
        if self.weight_decay:  # decoupled: p -= lr wd p (an SGD step on a zero gradient)
            xp.sgd_update(p, xp.zeros_like(p), None, lr, weight_decay=self.weight_decay, keras=True)
        xp.running_stat_update(state["mean_square"], xp.multiply(g, g), self.rho)
        denominator = state["mean_square"]
        if self.centered:
            average = state["average_gradient"]
            xp.running_stat_update(average, g, self.rho)
            denominator = xp.subtract(denominator, xp.multiply(average, average))
        direction = xp.divide(g, xp.sqrt(xp.add(denominator, self.eps)))
        xp.sgd_update(p, direction, state.get("momentum"), lr, momentum=self.momentum)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "centered": self.centered}


class Adam(Optimizer):
    """Keras 3's Adam: ``learning_rate=0.001``, ``beta_1=0.9``, ``beta_2=0.999``, ``epsilon=1e-7`` with Keras'
    placement ``p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)``, decoupled ``weight_decay``. ``lr=``,
    ``beta1=``, ``beta2=``, ``eps=`` are aliases. (PyTorch's Adam: ``eps=1e-8`` added to the bias-corrected root;
    the two differ where sqrt(v) is near eps.)"""

    slots = ("m", "v")
    decoupled = True
    _default_weight_decay = 0.0

    def __init__(self, learning_rate=None, beta_1=None, beta_2=None, epsilon=None, weight_decay=None, *, lr=None,
                 beta1=None, beta2=None, eps=None, **clip):
        name = type(self).__name__
        lr = _pick(name, "learning_rate", learning_rate, "lr", lr, 0.001)
        wd = self._default_weight_decay if weight_decay is None else weight_decay
        super().__init__(lr, wd, **clip)
        self.beta1 = _check("beta1", _pick(name, "beta_1", beta_1, "beta1", beta1, 0.9), 0.0, 1.0)
        self.beta2 = _check("beta2", _pick(name, "beta_2", beta_2, "beta2", beta2, 0.999), 0.0, 1.0)
        self.eps = _check("eps", _pick(name, "epsilon", epsilon, "eps", eps, 1e-7), open_low=True)

    def step_values(self, lr):
        t = self.iterations
        return (lr, *adam_bias_corrections(self.beta1, self.beta2, t))  # the backends' adam_update's own

    def update(self, xp, p, g, state, lr):
        xp.adam_update(p, g, state["m"], state["v"], self.iterations, lr, beta1=self.beta1, beta2=self.beta2,
                       eps=self.eps, weight_decay=self.weight_decay, decoupled=self.decoupled, keras=True)

    def get_config(self):
        return {**super().get_config(), "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}


class AdamW(Adam):
    """Keras 3's AdamW: Adam with ``weight_decay=0.004`` (PyTorch's default is 0.01)."""

    _default_weight_decay = 0.004


# ------------------------------------------------------------------------------------- dynamic loss scaling
# Keras 3's ``LossScaleOptimizer`` (``magmadnn.optimizers.LossScaleOptimizer``): dynamic loss scaling decided on
# the backend.
#
# The training step multiplies the loss by ``dynamic_scale`` before backward (:meth:`LossScaleOptimizer.scale_loss`);
# the step divides the gradients by it and hands them to the inner optimizer. When any gradient holds inf or NaN the
# step is skipped (weights and slots as they were) and the scale halved; after ``dynamic_growth_steps`` finite steps
# in a row it is doubled. The flag, the skip and the scale are backend arrays (ops ``finite_flag``, ``revert_update``,
# ``loss_scale_update``): the update runs and a select keeps or undoes it, so no value is read back per step and a
# step captured as a graph (``compile(graph=True)``) replays the decision. A skipped step is not an error for ``fit``.
#
# One difference from Keras: the host cannot know, without a read, that a step was skipped, so the inner optimizer's
# ``iterations`` (the step a learning-rate schedule sees) counts skipped steps too; Keras counts applied steps only.
# Adam's bias correction counts applied steps, as Keras': beta^t is kept on the backend and the values vector
# {lr, 1 - beta1^t, 1 - beta2^t} its update reads is made there. The scale, its counter (and those powers) live
# beside the inner optimizer's slots (``slot_arrays``, under ``"loss_scale"``), so fit's rollback snapshot,
# ``Model.to`` and graph replay carry them like any slot.
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

    skips_nonfinite = True
    _volatile = Optimizer._volatile | {"_pending"}
    _pending = None  # a loaded {"scale", "counter"[, Adam's beta powers]}, placed on the backend by the next step

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
        if not (0 < initial_scale <= np.finfo(np.float32).max):  # kept in float32, as Keras keeps it
            raise ValueError(f"LossScaleOptimizer: initial_scale must be a finite float32 > 0, got {initial_scale!r}")
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
    def _scale_state(self, xp) -> dict:
        """``{"scale", "counter"}``: 0-d float32 arrays (Keras' dtype) on ``xp``, made on first use."""
        state = self.slot_arrays.get(_KEY)
        if state is None or self._pending is not None:
            pending = self._pending or {"scale": self.initial_scale, "counter": 0.0}
            state = self.slot_arrays[_KEY] = {  # Adam's powers: float64 vectors of one, as its values vector
                key: xp.asarray(np.array([value], np.float64) if key.endswith("_power") else np.float32(value))
                for key, value in pending.items()}
            self._pending = None
        return state

    @property
    def dynamic_scale(self) -> float:
        """The current loss scale (``initial_scale`` before the first step; one host read after)."""
        if self._pending is not None:
            return self._pending["scale"]
        state = self.slot_arrays.get(_KEY)
        return self.initial_scale if state is None else _host_value(state["scale"])

    def scale_loss(self, loss):
        """``loss * dynamic_scale`` (a Tensor, differentiable; the training step back-propagates it)."""
        if not isinstance(loss, Tensor):
            raise TypeError(f"LossScaleOptimizer.scale_loss: expected a magmadnn Tensor, got {type(loss).__name__}")
        scale = _as_dtype(loss.xp, self._scale_state(loss.xp)["scale"], loss.dtype)
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
        state = self._scale_state(xp)
        grads = [p.grad for _, p in live]
        finite = xp.finite_flag(grads)  # in the gradients' dtype (one for all)
        scale = _as_dtype(xp, state["scale"], finite.dtype)
        saved = []
        for (index, param), grad in zip(live, grads):
            param.grad = xp.divide(grad, scale)
            slots = inner._slots(index, param)  # made here, not in the inner step: a skipped first step undoes them
            saved += [(param, xp.copy(param.data))] + [(a, xp.copy(a)) for a in slots.values()]
        powers = self._bias_corrections(xp, state) if isinstance(inner, Adam) else None
        inner._device_values = self._device_values if powers is None else powers[0]
        try:
            inner.step(params)
        finally:
            inner._device_values = None
        for array, copy in ((a.data if isinstance(a, Tensor) else a, c) for a, c in saved):  # constraints rebind
            xp.revert_update(array, copy, _as_dtype(xp, finite, array.dtype))
        if powers is not None:  # beta^t advances with the applied steps only
            for name, advanced in powers[1].items():
                xp.revert_update(advanced, state[name], _as_dtype(xp, finite, np.float64))
                state[name] = advanced
        xp.loss_scale_update(state["scale"], state["counter"], _as_dtype(xp, finite, np.float32),
                             self.dynamic_growth_steps)

    def _bias_corrections(self, xp, state):
        """Adam's values {lr, 1 - beta1^t, 1 - beta2^t} for t = the applied steps + 1 (as Keras counts them), from
        ``beta_1_power``/``beta_2_power`` = beta^(applied steps) kept on the backend; and the advanced powers."""
        inner = self.inner_optimizer
        if "beta_1_power" not in state:
            state["beta_1_power"], state["beta_2_power"] = (xp.asarray(np.ones((1,), np.float64)) for _ in range(2))
        advanced = {"beta_1_power": xp.multiply(state["beta_1_power"], inner.beta1),
                    "beta_2_power": xp.multiply(state["beta_2_power"], inner.beta2)}
        if self._device_values is not None:  # graph replay: the learning rate staged for this step
            n = int(self._device_values.shape[0])
            lr = xp.split(self._device_values, [1, n - 1], 0)[0]
        else:
            lr = xp.asarray(np.array([inner.learning_rate], np.float64))
        corrections = [xp.add(xp.negative(a), 1.0) for a in advanced.values()]
        return xp.concatenate([lr, *corrections], 0), advanced

    def zero_grad(self, params) -> None:
        self.inner_optimizer.zero_grad(params)

    # -- configuration and state
    def get_config(self) -> dict:
        return {"name": self.name, "inner_optimizer": self.inner_optimizer.to_config(),
                "initial_scale": self.initial_scale, "dynamic_growth_steps": self.dynamic_growth_steps}

    @classmethod
    def from_config(cls, config: dict) -> LossScaleOptimizer:
        config = dict(config)
        return cls(get(config.pop("inner_optimizer")), **config)

    def state_dict(self) -> dict:
        """The inner optimizer's state, with ``"loss_scale": {"scale", "counter"}`` as host numbers (one read each
        when the scale exists)."""
        state = self.inner_optimizer.state_dict()
        scaling = state["slots"].pop(_KEY, None)
        if scaling is not None:
            state["loss_scale"] = {key: _host_value(a) for key, a in scaling.items()}
            state["loss_scale"]["counter"] = int(state["loss_scale"]["counter"])
        elif self._pending is not None:
            state["loss_scale"] = {**self._pending, "counter": int(self._pending["counter"])}
        return state

    def load_state_dict(self, state: dict) -> None:
        """The inner optimizer's state; ``"loss_scale"`` (when present) is placed on the backend by the next
        step (in the dtype of its gradients)."""
        state = dict(state)
        scaling = state.pop("loss_scale", None)
        if scaling is not None:
            check_loss_scale_state(scaling, "LossScaleOptimizer.load_state_dict")
        self.inner_optimizer.load_state_dict(state)
        if scaling is not None:
            self._pending = {key: float(value) for key, value in scaling.items()}

    def __repr__(self):
        return (f"LossScaleOptimizer({self.inner_optimizer!r}, initial_scale={self.initial_scale!r}, "
                f"dynamic_growth_steps={self.dynamic_growth_steps!r})")


def check_loss_scale_state(scaling, who: str) -> None:
    """A saved ``{"scale", "counter"}``: finite numbers >= 0 (else ValueError naming ``who``)."""
    if not isinstance(scaling, dict):
        raise ValueError(f"{who}: loss_scale must be a dict with scale and counter, got {scaling!r}")
    unknown = set(scaling) - {"scale", "counter", "beta_1_power", "beta_2_power"}
    if unknown:
        raise ValueError(f"{who}: loss_scale has unknown entries {sorted(unknown)}")
    for key in ("scale", "counter", *(k for k in ("beta_1_power", "beta_2_power") if k in scaling)):
        value = scaling.get(key)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
            raise ValueError(f"{who}: loss_scale {key} must be a finite number >= 0, got {value!r}")


def _as_dtype(xp, array, dtype):
    """``array`` itself when it has ``dtype``, else a cast (on the backend)."""
    return array if np.dtype(array.dtype) == np.dtype(dtype) else xp.asarray(array, dtype)


def _host_value(array) -> float:
    """A one-element backend array as a float (one read for a device array)."""
    return float(np.asarray(array if isinstance(array, np.ndarray) else array.get()).reshape(()))


_BY_NAME = {"sgd": SGD, "adagrad": Adagrad, "rmsprop": RMSprop, "adam": Adam, "adamw": AdamW}
#: Every class a saved config may name (magmadnn's own spellings too).
_BY_CLASS = {cls.__name__: cls for cls in (SGD, AdaGrad, Adagrad, RMSProp, RMSprop, Adam, AdamW)}


def get(identifier) -> Optimizer:
    """An Optimizer from a name ("sgd", "adam", ...), an instance, or a ``{"class_name", "config"}`` dict."""
    if isinstance(identifier, dict) and identifier.get("class_name") == "LossScaleOptimizer":
        return LossScaleOptimizer.from_config(identifier.get("config", {}))
    if isinstance(identifier, dict) and identifier.get("class_name") in ("AdaGrad", "RMSProp"):
        return _BY_CLASS[identifier["class_name"]](**identifier.get("config", {}))
    return resolve(identifier, Optimizer, _BY_NAME, "optimizer")
