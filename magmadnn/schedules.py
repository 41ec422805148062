"""Learning-rate schedules: callables ``schedule(t) -> lr`` of an integer counter ``t >= 0``.

Given to an optimizer as ``lr``, ``t`` is the optimizer's step count (updates done so far); given to the
``LearningRateScheduler`` callback, ``t`` is the epoch index. The formulas:

* ``StepDecay(initial_lr, step_size, gamma=0.1)``: ``initial_lr * gamma ** (t // step_size)``.
* ``CosineDecay(initial_lr, decay_steps, alpha=0.0, warmup_steps=0)``: linear warm-up from 0 over
  ``warmup_steps``, then ``initial_lr * (alpha + (1 - alpha) * (1 + cos(pi * p)) / 2)`` with
  ``p = min(t - warmup_steps, decay_steps) / decay_steps``; it stays at ``alpha * initial_lr`` afterwards.
"""

from __future__ import annotations

import inspect
import math
import numbers

from . import _checks

__all__ = ["Schedule", "Constant", "StepDecay", "CosineDecay", "get", "checked_rate", "epoch_rate"]


def _check_positive(name: str, value, integer: bool = False, who: str = "schedule"):
    """A finite ``value > 0`` (an int, NumPy integers included, with ``integer``)."""
    if integer:
        return _checks.integer(value, name, who, minimum=1)
    return _checks.real(value, name, who, low=0.0, open_low=True)


class Schedule:
    """Base class of learning-rate schedules."""

    def __call__(self, t: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return dict(vars(self))

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Constant(Schedule):
    def __init__(self, lr: float):
        self.lr = float(_check_positive("lr", lr, who="Constant"))

    def __call__(self, t: int) -> float:
        return self.lr


class StepDecay(Schedule):
    def __init__(self, initial_lr: float, step_size: int, gamma: float = 0.1):
        self.initial_lr = float(_check_positive("initial_lr", initial_lr, who="StepDecay"))
        self.step_size = _check_positive("step_size", step_size, integer=True, who="StepDecay")
        self.gamma = float(_check_positive("gamma", gamma, who="StepDecay"))

    def __call__(self, t: int) -> float:
        return self.initial_lr * self.gamma ** (int(t) // self.step_size)


class CosineDecay(Schedule):
    def __init__(self, initial_lr: float, decay_steps: int, alpha: float = 0.0, warmup_steps: int = 0):
        self.initial_lr = float(_check_positive("initial_lr", initial_lr, who="CosineDecay"))
        self.decay_steps = _check_positive("decay_steps", decay_steps, integer=True, who="CosineDecay")
        self.alpha = _checks.real(alpha, "alpha", "CosineDecay", 0.0, 1.0)
        self.warmup_steps = _checks.integer(warmup_steps, "warmup_steps", "CosineDecay", minimum=0)

    def __call__(self, t: int) -> float:
        t = int(t)
        if t < self.warmup_steps:
            return self.initial_lr * t / self.warmup_steps
        progress = min(t - self.warmup_steps, self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.initial_lr * (self.alpha + (1.0 - self.alpha) * cosine)


_BY_CLASS = {cls.__name__: cls for cls in (Constant, StepDecay, CosineDecay)}


def get(lr):
    """A number >= 0 stays a float; a Schedule or a ``{"class_name", "config"}`` dict becomes a Schedule."""
    if isinstance(lr, Schedule):
        return lr
    if isinstance(lr, dict) and lr.get("class_name") in _BY_CLASS:
        return _BY_CLASS[lr["class_name"]](**lr.get("config", {}))
    if isinstance(lr, numbers.Real) and not isinstance(lr, bool):
        if not (math.isfinite(lr) and lr >= 0):
            raise ValueError(f"learning rate lr must be a finite number >= 0, got {lr!r}")
        return float(lr)
    if callable(lr):
        return lr
    raise TypeError(f"learning rate must be a positive number or a Schedule, got {lr!r}")


def _named(schedule) -> str:
    name = getattr(schedule, "__name__", None)
    code = getattr(schedule, "__code__", None)
    if name == "<lambda>" and code is not None:
        return f"<lambda> (line {code.co_firstlineno} of {code.co_filename.rsplit('/', 1)[-1]})"
    return repr(name) if name else repr(schedule)


def checked_rate(value, schedule, where: str, who: str) -> float:
    """The learning rate ``value`` a ``schedule`` returned ``where`` ("at epoch 3", "at step 10"), as a float: a
    number, finite and >= 0 (as Keras, a non-number is a ValueError naming the schedule and where; was a bare
    ``float()`` error). A float passes at the cost of one type test."""
    if value.__class__ is not float:
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real):
            shape = getattr(value, "shape", None)
            if shape == () and getattr(value, "dtype", None) is not None and value.dtype.kind in "iuf":
                value = float(value)  # a 0-d NumPy array: its one number
            else:
                raise ValueError(f"{who}: the schedule {_named(schedule)} returned {value!r} "
                                 f"({type(value).__name__}) {where}; it must return the learning rate as a float")
        value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{who}: the learning rate {where} is {value!r}, returned by the schedule "
                         f"{_named(schedule)}; it must be a finite number >= 0")
    return value


def _takes_two(schedule) -> bool | None:
    """Whether ``schedule`` takes ``(epoch, lr)`` (True) or ``(epoch)`` (False); None when its signature cannot be
    read (a builtin)."""
    try:
        params = list(inspect.signature(schedule).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]) >= 2


def epoch_rate(schedule, epoch: int, current: float) -> float:
    """``LearningRateScheduler``'s rate for ``epoch``: ``schedule(epoch, lr)`` or ``schedule(epoch)`` as its
    signature says (a TypeError raised inside it stays its own; without a readable signature, Keras' way: a
    TypeError means the one-argument form), checked by :func:`checked_rate`."""
    takes_lr = _takes_two(schedule)
    if takes_lr is None:
        try:
            value = schedule(epoch, current)
        except TypeError:
            value = schedule(epoch)
    else:
        value = schedule(epoch, current) if takes_lr else schedule(epoch)
    return checked_rate(value, schedule, f"at epoch {epoch} (0-based)", "LearningRateScheduler")
