"""Training callbacks: History, EarlyStopping, ModelCheckpoint, LearningRateScheduler, CSVLogger, TerminateOnNaN.

``Model.fit`` calls ``on_train_begin(logs)``, then per epoch ``on_epoch_begin(epoch, logs)``, per batch
``on_batch_begin(batch, logs)`` / ``on_batch_end(batch, logs)``, and ``on_epoch_end(epoch, logs)`` (logs: epoch
means, ``val_*`` entries when validating), then ``on_train_end(logs)``. A callback stops training by setting
``model.stop_training = True``.

Training never leaves the device: the batch logs hold that batch's ``loss`` on the host backend only (reading it on a
GPU would stall it every batch); the epoch logs always hold every figure. No callback here reads a device array.

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

import numpy as np

from . import _checks
from ._atomic import write_text

__all__ = [
    "Callback", "CallbackList", "History", "EarlyStopping", "ModelCheckpoint", "LearningRateScheduler",
    "CSVLogger", "TerminateOnNaN",
]


class Callback:
    """Base class; every hook is a no-op. ``self.model`` is set by ``fit``. A callback that records the logs
    (``records_logs = True``) runs after the others, so it sees every key they add (such as ``lr``)."""

    model = None
    records_logs = False

    def set_model(self, model) -> None:
        self.model = model

    def on_train_begin(self, logs=None): ...
    def on_train_end(self, logs=None): ...
    def on_epoch_begin(self, epoch, logs=None): ...
    def on_epoch_end(self, epoch, logs=None): ...
    def on_batch_begin(self, batch, logs=None): ...
    def on_batch_end(self, batch, logs=None): ...
    def on_nonfinite_loss(self, epoch, batch, loss): ...
    def on_nonfinite_parameter(self, epoch, layer, name): ...


class CallbackList:
    """Fans each hook out to a list of callbacks, the log recorders last (otherwise in the order given)."""

    def __init__(self, callbacks, model):
        callbacks = list(callbacks or [])
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {type(cb).__name__}")
            cb.set_model(model)
        self.callbacks = sorted(callbacks, key=lambda cb: cb.records_logs)

    def __getattr__(self, hook):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def fan_out(*args):
            for cb in self.callbacks:
                getattr(cb, hook)(*args)
        return fan_out


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
    """Records the epoch logs: ``history.history["loss"]`` is a list with one value per epoch."""

    records_logs = True

    def __init__(self):
        self.history: dict[str, list] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)

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
    if known is not None and monitor not in (*known, "lr"):
        raise KeyError(f"{who} monitors {monitor!r} but the epoch logs will hold only {sorted(known)}; validation "
                       "figures ('val_*') need validation_split or validation_data")


def _monitored(logs, monitor, who):
    if monitor not in (logs or {}):
        raise KeyError(f"{who} monitors {monitor!r} but the epoch logs hold only {sorted(logs or {})}; "
                       "validation metrics ('val_*') need validation_split or validation_data")
    return float(logs[monitor])


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, mode="auto", restore_best_weights=False):
        if not isinstance(monitor, str):
            raise TypeError(f"EarlyStopping: monitor must be a log key (str), got {monitor!r}")
        self.monitor, self.restore_best_weights = monitor, bool(restore_best_weights)
        self.patience = _checks.integer(patience, "patience", "EarlyStopping", minimum=0)
        min_delta = _checks.real(min_delta, "min_delta", "EarlyStopping")
        self.better, self._initial_best = _improvement_test(monitor, mode, min_delta)
        self.stopped_epoch = None

    def on_train_begin(self, logs=None):
        _check_monitor(self.model, self.monitor, "EarlyStopping")
        self.best, self.wait, self.best_weights, self.stopped_epoch = self._initial_best, 0, None, None

    def on_epoch_end(self, epoch, logs=None):
        current = _monitored(logs, self.monitor, "EarlyStopping")
        if self.better(current, self.best):
            self.best, self.wait = current, 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            self.model.stop_reason = (f"EarlyStopping: {self.monitor} did not improve for {self.wait} epochs "
                                      f"(best {self.best:.6g})")
            if self.best_weights is not None:
                self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Save after each epoch to ``filepath`` (may contain ``{epoch}`` and log keys, e.g. ``{val_loss:.3f}``).

    By default writes a resumable checkpoint (weights, optimizer state, epoch, RNG state; ``.npz`` or
    ``.safetensors``); with ``save_weights_only=True`` writes ``model.save`` files (architecture + weights).
    With ``save_best_only=True`` only epochs that improve ``monitor`` are written; the file keeps the monitored
    value, and a later run writing to the same (fixed) path starts from it, so a resumed run never overwrites the
    best file with a worse epoch. ``initial_value_threshold`` (as in Keras) is a best value to beat from the start
    (the better of it and the stored one counts). The filename keys and ``monitor`` are checked when training
    begins, before any epoch runs.
    """

    def __init__(self, filepath, monitor="val_loss", save_best_only=False, mode="auto", save_weights_only=False,
                 initial_value_threshold=None):
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
        known = {"epoch", "lr", *(log_keys or ())}
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
            current = _monitored(logs, self.monitor, "ModelCheckpoint")
            if not self.better(current, self.best):
                return
            self.best = current
            extra = {"best": {"monitor": self.monitor, "value": current}}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_weights_only:
            self.model.save(path, extra=extra)
        else:
            self.model.save_checkpoint(path, epoch + 1, extra=extra)
        self.saved.append(path)


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

    A ``magmadnn.schedules.Schedule`` works here with the epoch as its counter. The lr is logged as ``lr``.
    """

    def __init__(self, schedule, verbose=0):
        if not callable(schedule):
            raise TypeError(f"LearningRateScheduler needs a callable schedule, got {schedule!r}")
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = self.model.optimizer
        try:
            lr = self.schedule(epoch, optimizer.learning_rate)
        except TypeError:
            lr = self.schedule(epoch)
        lr = float(lr)
        if not math.isfinite(lr) or lr < 0:
            raise ValueError(f"LearningRateScheduler: schedule returned an invalid learning rate {lr!r}")
        optimizer.lr = lr
        if self.verbose:
            print(f"Epoch {epoch + 1}: LearningRateScheduler sets the learning rate to {lr:.6g}")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = self.model.optimizer.learning_rate


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
