"""Layer base class, the symbolic tensors of the functional API, Input, and the shape errors.

Shapes given to and reported by layers exclude the batch dimension (NCHW: ``(C, H, W)`` per sample).
A layer builds itself (checks its input shape, creates its weights) the first time it sees an input shape, either
symbolically (``y = Dense(10)(x)`` with ``x`` an :class:`Input` or a :class:`SymbolicTensor`) or eagerly (called on
a Tensor / NumPy batch). Layers compute only through ``magmadnn.functional`` so they run on every backend.

The rest of a layer lives beside this module, one idea each: its weights (:mod:`.weights`), masks (:mod:`.masking`),
dtype policy and mixed-precision casts (:mod:`.mixed`), the registry of layer classes with the default names and seeds
(:mod:`.registry`), and the Keras arguments magmadnn refuses (:mod:`.arguments`). Their names stay importable here.
"""

from __future__ import annotations

import inspect
import numbers

import numpy as np

from .. import _checks, initializers
from .. import backend as _backend
from .._checks import shape_str
from .._configurable import Configurable
from ..autograd import Parameter, Tensor, no_grad
from . import keras_style
from . import plans as _layer_plans
from . import registry as _registry
from .arguments import KERAS_DEFAULTS, KERAS_ONLY_ARGUMENTS, _refuse_keras_only  # noqa: F401 - re-exported
from .keras_style import normalise_shapes as _normalise_shapes
from .masking import MaskingMixin
from .mixed import MixedPrecisionMixin, _cast_floats, _compute_of, _is_float  # noqa: F401 - re-exported
from .penalties import PenaltiesMixin
from .registry import _auto_name, _fresh_seed, _snake, derive_seed, layer_class, register  # noqa: F401
from .weights import StateWeight, WeightsMixin

__all__ = ["Layer", "Input", "SymbolicTensor", "ShapeMismatchError", "StateWeight", "derive_seed", "register",
           "layer_class"]


class ShapeMismatchError(ValueError):
    """A layer received an input of the wrong shape or rank; the message names both layers and both shapes."""


class SymbolicTensor:
    """The placeholder output of a layer in a functional graph: a per-sample shape and where it comes from."""

    def __init__(self, shape, layer, parents=(), many: bool = False, index: int | None = None, call=None,
                 masked: bool = False, batched: bool = True):
        # per-sample shape (batch excluded); None: an axis known only at run time (Input((None, 8))); an op node
        # (magmadnn.layers.Operation) may give None for a shape it does not know, or a value without a batch axis
        # (``batched=False``: ``shape`` is then the whole shape)
        self.shape = None if shape is None else tuple(None if s is None else int(s) for s in shape)
        self.batched = batched
        self.layer = layer
        self.parents = tuple(parents)
        self.many = many  # the layer was called on a list of inputs
        # a layer with several outputs (LSTM(return_state=True)): one tensor each, ``index`` among them, all sharing
        # the token ``call`` (the graph runs the layer once per call)
        self.index, self.call = index, call
        self.masked = masked  # carries a mask (Embedding(mask_zero=True) upstream; see Layer.supports_masking)

    @property
    def dtype(self) -> str:
        """Keras' ``KerasTensor.dtype``: the dtype name of the layer's output, its compute dtype (a layer without a
        policy of its own takes its model's when the model is made; float32 or the global policy's until then), or
        an Input's dtype (the data as the model takes it)."""
        if isinstance(self.layer, Input) and self.layer.dtype is not None:
            return self.layer.dtype.name
        return self.layer.compute_dtype

    def __repr__(self) -> str:
        shape = "unknown" if self.shape is None else shape_str(self.shape)
        return f"SymbolicTensor(shape={shape}, from={self.layer.name!r})"


def as_symbolic(obj):
    """An Input layer stands for its output tensor; anything else is returned as is."""
    return obj.output if isinstance(obj, Input) else obj


def _is_symbolic(obj) -> bool:
    return isinstance(obj, (SymbolicTensor, Input))


def _overrides(cls, method: str) -> bool:
    return getattr(cls, method) is not getattr(Layer, method)


class Layer(MaskingMixin, MixedPrecisionMixin, PenaltiesMixin, WeightsMixin, Configurable):
    """Base class.

    magmadnn's own layers implement ``check_input_shape``, ``create_weights``, ``compute_output_shape`` (per-sample
    shapes, batch excluded) and ``call(x, training)``. A subclass defined outside magmadnn that does not implement
    ``create_weights`` is a Keras-style layer: ``build(input_shape)`` creates its weights with
    ``self.add_weight(shape=, initializer=, trainable=, name=)``, ``call(inputs)`` or ``call(inputs, training)``
    computes, and ``compute_output_shape`` is optional (without it the output shape comes from one call on zeros at
    build time); the shapes these methods see include the batch, ``(None, ...)``, as in Keras. ``get_config``
    returns the constructor arguments. Setting a public attribute (a Dropout ``rate``, a momentum) after a step was
    captured makes it captured anew (see :mod:`magmadnn._configurable`).

    Several outputs: ``compute_output_shape`` returns a list of shapes and ``call`` a list of Tensors; a symbolic
    call then returns one SymbolicTensor each. Masks (Keras): a mask (N, T) of 1.0/0.0 rides on a Tensor as
    ``_mask``; a layer with ``supports_masking`` passes it on (``compute_mask``) and, with ``uses_mask``, receives
    it as ``call(x, training, mask=)``; any other layer refuses a masked input (Keras warns and drops the mask).
    """

    _volatile = frozenset({"rng", "_activity_losses", "_plans", "_plans_at"})  # a random stream (graph replay
    # follows it itself); the activity penalties of the current forward pass; the call plans (.plans)
    _keras_style = False
    _call_takes_training = True
    _in_build = False
    _plannable = False  # calls planned per input signature (.plans): set per class
    _plans: dict = {}  # {input signature: plan} (a layer's own dict once it plans)
    _plans_at = None  # the stamp (.plans.stamp) its plans hold for

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        params = inspect.signature(cls.call).parameters
        cls._call_takes_training = "training" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        cls._keras_style = (not cls.__module__.startswith("magmadnn.") and not _overrides(cls, "create_weights")
                            and not _overrides(cls, "check_input_shape"))
        if cls._keras_style and "build" in cls.__dict__:
            cls.build = keras_style.framed(cls.__dict__["build"])
        if cls._keras_style and "call" in cls.__dict__:
            cls.call = keras_style.output_checked(cls.__dict__["call"])
        cls._plannable = _layer_plans.plannable(cls)

    def __init__(self, name: str | None = None, dtype=None, seed: int | None = None, trainable: bool = True,
                 input_shape=None, input_dim=None, activity_regularizer=None, **keras_only):
        """``input_shape`` / ``input_dim``: Keras' first-layer shorthand; a ``Sequential`` starting with this layer
        puts ``Input(input_shape)`` first (elsewhere it is ignored, as in Keras). Other Keras-only arguments are a
        TypeError naming the magmadnn way (see :data:`KERAS_ONLY_ARGUMENTS`)."""
        _refuse_keras_only(type(self).__name__, self._take_weight_options(keras_only))
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        self._keras_input_shape = None if input_shape is None else tuple(
            int(d) for d in ((input_shape,) if isinstance(input_shape, numbers.Integral) else input_shape))
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"{type(self).__name__}: name must be a non-empty str, got {name!r}")
        if not isinstance(trainable, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: trainable must be True or False, got {trainable!r}")
        self.name = name or _auto_name(type(self))
        self._trainable = bool(trainable)
        self._fixed: set[str] = set()  # weights created with add_weight(trainable=False)
        self._early: dict[str, tuple] = {}  # weights created before build (in __init__): re-made at each build
        self._set_policy(dtype)
        self.dtype = self._user_dtype if self._user_dtype is not None else np.dtype(np.float32)  # until configured
        self.seed = seed
        self.xp = None
        self.built = False
        self.input_shape = None
        self.output_shape = None
        self._params: dict[str, Parameter] = {}
        self._state: dict[str, object] = {}
        self._source = "its input"
        if activity_regularizer is not None:
            self.activity_regularizer = activity_regularizer

    def __setattr__(self, name: str, value) -> None:
        Configurable.__setattr__(self, name, value)
        if name[0] != "_":  # a public attribute may change what a call decides: the call plans go (.plans)
            self.__dict__["_plans_at"] = None

    def __getattr__(self, name: str):
        """Keras' attribute access to a layer's weights (``dense.kernel``, ``dense.bias``, ``embedding.embeddings``):
        the parameter of that name, once built. Called only when normal lookup fails."""
        params = self.__dict__.get("_params")
        if params is not None and name in params:
            return params[name]
        if name in ("input", "output"):  # the properties found no symbolic call
            raise AttributeError(f"layer {self.__dict__.get('name')!r} has never been called on symbolic inputs (an "
                                 f"Input or another layer's output), so it has no {name}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- Keras' layer.input and layer.output: those of the first call on symbolic inputs
    @property
    def input(self):
        """The symbolic input (or list of them) of the layer's first call on symbolic inputs (Keras')."""
        return self.__dict__["_first_symbolic_call"][0] if "_first_symbolic_call" in self.__dict__ else \
            self.__getattr__("input")

    @property
    def output(self):
        """The symbolic output (or list of them) of the layer's first call on symbolic inputs (Keras')."""
        return self.__dict__["_first_symbolic_call"][1] if "_first_symbolic_call" in self.__dict__ else \
            self.__getattr__("output")

    # -- building
    def build(self, input_shape) -> None:
        """magmadnn's layers: build for the per-sample ``input_shape`` (see :meth:`_build`). A Keras-style layer
        overrides it to create its weights (``input_shape`` then includes the batch: ``(None, ...)``)."""
        if not self._keras_style:
            self._build(input_shape)

    def _setup(self) -> None:
        """Backend, dtype, seed and the initializers' stream (before any weight is made)."""
        if self.xp is None:
            self.xp = _backend.get()
        if self.dtype is None:
            self.dtype = np.dtype(np.float32)
        if getattr(self, "_build_seed", None) is None:
            self._build_seed = _fresh_seed()
        self._init_rng = self.xp.rng(derive_seed(self._build_seed, 0))

    def _build(self, input_shape, remake: bool = False) -> None:
        """Check ``input_shape`` (per sample, or a list of them), create the weights, fix the output shape
        (``remake``: the weights made before build are drawn again, on the current backend, dtype and seed)."""
        self._setup()
        self._remake_early(remake)
        input_shape = _normalise_shapes(input_shape)
        self._in_build = True
        try:
            if self._keras_style:
                self._build_keras(input_shape)
                return
            self.check_input_shape(input_shape)
            output_shape = self.compute_output_shape(input_shape)
            self.create_weights(input_shape)
            self.input_shape, self.output_shape, self.built = input_shape, output_shape, True
        finally:
            self._in_build = False

    def _remake_early(self, remake: bool) -> None:
        """Put the weights made before build (Keras lets ``__init__`` make them) back first, in the same Parameter
        objects; drawn again from the layer's seed where the backend, dtype or seed changed or ``remake``."""
        for name, (param, shape, initializer, given, made) in self._early.items():
            dtype = self.dtype if given is None else given
            now = (self.xp, dtype, self._build_seed)
            if remake or made != now:
                param.data, param.xp, param.grad = initializers.get(initializer)(shape, dtype, self.xp,
                                                                                 self._init_rng), self.xp, None
                self._early[name] = (param, shape, initializer, given, now)
            self._params[name] = param

    def _build_keras(self, input_shape) -> None:
        """A Keras-style layer: ``build`` and ``compute_output_shape`` see batch-included shapes; without
        ``compute_output_shape`` the output shape is that of one call on zeros (batch of 1)."""
        batched = [(None, *s) for s in input_shape] if isinstance(input_shape, list) else (None, *input_shape)
        if _overrides(type(self), "build"):
            type(self).build(self, batched)
        self.input_shape, self.built = input_shape, True
        self._shape_source = "compute_output_shape" if _overrides(type(self), "compute_output_shape") else \
            "its first call"
        if _overrides(type(self), "compute_output_shape"):
            out = self.compute_output_shape(batched)
        else:
            shapes = input_shape if isinstance(input_shape, list) else [input_shape]
            zeros = [Tensor(self.xp.zeros((2, *s), self.dtype), backend=self.xp) for s in shapes]  # 2: a call
            # reducing over the batch axis shows
            with no_grad():
                y = self._run(zeros if isinstance(input_shape, list) else zeros[0], False)
            if not isinstance(y, Tensor):
                self.built = False
                raise TypeError(f"{type(self).__name__} layer {self.name!r}: call() must return one Tensor, got "
                                f"{type(y).__name__}")
            out = y.shape
        out = tuple(out)
        if not out or (out[0] is not None and out[0] != 2 and not _overrides(type(self), "compute_output_shape")):
            self.built = False
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: call() returned shape {out} for a batch of "
                             "2: an output needs one row per sample (no batch axis, or a reduction over axis 0, the "
                             "batch, mixes samples; reduce over the other axes, e.g. axis=-1)")
        self.output_shape = keras_style.declared_shape(self, out)

    def _run(self, x, training: bool, **mask):
        """``call``, with ``training`` only when the layer's ``call`` takes it (and ``mask=`` when given); under a
        mixed policy through :meth:`_call_mixed`; an activity regularizer's penalty recorded (``losses``)."""
        if self._compute is not None:
            out = self._call_mixed(x, lambda x: self._call(x, training, mask))
        else:
            dtype = self.dtype
            if dtype is not None and dtype.kind == "f" and not (x.__class__ is Tensor and x.data.dtype == dtype):
                # as Keras: a half output of a mixed layer is cast to this layer's dtype; any float input too when
                # the layer was given its dtype (float32 into float64); an input of the layer's dtype as it is
                if x.__class__ is list:
                    for t in x:  # several inputs (Add): cast only when one is not of the layer's dtype
                        if not (t.__class__ is Tensor and t.data.dtype == dtype):
                            x = _cast_floats(x, dtype, halves_only=self._user_dtype is None)
                            break
                else:
                    x = _cast_floats(x, dtype, halves_only=self._user_dtype is None)
            if mask:
                out = self.call(x, training=training, **mask)
            else:
                out = self.call(x, training=training) if self._call_takes_training else self.call(x)
        if self._activity is not None:
            self._record_activity(out)
        return out

    def _call(self, x, training, mask):
        if mask:
            return self.call(x, training=training, **mask)
        return self.call(x, training=training) if self._call_takes_training else self.call(x)

    def _plan_call(self, x, training: bool):
        """The plan of a call on ``x`` that just ran in full (:mod:`.plans`): a function ``run(layer, x)`` (two
        Tensors: ``run(a, b)``) doing what ``call`` does for inputs of ``x``'s shapes and dtypes and this ``training``,
        without the checks and decisions the full call made; None: such calls always run in full."""
        return None

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

    # -- calling
    def __call__(self, inputs, training: bool = False):
        if inputs.__class__ is Tensor and training.__class__ is bool and self.built and \
                self.__dict__.get("_source") == "the data" and inputs.data.shape[1:] == self.input_shape:
            if self._activity_losses:  # (called on a batch of the shape it was built on: nothing to check or build)
                self._activity_losses = []
            return self.call_masked(inputs, training)
        if training.__class__ is not bool:  # layer(a, b) is not a two-input call: b would be read as training
            if training is not None and not isinstance(training, np.bool_):
                raise TypeError(f"layer {self.name!r}: training must be True, False or None, got "
                                f"{type(training).__name__}; a layer of several inputs takes them as one list, "
                                "layer([a, b])")
            training = bool(training)
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
            self._symbolic_build(parents, shapes if many else shapes[0], sources)
            out_masked = self.output_masked(masked if many else masked[0])
            if isinstance(self.output_shape, list):
                token = object()
                out = [SymbolicTensor(shape, self, parents, many, index=k, call=token, masked=bool(out_masked[k]))
                       for k, shape in enumerate(self.output_shape)]
            else:
                out = SymbolicTensor(self.output_shape, self, parents, many, masked=bool(out_masked))
            self.__dict__.setdefault("_first_symbolic_call", (parents if many else parents[0], out))
            return out
        tensors = [self._as_tensor(i) for i in items]
        shapes = [t.shape[1:] for t in tensors]
        self._ensure_built(shapes if many else shapes[0], "the data")
        if self._activity_losses:  # Keras: an outermost call starts the layer's losses anew
            self._activity_losses = []
        return self.call_masked(tensors if many else tensors[0], training)

    def _symbolic_build(self, parents, shapes, sources: str) -> None:
        """Build on symbolic inputs: each must have a batch axis and a known shape; a layer that cannot take an axis
        known only at run time (None) says so, naming the layer and the axis."""
        for p in parents:
            if not p.batched or p.shape is None:
                what = "has no batch axis" if not p.batched else "has a shape known only at run time"
                raise self.shape_error(f"inputs with a batch axis and a known per-sample shape; the input from "
                                       f"layer {p.layer.name!r} {what}", p.shape or ())
        unknown = any(s is None for shape in (shapes if isinstance(shapes, list) else [shapes]) for s in shape)
        if not unknown:
            self._ensure_built(shapes, sources)
            return
        try:
            self._ensure_built(shapes, sources)
        except TypeError as exc:
            raise self.shape_error(f"every axis fixed (an axis given as None is known only at run time, which this "
                                   f"layer cannot take: {exc}); give that axis a size in Input", shapes) from None

    def _as_tensor(self, x):
        if isinstance(x, Tensor):
            return x
        xp = self.xp or _backend.get()
        return Tensor(xp.asarray(np.asarray(x), self.dtype or np.float32), backend=xp)

    def _ensure_built(self, input_shape, source: str) -> None:
        input_shape = _normalise_shapes(input_shape)
        if self.__dict__.get("_source") != source:
            self._source = source
        if not self.built:
            self._build(input_shape)
            self._weights_kept = self._has_values = source == "the data"  # symbolic: the model draws them
        elif input_shape != self.input_shape and not (source == "the data" and self._takes(input_shape)):
            expected = (", ".join(shape_str(s) for s in self.input_shape) if isinstance(self.input_shape, list)
                        else shape_str(self.input_shape))
            raise self.shape_error(f"per-sample input shape {expected} (the shape it was built with)", input_shape)

    def _takes(self, input_shape) -> bool:
        """Whether a layer built on one shape also takes ``input_shape`` called on data (a subclassed model's next
        batch): the axes that differ must be ones the layer could have been built with as None (known only at run
        time: a sequence's length, an image's size), so that its weights do not depend on them."""
        taken = self.__dict__.setdefault("_taken_shapes", set())
        key = repr(input_shape)
        if key in taken:
            return True
        built = self.input_shape
        if isinstance(built, list) or isinstance(input_shape, list) or len(built) != len(input_shape) \
                or self._keras_style:
            return False
        general = tuple(None if a != b else a for a, b in zip(built, input_shape))
        try:
            self.check_input_shape(general)
            self.compute_output_shape(general)
        except (TypeError, ValueError):
            return False
        taken.add(key)
        return True

    def call(self, x, training: bool = False):
        raise NotImplementedError

    # -- configuration
    def get_config(self) -> dict:
        config = {"name": self.name, "trainable": self._trainable}
        if self._user_dtype is not None:
            config["dtype"] = self._user_policy.name if self._user_policy is not None else self._user_dtype.name
        if self.seed is not None:
            config["seed"] = self.seed
        return {**config, **self._penalty_config()}

    @classmethod
    def from_config(cls, config: dict):
        try:
            return cls(**config)
        except TypeError as exc:
            if cls.__module__.startswith("magmadnn."):
                raise
            raise ValueError(f"{cls.__name__}.from_config: its constructor does not take the configuration "
                             f"{sorted(config)} ({exc}); let __init__ take **kwargs and pass them to "
                             "super().__init__(**kwargs), and return the other arguments from get_config (or override "
                             "from_config)") from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


_registry._LAYER.append(Layer)  # what register() accepts


@register
class Input(Layer):
    """The entry of a model: ``Input((1, 28, 28))`` (per-sample shape, batch excluded).

    In the functional API an Input stands for its own output tensor: ``y = Dense(10)(Input((784,)))``. An axis
    given as None is known only at run time (Keras' ``Input((None, 8))`` for sequences of any length,
    ``Input((3, None, None))`` for images of any size): each batch brings its own size. ``batch_size`` (Keras')
    fixes the batch size (``batch_shape=(B, ...)`` says the same in one tuple): ``fit`` and ``predict`` then run
    batches of exactly that size. ``batched=False`` (magmadnn's): the input has no batch axis, ``shape`` is its whole
    shape and the same array goes whole to every batch (an ONNX graph input holding weights or a shape).
    """

    def __init__(self, shape=None, name: str | None = None, dtype=None, batch_size=None, batch_shape=None, *,
                 batched: bool = True, **keras_only):
        super().__init__(name=name, dtype=dtype, **keras_only)
        if batch_shape is not None:
            if shape is not None or batch_size is not None:
                raise ValueError("Input: give either shape= (and batch_size=) or batch_shape=, not both")
            batch_shape = tuple(batch_shape)
            if not batch_shape:
                raise ValueError("Input: batch_shape must hold the batch axis first, got ()")
            batch_size, shape = batch_shape[0], batch_shape[1:]
        if shape is None:
            raise TypeError("Input: shape is required (the per-sample shape, batch excluded)")
        if not isinstance(shape, (tuple, list, np.ndarray)):
            shape = (shape,)
        where = f"Input (shape {tuple(shape)!r}, batch excluded)"
        shape = tuple(None if s is None else _checks.integer(s, "shape entry", where) for s in shape)
        if any(s is not None and s < (1 if batched else 0) for s in shape):
            raise ValueError(f"Input: shape must be positive sizes or None (batch excluded), got {shape!r}")
        self.batch_size = None if batch_size is None else _checks.integer(batch_size, "batch_size", "Input",
                                                                            minimum=1)
        self.batched = bool(batched)
        self.shape = shape
        self.input_shape = self.output_shape = shape
        self.built = True
        out = SymbolicTensor(shape, self, (), batched=self.batched)
        self._first_symbolic_call = (out, out)  # Keras' InputLayer: its input and output are its tensor

    def call(self, x, training: bool = False):
        return x

    def get_config(self) -> dict:
        config = super().get_config()
        del config["trainable"]
        extra = {"batch_size": self.batch_size} if self.batch_size is not None else {}
        if not self.batched:
            extra["batched"] = False
        return {"shape": list(self.shape), **extra, **config}

