"""Weight initializers with real fan-in / fan-out scaling, drawn through the backend's seeded generators.

An initializer is called as ``init(shape, dtype, xp, rng)`` and returns a backend array. Fans follow the layer
layouts of this package: a Dense kernel ``(in, out)`` has ``fan_in = in`` and ``fan_out = out``; a Conv2D kernel
``(K, C, R, S)`` has ``fan_in = C*R*S`` and ``fan_out = K*R*S``.

* Glorot (Xavier) uniform: U(-l, l) with ``l = sqrt(6 / (fan_in + fan_out))``; normal: N(0, 2 / (fan_in + fan_out)).
* He (Kaiming) uniform: U(-l, l) with ``l = sqrt(6 / fan_in)``; normal: N(0, 2 / fan_in).

The normal variants are plain (not truncated) normals, so their variance is exactly the formula's.
"""

from __future__ import annotations

import math

import numpy as np

from . import _checks
from ._registry import resolve

__all__ = [
    "Initializer", "Zeros", "Ones", "Constant", "GlorotUniform", "GlorotNormal", "HeUniform", "HeNormal",
    "compute_fans", "get",
]


def compute_fans(shape) -> tuple[int, int]:
    """Return ``(fan_in, fan_out)`` for a weight of ``shape`` (see module docstring for the layouts)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


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


class _VarianceScaling(Initializer):
    """Draws zero-mean values with the variance the subclass computes from the fans, uniform or normal."""

    distribution = "uniform"

    def variance(self, shape) -> float:
        raise NotImplementedError

    def __call__(self, shape, dtype, xp, rng):
        shape = tuple(shape)
        std = math.sqrt(self.variance(shape))
        if self.distribution == "uniform":
            limit = math.sqrt(3.0) * std  # U(-l, l) has variance l^2 / 3
            return xp.uniform(rng, shape, -limit, limit, dtype)
        return xp.normal(rng, shape, 0.0, std, dtype)


class GlorotUniform(_VarianceScaling):
    def variance(self, shape):
        fan_in, fan_out = compute_fans(shape)
        return 2.0 / (fan_in + fan_out)


class GlorotNormal(GlorotUniform):
    distribution = "normal"


class HeUniform(_VarianceScaling):
    def variance(self, shape):
        return 2.0 / compute_fans(shape)[0]


class HeNormal(HeUniform):
    distribution = "normal"


_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant,
    "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "xavier_uniform": GlorotUniform,
    "xavier_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal,
}


def get(identifier) -> Initializer:
    """An Initializer from a name ("he_uniform"), an instance, or a ``{"class_name", "config"}`` dict."""
    return resolve(identifier, Initializer, _BY_NAME, "initializer")


# ---------------------------------------------------------------------- fixed-scale random (embeddings)
class RandomUniform(Initializer):
    """U(minval, maxval) (Keras' "uniform", the default of its Embedding)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05):
        self.minval = _checks.real(minval, "minval", "RandomUniform initializer")
        self.maxval = _checks.real(maxval, "maxval", "RandomUniform initializer")
        if self.maxval < self.minval:
            raise ValueError(f"RandomUniform initializer: maxval {maxval} is below minval {minval}")

    def __call__(self, shape, dtype, xp, rng):
        return xp.uniform(rng, tuple(shape), self.minval, self.maxval, dtype)

    def get_config(self) -> dict:
        return {"minval": self.minval, "maxval": self.maxval}


class RandomNormal(Initializer):
    """N(mean, stddev^2) (PyTorch's Embedding draws N(0, 1))."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05):
        self.mean = _checks.real(mean, "mean", "RandomNormal initializer")
        self.stddev = _checks.real(stddev, "stddev", "RandomNormal initializer", 0.0)

    def __call__(self, shape, dtype, xp, rng):
        return xp.normal(rng, tuple(shape), self.mean, self.stddev, dtype)

    def get_config(self) -> dict:
        return {"mean": self.mean, "stddev": self.stddev}


_BY_NAME.update({"uniform": RandomUniform, "random_uniform": RandomUniform, "normal": RandomNormal,
                 "random_normal": RandomNormal})


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2014; Keras' default for recurrent kernels): the Q of
    a QR factorisation of a standard normal draw, its columns' signs fixed by R's diagonal. A weight of more than two
    axes is flattened to (prod(shape[:-1]), shape[-1]); rows or columns are orthonormal, whichever are fewer. The
    draw is on the backend's stream; the factorisation runs once on the host (initialisation, not training)."""

    def __init__(self, gain: float = 1.0):
        self.gain = _checks.real(gain, "gain", "Orthogonal initializer")

    def __call__(self, shape, dtype, xp, rng):
        shape = tuple(shape)
        rows, cols = math.prod(shape[:-1]), (shape[-1] if shape else 1)
        tall = (max(rows, cols), min(rows, cols))
        q, r = np.linalg.qr(np.asarray(xp.to_numpy(xp.normal(rng, tall, 0.0, 1.0, np.float64)), np.float64))
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if rows < cols:
            q = q.T
        return xp.asarray((self.gain * q).reshape(shape), dtype)

    def get_config(self) -> dict:
        return {"gain": self.gain}


_BY_NAME["orthogonal"] = Orthogonal
__all__ += ["Orthogonal", "RandomUniform", "RandomNormal"]
