"""Custom training steps as Keras 3 writes them: a model overriding ``train_step(self, data)``, ``test_step`` or
``predict_step``, with ``self.compute_loss(x=, y=, y_pred=, sample_weight=)``, ``magmadnn.grad(loss, weights)``,
``self.optimizer.apply(grads, weights)``, metric objects updated in the step (``self.metrics``,
``compute_metrics``, ``reset_metrics``) and the logs returned as a dict.

``fit`` / ``evaluate`` / ``predict`` of such a model run their loop here: each batch goes to the overridden step as
Keras gives it (``x``, ``(x, y)`` or ``(x, y, sample_weight)``: Tensors on the model's backend, ``y`` keeping its
host array for ``compute_loss``), the figures of an epoch are the last batch's logs (running means, as Keras'
metrics keep them), read on the host at the epoch's end and for each batch only where a callback looks. On a backend
with CUDA graphs an overridden ``train_step`` / ``test_step`` is captured and replayed (:mod:`.custom_replay`).
A model that overrides nothing trains through the one training step (:mod:`.step`).
"""

from __future__ import annotations

import numpy as np

from .. import callbacks as _callbacks
from .._checks import batch_size_or_default, integer, verbosity
from ..autograd import Tensor, grad
from ..backend import host as _host
from ..callbacks import callback_list
from . import custom_replay as _custom_replay
from . import weighting as _weighting
from .batches import is_batch_iterable
from .weighting import attach

__all__ = ["CustomSteps"]


class _Mean:
    """The running mean of the default steps' loss (Keras' ``Mean`` tracker): its sum and sample count kept on the
    model's backend, so that a captured step updates them on the device and nothing is read until its result is."""

    name = "loss"

    def __init__(self, xp, dtype):
        self.xp, self.dtype = xp, dtype
        self.reset()

    def reset(self):
        self.total, self.count, self.seen = self.xp.zeros((), self.dtype), self.xp.zeros((), self.dtype), False

    def update(self, loss, count: int):
        xp = self.xp
        self.total = xp.add(self.total, xp.multiply(loss.data if isinstance(loss, Tensor) else loss, float(count)))
        self.count = xp.add(self.count, float(count))
        self.seen = True

    def result(self) -> Tensor:
        return Tensor(self.xp.divide(self.total, self.count), backend=self.xp)


def _float(value):
    if hasattr(value, "result") and callable(value.result):
        value = value.result()
    if callable(getattr(value, "numpy", None)):  # a Tensor, a metric variable
        value = value.numpy()
    elif callable(getattr(value, "get", None)) and hasattr(value, "shape"):  # a device array (a replayed step's)
        value = value.get()
    array = np.asarray(value, dtype=np.float64)
    return float(array) if array.ndim == 0 else array


def _host_of(y):
    """The host array(s) of targets handed to a custom step."""
    if isinstance(y, dict):
        return {k: _host_of(v) for k, v in y.items()}
    if isinstance(y, (list, tuple)):
        return [_host_of(v) for v in y]
    host = getattr(y, "_host", None)
    if host is not None:
        return host
    return np.asarray(y.numpy()) if isinstance(y, Tensor) else np.asarray(y)


class CustomSteps:
    """Keras' step methods, and the loops that call the overridden ones."""

    # -- what the steps call
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras' ``compute_loss``: the compiled loss of ``y_pred`` against ``y`` (None: no compiled term) plus the
        terms ``add_loss`` added in the last call (``self.losses``); a scalar Tensor."""
        total = None
        if y is not None and self.loss is not None:
            inner = getattr(self.loss, "inner", self.loss)
            staged = _custom_replay.compute_loss_targets(y, sample_weight)  # a captured step: the staging buffer's
            if staged is None:
                n = int(y_pred.shape[0]) if isinstance(y_pred, Tensor) else int(y_pred[0].shape[0])
                staged = self._loss_targets(y, sample_weight, n)
            total = inner.checked(y_pred, staged)
        for term in self.losses:
            total = term if total is None else total + term
        if total is None:
            raise ValueError(f"compute_loss: model {self.name!r} has no loss: compile it with loss=, pass y, or add "
                             "a term in call() with self.add_loss(...)")
        return total

    def _loss_targets(self, y, sample_weight, n=None):
        """The compiled loss's targets of ``y`` (Tensors keeping their host arrays, or host arrays) with
        ``sample_weight``, checked and prepared on the host as ``compute_loss`` reads them."""
        host = _host_of(y)
        if n is None:
            n = int(_custom_replay.leaves(host)[0].shape[0])
        targets = self._targets(host, n, "compute_loss")
        if sample_weight is not None:
            targets = attach(self, targets, np.asarray(_host_of(sample_weight)), None, "compute_loss")
        return getattr(self.loss, "inner", self.loss).prepare(targets, _host, self.dtype)

    def compute_metrics(self, x, y, y_pred, sample_weight=None) -> dict:
        """Keras' ``compute_metrics``: the compiled metrics updated with this batch; returns every metric's result
        (the running loss of the default steps first)."""
        step = _custom_replay.active()
        if step is not None and y is not None and self._compiled_metrics:
            step.update_metrics(y, y_pred)  # their labels staged, their hits added on the device
            return self.get_metrics_result()
        if y is not None:
            host = _host_of(y)
            for metric in self._compiled_metrics:
                metric.update(y_pred.data, host, self.xp)
        return self.get_metrics_result()

    def get_metrics_result(self) -> dict:
        """Keras' ``get_metrics_result``: each metric's result as a float (inside a captured step, what gives it
        when the logs are read)."""
        out = {}
        lazy = _custom_replay.active() is not None  # a captured step: each result is read when the logs are
        tracker = getattr(self, "_loss_tracker", None)
        if tracker is not None and tracker.seen:
            out["loss"] = tracker.result() if lazy else _float(tracker.result())
        for metric in self._compiled_metrics:
            out[metric.name] = metric if lazy else metric.result()
        return out

    def _tracker(self) -> _Mean:
        """The default steps' loss tracker, on the model's backend."""
        tracker = self.__dict__.get("_loss_tracker")
        if tracker is None or tracker.xp is not self.xp or tracker.dtype != self.dtype:
            tracker = self.__dict__["_loss_tracker"] = _Mean(self.xp, self.dtype)
        return tracker

    def reset_metrics(self) -> None:
        """Reset the compiled metrics, the loss of the default steps and every metric the model's ``metrics`` lists
        (those a custom step updates)."""
        self._tracker().reset()
        for metric in [*self._compiled_metrics, *getattr(self, "metrics", [])]:
            reset = getattr(metric, "reset_state", None) or getattr(metric, "reset", None)
            if reset is not None:
                reset()

    # -- Keras' default steps (what an override may call through super())
    def train_step(self, data) -> dict:
        x, y, sample_weight = unpack(data)
        y_pred = self(x, training=True)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight)
        weights = self.trainable_weights
        self.optimizer.apply(grad(loss, weights), weights)
        self._tracker().update(loss, _count(x))
        return self.compute_metrics(x, y, y_pred, sample_weight)

    def test_step(self, data) -> dict:
        x, y, sample_weight = unpack(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
        self._tracker().update(loss, _count(x))
        return self.compute_metrics(x, y, y_pred, sample_weight)

    def predict_step(self, data):
        x, _, _ = unpack(data)
        return self(x, training=False)

    def _overrides(self, name: str) -> bool:
        return getattr(type(self), name) is not getattr(CustomSteps, name)

    # -- the loops
    def _step_batches(self, x, y, sample_weight, batch_size, shuffle, who):
        """Batches as a custom step gets them: ``x`` or ``(x, y[, sample_weight])`` on the backend."""
        if is_batch_iterable(x):
            for item in x:
                yield item if isinstance(item, tuple) else (item,)
            return
        xs = self._input_arrays(x, who)
        n = self._sample_count(xs)
        order = self._shuffle_rng.permutation(n) if shuffle else None
        for start in range(0, n, batch_size):
            index = slice(start, start + batch_size) if order is None else order[start:start + batch_size]
            parts = [_take(x, index)]
            if y is not None:
                parts.append(_take(y, index))
                if sample_weight is not None:
                    parts.append(_take(sample_weight, index))
            yield tuple(parts)

    def _to_step_data(self, parts):
        if not self.built:
            self._build_subclassed(parts[0]) if self._subclassed else self._input_arrays(parts[0], "fit")
        xs = self._input_tensors(self._cast_inputs(self._input_arrays(parts[0], "fit")))
        x = self._packed(xs, self._input_keys)
        if len(parts) == 1:
            return x
        out = [x, _targets_on(self, parts[1])]
        if len(parts) > 2:
            out.append(None if parts[2] is None else _targets_on(self, parts[2]))
        return tuple(out)

    def _run_step(self, kind: str, parts):
        """The logs of the step ``kind`` ("train", "test") on the host batch ``parts``: replayed as a CUDA graph
        where it can be captured (:mod:`.custom_replay`), else eagerly. Values may be backend arrays (read by
        :meth:`_step_logs`)."""
        name = f"{kind}_step"
        call = getattr(self, name)
        if self._graphs is not None and self._overrides(name):
            if not self.built:
                self._to_step_data(parts[:1])
            logs = _custom_replay.replayed(self._graphs, f"custom {kind}", parts, call)
            if logs is not None:
                return logs
        return call(self._to_step_data(parts))

    def _fit_custom(self, x, y, batch_size, epochs, initial_epoch, validation_data, shuffle, callbacks, verbose,
                    sample_weight):
        """``fit`` of a model that overrides ``train_step``."""
        batch_size = batch_size_or_default(batch_size, "fit")
        epochs = integer(epochs, "epochs", "fit", minimum=1)
        verbose = verbosity(verbose, "fit")
        history = _callbacks.History()
        try:
            steps = len(x) if is_batch_iterable(x) else None
        except TypeError:
            steps = None
        cbs = _callbacks.CallbackList([*callback_list(callbacks, "fit"), history], self, verbose=verbose,
                                      epochs=epochs, steps=steps)
        self.stop_training, self._touched = False, True
        cbs.on_train_begin({})
        _custom_replay.place_metrics(self)
        logs, per_batch = {}, cbs.wants_batch_logs("train")
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch, {})
            self.reset_metrics()
            raw = read = {}
            for index, parts in enumerate(self._step_batches(x, y, sample_weight, batch_size, shuffle, "fit")):
                cbs.on_train_batch_begin(index, {})
                raw = self._run_step("train", parts)
                if per_batch:  # read only where a callback looks (a replayed step's arrays are the next one's)
                    read = self._step_logs(raw, "train_step")
                    cbs.on_train_batch_end(index, dict(read))
                if self.stop_training:
                    break
            logs = read if per_batch else self._step_logs(raw, "train_step")
            epoch_logs = dict(logs)
            if validation_data is not None:
                epoch_logs.update({f"val_{k}": v for k, v in self._evaluate_custom(*_pair(validation_data)).items()})
            self.epoch = epoch + 1
            if verbose:
                print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v:.4f}" for k, v in epoch_logs.items()
                                                                     if np.ndim(v) == 0))
            cbs.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        cbs.on_train_end(dict(logs))
        return history

    def _evaluate_custom(self, x, y=None, sample_weight=None, batch_size=None) -> dict:
        _custom_replay.place_metrics(self)
        self.reset_metrics()
        raw = {}
        for parts in self._step_batches(x, y, sample_weight, batch_size_or_default(batch_size, "evaluate"), False,
                                        "evaluate"):
            raw = self._run_step("test", parts)
        return self._step_logs(raw, "test_step")

    def _train_on_batch_custom(self, x, y, sample_weight, class_weight, return_dict):
        """``train_on_batch`` of a model that overrides ``train_step``: its metrics reset and one step, as Keras
        (which hands the step ``(x, y, sample_weight)``; here ``(x, y)`` without weights, as ``fit`` does)."""
        if class_weight is not None:
            if sample_weight is not None:
                raise ValueError("train_on_batch: pass sample_weight or class_weight, not both (as Keras)")
            sample_weight = _weighting.class_weights(y, class_weight, "train_on_batch")
        parts = (x,) if y is None else ((x, y) if sample_weight is None else (x, y, sample_weight))
        _custom_replay.place_metrics(self)
        self.reset_metrics()
        self._touched = True
        return _flatten_logs(self, self._step_logs(self._run_step("train", parts), "train_step"), return_dict)

    def _predict_custom(self, x, batch_size=None):
        parts = []
        for data in self._step_batches(x, None, None, batch_size_or_default(batch_size, "predict"), False,
                                       "predict"):
            out = self.predict_step(self._to_step_data(data))
            parts.append(out.numpy() if isinstance(out, Tensor) else np.asarray(out))
        return np.concatenate(parts)

    def _step_logs(self, logs, who: str) -> dict:
        if not isinstance(logs, dict):
            raise TypeError(f"model {self.name!r}: {who} must return a dict of logs {{name: value}} (as Keras), "
                            f"got {type(logs).__name__}")
        return {k: _float(v) for k, v in logs.items()}


def unpack(data):
    """Keras' ``unpack_x_y_sample_weight``: ``(x, y, sample_weight)`` from ``x``, ``(x,)``, ``(x, y)`` or
    ``(x, y, sample_weight)``."""
    if isinstance(data, tuple):
        if len(data) == 1:
            return data[0], None, None
        if len(data) == 2:
            return data[0], data[1], None
        if len(data) == 3:
            return data
        raise ValueError(f"a batch must be x, (x,), (x, y) or (x, y, sample_weight), got a tuple of {len(data)}")
    return data, None, None


def _flatten_logs(model, logs: dict, return_dict: bool):
    """Keras' ``train_on_batch`` result of a custom step: the dict, or the metrics' values in the order of the
    model's metrics then the other keys sorted (one value alone)."""
    if return_dict:
        return logs
    names = [m.name for m in getattr(model, "metrics", None) or []]
    results = [logs[n] for n in names if n in logs] + [logs[k] for k in sorted(logs) if k not in names]
    return results[0] if len(results) == 1 else results


def _take(data, index):
    if isinstance(data, dict):
        return {k: _take(v, index) for k, v in data.items()}
    if isinstance(data, (list, tuple)) and data and hasattr(data[0], "shape"):
        return [np.asarray(a)[index] for a in data]
    return np.asarray(data)[index]


def _targets_on(model, y):
    """Targets as a custom step gets them: Tensors on the model's backend that keep their host array."""
    if isinstance(y, dict):
        return {k: _targets_on(model, v) for k, v in y.items()}
    if isinstance(y, (list, tuple)):
        return [_targets_on(model, v) for v in y]
    host = np.asarray(y)
    tensor = Tensor(model.xp.asarray(host if host.dtype.kind in "iub" else host.astype(model.dtype)),
                    backend=model.xp)
    tensor._host = host
    return tensor


def _count(x) -> int:
    first = next(iter(x.values())) if isinstance(x, dict) else (x[0] if isinstance(x, (list, tuple)) else x)
    return int(first.shape[0])


def _pair(validation_data):
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (1, 2, 3):
        raise ValueError("fit: validation_data must be x, (x, y) or (x, y, sample_weight)")
    return tuple(validation_data)
