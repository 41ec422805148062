"""In-place optimizer updates and gradient clipping; Adam's bias corrections written once
(:func:`adam_bias_corrections`)."""

from __future__ import annotations

from ._spec import op


def adam_bias_corrections(beta1: float, beta2: float, step) -> tuple[float, float]:
    """Adam's bias corrections ``(bc1, bc2) = (1 - beta1^step, 1 - beta2^step)`` for ``step`` counted from 1: the one
    definition the backends' ``adam_update`` and the optimizers' staged values (``Adam.step_values``) use."""
    return 1.0 - beta1**step, 1.0 - beta2**step


@op
def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p; v = momentum v + g'; p -= lr (g' + momentum v if nesterov else v). ``keras``
    (Keras 3's rule, in every update op): the weight decay is decoupled, p -= lr wd p first, and g' = g."""


@op
def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled``: AdamW, p *= 1 - lr wd first); bias-corrected, ``step`` counts from 1;
    p -= lr/bc1 m / (sqrt(v/bc2) + eps), or with ``keras`` p -= lr sqrt(bc2)/bc1 m / (sqrt(v) + eps). ``lr`` may be
    a float64 vector of this backend holding {lr, bc1, bc2} (``step`` then unused): values computed or staged where
    the arrays live (graph replay, loss scaling)."""


@op
def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s = rho s + (1-rho) g^2; p -= lr g / (sqrt(s) + eps), or with ``keras`` lr g / sqrt(s + eps)
    after the decoupled decay."""


@op
def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s += g^2; p -= lr g / (sqrt(s) + eps), or with ``keras`` lr g / sqrt(s + eps) after the
    decoupled decay."""


@op
def sgd_update_many(ps, gs, vs, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """:func:`sgd_update` of every ``(ps[i], gs[i], vs[i])`` (lists of one length; ``vs`` may be None without
    momentum), element for element the same arithmetic; the device does it in one launch per dtype (PyTorch's
    foreach optimizers). ``lr`` as in :func:`adam_update` (a float64 vector {lr} of this backend)."""


@op
def adam_update_many(ps, gs, ms, vs, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                     keras=False):
    """:func:`adam_update` of every ``(ps[i], gs[i], ms[i], vs[i])``, one launch per dtype on the device."""


@op
def rmsprop_update_many(ps, gs, ss, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """:func:`rmsprop_update` of every ``(ps[i], gs[i], ss[i])``, one launch per dtype on the device."""


@op
def adagrad_update_many(ps, gs, ss, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """:func:`adagrad_update` of every ``(ps[i], gs[i], ss[i])``, one launch per dtype on the device."""


@op
def clip_norm_scale(arrays, max_norm):
    """A 0-d array in the arrays' dtype: ``max_norm / max(norm, max_norm)`` with ``norm`` the L2 norm of every element
    of ``arrays`` together (a list), i.e. the factor that clips their global norm to ``max_norm`` (1 below it; NaN
    when the norm is NaN). Computed where the arrays live: nothing is read back."""
