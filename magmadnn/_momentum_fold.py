"""SGD's momentum folded into a dense layer's weight-gradient GEMM, on the host (PyTorch's and Keras' rule
unchanged: ``v = momentum v + g``, ``p -= lr v``).

A training step's backward computes each dense weight's gradient ``g = x.T @ dy`` into a new array, and SGD's update
then reads g, v and p and writes v and p again, on one core. Folded, the GEMM writes ``momentum v + x.T @ dy``
straight into the velocity (BLAS's ``beta``: rounded as ``v *= momentum; v += g``, the product summed as NumPy's GEMM
sums it, on the GEMM's threads) and the update is one ``axpy``, ``p += -lr v`` (one rounding per element, as
PyTorch's CPU update rounds it; NumPy's path rounds ``lr v`` first).

The fold is armed for one backward only, the one fit's built-in training step runs in one process (never by a
subclass's ``train_step``, ``autograd.grad`` or a data-parallel step, whose gradients may be read or skipped), and
only for the parameters of the previous step that an SGD with momentum and nothing else (no Nesterov, weight decay,
clipping or rule of a subclass) updated on the host through its multi-tensor path (``_foreach``), with 2-D float
weights and velocities the BLAS calls take. A gradient computed by any other backward (``autograd.grad``, a custom
loop) is never folded. A weight the step's backward reaches several times gets the first dense gradient
folded and the others summed onto it by the tape (``momentum v + g1 + g2``: :func:`step` puts that sum back into
the velocity); a gradient replaced before the step is put back likewise, and a velocity replaced between steps (a
loaded optimizer state, ``Model.to``) ends the plan before the next backward. Without NumPy's OpenBLAS
(:mod:`.backend.host._blas`) nothing is armed and SGD runs as before.
"""

from __future__ import annotations

import weakref

import numpy as np

from .backend.host import _blas

__all__ = ["Sink", "arm", "step"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class Sink:
    """Where a dense layer's backward folds its weight gradient: the parameter's velocity and the momentum."""

    __slots__ = ("velocity", "momentum", "folded")

    def __init__(self, velocity, momentum):
        self.velocity, self.momentum, self.folded = velocity, momentum, False

    def fold(self, x, dy):
        """``velocity = momentum velocity + x.T @ dy`` in place, returned as the weight's gradient; None (nothing
        written) where it folded already in this backward or BLAS does not take these arrays."""
        if self.folded or not _blas.gemm_tn_into(x, dy, self.velocity, self.momentum):
            return None
        self.folded = True
        return self.velocity


class _Plan:
    __slots__ = ("pairs", "momentum", "armed", "slots")

    def __init__(self, pairs, momentum, slots):
        self.pairs, self.momentum, self.armed = pairs, momentum, False
        self.slots = slots  # each pair's index among the optimizer's slot arrays (``slot_arrays``)


#: id(optimizer) -> the _Plan its last step made for the next training step (nothing kept on the optimizer itself;
#: an optimizer's entry goes with it)
_PLANS: dict[int, _Plan] = {}


def arm(opt, loss):
    """The built-in training step, before its backward: each planned weight's Sink on the parameter
    (``_grad_sink``, fresh); ``loss`` returned."""
    plan = _PLANS.get(id(opt)) if _PLANS else None
    if plan is None:
        return loss
    if not _eligible(opt) or plan.momentum != opt.momentum or not _velocities_kept(opt, plan):  # changed since
        del _PLANS[id(opt)]  # the plan: SGD's usual update (this step makes a new plan)
        return loss
    for param, sink in plan.pairs:
        sink.folded = False
        if getattr(param, "trainable", True):  # (frozen since: its gradient, if any, is not applied)
            param._grad_sink = sink
    plan.armed = True
    return loss


def _velocities_kept(opt, plan) -> bool:
    """Whether each planned velocity is still the optimizer's (none replaced since the plan: a loaded state)."""
    state = opt.slot_arrays
    for (_, sink), index in zip(plan.pairs, plan.slots):
        slots = state.get(index)
        if slots is None or slots.get("velocity") is not sink.velocity:
            return False
    return True


def _eligible(opt) -> bool:
    return not (opt.nesterov or opt.weight_decay or opt._device_values is not None or opt.clipnorm is not None
                or opt.global_clipnorm is not None or opt.clipvalue is not None)


def step(opt, params, ps, gs, vs, lr):
    """SGD's multi-tensor step (``_foreach``, momentum on; ``params`` the Parameters of ``ps``): the weights folded
    in this step's backward finished (``p += -lr v``; a folded weight whose gradient is not its velocity, more
    gradients summed onto it or replaced, has that gradient put into the velocity first), the next step's fold
    planned; ``(ps, gs, vs)`` of the others returned, for the usual update."""
    plan = _PLANS.get(id(opt)) if _PLANS else None
    done = None
    if plan is not None and plan.armed:
        plan.armed = False
        done = {}
        for param, sink in plan.pairs:
            param.__dict__.pop("_grad_sink", None)
            if sink.folded:
                done[id(param)] = sink
    rest = range(len(ps))
    if done:
        rest = []
        for i, (param, grad) in enumerate(zip(params, gs)):
            sink = done.get(id(param))
            if sink is None or grad is None:
                rest.append(i)
                continue
            v, p = sink.velocity, ps[i]
            if grad is not v:
                np.copyto(v, grad)
            if not _blas.axpy(-lr, v, p):  # p not contiguous (a constraint's result): NumPy's two roundings
                p -= p.dtype.type(lr) * v
    _plan(opt, params, vs)
    if done:
        ps, gs, vs = [ps[i] for i in rest], [gs[i] for i in rest], [vs[i] for i in rest]
    return ps, gs, vs


def _plan(opt, params, vs) -> None:
    """The ``(parameter, Sink)`` pairs the next training step may fold (see the module), or none; the last step's
    kept when they are the same."""
    key = id(opt)
    old = _PLANS.get(key)
    if not _eligible(opt) or not _blas.available():
        if old is not None:
            del _PLANS[key]
        return
    momentum = opt.momentum
    pairs = []
    for param, v in zip(params, vs):
        p = param.data
        if (type(p) is np.ndarray and type(v) is np.ndarray and p.ndim == 2 and p.dtype in _FLOATS
                and v.dtype == p.dtype and v.shape == p.shape and v.flags.c_contiguous and v.flags.writeable
                and param.xp.name == "host" and getattr(param, "trainable", True)):
            pairs.append((param, v))
    if old is not None and len(old.pairs) == len(pairs):
        for (was, sink), (param, v) in zip(old.pairs, pairs):
            if was is not param or sink.velocity is not v or old.momentum != momentum:
                break
        else:
            return
    if not pairs:
        if old is not None:
            del _PLANS[key]
        return
    where = {id(slots.get("velocity")): index for index, slots in opt.slot_arrays.items()}
    if any(id(v) not in where for _, v in pairs):  # (a velocity the optimizer does not hold: nothing to keep)
        if old is not None:
            del _PLANS[key]
        return
    if old is None:
        weakref.finalize(opt, _PLANS.pop, key, None)
    _PLANS[key] = _Plan([(param, Sink(v, v.dtype.type(momentum))) for param, v in pairs], momentum,
                        [where[id(v)] for _, v in pairs])
