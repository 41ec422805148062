"""Layer base class, the symbolic tensors of the functional API, Input, and the shape errors.

Shapes given to and reported by layers exclude the batch dimension (NCHW: ``(C, H, W)`` per sample).
A layer builds itself (checks its input shape, creates its weights) the first time it sees an input shape, either
symbolically (``y = Dense(10)(x)`` with ``x`` an :class:`Input` or a :class:`SymbolicTensor`) or eagerly (called on
a Tensor / NumPy batch). Layers compute only through ``magmadnn.functional`` so they run on every backend.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from .. import _checks, initializers
from .. import backend as _backend
from .._checks import shape_str
from ..autograd import Parameter, Tensor

__all__ = ["Layer", "Input", "SymbolicTensor", "ShapeMismatchError", "derive_seed", "register", "layer_class"]


class ShapeMismatchError(ValueError):
    """A layer received an input of the wrong shape or rank; the message names both layers and both shapes."""


_REGISTRY: dict[str, type] = {}
_NAME_COUNTS: Counter = Counter()


def register(cls):
    """Class decorator: make a layer class known to ``layer_class`` (used when rebuilding models from JSON)."""
    _REGISTRY[cls.__name__] = cls
    return cls


def layer_class(name: str) -> type:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown layer class {name!r}; known layers: {sorted(_REGISTRY)}") from None


def _snake(name: str) -> str:
    """Keras' default layer names: ``Conv2DTranspose`` -> ``conv2d_transpose``, ``RMSNorm`` -> ``rms_norm``."""
    words = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", words).lower()


def _auto_name(cls) -> str:
    base = _snake(cls.__name__)
    count = _NAME_COUNTS[base]
    _NAME_COUNTS[base] += 1
    return base if count == 0 else f"{base}_{count}"


def derive_seed(seed: int, *tags: int) -> int:
    """A deterministic 32-bit seed from ``seed`` and integer tags (distinct tags give independent streams)."""
    return int(np.random.SeedSequence([int(seed), *(int(t) for t in tags)]).generate_state(1)[0])


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0])


class SymbolicTensor:
    """The placeholder output of a layer in a functional graph: a per-sample shape and where it comes from."""

    def __init__(self, shape, layer, parents=(), many: bool = False, index: int | None = None, call=None,
                 masked: bool = False):
        self.shape = tuple(int(s) for s in shape)
        self.layer = layer
        self.parents = tuple(parents)
        self.many = many  # the layer was called on a list of inputs
        # a layer with several outputs (LSTM(return_state=True)): one tensor each, ``index`` among them, all sharing
        # the token ``call`` (the graph runs the layer once per call)
        self.index, self.call = index, call
        self.masked = masked  # carries a mask (Embedding(mask_zero=True) upstream; see Layer.supports_masking)

    def __repr__(self) -> str:
        return f"SymbolicTensor(shape={shape_str(self.shape)}, from={self.layer.name!r})"


def as_symbolic(obj):
    """An Input layer stands for its output tensor; anything else is returned as is."""
    return obj.output if isinstance(obj, Input) else obj


def _is_symbolic(obj) -> bool:
    return isinstance(obj, (SymbolicTensor, Input))


class Layer:
    """Base class. Subclasses implement ``check_input_shape``, ``create_weights``, ``compute_output_shape`` and
    ``call(x, training)``; ``get_config`` returns the constructor arguments.

    Several outputs: ``compute_output_shape`` returns a list of shapes and ``call`` a list of Tensors; a symbolic
    call then returns one SymbolicTensor each. Masks (Keras): a mask (N, T) of 1.0/0.0 rides on a Tensor as
    ``_mask``; a layer with ``supports_masking`` passes it on (``compute_mask``) and, with ``uses_mask``, receives
    it as ``call(x, training, mask=)``; any other layer refuses a masked input (Keras warns and drops the mask).
    """

    supports_masking = False
    uses_mask = False
    makes_mask = False  # makes a mask of its own (Embedding(mask_zero=True))

    def __init__(self, name: str | None = None, dtype=None, seed: int | None = None):
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"{type(self).__name__}: name must be a non-empty str, got {name!r}")
        self.name = name or _auto_name(type(self))
        self._user_dtype = None if dtype is None else np.dtype(dtype)
        self.dtype = self._user_dtype
        self.seed = seed
        self.xp = None
        self.built = False
        self.input_shape = None
        self.output_shape = None
        self._params: dict[str, Parameter] = {}
        self._state: dict[str, object] = {}
        self._source = "its input"

    # -- configuration by the owning model
    def configure(self, backend=None, dtype=None, seed: int | None = None, force: bool = False) -> None:
        """Set backend, dtype and seed (a dtype or seed given to the layer itself wins). A built layer whose settings
        change (or with ``force``) is rebuilt: its weights are re-created from the seed."""
        xp = _backend.get(backend)
        dtype = self._user_dtype if self._user_dtype is not None else np.dtype(dtype or np.float32)
        seed = self.seed if self.seed is not None else seed
        if self.built and not force and (xp, dtype, seed) == (self.xp, self.dtype, getattr(self, "_build_seed", None)):
            return
        self.xp, self.dtype, self._build_seed = xp, dtype, seed
        if self.built:
            self._params.clear()
            self._state.clear()
            self.built = False
            self.build(self.input_shape)

    def move_to(self, backend, move) -> None:
        """Put the weights and state arrays on ``backend`` as they are (``move(array)`` copies one array there);
        gradients are dropped. The random streams are moved by the owning model."""
        for param in self._params.values():
            param.data, param.xp, param.grad = move(param.data), backend, None
        for name, array in self._state.items():
            self._state[name] = move(array)
        self.xp = backend

    # -- building
    def build(self, input_shape) -> None:
        """Check ``input_shape`` (per sample, or a list of them), create the weights, fix the output shape."""
        if self.xp is None:
            self.xp = _backend.get()
        if self.dtype is None:
            self.dtype = np.dtype(np.float32)
        if getattr(self, "_build_seed", None) is None:
            self._build_seed = _fresh_seed()
        input_shape = _normalise_shapes(input_shape)
        self.check_input_shape(input_shape)
        output_shape = self.compute_output_shape(input_shape)
        self._init_rng = self.xp.rng(derive_seed(self._build_seed, 0))
        self.create_weights(input_shape)
        self.input_shape, self.output_shape, self.built = input_shape, output_shape, True

    def check_input_shape(self, input_shape) -> None:
        """Raise ShapeMismatchError (via ``self.shape_error``) for an input this layer cannot take."""

    def create_weights(self, input_shape) -> None:
        """Create parameters with ``add_weight`` and state arrays with ``add_state``."""

    def compute_output_shape(self, input_shape):
        return input_shape

    def shape_error(self, expected: str, got) -> ShapeMismatchError:
        got_text = ", ".join(shape_str(s) for s in got) if isinstance(got, list) else shape_str(got)
        return ShapeMismatchError(
            f"{type(self).__name__} layer {self.name!r} expects {expected}; got per-sample shape {got_text} "
            f"from {self._source}"
        )

    def check_rank(self, input_shape, ranks: tuple[int, ...], what: str) -> None:
        if isinstance(input_shape, list) or len(input_shape) not in ranks:
            raise self.shape_error(what, input_shape)

    def add_weight(self, name: str, shape, initializer) -> Parameter:
        data = initializers.get(initializer)(tuple(shape), self.dtype, self.xp, self._init_rng)
        param = Parameter(data, name=f"{self.name}/{name}", backend=self.xp)
        self._params[name] = param
        return param

    def add_state(self, name: str, array) -> None:
        self._state[name] = array

    # -- calling
    def __call__(self, inputs, training: bool = False):
        many = isinstance(inputs, (list, tuple))
        items = list(inputs) if many else [inputs]
        if any(_is_symbolic(i) for i in items):
            if not all(_is_symbolic(i) for i in items):
                raise TypeError(f"layer {self.name!r}: cannot mix symbolic inputs (Input / layer outputs) with "
                                "concrete tensors in one call")
            parents = [as_symbolic(i) for i in items]
            shapes = [p.shape for p in parents]
            sources = ", ".join(f"layer {p.layer.name!r} ({type(p.layer).__name__})" for p in parents)
            masked = [p.masked for p in parents]
            if any(masked) and not self.supports_masking:
                raise self._mask_error(sources)
            self._ensure_built(shapes if many else shapes[0], sources)
            out_masked = self.output_masked(masked if many else masked[0])
            if isinstance(self.output_shape, list):
                token = object()
                return [SymbolicTensor(shape, self, parents, many, index=k, call=token, masked=bool(out_masked[k]))
                        for k, shape in enumerate(self.output_shape)]
            return SymbolicTensor(self.output_shape, self, parents, many, masked=bool(out_masked))
        tensors = [self._as_tensor(i) for i in items]
        shapes = [t.shape[1:] for t in tensors]
        self._ensure_built(shapes if many else shapes[0], "the data")
        return self.call_masked(tensors if many else tensors[0], training)

    # -- masks
    def call_masked(self, inputs, training: bool = False):
        """``call`` with the masks riding on the Tensors: the input's mask given to a layer that ``uses_mask``,
        the output's (``compute_mask``) attached to it; a masked input to a layer without masking is an error."""
        many = isinstance(inputs, list)
        if not many and not self.makes_mask and getattr(inputs, "_mask", None) is None:
            return self.call(inputs, training=training)  # the common case, at the cost of one attribute look-up
        masks = [getattr(t, "_mask", None) for t in (inputs if many else [inputs])]
        mask = masks if many else masks[0]
        if all(m is None for m in masks):
            mask = None
        elif not self.supports_masking:
            raise self._mask_error(self._source)
        if self.uses_mask:
            out = self.call(inputs, training=training, mask=mask)
        else:
            out = self.call(inputs, training=training)
        out_mask = self.compute_mask(inputs, mask)
        if out_mask is not None:
            for tensor, m in zip(out, out_mask) if isinstance(out, list) else [(out, out_mask)]:
                if m is not None:
                    tensor._mask = m
        return out

    def compute_mask(self, inputs, mask):
        """The output's mask (a list for several outputs) from the input's: passed on by default."""
        return mask if self.supports_masking and not isinstance(mask, list) else None

    def output_masked(self, masked):
        """Whether the output carries a mask (a list for several outputs), given whether the input does."""
        return self.supports_masking and masked is True

    def _mask_error(self, source) -> ValueError:
        return ValueError(
            f"{type(self).__name__} layer {self.name!r} does not support masking, but its input from {source} "
            "carries the mask of an Embedding(mask_zero=True); layers that use or pass on a mask: LSTM, GRU, "
            "Bidirectional, GlobalAveragePooling1D, MultiHeadAttention, Dense, Dropout, Activation, "
            "LayerNormalization, Lambda(mask=...). Keras would drop the mask here with a warning; to do that, "
            "remove mask_zero=True")

    def _as_tensor(self, x):
        if isinstance(x, Tensor):
            return x
        xp = self.xp or _backend.get()
        return Tensor(xp.asarray(np.asarray(x), self.dtype or np.float32), backend=xp)

    def _ensure_built(self, input_shape, source: str) -> None:
        input_shape = _normalise_shapes(input_shape)
        self._source = source
        if not self.built:
            self.build(input_shape)
        elif input_shape != self.input_shape:
            expected = (", ".join(shape_str(s) for s in self.input_shape) if isinstance(self.input_shape, list)
                        else shape_str(self.input_shape))
            raise self.shape_error(f"per-sample input shape {expected} (the shape it was built with)", input_shape)

    def call(self, x, training: bool = False):
        raise NotImplementedError

    # -- weights
    @property
    def weights(self) -> dict[str, Parameter]:
        """Trainable parameters by short name ("kernel", "bias", ...)."""
        return dict(self._params)

    @property
    def state(self) -> dict[str, object]:
        """Non-trainable state arrays by short name (BatchNorm running statistics)."""
        return dict(self._state)

    def parameters(self) -> list[Parameter]:
        return list(self._params.values())

    def count_params(self) -> int:
        return sum(math.prod(p.shape) for p in self._params.values())

    def count_state(self) -> int:
        return sum(math.prod(tuple(a.shape)) for a in self._state.values())

    # -- configuration
    def get_config(self) -> dict:
        config = {"name": self.name}
        if self._user_dtype is not None:
            config["dtype"] = self._user_dtype.name
        if self.seed is not None:
            config["seed"] = self.seed
        return config

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _normalise_shapes(shape):
    if isinstance(shape, list):
        return [tuple(int(s) for s in one) for one in shape]
    return tuple(int(s) for s in shape)


@register
class Input(Layer):
    """The entry of a model: ``Input((1, 28, 28))`` (per-sample shape, batch excluded).

    In the functional API an Input stands for its own output tensor: ``y = Dense(10)(Input((784,)))``.
    """

    def __init__(self, shape, name: str | None = None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        if not isinstance(shape, (tuple, list, np.ndarray)):
            shape = (shape,)
        shape = tuple(_checks.integer(s, "shape entry", f"Input (shape {shape!r}, batch excluded)") for s in shape)
        if not shape or any(s < 1 for s in shape):
            raise ValueError(f"Input: shape must be non-empty positive sizes (batch excluded), got {shape!r}")
        self.shape = shape
        self.input_shape = self.output_shape = shape
        self.built = True
        self.output = SymbolicTensor(shape, self, ())

    def call(self, x, training: bool = False):
        return x

    def get_config(self) -> dict:
        return {"shape": list(self.shape), **super().get_config()}
