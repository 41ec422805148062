"""The NumPy numerics of the simulated cuDNN: convolution by im2col in its three directions, pooling windows,
activations and their derivatives, softmax axes, reductions.  Plain functions of arrays: no descriptor, no pointer."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import _cudnn as cd
from .descriptors import Convolution, ModelError, Pooling, Status, Tensor, require


def windows(xp: np.ndarray, window, strides, dilations, out) -> np.ndarray:
    """A read-only (N, C, *out, *window) view of the padded input ``xp`` (N, C, *spatial)."""
    s = xp.strides
    sd = len(window)
    shape = xp.shape[:2] + tuple(out) + tuple(window)
    steps = s[:2] + tuple(s[2 + i] * strides[i] for i in range(sd)) + tuple(s[2 + i] * dilations[i] for i in range(sd))
    return np.lib.stride_tricks.as_strided(xp, shape, steps, writeable=False)


def pad(x: np.ndarray, pads, value=0.0) -> np.ndarray:
    return np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads], constant_values=value) if any(pads) else x


def scatter_windows(dxp: np.ndarray, cols: np.ndarray, strides, dilations, out) -> None:
    """dxp (N, C, *padded) += each window offset's slice of cols (N, C, *out, *window): col2im, one slice per
    window offset."""
    sd = len(strides)
    for idx in np.ndindex(*cols.shape[2 + sd:]):
        sl = tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in zip(idx, dilations, strides, out))
        dxp[(slice(None), slice(None)) + sl] += cols[(Ellipsis,) + idx]


@dataclass(frozen=True)
class ConvGeometry:
    x: Tensor
    w: Tensor
    y: Tensor
    conv: Convolution

    @property
    def spatial(self) -> int:
        return len(self.x.shape) - 2

    @property
    def out(self) -> tuple:
        return self.y.shape[2:]

    @property
    def groups(self) -> int:
        return self.conv.groups

    def columns(self, x: np.ndarray) -> np.ndarray:
        """im2col: (G, N * prod(out), C/G * prod(window)) of the padded x."""
        sd, g = self.spatial, self.groups
        n, c = x.shape[:2]
        win = windows(pad(x, self.conv.pads), self.w.shape[2:], self.conv.strides, self.conv.dilations, self.out)
        win = win.reshape((n, g, c // g) + win.shape[2:])
        order = (1, 0) + tuple(range(3, 3 + sd)) + (2,) + tuple(range(3 + sd, 3 + 2 * sd))
        return win.transpose(order).reshape(g, n * math.prod(self.out), -1)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """(G, K/G, C/G * prod(window)), flipped for true convolution."""
        if self.conv.mode == cd.ConvolutionMode.CONVOLUTION:
            w = np.flip(w, axis=tuple(range(2, w.ndim)))
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)

    def gradient_rows(self, dy: np.ndarray) -> np.ndarray:
        """dy (N, K, *out) as (G, N * prod(out), K/G)."""
        sd, g = self.spatial, self.groups
        n, k = dy.shape[:2]
        d = dy.reshape((n, g, k // g) + self.out)
        return d.transpose((1, 0) + tuple(range(3, 3 + sd)) + (2,)).reshape(g, -1, k // g)

    def forward(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        sd, n = self.spatial, x.shape[0]
        y = self.columns(x) @ self.weights(w).transpose(0, 2, 1)  # (G, N*P, K/G)
        y = y.reshape((self.groups, n) + self.out + (-1,))
        return y.transpose((1, 0, 2 + sd) + tuple(range(2, 2 + sd))).reshape(self.y.shape)

    def backward_data(self, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        sd, g = self.spatial, self.groups
        n, c = self.x.shape[:2]
        cols = self.gradient_rows(dy) @ self.weights(w)  # (G, N*P, C/G * window)
        cols = cols.reshape((g, n) + self.out + (c // g,) + self.w.shape[2:])
        cols = cols.transpose((1, 0, 2 + sd) + tuple(range(2, 2 + sd)) + tuple(range(3 + sd, 3 + 2 * sd)))
        cols = cols.reshape((n, c) + self.out + self.w.shape[2:])
        pads = self.conv.pads
        dxp = np.zeros((n, c) + tuple(s + 2 * p for s, p in zip(self.x.shape[2:], pads)), dy.dtype)
        scatter_windows(dxp, cols, self.conv.strides, self.conv.dilations, self.out)
        return dxp[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(pads, self.x.shape[2:]))]

    def backward_filter(self, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
        dw = np.einsum("gpk,gpc->gkc", self.gradient_rows(dy), self.columns(x), optimize=True)  # (G, K/G, C/G*win)
        dw = dw.reshape(self.w.shape)
        if self.conv.mode == cd.ConvolutionMode.CONVOLUTION:
            dw = np.flip(dw, axis=tuple(range(2, dw.ndim)))
        return dw


def pool_counts(geom: Pooling, spatial) -> np.ndarray:
    """Per output position, the number of window elements inside the unpadded input (separable per dimension)."""
    counts = np.ones((), np.int64)
    for size, k, p, s in zip(spatial, geom.window, geom.pads, geom.strides):
        out = (size + 2 * p - k) // s + 1
        start = np.arange(out) * s - p
        per_dim = np.minimum(start + k, size) - np.maximum(start, 0)
        counts = np.multiply.outer(counts, per_dim)
    return counts


def activation(mode: int, coef: float, x: np.ndarray) -> np.ndarray:
    m = cd.ActivationMode
    with np.errstate(over="ignore"):
        if mode == m.SIGMOID:
            return 1 / (1 + np.exp(-x))
        if mode == m.RELU:
            return np.maximum(x, 0)
        if mode == m.TANH:
            return np.tanh(x)
        if mode == m.CLIPPED_RELU:
            return np.minimum(np.maximum(x, 0), coef)
        if mode == m.ELU:
            return np.where(x > 0, x, coef * np.expm1(np.minimum(x, 0)))
        if mode == m.SWISH:
            return x / (1 + np.exp(-coef * x))
    raise ModelError(Status.NOT_SUPPORTED, f"activation mode {mode} is not supported by cudnnActivationForward/"
                                           "Backward (IDENTITY works only in fused convolutions)")


def activation_grad(mode: int, coef: float, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    m = cd.ActivationMode
    with np.errstate(over="ignore"):
        if mode == m.SIGMOID:
            s = 1 / (1 + np.exp(-x))
            return dy * s * (1 - s)
        if mode == m.RELU:
            return dy * (x > 0)
        if mode == m.TANH:
            return dy * (1 - np.tanh(x) ** 2)
        if mode == m.CLIPPED_RELU:
            return dy * ((x > 0) & (x < coef))
        if mode == m.ELU:
            return np.where(x > 0, dy, dy * coef * np.exp(np.minimum(x, 0)))
        if mode == m.SWISH:
            s = 1 / (1 + np.exp(-coef * x))
            return dy * (s + coef * x * s * (1 - s))
    return activation(mode, coef, x)  # raises NOT_SUPPORTED


def tf32(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to TensorFloat-32 (10 mantissa bits, round to nearest even), as tensor cores read
    float32 operands."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0x0FFF + lsb) & np.uint32(0xFFFFE000)
    finite = np.isfinite(np.asarray(a, np.float32))
    return np.where(finite, rounded.view(np.float32), a).astype(np.float32)


def consistent(expected: np.ndarray, given: np.ndarray, dtype) -> np.ndarray:
    """Where ``given`` agrees with ``expected`` within the rounding of ``dtype`` (a few units in the last place of
    the larger magnitude; NaN agrees with NaN)."""
    eps = 8 * float(np.finfo(np.float16 if np.dtype(dtype).itemsize <= 2 else dtype).eps)
    if np.dtype(dtype).itemsize <= 2 and np.dtype(dtype) != np.float16:  # bfloat16: 8 bits of mantissa
        eps = 8 * 2.0 ** -7
    expected, given = np.asarray(expected, np.float64), np.asarray(given, np.float64)
    scale = np.maximum(np.abs(expected), 1.0)
    return (np.abs(expected - given) <= eps * scale) | (np.isnan(expected) & np.isnan(given)) | (expected == given)


def softmax_axes(mode: int, ndim: int) -> tuple:
    require(mode in (cd.SoftmaxMode.INSTANCE, cd.SoftmaxMode.CHANNEL), f"softmax mode {mode} is not a mode")
    return tuple(range(1, ndim)) if mode == cd.SoftmaxMode.INSTANCE else (1,)


def check_broadcast(small: Tensor, big: Tensor, what: str) -> None:
    require(len(small.shape) == len(big.shape) and all(s in (1, b) for s, b in zip(small.shape, big.shape)),
             f"{what}: {small.shape} does not broadcast onto {big.shape} (each dimension must be 1 or equal)")


def reduce(op: int, nan: int, data: np.ndarray, axes: tuple):
    """(reduced value with kept dims, flattened arg index within the reduced elements or None)."""
    r = cd.ReduceTensorOp
    propagate = nan == cd.NanPropagation.PROPAGATE
    if op in (r.MIN, r.MAX, r.AMAX):
        src = np.abs(data) if op == r.AMAX else data
        rest = tuple(i for i in range(data.ndim) if i not in axes)
        moved = np.transpose(src, rest + axes).reshape(tuple(src.shape[i] for i in rest) + (-1,))
        if not propagate:
            fill = np.inf if op == r.MIN else -np.inf
            moved = np.where(np.isnan(moved), fill, moved)
        where = (np.argmin if op == r.MIN else np.argmax)(moved, axis=-1)
        value = np.take_along_axis(moved, where[..., None], axis=-1)[..., 0]
        shape = tuple(1 if i in axes else n for i, n in enumerate(data.shape))
        return value.reshape(shape), where.reshape(shape)
    reducers = {r.ADD: lambda d: d.sum(axes, keepdims=True), r.MUL: lambda d: d.prod(axes, keepdims=True),
                r.AVG: lambda d: d.mean(axes, keepdims=True), r.NORM1: lambda d: np.abs(d).sum(axes, keepdims=True),
                r.NORM2: lambda d: np.sqrt((d * d).sum(axes, keepdims=True)),
                r.MUL_NO_ZEROS: lambda d: np.where(d == 0, 1, d).prod(axes, keepdims=True)}
    return reducers[op](data), None
