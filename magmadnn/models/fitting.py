"""The training methods of ``Model``: ``compile``, ``fit``, ``train_on_batch``, and which runs the one training step
(:func:`.step.train_step`): eagerly, or replayed as a captured graph (:mod:`.replay`).

Training never leaves the device. Inside ``fit`` the only device-to-host copy is one read of the running loss and
metric sums (kept in one backend vector, see :mod:`.step`) per progress update: every ``progress_interval``
seconds and at each epoch end (validation included in that read). Targets are checked once per ``fit`` call on the
host arrays; metrics are computed with backend ops; the optimizer never reads values back. Per-batch callback logs
(Keras' running loss and metrics) are made only when a callback overrides a batch-end hook, and read from the device
only when the callback looks into them (see :mod:`magmadnn.callbacks`).

Non-finite loss: a NaN/inf loss is never applied. On the host each batch loss is checked before its update. On a
device the check rides on the progress read: fit keeps a backend snapshot from the previous update and the batches
since; when the read sum is not finite it restores the snapshot and replays those batches one by one (reading each
loss: this error path alone costs extra reads) up to the offending one, which is not applied. Then, with a
``callbacks.TerminateOnNaN`` the training stops cleanly, otherwise :class:`NonFiniteLossError` is raised.

Non-finite parameters: each progress read also carries ``0 * sum(p)`` over the parameters (0, or NaN when an update
left a weight NaN/inf), added to the running loss so that no extra read is made; when it is not finite the epoch
finds the update (replaying on a device) and stops like a non-finite loss, with :class:`NonFiniteParameterError`
naming the layer and the parameter. Arguments (``operator.index`` integers, finite reals) and data (no empty or non-
finite arrays, targets the loss accepts) are checked once per call before any batch runs (or per batch: _fit_inputs).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

from .. import _configurable, autograd
from .. import backend as _backend
from .. import callbacks as _callbacks
from .. import losses as _losses
from .. import metrics as _metrics
from .. import optimizers as _optimizers
from .._checks import batch_size_or_default, integer, real, verbosity
from ..autograd import Tensor
from ..backend import faults as _faults
from ..backend import host as _host
from ..callbacks import callback_list
from . import outputs as _outputs
from . import replay as _replay
from . import weighting as _weighting
from .batches import ArrayBatches, CheckedBatches, is_batch_iterable
from .diagnosis import nonfinite_cause
from .epoch import Epoch
from .inference import keras_results
from .outputs import resolved
from .step import Tally, TallyNames, setup_data_parallel, train_step

__all__ = ["Trainer", "NonFiniteLossError", "NonFiniteParameterError"]


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite (the offending update was not applied)."""


class NonFiniteParameterError(FloatingPointError):
    """An update left a parameter NaN or infinite (the message names the layer and the parameter)."""


class Trainer:
    """Compiling and training a model."""

    _graphs = None  # compile(graph=True): the captured steps (replay.GraphedSteps)

    def compile(self, optimizer="sgd", loss="cross_entropy", metrics=None, seed: int | None = None, device=None,
                graph="auto", reinitialize: bool = False, run_eagerly: bool | None = None,
                jit_compile="auto", auto_scale_loss: bool = True, loss_weights=None):
        """Choose optimizer, loss and metrics; the weights are kept (compile again to change the optimizer or its
        learning rate, as in Keras). ``seed`` re-seeds the model and re-creates its weights: allowed on a model
        never trained nor loaded; on a trained one pass ``reinitialize=True`` too (or call ``reinitialize(seed)``),
        else ValueError. ``device`` ("host", "gpu", "gpu:N", "auto") moves the model there (weights that exist
        already are moved, see ``to``).

        ``graph="auto"`` (the default): on a GPU, ``fit``, ``evaluate``, ``predict``, ``train_on_batch``,
        ``test_on_batch`` and ``predict_on_batch`` capture their step once per batch shape as a CUDA graph (after
        one eager step) and replay it; results equal eager ones bit for bit (see :mod:`.replay`). Where a step
        cannot be captured (or a capture or launch fails), one warning says why and it runs eagerly; on the host
        nothing is captured. ``graph=True`` also warns where the backend has no graphs; ``graph=False`` runs every
        step eagerly; the environment variable ``MAGMADNN_GRAPH=0`` turns replay off everywhere.

        Keras' ``run_eagerly`` and ``jit_compile`` are accepted: ``run_eagerly=True`` is ``graph=False``;
        ``jit_compile`` changes nothing (the results are the same either way).

        ``auto_scale_loss`` (Keras'): under the ``"mixed_float16"`` policy the optimizer is wrapped in a
        :class:`~magmadnn.optimizers.LossScaleOptimizer` unless it is one already.

        Several outputs (Keras 3's forms, :mod:`.outputs`): ``loss`` one for all, a list or a dict by output name
        (None: that output has no loss), ``loss_weights`` a list or dict (the loss is ``sum(w_k * loss_k)``),
        ``metrics`` a list with one entry per output (a metric or a list of them) or a dict by output name; the
        logs are ``loss``, ``<output>_loss`` (unweighted, when several outputs have a loss) and
        ``<output>_<metric>``."""
        if not isinstance(auto_scale_loss, (bool, np.bool_)):
            raise TypeError(f"compile: auto_scale_loss must be True or False, got {auto_scale_loss!r}")
        if run_eagerly is not None and not isinstance(run_eagerly, (bool, np.bool_)):
            raise TypeError(f"compile: run_eagerly must be True, False or None, got {run_eagerly!r}")
        if jit_compile not in ("auto", True, False):
            raise TypeError(f"compile: jit_compile must be 'auto', True or False, got {jit_compile!r}")
        if not (isinstance(graph, (bool, np.bool_)) or (isinstance(graph, str) and graph == "auto")):
            raise TypeError(f"compile: graph must be 'auto', True or False, got {graph!r}")
        if not isinstance(reinitialize, (bool, np.bool_)):
            raise TypeError(f"compile: reinitialize must be True or False, got {reinitialize!r}")
        if seed is not None and self._touched and not reinitialize:
            raise ValueError(
                f"compile(seed={seed!r}) would re-initialise the weights of model {self.name!r}, which has been "
                "trained or loaded (or holds layers trained in another model, built on data or assigned); "
                "compile keeps the weights without seed= (as in Keras), or pass "
                "reinitialize=True (or call model.reinitialize(seed)) to start from fresh weights")
        if device is not None:
            self.to(device)
        if seed is not None or reinitialize:
            self.reinitialize(seed)
        self.optimizer = _optimizers.get(optimizer)
        if (auto_scale_loss and self.dtype_policy.name == "mixed_float16"
                and not isinstance(self.optimizer, _optimizers.LossScaleOptimizer)):
            self.optimizer = _optimizers.LossScaleOptimizer(self.optimizer)
        self._compile_spec = (loss, loss_weights, metrics)  # a subclassed model of several outputs, built later
        if self.built and not self._single:
            loss, compiled = _outputs.compile_outputs(self, loss, loss_weights, metrics)
        else:
            # a loss per output (list, or dict by name) of a subclassed model not built yet: resolved when it is
            per_output = isinstance(loss, list) or isinstance(loss, dict) and "class_name" not in loss
            if loss_weights is not None and not per_output:
                loss = _single_weighted(loss, loss_weights, self.name)
            if not isinstance(loss, _outputs.ScaledLoss):
                loss = None if per_output and self._subclassed and not self.built else _losses.get(loss)
            if loss is not None:
                _losses.check_compiled(loss, self)
            if isinstance(metrics, (str, _metrics.Metric)):
                metrics = [metrics]
            compiled = [] if isinstance(metrics, dict) else [_metrics.get(m) for m in (metrics or [])]
        self.loss = _outputs.AddedLoss(loss, self) if self._subclassed and loss is not None else loss
        self._set_metrics(compiled)
        names = [m.name for m in compiled]
        if len(set(names)) != len(names):
            raise ValueError(f"compile: metrics {names} repeat a name; each metric's results are reported under its "
                             "name, so give each metric once")
        if self._graphs is not None:
            self._graphs.clear()
        if run_eagerly:
            graph = False
        self._graphs = _replay.GraphedSteps(self, "auto" if isinstance(graph, str) else True) if graph else None
        self.compiled = True
        return self

    def _require_compiled(self, what: str) -> None:
        if not self.compiled:
            raise RuntimeError(f"model {self.name!r}: call compile(optimizer, loss, metrics) before {what}()")

    def train_on_batch(self, x, y, sample_weight=None, class_weight=None, return_dict: bool = False):
        """One optimizer step on one batch (no callbacks); returns the loss and metrics of the batch before the
        step as Keras 3 does: the loss (a float) without metrics, else ``[loss, *metrics]`` in compile order, the
        dict with ``return_dict=True``. ``sample_weight`` / ``class_weight`` as in :meth:`fit`."""
        keras_results({}, return_dict)
        self._require_compiled("train_on_batch")
        if self._overrides("train_step"):  # Keras' custom training step (:mod:`.custom_steps`)
            return self._train_on_batch_custom(x, y, sample_weight, class_weight, return_dict)
        xs = self._training_inputs(x, "train_on_batch")
        y = self._targets(y, xs[0].shape[0], "train_on_batch")
        self._touched = True
        y = _weighting.attach(self, y, sample_weight, class_weight, "train_on_batch")
        self._warn_if_nothing_trains("train_on_batch")
        tally = Tally(self.xp, self._tally_names(False), self.dtype) if self.metrics else None
        value = self._checked_replay(self._cast_inputs(xs), y, tally)
        if value is None:
            value = self._train_step(self._cast_inputs(xs), y, check=True, tally=tally)
        if not (math.isfinite(value) or self.optimizer.skips_nonfinite):
            raise NonFiniteLossError(f"train_on_batch: loss is {value}; no update was applied")
        results = {"loss": value} if tally is None else self._results(tally.read(), tally.counts)
        return keras_results(results, return_dict)

    def _checked_replay(self, xs, y, tally):
        """``train_on_batch``'s step replayed (kind ``train_checked``): its loss read as an eager checked step
        reads it, and when it is not finite (unless the optimizer skips such steps) or a device check found a bad
        value, everything the step updated is put back, as eagerly nothing is applied. None: run it eagerly."""
        if self._graphs is None:
            return None
        opt = self.optimizer
        iterations = opt.iterations
        with np.errstate(all="ignore") if opt.skips_nonfinite else contextlib.nullcontext():
            loss = self._graphs.run("train_checked", xs, y, tally)
        if loss is None:
            return None
        step = self._graphs.last
        try:
            value = float(_faults.read(self.xp, loss).reshape(()))
        except ValueError:
            step.put_back(iterations)
            raise
        if not (math.isfinite(value) or opt.skips_nonfinite):
            step.put_back(iterations)
        return value

    def _loss_of(self, outputs: Tensor, y: np.ndarray) -> Tensor:
        """The loss against host targets (the loss function moves them to the backend; nothing comes back)."""
        loss = self.loss
        of_batch = getattr(type(loss), "of_batch", None)  # a Loss's (planned) batch; a wrapper's own checked
        loss = of_batch(loss, outputs, y, _host, self.dtype) if of_batch is not None else \
            loss.checked(outputs, loss.prepare(y, _host, self.dtype))
        return loss if self.__dict__.get("_penalty_free_at") == _configurable.generation else \
            self._with_penalties(loss)

    def _tally_batch(self, tally: Tally, prefix: str, loss_value, outputs, y: np.ndarray, staged=None,
                     loss_count=None) -> None:
        """``staged``: each metric's labels on the backend already (a captured step), else None. ``loss_count``: the
        batch's counted targets (``ignore_index``) as a backend array a captured step reads, else None (the host
        count is used)."""
        m = int(y.shape[0])
        n = getattr(self.loss, "counted", lambda _: None)(y)  # ignore_index: counted targets
        n = m if n is None else n
        if self.loss.sums_dataset:
            weighted = loss_value
        else:
            weighted = self.xp.multiply(loss_value, float(n) if loss_count is None else loss_count)
        tally.add(prefix + "loss", weighted, n)
        shape = (m, *self.output_shape) if self._fixed_output else (m, *resolved(self.output_shape, y.shape[1:]))
        for i, metric in enumerate(self.metrics):
            hits = metric.hits(outputs, y, self.xp) if staged is None else metric.hits_of(outputs, staged[i], self.xp)
            counted = getattr(metric, "counted", lambda *_: None)(y, shape)
            tally.add(prefix + metric.name, hits, m if counted is None else counted)

    def _train_step(self, xs: list[np.ndarray], y: np.ndarray, check: bool, tally: Tally | None = None,
                    _quiet: bool = False):
        """One training step on one batch (see :func:`.step.train_step`), replayed as a graph when compiled
        with ``graph=True`` and nothing is read back (``check`` False). Under a LossScaleOptimizer an overflow is
        a skipped step, computed silently as on a GPU (no NumPy warnings from the host's arithmetic; ``_quiet``:
        silenced already)."""
        if self.optimizer.skips_nonfinite and not _quiet:
            with np.errstate(all="ignore"):
                return self._train_step(xs, y, check, tally, _quiet=True)
        if self._graphs is not None and not check and self._graphs.run("train", xs, y, tally) is not None:
            return None
        return train_step(self, xs, y, check, tally)

    def fit(self, x=None, y=None, batch_size: int | None = None, epochs: int = 1, validation_split: float = 0.0,
            validation_data=None, shuffle: bool = True, callbacks=None, verbose="auto",
            initial_epoch: int = 0, distributed=False, sample_weight=None,
            class_weight=None, validation_freq=1, steps_per_epoch=None) -> _callbacks.History:
        """Train for epochs ``initial_epoch .. epochs-1``; returns the History (per-epoch loss, metrics, val_*).

        ``x``: array (or list of arrays for several inputs) with ``y``, or an iterable of ``(x_batch, y_batch)``
        (such as ``magmadnn.data.DataLoader``) with ``y=None``. ``batch_size=None`` means 32 and ``verbose="auto"``
        means 1, as in Keras. ``validation_split`` holds out the last samples
        (before shuffling) as Keras 3 counts them: the first ``floor(n * (1 - validation_split))`` train;
        ``validation_data`` is ``(x_val, y_val)``. ``callbacks``: Keras' hooks and logs (see
        :mod:`magmadnn.callbacks`). With ``verbose >= 1`` the first
        line names the device ("Training on gpu:0 (pymagma simulator)", "Training on host (NumPy)").

        ``distributed=True`` (run under ``mpiexec -n N``, arrays only): data-parallel training over MPI with
        ``batch_size`` samples per rank per step, as one process with batch ``N * batch_size`` would train; figures
        are averaged over the ranks and only rank 0 prints and writes files (see :mod:`magmadnn.distributed`).
        ``distributed=magmadnn.distributed.Options(sync_batchnorm=True, bucket_mb=..., overlap=...)`` chooses
        synchronized BatchNorm statistics, the gradient bucket size and overlap with the backward pass.

        ``sample_weight`` (N,) / ``class_weight`` ``{class: weight}`` (Keras' semantics, with a loss under a Keras
        name): each sample's loss is multiplied by its weight, and reduction "sum_over_batch_size" divides the
        weighted sum by the batch size; ``validation_split`` splits ``sample_weight`` with the samples (class weights
        weigh the training samples only, as in Keras) and
        ``validation_data`` may be ``(x_val, y_val, sample_weight_val)``. Metrics are not weighted.
        ``validation_freq``: validate after every ``validation_freq``-th epoch (an int) or after the epochs listed
        (1-based), as in Keras. ``steps_per_epoch`` is not supported (a ``ValueError`` names the alternative).
        """
        self._require_compiled("fit")
        if self._overrides("train_step"):  # Keras' custom training step (:mod:`.custom_steps`)
            given = {"validation_split": validation_split, "class_weight": class_weight, "distributed": distributed,
                     "steps_per_epoch": steps_per_epoch, "validation_freq": None if validation_freq == 1 else 1}
            unsupported = [name for name, value in given.items() if value]
            if unsupported:
                raise ValueError(f"fit: model {self.name!r} overrides train_step; {unsupported} are not supported "
                                 "with a custom step here: pass validation_data=(x_val, y_val) (run by test_step), "
                                 "weights as sample_weight, and the batches to train on")
            return self._fit_custom(x, y, batch_size, epochs, initial_epoch, validation_data, shuffle, callbacks,
                                    verbose, sample_weight)
        if steps_per_epoch is not None:
            raise ValueError(f"fit: steps_per_epoch={steps_per_epoch!r} is not supported (Keras takes that many "
                             "batches per epoch); pass x[:steps_per_epoch * batch_size] instead, or a batch "
                             "iterable (DataLoader) that yields that many batches")
        validation_freq = _validation_freq(validation_freq)
        batch_size = self._fixed_batch_size(batch_size, "fit")
        batch_size = batch_size_or_default(batch_size, "fit")
        epochs = integer(epochs, "epochs", "fit", minimum=0)
        initial_epoch = integer(initial_epoch, "initial_epoch", "fit", minimum=0)
        if epochs <= initial_epoch:
            raise ValueError(f"fit: epochs={epochs} with initial_epoch={initial_epoch} runs no epoch; epochs is the "
                             "index of the last epoch + 1 (train epochs initial_epoch .. epochs-1), so pass "
                             f"epochs > {initial_epoch}")
        validation_split = real(validation_split, "validation_split", "fit", 0.0, 1.0, open_high=True)
        verbose = verbosity(verbose, "fit")
        if not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError(f"fit: shuffle must be True or False, got {shuffle!r}")
        callbacks = callback_list(callbacks, "fit")
        if is_batch_iterable(x):
            if y is not None or validation_split:
                raise ValueError("fit: with a batch iterable (DataLoader) pass y=None and use validation_data")
            if sample_weight is not None or class_weight is not None:
                raise ValueError("fit: sample_weight/class_weight need arrays x, y (not a batch iterable)")
            batches = CheckedBatches(self, x)
        else:
            xs, deferred = self._fit_inputs(x)  # (finite values: see _fit_inputs)
            y = self._targets(y, xs[0].shape[0], "fit")
            plain, y = y, _weighting.attach(self, y, sample_weight, class_weight, "fit")
            n = xs[0].shape[0]
            if validation_split:
                split_at = math.floor(n * (1.0 - validation_split))  # Keras 3's count: the last samples validate
                if split_at == 0 or split_at == n:
                    raise ValueError(f"fit: validation_split={validation_split} of {n} samples leaves an empty split "
                                     f"(training on the first floor({n} * (1 - {validation_split})) = {split_at})")
                # class_weight weighs the training samples only (Keras): the validation loss is unweighted
                validation_data = ([a[split_at:] for a in xs], (plain if class_weight is not None else y)[split_at:])
                xs, y = [a[:split_at] for a in xs], y[:split_at]
            if self._batch_size is not None and xs[0].shape[0] % batch_size:
                raise ValueError(f"fit: model {self.name!r} runs batches of exactly {batch_size} samples; "
                                 f"{xs[0].shape[0]} training samples leave a partial batch: give a multiple of "
                                 f"{batch_size}")
            batches = ArrayBatches(xs, y, batch_size, shuffle, self._shuffle_rng, deferred)
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
                raise ValueError("fit: validation_data must be a pair (x_val, y_val) or a triple (x_val, y_val, "
                                 "sample_weight_val)")
            x_val = self._training_inputs(validation_data[0], "fit (validation_data)")
            y_val = self._targets(validation_data[1], x_val[0].shape[0], "fit (validation_data)")
            if len(validation_data) == 3:
                y_val = _weighting.attach(self, y_val, validation_data[2], None, "fit (validation_data)")
            validation_data = (x_val, y_val)

        self._warn_if_nothing_trains("fit")
        if distributed:
            options = None if isinstance(distributed, (bool, np.bool_)) else distributed
            batches, validation_data, callbacks, verbose, self._parallel = setup_data_parallel(
                self, batches, validation_data, callbacks, verbose, options)
        if verbose:
            print(f"Training on {_backend.describe(self.xp)}")
        if self._graphs is not None:
            self._graphs.refresh()
            if self._graphs.unavailable() is not None:
                self._graphs.say(self._graphs.unavailable())
        history = _callbacks.History()
        try:
            steps = len(batches)
        except TypeError:
            steps = None
        # History last: it sees every log key
        cbs = _callbacks.CallbackList([*callbacks, history], self, verbose=verbose, epochs=epochs, steps=steps)
        self.log_keys = tuple(self._tally_names(validation_data is not None))  # callbacks check their keys with it
        self.stop_training, self.stop_reason = False, None
        logs = {}
        self._touched = True
        cbs.on_train_begin({})
        try:
            for epoch in range(initial_epoch, epochs):
                cbs.on_epoch_begin(epoch, {})
                validating = validation_freq(epoch + 1)
                logs = Epoch(self, batches, epoch, epochs, cbs, verbose, validation_data if validating else None,
                             batch_size).run()
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
            cbs.on_train_end(dict(logs))
        return history

    def _warn_if_nothing_trains(self, who: str) -> None:
        """Keras' warning when a training step has no trainable weight (``model.trainable = False``, every layer
        frozen, or no weights at all): the step computes the loss and changes nothing. Once per call, answered from
        a cache until a ``trainable`` flag changes."""
        key = autograd._trainable_changes
        if getattr(self, "_nothing_trains", (None,))[0] != key:
            self._nothing_trains = (key, not any(p.trainable for p in self.trainable_weights))
        if self._nothing_trains[1]:
            why = "model.trainable is False" if not self._trainable else \
                "every layer is frozen (trainable=False) or has no weights"
            warnings.warn(f"The model does not have any trainable weights. (model {self.name!r}: {why}, so {who} "
                          "computes the loss and metrics but changes no weight; set trainable = True on the model "
                          "or the layers to train)", UserWarning, stacklevel=3)

    def _fixed_batch_size(self, batch_size, who: str):
        """The batch size of a model whose inputs fix it (``Input(batch_size=B)``, an ONNX graph exported with a
        static batch); a model whose outputs have no batch axis or whose inputs lack one cannot be trained."""
        if not self._splits_batches or not all(i.batched for i in getattr(self, "inputs", ())):
            raise ValueError(f"{who}: model {self.name!r} has an input or output without a batch axis, so its data "
                             "cannot be split into batches; training needs every input and output batch first")
        fixed = self._batch_size
        if fixed is None:
            return batch_size
        if batch_size is not None and batch_size != fixed:
            raise ValueError(f"{who}: model {self.name!r} runs batches of exactly {fixed} samples (its inputs fix the "
                             f"batch size: Input(batch_size={fixed}), or an ONNX graph exported with a static batch), "
                             f"got batch_size={batch_size}; leave batch_size out, or re-export with a dynamic batch")
        return fixed

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
            for name, param in layer.params.items():
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

    def _non_finite(self, cbs, epoch: int, index: int, value: float, batch=None) -> dict:
        """The batch ``index`` had loss ``value`` and was not applied: stop (TerminateOnNaN) or raise; when an
        earlier update left a parameter non-finite (the usual cause), that is reported instead."""
        found = self._nonfinite_parameter()
        if found is not None:
            return self._non_finite_parameters(cbs, epoch, found, index, {"loss": value})
        cbs.on_nonfinite_loss(epoch, index, value)
        if self.stop_training:
            return {"loss": value}
        cause = None if batch is None else nonfinite_cause(self, *batch)
        advice = cause if cause is not None else "lower the learning rate, check the data for NaN/inf"
        raise NonFiniteLossError(
            f"fit: the loss became {value} at epoch {epoch + 1}, batch {index + 1} (the update was not "
            f"applied); {advice}, or pass callbacks=[TerminateOnNaN()] to stop training without an error")

    def _tally_names(self, validating: bool) -> TallyNames:
        names = ["loss", *(m.name for m in self.metrics)]
        sizes = {m.name: m.size for m in self.metrics if m.size != 1}
        if validating:
            sizes.update({f"val_{n}": s for n, s in sizes.items()})
            names += [f"val_{n}" for n in names]
        return TallyNames(names, sizes)

    def _results(self, sums: dict, counts: dict, prefix: str = "", who: str | None = None) -> dict:
        """Epoch figures from tally sums: the loss as its reduction says (sample mean or total), metric fractions.
        ``who`` (the final figures of ``fit``/``evaluate``): an entry whose targets all equal ``ignore_index`` is a
        ValueError naming it (mid-epoch reads give NaN)."""
        out = {}
        by_name = {m.name: m for m in self.metrics}
        for name, part in [("loss", self.loss), *by_name.items()]:
            total, n = sums[prefix + name], counts[prefix + name]
            if not n and who is not None and getattr(part, "ignore_index", None) is not None:
                where = "the validation data" if prefix else "the data"
                raise ValueError(f"{who}: every target of {where} equals ignore_index={part.ignore_index} "
                                 f"({type(part).__name__}): no target counts, so {prefix + name} is undefined; "
                                 "check the targets or the ignore_index")
            if not n:
                out[prefix + name] = float("nan")
            elif name == "loss":
                out[prefix + name] = total if self.loss.sums_dataset else total / n
            else:
                out[prefix + name] = by_name[name].result_of(total, n)
        return out


def _validation_freq(freq):
    """Keras' ``validation_freq``: an int ``k`` validates after epochs k, 2k, ...; a list after the epochs in it
    (both 1-based). Returns the test of a 1-based epoch number."""
    if isinstance(freq, (int, np.integer)) and not isinstance(freq, (bool, np.bool_)) and freq >= 1:
        return lambda epoch: epoch % int(freq) == 0
    if isinstance(freq, (list, tuple)) and all(isinstance(e, (int, np.integer)) for e in freq):
        chosen = {int(e) for e in freq}
        return lambda epoch: epoch in chosen
    raise ValueError(f"fit: validation_freq must be a positive int or a list of (1-based) epoch numbers, "
                     f"got {freq!r}")


def _single_weighted(loss, loss_weights, name: str):
    """``loss_weights`` of a model of one output (Keras scales its loss): a number, or a list / dict of one."""
    weight = loss_weights
    if isinstance(weight, dict):
        weight = list(weight.values())
    if isinstance(weight, (list, tuple)):
        if len(weight) != 1:
            raise ValueError(f"compile: model {name!r} has one output; loss_weights must be one number, got "
                             f"{loss_weights!r}")
        weight = weight[0]
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)):
        raise TypeError(f"compile: loss_weights must be a number, got {loss_weights!r}")
    if float(weight) == 1.0:
        return loss
    return _outputs.ScaledLoss(_losses.get(loss), float(weight))
