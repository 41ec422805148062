"""Learning-rate schedules: callables ``schedule(t) -> lr`` of an integer counter ``t >= 0``; Keras 3's
(``keras.optimizers.schedules``: the same names, arguments, defaults and formulas) and magmadnn's ``StepDecay``.

Given to an optimizer as its learning rate, ``t`` is the optimizer's step count (updates done so far, Keras'
``optimizer.iterations``); given to the ``LearningRateScheduler`` callback, ``t`` is the epoch index. The formulas:

* ``ExponentialDecay(initial_learning_rate, decay_steps, decay_rate, staircase=False)``:
  ``initial_learning_rate * decay_rate ** (t / decay_steps)`` (the exponent floored with ``staircase``).
* ``InverseTimeDecay(initial_learning_rate, decay_steps, decay_rate, staircase=False)``:
  ``initial_learning_rate / (1 + decay_rate * t / decay_steps)`` (the ratio floored with ``staircase``).
* ``PolynomialDecay(initial_learning_rate, decay_steps, end_learning_rate=1e-4, power=1.0, cycle=False)``:
  ``(initial - end) * (1 - p) ** power + end`` with ``p = min(t, decay_steps) / decay_steps``; with ``cycle`` the
  horizon is the first multiple of ``decay_steps`` at or above ``t``.
* ``PiecewiseConstantDecay(boundaries, values)``: ``values[i]`` for ``boundaries[i-1] < t <= boundaries[i]``.
* ``CosineDecay(initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay", warmup_target=None,
  warmup_steps=0)``: ``lr0 * (alpha + (1 - alpha) * (1 + cos(pi * p)) / 2)``, ``p = min(t, decay_steps) /
  decay_steps``, from ``lr0 = initial_learning_rate``; with ``warmup_target``, a linear warm-up from
  ``initial_learning_rate`` to ``warmup_target`` over ``warmup_steps``, then the decay from ``lr0 = warmup_target``.
  As Keras, ``warmup_steps`` without ``warmup_target`` does nothing (a warning says so). magmadnn's earlier spelling
  ``CosineDecay(initial_lr=, decay_steps, alpha, warmup_steps)`` warmed up from 0 to ``initial_lr`` and still does.
* ``StepDecay(initial_lr, step_size, gamma=0.1)``: ``initial_lr * gamma ** (t // step_size)``.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings

from . import _checks

__all__ = ["Schedule", "LearningRateSchedule", "Constant", "StepDecay", "CosineDecay", "ExponentialDecay",
           "InverseTimeDecay", "PolynomialDecay", "PiecewiseConstantDecay", "get", "checked_rate", "epoch_rate"]


def _check_positive(name: str, value, integer: bool = False, who: str = "schedule"):
    """A finite ``value > 0`` (an int, NumPy integers included, with ``integer``)."""
    if integer:
        return _checks.integer(value, name, who, minimum=1)
    return _checks.real(value, name, who, low=0.0, open_low=True)


def _rate(name: str, value, who: str) -> float:
    """A finite learning rate >= 0."""
    return float(_checks.real(value, name, who, low=0.0))


def _name(name, who: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{who}: name must be a string, got {name!r}")
    return name


class Schedule:
    """Base class of learning-rate schedules (Keras' ``LearningRateSchedule``): ``__call__(step)``, ``get_config``."""

    def __call__(self, t: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return dict(vars(self))

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


LearningRateSchedule = Schedule


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
    """Keras 3's ``CosineDecay`` (module docstring); ``initial_lr=`` is magmadnn's earlier spelling."""

    def __init__(self, initial_learning_rate=None, decay_steps=None, alpha: float = 0.0, name="CosineDecay",
                 warmup_target=None, warmup_steps: int = 0, *, initial_lr=None):
        who = "CosineDecay"
        if isinstance(name, numbers.Integral) and not isinstance(name, bool):  # CosineDecay(lr, steps, alpha, warmup)
            warmup_steps, name, initial_lr, initial_learning_rate = name, "CosineDecay", initial_learning_rate, None
        if initial_lr is not None:  # the earlier spelling: a warm-up from 0 to initial_lr
            if initial_learning_rate is not None:
                raise TypeError(f"{who}: pass initial_learning_rate (Keras' name) or initial_lr, not both")
            if warmup_target is not None:
                raise TypeError(f"{who}: warmup_target goes with initial_learning_rate=, not initial_lr=")
            peak = _check_positive("initial_lr", initial_lr, who=who)
            initial_learning_rate, warmup_target = (0.0, peak) if warmup_steps else (peak, None)
        if initial_learning_rate is None or decay_steps is None:
            raise TypeError(f"{who}: initial_learning_rate and decay_steps are required")
        self.initial_learning_rate = _rate("initial_learning_rate", initial_learning_rate, who)
        self.decay_steps = _check_positive("decay_steps", decay_steps, integer=True, who=who)
        self.alpha = float(_checks.real(alpha, "alpha", who, 0.0, 1.0))
        self.name = _name(name, who)
        self.warmup_target = None if warmup_target is None else _rate("warmup_target", warmup_target, who)
        self.warmup_steps = _checks.integer(warmup_steps, "warmup_steps", who, minimum=0)
        if self.warmup_steps and self.warmup_target is None:
            warnings.warn(f"{who}: warmup_steps={self.warmup_steps} without warmup_target does nothing (as in Keras); "
                          f"to warm up from 0 to lr pass CosineDecay(initial_learning_rate=0.0, warmup_target=lr, "
                          f"warmup_steps={self.warmup_steps}, ...)", UserWarning, stacklevel=2)

    @property
    def initial_lr(self) -> float:
        """The rate the decay starts from (the earlier name)."""
        return self.initial_learning_rate if self.warmup_target is None else self.warmup_target

    def _decay(self, t: float, peak: float) -> float:
        cosine = 0.5 * (1.0 + math.cos(math.pi * t / self.decay_steps))
        return peak * (self.alpha + (1.0 - self.alpha) * cosine)

    def __call__(self, t: int) -> float:
        t = int(t)
        if self.warmup_target is None:
            return self._decay(min(t, self.decay_steps), self.initial_learning_rate)
        t = min(t, self.decay_steps + self.warmup_steps)
        if t < self.warmup_steps:
            fraction = t / self.warmup_steps
            return (self.warmup_target - self.initial_learning_rate) * fraction + self.initial_learning_rate
        return self._decay(t - self.warmup_steps, self.warmup_target)


class _Decay(Schedule):
    """``initial_learning_rate`` decayed over ``decay_steps`` by ``decay_rate`` (optionally in whole steps)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase: bool = False, name=None):
        who = type(self).__name__
        self.initial_learning_rate = _rate("initial_learning_rate", initial_learning_rate, who)
        self.decay_steps = _check_positive("decay_steps", decay_steps, who=who)
        self.decay_rate = float(_checks.real(decay_rate, "decay_rate", who, low=0.0))
        self.staircase = _bool(staircase, "staircase", who)
        self.name = _name(who if name is None else name, who)

    def _progress(self, t) -> float:
        p = int(t) / self.decay_steps
        return math.floor(p) if self.staircase else p


def _bool(value, what: str, who: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {what} must be True or False, got {value!r}")
    return value


class ExponentialDecay(_Decay):
    """Keras 3's ``ExponentialDecay``: ``initial_learning_rate * decay_rate ** (step / decay_steps)``."""

    def __call__(self, t: int) -> float:
        return self.initial_learning_rate * self.decay_rate ** self._progress(t)


class InverseTimeDecay(_Decay):
    """Keras 3's ``InverseTimeDecay``: ``initial_learning_rate / (1 + decay_rate * step / decay_steps)``."""

    def __call__(self, t: int) -> float:
        return self.initial_learning_rate / (1.0 + self.decay_rate * self._progress(t))


class PolynomialDecay(Schedule):
    """Keras 3's ``PolynomialDecay`` (module docstring)."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                 name="PolynomialDecay"):
        who = "PolynomialDecay"
        self.initial_learning_rate = _rate("initial_learning_rate", initial_learning_rate, who)
        self.decay_steps = _check_positive("decay_steps", decay_steps, who=who)
        self.end_learning_rate = _rate("end_learning_rate", end_learning_rate, who)
        self.power = float(_checks.real(power, "power", who))
        self.cycle = _bool(cycle, "cycle", who)
        self.name = _name(name, who)

    def __call__(self, t: int) -> float:
        t, horizon = int(t), self.decay_steps
        if self.cycle:
            horizon = self.decay_steps * (1.0 if t == 0 else math.ceil(t / self.decay_steps))
        else:
            t = min(t, self.decay_steps)
        p = t / horizon
        return (self.initial_learning_rate - self.end_learning_rate) * (1.0 - p) ** self.power + \
            self.end_learning_rate


class PiecewiseConstantDecay(Schedule):
    """Keras 3's ``PiecewiseConstantDecay``: ``values[0]`` up to ``boundaries[0]`` (included), ``values[i]`` on
    ``(boundaries[i-1], boundaries[i]]``, ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        who = "PiecewiseConstantDecay"
        try:
            boundaries, values = list(boundaries), list(values)
        except TypeError:
            raise TypeError(f"{who}: boundaries and values must be lists of numbers") from None
        if len(boundaries) != len(values) - 1:
            raise ValueError(f"{who}: boundaries must be one shorter than values, got {len(boundaries)} boundaries "
                             f"and {len(values)} values")
        self.boundaries = [_checks.real(b, "boundaries", who) for b in boundaries]
        if any(b >= c for b, c in zip(self.boundaries, self.boundaries[1:])):
            raise ValueError(f"{who}: boundaries must increase, got {self.boundaries}")
        self.values = [_rate("values", v, who) for v in values]
        self.name = _name(name, who)

    def __call__(self, t: int) -> float:
        for boundary, value in zip(self.boundaries, self.values):
            if t <= boundary:
                return value
        return self.values[-1]


_BY_CLASS = {cls.__name__: cls for cls in (Constant, StepDecay, CosineDecay, ExponentialDecay, InverseTimeDecay,
                                           PolynomialDecay, PiecewiseConstantDecay)}


def get(lr):
    """A number >= 0 stays a float; a Schedule or a ``{"class_name", "config"}`` dict (Keras' serialized form
    too) becomes a Schedule; another callable is kept."""
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
