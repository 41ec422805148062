"""Host optimizer updates, in place (SGD, Adam, RMSprop, AdaGrad; Keras' and PyTorch's rules), and the global-norm
clipping factor."""

from __future__ import annotations

import math
import threading

import numpy as np

from .. import _host_jit
from ..ops.optim import adam_bias_corrections


def _decayed(g, p, weight_decay):
    return g + weight_decay * p if weight_decay else g


_scratch = threading.local()


def _workspace(shape, dtype) -> np.ndarray:
    """A reusable per-thread scratch array (contents undefined) for the temporaries of the update ops."""
    cache = getattr(_scratch, "arrays", None)
    if cache is None:
        cache = _scratch.arrays = {}
    key = (tuple(shape), np.dtype(dtype).str)
    buf = cache.get(key)
    if buf is None:
        buf = cache[key] = np.empty(shape, dtype=dtype)
    return buf


def _keras_decay(p, lr, weight_decay):
    """Keras 3's decoupled weight decay, in place: p -= lr wd p."""
    if weight_decay:
        p -= (lr * weight_decay) * p


def sgd_update(p, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """In place: g' = g + wd p (``keras``: p -= lr wd p first); v = momentum v + g'; p -= lr (g' + momentum v if
    nesterov else v)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    if not nesterov and _fused_update(p, g, v, lr, momentum):
        return
    tmp = _workspace(p.shape, p.dtype)
    if momentum:
        v *= momentum
        v += g
        if nesterov:
            np.multiply(v, momentum, out=tmp)
            tmp += g
            tmp *= lr
        else:
            np.multiply(v, lr, out=tmp)
    else:
        np.multiply(g, lr, out=tmp)
    p -= tmp


def _fused_update(p, g, v, lr, momentum) -> bool:
    """SGD's update through ``_host_jit``'s one-pass kernel when numba is there and the operands fit it (C-contiguous
    float arrays of p's dtype and shape, Python numbers for the rates, which NumPy's in-place ops would round to
    the dtype as the kernel does); False when the NumPy path must run."""
    jit = _host_jit.kernels
    if jit is None or p.dtype not in (np.float32, np.float64) or type(lr) not in (float, int) \
            or type(momentum) not in (float, int):
        return False
    arrays = (p, g) if not momentum else (p, g, v)
    if not all(type(a) is np.ndarray and a.dtype == p.dtype and a.shape == p.shape and a.flags.c_contiguous
               for a in arrays) or not p.flags.writeable:
        return False
    one = p.dtype.type
    if momentum:
        jit.sgd_momentum(p.reshape(-1), g.reshape(-1), v.reshape(-1), one(lr), one(momentum))
    else:
        jit.sgd_plain(p.reshape(-1), g.reshape(-1), one(lr))
    return True


def adam_update(p, g, m, v, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                keras=False):
    """In place Adam (``decoupled=True``: AdamW, p *= 1 - lr wd); ``step`` counts from 1; ``keras``: Keras'
    epsilon placement. ``lr`` may be the float64 vector {lr, bc1, bc2} (the bias corrections given, ``step``
    unused)."""
    if isinstance(lr, np.ndarray):
        lr, bc1, bc2 = (float(value) for value in lr[:3])
    else:
        bc1, bc2 = adam_bias_corrections(beta1, beta2, step)
    if weight_decay and decoupled:
        p *= 1.0 - lr * weight_decay
    elif weight_decay:
        g = g + weight_decay * p
    m *= beta1
    m += (1.0 - beta1) * g
    v *= beta2
    v += (1.0 - beta2) * np.square(g)
    if keras:
        denom = np.sqrt(v)
        denom += eps
        p -= (lr * math.sqrt(bc2) / bc1) * m / denom
        return
    denom = np.sqrt(v / bc2)
    denom += eps
    p -= (lr / bc1) * m / denom


def _root(s, eps, keras):
    """sqrt(s + eps) (Keras) or sqrt(s) + eps."""
    if keras:
        return np.sqrt(s + eps)
    denom = np.sqrt(s)
    denom += eps
    return denom


def rmsprop_update(p, g, s, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s = rho s + (1-rho) g^2; p -= lr g / (sqrt(s) + eps) (``keras``: / sqrt(s + eps), decoupled decay)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    s *= rho
    s += (1.0 - rho) * np.square(g)
    p -= lr * g / _root(s, eps, keras)


def adagrad_update(p, g, s, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """In place: s += g^2; p -= lr g / (sqrt(s) + eps) (``keras``: / sqrt(s + eps), decoupled decay)."""
    if keras:
        _keras_decay(p, lr, weight_decay)
    else:
        g = _decayed(g, p, weight_decay)
    s += np.square(g)
    p -= lr * g / _root(s, eps, keras)


def sgd_update_many(ps, gs, vs, lr, momentum=0.0, nesterov=False, weight_decay=0.0, keras=False):
    """:func:`sgd_update` of each (ps[i], gs[i], vs[i]) in turn: the rates are checked once for all, each parameter
    then goes straight to ``_host_jit``'s one-pass kernel where its arrays fit it (else through :func:`sgd_update`)."""
    jit = _host_jit.kernels
    if len(ps) != len(gs) or (vs is not None and len(vs) != len(ps)):
        raise ValueError(f"sgd_update_many: {len(ps)} parameters, {len(gs)} gradients and "
                         f"{'no' if vs is None else len(vs)} velocities; expected one of each per parameter")
    if jit is None or nesterov or weight_decay or type(lr) not in (float, int) or type(momentum) not in (float, int):
        for i, (p, g) in enumerate(zip(ps, gs)):
            sgd_update(p, g, None if vs is None else vs[i], lr, momentum, nesterov, weight_decay, keras)
        return
    rates = {}  # dtype -> (lr, momentum) as scalars of that dtype
    kernel = jit.sgd_momentum if momentum else jit.sgd_plain
    for i in range(len(ps)):
        p, g = ps[i], gs[i]
        v = vs[i] if momentum else None
        if not _fits_kernel(p, g, v):
            sgd_update(p, g, None if vs is None else vs[i], lr, momentum, nesterov, weight_decay, keras)
            continue
        one = rates.get(p.dtype)
        if one is None:
            one = rates[p.dtype] = (p.dtype.type(lr), p.dtype.type(momentum))
        if p.ndim != 1:  # (the kernels take 1-D views; a bias is one already)
            p, g, v = p.reshape(-1), g.reshape(-1), v if v is None else v.reshape(-1)
        if momentum:
            kernel(p, g, v, one[0], one[1])
        else:
            kernel(p, g, one[0])


def _fits_kernel(p, g, v) -> bool:
    """Whether SGD's one-pass kernel takes these arrays: C-contiguous NumPy float arrays of p's dtype and shape
    (``v`` None without momentum), p writeable."""
    if type(p) is not np.ndarray or type(g) is not np.ndarray:
        return False
    dtype, shape = p.dtype, p.shape
    if dtype not in _KERNEL_DTYPES or g.dtype != dtype or g.shape != shape or not (
            p.flags.c_contiguous and g.flags.c_contiguous and p.flags.writeable):
        return False
    return v is None or (type(v) is np.ndarray and v.dtype == dtype and v.shape == shape and v.flags.c_contiguous)


_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def adam_update_many(ps, gs, ms, vs, step, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False,
                     keras=False):
    """:func:`adam_update` of each (ps[i], gs[i], ms[i], vs[i]) in turn."""
    for p, g, m, v in zip(ps, gs, ms, vs, strict=True):
        adam_update(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled, keras)


def rmsprop_update_many(ps, gs, ss, lr, rho=0.9, eps=1e-7, weight_decay=0.0, keras=False):
    """:func:`rmsprop_update` of each (ps[i], gs[i], ss[i]) in turn."""
    for p, g, s in zip(ps, gs, ss, strict=True):
        rmsprop_update(p, g, s, lr, rho, eps, weight_decay, keras)


def adagrad_update_many(ps, gs, ss, lr, eps=1e-7, weight_decay=0.0, keras=False):
    """:func:`adagrad_update` of each (ps[i], gs[i], ss[i]) in turn."""
    for p, g, s in zip(ps, gs, ss, strict=True):
        adagrad_update(p, g, s, lr, eps, weight_decay, keras)


def clip_norm_scale(arrays, max_norm):
    """0-d ``max_norm / max(norm, max_norm)`` for the global L2 norm of ``arrays``."""
    dtype = arrays[0].dtype
    total = np.zeros((), dtype)
    for a in arrays:
        total += np.vdot(a, a)
    with np.errstate(divide="ignore"):
        scale = dtype.type(max_norm) / np.sqrt(total)  # a zero norm gives inf, clipped to 1; NaN stays NaN
    return np.asarray(np.minimum(scale, dtype.type(1)), dtype=dtype)
