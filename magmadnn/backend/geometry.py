"""Window geometry and activation names: the one home every layer, function and backend uses.

Activation kinds (:data:`ACTIVATIONS`) are what the op set computes, each Keras 3's function of that name; "gelu" is
the exact (erf) form and "gelu_tanh" the tanh approximation. :data:`ACTIVATION_NAMES` adds the names layers and
``functional.activation`` accept on top: "linear" (the identity), "softmax" and Keras' alias "swish" (= "silu").

Padding in the op set is always resolved to ``((top, bottom), (left, right))``; "same" puts the extra pixel at the
bottom/right (TensorFlow's convention), so it may be asymmetric and every backend must accept that.
"""

from __future__ import annotations

import functools
import math
import operator

from .._checks import integer

#: Activation kinds of ``activation_forward``/``activation_backward``.
ACTIVATIONS = ("sigmoid", "tanh", "relu", "leaky_relu", "elu", "gelu", "gelu_tanh", "silu", "softplus", "softsign",
               "selu", "hard_sigmoid", "exponential")
#: Other spellings of a kind (Keras' own aliases).
ACTIVATION_ALIASES = {"swish": "silu"}
#: Names layers and ``functional.activation`` accept: the kinds, their aliases, "linear" (identity) and "softmax".
ACTIVATION_NAMES = ("linear",) + ACTIVATIONS + tuple(ACTIVATION_ALIASES) + ("softmax",)
#: Kinds that ``conv2d_forward`` may fuse: their backward needs only the output y.
FUSED_ACTIVATIONS = ("relu", "sigmoid", "tanh")
#: Kinds whose gradient reads the activation's input (``bias_activation`` keeps it); the others need the output
#: alone.
INPUT_GRAD_ACTIVATIONS = ("leaky_relu", "elu", "gelu", "gelu_tanh", "silu", "softplus", "softsign", "selu",
                          "hard_sigmoid")
#: The default slope/scale ``alpha`` of the kinds that take one, where a layer names the kind: Keras 3's
#: ``keras.activations.leaky_relu`` (negative_slope 0.2) and ``elu`` (alpha 1.0).
DEFAULT_ALPHA = {"leaky_relu": 0.2, "elu": 1.0}
#: SELU's constants (Klambauer et al. 2017; Keras' and PyTorch's values).
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

Pads = tuple[tuple[int, int], tuple[int, int]]


def check_activation(kind, fn: str) -> str:
    """``kind`` if it is one of :data:`ACTIVATIONS`, else a ValueError naming ``fn``."""
    if kind not in ACTIVATIONS:
        raise ValueError(f"{fn}: unknown activation kind {kind!r}; expected one of {ACTIVATIONS}")
    return kind


def activation_name(kind, owner: str):
    """A user-given activation name (any case, from :data:`ACTIVATION_NAMES`; None means linear) as a lower-case
    name, or None for linear; else a ValueError naming ``owner``."""
    if kind is None:
        return None
    if not isinstance(kind, str) or kind.lower() not in ACTIVATION_NAMES:
        raise ValueError(f"{owner}: unknown activation {kind!r}; expected one of {ACTIVATION_NAMES} or None")
    kind = kind.lower()
    kind = ACTIVATION_ALIASES.get(kind, kind)
    return None if kind == "linear" else kind


def int_pair(value, what: str, owner: str, minimum: int = 1) -> tuple[int, int]:
    """``value`` (an integer or a pair of integers, NumPy integers included) as a pair, each >= ``minimum``."""
    kind = type(value)
    if kind is tuple and len(value) == 2:  # the checked form layers keep: returned as it is
        a, b = value
        if type(a) is int and type(b) is int and a >= minimum and b >= minimum:
            return value
    elif kind is int and value >= minimum:
        return value, value
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise TypeError(f"{owner}: {what} must be an int or a pair of ints, got {value!r}")
        pair = (integer(value[0], what, owner), integer(value[1], what, owner))
    else:
        v = integer(value, what, owner)
        pair = (v, v)
    if min(pair) < minimum:
        raise ValueError(f"{owner}: {what} must be >= {minimum}, got {value!r}")
    return pair


def pair(value) -> tuple[int, int]:
    """An op-set size argument (stride, dilation, window: an int or a pair, checked by the caller) as a pair."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int \
            and value[0] >= 0 and value[1] >= 0:
        return value  # the checked form, as int_pair returns it
    return int_pair(value, "size", "op set", 0)


def resolve_padding(in_hw, kernel_hw, stride, padding, dilation=(1, 1), owner: str = "padding") -> Pads:
    """``padding`` (int | pair | ((t, b), (l, r)) | "same" | "valid") as ((top, bottom), (left, right)).

    "same" gives an output of ceil(in / stride) per axis, the extra pixel at the bottom/right.
    """
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, stride, dilation
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return (0, 0), (0, 0)
        if mode != "same":
            raise ValueError(f"{owner}: padding must be 'same', 'valid', an int or pairs of ints, got {padding!r}")
        return _same_padding(int(in_hw[0]), int(in_hw[1]), kh, kw, sh, sw, dh, dw)
    if isinstance(padding, (tuple, list)) and len(padding) == 2 and all(isinstance(p, (tuple, list))
                                                                         for p in padding):
        return int_pair(padding[0], "padding", owner, 0), int_pair(padding[1], "padding", owner, 0)
    ph, pw = int_pair(padding, "padding", owner, 0)
    return (ph, ph), (pw, pw)


@functools.lru_cache(maxsize=256)
def _same_padding(h: int, w: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int) -> Pads:
    """The padding "same" of checked sizes: an output of ceil(in / stride), the extra pixel at the bottom/right."""
    pads = []
    for n, k, s, d in ((h, kh, sh, dh), (w, kw, sw, dw)):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads[0], pads[1]


def pads4(padding) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of an op-set padding: ((t, b), (l, r)), or an int / pair taken as symmetric."""
    if type(padding) is tuple and len(padding) == 2:  # the resolved form: ints >= 0 pass as they are
        vertical, horizontal = padding
        if type(vertical) is tuple and type(horizontal) is tuple and len(vertical) == 2 and len(horizontal) == 2:
            t, b = vertical
            l, r = horizontal
            if type(t) is int and type(b) is int and type(l) is int and type(r) is int and min(t, b, l, r) >= 0:
                return t, b, l, r
    (t, b), (l, r) = resolve_padding((1, 1), (1, 1), (1, 1), padding, owner="pads4")
    return t, b, l, r


def output_hw(in_hw, kernel_hw, stride, pads: Pads, dilation=(1, 1)) -> tuple[int, int]:
    """Output (H, W) of a window op: ``(n + lo + hi - d (k - 1) - 1) // s + 1`` per axis."""
    (h, w), (kh, kw), (sh, sw), ((t, b), (l, r)), (dh, dw) = in_hw, kernel_hw, stride, pads, dilation
    return (h + t + b - dh * (kh - 1) - 1) // sh + 1, (w + l + r - dw * (kw - 1) - 1) // sw + 1


def concat_axis(shapes, axis, fn: str = "concatenate") -> int:
    """``axis`` normalised to ``[0, ndim)`` after checking that the ``shapes`` share a rank and every size but
    ``axis`` (what ``concatenate`` needs on every backend)."""
    first = tuple(shapes[0])
    axis = operator.index(axis)
    if not -len(first) <= axis < len(first):
        raise ValueError(f"{fn}: axis {axis} is out of range for arrays of {len(first)} dimensions")
    axis %= len(first)
    for shape in shapes:
        if len(shape) != len(first) or any(n != m for d, (n, m) in enumerate(zip(shape, first)) if d != axis):
            raise ValueError(f"{fn}: shapes {[tuple(b) for b in shapes]} differ outside axis {axis}")
    return axis


def split_sizes(shape, sizes, axis, fn: str = "split") -> tuple[list[int], int]:
    """``(sizes, axis)`` checked for splitting an array of ``shape``: integer sizes >= 0 adding up to its length
    along ``axis`` (normalised to ``[0, ndim)``)."""
    sizes = [operator.index(n) for n in sizes]
    axis = operator.index(axis) % len(shape)
    if sum(sizes) != shape[axis] or min(sizes) < 0:
        raise ValueError(f"{fn}: sizes {sizes} do not add up to {shape[axis]} (axis {axis} of shape {tuple(shape)})")
    return sizes, axis
