"""Model (functional graph of layers) and Sequential, with compile / fit / evaluate / predict / summary.

A model owns its device (backend: ``device="host" | "gpu" | "gpu:N" | "auto"``, see :mod:`magmadnn.backend`),
dtype (float32 by default) and an integer ``seed``. Every layer gets a deterministic seed derived from the model seed
and its position, so two models built alike with the same seed start with identical weights, dropout masks and
shuffling order. ``compile(seed=s)`` re-seeds the model and re-creates the weights. ``model.to(device)`` moves
weights, BatchNorm statistics, optimizer state and dropout streams to another device; training goes on as if it had
stayed (``compile(device=...)`` does the same).

Training never leaves the device. Inside ``fit`` the only device-to-host copy is one read of the running loss and
metric sums (kept in one backend vector, see :mod:`.training`) per progress update: every ``progress_interval``
seconds and at each epoch end (validation included in that read). Targets are checked once per ``fit`` call on the
host arrays; metrics are computed with backend ops; the optimizer never reads values back. Per-batch callback logs
hold the batch ``loss`` only on the host backend, where reading it is free.

Non-finite loss: a NaN/inf loss is never applied. On the host each batch loss is checked before its update. On a
device the check rides on the progress read: fit keeps a backend snapshot from the previous update and the batches
since; when the read sum is not finite it restores the snapshot and replays those batches one by one (reading each
loss: this error path alone costs extra reads) up to the offending one, which is not applied. Then, with a
``callbacks.TerminateOnNaN`` the training stops cleanly, otherwise :class:`NonFiniteLossError` is raised.

Non-finite parameters: each progress read also carries ``0 * sum(p)`` over the parameters (0, or NaN when an update
left a weight NaN/inf), added to the running loss so that no extra read is made; when it is not finite the epoch
finds the update (replaying on a device) and stops like a non-finite loss, with :class:`NonFiniteParameterError`
naming the layer and the parameter. Arguments (``operator.index`` integers, finite reals) and data (no empty or
non-finite arrays, targets the loss accepts) are checked once per call before any batch runs.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend as _backend
from .. import callbacks as _callbacks
from .. import losses as _losses
from .. import metrics as _metrics
from .. import optimizers as _optimizers
from .._checks import callback_list, finite_array, integer, real
from .._graph import postorder
from ..autograd import Tensor, no_grad
from ..backend import host as _host
from ..layers.base import (
    Input,
    Layer,
    ShapeMismatchError,
    SymbolicTensor,
    _auto_name,
    _fresh_seed,
    as_symbolic,
    derive_seed,
    layer_class,
    shape_str,
)
from . import persistence
from .summary import summary_text
from .training import Epoch, Tally, setup_data_parallel, train_step

__all__ = ["Model", "Sequential", "NonFiniteLossError", "NonFiniteParameterError", "model_from_config"]

_SHUFFLE_TAG = 0x5EED


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (the offending update was not applied)."""


class NonFiniteParameterError(FloatingPointError):
    """An update left a parameter NaN or infinite (the message names the layer and the parameter)."""


def _topological_nodes(output: SymbolicTensor) -> list[SymbolicTensor]:
    """Every node the output depends on, producers before consumers."""
    return postorder(output, lambda node: reversed(node.parents))


def _real_array(x, what: str) -> np.ndarray:
    array = np.asarray(x)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_) \
            or np.iscomplexobj(array):
        raise TypeError(f"{what} must be an array of real numbers (float or int), got dtype {array.dtype}")
    return array


class Model:
    """A graph of layers from ``inputs`` (Input layers) to one ``outputs`` tensor."""

    is_sequential = False

    #: seconds between progress updates in ``fit`` (each is one host read of the running loss and metrics)
    progress_interval = 0.1

    def __init__(self, inputs, outputs, name: str | None = None, seed: int | None = None, dtype="float32",
                 device=None, backend=None):
        self._init_common(name, seed, dtype, device, backend)
        self._set_graph(inputs, outputs)

    # ------------------------------------------------------------------------------------------ construction
    def _init_common(self, name, seed, dtype, device, backend):
        self.name = name or _auto_name(type(self))
        self.seed = _fresh_seed() if seed is None else int(seed)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise TypeError(f"model {self.name!r}: dtype must be float32 or float64, got {self.dtype}")
        if device is not None and backend is not None and _backend.get(device) is not _backend.get(backend):
            raise ValueError(f"model {self.name!r}: device={device!r} and backend={backend!r} disagree; "
                             "pass device= only (backend= is its old name)")
        self.xp = _backend.get(device if device is not None else backend)
        self.optimizer = self.loss = None
        self.metrics: list = []
        self.compiled = False
        self.stop_training, self.stop_reason = False, None
        self.epoch = 0
        self.built = False
        self.layers: list[Layer] = []
        self._shuffle_rng = np.random.default_rng(derive_seed(self.seed, _SHUFFLE_TAG))
        self._parallel = None  # during fit(distributed=...): a training.StepHook (magmadnn.distributed)

    def _set_graph(self, inputs, outputs):
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if isinstance(outputs, (list, tuple)):
            if len(outputs) != 1:
                raise ValueError(f"model {self.name!r}: exactly one output tensor is supported, got {len(outputs)}")
            outputs = outputs[0]
        for item in inputs:
            if not isinstance(item, Input) and not (isinstance(item, SymbolicTensor) and isinstance(item.layer, Input)):
                raise TypeError(f"model {self.name!r}: inputs must be Input layers, got {item!r}")
        outputs = as_symbolic(outputs)
        if not isinstance(outputs, SymbolicTensor):
            raise TypeError(f"model {self.name!r}: outputs must be the result of calling layers on Inputs, "
                            f"got {type(outputs).__name__}")
        self.inputs = [as_symbolic(i) for i in inputs]
        self.output = outputs
        self.nodes = _topological_nodes(outputs)
        for node in self.nodes:
            if isinstance(node.layer, Input) and all(node is not i for i in self.inputs):
                raise ValueError(f"model {self.name!r}: the output depends on Input {node.layer.name!r}, which is "
                                 "not among the model inputs")
        layers = [i.layer for i in self.inputs]
        for node in self.nodes:
            if all(node.layer is not known for known in layers):
                layers.append(node.layer)
        names = [layer.name for layer in layers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model {self.name!r}: layer names must be unique, {duplicates} are used more than once")
        self.layers = layers
        self._configure_layers()
        self.built = True

    def _configure_layers(self, force: bool = False):
        """Give every layer the model's backend, dtype and a seed derived from the model seed (weights are re-created
        where these change, or everywhere with ``force``)."""
        for index, layer in enumerate(self.layers):
            layer.configure(self.xp, self.dtype, derive_seed(self.seed, index), force=force)

    def nodes_of(self, layer) -> list[SymbolicTensor]:
        return [node for node in self.nodes if node.layer is layer]

    @property
    def input_shapes(self) -> list[tuple]:
        return [node.shape for node in self.inputs]

    @property
    def output_shape(self) -> tuple:
        return self.output.shape

    def reseed(self, seed: int) -> None:
        """Set a new model seed: re-create every weight, dropout stream and the shuffling order from it."""
        self.seed = int(seed)
        self._shuffle_rng = np.random.default_rng(derive_seed(self.seed, _SHUFFLE_TAG))
        if self.built:
            self._configure_layers(force=True)

    # ------------------------------------------------------------------------------------------ forward
    def _forward(self, inputs: list[Tensor], training: bool) -> Tensor:
        values = {}
        feeds = {id(node): tensor for node, tensor in zip(self.inputs, inputs)}
        for node in self.nodes:
            if isinstance(node.layer, Input):
                values[id(node)] = feeds[id(node)]
                continue
            args = [values[id(parent)] for parent in node.parents]
            values[id(node)] = node.layer.call(args if node.many else args[0], training=training)
        return values[id(self.output)]

    def __call__(self, x, training: bool = False):
        """Run the model eagerly on NumPy arrays or Tensors (one per input); returns a Tensor."""
        if isinstance(x, (list, tuple)) and any(isinstance(i, Tensor) for i in x):
            tensors = list(x)
        elif isinstance(x, Tensor):
            tensors = [x]
        else:
            tensors = [self._to_tensor(a) for a in self._input_arrays(x, "call")]
        return self._forward(tensors, training)

    def _to_tensor(self, array) -> Tensor:
        return Tensor(self.xp.asarray(array, self.dtype), backend=self.xp)

    # ------------------------------------------------------------------------------------------ weights
    def parameters(self) -> list:
        return [p for layer in self.layers for p in layer.parameters()]

    def named_arrays(self) -> dict:
        """Every weight and state array (backend arrays) by a position-based key ``layers.<i>.<name>``."""
        out = {}
        for index, layer in enumerate(self.layers):
            for name, param in layer.weights.items():
                out[f"layers.{index}.{name}"] = param.data
            for name, array in layer.state.items():
                out[f"layers.{index}.{name}"] = array
        return out

    def get_weights(self) -> list[np.ndarray]:
        """Copies (NumPy) of every weight and state array, in layer order."""
        return [np.array(self.xp.to_numpy(a)) for a in self.named_arrays().values()]

    def set_weights(self, arrays) -> None:
        keys = list(self.named_arrays())
        arrays = list(arrays)
        if len(arrays) != len(keys):
            raise ValueError(f"model {self.name!r}: set_weights got {len(arrays)} arrays, expected {len(keys)}")
        self._assign(dict(zip(keys, arrays)), "set_weights")

    def _assign(self, arrays: dict, origin: str) -> None:
        """Copy NumPy ``arrays`` (key -> array, keys as in ``named_arrays``) into the weights: every array is checked
        (name, shape, real dtype, finite values) and converted before the first is assigned (all or nothing)."""
        self._commit(self._prepare_assign(arrays, origin))

    def _prepare_assign(self, arrays: dict, origin: str) -> list:
        """Checked, converted backend arrays for every weight and state array: ``[(layer, name, value)]``."""
        plan = []
        for index, layer in enumerate(self.layers):
            params, state = layer.weights, layer._state
            for name in [*params, *state]:
                key = f"layers.{index}.{name}"
                where = f"{name!r} of layer {layer.name!r} ({type(layer).__name__})"
                if key not in arrays:
                    raise persistence.ArchitectureMismatchError(f"{origin}: no array for {where}")
                array = np.asarray(arrays[key])
                current = params[name].data if name in params else state[name]
                if tuple(array.shape) != tuple(current.shape):
                    raise persistence.ArchitectureMismatchError(
                        f"{origin}: {where} has shape {shape_str(array.shape)}, the model needs "
                        f"{shape_str(current.shape)}")
                if array.dtype.kind not in "iuf":
                    raise persistence.ModelFileError(f"{origin}: {where} has dtype {array.dtype}; weights must be "
                                                     "real numbers")
                if array.dtype.kind == "f" and not np.isfinite(array).all():
                    raise persistence.ModelFileError(f"{origin}: {where} holds non-finite values (NaN or inf)")
                plan.append((layer, name, self.xp.asarray(np.array(array, dtype=layer.dtype))))
        return plan

    @staticmethod
    def _commit(plan: list) -> None:
        for layer, name, value in plan:
            if name in layer._params:
                layer._params[name].data = value
            else:
                layer._state[name] = value

    def count_params(self) -> int:
        return sum(layer.count_params() for layer in self.layers)

    # ------------------------------------------------------------------------------------------ configuration
    def get_config(self) -> dict:
        index = {id(node): i for i, node in enumerate(self.nodes)}
        layer_index = {id(layer): i for i, layer in enumerate(self.layers)}
        return {
            "class_name": "Model", "name": self.name, "seed": self.seed, "dtype": self.dtype.name,
            "layers": [{"class_name": type(layer).__name__, "config": layer.get_config()} for layer in self.layers],
            "nodes": [{"layer": layer_index[id(node.layer)], "inputs": [index[id(p)] for p in node.parents],
                       "many": node.many} for node in self.nodes],
            "inputs": [index[id(node)] for node in self.inputs], "output": index[id(self.output)],
        }

    def architecture(self) -> list[dict]:
        """Per layer: class, configuration without name/seed, weight shapes (what a weights file must match)."""
        out = []
        for layer in self.layers:
            config = {k: v for k, v in layer.get_config().items() if k not in ("name", "seed", "dtype")}
            shapes = {name: list(param.shape) for name, param in layer.weights.items()}
            shapes.update({name: list(array.shape) for name, array in layer.state.items()})
            out.append({"class_name": type(layer).__name__, "name": layer.name, "config": config, "weights": shapes})
        return out

    def summary(self, print_fn=print) -> str:
        """The layer table (also printed through ``print_fn`` unless it is None)."""
        self._require_built("summary")
        text = summary_text(self)
        if print_fn is not None:
            print_fn(text)
        return text

    # ------------------------------------------------------------------------------------------ compile
    def compile(self, optimizer="sgd", loss="cross_entropy", metrics=None, seed: int | None = None, device=None):
        """Choose optimizer, loss and metrics. ``seed`` re-seeds and re-initializes the weights; ``device``
        ("host", "gpu", "gpu:N", "auto") moves the model there (weights that exist already are moved, see ``to``)."""
        if device is not None:
            self.to(device)
        if seed is not None:
            self.reseed(seed)
        self.optimizer = _optimizers.get(optimizer)
        self.loss = _losses.get(loss)
        if isinstance(metrics, (str, _metrics.Metric)):
            metrics = [metrics]
        self.metrics = [_metrics.get(m) for m in (metrics or [])]
        self.compiled = True
        return self

    @property
    def device(self) -> str:
        """Where the model lives: "host" or "gpu:N"."""
        return _backend.device_label(self.xp)

    def to(self, device):
        """Move the model to ``device`` ("host", "gpu", "gpu:N", "auto"): weights, BatchNorm statistics, optimizer
        slots and dropout streams are copied there (through the host, once); returns the model."""
        xp = _backend.get(device)
        old = self.xp
        if xp is old:
            return self

        def move(array):
            return xp.asarray(np.asarray(old.to_numpy(array)))

        if self.built:
            for layer in self.layers:
                layer.move_to(xp, move)
                stream = getattr(layer, "rng", None)
                if stream is not None:
                    layer.rng = _moved_stream(stream, xp, layer.name)
        if self.optimizer is not None:
            self.optimizer.move_slots(move)
        self.xp = xp
        return self

    def _require_compiled(self, what: str) -> None:
        if not self.compiled:
            raise RuntimeError(f"model {self.name!r}: call compile(optimizer, loss, metrics) before {what}()")

    def _require_built(self, what: str) -> None:
        if not self.built:
            raise RuntimeError(f"model {self.name!r} is not built yet: give it an Input layer or call {what}() "
                               "after fit/predict on data")

    # ------------------------------------------------------------------------------------------ data checks
    def _input_arrays(self, x, who: str) -> list[np.ndarray]:
        several = isinstance(x, (list, tuple)) and (len(self.inputs) > 1 or all(hasattr(a, "shape") for a in x))
        arrays = list(x) if several else [x]
        arrays = [_real_array(a, f"{who}: model input") for a in arrays]
        if not self.built:
            self._build_from_data(arrays)
        if len(arrays) != len(self.inputs):
            names = [node.layer.name for node in self.inputs]
            raise ValueError(f"{who}: model {self.name!r} has {len(names)} inputs {names}, got {len(arrays)} arrays")
        for node, array in zip(self.inputs, arrays):
            if tuple(array.shape[1:]) != node.shape or array.ndim != len(node.shape) + 1:
                raise ShapeMismatchError(
                    f"{who}: input {node.layer.name!r} of model {self.name!r} expects batches of shape "
                    f"(N, {', '.join(map(str, node.shape))}) (per-sample {shape_str(node.shape)}), got an array of "
                    f"shape {shape_str(array.shape)}")
        if len({a.shape[0] for a in arrays}) > 1:
            raise ValueError(f"{who}: the input arrays have different sample counts {[a.shape[0] for a in arrays]}")
        return arrays

    def _build_from_data(self, arrays) -> None:
        raise RuntimeError(f"model {self.name!r} is not built")

    def _targets(self, y, n: int, who: str) -> np.ndarray:
        if y is None:
            raise ValueError(f"{who}: targets y are required")
        y = _real_array(y, f"{who}: targets")
        if y.ndim == 0 or y.shape[0] != n:
            raise ValueError(f"{who}: x has {n} samples but y has shape {y.shape}")
        finite_array(y, "the targets y", who)
        self.loss.validate(y, self.output_shape)
        return y

    def _training_inputs(self, x, who: str) -> list[np.ndarray]:
        """Input arrays for fit/evaluate/train_on_batch: at least one sample, finite values (checked once)."""
        arrays = self._input_arrays(x, who)
        if arrays[0].shape[0] == 0:
            raise ValueError(f"{who}: x holds no samples (shape {shape_str(arrays[0].shape)}); there is nothing to "
                             f"{'evaluate' if who == 'evaluate' else 'train on'}")
        for node, array in zip(self.inputs, arrays):
            finite_array(array, f"the inputs x (input {node.layer.name!r})", who)
        return arrays

    # ------------------------------------------------------------------------------------------ training
    def train_on_batch(self, x, y) -> float:
        """One optimizer step on one batch; returns the loss before the step (no metrics, no callbacks)."""
        self._require_compiled("train_on_batch")
        xs = self._training_inputs(x, "train_on_batch")
        y = self._targets(y, xs[0].shape[0], "train_on_batch")
        value = self._train_step([a.astype(self.dtype, copy=False) for a in xs], y, check=True)
        if not math.isfinite(value):
            raise NonFiniteLossError(f"train_on_batch: loss is {value}; no update was applied")
        return value

    def _loss_of(self, outputs: Tensor, y: np.ndarray) -> Tensor:
        """The loss against host targets (the loss function moves them to the backend; nothing comes back)."""
        return self.loss.checked(outputs, self.loss.prepare(y, _host, self.dtype))

    def _tally_batch(self, tally: Tally, prefix: str, loss_value, outputs, y: np.ndarray) -> None:
        m = int(y.shape[0])
        weighted = loss_value if self.loss.reduction == "sum" else self.xp.multiply(loss_value, float(m))
        tally.add(prefix + "loss", weighted, m)
        for metric in self.metrics:
            tally.add(prefix + metric.name, metric.hits(outputs, y, self.xp), m)

    def _train_step(self, xs: list[np.ndarray], y: np.ndarray, check: bool, tally: Tally | None = None):
        """One training step on one batch (see :func:`.training.train_step`)."""
        return train_step(self, xs, y, check, tally)

    def fit(self, x=None, y=None, batch_size: int = 32, epochs: int = 1, validation_split: float = 0.0,
            validation_data=None, shuffle: bool = True, callbacks=None, verbose: int = 1,
            initial_epoch: int = 0, distributed=False) -> _callbacks.History:
        """Train for epochs ``initial_epoch .. epochs-1``; returns the History (per-epoch loss, metrics, val_*).

        ``x``: array (or list of arrays for several inputs) with ``y``, or an iterable of ``(x_batch, y_batch)``
        (such as ``magmadnn.data.DataLoader``) with ``y=None``. ``validation_split`` holds out the last fraction of
        the samples (before shuffling); ``validation_data`` is ``(x_val, y_val)``. With ``verbose >= 1`` the first
        line names the device ("Training on gpu:0 (pymagma simulator)", "Training on host (NumPy)").

        ``distributed=True`` (run under ``mpiexec -n N``, arrays only): data-parallel training over MPI with
        ``batch_size`` samples per rank per step, as one process with batch ``N * batch_size`` would train; figures
        are averaged over the ranks and only rank 0 prints and writes files (see :mod:`magmadnn.distributed`).
        ``distributed=magmadnn.distributed.Options(sync_batchnorm=True, bucket_mb=..., overlap=...)`` chooses
        synchronized BatchNorm statistics, the gradient bucket size and overlap with the backward pass.
        """
        self._require_compiled("fit")
        batch_size = integer(batch_size, "batch_size", "fit", minimum=1)
        epochs = integer(epochs, "epochs", "fit", minimum=0)
        initial_epoch = integer(initial_epoch, "initial_epoch", "fit", minimum=0)
        if epochs <= initial_epoch:
            raise ValueError(f"fit: epochs={epochs} with initial_epoch={initial_epoch} runs no epoch; epochs is the "
                             "index of the last epoch + 1 (train epochs initial_epoch .. epochs-1), so pass "
                             f"epochs > {initial_epoch}")
        validation_split = real(validation_split, "validation_split", "fit", 0.0, 1.0, open_high=True)
        verbose = integer(int(verbose) if isinstance(verbose, bool) else verbose, "verbose", "fit", minimum=0)
        if not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError(f"fit: shuffle must be True or False, got {shuffle!r}")
        callbacks = callback_list(callbacks, "fit")
        if _is_batch_iterable(x):
            if y is not None or validation_split:
                raise ValueError("fit: with a batch iterable (DataLoader) pass y=None and use validation_data")
            batches = _CheckedBatches(self, x)
        else:
            xs = [a.astype(self.dtype, copy=False) for a in self._training_inputs(x, "fit")]
            y = self._targets(y, xs[0].shape[0], "fit")
            n = xs[0].shape[0]
            if validation_split:
                n_val = int(round(n * validation_split))
                if n_val < 1 or n_val >= n:
                    raise ValueError(f"fit: validation_split={validation_split} of {n} samples leaves an empty split")
                validation_data = ([a[n - n_val:] for a in xs], y[n - n_val:])
                xs, y = [a[:n - n_val] for a in xs], y[:n - n_val]
            batches = _ArrayBatches(xs, y, batch_size, shuffle, self._shuffle_rng)
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
                raise ValueError("fit: validation_data must be a pair (x_val, y_val)")
            x_val = self._training_inputs(validation_data[0], "fit (validation_data)")
            y_val = self._targets(validation_data[1], x_val[0].shape[0], "fit (validation_data)")
            validation_data = (x_val, y_val)

        if distributed:
            options = None if isinstance(distributed, (bool, np.bool_)) else distributed
            batches, validation_data, callbacks, verbose, self._parallel = setup_data_parallel(
                self, batches, validation_data, callbacks, verbose, options)
        if verbose:
            print(f"Training on {_backend.describe(self.xp)}")
        history = _callbacks.History()
        cbs = _callbacks.CallbackList([*callbacks, history], self)  # History last: sees every log key
        self.log_keys = tuple(self._tally_names(validation_data is not None))  # callbacks check their keys with it
        self.stop_training, self.stop_reason = False, None
        cbs.on_train_begin({})
        try:
            for epoch in range(initial_epoch, epochs):
                cbs.on_epoch_begin(epoch, {})
                logs = Epoch(self, batches, epoch, epochs, cbs, verbose, validation_data, batch_size).run()
                self.epoch = epoch + 1
                cbs.on_epoch_end(epoch, logs)
                if self.stop_training:
                    if verbose and self.stop_reason:
                        print(self.stop_reason)
                    break
        finally:
            if self._parallel is not None:
                self._parallel.close()
                self._parallel = None
            cbs.on_train_end({})
        return history

    def _param_probe(self):
        """A 0-d backend value, 0 when every parameter is finite and NaN or inf otherwise (nothing is read)."""
        total = None
        for param in self.parameters():
            term = self.xp.multiply(self.xp.sum(param.data), 0.0)
            total = term if total is None else self.xp.add(total, term)
        return total

    def _nonfinite_parameter(self):
        """``(layer, name)`` of the first parameter holding NaN/inf, else None (one read per parameter: only on
        the error path)."""
        for layer in self.layers:
            for name, param in layer.weights.items():
                if not self.xp.isfinite_all(param.data):
                    return layer, name
        return None

    def _non_finite_parameters(self, cbs, epoch: int, found, batch: int | None, logs: dict) -> dict:
        """An update left parameter ``found = (layer, name)`` non-finite: stop (TerminateOnNaN) or raise."""
        layer, name = found
        cbs.on_nonfinite_parameter(epoch, layer.name, name)
        if self.stop_training:
            return logs
        where = f"after the update of batch {batch}" if batch else "during the epoch"
        raise NonFiniteParameterError(
            f"fit: parameter {name!r} of layer {layer.name!r} ({type(layer).__name__}) became NaN or infinite at "
            f"epoch {epoch + 1}, {where} (learning rate {self.optimizer.learning_rate:.6g}); lower the learning "
            "rate, check the data, or pass callbacks=[TerminateOnNaN()] to stop training without an error")

    def _non_finite(self, cbs, epoch: int, index: int, value: float) -> dict:
        """The batch ``index`` had loss ``value`` and was not applied: stop (TerminateOnNaN) or raise; when an
        earlier update left a parameter non-finite (the usual cause), that is reported instead."""
        found = self._nonfinite_parameter()
        if found is not None:
            return self._non_finite_parameters(cbs, epoch, found, index, {"loss": value})
        cbs.on_nonfinite_loss(epoch, index, value)
        if self.stop_training:
            return {"loss": value}
        raise NonFiniteLossError(
            f"fit: the loss became {value} at epoch {epoch + 1}, batch {index + 1} (the update was not "
            "applied); lower the learning rate, check the data for NaN/inf, or pass "
            "callbacks=[TerminateOnNaN()] to stop training without an error")

    def _tally_names(self, validating: bool) -> list[str]:
        names = ["loss", *(m.name for m in self.metrics)]
        return names + [f"val_{n}" for n in names] if validating else names

    def _results(self, sums: dict, counts: dict, prefix: str = "") -> dict:
        """Epoch figures from tally sums: the loss as its reduction says (sample mean or total), metric fractions."""
        out = {}
        for name in ["loss", *(m.name for m in self.metrics)]:
            total, n = sums[prefix + name], counts[prefix + name]
            if not n:
                out[prefix + name] = float("nan")
            elif name == "loss" and self.loss.reduction == "sum":
                out[prefix + name] = total
            else:
                out[prefix + name] = total / n
        return out

    # ------------------------------------------------------------------------------------------ inference
    def _evaluate_into(self, tally: Tally, prefix: str, batches) -> None:
        for xb, yb in batches:
            with no_grad():
                outputs = self._forward([self._to_tensor(a) for a in xb], training=False)
                loss = self._loss_of(outputs, yb)
            self._tally_batch(tally, prefix, loss.data, outputs.data, yb)

    def evaluate(self, x, y=None, batch_size: int = 32, verbose: int = 0) -> dict:
        """Mean loss and metrics over ``(x, y)`` (or a batch iterable) in inference mode (one host read)."""
        self._require_compiled("evaluate")
        batch_size = integer(batch_size, "batch_size", "evaluate", minimum=1)
        tally = Tally(self.xp, self._tally_names(False), self.dtype)
        self._evaluate_into(tally, "", self._inference_batches(x, y, batch_size, "evaluate"))
        if not tally.counts["loss"]:
            raise ValueError("evaluate: the batch iterable gave no samples; there is nothing to evaluate")
        results = self._results(tally.read(), tally.counts)
        if verbose:
            print(" - ".join(f"{k}: {v:.4f}" for k, v in results.items()))
        return results

    def predict(self, x, batch_size: int = 32) -> np.ndarray:
        """Model outputs (NumPy, model dtype) for every sample of ``x``, in inference mode."""
        batch_size = integer(batch_size, "batch_size", "predict", minimum=1)
        xs = self._input_arrays(x, "predict")
        n = xs[0].shape[0]
        result = np.empty((n, *self.output_shape), dtype=self.dtype)
        for start in range(0, n, batch_size):
            with no_grad():
                out = self._forward([self._to_tensor(a[start:start + batch_size]) for a in xs], training=False)
            result[start:start + batch_size] = self.xp.to_numpy(out.data)
        return result

    def _inference_batches(self, x, y, batch_size, who, checked: bool = False):
        if checked:  # arrays that fit checked already
            for start in range(0, x[0].shape[0], batch_size):
                yield [a[start:start + batch_size] for a in x], y[start:start + batch_size]
            return
        if _is_batch_iterable(x):
            for xb, yb in x:
                xs = self._training_inputs(xb, who)
                yield xs, self._targets(yb, xs[0].shape[0], who)
            return
        xs = self._training_inputs(x, who)
        y = self._targets(y, xs[0].shape[0], who)
        for start in range(0, xs[0].shape[0], batch_size):
            yield [a[start:start + batch_size] for a in xs], y[start:start + batch_size]

    # ------------------------------------------------------------------------------------------ persistence
    def save(self, path) -> str:
        """Architecture (JSON) + weights to ``.safetensors`` or ``.npz`` (atomic write; never pickle)."""
        return persistence.save_model(self, path)

    def load_weights(self, path) -> None:
        """Load weights from a model file or checkpoint of the same architecture (else ArchitectureMismatchError)."""
        persistence.load_weights(self, path)

    def save_checkpoint(self, path, epoch: int | None = None) -> str:
        """Resumable checkpoint: weights, optimizer state, epoch and RNG states, written atomically."""
        return persistence.save_checkpoint(self, path, self.epoch if epoch is None else epoch)

    def load_checkpoint(self, path) -> int:
        """Restore a checkpoint into this model; returns the epoch to pass to ``fit(initial_epoch=...)``."""
        return persistence.load_checkpoint(self, path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, layers={len(self.layers)})"


class Sequential(Model):
    """A plain stack of layers. Starting with an ``Input`` builds it at once (shape errors show immediately);
    otherwise it builds on the first data it sees."""

    is_sequential = True

    def __init__(self, layers=None, name: str | None = None, seed: int | None = None, dtype="float32",
                 device=None, backend=None):
        self._init_common(name, seed, dtype, device, backend)
        self._stack: list[Layer] = []
        for layer in layers or []:
            self._append(layer)
        if self._stack and isinstance(self._stack[0], Input):
            self._build_chain()

    def _append(self, layer) -> None:
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential {self.name!r}: expected Layer instances, got {type(layer).__name__}")
        if isinstance(layer, Input) and self._stack:
            raise ValueError(f"Sequential {self.name!r}: an Input layer can only come first")
        self._stack.append(layer)

    def add(self, layer: Layer) -> None:
        """Append a layer (built at once when the model already knows its input shape)."""
        self._append(layer)
        if isinstance(self._stack[0], Input):
            self._build_chain()

    def _build_chain(self) -> None:
        first = self._stack[0]
        node = first.output
        for layer in self._stack[1:]:
            node = layer(node)
        self._set_graph([first], node)

    def _build_from_data(self, arrays) -> None:
        if not self._stack:
            raise RuntimeError(f"Sequential {self.name!r} has no layers")
        if len(arrays) != 1:
            raise ValueError(f"Sequential {self.name!r} takes one input array, got {len(arrays)}")
        self.build(arrays[0].shape[1:])

    def build(self, input_shape) -> None:
        """Build for a per-sample ``input_shape`` (batch excluded) by putting an Input first."""
        if not self.built:
            self._stack.insert(0, Input(tuple(input_shape)))
            self._build_chain()

    def get_config(self) -> dict:
        return {"class_name": "Sequential", "name": self.name, "seed": self.seed, "dtype": self.dtype.name,
                "layers": [{"class_name": type(layer).__name__, "config": layer.get_config()}
                           for layer in self.layers]}


def model_from_config(config: dict, device=None, backend=None) -> Model:
    """Rebuild an (untrained) model from ``get_config()`` output on ``device`` (``backend``: its old name)."""
    device = device if device is not None else backend
    try:
        layers = [layer_class(entry["class_name"]).from_config(dict(entry["config"])) for entry in config["layers"]]
        common = {"name": config["name"], "seed": config["seed"], "dtype": config["dtype"], "device": device}
        if config["class_name"] == "Sequential":
            return Sequential(layers, **common)
        nodes = []
        for entry in config["nodes"]:
            layer = layers[entry["layer"]]
            parents = [nodes[i] for i in entry["inputs"]]
            if isinstance(layer, Input):
                nodes.append(layer.output)
            else:
                nodes.append(layer(parents if entry["many"] else parents[0]))
        return Model([nodes[i] for i in config["inputs"]], nodes[config["output"]], **common)
    except (KeyError, IndexError, TypeError) as exc:
        raise persistence.ModelFileError(f"damaged model configuration: {type(exc).__name__}: {exc}") from None


def _moved_stream(stream, xp, layer_name: str):
    """A random stream of backend ``xp`` in the state of ``stream`` (the same draws follow on either backend)."""
    moved = xp.rng(0)
    if type(moved) is not type(stream):
        raise TypeError(f"Model.to: layer {layer_name!r} holds a {type(stream).__name__} random stream but the "
                        f"{_backend.device_label(xp)} backend uses {type(moved).__name__}; it cannot be moved")
    persistence._set_rng_state(moved, persistence._rng_state(stream))
    return moved


class _CheckedBatches:
    """A batch iterable (DataLoader) for fit: inputs and targets checked once per fit when it exposes its arrays
    (``x``, ``y``), else per batch (host checks only; nothing is read from the device)."""

    def __init__(self, model, source):
        self.model, self.source = model, source
        self.whole = isinstance(getattr(source, "x", None), np.ndarray) and isinstance(getattr(source, "y", None),
                                                                                          np.ndarray)
        if self.whole:
            arrays = model._training_inputs(source.x, "fit")
            model._targets(source.y, arrays[0].shape[0], "fit")

    def __len__(self):
        return len(self.source)  # TypeError for an iterable without a length

    def __iter__(self):
        model = self.model
        for xb, yb in self.source:
            if self.whole:
                xs = list(xb) if isinstance(xb, (list, tuple)) else [xb]
                yield [np.asarray(a).astype(model.dtype, copy=False) for a in xs], np.asarray(yb)
            else:
                xs = [a.astype(model.dtype, copy=False) for a in model._training_inputs(xb, "fit")]
                yield xs, model._targets(yb, xs[0].shape[0], "fit")


def _is_batch_iterable(x) -> bool:
    return not isinstance(x, (np.ndarray, list, tuple)) and hasattr(x, "__iter__") and not hasattr(x, "__array__")


class _ArrayBatches:
    """Batches of in-memory arrays; shuffled batches are gathered into buffers allocated once per fit."""

    def __init__(self, xs, y, batch_size, shuffle, rng):
        self.xs, self.y, self.batch_size, self.shuffle, self.rng = xs, y, batch_size, shuffle, rng
        self.n = xs[0].shape[0]
        self.buffers = None

    def __len__(self):
        return -(-self.n // self.batch_size)

    def __iter__(self):
        if not self.shuffle:
            for start in range(0, self.n, self.batch_size):
                stop = start + self.batch_size
                yield [a[start:stop] for a in self.xs], self.y[start:stop]
            return
        order = self.rng.permutation(self.n)
        if self.buffers is None:
            self.buffers = [np.empty((min(self.batch_size, self.n), *a.shape[1:]), dtype=a.dtype) for a in self.xs]
        for start in range(0, self.n, self.batch_size):
            index = order[start:start + self.batch_size]
            m = index.shape[0]
            batch = [np.take(a, index, axis=0, out=buf[:m], mode="clip") for a, buf in zip(self.xs, self.buffers)]
            yield batch, self.y[index]
