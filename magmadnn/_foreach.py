"""The optimizers' multi-tensor path (PyTorch's ``foreach``): every parameter of a step updated by one backend op,
``*_update_many`` (one launch per dtype on the device), where the optimizer's rule is one of magmadnn's own.

:func:`update_all` knows a rule by the ``update`` method the optimizer's class uses: a subclass that overrides
``update`` (Keras' RMSprop with momentum, a user's rule) keeps its per-parameter updates."""

from __future__ import annotations

import functools
import itertools
import operator

from . import _configurable, _momentum_fold, constraints
from .autograd import Parameter


def _rule(opt):
    """The multi-tensor form of ``opt``'s rule (None: it has none), known by its class's ``update`` function."""
    update = type(opt).update
    rule = _BY_FUNCTION.get(update, _MISSING)
    if rule is _MISSING:
        rule = _BY_FUNCTION[update] = _RULES.get(f"{update.__module__}.{update.__qualname__}")
    return rule


def _plain_parameters(params) -> bool:
    """Whether every entry of ``params`` is a Parameter itself (its own flag, gradient and constraint read as
    attributes)."""
    return all(map(operator.is_, map(type, params), itertools.repeat(Parameter, len(params))))


def trainable_grads(params) -> list:
    """Each parameter's ``.grad``, None for one whose ``trainable`` is False (a frozen weight); read without a Python
    frame per parameter where all of ``params`` are trainable Parameters (the common case)."""
    if _plain_parameters(params) and all(map(_TRAINABLE, params)):
        return list(map(_GRAD, params))
    return [p.grad if (p._trainable if p.__class__ is Parameter else getattr(p, "trainable", True)) else None
            for p in params]  # (a Parameter's own flag read without its property's frame)


def step_columns(opt, params, grads, made, lr) -> bool:
    """The optimizer step a column at a time, without a Python frame per parameter, where every parameter has a
    gradient in ``grads`` and its slots in ``made`` already (made by the first step) and ``opt``'s rule has a
    multi-tensor op: the update, then the constraints; False (nothing done) otherwise."""
    n = len(params)
    rule = _rule(opt)
    if rule is None or not n or not (all(map(_is_not_none, grads)) and all(map(made.__contains__, range(n)))):
        return False
    xp = params[0].xp
    if not all(map(operator.is_, map(_XP, params), itertools.repeat(xp, n))):
        return False
    rule(opt, xp, list(map(_DATA, params)), grads, list(map(made.__getitem__, range(n))), lr, params)
    if not _plain_parameters(params) or not all(map(_is_none, map(_CONSTRAINT, params))):
        constraints.apply(params, grads)
    return True


class StepPlan:
    """What a full step of an optimizer decided for its configuration, so that a later step runs only what differs
    per step (:func:`planned_step`): its class uses the base class's learning rate, step count and gradient reading,
    no clipping is set and the class's ``update`` has a multi-tensor rule (``rule``). It holds while no public
    configuration attribute was set anywhere (:data:`._configurable.generation`: a hyperparameter, a clipping
    option; a learning rate or schedule set is read each step), for the same class and ``update``, outside a graph
    capture."""

    __slots__ = ("generation", "cls", "update", "rule")

    @classmethod
    def of(cls, opt, base):
        """The plan of ``opt``'s present configuration (``base``: the Optimizer class), or None (not planned)."""
        kind = type(opt)
        if kind._advance is not base._advance or kind.learning_rate is not base.learning_rate or \
                kind._clipped_grads is not base._clipped_grads or opt._device_values is not None or \
                opt.clipnorm is not None or opt.global_clipnorm is not None or opt.clipvalue is not None:
            return None
        rule = _rule(opt)
        if rule is None:
            return None
        plan = cls()
        plan.generation, plan.cls, plan.update, plan.rule = _configurable.generation, kind, kind.update, rule
        return plan


def planned_step(opt, params) -> bool:
    """``opt``'s step of ``params`` (its count checked) under its :class:`StepPlan`, as :func:`step_columns` does
    it, where the plan holds and every entry of ``params`` is a trainable Parameter without a constraint, with a
    gradient and its slots made, all on one backend: the learning rate read (a schedule's checked), the step
    counted, every parameter updated at once, True; False (nothing done, nothing counted) otherwise."""
    plan, n = opt._step_plan, len(params)
    if not (plan.generation == _configurable.generation and plan.cls is opt.__class__
            and plan.update is plan.cls.update and opt._device_values is None and n):
        return False
    if not (all(map(operator.is_, map(type, params), itertools.repeat(Parameter, n)))
            and all(map(_TRAINABLE, params)) and all(map(_is_none, map(_CONSTRAINT, params)))):
        return False
    grads, made = list(map(_GRAD, params)), opt._state
    if not (all(map(_is_not_none, grads)) and all(map(made.__contains__, range(n)))):
        return False
    xp = params[0].xp
    if not all(map(operator.is_, map(_XP, params), itertools.repeat(xp, n))):
        return False
    lr = opt._lr  # the base class's _advance and learning_rate, inline
    if callable(lr):
        lr = opt.learning_rate
    object.__setattr__(opt, "iterations", opt.iterations + 1)
    plan.rule(opt, xp, list(map(_DATA, params)), grads, list(map(made.__getitem__, range(n))), lr, params)
    return True


def update_all(opt, live, lr) -> bool:
    """Update every ``(param, grad, slots)`` of ``live`` at once and return True; False where ``opt``'s rule has no
    multi-tensor op or the parameters live on different backends (the caller then updates them one by one)."""
    rule = _rule(opt)
    if rule is None or not live:
        return False
    xp = live[0][0].xp
    params, grads, slots = [], [], []
    for param, grad, state in live:  # (one loop, no comprehension frames)
        if param.xp is not xp:
            return False
        params.append(param.data)
        grads.append(grad)
        slots.append(state)
    rule(opt, xp, params, grads, slots, lr, [param for param, _, _ in live])
    return True


def _sgd(opt, xp, ps, gs, slots, lr, params):
    vs = list(map(_VELOCITY, slots)) if opt.momentum else None
    if opt.momentum and xp.name == "host":  # the momentum a host training step folded in, finished there
        ps, gs, vs = _momentum_fold.step(opt, params, ps, gs, vs, lr)
    xp.sgd_update_many(ps, gs, vs, lr, momentum=opt.momentum, nesterov=opt.nesterov, weight_decay=opt.weight_decay,
                       keras=True)


def _adam(opt, xp, ps, gs, slots, lr, params):
    xp.adam_update_many(ps, gs, list(map(_M, slots)), list(map(_V, slots)), opt.iterations, lr,
                        beta1=opt.beta1, beta2=opt.beta2, eps=opt.eps, weight_decay=opt.weight_decay,
                        decoupled=opt.decoupled, keras=True)


def _rmsprop(opt, xp, ps, gs, slots, lr, params):
    xp.rmsprop_update_many(ps, gs, list(map(_MEAN_SQUARE, slots)), lr, rho=opt.rho, eps=opt.eps,
                           weight_decay=opt.weight_decay, keras=opt.keras)


def _adagrad(opt, xp, ps, gs, slots, lr, params):
    xp.adagrad_update_many(ps, gs, list(map(_ACCUMULATOR, slots)), lr, eps=opt.eps,
                           weight_decay=opt.weight_decay, keras=opt.keras)


#: ``module.Class.update`` of each rule -> its multi-tensor form (the same arguments as that ``update`` passes, the
#: Parameters last)
_RULES = {"magmadnn.optimizers.SGD.update": _sgd, "magmadnn.optimizers.Adam.update": _adam,
          "magmadnn.optimizers.RMSProp.update": _rmsprop, "magmadnn.optimizers.AdaGrad.update": _adagrad}
_BY_FUNCTION: dict = {}  # an ``update`` function -> its rule (None: none), looked up once
_MISSING = object()
_XP, _DATA = operator.attrgetter("xp"), operator.attrgetter("data")
_VELOCITY, _M, _V = operator.itemgetter("velocity"), operator.itemgetter("m"), operator.itemgetter("v")
_MEAN_SQUARE, _ACCUMULATOR = operator.itemgetter("mean_square"), operator.itemgetter("accumulator")
_GRAD, _TRAINABLE = operator.attrgetter("grad"), operator.attrgetter("_trainable")
_CONSTRAINT = operator.attrgetter("constraint")
_is_none, _is_not_none = functools.partial(operator.is_, None), functools.partial(operator.is_not, None)
