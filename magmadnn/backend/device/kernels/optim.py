"""Launchers of optim.cu: in-place optimizer updates (SGD, Adam/AdamW, RMSProp, Adagrad); ``keras``: Keras 3's
form of each rule (optim.cu's PM_KERAS). Adam's bias corrections: the op set's one definition."""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import numbers
import operator
import weakref
from ctypes import c_double, c_int, c_longlong, c_void_p

import numpy as np

from pymagma import _checks, _native
from pymagma.array import DeviceArray as _DeviceArray
from pymagma.kernels import programs
from pymagma.kernels.common import _FLOAT_NAMES, _device_array, _float_dtype, _ptr, _run, _same
from pymagma.kernels.loader import MAX_BLOCKS, THREADS

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
    every parameter). The multi-tensor launchers answer its common case inline, without this frame: every value a
    float and their sum finite (so each is; a sum that overflows comes here and passes)."""
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


# ------------------------------------------------------------------------------------------ multi-tensor updates
def _step_values(values, needed: int, what: str):
    """``values`` checked: the float64 device vector of a replayed step's values ({lr, bc1, bc2}, step.cu's)."""
    _device_array(values, f"{what} values")
    if values.dtype != np.float64 or values.size < needed or not values.is_c_contiguous:
        raise ValueError(f"{what}: values must be a C-contiguous float64 device vector of at least {needed} "
                         f"elements, got {values.dtype} {values.shape}")
    return values


_is_not_none = functools.partial(operator.is_not, None)  # (no Python frame per entry)

#: Tensors per launch of the ``*_many`` kernels (optim.cu's PM_MANY).
MANY = 48


class ManyTensors(ctypes.Structure):
    """Mirror of optim.cu's ``ManyTensors``: up to MANY tensors' buffers (parameter, gradient, two states) and the
    flat index each starts at."""

    _fields_ = [("a", (c_void_p * MANY) * 4), ("start", c_longlong * (MANY + 1)), ("count", c_int)]


def _many_groups(what: str, columns, values):
    """The launches of a multi-tensor update: ``(expression dtype, first parameter, total, ManyTensors)`` per group of
    at most MANY non-empty tensors of one dtype and device, each tensor's buffers checked as the single update checks
    them. ``columns``: the lists (params, grads, states...), None or a list holding None for an unused state.

    What follows from the parameters and states alone (their grouping, pointers and first indices) is kept per
    parameter list (:class:`_ManyPlan`) and reused while every parameter and state array is the same object; each
    call then checks the gradients (a step's new arrays) against it and writes their pointers."""
    params = columns[0]
    plan = _MANY_PLANS.get((what, id(params[0]))) if params else None
    if plan is not None:
        launches = plan.launches(columns, values, what)
        if launches is not None:
            return launches
    for column in columns[1:]:
        if column is not None and len(column) != len(params):
            raise ValueError(f"{what}: every list must have one entry per parameter ({len(params)}), got "
                             f"{len(column)}")
    unused = (None,) * len(params)
    rows = zip(*[column if column is not None else unused for column in columns])
    groups: dict = {}
    for i, row in enumerate(rows):
        param = row[0]
        dtype = _FLOAT_NAMES.get(param.dtype) if param.__class__ is _DeviceArray else None
        if dtype is not None:  # _check_update's common case inline: one float dtype object, shape and device
            shape, device, kind = param.shape, param.device, param.dtype
            for a in row:
                if a is not None and (a.__class__ is not _DeviceArray or a.dtype is not kind or a.shape != shape
                                      or a.device != device or not a.is_c_contiguous):
                    dtype = None
                    break
        if dtype is None:
            dtype = _check_update(what, *row)
        if param.size:
            groups.setdefault((dtype, param.device), []).append((i, row))
    if values is not None:
        values = _ptr(_step_values(values, 1, what))
    launches, rows = [], []  # every check made before the first launch: a bad entry updates nothing
    for (dtype, _), members in groups.items():
        for first in range(0, len(members), MANY):
            indices, chunk = zip(*members[first:first + MANY])
            table, n, columns_ = ManyTensors(), len(chunk), list(zip(*chunk))
            for slot, column in enumerate(columns_):  # a whole column at once (ctypes' NULLs where it is unused)
                if all(map(_is_not_none, column)):
                    table.a[slot][:n] = list(map(_pointer, column))
                elif any(map(_is_not_none, column)):
                    table.a[slot][:n] = [None if a is None else a.ptr for a in column]
            starts = list(itertools.accumulate(map(_size, columns_[0]), initial=0))  # each tensor's first index
            table.start[:n + 1], table.count = starts, n
            launches.append((dtype, chunk[0][0], starts[-1], table, values))
            rows.append(indices)
    if params:  # every row checked: what a later call with the same arrays needs checks of its gradients only
        _ManyPlan.keep(what, columns, launches, rows)
    return launches


class _ManyPlan:
    """What :func:`_many_groups` decided for one parameter list: per launch its table with every pointer but the
    gradients' (copied per call, the gradients' written in), and the arrays it holds for, by weak reference (a plan
    keeps no array alive). It holds while every parameter and state array is the same object as when it was made
    (an array's pointer, shape, dtype and device never change) and the gradients are device arrays of their
    parameters' dtype objects, shapes and devices, C-contiguous; any other call makes the full checks (and a new
    plan)."""

    __slots__ = ("refs", "shapes", "dtypes", "devices", "chunks")

    @classmethod
    def keep(cls, what: str, columns, launches, rows) -> None:
        """Keep the plan of ``launches`` (each one's rows: the parameters' positions ``rows``) for ``columns``."""
        fixed = [columns[0], *columns[2:]]  # (every column but the gradients)
        if columns[1] is None or any(c is not None and not all(map(_is_not_none, c)) for c in fixed):
            return  # (a state unused in part: planned never)
        plan = cls()
        params = columns[0]
        plan.refs = [None if c is None else list(map(weakref.ref, c)) for c in fixed]
        plan.shapes, plan.devices = list(map(_shape, params)), list(map(_device, params))
        plan.dtypes = list(map(_dtype, params))
        plan.chunks = [(dtype, total, ManyTensors.from_buffer_copy(table), indices)
                       for (dtype, _, total, table, _), indices in zip(launches, rows)]
        if len(_MANY_PLANS) >= _MANY_PLAN_LIMIT:
            _MANY_PLANS.pop(next(iter(_MANY_PLANS)))  # the oldest
        _MANY_PLANS[(what, id(params[0]))] = plan

    def launches(self, columns, values, what: str):
        """The launches of this call, or None where the plan does not hold for ``columns``."""
        refs, grads = self.refs, columns[1]
        if len(columns) != len(refs) + 1 or grads is None:
            return None
        for k, held in enumerate(refs):
            column = columns[k + 1 if k else 0]  # (every column but the gradients)
            if column is None or held is None:
                if column is not held:
                    return None
            elif len(column) != len(held) or not all(map(operator.is_, column, map(_deref, held))):
                return None
        n = len(self.shapes)
        if len(grads) != n or not (all(map(operator.is_, map(type, grads), itertools.repeat(_DeviceArray, n)))
                                   and all(map(operator.is_, map(_dtype, grads), self.dtypes))
                                   and list(map(_shape, grads)) == self.shapes
                                   and list(map(_device, grads)) == self.devices and all(map(_contiguous, grads))):
            return None
        if values is not None:
            values = _ptr(_step_values(values, 1, what))
        launches, params = [], columns[0]
        for dtype, total, table, rows in self.chunks:
            table = ManyTensors.from_buffer_copy(table)  # (a new table per launch, as the full path makes)
            table.a[1][:len(rows)] = list(map(_pointer, map(grads.__getitem__, rows)))
            launches.append((dtype, params[rows[0]], total, table, values))
        return launches


_pointer, _size = operator.attrgetter("ptr"), operator.attrgetter("size")
_shape, _dtype, _device = operator.attrgetter("shape"), operator.attrgetter("dtype"), operator.attrgetter("device")
_contiguous, _deref = operator.attrgetter("is_c_contiguous"), weakref.ref.__call__
#: :class:`_ManyPlan` by (the update's name, the first parameter's id); the oldest goes beyond the limit
_MANY_PLANS: dict = {}
_MANY_PLAN_LIMIT = 16


def sgd_update_many(params, grads, velocities=None, *, lr: float = 0.0, values=None, momentum: float = 0.0,
                    weight_decay: float = 0.0, nesterov: bool = False, keras: bool = False) -> None:
    """:func:`sgd_update` of every ``(params[i], grads[i], velocities[i])`` in one launch per dtype (per MANY
    tensors); ``values``: the device vector {lr} a replayed step reads instead of ``lr``."""
    _check_hyper("sgd_update_many", lr=lr, momentum=momentum, weight_decay=weight_decay)
    sgd_update_many_op(params, grads, velocities, lr if values is None else values, momentum, nesterov,
                       weight_decay, keras)


def sgd_update_many_op(ps, gs, vs, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False) -> None:
    """The device backend's op ``sgd_update_many`` (no wrapper): :func:`sgd_update_many` with ``lr`` a number (the
    eager step's rate) or a DeviceArray (the replayed step's device vector {lr}), every hyperparameter taken as a
    float; a parameter list planned before (:class:`_ManyPlan`) launches in this one frame and its plan's."""
    lr, values = (0.0, lr) if isinstance(lr, _DeviceArray) else (float(lr), None)
    momentum, weight_decay = float(momentum), float(weight_decay)
    if not math.isfinite(lr + momentum + weight_decay):  # (_check_hyper's common case inline, see there)
        _check_hyper("sgd_update_many", lr=lr, momentum=momentum, weight_decay=weight_decay)
    if momentum and (vs is None or not all(map(_is_not_none, vs))):
        raise ValueError("sgd_update_many with momentum needs a velocity buffer for every parameter")
    columns = (ps, gs, vs if momentum else None)
    plan = _MANY_PLANS.get(("sgd_update_many", id(ps[0]))) if ps else None
    launches = None if plan is None else plan.launches(columns, values, "sgd_update_many")
    scalars = None
    for dtype, like, total, table, at in launches or _many_groups("sgd_update_many", columns, values):
        if total:  # (common._run, inline)
            if scalars is None:
                scalars = (c_double(lr), c_double(momentum), c_double(weight_decay),
                           c_int(int(bool(nesterov)) | (_KERAS if keras else 0)))
            libraries, device = _native.current, like.device
            libraries.launcher.launch(
                "optim", programs.expression("sgd_many", dtype), device,
                (libraries.default_queues.get(device) or like.queue).stream, min(-(-total // THREADS), MAX_BLOCKS),
                THREADS, [table, at if at is not None else c_void_p(), *scalars])


def adam_update_many(params, grads, ms, vs, *, step: int = 1, lr: float = 0.0, values=None, beta1: float = 0.9,
                     beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False,
                     keras: bool = False) -> None:
    """:func:`adam_update` of every ``(params[i], grads[i], ms[i], vs[i])`` in one launch per dtype (per MANY
    tensors); ``values``: the device vector {lr, bc1, bc2} a replayed step reads instead of lr and ``step``."""
    step = _checks.count(step, "adam step", minimum=1, maximum=2**63 - 1)
    _check_hyper("adam_update_many", lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    adam_update_many_op(params, grads, ms, vs, step, lr if values is None else values, beta1, beta2, eps,
                        weight_decay, decoupled, keras)


def adam_update_many_op(ps, gs, ms, vs, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                        decoupled=False, keras=False) -> None:
    """The device backend's op ``adam_update_many`` (no wrapper): :func:`adam_update_many` with ``lr`` a number (the
    eager step's rate, ``step`` counting from 1) or a DeviceArray (the replayed step's device vector {lr, bc1, bc2},
    ``step`` unused), every hyperparameter taken as a float; a parameter list planned before (:class:`_ManyPlan`)
    launches in this one frame and its plan's."""
    what = "adam_update_many"
    if isinstance(lr, _DeviceArray):
        lr, values, step = 0.0, _step_values(lr, 3, what), 1
    else:
        lr, values, step = float(lr), None, int(step)
        if not 0 < step < 2**63:
            _checks.count(step, "adam step", minimum=1, maximum=2**63 - 1)  # (raises, naming it)
    beta1, beta2, eps, weight_decay = float(beta1), float(beta2), float(eps), float(weight_decay)
    if not math.isfinite(lr + beta1 + beta2 + eps + weight_decay):  # (see sgd_update_many_op)
        _check_hyper(what, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    corrections = _bias_corrections(beta1, beta2, step)  # the single update's, bit for bit
    columns = (ps, gs, ms, vs)
    plan = _MANY_PLANS.get((what, id(ps[0]))) if ps else None
    launches = None if plan is None else plan.launches(columns, values, what)
    scalars = None
    for dtype, like, total, table, at in launches or _many_groups(what, columns, values):
        if total:  # (common._run, inline)
            if scalars is None:
                scalars = (c_double(lr), c_double(beta1), c_double(beta2), c_double(eps), c_double(weight_decay),
                           c_int(int(bool(decoupled)) | (_KERAS if keras else 0)), c_double(corrections[0]),
                           c_double(corrections[1]))
            libraries, device = _native.current, like.device
            libraries.launcher.launch(
                "optim", programs.expression("adam_many", dtype), device,
                (libraries.default_queues.get(device) or like.queue).stream, min(-(-total // THREADS), MAX_BLOCKS),
                THREADS, [table, at if at is not None else c_void_p(), *scalars])


def rmsprop_update_many(params, grads, square_avgs, *, lr: float = 0.0, values=None, rho: float = 0.9,
                        eps: float = 1e-8, weight_decay: float = 0.0, keras: bool = False) -> None:
    """:func:`rmsprop_update` of every ``(params[i], grads[i], square_avgs[i])``, one launch per dtype."""
    _check_hyper("rmsprop_update_many", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
    rmsprop_update_many_op(params, grads, square_avgs, lr if values is None else values, rho, eps, weight_decay, keras)


def rmsprop_update_many_op(ps, gs, ss, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False) -> None:
    """The device backend's op ``rmsprop_update_many`` (no wrapper), ``lr`` as :func:`sgd_update_many_op` takes it;
    a parameter list planned before launches by :func:`_many_launches` and its plan's."""
    lr, values = (0.0, lr) if isinstance(lr, _DeviceArray) else (float(lr), None)
    rho, eps, weight_decay = float(rho), float(eps), float(weight_decay)
    if not math.isfinite(lr + rho + eps + weight_decay):  # (see sgd_update_many_op)
        _check_hyper("rmsprop_update_many", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
    _many_launches("rmsprop_update_many", "rmsprop_many", (ps, gs, ss), values,
                   (c_double(lr), c_double(rho), c_double(eps), c_double(weight_decay), c_int(_KERAS if keras else 0)))


def adagrad_update_many(params, grads, sum_squares, *, lr: float = 0.0, values=None, eps: float = 1e-10,
                        weight_decay: float = 0.0, keras: bool = False) -> None:
    """:func:`adagrad_update` of every ``(params[i], grads[i], sum_squares[i])``, one launch per dtype."""
    _check_hyper("adagrad_update_many", lr=lr, eps=eps, weight_decay=weight_decay)
    adagrad_update_many_op(params, grads, sum_squares, lr if values is None else values, eps, weight_decay, keras)


def adagrad_update_many_op(ps, gs, ss, lr, eps=1e-7, weight_decay=0.0, keras=False) -> None:
    """The device backend's op ``adagrad_update_many`` (no wrapper), ``lr`` as :func:`sgd_update_many_op` takes it;
    a parameter list planned before launches by :func:`_many_launches` and its plan's."""
    lr, values = (0.0, lr) if isinstance(lr, _DeviceArray) else (float(lr), None)
    eps, weight_decay = float(eps), float(weight_decay)
    if not math.isfinite(lr + eps + weight_decay):  # (see sgd_update_many_op)
        _check_hyper("adagrad_update_many", lr=lr, eps=eps, weight_decay=weight_decay)
    _many_launches("adagrad_update_many", "adagrad_many", (ps, gs, ss), values,
                   (c_double(lr), c_double(eps), c_double(weight_decay), c_int(_KERAS if keras else 0)))


def _many_launches(what: str, kernel: str, columns, values, scalars) -> None:
    """The launches of a ``*_many`` update of ``columns`` (its plan's, else checked and planned) with ``scalars``."""
    params = columns[0]
    plan = _MANY_PLANS.get((what, id(params[0]))) if params else None
    launches = None if plan is None else plan.launches(columns, values, what)
    for dtype, like, total, table, at in launches or _many_groups(what, columns, values):
        if total:  # (common._run, inline)
            libraries, device = _native.current, like.device
            libraries.launcher.launch(
                "optim", programs.expression(kernel, dtype), device,
                (libraries.default_queues.get(device) or like.queue).stream, min(-(-total // THREADS), MAX_BLOCKS),
                THREADS, [table, at if at is not None else c_void_p(), *scalars])
