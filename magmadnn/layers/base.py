"""Layer base class, the symbolic tensors of the functional API, Input, and the shape errors.

Shapes given to and reported by layers exclude the batch dimension (NCHW: ``(C, H, W)`` per sample).
A layer builds itself (checks its input shape, creates its weights) the first time it sees an input shape, either
symbolically (``y = Dense(10)(x)`` with ``x`` an :class:`Input` or a :class:`SymbolicTensor`) or eagerly (called on
a Tensor / NumPy batch). Layers compute only through ``magmadnn.functional`` so they run on every backend.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
from collections import Counter

import numpy as np

from .. import _checks, initializers, mixed_precision
from .. import backend as _backend
from .. import functional as F
from .._checks import shape_str
from .._configurable import Configurable
from ..autograd import Parameter, Tensor, no_grad, note_trainable_change

__all__ = ["Layer", "Input", "SymbolicTensor", "ShapeMismatchError", "StateWeight", "derive_seed", "register",
           "layer_class"]


class ShapeMismatchError(ValueError):
    """A layer received an input of the wrong shape or rank; the message names both layers and both shapes."""


_REGISTRY: dict[str, type] = {}
_NAME_COUNTS: Counter = Counter()


def register(cls=None, *, package: str | None = None, name: str | None = None):
    """Class decorator: make a layer class known by its class name to ``layer_class`` (used when rebuilding models
    from a configuration or a file). ``@register`` and ``@register()`` both work (Keras'
    ``@keras.saving.register_keras_serializable()``; ``package`` is accepted and unused: files store class names)."""
    def add(cls):
        if not (isinstance(cls, type) and issubclass(cls, Layer)):
            raise TypeError(f"register: expected a Layer subclass, got {cls!r}")
        for key in {cls.__name__, name or cls.__name__}:  # files store the class name; ``name`` is an alias
            known = _REGISTRY.get(key)
            if known is not None and known.__module__.startswith("magmadnn.") and \
                    not cls.__module__.startswith("magmadnn."):
                raise ValueError(f"register: {key!r} is magmadnn's built-in {known.__module__}.{key}; give the "
                                 "custom layer class another name")
            _REGISTRY[key] = cls
        return cls

    return add if cls is None else add(cls)


def layer_class(name: str, custom_objects: dict | None = None) -> type:
    """The layer class stored under ``name``: from ``custom_objects`` first, then the registered classes."""
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown layer class {name!r}: decorate its class with @magmadnn.layers.register (before loading), or "
            f"pass custom_objects={{{name!r}: {name}}} to load_model / model_from_config; known layers: "
            f"{sorted(_REGISTRY)}") from None


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


class StateWeight:
    """A non-trainable state array of a layer (BatchNorm's running statistics) seen as a weight, as in Keras'
    ``layer.weights``: a view of ``layer.state[key]`` (it follows the array when the layer replaces it)."""

    trainable = False

    def __init__(self, layer, key: str):
        self._layer, self._key = layer, key
        self.name = f"{layer.name}/{key}"

    path = property(lambda self: self.name)

    @property
    def data(self):
        return self._layer._state[self._key]

    @data.setter
    def data(self, array) -> None:
        self._layer._state[self._key] = array

    shape = property(lambda self: tuple(self.data.shape))
    dtype = property(lambda self: self.data.dtype)

    def numpy(self) -> np.ndarray:
        return self._layer.xp.to_numpy(self.data)

    def assign(self, value) -> None:
        value = np.broadcast_to(np.asarray(value.numpy() if hasattr(value, "numpy") else value), self.shape)
        self.data = self._layer.xp.asarray(np.array(value, dtype=self.dtype))

    def __repr__(self) -> str:
        return f"StateWeight({self.name!r}, shape={self.shape}, trainable=False)"


def _overrides(cls, method: str) -> bool:
    return getattr(cls, method) is not getattr(Layer, method)


def _framed(build):
    """A Keras-style ``build``: called by the layer's own building (batch-included shapes) it runs as written;
    called by hand (``layer.build((None, 4))``, as in Keras) it builds the layer through the framework."""
    @functools.wraps(build)
    def framed(self, input_shape):
        if self._in_build:
            return build(self, input_shape)
        many = isinstance(input_shape, list) and all(isinstance(s, (tuple, list)) for s in input_shape)
        shapes = _normalise_shapes([list(s)[1:] for s in input_shape] if many else tuple(input_shape)[1:])
        if not self.built:
            self._build(shapes)
        return None

    return framed


class Layer(Configurable):
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

    supports_masking = False
    uses_mask = False
    makes_mask = False  # makes a mask of its own (Embedding(mask_zero=True))
    _volatile = frozenset({"rng"})  # a random stream: graph replay follows it itself
    _keras_style = False
    _call_takes_training = True
    _in_build = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        params = inspect.signature(cls.call).parameters
        cls._call_takes_training = "training" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        cls._keras_style = (not cls.__module__.startswith("magmadnn.") and not _overrides(cls, "create_weights")
                            and not _overrides(cls, "check_input_shape"))
        if cls._keras_style and "build" in cls.__dict__:
            cls.build = _framed(cls.__dict__["build"])

    def __init__(self, name: str | None = None, dtype=None, seed: int | None = None, trainable: bool = True,
                 input_shape=None, input_dim=None, **keras_only):
        """``input_shape`` / ``input_dim``: Keras' first-layer shorthand; a ``Sequential`` starting with this layer
        puts ``Input(input_shape)`` first (elsewhere it is ignored, as in Keras). Other Keras-only arguments are a
        TypeError naming the magmadnn way (see :data:`KERAS_ONLY_ARGUMENTS`)."""
        _refuse_keras_only(type(self).__name__, keras_only)
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

    # -- dtype policy (Keras 3): weights in the variable dtype, computation in the compute dtype
    def _set_policy(self, dtype) -> None:
        """The layer's own policy from its ``dtype`` argument: a policy name or DTypePolicy; None takes the global
        policy now (Keras) when one was set, else the owning model's; an integer dtype (an Input of token ids)
        stays a plain dtype."""
        if dtype is not None and not isinstance(dtype, (str, mixed_precision.DTypePolicy, dict)) or \
                isinstance(dtype, str) and dtype.startswith(("int", "uint", "bool")):
            try:
                self._user_policy, self._user_dtype = None, np.dtype(dtype)
            except TypeError:
                raise TypeError(f"layer {self.name!r}: dtype must be a policy name (such as 'mixed_bfloat16'), a "
                                f"magmadnn DTypePolicy or a NumPy dtype, got {dtype!r} (of type "
                                f"{type(dtype).__name__})") from None
            if self._user_dtype.kind not in "iub":  # a float dtype: its policy (float16/bfloat16 refused there)
                self._user_policy = mixed_precision.get(self._user_dtype.name)
        else:
            policy = mixed_precision.get(dtype) if dtype is not None else mixed_precision.global_policy()
            if dtype is None and policy.name == "float32":
                policy = None  # the default: the owning model's policy
            self._user_policy = policy
            self._user_dtype = None if policy is None else mixed_precision.numpy_dtype(policy.variable_dtype)
        self._policy = self._user_policy
        self._compute = _compute_of(self._policy)

    @property
    def dtype_policy(self) -> mixed_precision.DTypePolicy:
        """The layer's DTypePolicy: its own, else its model's (Keras' ``layer.dtype_policy``)."""
        if self._policy is not None:
            return self._policy
        dtype = self.dtype if self.dtype is not None else np.dtype(np.float32)
        return mixed_precision.DTypePolicy(dtype.name) if dtype.kind == "f" else mixed_precision.global_policy()

    @dtype_policy.setter
    def dtype_policy(self, value) -> None:
        policy = mixed_precision.get(value)
        if self.built and self.dtype is not None and policy.variable_dtype != self.dtype.name:
            raise ValueError(f"layer {self.name!r}: its weights are {self.dtype.name}; a policy with variable dtype "
                             f"{policy.variable_dtype} needs a layer built anew")
        self._user_policy = self._policy = policy
        self._user_dtype = mixed_precision.numpy_dtype(policy.variable_dtype)
        self._compute = _compute_of(policy)

    @property
    def compute_dtype(self) -> str:
        """The dtype the layer computes in (str), Keras' ``layer.compute_dtype``."""
        if self._user_dtype is not None and self._user_dtype.kind in "iub":
            return self._user_dtype.name
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        """The dtype of the layer's weights (str), Keras' ``layer.variable_dtype``; ``layer.dtype`` is it as a
        NumPy dtype."""
        if self._user_dtype is not None and self._user_dtype.kind in "iub":
            return self._user_dtype.name
        return self.dtype_policy.variable_dtype

    #: computes in float32 under a mixed policy (its input cast up, its output cast to the compute dtype): Keras'
    #: normalisation layers
    _computes_in_float32 = False
    #: under a mixed policy its weights are cast for its call (not for a wrapper whose wrapped layers cast their own)
    _casts_weights = True

    def _call_mixed(self, x, run):
        """``run(x)`` under a mixed policy: float inputs and float32 weights cast to the compute dtype (or, for a
        layer that computes in float32, the input up and the output down); the casts are autograd nodes."""
        half = self._compute
        if self._computes_in_float32:
            return _cast_floats(run(_cast_floats(x, self.dtype)), half)
        params, swapped = self._params, {}
        if not self._casts_weights:
            return run(_cast_floats(x, half))
        cast = {k: (F.cast(p, half) if p.dtype == self.dtype else p) for k, p in params.items()}
        if self._keras_style:  # weights kept as attributes (``self.w = self.add_weight(...)``)
            ids = {id(p): k for k, p in params.items()}
            swapped = {a: v for a, v in self.__dict__.items() if id(v) in ids}
        self._params = cast
        for attribute, param in swapped.items():
            self.__dict__[attribute] = cast[ids[id(param)]]
        try:
            return run(_cast_floats(x, half))
        finally:
            self._params = params
            self.__dict__.update(swapped)

    # -- configuration by the owning model
    def configure(self, backend=None, dtype=None, seed: int | None = None, force: bool = False) -> None:
        """Set backend, dtype (a dtype or a DTypePolicy) and seed (a dtype or seed given to the layer itself wins).
        A built layer whose settings change (or with ``force``) is rebuilt: its weights are re-created from the
        seed."""
        xp = _backend.get(backend)
        model_policy = mixed_precision.get(dtype) if dtype is not None else None
        if self._user_policy is None and self._user_dtype is None:
            self._policy = model_policy
            self._compute = _compute_of(model_policy)
        if self._user_dtype is not None:
            dtype = self._user_dtype
        else:
            dtype = np.dtype(np.float32) if model_policy is None else \
                mixed_precision.numpy_dtype(model_policy.variable_dtype)
        seed = self.seed if self.seed is not None else seed
        if self.built and not force and getattr(self, "_weights_kept", False):
            self._keep_weights(xp, dtype, seed)  # built on data, in a model before, or assigned: as Keras does
            return
        if self.built and not force and (xp, dtype, seed) == (self.xp, self.dtype, getattr(self, "_build_seed", None)):
            self._weights_kept = True
            return
        self.xp, self.dtype, self._build_seed = xp, dtype, seed
        if self.built:
            self._params.clear()
            self._state.clear()
            self._fixed.clear()
            self.built = False
            self._build(self.input_shape, remake=True)
        self._weights_kept = self.built

    def _keep_weights(self, xp, dtype, seed) -> None:
        """Keep the weights' values, copied to ``xp`` and cast to ``dtype`` where the model asks for another (a
        dropout stream is drawn anew there from ``seed``)."""
        if xp is self.xp and dtype == self.dtype:
            return
        old, old_dtype = self.xp, self.dtype

        def move(array):
            host = np.asarray(old.to_numpy(array))
            return xp.asarray(host.astype(dtype) if host.dtype == old_dtype else host)

        self.move_to(xp, move)
        self.dtype = dtype
        if getattr(self, "rng", None) is not None and xp is not old:
            self.rng = xp.rng(derive_seed(seed, 1))

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
        if _overrides(type(self), "compute_output_shape"):
            out = self.compute_output_shape(batched)
        else:
            shapes = input_shape if isinstance(input_shape, list) else [input_shape]
            zeros = [Tensor(self.xp.zeros((1, *s), self.dtype), backend=self.xp) for s in shapes]
            with no_grad():
                y = self._run(zeros if isinstance(input_shape, list) else zeros[0], False)
            if not isinstance(y, Tensor):
                self.built = False
                raise TypeError(f"{type(self).__name__} layer {self.name!r}: call() must return one Tensor, got "
                                f"{type(y).__name__}")
            out = y.shape
        out = tuple(out)
        if not out or (out[0] is not None and out[0] != 1 and not _overrides(type(self), "compute_output_shape")):
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: output shape {out} has no batch axis")
        self.output_shape = tuple(int(s) for s in out[1:])

    def _run(self, x, training: bool, **mask):
        """``call``, with ``training`` only when the layer's ``call`` takes it (and ``mask=`` when given); under a
        mixed policy through :meth:`_call_mixed`."""
        if self._compute is not None:
            return self._call_mixed(x, lambda x: self._call(x, training, mask))
        if self.dtype is not None and self.dtype.kind == "f":  # as Keras: a half output of a mixed layer is cast
            # to this layer's dtype; any float input too when the layer was given its dtype (float32 into float64)
            x = _cast_floats(x, self.dtype, halves_only=self._user_dtype is None)
        return self._call(x, training, mask)

    def _call(self, x, training, mask):
        if mask:
            return self.call(x, training=training, **mask)
        return self.call(x, training=training) if self._call_takes_training else self.call(x)

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

    def add_weight(self, *args, shape=None, initializer=None, dtype=None, trainable: bool = True,
                   name: str | None = None, **keras_only) -> Parameter:
        """Create a weight (call it from ``build`` / ``create_weights``) and return it (a Parameter).

        Keras' form: ``add_weight(shape=, initializer="glorot_uniform", dtype=None, trainable=True, name=None)``
        (``shape`` and ``initializer`` may be positional); magmadnn's: ``add_weight(name, shape, initializer)``
        (a str first). ``trainable=False``: the optimizer never changes it (update it yourself with ``assign``)."""
        unsupported = sorted(k for k, v in keras_only.items() if v is not None and not (k == "autocast" and v))
        if unsupported:
            raise TypeError(f"{type(self).__name__}.add_weight: {unsupported} are not supported by magmadnn")
        if args and isinstance(args[0], str):  # add_weight(name, shape, initializer)
            if name is not None or len(args) > 3:
                raise TypeError("add_weight(name, shape, initializer): give the name once, at most 3 positional "
                                "arguments")
            name, args = args[0], args[1:]
        if len(args) > 3:
            raise TypeError(f"add_weight takes at most 3 positional arguments (shape, initializer, dtype), got "
                            f"{len(args)}")
        for i, (key, value) in enumerate(zip(("shape", "initializer", "dtype"), args)):
            if {"shape": shape, "initializer": initializer, "dtype": dtype}[key] is not None:
                raise TypeError(f"add_weight: {key} given both by position and by name")
            shape, initializer, dtype = (value, initializer, dtype) if i == 0 else \
                ((shape, value, dtype) if i == 1 else (shape, initializer, value))
        if getattr(self, "_init_rng", None) is None or self.xp is None:
            self._setup()
        shape = () if shape is None else (tuple(int(s) for s in shape) if isinstance(shape, (tuple, list))
                                          else (int(shape),))
        if any(s is None or s < 0 for s in shape):
            raise ValueError(f"add_weight: shape must be fully defined sizes >= 0, got {shape}")
        if name is None:
            name = "variable"
            while name in self._params:
                name = f"variable_{len([k for k in self._params if k.startswith('variable')])}"
        if not isinstance(name, str) or not name or name in self._params:
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: weight name {name!r} is empty or used "
                             "already")
        if not isinstance(trainable, (bool, np.bool_)):
            raise TypeError(f"add_weight: trainable must be True or False, got {trainable!r}")
        given = None if dtype is None else np.dtype(dtype)
        dtype = self.dtype if given is None else given
        initializer = "glorot_uniform" if initializer is None else initializer
        data = initializers.get(initializer)(shape, dtype, self.xp, self._init_rng)
        param = Parameter(data, name=f"{self.name}/{name}", backend=self.xp,
                          trainable=bool(trainable) and self._trainable)
        self._params[name] = param
        if not trainable:
            self._fixed.add(name)
        if not self._in_build and not self.built:
            self._early[name] = (param, shape, initializer, given, (self.xp, dtype, self._build_seed))
        return param

    def add_state(self, name: str, array) -> None:
        self._state[name] = array

    # -- calling
    def __call__(self, inputs, training: bool = False):
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

    # -- masks
    def call_masked(self, inputs, training: bool = False):
        """``call`` with the masks riding on the Tensors: the input's mask given to a layer that ``uses_mask``,
        the output's (``compute_mask``) attached to it; a masked input to a layer without masking is an error."""
        many = isinstance(inputs, list)
        if not many and not self.makes_mask and getattr(inputs, "_mask", None) is None:
            return self._run(inputs, training)  # the common case, at the cost of one attribute look-up
        masks = [getattr(t, "_mask", None) for t in (inputs if many else [inputs])]
        mask = masks if many else masks[0]
        if all(m is None for m in masks):
            mask = None
        elif not self.supports_masking:
            raise self._mask_error(self._source)
        if self.uses_mask:
            out = self._run(inputs, training, mask=mask)
        else:
            out = self._run(inputs, training)
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
            self._build(input_shape)
            self._weights_kept = self._has_values = source == "the data"  # symbolic: the model draws them
        elif input_shape != self.input_shape:
            expected = (", ".join(shape_str(s) for s in self.input_shape) if isinstance(self.input_shape, list)
                        else shape_str(self.input_shape))
            raise self.shape_error(f"per-sample input shape {expected} (the shape it was built with)", input_shape)

    def call(self, x, training: bool = False):
        raise NotImplementedError

    # -- trainable (Keras: a frozen layer's weights are never changed by training; a frozen BatchNorm normalises
    # with its moving statistics and leaves them unchanged)
    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"layer {self.name!r}: trainable must be True or False, got {value!r}")
        self._trainable = bool(value)
        for name, param in self._params.items():
            if name not in self._fixed:
                param.trainable = self._trainable
        note_trainable_change()

    # -- weights
    @property
    def params(self) -> dict[str, Parameter]:
        """The Parameters by short name ("kernel", "bias", ...), trainable or not (not the state arrays)."""
        return dict(self._params)

    def named_weights(self) -> list[tuple[str, object]]:
        """``(short name, weight)`` in Keras' order: weights created trainable, those created with
        ``trainable=False``, then the state arrays (as :class:`StateWeight`)."""
        out = [(k, p) for k, p in self._params.items() if k not in self._fixed]
        out += [(k, p) for k, p in self._params.items() if k in self._fixed]
        return out + [(k, StateWeight(self, k)) for k in self._state]

    @property
    def weights(self) -> list:
        """Every weight, Keras' ``layer.weights``: Parameters, then the state arrays as :class:`StateWeight`
        views (each has ``name``, ``shape``, ``trainable``, ``numpy()``, ``assign()``)."""
        return [w for _, w in self.named_weights()]

    @property
    def trainable_weights(self) -> list:
        return [w for w in self.weights if w.trainable] if self._trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return [w for w in self.weights if not w.trainable] if self._trainable else self.weights

    @property
    def state(self) -> dict[str, object]:
        """Non-trainable state arrays by short name (BatchNorm running statistics)."""
        return dict(self._state)

    def parameters(self) -> list[Parameter]:
        """Every Parameter (frozen ones too: optimizers skip those whose ``trainable`` is False)."""
        return list(self._params.values())

    def get_weights(self) -> list[np.ndarray]:
        """Copies (NumPy) of :attr:`weights`, in that order (Keras' ``get_weights``)."""
        return [np.array(w.numpy()) for w in self.weights]

    def set_weights(self, arrays) -> None:
        """Assign NumPy arrays in the order of :attr:`weights` (all checked before the first is assigned)."""
        weights, arrays = self.weights, list(arrays)
        if len(arrays) != len(weights):
            raise ValueError(f"layer {self.name!r}: set_weights got {len(arrays)} arrays, the layer has "
                             f"{len(weights)} weights ({[w.name for w in weights]})")
        plan = []
        for w, a in zip(weights, arrays):
            a = np.asarray(a)
            if tuple(a.shape) != tuple(w.shape):
                raise ValueError(f"layer {self.name!r}: weight {w.name!r} has shape {shape_str(w.shape)}, the "
                                 f"array given has shape {shape_str(a.shape)}")
            if a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and not np.isfinite(a).all()):
                raise ValueError(f"layer {self.name!r}: the array for {w.name!r} must hold finite real numbers")
            plan.append((w, self.xp.asarray(np.array(a, dtype=w.dtype))))
        for w, value in plan:
            w.data = value
        self._weights_kept = self._has_values = True

    def _require_built(self, what: str) -> None:
        if not self.built:
            raise ValueError(f"layer {self.name!r} ({type(self).__name__}) is not built yet, so {what} is not "
                             "known: call it on an input (or an Input) first")

    def count_params(self) -> int:
        """Every weight, the state arrays included (Keras' ``count_params``)."""
        self._require_built("count_params()")
        return sum(math.prod(w.shape) for w in self.weights)

    def count_state(self) -> int:
        return sum(math.prod(tuple(a.shape)) for a in self._state.values())

    # -- configuration
    def get_config(self) -> dict:
        config = {"name": self.name, "trainable": self._trainable}
        if self._user_dtype is not None:
            config["dtype"] = self._user_policy.name if self._user_policy is not None else self._user_dtype.name
        if self.seed is not None:
            config["seed"] = self.seed
        return config

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


def _compute_of(policy):
    """The NumPy compute dtype of a mixed policy, None for a plain one (or none)."""
    if policy is None or not policy.is_mixed:
        return None
    return mixed_precision.numpy_dtype(policy.compute_dtype)


def _is_float(dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _cast_floats(x, dtype, halves_only: bool = False):
    """A Tensor (or a list of them) cast to ``dtype`` where it is a float of another dtype (``halves_only``: a
    float16 or bfloat16 one); a mask rides along."""
    if isinstance(x, (list, tuple)):
        return type(x)(_cast_floats(t, dtype, halves_only) for t in x)
    if not isinstance(x, Tensor) or x.dtype == dtype or not _is_float(x.dtype) or (
            halves_only and x.dtype.name not in mixed_precision.HALF_TYPES):
        return x
    y = F.cast(x, dtype)
    mask = getattr(x, "_mask", None)
    if mask is not None:
        y._mask = mask
    return y


def _normalise_shapes(shape):
    if isinstance(shape, list):
        return [_normalise_shapes(one) for one in shape]
    return None if shape is None else tuple(None if s is None else int(s) for s in shape)


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


# Keras layer arguments magmadnn does not implement: accepted at Keras' default value, else a TypeError naming the
# magmadnn way (or saying only the default is supported)
KERAS_DEFAULTS = {
    "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
    "embeddings_regularizer": None, "recurrent_regularizer": None, "kernel_constraint": None,
    "bias_constraint": None, "embeddings_constraint": None, "recurrent_constraint": None,
    "dropout": 0.0, "recurrent_dropout": 0.0, "input_length": None, "batch_input_shape": None, "batch_size": None,
    "batch_shape": None, "sparse": None, "ragged": None, "optional": False, "tensor": None, "noise_shape": None,
    "data_format": None, "center": True, "scale": True, "beta_initializer": "zeros", "gamma_initializer": "ones",
    "moving_mean_initializer": "zeros", "moving_variance_initializer": "ones", "synchronized": False,
    "activation": "tanh", "recurrent_activation": "sigmoid", "unroll": False, "stateful": False,
    "unit_forget_bias": True, "use_cudnn": "auto", "recurrent_initializer": "orthogonal", "autocast": True,
}
_PENALTY = ("weight penalties are not layer arguments here: use the optimizer's weight_decay= (AdamW, "
            "SGD(weight_decay=)) or add the penalty to a callable loss")
KERAS_ONLY_ARGUMENTS = {
    **dict.fromkeys(("kernel_regularizer", "bias_regularizer", "activity_regularizer", "embeddings_regularizer",
                     "recurrent_regularizer"), _PENALTY),
    **dict.fromkeys(("kernel_constraint", "bias_constraint", "embeddings_constraint", "recurrent_constraint"),
                    "weight constraints are not supported; clip in a callback's on_train_batch_end"),
    **dict.fromkeys(("dropout", "recurrent_dropout"),
                    "recurrent layers take no dropout here: put a Dropout layer before or after the layer"),
    "input_length": "not needed (Keras 3 deprecates it too): leave it out",
    **dict.fromkeys(("batch_input_shape", "batch_shape", "batch_size"),
                    "shapes here are per sample: Input(shape=the shape without the batch axis)"),
}


def _refuse_keras_only(who: str, arguments: dict) -> None:
    """Keras layer arguments at Keras' default value pass; any other value (or an unknown argument) is a
    TypeError naming the magmadnn way."""
    for name, value in sorted(arguments.items()):
        if name not in KERAS_DEFAULTS:
            raise TypeError(f"{who}: unexpected argument {name!r}")
        default = KERAS_DEFAULTS[name]
        if value is default or (value is not None and default is not None and value == default) or (
                name == "sparse" and value is False):
            continue
        hint = KERAS_ONLY_ARGUMENTS.get(name, f"only Keras' default {name}={default!r} is supported here")
        raise TypeError(f"{who}: Keras' argument {name}={value!r} is not supported; {hint}")
