"""``fit``'s batch loop when its training step replays (:mod:`.replay`): the replay floor.

Once the step of a batch shape is captured and current, every following batch of that shape is fed to it here
without the per-step machinery of the general loop (:class:`.epoch.Epoch`): the batch is gathered from the
in-memory arrays straight into the page-locked buffer the graph's upload reads (``np.take`` into it), the
optimizer's step values and dropout offsets written beside it, then one asynchronous copy and one graph launch.
Nothing is read back; the tally's sample counts are added once per progress read and at the end; what the
rollback of a non-finite loss needs is the batch's index, not a copy of its data. The general loop runs a batch
whose step is not captured yet (warm-up, capture, a last partial batch), and the whole epoch when a callback acts
on batches (Keras' batch hooks see each step, as there), when the batches are not in-memory arrays, or with a
loss or metric counting targets (``ignore_index``: each batch counts its own).

Results are the same as the general loop's bit for bit: the same captured graph runs on the same bytes, and the
host advances the optimizer's step count, the schedule and the dropout streams exactly as there.
"""

from __future__ import annotations

import numpy as np

from . import rng as _rng
from .step import Snapshot

__all__ = ["applies", "run_batches"]


def applies(epoch) -> bool:
    """Whether ``epoch`` (an :class:`.epoch.Epoch`) runs its batches here."""
    from .batches import ArrayBatches  # noqa: PLC0415 - batches imports nothing of this module's

    model, cbs = epoch.model, epoch.cbs
    return (not epoch.eager and model._graphs is not None and model._parallel is None
            and type(epoch.batches) is ArrayBatches and not epoch.batch_logs and not cbs.wants_batch_logs("train_begin")
            and model._graphs.unavailable() is None and "train" not in model._graphs.failed)


def run_batches(epoch, one):
    """Run the epoch's batches: each through ``one(index, xb, yb)`` (the general loop's body: logs to stop with,
    or None) until its shape's step is captured, then the tight loop. Returns the logs to stop with, or None.
    ``epoch.selectors`` keeps each batch's rows (a slice or an index array) for a rollback's replay."""
    batches, model = epoch.batches, epoch.model
    epoch.selectors = selectors = batches.selectors()
    graphs, tally = model._graphs, epoch.tally
    k, total = 0, len(selectors)
    while k < total:
        xb, yb = batches.take(selectors[k])
        step = graphs.ready("train", xb, yb, tally)
        if step is None or step.counting:
            stop = one(k, xb, yb)
            k += 1
            if stop is not None or model.stop_training:
                return stop
            continue
        k, stop = _tight(epoch, step, selectors, k)
        if stop is not None or model.stop_training:
            return stop
    return None


def _tight(epoch, step, selectors, k):
    """Batches ``k ..`` of the captured ``step``'s shape, fed to it one by one; returns ``(next batch, stop)``."""
    batches, model, bar, graphs = epoch.batches, epoch.model, epoch.bar, epoch.model._graphs
    xs, y, m = batches.xs, batches.y, int(selectors[k].shape[0])  # the step's batch size (a last partial one's)
    opt, loss, metrics, dtype = model.optimizer, model.loss, model.metrics, model.dtype
    staging, launch = step.staging, step.graph.launch
    takes = step.takes
    n_in = len(xs)
    inputs = list(zip(xs, range(2, 2 + n_in)))
    at = 2 + n_in  # the staging views: step values, dropout offsets, inputs, targets, metrics' labels
    rows = batches.prepared(loss.prepare, dtype, staging.host_views[0][at]) if _rowwise(loss) else None
    prepare, host = loss.prepare, _host()
    delta = list(step.delta.items())
    shape = None
    if metrics:
        from .outputs import resolved  # noqa: PLC0415

        shape = (m, *resolved(model.output_shape, y.shape[1:]))
    end = k
    while end < len(selectors) and selectors[end].shape[0] == m:
        end += 1
    if model.stop_training:  # set before this batch (at the epoch's start): one batch, as the general loop
        end = k + 1
    counted = 0
    get_state, set_state = _rng.get_state, _rng.set_state
    pending = epoch.pending
    for k in range(k, end):  # noqa: B020 - k: the batch the returns name
        sel = selectors[k]
        if epoch.snapshot is None:
            epoch.snapshot = Snapshot(model, epoch.tally)
            pending = epoch.pending
        iterations = opt.iterations
        states = [(s, get_state(s)) for s in takes] if takes else ()
        try:
            views = staging.host()
            values = opt.step_values(opt._advance())
            views[0][:len(values)] = values
            if takes:
                offsets = views[1].view(np.uint64)
                for slot, stream in enumerate(takes):
                    offsets[slot] = stream.take()
            for a, i in inputs:
                a.take(sel, 0, views[i], "clip")
            if rows is not None:
                rows.take(sel, 0, views[at], "clip")
            else:
                np.copyto(views[at], prepare(y[sel], host, dtype), casting="unsafe")
            if metrics:
                yb = y[sel]
                for view, metric in zip(views[at + 1:], metrics):
                    np.copyto(view, metric.stage(yb, shape, dtype), casting="unsafe")
            staging.upload()
            launch()
        except Exception as error:  # noqa: BLE001 - the launch failed, nothing ran: eager from this batch on
            _count(epoch, delta, counted, m)
            epoch.done = k
            opt.iterations = iterations
            for stream, state in states:
                set_state(stream, state)
            graphs._fail("train", f"the train step could not be launched ({type(error).__name__}: {error})")
            return k, None
        pending.append(k)
        counted += 1
        if bar.due():
            _count(epoch, delta, counted, m)
            counted = 0
            epoch.done = k + 1
            # the read rebinds the tally's sums (and may stop): back to run_batches, which checks the step again
            # (``current`` copies the new sums into the graph's)
            return k + 1, epoch._progress(k + 1)
    _count(epoch, delta, counted, m)
    epoch.done = end
    return end, None


def _rowwise(loss) -> bool:
    """Whether ``loss.prepare`` makes one row per sample from that sample's target alone: magmadnn's own losses
    (their ``prepare`` and what it calls, ``_rows`` and ``targets_array``, are row by row)."""
    cls = type(loss)
    return all(getattr(getattr(cls, name, None), "__module__", _OWN[0]) in _OWN
               for name in ("prepare", "_rows", "targets_array", "_pack"))


_OWN = ("magmadnn.losses", "magmadnn._loss_weights")


def _count(epoch, delta, steps: int, m: int) -> None:
    """``steps`` replayed batches of ``m`` samples into the tally's counts and the progress bar."""
    if not steps:
        return
    counts = epoch.tally.counts
    for name, n in delta:
        counts[name] += n * steps
    epoch.bar.add_samples(m * steps)


def _host():
    from ..backend import host  # noqa: PLC0415

    return host
