"""Device optimizer updates, in place, one fused kernel each (values read from device memory under graph capture),
and the global-norm clipping factor."""

from __future__ import annotations

from pymagma import kernels as _k
from pymagma.array import DeviceArray as _DeviceArray

from . import kernels as _dk
from ._common import (
    _same_dtype,
)
from .kernels import optim as _optim


def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p; v = momentum v + g'; p -= lr (g' + momentum v if nesterov else v)."""
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory (see _dk.sgd_update_at)
        return _dk.sgd_update_at(p, g, v if momentum else None, values=lr, momentum=float(momentum),
                                 weight_decay=float(weight_decay), nesterov=bool(nesterov), keras=bool(keras))
    _dk.sgd_update(p, g, v if momentum else None, lr=float(lr), momentum=float(momentum),
                   weight_decay=float(weight_decay), nesterov=bool(nesterov), keras=bool(keras))


def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled``: AdamW); ``step`` counts from 1."""
    if isinstance(lr, _DeviceArray):  # graph capture: {lr, bias corrections} read from device memory
        return _dk.adam_update_at(p, g, m, v, values=lr, beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                                  weight_decay=float(weight_decay), decoupled=bool(decoupled), keras=bool(keras))
    _dk.adam_update(p, g, m, v, step=int(step), lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                    weight_decay=float(weight_decay), decoupled=bool(decoupled), keras=bool(keras))


def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory
        return _dk.rmsprop_update_at(p, g, s, values=lr, rho=float(rho), eps=float(eps),
                                     weight_decay=float(weight_decay), keras=bool(keras))
    _dk.rmsprop_update(p, g, s, lr=float(lr), rho=float(rho), eps=float(eps), weight_decay=float(weight_decay),
                       keras=bool(keras))


def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    if isinstance(lr, _DeviceArray):  # graph capture: lr read from device memory
        return _dk.adagrad_update_at(p, g, s, values=lr, eps=float(eps), weight_decay=float(weight_decay),
                                     keras=bool(keras))
    _dk.adagrad_update(p, g, s, lr=float(lr), eps=float(eps), weight_decay=float(weight_decay), keras=bool(keras))


# ``lr, values`` of each ``*_many`` launcher below (inline, no frame per step): a DeviceArray ``lr`` is the replayed
# step's device vector (``values``), a number the eager step's rate.


#: ``sgd_update`` of every (ps[i], gs[i], vs[i]): one launch per dtype (per kernels.MANY tensors); no wrapper.
sgd_update_many = _optim.sgd_update_many_op


#: ``adam_update`` of every (ps[i], gs[i], ms[i], vs[i]) (``step, lr`` as ``adam_update`` takes them): one launch per
#: dtype; no wrapper.
adam_update_many = _optim.adam_update_many_op


#: ``rmsprop_update`` of every (ps[i], gs[i], ss[i]): one launch per dtype; no wrapper.
rmsprop_update_many = _optim.rmsprop_update_many_op
#: ``adagrad_update`` of every (ps[i], gs[i], ss[i]): one launch per dtype; no wrapper.
adagrad_update_many = _optim.adagrad_update_many_op


def clip_norm_scale(arrays, max_norm):
    """``max_norm / max(norm, max_norm)`` as clip(max_norm * rsqrt(sum of squares), 0, 1): rsqrt(0) = inf clips to
    1, a NaN norm stays NaN; four small kernels per call, nothing read back."""
    _same_dtype("clip_norm_scale", *arrays)
    total = None
    for a in arrays:
        part = _k.reduce("sum_squares", a)
        total = part if total is None else _k.binary("add", total, part)
    scale = _k.unary("affine", _k.unary("rsqrt", total), float(max_norm), 0.0)
    return _k.unary("clip", scale, 0.0, 1.0)
