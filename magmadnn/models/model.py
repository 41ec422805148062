"""Model: a functional graph of layers (or a subclass with its own ``call``).

A model owns its device (backend: ``device="host" | "gpu" | "gpu:N" | "auto"``, see :mod:`magmadnn.backend`),
dtype (float32 by default) and an integer ``seed``. Every layer gets a deterministic seed derived from the model seed
and its position, so two models built alike with the same seed start with identical weights, dropout masks and
shuffling order; a layer that already holds weights (built on data, trained in another model, assigned) keeps them,
as in Keras. ``compile`` keeps the weights; ``compile(seed=s)`` re-seeds a model that has not been trained or
loaded, and ``reinitialize(seed)`` re-creates the weights of any model.

This module builds and runs the graph; the other methods come from one module each: training (:mod:`.fitting`),
inference (:mod:`.inference`), data checks (:mod:`.inputs`), weights (:mod:`.weights`), device moves
(:mod:`.placement`) and saving (:mod:`.persistence`). Rebuilding from a configuration or a file is :mod:`.config`;
``Sequential`` is :mod:`.sequential`.
"""

from __future__ import annotations

import numpy as np

from .. import backend as _backend
from .. import mixed_precision
from .._postorder import postorder
from ..autograd import Tensor
from ..layers.base import (
    Input,
    Layer,
    SymbolicTensor,
    _auto_name,
    _fresh_seed,
    as_symbolic,
    derive_seed,
)
from ..layers.operation import Operation
from .custom_steps import CustomSteps
from .fitting import NonFiniteLossError, NonFiniteParameterError, Trainer
from .forward import Forward
from .inference import Inference
from .inputs import InputChecks
from .nesting import Nesting
from .penalties import Penalties
from .persistence import Persistence
from .placement import Placement
from .rebuild import rebuild
from .subclassing import Subclassing
from .summary import summary_text
from .weights import Weights

__all__ = ["Model", "NonFiniteLossError", "NonFiniteParameterError"]

_SHUFFLE_TAG = 0x5EED
_new = object.__new__


def _topological_nodes(outputs: list[SymbolicTensor]) -> list[SymbolicTensor]:
    """Every node the outputs depend on, producers before consumers."""
    if len(outputs) == 1:
        return postorder(outputs[0], lambda node: reversed(node.parents))
    root = SymbolicTensor((), None, outputs)  # a stand-in consumer of every output, dropped from the order
    return postorder(root, lambda node: reversed(node.parents))[:-1]


def _structure(given, what: str, model: str):
    """``(keys, items)`` of a model's inputs or outputs: keys None for one tensor, "list" for a list or tuple, the
    tuple of names for a dict (Keras' three forms)."""
    if isinstance(given, dict):
        if not given:
            raise ValueError(f"model {model!r}: {what} is an empty dict")
        if not all(isinstance(k, str) for k in given):
            raise TypeError(f"model {model!r}: the keys of the {what} dict must be str, got {list(given)}")
        return tuple(given), list(given.values())
    if isinstance(given, (list, tuple)):
        if not given:
            raise ValueError(f"model {model!r}: {what} is an empty list")
        return "list", list(given)
    return None, [given]


class Model(Subclassing, CustomSteps, Nesting, Trainer, Inference, InputChecks, Weights, Placement, Persistence,
            Penalties, Forward):
    """A graph of layers from ``inputs`` (Input layers) to ``outputs`` (one tensor, a list or a dict); or, subclassed
    with ``Model.__init__()`` taking no inputs and outputs, the layers set as attributes in ``__init__`` run by
    ``call(inputs, training=None)`` (:mod:`.subclassing`)."""

    is_sequential = False
    # what an unbuilt model (a Sequential built from its first data) implies until its graph is set
    _splits_batches, _batch_size = True, None

    #: seconds between progress updates in ``fit`` (each is one host read of the running loss and metrics)
    progress_interval = 0.1

    def __init__(self, inputs=None, outputs=None, name: str | None = None, seed: int | None = None, dtype=None,
                 device=None, backend=None, trainable: bool = True):
        if inputs is None and outputs is None and type(self) is not Model:  # a subclass: layers from attributes
            self._init_common(name, seed, dtype, device, backend)
            self._init_subclassed()
            self._trainable = bool(trainable)
            return
        if inputs is None or outputs is None:
            raise TypeError("Model(inputs, outputs): give both the Input(s) and the output tensor(s); or subclass "
                            "Model, create the layers in __init__ and run them in call(self, inputs, training=None)")
        self._init_common(name, seed, dtype, device, backend)
        self._set_graph(inputs, outputs)

    def _init_common(self, name, seed, dtype, device, backend):
        self.name = name or _auto_name(type(self))
        self.seed = _fresh_seed() if seed is None else int(seed)
        if isinstance(dtype, (str, mixed_precision.DTypePolicy)) and (
                isinstance(dtype, mixed_precision.DTypePolicy) or dtype.startswith("mixed_")):
            self.dtype_policy = mixed_precision.get(dtype)
        else:  # None: the global policy now (Keras); a plain dtype: float32 or float64
            self.dtype_policy = mixed_precision.global_policy() if dtype is None else None
            self.dtype = np.dtype(self.dtype_policy.variable_dtype if dtype is None else dtype)
            if self.dtype not in (np.float32, np.float64):
                raise TypeError(f"model {self.name!r}: dtype must be float32 or float64 (or a mixed policy "
                                f"'mixed_bfloat16' / 'mixed_float16'), got {self.dtype}")
            self.dtype_policy = self.dtype_policy or mixed_precision.DTypePolicy(self.dtype.name)
        self.dtype = np.dtype(self.dtype_policy.variable_dtype)
        if device is not None and backend is not None and _backend.get(device) is not _backend.get(backend):
            raise ValueError(f"model {self.name!r}: device={device!r} and backend={backend!r} disagree; "
                             "pass device= only (backend= is its old name)")
        self.xp = _backend.get(device if device is not None else backend)
        self.optimizer = self.loss = None
        self._set_metrics([])
        self.compiled = False
        self.stop_training, self.stop_reason = False, None
        self.epoch = 0
        self.built = False
        self._all_layers: list[Layer] = []  # every layer, Inputs included (positions key the saved arrays)
        self._trainable = True
        self._touched_flag = False  # trained, or weights assigned / loaded: compile(seed=) refuses to re-initialise
        self._shuffle_rng = np.random.default_rng(derive_seed(self.seed, _SHUFFLE_TAG))
        self._parallel = None  # during fit(distributed=...): a training.StepHook (magmadnn.distributed)

    def _set_graph(self, inputs, outputs):
        self._input_keys, inputs = _structure(inputs, "inputs", self.name)
        self._output_keys, outputs = _structure(outputs, "outputs", self.name)
        for item in inputs:
            if not isinstance(item, Input) and not (isinstance(item, SymbolicTensor) and isinstance(item.layer, Input)):
                raise TypeError(f"model {self.name!r}: inputs must be Input layers, got {item!r}")
        outputs = [as_symbolic(o) for o in outputs]
        for out in outputs:
            if not isinstance(out, SymbolicTensor):
                raise TypeError(f"model {self.name!r}: outputs must be the result of calling layers on Inputs, "
                                f"got {type(out).__name__}")
        self.inputs = [as_symbolic(i) for i in inputs]
        self._outputs = outputs
        self._single = len(outputs) == 1 and not isinstance(self._output_keys, tuple)  # one Tensor out
        self._fixed_output = self._single and outputs[0].shape is not None and None not in outputs[0].shape
        self.output = outputs[0] if self._single else list(outputs)
        self.nodes = _topological_nodes(outputs)
        for node in self.nodes:
            if isinstance(node.layer, Input) and all(node is not i for i in self.inputs):
                raise ValueError(f"model {self.name!r}: the output depends on Input {node.layer.name!r}, which is "
                                 "not among the model inputs")
        # runs batch by batch unless an output has no batch axis (a model of op nodes summing over the batch)
        self._splits_batches = all(o.batched for o in outputs)
        sizes = {i.layer.batch_size for i in self.inputs if i.batched} - {None}
        self._batch_size = sizes.pop() if len(sizes) == 1 else None
        self._host_inputs = [k for k, i in enumerate(self.inputs) if getattr(i.layer, "_keeps_host", False)]
        self._plain_predict = (self._single and self._splits_batches and self._batch_size is None
                               and not self._host_inputs and all(i.batched for i in self.inputs)
                               and outputs[0].shape is not None and None not in outputs[0].shape
                               and not isinstance(outputs[0].layer, Operation))
        layers = [i.layer for i in self.inputs]
        for node in self.nodes:
            if all(node.layer is not known for known in layers):
                layers.append(node.layer)
        names = [layer.name for layer in layers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model {self.name!r}: layer names must be unique, {duplicates} are used more than once")
        self._all_layers = layers
        # layers that hold values (trained in another model, built on data, assigned) make this model "touched"
        self._touched_flag = self._touched_flag or any(getattr(layer, "_has_values", False) for layer in layers)
        self._configure_layers()
        self.built = True

    def _set_metrics(self, metrics: list) -> None:
        """The compiled metrics (a subclass may define ``metrics`` as a read-only property, as Keras' guides do:
        its custom steps then read that one)."""
        self._compiled_metrics = metrics
        if isinstance(getattr(type(self), "metrics", None), property):
            self.__dict__["metrics"] = metrics
        else:
            self.metrics = metrics

    @property
    def _touched(self) -> bool:
        """Trained, or weights assigned or loaded (here, or in another model for one of its layers): what
        ``compile(seed=)`` refuses to re-initialise."""
        return self._touched_flag

    @_touched.setter
    def _touched(self, value: bool) -> None:
        if value and not self._touched_flag and self.built:
            for layer in self._all_layers:  # a model made later from these layers is touched too
                layer._has_values = True
        self._touched_flag = bool(value)

    def _configure_layers(self, force: bool = False):
        """Give every layer the model's backend, dtype and a seed derived from the model seed (weights are re-created
        where these change, or everywhere with ``force``)."""
        for index, layer in enumerate(self._all_layers):
            layer.configure(self.xp, self.dtype_policy, derive_seed(self.seed, index), force=force)

    @property
    def input(self):
        """Keras' ``model.input``: the Input's tensor, or the list of them for several inputs."""
        return self.inputs[0] if len(self.inputs) == 1 else list(self.inputs)

    @property
    def outputs(self) -> list:
        """Keras' ``model.outputs``: the output tensors, in order."""
        return list(self._outputs)

    @property
    def output_names(self) -> list[str]:
        """Keras' ``model.output_names``: the dict keys of the outputs, else the names of the layers making them."""
        if isinstance(self._output_keys, tuple):
            return list(self._output_keys)
        return [o.layer.name for o in self._outputs]

    def _packed(self, values, keys):
        """``values`` (one per input or output) in the structure the model was made with."""
        if keys is None:
            return values[0]
        return dict(zip(keys, values)) if isinstance(keys, tuple) else list(values)

    compute_dtype = property(lambda self: self.dtype_policy.compute_dtype,
                             doc="The dtype the model's layers compute in (str), Keras' ``model.compute_dtype``.")
    variable_dtype = property(lambda self: self.dtype_policy.variable_dtype,
                              doc="The dtype of the model's weights (str), Keras' ``model.variable_dtype``.")

    @property
    def layers(self) -> list[Layer]:
        """The layers, Inputs included (as Keras' functional ``Model.layers``; ``Sequential`` leaves its Input
        out)."""
        return list(self._all_layers)

    def get_layer(self, name: str | None = None, index: int | None = None) -> Layer:
        """A layer by ``name`` or by ``index`` into :attr:`layers` (Keras' ``get_layer``)."""
        if (name is None) == (index is None):
            raise ValueError("get_layer: give either name= or index=, exactly one")
        layers = self.layers
        if index is not None:
            if not isinstance(index, int) or not -len(layers) <= index < len(layers):
                raise ValueError(f"get_layer: index {index!r} is out of range; model {self.name!r} has "
                                 f"{len(layers)} layers")
            return layers[index]
        for layer in layers:
            if layer.name == name:
                return layer
        raise ValueError(f"get_layer: no layer named {name!r}; model {self.name!r} has "
                         f"{[layer.name for layer in layers]}")

    def nodes_of(self, layer) -> list[SymbolicTensor]:
        return [node for node in self.nodes if node.layer is layer]

    @property
    def input_shapes(self) -> list[tuple]:
        return [node.shape for node in self.inputs]

    @property
    def output_shape(self):
        """The per-sample output shape (a list of them for several outputs, as Keras')."""
        return self.output.shape if self._single else [o.shape for o in self._outputs]

    def reseed(self, seed: int) -> None:
        """Set a new model seed: re-create every weight, dropout stream and the shuffling order from it."""
        self.seed = int(seed)
        self._shuffle_rng = np.random.default_rng(derive_seed(self.seed, _SHUFFLE_TAG))
        if self.built:
            self._configure_layers(force=True)
        self._touched = False
        if self.optimizer is not None:  # slots of the old weights mean nothing for the new ones
            self.optimizer.load_state_dict({"iterations": 0, "slots": {}})
        if self._graphs is not None:
            self._graphs.clear()

    def reinitialize(self, seed: int | None = None) -> None:
        """Re-create every weight (and the dropout and shuffling streams) from ``seed`` (None: the model's seed),
        trained or not: what ``compile(seed=...)`` refuses to do to a trained model."""
        self.reseed(self.seed if seed is None else seed)

    def __call__(self, x, training: bool = False):
        """Run the model eagerly on NumPy arrays or Tensors (one per input, or a dict by input name); returns a
        Tensor, or the outputs in the structure the model was made with (list or dict)."""
        items = list(x.values()) if isinstance(x, dict) else (x if isinstance(x, (list, tuple)) else [x])
        if any(isinstance(i, (SymbolicTensor, Layer)) for i in items):
            return self._inline(x, items)
        if self._subclassed and not self.built:
            self._build_subclassed(x)
        if isinstance(x, dict) and any(isinstance(i, Tensor) for i in items):
            tensors = [x[node.layer.name] for node in self.inputs] if self._input_keys is None or isinstance(
                self._input_keys, str) else [x[k] for k in self._input_keys]
        elif isinstance(x, (list, tuple)) and any(isinstance(i, Tensor) for i in x):
            tensors = list(x)
        elif isinstance(x, Tensor):
            tensors = [x]
        else:
            tensors = self._input_tensors(self._input_arrays(x, "call"))
        out = self._forward(tensors, training)
        return out if self._single else self._packed(out, self._output_keys)

    # -- integer inputs: an Input made with an integer dtype (token ids) keeps it; the others take the
    # model's dtype
    def _input_dtypes(self) -> list[np.dtype]:
        """Per model input: its Input's integer or bool dtype (token ids for an Embedding), else the model's
        dtype."""
        out = []
        for node in self.inputs:  # (a loop, not a comprehension: no frame of its own, once per step)
            dtype = node.layer.dtype
            out.append(dtype if dtype is not None and (  # (ONNX's _exact_dtype: an instance's own)
                dtype.kind in "iub" or node.layer.__dict__.get("_exact_dtype", False)) else self.dtype)
        return out

    def _cast_inputs(self, arrays) -> list[np.ndarray]:
        """Host input arrays in their inputs' dtypes."""
        return [a.astype(dtype, copy=False) for a, dtype in zip(arrays, self._input_dtypes())]

    def _input_tensors(self, arrays) -> list[Tensor]:
        """Host input arrays as Tensors on the model's backend, each in its input's dtype (an input an op node
        reads as a shape stays a host array)."""
        xp, default = self.xp, self.dtype
        tensors = []
        for a, node in zip(arrays, self.inputs):
            dtype = node.layer.dtype  # (_input_dtypes, inline: once per step)
            if dtype is None or not (dtype.kind in "iub" or node.layer.__dict__.get("_exact_dtype", False)):
                dtype = default
            t = _new(Tensor)  # Tensor._wrap, inline
            t.xp, t.data, t.grad, t.requires_grad, t._fn = xp, xp.asarray(a, dtype), None, False, None
            tensors.append(t)
        for k in self._host_inputs:
            tensors[k] = np.asarray(arrays[k])
        return tensors

    def to_json(self, **kwargs) -> str:
        """``get_config()`` as a JSON string (``kwargs`` go to ``json.dumps``); ``models.model_from_json`` reads it,
        as in Keras (magmadnn's config, not Keras' file layout)."""
        import json

        return json.dumps(self.get_config(), **kwargs)

    @classmethod
    def from_config(cls, config: dict, custom_objects: dict | None = None):
        """Keras' ``Model.from_config`` / ``Sequential.from_config``: a new (untrained) model from ``get_config()``
        output (``custom_objects``: ``{class name: Layer subclass}`` for unregistered layers). A subclass of Model
        gets ``cls(**config)``, its own ``get_config()`` output (Keras' default)."""
        Sequential = Model._sequential_class  # the subclass of models/sequential.py, which sets it

        graph = isinstance(config, dict) and config.get("class_name") in ("Model", "Sequential") and "layers" in config
        if cls not in (Model, Sequential) and not graph:
            return cls(**config)
        model = rebuild(config, Sequential, Model, None, custom_objects)
        if not isinstance(model, cls):
            raise TypeError(f"{cls.__name__}.from_config: the configuration describes a {type(model).__name__} "
                            f"(class_name {config.get('class_name')!r}); use {type(model).__name__}.from_config or "
                            "models.model_from_config")
        return model

    def get_config(self) -> dict:
        if self._subclassed:
            return self._subclass_config()
        index = {id(node): i for i, node in enumerate(self.nodes)}
        layer_index = {id(layer): i for i, layer in enumerate(self._all_layers)}
        return {
            "class_name": "Model", "name": self.name, "seed": self.seed, "dtype": self.dtype_policy.name,
            "trainable": self._trainable,
            "layers": [{"class_name": type(layer).__name__, "config": layer.get_config()}
                       for layer in self._all_layers],
            "nodes": [{"layer": layer_index[id(node.layer)], "inputs": [index[id(p)] for p in node.parents],
                       "many": node.many, **({} if node.index is None else {"index": node.index})}
                      for node in self.nodes],
            "inputs": [index[id(node)] for node in self.inputs], "output": index[id(self._outputs[0])],
            **({} if len(self._outputs) == 1 and self._output_keys is None else
               {"outputs": [index[id(o)] for o in self._outputs],
                "output_keys": list(self._output_keys) if isinstance(self._output_keys, tuple) else None}),
            **({} if self._input_keys is None or self._input_keys == "list" else
               {"input_keys": list(self._input_keys)}),
        }

    get_config._functional = True

    def _stored_config(self) -> dict:
        """What a model file holds to rebuild this model (a subclass's own ``get_config`` is part of it)."""
        return self._subclass_config() if self._subclassed else self.get_config()

    def architecture(self) -> list[dict]:
        """Per layer: class, configuration without name/seed, weight shapes (what a weights file must match)."""
        out = []
        for layer in self._all_layers:
            given = layer.architecture_config() if isinstance(layer, Operation) else layer.get_config()
            config = {k: v for k, v in given.items() if k not in ("name", "seed", "dtype", "trainable")}
            shapes = {name: list(weight.shape) for name, weight in layer.named_weights()}
            out.append({"class_name": type(layer).__name__, "name": layer.name, "config": config, "weights": shapes})
        return out

    def summary(self, print_fn=print) -> str:
        """The layer table (also printed through ``print_fn`` unless it is None)."""
        self._require_built("summary")
        text = summary_text(self)
        if print_fn is not None:
            print_fn(text)
        return text

    def _require_built(self, what: str) -> None:
        if not self.built:
            raise RuntimeError(f"model {self.name!r} is not built yet: give it an Input layer or call {what}() "
                               "after fit/predict on data")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, layers={len(self.layers)})"



def __getattr__(name):  # ``from magmadnn.models.model import Sequential`` (its home before it had its own module)
    if name == "Sequential":
        return Model._sequential_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
