"""Training callbacks: History, EarlyStopping, ReduceLROnPlateau, ModelCheckpoint, LearningRateScheduler, CSVLogger,
TerminateOnNaN.

The hooks and their order are Keras 3's. ``fit``: ``on_train_begin``, then per epoch ``on_epoch_begin``, per batch
``on_train_batch_begin`` / ``on_train_batch_end``, with validation ``on_test_begin``, ``on_test_batch_begin`` /
``on_test_batch_end`` and ``on_test_end``, then ``on_epoch_end`` (epoch figures, ``val_*`` when validating), and
``on_train_end`` (the last epoch's logs). ``evaluate``: the ``on_test_*`` hooks; ``predict``: the ``on_predict_*``
hooks (``on_predict_batch_end`` logs hold ``{"outputs": that batch's NumPy outputs}``). ``on_batch_begin`` /
``on_batch_end`` are what the base class's ``on_train_batch_begin`` / ``on_train_batch_end`` call, as in Keras. A
callback stops training by setting ``model.stop_training = True``; ``self.params`` holds ``epochs``, ``steps`` and
``verbose``.

Batch logs: ``on_*_batch_end`` gets the running means since the epoch (or evaluation) began, ``loss`` and every
metric, as Keras does; ``on_*_batch_begin`` gets ``{}``. Training never leaves the device, so these logs are lazy
(:class:`BatchLogs`): when some callback overrides a batch-end hook, each batch makes a backend copy of the running
sums (no host read), and the first look into the logs reads it (one device-to-host copy, the synchronization Keras
makes at every batch). A callback that only counts or times batches reads nothing. On the host backend reads are
free. In data-parallel training the training batch logs hold the global figures (one collective per batch, only
when a callback overrides a train batch hook). No built-in callback reads batch logs.

Non-finite loss: ``fit`` never applies an update computed from a NaN/inf loss; it calls
``on_nonfinite_loss(epoch, batch, loss)`` once for the offending batch. With a ``TerminateOnNaN`` callback the
training stops cleanly (the History so far is returned, ``model.stop_reason`` says why); without one ``fit`` raises
``magmadnn.models.NonFiniteLossError``.
"""

from __future__ import annotations

import csv
import io
import math
import os
import string
import warnings

import numpy as np

from . import _checks, schedules
from ._atomic import write_text

__all__ = [
    "Callback", "CallbackList", "BatchLogs", "History", "EarlyStopping", "ReduceLROnPlateau", "ModelCheckpoint",
    "LearningRateScheduler", "CSVLogger", "TerminateOnNaN", "LambdaCallback",
]

LR_KEY = "learning_rate"  # the logs' learning-rate key (Keras 3's)


class Callback:
    """Base class; every hook is a no-op except ``on_train_batch_begin`` / ``on_train_batch_end``, which call
    ``on_batch_begin`` / ``on_batch_end`` (as in Keras). ``self.model`` and ``self.params`` are set by ``fit``,
    ``evaluate`` and ``predict``. A callback that records the logs (``records_logs = True``) runs after the others,
    so it sees every key they add (such as ``learning_rate``)."""

    model = None
    params: dict = {}
    records_logs = False

    def set_model(self, model) -> None:
        self.model = model

    def set_params(self, params) -> None:
        self.params = params

    def on_train_begin(self, logs=None): ...
    def on_train_end(self, logs=None): ...
    def on_epoch_begin(self, epoch, logs=None): ...
    def on_epoch_end(self, epoch, logs=None): ...
    def on_batch_begin(self, batch, logs=None): ...
    def on_batch_end(self, batch, logs=None): ...

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    def on_test_begin(self, logs=None): ...
    def on_test_end(self, logs=None): ...
    def on_test_batch_begin(self, batch, logs=None): ...
    def on_test_batch_end(self, batch, logs=None): ...
    def on_predict_begin(self, logs=None): ...
    def on_predict_end(self, logs=None): ...
    def on_predict_batch_begin(self, batch, logs=None): ...
    def on_predict_batch_end(self, batch, logs=None): ...
    def on_nonfinite_loss(self, epoch, batch, loss): ...
    def on_nonfinite_parameter(self, epoch, layer, name): ...


_BATCH_END = {"train": ("on_train_batch_end", "on_batch_end"), "test": ("on_test_batch_end",),
              "predict": ("on_predict_batch_end",), "train_begin": ("on_train_batch_begin", "on_batch_begin")}


class CallbackList:
    """Fans each hook out to a list of callbacks, the log recorders last (otherwise in the order given)."""

    def __init__(self, callbacks, model, **params):
        callbacks = list(callbacks or [])
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {type(cb).__name__}")
            cb.set_model(model)
            if params:
                cb.set_params(dict(params))
        self.callbacks = sorted(callbacks, key=lambda cb: cb.records_logs)

    def wants_batch_logs(self, kind: str) -> bool:
        """Whether a callback overrides a batch-end hook of ``kind`` ("train", "test", "predict"), or "train_begin"."""
        return any(getattr(type(cb), hook) is not getattr(Callback, hook) or hook in vars(cb)
                   for cb in self.callbacks for hook in _BATCH_END[kind])

    def __getattr__(self, hook):
        """``hook``'s fan-out (kept) to the callbacks whose hook acts: overridden (or via ``on_batch_*``) or set."""
        if not hook.startswith("on_"):
            raise AttributeError(hook)
        names = (hook, hook.replace("_train", "")) if hook.startswith("on_train_batch") else (hook,)
        bound = [getattr(cb, hook) for cb in self.callbacks if any(
            n in vars(cb) or getattr(type(cb), n, None) is not getattr(Callback, n, 0) for n in names)]
        self.__dict__[hook] = lambda *args: None if [call(*args) for call in bound] else None
        return self.__dict__[hook]


class BatchLogs(dict):
    """A batch's logs, read on first look: ``read()`` gives the figures (one device-to-host copy on a device).

    A dict in every way a callback uses one (``logs["loss"]``, ``get``, ``in``, iteration, ``dict(logs)``,
    ``json.dumps``, ``print``); keys written before the first look are kept."""

    __slots__ = ("_read",)

    def __init__(self, read):
        super().__init__()
        self._read = read

    def _load(self):
        read = self._read
        if read is not None:
            self._read = None
            own = dict.copy(self)
            dict.update(self, read())
            dict.update(self, own)
        return self

    def __getitem__(self, key):
        return dict.__getitem__(self._load(), key)

    def __setitem__(self, key, value):
        dict.__setitem__(self._load(), key, value)

    def __delitem__(self, key):
        dict.__delitem__(self._load(), key)

    def __contains__(self, key):
        return dict.__contains__(self._load(), key)

    def __iter__(self):
        return dict.__iter__(self._load())

    def __len__(self):
        return dict.__len__(self._load())

    def __eq__(self, other):
        return dict.__eq__(self._load(), other)

    __hash__ = None

    def __repr__(self):
        return dict.__repr__(self._load())

    def __reduce__(self):
        return dict, (dict(self._load()),)

    def get(self, key, default=None):
        return dict.get(self._load(), key, default)

    def keys(self):
        return dict.keys(self._load())

    def values(self):
        return dict.values(self._load())

    def items(self):
        return dict.items(self._load())

    def copy(self):
        return dict(self._load())

    def pop(self, key, *default):
        return dict.pop(self._load(), key, *default)

    def setdefault(self, key, default=None):
        return dict.setdefault(self._load(), key, default)

    def update(self, *args, **kwargs):
        dict.update(self._load(), *args, **kwargs)

    def __ne__(self, other):
        return dict.__ne__(self._load(), other)

    def __or__(self, other):
        return dict(self._load()) | other

    def popitem(self):
        return dict.popitem(self._load())

    def clear(self):
        self._read = None
        dict.clear(self)


def callback_list(callbacks, who: str) -> list:
    """``callbacks`` (None, a list or a tuple of Callback instances) as a list."""
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        name = type(callbacks).__name__
        raise TypeError(f"{who}: callbacks must be a list of Callback instances, got a single {name}; pass "
                        f"callbacks=[{name}(...)]")
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"{who}: callbacks must be a list of Callback instances, got {callbacks!r}")
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"{who}: callbacks must be Callback instances, got {cb!r} ({type(cb).__name__})")
    return list(callbacks)


class History(Callback):
    """Records the epoch logs: ``history.history["loss"]`` is a list with one value per epoch; after an epoch
    ``model.history`` is this History (as in Keras)."""

    records_logs = True

    def __init__(self):
        self.history: dict[str, list] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)
        if self.model is not None:
            self.model.history = self

    def __repr__(self):
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"


def _improvement_test(monitor: str, mode: str, min_delta: float):
    """Return ``better(current, best)`` for the mode ("min", "max" or "auto": max for accuracy-like names)."""
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        mode = "max" if ("acc" in monitor or "top" in monitor) else "min"
    delta = abs(min_delta)
    if mode == "min":
        return (lambda cur, best: cur < best - delta), math.inf
    return (lambda cur, best: cur > best + delta), -math.inf


def _check_monitor(model, monitor, who):
    """KeyError before the first epoch when ``fit`` says its epoch logs will not hold ``monitor``."""
    known = getattr(model, "log_keys", None)
    if known is not None and monitor not in (*known, LR_KEY):
        raise KeyError(f"{who} monitors {monitor!r} but the epoch logs will hold only {sorted(known)}; validation "
                       "figures ('val_*') need validation_split or validation_data")


def _monitored(logs, monitor, who, model=None):
    """The monitored figure; None (with a warning, as Keras) in an epoch ``fit`` did not validate
    (``validation_freq``), a KeyError when the logs never hold it."""
    if monitor not in (logs or {}) and monitor in getattr(model, "log_keys", ()):
        warnings.warn(f"{who}: {monitor!r} is not in this epoch's logs (no validation this epoch); skipped",
                      stacklevel=3)
        return None
    if monitor not in (logs or {}):
        raise KeyError(f"{who} monitors {monitor!r} but the epoch logs hold only {sorted(logs or {})}; "
                       "validation metrics ('val_*') need validation_split or validation_data")
    return float(logs[monitor])


_RISING = ("acc", "top", "precision", "recall", "auc")  # metric names whose figure improves upward
_FALLING = ("loss", "error", "mae", "mse", "rmse", "mape", "msle", "crossentropy", "hinge", "divergence", "huber",
            "cosh")


def _monitor_mode(model, monitor: str, mode: str, who: str) -> str:
    """"min" or "max" for ``mode`` ("auto": as Keras 3 infers it, from the monitored metric's direction)."""
    if mode != "auto":
        return mode
    name = monitor.removeprefix("val_")
    if name == "loss":
        return "min"
    for metric in getattr(model, "metrics", None) or []:
        if getattr(metric, "name", None) == name and getattr(metric, "direction", None) in ("up", "down"):
            return "max" if metric.direction == "up" else "min"
    if any(word in name for word in _RISING):
        return "max"
    if any(word in name for word in _FALLING):
        return "min"
    raise ValueError(f"{who}: cannot tell whether {monitor!r} should rise or fall; pass mode='max' or mode='min'")


class _Monitor(Callback):
    """A monitored log figure compared as Keras 3 compares it: ``current`` improves on ``reference`` when
    ``current - min_delta`` beats it (``current + min_delta`` for "min"); any value improves on None."""

    def __init__(self, monitor, mode, min_delta, who):
        if not isinstance(monitor, str):
            raise TypeError(f"{who}: monitor must be a log key (str), got {monitor!r}")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"{who}: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor, self.mode, self.who = monitor, mode, who
        self.min_delta = abs(_checks.real(min_delta, "min_delta", who))
        self._resolved = None

    def _begin(self) -> None:
        _check_monitor(self.model, self.monitor, self.who)
        self._resolved = _monitor_mode(self.model, self.monitor, self.mode, self.who)

    def _is_improvement(self, current, reference) -> bool:
        if reference is None:
            return True
        if self._resolved == "min":
            return current + self.min_delta < reference
        return current - self.min_delta > reference


class EarlyStopping(_Monitor):
    """Stop training when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs (Keras 3).

    ``baseline``: the wait restarts only on epochs that beat both the best so far and the baseline.
    ``restore_best_weights``: at the end of training the weights of the best epoch are set back, whether or not the
    training stopped early (from the first epoch counted). ``start_from_epoch``: epochs before it are not counted.
    ``stopped_epoch`` (0 when never stopped), ``best``, ``best_epoch`` and ``wait`` are read as in Keras."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor, mode, min_delta, "EarlyStopping")
        self.patience = _checks.integer(patience, "patience", "EarlyStopping", minimum=0)
        self.verbose = verbose
        self.baseline = None if baseline is None else _checks.real(baseline, "baseline", "EarlyStopping")
        self.restore_best_weights = bool(restore_best_weights)
        self.start_from_epoch = _checks.integer(start_from_epoch, "start_from_epoch", "EarlyStopping", minimum=0)
        self.wait, self.stopped_epoch, self.best, self.best_weights, self.best_epoch = 0, 0, None, None, 0

    def on_train_begin(self, logs=None):
        self._begin()
        self.wait, self.stopped_epoch, self.best, self.best_weights, self.best_epoch = 0, 0, None, None, 0

    def on_epoch_end(self, epoch, logs=None):
        current = _monitored(logs, self.monitor, "EarlyStopping", self.model)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            self.model.stop_reason = (f"EarlyStopping: {self.monitor} did not improve for {self.wait} epochs "
                                      f"(best {self.best:.6g} at epoch {self.best_epoch + 1})")

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ReduceLROnPlateau(_Monitor):
    """Multiply the learning rate by ``factor`` (floored at ``min_lr``) when ``monitor`` has not improved by more
    than ``min_delta`` for ``patience`` epochs; then wait ``cooldown`` epochs before counting again (Keras 3).

    Each epoch's logs get ``learning_rate``, the rate that epoch ran with. The new rate is the optimizer's
    ``lr``, which every step, eager or replayed as a graph, reads afresh. An optimizer with a schedule is refused
    (as Keras refuses to set it)."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0.0, **kwargs):
        if kwargs:
            raise TypeError(f"ReduceLROnPlateau: unexpected arguments {sorted(kwargs)}")
        super().__init__(monitor, mode, min_delta, "ReduceLROnPlateau")
        self.factor = _checks.real(factor, "factor", "ReduceLROnPlateau")
        if not 0 <= self.factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be in [0, 1), got {factor!r}")
        self.patience = _checks.integer(patience, "patience", "ReduceLROnPlateau", minimum=0)
        self.cooldown = _checks.integer(cooldown, "cooldown", "ReduceLROnPlateau", minimum=0)
        self.min_lr = _checks.real(min_lr, "min_lr", "ReduceLROnPlateau")
        if not (math.isfinite(self.min_lr) and self.min_lr >= 0):
            raise ValueError(f"ReduceLROnPlateau: min_lr must be a finite number >= 0, got {min_lr!r}")
        self.verbose = verbose
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def on_train_begin(self, logs=None):
        self._begin()
        if callable(self.model.optimizer.lr):
            raise TypeError(f"ReduceLROnPlateau: the optimizer's learning rate is a schedule "
                            f"({type(self.model.optimizer.lr).__name__}), which it cannot lower; give the optimizer "
                            "a constant learning rate")
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def on_epoch_end(self, epoch, logs=None):
        optimizer = self.model.optimizer
        if logs is not None:
            logs[LR_KEY] = float(optimizer.learning_rate)
        current = _monitored(logs, self.monitor, "ReduceLROnPlateau", self.model)
        if current is None:
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best, self.wait = current, 0
            return
        if self.in_cooldown():
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        old = float(optimizer.learning_rate)
        if old > self.min_lr:
            new = max(old * self.factor, self.min_lr)
            optimizer.lr = new
            if self.verbose > 0:
                print(f"Epoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new:.6g}.")
            self.cooldown_counter, self.wait = self.cooldown, 0


class ModelCheckpoint(Callback):
    """Save after each epoch to ``filepath`` (may contain ``{epoch}`` and log keys, e.g. ``{val_loss:.3f}``).

    By default writes a resumable checkpoint (weights, optimizer state, epoch, RNG state; ``.npz`` or
    ``.safetensors``); with ``save_weights_only=True`` writes ``model.save`` files (architecture + weights).
    With ``save_best_only=True`` only epochs that improve ``monitor`` are written; the file keeps the monitored
    value, and a later run writing to the same (fixed) path starts from it, so a resumed run never overwrites the
    best file with a worse epoch. ``initial_value_threshold`` (as in Keras) is a best value to beat from the start
    (the better of it and the stored one counts). The filename keys and ``monitor`` are checked when training
    begins, before any epoch runs. ``verbose=1`` prints a line for each file written; ``save_freq`` is Keras'
    argument: only ``"epoch"`` is supported.
    """

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", initial_value_threshold=None):
        if save_freq != "epoch":
            raise ValueError(f"ModelCheckpoint: save_freq={save_freq!r} is not supported; files are written at epoch "
                             "ends only (save_freq='epoch')")
        self.verbose = _checks.integer(int(verbose) if isinstance(verbose, bool) else verbose, "verbose",
                                       "ModelCheckpoint", minimum=0)
        self.filepath, self.monitor = os.fspath(filepath), monitor
        if not isinstance(monitor, str):
            raise TypeError(f"ModelCheckpoint: monitor must be a log key (str), got {monitor!r}")
        self.save_best_only, self.save_weights_only = bool(save_best_only), bool(save_weights_only)
        self.mode = mode
        self.better, self._worst = _improvement_test(monitor, mode, 0.0)
        if initial_value_threshold is not None:
            initial_value_threshold = _checks.real(initial_value_threshold, "initial_value_threshold",
                                                   "ModelCheckpoint")
        self.initial_value_threshold = initial_value_threshold
        self.keys = _format_keys(self.filepath)
        from .saving import container_for

        container_for(self.filepath)  # '.npz' or '.safetensors', checked now rather than after the first epoch
        self.best = self._worst if initial_value_threshold is None else initial_value_threshold
        self.saved: list[str] = []

    def on_train_begin(self, logs=None):
        log_keys = getattr(self.model, "log_keys", None)
        known = {"epoch", LR_KEY, *(log_keys or ())}
        missing = sorted(self.keys - known) if log_keys is not None else []
        if missing:
            raise KeyError(f"ModelCheckpoint: filepath {self.filepath!r} uses {missing} but the epoch logs will hold "
                           f"only {sorted(known)}; validation figures ('val_*') need validation_split or "
                           "validation_data")
        if self.save_best_only:
            _check_monitor(self.model, self.monitor, "ModelCheckpoint")
            stored = self._stored_best()
            if stored is not None and self.better(stored, self.best):
                self.best = stored

    def _stored_best(self):
        """The monitored value kept in the existing file at a fixed ``filepath`` (None when there is none)."""
        if self.keys or not os.path.isfile(self.filepath):
            return None
        from .saving import ModelFileError, read_file

        try:
            _, meta = read_file(self.filepath)
        except ModelFileError:
            return None
        entry = meta.get("best")
        if not isinstance(entry, dict) or entry.get("monitor") != self.monitor:
            return None
        value = entry.get("value")
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        extra = None
        if self.save_best_only:
            current = _monitored(logs, self.monitor, "ModelCheckpoint", self.model)
            if current is None or not self.better(current, self.best):
                return
            self.best = current
            extra = {"best": {"monitor": self.monitor, "value": current}}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_weights_only:
            self.model.save(path, extra=extra)
        else:
            self.model.save_checkpoint(path, epoch + 1, extra=extra)
        self.saved.append(path)
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")


def _format_keys(filepath: str) -> set:
    """The field names of a ``str.format`` template (ValueError for a malformed one)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(filepath) if field is not None]
    except ValueError as exc:
        raise ValueError(f"ModelCheckpoint: filepath {filepath!r} is not a valid format string: {exc}") from None
    keys = set()
    for field in fields:
        if not field or field[0].isdigit():
            raise ValueError(f"ModelCheckpoint: filepath {filepath!r} has a positional field {{{field}}}; use names "
                             "such as {epoch} or {val_loss:.3f}")
        keys.add(field.split(".")[0].split("[")[0])
    return keys


class LearningRateScheduler(Callback):
    """Set the optimizer's learning rate at each epoch start to ``schedule(epoch)`` or ``schedule(epoch, lr)``.

    A ``magmadnn.schedules.Schedule`` works here with the epoch as its counter. The rate is logged as
    ``learning_rate`` (Keras 3's key).
    """

    def __init__(self, schedule, verbose=0):
        if not callable(schedule):
            raise TypeError(f"LearningRateScheduler needs a callable schedule, got {schedule!r}")
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = self.model.optimizer
        lr = schedules.epoch_rate(self.schedule, epoch, optimizer.learning_rate)
        optimizer.lr = lr
        if self.verbose:
            print(f"Epoch {epoch + 1}: LearningRateScheduler sets the learning rate to {lr:.6g}")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs[LR_KEY] = float(self.model.optimizer.learning_rate)


class CSVLogger(Callback):
    """One CSV row per epoch (``epoch`` + every log key) in ``filename``; the header is written once.

    The file is rewritten atomically at each epoch end (a temporary file renamed over it, see
    :mod:`magmadnn._atomic`): a crash or a full disk leaves the rows of the last complete epoch, never a torn line.
    With ``append=True`` the rows already in the file are kept and the new ones follow them."""

    records_logs = True

    def __init__(self, filename, separator=",", append=False):
        self.filename, self.separator, self.append = os.fspath(filename), separator, append
        self.keys = None
        self._kept, self._rows = "", []

    def on_train_begin(self, logs=None):
        self.keys, self._kept, self._rows = None, "", []
        if self.append and os.path.isfile(self.filename) and os.path.getsize(self.filename) > 0:
            with open(self.filename, newline="", encoding="utf-8") as f:
                self._kept = f.read()
            header = next(csv.reader(io.StringIO(self._kept), delimiter=self.separator), None)
            self.keys = header[1:] if header else None
            if not self._kept.endswith(("\n", "\r")):
                self._kept += "\r\n"

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
            self._rows.append(["epoch", *self.keys])
        self._rows.append([epoch, *(_csv_value(logs.get(k, "")) for k in self.keys)])
        buffer = io.StringIO()
        csv.writer(buffer, delimiter=self.separator).writerows(self._rows)
        write_text(self.filename, self._kept + buffer.getvalue())


def _csv_value(value):
    return f"{value:.8g}" if isinstance(value, (float, np.floating)) else value


class LambdaCallback(Callback):
    """Keras' ``LambdaCallback``: hooks given as functions, called with the arguments of the hook they replace
    (``on_epoch_end=lambda epoch, logs: ...``, ``on_train_batch_end=lambda batch, logs: ...``,
    ``on_train_begin=lambda logs: ...``); any other ``on_*`` hook may be passed by name."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None, on_train_end=None,
                 on_train_batch_begin=None, on_train_batch_end=None, **hooks):
        super().__init__()
        given = {"on_epoch_begin": on_epoch_begin, "on_epoch_end": on_epoch_end, "on_train_begin": on_train_begin,
                 "on_train_end": on_train_end, "on_train_batch_begin": on_train_batch_begin,
                 "on_train_batch_end": on_train_batch_end, **hooks}
        for hook, function in given.items():
            if not hook.startswith("on_") or not hasattr(Callback, hook):
                raise TypeError(f"LambdaCallback: {hook!r} is not a callback hook")
            if function is not None:
                if not callable(function):
                    raise TypeError(f"LambdaCallback: {hook} must be callable, got {function!r}")
                setattr(self, hook, function)


class TerminateOnNaN(Callback):
    """Stop training at the first batch whose loss is NaN or infinite (that batch's update is not applied).

    The reason goes to ``model.stop_reason`` (epoch and batch counted from 1, as in fit's own error); ``fit``
    prints it unless ``verbose=0``.
    """

    def on_nonfinite_loss(self, epoch, batch, loss):
        self.model.stop_training = True
        self.model.stop_reason = (f"TerminateOnNaN: loss is {loss} at epoch {epoch + 1}, batch {batch + 1}; "
                                  "training stopped")

    def on_nonfinite_parameter(self, epoch, layer, name):
        self.model.stop_training = True
        self.model.stop_reason = (f"TerminateOnNaN: parameter {name!r} of layer {layer!r} became NaN or infinite "
                                  f"in epoch {epoch + 1}; training stopped")
