"""Weight initializers as Keras 3 names them, with real fan-in / fan-out scaling, drawn through the backend's seeded
generators.

An initializer is called as ``init(shape, dtype, xp, rng)`` and returns a backend array. Fans follow the layer
layouts of this package: a Dense kernel ``(in, out)`` has ``fan_in = in`` and ``fan_out = out``; a Conv2D kernel
``(K, C, R, S)`` has ``fan_in = C*R*S`` and ``fan_out = K*R*S`` (the fans Keras computes from its ``(R, S, C, K)``;
a layer whose layout differs from Keras' in more than the axis order draws through :func:`in_keras_layout`).

:class:`VarianceScaling` as Keras 3: variance ``scale / n`` with ``n`` = ``max(1, fan_in)``, ``max(1, fan_out)`` or
``max(1, (fan_in + fan_out) / 2)``; ``"uniform"`` draws U(-l, l) with ``l = sqrt(3 * scale / n)``,
``"truncated_normal"`` a normal truncated at two standard deviations whose standard deviation is divided by
0.8796256610342398 (the standard deviation of a unit normal truncated at 2) so the draw keeps the variance,
``"untruncated_normal"`` a plain normal. Glorot (Xavier) is scale 1 over the fans' mean, He scale 2 over fan_in, LeCun
scale 1 over fan_in; their ``*Normal`` forms are truncated, as Keras'.

``seed=``: ``None`` draws from the layer's stream (the model's seed); an integer makes the initializer draw from its
own stream, the same values at every call (Keras' seeded initializers do the same; the values differ from Keras' as
the generators differ).
"""

from __future__ import annotations

import math

import numpy as np

from . import _checks
from ._registry import resolve
from .backend import host

__all__ = [
    "Initializer", "Zeros", "Ones", "Constant", "Identity", "VarianceScaling", "GlorotUniform", "GlorotNormal",
    "HeUniform", "HeNormal", "LecunUniform", "LecunNormal", "RandomUniform", "RandomNormal", "TruncatedNormal",
    "Orthogonal", "compute_fans", "in_keras_layout", "get",
]

_TRUNCATED_STD = 0.87962566103423978  # standard deviation of N(0, 1) truncated to [-2, 2]


def compute_fans(shape, input_axes=None, output_axes=None) -> tuple[int, int]:
    """Return ``(fan_in, fan_out)`` for a weight of ``shape`` (see module docstring for the layouts); with
    ``input_axes`` and ``output_axes`` the products of those axes of ``shape``."""
    shape = tuple(int(s) for s in shape)
    if input_axes is not None and output_axes is not None:
        return math.prod(shape[a] for a in input_axes), math.prod(shape[a] for a in output_axes)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _seed(seed, owner: str):
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise TypeError(f"{owner}: seed must be None or an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def truncated_normal(xp, rng, shape, mean: float, stddev: float, dtype):
    """``mean + stddev * z`` for unit normals z redrawn (from the same stream) until all lie in [-2, 2]. Drawn by the
    host backend, whose draws are the device's bits (one random protocol), and uploaded: nothing is read back."""
    shape = tuple(shape)
    z = host.normal(rng, shape, 0.0, 1.0, np.float64).reshape(-1)
    out = np.abs(z) > 2.0
    while out.any():
        z[out] = host.normal(rng, (int(out.sum()),), 0.0, 1.0, np.float64)
        out = np.abs(z) > 2.0
    return xp.asarray((mean + stddev * z).reshape(shape).astype(dtype), dtype)


class Initializer:
    """Base class: ``__call__(shape, dtype, xp, rng) -> backend array``."""

    def __call__(self, shape, dtype, xp, rng):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    def to_config(self) -> dict:
        return {"class_name": type(self).__name__, "config": self.get_config()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class _Random(Initializer):
    """An initializer that draws: ``seed`` None uses the layer's stream, an integer a stream of its own per call."""

    def __init__(self, seed=None):
        self.seed = _seed(seed, type(self).__name__)

    def stream(self, xp, rng):
        return rng if self.seed is None else xp.rng(self.seed)

    def get_config(self) -> dict:
        return {"seed": self.seed}


class Zeros(Initializer):
    def __call__(self, shape, dtype, xp, rng=None):
        return xp.zeros(tuple(shape), dtype)


class Ones(Initializer):
    def __call__(self, shape, dtype, xp, rng=None):
        return xp.ones(tuple(shape), dtype)


class Constant(Initializer):
    def __init__(self, value: float = 0.0):
        self.value = _checks.real(value, "value", "Constant initializer")

    def __call__(self, shape, dtype, xp, rng=None):
        return xp.full(tuple(shape), self.value, dtype)

    def get_config(self) -> dict:
        return {"value": self.value}


class Identity(Initializer):
    """``gain`` times the identity matrix (Keras' ``Identity``: 2-D weights only)."""

    def __init__(self, gain: float = 1.0):
        self.gain = _checks.real(gain, "gain", "Identity initializer")

    def __call__(self, shape, dtype, xp, rng=None):
        shape = tuple(shape)
        if len(shape) != 2:
            raise ValueError(f"Identity initializer: the weight must be 2-D, got shape {shape}")
        return xp.asarray(self.gain * np.eye(*shape), dtype)

    def get_config(self) -> dict:
        return {"gain": self.gain}


class VarianceScaling(_Random):
    """Zero-mean draws of variance ``scale / n`` (``n`` from the fans by ``mode``), Keras 3's ``VarianceScaling``."""

    def __init__(self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal", seed=None,
                 input_axes=None, output_axes=None):
        super().__init__(seed)
        owner = f"{type(self).__name__} initializer"
        self.scale = _checks.real(scale, "scale", owner)
        if not self.scale > 0:
            raise ValueError(f"{owner}: scale must be positive, got {scale!r}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"{owner}: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
        dist = distribution.lower() if isinstance(distribution, str) else distribution
        dist = "truncated_normal" if dist == "normal" else dist  # Keras' alias
        if dist not in ("uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(f"{owner}: distribution must be 'uniform', 'truncated_normal' or 'untruncated_normal', "
                             f"got {distribution!r}")
        self.mode, self.distribution = mode, dist
        if (input_axes is None) != (output_axes is None):
            raise ValueError(f"{owner}: give both input_axes and output_axes, or neither")
        self.input_axes = None if input_axes is None else [int(a) for a in input_axes]
        self.output_axes = None if output_axes is None else [int(a) for a in output_axes]

    def variance(self, shape) -> float:
        fan_in, fan_out = compute_fans(shape, self.input_axes, self.output_axes)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        return self.scale / max(1.0, n)

    def __call__(self, shape, dtype, xp, rng):
        shape, rng = tuple(shape), self.stream(xp, rng)
        std = math.sqrt(self.variance(shape))
        if self.distribution == "uniform":
            limit = math.sqrt(3.0) * std  # U(-l, l) has variance l^2 / 3
            return xp.uniform(rng, shape, -limit, limit, dtype)
        if self.distribution == "untruncated_normal":
            return xp.normal(rng, shape, 0.0, std, dtype)
        return truncated_normal(xp, rng, shape, 0.0, std / _TRUNCATED_STD, dtype)

    def get_config(self) -> dict:
        config = {"seed": self.seed, "scale": self.scale, "mode": self.mode, "distribution": self.distribution}
        if self.input_axes is not None:
            config.update(input_axes=self.input_axes, output_axes=self.output_axes)
        return config


def _fixed(name: str, scale: float, mode: str, distribution: str, doc: str):
    def __init__(self, seed=None, input_axes=None, output_axes=None):
        VarianceScaling.__init__(self, scale, mode, distribution, seed, input_axes, output_axes)

    def get_config(self) -> dict:
        config = {"seed": self.seed}
        if self.input_axes is not None:
            config.update(input_axes=self.input_axes, output_axes=self.output_axes)
        return config

    return type(name, (VarianceScaling,), {"__init__": __init__, "get_config": get_config, "__doc__": doc,
                                            "__module__": __name__})


GlorotUniform = _fixed("GlorotUniform", 1.0, "fan_avg", "uniform",
                       "U(-l, l), l = sqrt(6 / (fan_in + fan_out)) (Keras' default kernel initializer).")
GlorotNormal = _fixed("GlorotNormal", 1.0, "fan_avg", "truncated_normal",
                      "Truncated normal of variance 2 / (fan_in + fan_out).")
HeUniform = _fixed("HeUniform", 2.0, "fan_in", "uniform", "U(-l, l), l = sqrt(6 / fan_in).")
HeNormal = _fixed("HeNormal", 2.0, "fan_in", "truncated_normal", "Truncated normal of variance 2 / fan_in.")
LecunUniform = _fixed("LecunUniform", 1.0, "fan_in", "uniform", "U(-l, l), l = sqrt(3 / fan_in).")
LecunNormal = _fixed("LecunNormal", 1.0, "fan_in", "truncated_normal", "Truncated normal of variance 1 / fan_in.")


class RandomUniform(_Random):
    """U(minval, maxval) (Keras' "uniform", the default of its Embedding)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed=None):
        super().__init__(seed)
        self.minval = _checks.real(minval, "minval", "RandomUniform initializer")
        self.maxval = _checks.real(maxval, "maxval", "RandomUniform initializer")
        if self.maxval < self.minval:
            raise ValueError(f"RandomUniform initializer: maxval {maxval} is below minval {minval}")

    def __call__(self, shape, dtype, xp, rng):
        return xp.uniform(self.stream(xp, rng), tuple(shape), self.minval, self.maxval, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "minval": self.minval, "maxval": self.maxval}


class RandomNormal(_Random):
    """N(mean, stddev^2) (PyTorch's Embedding draws N(0, 1))."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed=None):
        super().__init__(seed)
        self.mean = _checks.real(mean, "mean", type(self).__name__ + " initializer")
        self.stddev = _checks.real(stddev, "stddev", type(self).__name__ + " initializer", 0.0)

    def __call__(self, shape, dtype, xp, rng):
        return xp.normal(self.stream(xp, rng), tuple(shape), self.mean, self.stddev, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomNormal):
    """N(mean, stddev^2) with values beyond two standard deviations of the mean drawn again (Keras'
    ``TruncatedNormal``: ``stddev`` is the normal's before truncation, so the draw's is about 0.88 of it)."""

    def __call__(self, shape, dtype, xp, rng):
        return truncated_normal(xp, self.stream(xp, rng), shape, self.mean, self.stddev, dtype)


class Orthogonal(_Random):
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2014; Keras' default for recurrent kernels): the Q of
    a QR factorisation of a standard normal draw, its columns' signs fixed by R's diagonal. A weight of more than two
    axes is flattened to (prod(shape[:-1]), shape[-1]); rows or columns are orthonormal, whichever are fewer. The
    draw is on the backend's stream; the factorisation runs once on the host (initialisation, not training)."""

    def __init__(self, gain: float = 1.0, seed=None):
        super().__init__(seed)
        self.gain = _checks.real(gain, "gain", "Orthogonal initializer")

    def __call__(self, shape, dtype, xp, rng):
        shape = tuple(shape)
        rows, cols = math.prod(shape[:-1]), (shape[-1] if shape else 1)
        tall = (max(rows, cols), min(rows, cols))
        draw = xp.normal(self.stream(xp, rng), tall, 0.0, 1.0, np.float64)
        q, r = np.linalg.qr(np.asarray(xp.to_numpy(draw), np.float64))
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if rows < cols:
            q = q.T
        return xp.asarray((self.gain * q).reshape(shape), dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "gain": self.gain}


class in_keras_layout(Initializer):  # noqa: N801  (used as a function by the layers)
    """Draw ``initializer`` as a weight of ``draw_shape`` (laid out as this package's kernels, with the fans Keras
    computes for the weight), then ``transpose(axes).reshape(shape)`` into the layer's layout: e.g. a depthwise kernel
    (C * m, 1, R, S), whose Keras form (R, S, C, m) has fan_in = C*R*S, drawn as (m, C, R, S) with axes (1, 0, 2, 3)."""

    def __init__(self, initializer, draw_shape, axes):
        self.initializer, self.draw_shape, self.axes = get(initializer), tuple(draw_shape), tuple(axes)

    def __call__(self, shape, dtype, xp, rng):
        w = np.asarray(self.initializer(self.draw_shape, dtype, host, rng))  # the device's bits, uploaded below
        return xp.asarray(np.ascontiguousarray(w.transpose(self.axes)).reshape(tuple(shape)), dtype)

    def to_config(self) -> dict:
        return self.initializer.to_config()


_CLASSES = [Zeros, Ones, Constant, Identity, VarianceScaling, GlorotUniform, GlorotNormal, HeUniform, HeNormal,
            LecunUniform, LecunNormal, RandomUniform, RandomNormal, TruncatedNormal, Orthogonal]
_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "identity": Identity, "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "xavier_uniform": GlorotUniform,
    "xavier_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal, "lecun_uniform": LecunUniform,
    "lecun_normal": LecunNormal, "uniform": RandomUniform, "random_uniform": RandomUniform, "normal": RandomNormal,
    "random_normal": RandomNormal, "truncated_normal": TruncatedNormal, "orthogonal": Orthogonal,
}
_BY_CLASS = {cls.__name__: cls for cls in _CLASSES}  # Keras also takes class names: "HeNormal"


def get(identifier) -> Initializer:
    """An Initializer from a name ("he_uniform" or Keras' class name "HeUniform"), an instance, or a
    ``{"class_name", "config"}`` dict (Keras' serialized form too)."""
    if isinstance(identifier, str) and identifier in _BY_CLASS:
        return _BY_CLASS[identifier]()
    return resolve(identifier, Initializer, _BY_NAME, "initializer")
