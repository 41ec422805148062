"""Launchers of step.cu: the optimizer updates and dropout with their per-step values (learning rate, bias
corrections, Philox offsets) read from device memory when the kernel runs, which a replayed CUDA graph needs."""

from __future__ import annotations

import numbers
from ctypes import c_double, c_int, c_longlong, c_ulonglong

import numpy as np

from pymagma import _checks
from pymagma import array as _array
from pymagma.kernels import programs
from pymagma.kernels.common import _device_array, _float_dtype, _ptr, _run
from pymagma.kernels.elementwise import contiguous

from .optim import _KERAS, _check_hyper, _check_update, _step_values


# The updates and dropout above with what changes from step to step read from device memory when the kernel runs
# (step.cu), so that a step captured as a CUDA graph replays with the values the host writes there before each
# launch.  ``values``: float64 device vector {lr, bc1 = 1 - beta1^t, bc2 = 1 - beta2^t} (the last two for Adam);
# ``offsets``: int64 device vector holding the bits of uint64 Philox offsets, ``offsets[slot]`` that of the draw.
def sgd_update_at(param, grad, velocity=None, *, values, momentum: float = 0.0, weight_decay: float = 0.0,
                  nesterov: bool = False, keras: bool = False) -> None:
    """:func:`sgd_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("sgd_update_at", momentum=momentum, weight_decay=weight_decay)
    if momentum and velocity is None:
        raise ValueError("sgd_update_at with momentum needs a velocity buffer")
    dtype = _check_update("sgd_update_at", param, grad, velocity)
    _run("step", programs.expression("sgd_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(velocity if momentum else None), c_longlong(param.size),
          _ptr(_step_values(values, 1, "sgd_update_at")), c_double(momentum), c_double(weight_decay),
          c_int(int(nesterov) | (_KERAS if keras else 0))])


def adam_update_at(param, grad, m, v, *, values, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   weight_decay: float = 0.0, decoupled: bool = False, keras: bool = False) -> None:
    """:func:`adam_update` with lr and the bias corrections read from ``values[0:3]`` on the device."""
    _check_hyper("adam_update_at", beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adam_update_at", param, grad, m, v)
    _run("step", programs.expression("adam_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(m), _ptr(v), c_longlong(param.size),
          _ptr(_step_values(values, 3, "adam_update_at")), c_double(beta1), c_double(beta2), c_double(eps),
          c_double(weight_decay), c_int(int(decoupled) | (_KERAS if keras else 0))])


def rmsprop_update_at(param, grad, square_avg, *, values, rho: float = 0.9, eps: float = 1e-8,
                      weight_decay: float = 0.0, keras: bool = False) -> None:
    """:func:`rmsprop_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("rmsprop_update_at", rho=rho, eps=eps, weight_decay=weight_decay)
    dtype = _check_update("rmsprop_update_at", param, grad, square_avg)
    _run("step", programs.expression("rmsprop_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(square_avg), c_longlong(param.size),
          _ptr(_step_values(values, 1, "rmsprop_update_at")), c_double(rho), c_double(eps),
          c_double(weight_decay), c_int(_KERAS if keras else 0)])


def adagrad_update_at(param, grad, sum_squares, *, values, eps: float = 1e-10, weight_decay: float = 0.0,
                      keras: bool = False) -> None:
    """:func:`adagrad_update` with the learning rate read from ``values[0]`` on the device."""
    _check_hyper("adagrad_update_at", eps=eps, weight_decay=weight_decay)
    dtype = _check_update("adagrad_update_at", param, grad, sum_squares)
    _run("step", programs.expression("adagrad_at", dtype), param, param.size,
         [_ptr(param), _ptr(grad), _ptr(sum_squares), c_longlong(param.size),
          _ptr(_step_values(values, 1, "adagrad_update_at")), c_double(eps), c_double(weight_decay),
          c_int(_KERAS if keras else 0)])


def dropout_at(x, rate: float, *, seed: int, offsets, slot: int):
    """:func:`dropout` with the offset read from ``offsets[slot]`` (an int64 device vector holding uint64 bits)
    when the kernel runs."""
    dtype = _float_dtype(x, "dropout_at")
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"dropout rate must be a real number in [0, 1), got {rate!r}")
    seed = _checks.count(seed, "seed", maximum=2**64 - 1)
    _device_array(offsets, "dropout_at offsets")
    slot = _checks.count(slot, "slot", maximum=offsets.size - 1)
    if offsets.dtype != np.int64 or not offsets.is_c_contiguous:
        raise ValueError(f"dropout_at: offsets must be a C-contiguous int64 device vector, got {offsets.dtype}")
    x = contiguous(x)
    y, mask = _array.empty(x.shape, x.dtype, device=x.device), _array.empty(x.shape, x.dtype, device=x.device)
    _run("step", programs.expression("dropout_at", dtype), x, (x.size + 1) // 2,
         [_ptr(x), _ptr(y), _ptr(mask), c_longlong(x.size), c_ulonglong(int(seed)), _ptr(offsets),
          c_longlong(slot), c_double(float(rate))])
    return y, mask
