"""Layer call plans: what a layer's call decided for one input signature, replayed by the next call with it.

A layer's call checks its input, works out its casts, its op and that op's arguments; on a repeated call with the
same input signature (shape, dtype, training flag) all of that comes out the same. A magmadnn layer that defines
``_plan_call(x, training)`` returns, after its first full call with a signature, a function ``run(layer, x)`` that
does only what differs per call: reading its weights and running its op (the autograd node, the backend op and its
native call, which keep their own per-call checks of the operands); a call on a list of two inputs (``Add``) is
planned as ``run(a, b)``, the op itself where it can be. :meth:`MaskingMixin.call_masked` keeps the plans
per layer and replays them.

What a plan decided is dropped when it may no longer hold: a public attribute of the layer set (the layer built
or rebuilt, its dtype, a Dropout ``rate``, a momentum, ``trainable``: :meth:`Layer.__setattr__`), any ``trainable``
flag changed (:func:`magmadnn.autograd.trainable_changes`), the layer's dtype policy changed. A plan reads the
weights at each call; one that finds a weight of another shape or dtype than it planned for runs the layer's full
call instead (which refuses it as it always did). A plan is made only where the call involves no mixed-precision
cast, no activity regularizer, no mask and no subclass of the layer defined outside magmadnn (whose ``call`` the
plan would skip); everything else runs the full call each time, as before.
"""

from __future__ import annotations

from .. import autograd as _autograd
from ..autograd import Tensor
from .mixed import _is_float

__all__ = ["LIMIT", "first_call", "op_plan", "pair_plan", "plannable", "stamp"]

LIMIT = 64  #: input signatures planned per layer (a layer called on ever new shapes plans no more)


def stamp() -> int:
    """What a layer's plans hold for, besides its own attributes: the count of ``trainable`` changes."""
    return _autograd._trainable_changes


def plannable(cls) -> bool:
    """Whether calls of layer class ``cls`` are planned: a class of magmadnn's whose ``_plan_call`` is defined where
    its ``call`` is, or below it."""
    if not cls.__module__.startswith("magmadnn."):
        return False
    plan_owner = next((k for k in cls.__mro__ if "_plan_call" in k.__dict__), None)
    call_owner = next((k for k in cls.__mro__ if "call" in k.__dict__), None)
    return plan_owner is not None and call_owner is not None and plan_owner.__name__ != "Layer" and \
        issubclass(plan_owner, call_owner)


def first_call(layer, x, training: bool, key: tuple):
    """A call with a signature the layer has no plan for (or with plans gone stale): the full call, then its plan."""
    now = stamp()
    if layer._plans_at != now:
        layer._plans, layer._plans_at = {}, now
    out = layer._run(x, training)
    plans = layer._plans
    if len(plans) < LIMIT:
        dtype = layer.dtype
        casts = dtype is not None and dtype.kind == "f" and any(
            t.data.dtype != dtype and _is_float(t.data.dtype) for t in (x if x.__class__ is list else [x]))
        plans[key] = None if (casts or layer._compute is not None or layer._activity is not None) else \
            layer._plan_call(x, training)
    return out


def op_plan(layer, training: bool, apply, names=(), params=None, after=None):
    """The plan ``run(layer, x)``: ``after(apply(x, *weights, **params))`` (``after`` None: the op's output), the
    weights the layer's parameters ``names`` read at each call. A weight found of another shape or dtype than now
    sends that call through the layer's full call. Where ``apply`` is a Function class's own ``Function.apply`` and
    ``x`` a Tensor, the plan runs ``apply``'s body inline (no frame of its own: every planned layer call passes
    here), the same Function, output and record."""
    params = {} if params is None else params
    p = layer._params
    cls = apply.__self__ if getattr(apply, "__func__", None) is _APPLY else None
    if len(names) == 0:
        if cls is None:
            def run(layer, x):
                y = apply(x, **params)
                return y if after is None else after(y)
            return run

        def run(layer, x):
            if x.__class__ is not Tensor:
                y = apply(x, **params)
                return y if after is None else after(y)
            xp = x.xp  # Function.apply(x, **params), inline
            fn = cls()
            fn.xp = xp
            data = fn.forward(x.data, **params)
            last = _autograd._LAST_OWN
            if last[1] is not data.__class__ or last[0] is not xp:
                data = _own_array(xp, data)
            y = _new(Tensor)
            y.xp, y.data, y.grad = xp, data, None
            if x.requires_grad and _state.enabled:
                fn.inputs, fn.needs_input_grad = (x,), (x.requires_grad,)
                y.requires_grad, y._fn = True, fn
            else:
                y.requires_grad, y._fn = False, None
            return y if after is None else after(y)
    elif len(names) == 1:
        (n0,) = names
        s0, d0 = p[n0].data.shape, p[n0].data.dtype

        def run(layer, x):
            w0 = layer._params[n0]
            a0 = w0.data
            if a0.shape != s0 or (a0.dtype is not d0 and a0.dtype != d0):  # (a dtype compared by identity first)
                return layer._run(x, training)
            if cls is None or x.__class__ is not Tensor or not isinstance(w0, Tensor):
                y = apply(x, w0, **params)
                return y if after is None else after(y)
            xp = x.xp  # Function.apply(x, w0, **params), inline
            fn = cls()
            fn.xp = xp
            data = fn.forward(x.data, a0, **params)
            last = _autograd._LAST_OWN
            if last[1] is not data.__class__ or last[0] is not xp:
                data = _own_array(xp, data)
            y = _new(Tensor)
            y.xp, y.data, y.grad = xp, data, None
            if (x.requires_grad or w0.requires_grad) and _state.enabled:
                fn.inputs, fn.needs_input_grad = (x, w0), (x.requires_grad, w0.requires_grad)
                y.requires_grad, y._fn = True, fn
            else:
                y.requires_grad, y._fn = False, None
            return y if after is None else after(y)
    elif len(names) == 2:
        n0, n1 = names
        s0, d0, s1, d1 = p[n0].data.shape, p[n0].data.dtype, p[n1].data.shape, p[n1].data.dtype

        def run(layer, x):
            ws = layer._params
            w0, w1 = ws[n0], ws[n1]
            a0, a1 = w0.data, w1.data
            if a0.shape != s0 or a1.shape != s1 or (a0.dtype is not d0 and a0.dtype != d0) or \
                    (a1.dtype is not d1 and a1.dtype != d1):
                return layer._run(x, training)
            if cls is None or x.__class__ is not Tensor or not (isinstance(w0, Tensor) and isinstance(w1, Tensor)):
                y = apply(x, w0, w1, **params)
                return y if after is None else after(y)
            xp = x.xp  # Function.apply(x, w0, w1, **params), inline
            fn = cls()
            fn.xp = xp
            data = fn.forward(x.data, a0, a1, **params)
            last = _autograd._LAST_OWN
            if last[1] is not data.__class__ or last[0] is not xp:
                data = _own_array(xp, data)
            y = _new(Tensor)
            y.xp, y.data, y.grad = xp, data, None
            if (x.requires_grad or w0.requires_grad or w1.requires_grad) and _state.enabled:
                fn.inputs = (x, w0, w1)
                fn.needs_input_grad = (x.requires_grad, w0.requires_grad, w1.requires_grad)
                y.requires_grad, y._fn = True, fn
            else:
                y.requires_grad, y._fn = False, None
            return y if after is None else after(y)
    else:
        return None
    return run


def pair_plan(apply, params=None):
    """The plan ``run(a, b)`` of a call on two inputs (a residual ``Add``): ``apply(a, b, **params)``, with
    ``Function.apply``'s body inline (no frame of its own) where ``apply`` is a Function class's own and both inputs
    are Tensors: the same Function, output and record."""
    params = {} if params is None else params
    cls = apply.__self__ if getattr(apply, "__func__", None) is _APPLY else None

    def run(a, b):
        if cls is None or a.__class__ is not Tensor or b.__class__ is not Tensor:
            return apply(a, b, **params)
        xp = a.xp  # Function.apply(a, b, **params), inline
        fn = cls()
        fn.xp = xp
        data = fn.forward(a.data, b.data, **params)
        last = _autograd._LAST_OWN
        if last[1] is not data.__class__ or last[0] is not xp:
            data = _own_array(xp, data)
        y = _new(Tensor)
        y.xp, y.data, y.grad = xp, data, None
        if (a.requires_grad or b.requires_grad) and _state.enabled:
            fn.inputs, fn.needs_input_grad = (a, b), (a.requires_grad, b.requires_grad)
            y.requires_grad, y._fn = True, fn
        else:
            y.requires_grad, y._fn = False, None
        return y
    return run


_APPLY = _autograd.Function.apply.__func__  # (a Function class's own apply: run inline by a plan)
_own_array, _state, _new = _autograd._own_array, _autograd._state, object.__new__
