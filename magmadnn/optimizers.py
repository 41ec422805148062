"""Optimizers: SGD (momentum, Nesterov), AdaGrad, RMSProp, Adam, AdamW.

``optimizer.step(params)`` updates every trainable Parameter that has a gradient, in place (a Parameter whose
``trainable`` is False, a frozen layer's, is left as it is: no update, weight decay or slot; clipping norms count
the trainable gradients only), through the backend's ``*_update``
ops; slot arrays (momentum, moments, accumulators) are allocated once per parameter with ``zeros_like`` and are
indexed by the parameter's position in ``params`` (the model always passes the same ordered list). A step never reads
a value back to the host: the learning rate and the step count are host numbers.

``lr`` is a number or a ``magmadnn.schedules`` schedule evaluated at the number of steps done so far.
``state_dict()`` / ``load_state_dict()`` carry the step count, the current lr and the slot arrays (as backend
arrays) for checkpoints. The update formulas (``g`` the gradient, ``wd`` the weight decay, ``t`` the step from 1):

* SGD: ``g += wd p; v = momentum v + g; p -= lr (g + momentum v)`` if Nesterov else ``p -= lr v``.
* AdaGrad: ``s += g^2; p -= lr g / (sqrt(s) + eps)``.
* RMSProp: ``s = rho s + (1 - rho) g^2; p -= lr g / (sqrt(s) + eps)``.
* Adam: ``m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr m^ / (sqrt(v^) + eps)`` with the bias-corrected
  ``m^ = m / (1 - b1^t)``, ``v^ = v / (1 - b2^t)``; ``wd`` is added to ``g`` (L2).
* AdamW: Adam with decoupled weight decay ``p *= 1 - lr wd`` before the update.

Every optimizer takes Keras' ``clipnorm=c`` (each gradient scaled by ``c / max(||g||, c)``) or ``global_clipnorm=c``
(all scaled by ``c / max(||all||, c)``), applied before the update on the backend, without a host read.
"""

from __future__ import annotations

import math
import numbers

from . import schedules
from ._configurable import Configurable
from ._registry import resolve

__all__ = ["Optimizer", "SGD", "AdaGrad", "RMSProp", "Adam", "AdamW", "get"]


def _check(name: str, value, low=0.0, high=None, open_low=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"optimizer: {name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value) or value < low or (open_low and value == low) or (high is not None and value >= high):
        bounds = f"{'(' if open_low else '['}{low}, {high if high is not None else 'inf'})"
        raise ValueError(f"optimizer: {name} must be in {bounds}, got {value!r}")
    return value


class Optimizer(Configurable):
    """Base class. Subclasses list their slot names in ``slots`` and implement ``update(param, grad, state)``.
    Every hyperparameter but the learning rate is a constant of a captured step: setting one recaptures it."""

    slots: tuple[str, ...] = ()
    # what changes as it runs, or is read from device memory by a replayed step (the learning rate)
    _volatile = frozenset({"iterations", "lr", "learning_rate", "_lr", "_count", "_state", "_device_values"})

    def __init__(self, lr=0.01, weight_decay: float = 0.0, clipnorm: float | None = None,
                 global_clipnorm: float | None = None):
        self.lr = lr
        self.weight_decay = _check("weight_decay", weight_decay)
        self.clipnorm, self.global_clipnorm = _clip_options(clipnorm, global_clipnorm)
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
        return float(self._lr(self.iterations)) if callable(self._lr) else self._lr

    def step(self, params) -> None:
        """Apply one update to every parameter in ``params`` that has a gradient."""
        params = list(params)
        if self._count is None:
            self._count = len(params)
        elif len(params) != self._count:
            raise ValueError(f"{type(self).__name__}.step: got {len(params)} parameters, but this optimizer was "
                             f"used with {self._count}; use one optimizer per parameter list")
        lr = self._advance()
        if self._device_values is not None:  # graph capture: the kernels read this step's values on the device
            lr = self._device_values
        grads = self._clipped_grads(params)
        for index, param in enumerate(params):
            if grads[index] is None:
                continue
            state = self._state.get(index)
            if state is None:
                state = self._state[index] = {name: param.xp.zeros_like(param.data) for name in self.slots}
            self.update(param.xp, param.data, grads[index], state, lr)

    def update(self, xp, p, g, state, lr) -> None:
        raise NotImplementedError

    # -- gradient clipping
    def _clipped_grads(self, params) -> list:
        """The gradients the update uses (None where a parameter has none): as they are, or times
        ``c / max(norm, c)`` for the norm of each (``clipnorm``) or of all together (``global_clipnorm``), Keras'
        ``clip_by_norm`` / ``clip_by_global_norm``. The factor is computed on the backend (``clip_norm_scale``): nothing
        is read back."""
        grads = [param.grad if getattr(param, "trainable", True) else None for param in params]
        if self.clipnorm is None and self.global_clipnorm is None:
            return grads
        present = [(i, p.xp, g) for i, (p, g) in enumerate(zip(params, grads)) if g is not None]
        if self.global_clipnorm is not None and present:
            xp = present[0][1]
            scale = xp.clip_norm_scale([g for _, _, g in present], self.global_clipnorm)
            for i, xp, g in present:
                grads[i] = xp.multiply(g, scale)
        elif self.clipnorm is not None:
            for i, xp, g in present:
                grads[i] = xp.multiply(g, xp.clip_norm_scale([g], self.clipnorm))
        return grads

    # -- device-resident step values (graph replay, magmadnn.models.graphed)
    _device_values = None  # a float64 backend vector holding step_values() while a step is captured, else None

    def _advance(self) -> float:
        """Check the learning rate of the next step, count the step and return the rate."""
        lr = self.learning_rate
        if not (math.isfinite(lr) and lr >= 0):
            raise ValueError(f"{type(self).__name__}.step: the learning rate at step {self.iterations} is {lr!r}; "
                             "it must be a finite number >= 0 (check the schedule)")
        self.iterations += 1
        return lr

    def step_values(self, lr: float) -> tuple[float, ...]:
        """What the update kernels read from device memory in a replayed step (after :meth:`_advance`):
        ``(lr,)``; Adam adds its bias corrections."""
        return (lr,)

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
        for name in ("clipnorm", "global_clipnorm"):  # only when set, so older configs read the same
            if getattr(self, name) is not None:
                config[name] = getattr(self, name)
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


# ------------------------------------------------------------------------------------- gradient clipping
def _clip_options(clipnorm, global_clipnorm) -> tuple[float | None, float | None]:
    """Keras' clipping options: each None or a finite number > 0, not both."""
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError("optimizer: pass clipnorm (per tensor) or global_clipnorm (over all), not both")
    return tuple(None if v is None else _check(name, v, open_low=True)
                 for name, v in (("clipnorm", clipnorm), ("global_clipnorm", global_clipnorm)))


class SGD(Optimizer):
    def __init__(self, lr=0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.momentum = _check("momentum", momentum, 0.0, 1.0)
        if nesterov and not self.momentum:
            raise ValueError("SGD: nesterov=True needs a momentum > 0")
        self.nesterov = bool(nesterov)
        self.slots = ("velocity",) if self.momentum else ()

    def update(self, xp, p, g, state, lr):
        xp.sgd_update(p, g, state.get("velocity"), lr, momentum=self.momentum, nesterov=self.nesterov,
                      weight_decay=self.weight_decay)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class AdaGrad(Optimizer):
    slots = ("accumulator",)

    def __init__(self, lr=0.01, eps: float = 1e-7, weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.eps = _check("eps", eps, open_low=True)

    def update(self, xp, p, g, state, lr):
        xp.adagrad_update(p, g, state["accumulator"], lr, eps=self.eps, weight_decay=self.weight_decay)

    def get_config(self):
        return {**super().get_config(), "eps": self.eps}


class RMSProp(Optimizer):
    slots = ("mean_square",)

    def __init__(self, lr=0.001, rho: float = 0.9, eps: float = 1e-7, weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.rho = _check("rho", rho, 0.0, 1.0)
        self.eps = _check("eps", eps, open_low=True)

    def update(self, xp, p, g, state, lr):
        xp.rmsprop_update(p, g, state["mean_square"], lr, rho=self.rho, eps=self.eps, weight_decay=self.weight_decay)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "eps": self.eps}


class Adam(Optimizer):
    slots = ("m", "v")
    decoupled = False

    def __init__(self, lr=0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0, **clip):
        super().__init__(lr, weight_decay, **clip)
        self.beta1 = _check("beta1", beta1, 0.0, 1.0)
        self.beta2 = _check("beta2", beta2, 0.0, 1.0)
        self.eps = _check("eps", eps, open_low=True)

    def step_values(self, lr):
        t = self.iterations
        return lr, 1.0 - self.beta1 ** t, 1.0 - self.beta2 ** t  # as pymagma.kernels.adam_update computes them

    def update(self, xp, p, g, state, lr):
        xp.adam_update(p, g, state["m"], state["v"], self.iterations, lr, beta1=self.beta1, beta2=self.beta2,
                       eps=self.eps, weight_decay=self.weight_decay, decoupled=self.decoupled)

    def get_config(self):
        return {**super().get_config(), "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps}


class AdamW(Adam):
    decoupled = True

    def __init__(self, lr=0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.01, **clip):
        super().__init__(lr, beta1, beta2, eps, weight_decay, **clip)


_BY_NAME = {"sgd": SGD, "adagrad": AdaGrad, "rmsprop": RMSProp, "adam": Adam, "adamw": AdamW}


def get(identifier) -> Optimizer:
    """An Optimizer from a name ("sgd", "adam", ...), an instance, or a ``{"class_name", "config"}`` dict."""
    return resolve(identifier, Optimizer, _BY_NAME, "optimizer")
