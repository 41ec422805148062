"""Subclassed models, as Keras 3 writes them: ``class M(magmadnn.Model)`` creating its layers in ``__init__`` and
running them in ``call(inputs, training=None, mask=None)``.

The layers are tracked from the model's attributes (a layer, a model, lists, tuples and dicts of them, in the order
they were set); each gets the model's backend, dtype and a seed derived from the model seed, as in a functional
model. The model is built on the first data it sees (``fit``, ``evaluate``, ``predict``, a call, or ``build``): one
call on a slice of that data fixes the structure of its outputs (one tensor, a list or a dict) and builds the
layers. Every step then runs ``call`` eagerly: training goes through the one training step, so the device backend
and graph replay (``compile(graph=True)``) work as for any model. Keras' ``add_loss`` inside ``call`` adds a term
to the training loss (``model.losses`` lists the last call's); custom training steps (``train_step`` /
``test_step`` / ``predict_step``) are :mod:`.custom_steps`.

Saving: the weights are stored by attribute path (``layers.encoder.dense.kernel``), the class by the name it is
registered under (:func:`register`, or ``custom_objects``) with the model's ``get_config()``; loading calls
``from_config`` (``cls(**config)`` for a subclass, as Keras) and builds on zeros of the stored input shapes.
Never pickle.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..autograd import Tensor, no_grad
from ..layers.base import Input, Layer, SymbolicTensor
from .outputs import AddedLoss, Outputs

__all__ = ["Subclassing", "register", "registered", "rebuild_subclassed"]

_REGISTRY: dict[str, type] = {}

_MODEL_ATTRIBUTES = frozenset({"optimizer", "loss", "metrics", "inputs", "output", "nodes", "xp", "name"})


def register(cls=None, *, name: str | None = None):
    """Class decorator: save and load this Model subclass by ``name`` (its class name by default), as Keras'
    ``register_keras_serializable``."""
    def wrap(klass):
        _REGISTRY[name or klass.__name__] = klass
        klass._registered_name = name or klass.__name__
        return klass
    return wrap(cls) if cls is not None else wrap


def registered(name: str, custom_objects=None):
    """The registered Model subclass ``name`` (``custom_objects`` first), or a ValueError naming the way."""
    cls = (custom_objects or {}).get(name) or _REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"model class {name!r} is not registered: decorate it with @magmadnn.models.register (or "
                         f"pass custom_objects={{{name!r}: {name}}}) before loading")
    return cls


class _OutputName:
    """What names an output of a subclassed model (``output_0``, ...) in its symbolic stand-in."""

    def __init__(self, name, dtype):
        self.name, self.compute_dtype = name, dtype


def _structure(value, who: str):
    """``(keys, tensors)`` of what ``call`` returned: one Tensor (keys None), a list/tuple ("list") or a dict."""
    if isinstance(value, Tensor):
        return None, [value]
    if isinstance(value, dict) and value and all(isinstance(v, Tensor) for v in value.values()):
        return tuple(value), list(value.values())
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tensor) for v in value):
        return "list", list(value)
    if not isinstance(value, (list, tuple, dict)):
        got = type(value).__name__
    else:
        held = value.values() if isinstance(value, dict) else value
        got = f"a {type(value).__name__} holding {sorted({type(v).__name__ for v in held})}"
    raise TypeError(f"{who}: call() must return a Tensor, or a list / tuple / dict of Tensors (computed with "
                    f"layers, Tensor operators or magmadnn.functional), got {got}")


class Subclassing:
    """What ``Model`` gives its subclasses (see the module)."""

    _subclassed = False
    # before a subclassed model is built (it builds on its first data)
    inputs: tuple = ()
    _splits_batches, _batch_size, _host_inputs, _plain_predict, _single = True, None, (), False, True
    _fixed_output = True
    _layer_keys = None  # attribute paths of the tracked layers (the weight keys of a subclassed model)

    def _init_subclassed(self) -> None:
        self._subclassed = True
        self._added_losses: list = []
        self._forward = self._call_forward  # the instance's own forward: functional models keep theirs

    # -- tracking
    def _tracked(self):
        """``(path, layer)`` for every layer reachable from the attributes, in the order they were set."""
        found, seen = [], set()

        def visit(value, path):
            if isinstance(value, Layer):
                if id(value) not in seen and not isinstance(value, Input):
                    seen.add(id(value))
                    found.append((path, value))
            elif isinstance(value, Subclassing) and value is not self:
                layers = value._tracked() if value._subclassed else list(
                    zip([layer.name for layer in value._all_layers], value._all_layers))
                for sub, layer in layers:
                    visit(layer, f"{path}.{sub}")
            elif isinstance(value, (list, tuple)):
                for k, item in enumerate(value):
                    visit(item, f"{path}.{k}")
            elif isinstance(value, dict):
                for k, item in value.items():
                    visit(item, f"{path}.{k}")

        for attribute, value in vars(self).items():
            if not attribute.startswith("_") and attribute not in _MODEL_ATTRIBUTES:
                visit(value, attribute)
        return found

    # -- building on data
    def _build_subclassed(self, x) -> None:
        """Inputs from the structure and dtypes of ``x`` (every axis but the batch free), the tracked layers
        configured, then one call on the first samples: the outputs' structure, shapes and names."""
        keys = tuple(x) if isinstance(x, dict) else ("list" if isinstance(x, (list, tuple)) and x and all(
            hasattr(a, "shape") for a in x) else None)
        items = list(x.values()) if isinstance(x, dict) else (list(x) if keys == "list" else [x])
        arrays = [np.asarray(a.numpy() if isinstance(a, Tensor) else a) for a in items]
        names = list(keys) if isinstance(keys, tuple) else [f"input_{k}" for k in range(len(arrays))]
        inputs = [Input((None,) * (a.ndim - 1), name=f"{self.name}_{n}",
                        dtype="int64" if a.dtype.kind in "iu" else None) for n, a in zip(names, arrays)]
        self._input_keys, self.inputs = keys, [i.output for i in inputs]
        tracked = self._tracked()
        self._layer_keys = [path for path, _ in tracked]
        self._all_layers = [layer for _, layer in tracked]
        self._configure_layers()
        probe = [self.xp.asarray(a[:2], a.dtype if a.dtype.kind in "iu" else self.dtype) for a in arrays]
        if type(self).call is Subclassing.call:  # a model of custom steps only (Keras' GAN): no outputs of its own
            okeys, tensors = None, [Tensor(probe[0], backend=self.xp)]
        else:
            with no_grad():
                out = self.call(self._packed([Tensor(p, backend=self.xp) for p in probe], keys),
                                **self._call_kwargs(False))
            okeys, tensors = _structure(out, f"model {self.name!r}")
        onames = list(okeys) if isinstance(okeys, tuple) else [f"output_{k}" for k in range(len(tensors))]
        self._output_keys = okeys
        # every output axis but the last is known only at run time (the inputs' axes are), as Keras' call takes
        self._outputs = [SymbolicTensor((None,) * (t.ndim - 2) + tuple(t.shape[-1:]) if t.ndim > 1 else (),
                                        _OutputName(n, t.dtype.name)) for n, t in zip(onames, tensors)]
        self._fixed_output = self._single and None not in self._outputs[0].shape
        self._single = okeys is None
        self.output = self._outputs[0] if self._single else list(self._outputs)
        self.nodes = list(self.inputs)
        self._splits_batches, self._batch_size, self._host_inputs, self._plain_predict = True, None, [], False
        self._build_shapes = [[int(d) for d in a.shape[1:]] for a in arrays]
        self._build_dtypes = [a.dtype.str for a in arrays]
        self._touched_flag = self._touched_flag or any(getattr(layer, "_has_values", False) for layer in
                                                       self._all_layers if layer.built and layer._weights_kept)
        self.built = True
        spec = getattr(self, "_compile_spec", None)
        if self.compiled and spec is not None and not self._single:
            from .outputs import compile_outputs

            loss, metrics = compile_outputs(self, *spec)
            self.loss = AddedLoss(loss, self)
            self._set_metrics(metrics)

    def build(self, input_shape, dtype=None) -> None:
        """Build on zeros of ``input_shape`` (per sample, or Keras' form with the batch axis first as None; a list
        for several inputs)."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        shapes = [tuple(s)[1:] if s and tuple(s)[0] is None else tuple(s) for s in shapes]
        arrays = [np.zeros((2, *(1 if d is None else d for d in s)), dtype or self.dtype) for s in shapes]
        if not self.built:
            self._build_subclassed(arrays if isinstance(input_shape, list) else arrays[0])

    def _build_from_data(self, arrays) -> None:
        self._build_subclassed(arrays if len(arrays) > 1 else arrays[0])

    # -- running
    def call(self, inputs, training=None, mask=None):
        """What a subclass defines: the outputs of ``inputs`` (Tensors in the structure given to the model)."""
        raise NotImplementedError(f"model {self.name!r}: a subclass of Model must define call(self, inputs, "
                                  "training=None), or build the model as Model(inputs, outputs)")

    def _call_kwargs(self, training):
        accepted = getattr(type(self), "_call_params", None)
        if accepted is None or accepted[0] is not type(self).call:
            params = inspect.signature(type(self).call).parameters
            type(self)._call_params = accepted = (type(self).call, "training" in params or any(
                p.kind is p.VAR_KEYWORD for p in params.values()))
        return {"training": training} if accepted[1] else {}

    def _call_forward(self, inputs, training: bool):
        self._added_losses = []
        out = self.call(self._packed(list(inputs), self._input_keys), **self._call_kwargs(training))
        keys, tensors = _structure(out, f"model {self.name!r}")
        if (keys is None) != self._single or (isinstance(keys, tuple) and keys != self._output_keys):
            raise TypeError(f"model {self.name!r}: call() returned {len(tensors)} output(s) in another structure "
                            "than on its first call; return the same structure every time")
        tensors = [self._full_precision(t) for t in tensors]
        return tensors[0] if self._single else Outputs(tensors)

    # -- Keras' add_loss
    def add_loss(self, loss) -> None:
        """Add a scalar Tensor (computed in ``call``) to the training loss, as Keras' ``add_loss``."""
        if not isinstance(loss, Tensor) or loss.ndim != 0:
            raise TypeError(f"model {self.name!r}: add_loss takes a scalar Tensor computed in call(), got "
                            f"{type(loss).__name__}{'' if not isinstance(loss, Tensor) else f' of shape {loss.shape}'}")
        self._added_losses.append(loss)

    @property
    def losses(self) -> list:
        """Keras' ``model.losses``: the layers' regularization terms, then what ``add_loss`` added in the last call."""
        return super().losses + list(getattr(self, "_added_losses", []))

    # -- saving
    def _subclass_config(self) -> dict:
        own = type(self).get_config
        config = {} if getattr(own, "_functional", False) else own(self)
        return {"class_name": getattr(type(self), "_registered_name", type(self).__name__), "subclassed": True,
                "config": config, "name": self.name, "seed": self.seed, "dtype": self.dtype_policy.name,
                "trainable": self._trainable, "build_shapes": self._build_shapes, "build_dtypes": self._build_dtypes,
                "input_keys": list(self._input_keys) if isinstance(self._input_keys, tuple) else self._input_keys}


def rebuild_subclassed(config: dict, device=None, custom_objects=None):
    """A subclassed model from its stored configuration, built on zeros of its stored input shapes."""
    cls = registered(config["class_name"], custom_objects)
    model = cls.from_config(dict(config["config"]))
    model.reseed(int(config["seed"]))
    if device is not None:
        model.to(device)
    arrays = [np.zeros((2, *shape), np.dtype(dtype)) for shape, dtype in zip(config["build_shapes"],
                                                                             config["build_dtypes"])]
    keys = config.get("input_keys")
    model._build_subclassed(dict(zip(keys, arrays)) if isinstance(keys, list) else
                            (arrays if keys == "list" else arrays[0]))
    model._trainable = bool(config.get("trainable", True))
    return model
