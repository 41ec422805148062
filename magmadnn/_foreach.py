"""The optimizers' multi-tensor path (PyTorch's ``foreach``): every parameter of a step updated by one backend op,
``*_update_many`` (one launch per dtype on the device), where the optimizer's rule is one of magmadnn's own.

:func:`update_all` knows a rule by the ``update`` method the optimizer's class uses: a subclass that overrides
``update`` (Keras' RMSprop with momentum, a user's rule) keeps its per-parameter updates."""

from __future__ import annotations

from . import _momentum_fold


def update_all(opt, live, lr) -> bool:
    """Update every ``(param, grad, slots)`` of ``live`` at once and return True; False where ``opt``'s rule has no
    multi-tensor op or the parameters live on different backends (the caller then updates them one by one)."""
    update = type(opt).update
    rule = _RULES.get(f"{update.__module__}.{update.__qualname__}")
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
    if rule is _sgd:
        _sgd(opt, xp, params, grads, slots, lr, live)
    else:
        rule(opt, xp, params, grads, slots, lr)
    return True


def _sgd(opt, xp, ps, gs, slots, lr, live=None):
    vs = [s["velocity"] for s in slots] if opt.momentum else None
    if live is not None and opt.momentum and xp.name == "host":  # folded momentum finished there (see the module)
        ps, gs, vs = _momentum_fold.step(opt, live, ps, gs, vs, lr)
    xp.sgd_update_many(ps, gs, vs, lr, momentum=opt.momentum, nesterov=opt.nesterov, weight_decay=opt.weight_decay,
                       keras=True)


def _adam(opt, xp, ps, gs, slots, lr):
    xp.adam_update_many(ps, gs, [s["m"] for s in slots], [s["v"] for s in slots], opt.iterations, lr,
                        beta1=opt.beta1, beta2=opt.beta2, eps=opt.eps, weight_decay=opt.weight_decay,
                        decoupled=opt.decoupled, keras=True)


def _rmsprop(opt, xp, ps, gs, slots, lr):
    xp.rmsprop_update_many(ps, gs, [s["mean_square"] for s in slots], lr, rho=opt.rho, eps=opt.eps,
                           weight_decay=opt.weight_decay, keras=opt.keras)


def _adagrad(opt, xp, ps, gs, slots, lr):
    xp.adagrad_update_many(ps, gs, [s["accumulator"] for s in slots], lr, eps=opt.eps,
                           weight_decay=opt.weight_decay, keras=opt.keras)


#: ``module.Class.update`` of each rule -> its multi-tensor form (the same arguments as that ``update`` passes)
_RULES = {"magmadnn.optimizers.SGD.update": _sgd, "magmadnn.optimizers.Adam.update": _adam,
          "magmadnn.optimizers.RMSProp.update": _rmsprop, "magmadnn.optimizers.AdaGrad.update": _adagrad}
