"""The weights of a layer: made (``add_weight``, ``add_state``), listed and assigned in Keras' order, frozen
(``trainable``), and kept, cast or moved when the owning model configures the layer (``configure``, ``move_to``).

Parameters are trainable weights (autograd leaves); state arrays (BatchNorm's running statistics) are seen as
weights through :class:`StateWeight` views, as in Keras' ``layer.weights``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend as _backend
from .. import initializers, mixed_precision
from .._checks import shape_str
from .._renamed import WeightList
from ..autograd import Parameter, note_trainable_change
from .mixed import _compute_of
from .registry import derive_seed

__all__ = ["StateWeight", "WeightsMixin"]


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


def _weight_shape(shape, who: str) -> tuple[int, ...]:
    """``add_weight``'s shape as integers >= 0 (Keras' rule: integers only, NumPy integers too; a float, even 4.0,
    a None axis or a negative size is a ValueError naming the entry; a plain integer is a 1-D shape)."""
    entries = () if shape is None else shape
    if isinstance(entries, (numbers.Integral,)) and not isinstance(entries, (bool, np.bool_)):
        entries = (entries,)
    elif hasattr(entries, "as_list"):
        entries = entries.as_list()
    if not isinstance(entries, (tuple, list)):
        raise TypeError(f"{who}: shape must be a tuple of integers, got {shape!r} ({type(shape).__name__})")
    for size in entries:
        if size is None:
            raise ValueError(f"{who}: shape {tuple(entries)!r} has a None axis; a weight needs every size (a None "
                             "batch axis of build's input_shape is no weight axis: use input_shape[1:] or "
                             "input_shape[-1])")
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, numbers.Integral):
            raise ValueError(f"{who}: shape entries must be integers, got {size!r} ({type(size).__name__}) in "
                             f"{tuple(entries)!r}")
        if size < 0:
            raise ValueError(f"{who}: shape entries must be >= 0, got {tuple(int(s) for s in entries)}")
    return tuple(int(s) for s in entries)


def _weight_dtype(dtype, trainable, who: str) -> np.dtype:
    """A weight's dtype: floating if trainable (PyTorch: only floating tensors require gradients); an integer or
    bool weight must be created with ``trainable=False``."""
    try:
        result = mixed_precision.numpy_dtype(dtype) if dtype == "bfloat16" else np.dtype(dtype)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{who}: dtype {dtype!r} is not a dtype ({error})") from None
    if result.kind not in "fiub":
        raise TypeError(f"{who}: dtype must be a floating, integer or bool dtype, got {result}")
    if result.kind != "f" and trainable:
        raise TypeError(f"{who}: a trainable weight must have a floating dtype, got {result} (gradients of integers "
                        "do not exist): give trainable=False for an integer weight, or a float dtype")
    return result


def _initial_value(initializer, shape, dtype, xp, rng, who: str):
    """The initializer's array, checked: its shape must be ``shape`` (a wrong one is named here, not by the next
    layer); another dtype is cast to the weight's, as Keras casts the initial value."""
    init = initializers.get(initializer)
    if np.dtype(dtype).kind != "f" and not isinstance(init, (initializers.Zeros, initializers.Ones,
                                                               initializers.Constant)):
        raise TypeError(f"{who}: the {type(init).__name__} initializer draws floating values, which an "
                        f"integer weight ({np.dtype(dtype)}) cannot hold; use 'zeros', 'ones' or Constant")
    data = init(shape, dtype, xp, rng)
    got = getattr(data, "shape", None)
    if got is None or tuple(int(s) for s in got) != shape:
        raise ValueError(f"{who}: the initializer {init!r} returned "
                         f"{'shape ' + shape_str(got) if got is not None else type(data).__name__}, the weight's "
                         f"shape is {shape_str(shape)}")
    if np.dtype(data.dtype) != np.dtype(dtype):
        data = xp.asarray(np.asarray(xp.to_numpy(data)).astype(dtype))
    return data


class WeightsMixin:
    """The weights of a :class:`~magmadnn.layers.base.Layer` (see the module)."""

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
            self._plans_at = None  # the call plans decided their casts under the old policy (.plans)
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

    def add_weight(self, *args, shape=None, initializer=None, dtype=None, trainable: bool = True,
                   name: str | None = None, regularizer=None, constraint=None, **keras_only) -> Parameter:
        """Create a weight (call it from ``build`` / ``create_weights``) and return it (a Parameter).

        Keras' form: ``add_weight(shape=, initializer="glorot_uniform", dtype=None, trainable=True, name=None)``
        (``shape`` and ``initializer`` may be positional); magmadnn's: ``add_weight(name, shape, initializer)``
        (a str first). ``trainable=False``: the optimizer never changes it (update it yourself with ``assign``).
        ``regularizer`` / ``constraint``: as Keras (:mod:`magmadnn.regularizers`, :mod:`magmadnn.constraints`)."""
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
        who = f"{type(self).__name__} layer {self.name!r}: add_weight"
        shape = _weight_shape(shape, f"{who}({name!r})" if name is not None else who)
        if name is None:
            name = "variable"
            while name in self._params:
                name = f"variable_{len([k for k in self._params if k.startswith('variable')])}"
        if not isinstance(name, str) or not name or name in self._params:
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: weight name {name!r} is empty or used "
                             "already")
        if not isinstance(trainable, (bool, np.bool_)):
            raise TypeError(f"add_weight: trainable must be True or False, got {trainable!r}")
        given = None if dtype is None else _weight_dtype(dtype, trainable, f"{who}({name!r})")
        dtype = self.dtype if given is None else given
        if initializer is None:  # Keras: glorot_uniform for a float weight, zeros for an integer one
            initializer = "glorot_uniform" if np.dtype(dtype).kind == "f" else "zeros"
        data = _initial_value(initializer, shape, dtype, self.xp, self._init_rng, f"{who}({name!r})")
        param = Parameter(data, name=f"{self.name}/{name}", backend=self.xp,
                          trainable=bool(trainable) and self._trainable)
        self._params[name] = param
        if not trainable:
            self._fixed.add(name)
        if regularizer is not None or constraint is not None:
            self._penalize(name, regularizer, constraint)
        if not self._in_build and not self.built:
            self._early[name] = (param, shape, initializer, given, (self.xp, dtype, self._build_seed))
        return param

    def add_state(self, name: str, array) -> None:
        self._state[name] = array

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
        return WeightList(w for _, w in self.named_weights())

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

