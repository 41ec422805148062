"""Launchers of optim.cu: in-place optimizer updates (SGD, Adam/AdamW, RMSProp, Adagrad); ``keras``: Keras 3's
form of each rule (optim.cu's PM_KERAS). Adam's bias corrections: the op set's one definition."""

from __future__ import annotations

import functools
import math
import numbers
from ctypes import c_double, c_int, c_longlong

from pymagma import _checks
from pymagma.kernels import programs
from pymagma.kernels.common import _float_dtype, _ptr, _run, _same

from ...ops.optim import adam_bias_corrections


def _check_update(what: str, param, grad, *states):
    dtype = _float_dtype(param, what)
    _same([param, grad, *states], what)
    for a in (param, grad, *states):
        if a is not None and (tuple(a.shape) != tuple(param.shape) or not a.is_c_contiguous):
            raise ValueError(f"{what}: every buffer must be C-contiguous with the parameter's shape {param.shape}; "
                             f"got {a.shape}")
    return dtype


def _check_hyper(what: str, **values) -> None:
    """Optimizer (and normalization) hyperparameters are finite real numbers (a NaN or infinite rate would spoil
    every parameter)."""
    for name, v in values.items():
        if type(v) is float or type(v) is int:  # the common case, without an abstract-class check
            if math.isfinite(v):
                continue
        elif not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(v):
            continue
        raise ValueError(f"{what}: {name} must be a finite real number, got {v!r}")


#: The op set's Adam bias corrections answered once per (beta1, beta2, step): a step's parameters share them, and a
#: cache hit adds no Python frame to the per-parameter launch.
_bias_corrections = functools.lru_cache(maxsize=32)(adam_bias_corrections)

#: The ``keras`` flag of the update kernels (optim.cu's PM_KERAS).
_KERAS = 2


def sgd_update(param, grad, velocity=None, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
               nesterov: bool = False, keras: bool = False) -> None:
    """In-place SGD step; ``velocity`` (needed when momentum > 0) is updated in place too. ``keras``: the weight
    decay is decoupled (``p -= lr wd p`` first), as Keras 3 applies it; else L2 (added to the gradient)."""
    _check_hyper("sgd_update", lr=lr, momentum=momentum, weight_decay=weight_decay)
    if momentum and velocity is None:
        raise ValueError("sgd_update with momentum needs a velocity buffer")
    dtype = _check_update("sgd_update", param, grad, velocity)
    _run("optim", programs.expression("sgd", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(velocity if momentum else None), c_longlong(param.size), c_double(lr),
          c_double(momentum), c_double(weight_decay), c_int(int(nesterov) | (_KERAS if keras else 0))])


def adam_update(param, grad, m, v, *, step: int, lr: float, beta1: float = 0.9, beta2: float = 0.999,
                eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False, keras: bool = False) -> None:
    """In-place Adam step number ``step`` (1-based); ``decoupled`` weight decay makes it AdamW. ``keras``: Keras'
    epsilon, ``p -= lr sqrt(bc2)/bc1 m / (sqrt(v) + eps)``, else ``p -= lr (m/bc1) / (sqrt(v/bc2) + eps)``."""
    step = _checks.count(step, "adam step", minimum=1, maximum=2**63 - 1)
    _check_hyper("adam_update", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adam_update", param, grad, m, v)
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    _run("optim", programs.expression("adam", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(m), _ptr(v), c_longlong(param.size), c_double(lr), c_double(beta1),
          c_double(beta2), c_double(eps), c_double(weight_decay), c_int(int(decoupled) | (_KERAS if keras else 0)),
          c_double(bc1), c_double(bc2)])


def adamw_update(param, grad, m, v, *, step: int, lr: float, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
    adam_update(param, grad, m, v, step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                decoupled=True)


def rmsprop_update(param, grad, square_avg, *, lr: float, rho: float = 0.9, eps: float = 1e-8,
                   weight_decay: float = 0.0, keras: bool = False) -> None:
    """In-place RMSProp: ``p -= lr g / (sqrt(s) + eps)`` with L2 decay, or (``keras``) ``lr g / sqrt(s + eps)`` with
    decoupled decay."""
    _check_hyper("rmsprop_update", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("rmsprop_update", param, grad, square_avg)
    _run("optim", programs.expression("rmsprop", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(square_avg), c_longlong(param.size), c_double(lr), c_double(rho),
          c_double(eps), c_double(weight_decay), c_int(_KERAS if keras else 0)])


def adagrad_update(param, grad, sum_squares, *, lr: float, eps: float = 1e-10, weight_decay: float = 0.0,
                   keras: bool = False) -> None:
    """In-place Adagrad: as :func:`rmsprop_update` with ``s += g^2``."""
    _check_hyper("adagrad_update", lr=lr, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adagrad_update", param, grad, sum_squares)
    _run("optim", programs.expression("adagrad", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(sum_squares), c_longlong(param.size), c_double(lr), c_double(eps),
          c_double(weight_decay), c_int(_KERAS if keras else 0)])
