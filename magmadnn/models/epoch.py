"""One epoch of ``Model.fit``: the batch loop around the one training step (:mod:`.step`), the progress reads and
the handling of a non-finite loss or parameter (back to the snapshot, the batches since replayed one by one)."""

from __future__ import annotations

import math

import numpy as np

from ..backend import host as _host
from . import replayed_epoch as _replayed
from .progress import ProgressBar
from .step import Snapshot, Tally, running_logs

__all__ = ["Epoch"]


class Epoch:
    """One epoch of ``Model.fit``: the batch loop, progress updates (the only host reads) and non-finite handling.

    On the host backend (``eager``) every batch loss is read before its update, as reading it is free there. On any
    other backend nothing is read per batch; each progress update reads the tally once, and a non-finite sum sends
    the epoch back to the snapshot of the previous update to replay the batches since then eagerly.
    """

    def __init__(self, model, batches, epoch, epochs, cbs, verbose, validation_data, batch_size):
        self.model, self.batches, self.epoch, self.cbs = model, batches, epoch, cbs
        self.validation_data, self.batch_size = validation_data, batch_size
        self.eager = model.xp is _host
        parallel = model._parallel  # distributed: tallies summed over the ranks, read at epoch end only
        self.tally = Tally(model.xp, model._tally_names(validation_data is not None), model.dtype,
                           reduce=parallel.reduce_tally if parallel is not None else None)
        try:
            total = len(batches)
        except TypeError:
            total = None
        interval = model.progress_interval if parallel is None else math.inf
        self.bar = ProgressBar(epoch, epochs, total, verbose, interval=interval)
        self.snapshot, self.pending = None, []
        self.done = 0  # batches applied so far (the host names the last one when a parameter turns non-finite)
        self.selectors = None  # the tight loop's batch rows (replayed_epoch), for a rollback's replay

    def run(self) -> dict:
        model, cbs = self.model, self.cbs
        for metric in model.metrics:
            metric.reset()
        self.batch_logs = cbs.wants_batch_logs("train")
        if _replayed.applies(self):  # the step replays and no callback acts on batches: the tight loop
            stop = _replayed.run_batches(self, self._batch)
        else:
            stop = None
            for index, (xb, yb) in enumerate(self.batches):
                stop = self._batch(index, xb, yb)
                if stop is not None or model.stop_training:
                    break
        if stop is not None:
            return stop
        self.bar.stop_clock()
        if self.validation_data is not None:
            cbs.on_test_begin({})
            model._evaluate_into(self.tally, "val_", model._inference_batches(
                *self.validation_data, self.batch_size, "fit (validation_data)", checked=True), cbs)
        logs, bad = self._read(final=True)
        if bad is not None:
            return bad
        if self.validation_data is not None:
            cbs.on_test_end({key[4:]: value for key, value in logs.items() if key.startswith("val_")})
        self.bar.finish(self.done, logs)
        return logs

    def _batch(self, index: int, xb, yb):
        """One batch of the general loop (callbacks, the step, the progress read): the logs to stop the epoch
        with, or None."""
        model, cbs = self.model, self.cbs
        cbs.on_train_batch_begin(index, {})
        if not self.eager:
            if self.snapshot is None:
                self.snapshot = Snapshot(model, self.tally)
            self.pending.append((index, [np.array(a) for a in xb], yb.copy()))  # copy() keeps sample weights
        value = model._train_step(xb, yb, check=self.eager, tally=self.tally)
        self.done += 1
        self.bar.add_samples(int(yb.shape[0]))
        if self.eager and not math.isfinite(value):
            if not model.optimizer.skips_nonfinite:
                cbs.on_train_batch_end(index, {"loss": value})
                return model._non_finite(cbs, self.epoch, index, value, (xb, yb))
            cbs.on_nonfinite_loss(self.epoch, index, value)  # a skipped step: TerminateOnNaN stops, as in Keras
        if self.bar.due():
            bad = self._progress(self.done)
            if bad is not None:
                return bad
        cbs.on_train_batch_end(index, running_logs(model, self.tally, training=True) if self.batch_logs else {})
        return None

    def _read(self, final: bool = False):
        """One host read of the tally: ``(logs, None)``, or ``(None, stop logs)`` after a non-finite loss; ``final``:
        the epoch's figures (a figure with no counted target is then an error naming ``ignore_index``)."""
        model = self.model
        probe = model._param_probe()
        if probe is not None:  # 0, or NaN/inf when a parameter is not finite: it rides on the same read
            self.tally.add("loss", probe, 0)
        try:
            sums = self.tally.read()
        except ValueError as error:  # a device check found a bad value (an id, a mask) since the last read
            if self.eager or self.snapshot is None:
                raise
            return None, self._find_fault(error)
        # the host checked each batch loss, and a LossScaleOptimizer's non-finite losses are no error: a non-finite
        # sum is then an error only where a parameter is not finite
        skips = model.optimizer.skips_nonfinite
        if (self.eager or skips) and not math.isfinite(sums["loss"]):
            found = model._nonfinite_parameter()
            if found is not None:
                stop = model._non_finite_parameters(self.cbs, self.epoch, found, self.done, {"loss": sums["loss"]})
                return None, stop
        if skips and not self.eager and not math.isfinite(sums["loss"]):  # a skipped step since the last read
            self.cbs.on_nonfinite_loss(self.epoch, self.done - 1, sums["loss"])
        if math.isfinite(sums["loss"]) or self.eager or skips:
            who = "fit" if final else None
            results = dict(sorted(model._results(sums, self.tally.read_counts, who=who).items()))  # Keras' order
            if self.validation_data is not None:
                results.update(sorted(model._results(sums, self.tally.read_counts, "val_", who=who).items()))
            self.snapshot, self.pending = None, []
            return results, None
        return None, self._replay()

    def _progress(self, done: int):
        logs, bad = self._read()
        if bad is None:
            self.bar.draw(done, {k: v for k, v in logs.items() if not k.startswith("val_")})
        return bad

    def _find_fault(self, error: ValueError) -> dict:
        """Back to the snapshot, then the pending batches one by one, each read with its checks: the error is
        raised at the batch holding the bad value, the updates before it applied (as on the host); a value found in
        the validation data is raised once the batches are applied again."""
        stopped = self._replay_pending()
        if stopped is not None:
            return stopped
        raise error

    def _replay_pending(self) -> dict | None:
        """Back to the snapshot, then the pending batches one by one (one read each, with its checks); the logs of
        the stop at the first non-finite loss, or None when every batch is applied."""
        model = self.model
        self.snapshot.restore()
        for entry in self.pending:  # (index, xb, yb), or the index of a batch the tight loop replayed
            index, xb, yb = (entry, *self.batches.take(self.selectors[entry])) if isinstance(entry, int) else entry
            value = model._train_step(xb, yb, check=True, tally=self.tally)
            if not math.isfinite(value):
                return model._non_finite(self.cbs, self.epoch, index, value, (xb, yb))
        return None

    def _replay(self) -> dict:
        """Back to the snapshot, then the pending batches one by one (one read each) up to the non-finite loss."""
        model = self.model
        stopped = self._replay_pending()
        if stopped is not None:
            return stopped
        found = model._nonfinite_parameter()  # the last pending update left a parameter non-finite
        if found is not None:
            last = self.pending[-1]
            return model._non_finite_parameters(self.cbs, self.epoch, found,
                                                (last if isinstance(last, int) else last[0]) + 1,
                                                {"loss": float("nan")})
        raise FloatingPointError(f"fit: the running loss of epoch {self.epoch + 1} became non-finite but no batch "
                                 "loss did when replayed (nondeterministic backend?)")
