"""The one training step, and what ``fit`` keeps on the backend between host reads: the running tally, and the
snapshot it rolls back to. (The epoch loop around them is :mod:`.epoch`; compile and fit are :mod:`.fitting`; graph
replay, :mod:`.replay`, captures this same step.)

``train_step``: the one training step (forward, loss, backward, update) of ``fit`` and ``train_on_batch``, and the
step a replayed graph holds (``compile(graph=True)`` captures it, its batch given on the backend: ``staged``).
Data-parallel training joins in through a :class:`StepHook` (gradient reduction between backward and the update,
the batch this process runs); it is registered by :mod:`magmadnn.distributed`, which sits above the models and is
never imported by them.

``Tally``: running sums (weighted loss, metric hits, their validation twins) in one backend vector; a batch adds to it
with two backend ops per entry (on the host, one NumPy add into a copy) and ``read()`` copies the whole vector to the
host in one transfer.

``Snapshot``: copies (on the backend) of everything a training step changes (weights, BatchNorm statistics,
optimizer slots and step count, dropout streams, the tally), taken at a progress update so that a non-finite loss
found at the next one can be undone and the batches in between replayed one by one up to the offending one.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _foreach, _momentum_fold, _tape
from ..autograd import Tensor
from ..backend import faults as _faults
from ..callbacks import BatchLogs
from ..optimizers import Optimizer
from . import rng as _rng

__all__ = ["Tally", "TallyNames", "Snapshot", "StepHook", "train_step", "running_logs", "register_data_parallel",
           "setup_data_parallel"]


_BASE_SCALE_LOSS = Optimizer.scale_loss  # (returns the loss: a step whose optimizer keeps it skips the call)
_BASE_STEP = Optimizer.step  # (its planned step is run without its frame: see train_step)


class StepHook:
    """What ``fit(distributed=...)`` plugs into the training step and the epoch loop (``model._parallel``; None in
    one process). The step itself stays :func:`train_step`; a hook

    * ``step(xs, y)``: a context manager around forward and backward, entered as the batch this process runs:
      ``(xs, y)``, a stand-in batch (its shard of the global batch is empty but its layers take part in
      collectives), or None (run nothing);
    * ``backward_hook(loss)``: the loss about to be back-propagated (None when nothing ran); returns the
      ``on_leaf_ready`` callback for ``Tensor.backward``, or None;
    * ``reduce(params)``: between backward and the update, sets each parameter's ``.grad`` to the gradient of the
      global batch and returns the global loss, which the step checks instead of the local one;
    * ``reduce_tally(sums, counts)``: the running sums and sample counts of every process (the epoch reads its
      tally at its end only).
    """

    def step(self, xs, y):
        raise NotImplementedError

    def backward_hook(self, loss):
        raise NotImplementedError

    def reduce(self, params) -> float:
        raise NotImplementedError

    def reduce_tally(self, sums, counts):
        raise NotImplementedError


_data_parallel = None  # fit(distributed=...)'s set-up, registered by magmadnn.distributed


def register_data_parallel(setup) -> None:
    """Register ``fit(distributed=...)``'s set-up: ``setup(model, batches, validation_data, callbacks, verbose,
    options) -> (batches, validation_data, callbacks, verbose, hook)`` (``magmadnn.distributed`` does on import)."""
    global _data_parallel
    _data_parallel = setup


def setup_data_parallel(model, batches, validation_data, callbacks, verbose, options):
    """The registered data-parallel set-up for this ``fit`` (see :func:`register_data_parallel`)."""
    if _data_parallel is None:
        raise RuntimeError("fit(distributed=...) needs magmadnn.distributed: import it first")
    return _data_parallel(model, batches, validation_data, callbacks, verbose, options)


def train_step(model, xs: list[np.ndarray], y: np.ndarray, check: bool, tally=None, staged=None):
    """Forward, loss, backward, update, and the batch's loss and metrics added to ``tally``.

    ``check``: read the loss (one host read) and apply nothing when it is not finite (the state arrays that the
    forward pass updates in place, BatchNorm statistics, are restored), unless the optimizer skips non-finite steps
    itself (``skips_nonfinite``: a LossScaleOptimizer); returns the loss. Without ``check``
    nothing is read and None is returned (fit checks the tally at its next progress update).

    With a :class:`StepHook` (``model._parallel``) the hook picks the batch this process runs and surrounds forward
    and backward; between backward and the update it reduces the gradients over the processes, and the loss checked
    is the global one it returns (read after the reduction, whatever ``check``). A batch without samples adds
    nothing to ``tally``.

    ``staged``: the batch on the backend already, as graph replay captures this step (:mod:`.replay`): ``xs`` are
    then backend arrays and ``staged`` is ``(targets, metric labels, counted targets or None)``, the loss's prepared
    targets and what ``Model._tally_batch`` reads (``y`` stays the host targets, for the counts); the loss's
    backend array is then returned (a replayed step leaves each batch's loss in it)."""
    xp, hook = model.xp, model._parallel
    skips = model.optimizer.skips_nonfinite  # a LossScaleOptimizer decides itself (a skipped step is no error)
    stateful = [layer for layer in model.layers if layer._state] if check else []
    saved = [{k: xp.copy(a) for k, a in layer._state.items()} for layer in stateful] if stateful else []
    if hook is None:  # (one process: no context around forward and backward)
        outputs, loss, value, stop = _forward_backward(model, (xs, y), check, staged, None, stateful, saved, skips)
    else:
        with hook.step(xs, y) as run:
            outputs, loss, value, stop = _forward_backward(model, run, check, staged, hook, stateful, saved, skips)
    if stop:
        return value
    params = model.parameters()
    if hook is not None:
        value = hook.reduce(params)
    if value is None or skips or math.isfinite(value):
        opt = model.optimizer
        # Optimizer.step's planned step without its frame, where its step is the base one and the count holds
        if not (getattr(opt.step, "__func__", None) is _BASE_STEP and opt._step_plan is not None
                and opt._count == len(params) and _foreach.planned_step(opt, params)):
            opt.step(params)  # (a planned_step that did nothing: the full step decides)
    else:  # applied nowhere; the device path finds it in the tally at its next read and replays from there
        _restore(stateful, saved)
    for param in params:
        param.grad = None
    if tally is not None and y.shape[0]:
        if staged is None:
            model._tally_batch(tally, "", loss.data, outputs.data, y)
        else:
            model._tally_batch(tally, "", loss.data, outputs.data, y, staged=staged[1], loss_count=staged[2])
    if staged is not None:
        return None if loss is None else loss.data
    return value if check else None


def _forward_backward(model, run, check: bool, staged, hook, stateful, saved, skips):
    """:func:`train_step`'s forward, loss and backward of the batch ``run`` (``(xs, y)``, or None: nothing to run):
    ``(outputs, loss, value, stop)``; ``stop``: a non-finite loss found by ``check``, nothing applied (``value``)."""
    outputs = loss = value = None
    if run is not None:
        outputs = model._forward(model._input_tensors(run[0]), training=True)
        loss = model._loss_of(outputs, run[1]) if staged is None else \
            model._with_penalties(model.loss.checked(outputs, staged[0]))
    if check and hook is None:
        try:  # with what a device check found in this batch (an id, a mask value): raised before any update
            value = float(_faults.read(model.xp, loss.data).reshape(()))
        except ValueError:
            _restore(stateful, saved)
            raise
        if not (math.isfinite(value) or skips):
            _restore(stateful, saved)
            return outputs, loss, value, True
    on_leaf_ready = None if hook is None else hook.backward_hook(loss)
    if loss is not None and loss.requires_grad:  # scaled by a LossScaleOptimizer; the tally below adds the
        # loss itself (a model with no trainable weight computes the loss only: fit warned, as Keras)
        opt = model.optimizer
        # (the base optimizer's scale_loss returns the loss itself: not called)
        scaled = loss if getattr(opt.scale_loss, "__func__", None) is _BASE_SCALE_LOSS else opt.scale_loss(loss)
        if hook is None and id(opt) in _momentum_fold._PLANS:  # SGD's momentum folded into this backward's dense weight
            # gradients on the host (only here: a gradient seen between backward and update is the velocity; see
            # magmadnn._momentum_fold); no plan for this optimizer: nothing to arm
            _momentum_fold.arm(opt, scaled)
        if on_leaf_ready is None and scaled.__class__ is Tensor and \
                getattr(scaled._fn, "backward_of_one", None) is not None and math.prod(scaled.data.shape) == 1:
            _tape._run_backward(scaled, _tape.ONE, None)  # Tensor.backward() of a fused loss, without its frame
        else:
            scaled.backward(on_leaf_ready=on_leaf_ready)
    return outputs, loss, value, False


def running_logs(model, tally, prefix: str = "", training: bool = False):
    """Keras' batch logs: the running ``loss`` and metrics of the ``prefix`` entries, as a lazy
    :class:`~magmadnn.callbacks.BatchLogs` (a backend copy of the sums now, read on the first look). In
    data-parallel training the training figures are the global ones, read at once: the read is a collective, which
    every rank makes alike (each runs every global step and the same batch hooks); validation batch logs, whose
    count differs between the ranks' shards, are this rank's."""
    if training and tally.reduce is not None:
        sums = tally.read()
        return {key[len(prefix):]: value for key, value in model._results(sums, tally.read_counts, prefix).items()}
    read_later = tally.deferred()

    def read():
        sums, counts = read_later()
        return {key[len(prefix):]: value for key, value in model._results(sums, counts, prefix).items()}
    return BatchLogs(read)


def _restore(layers, states) -> None:
    for layer, state in zip(layers, states):
        layer._state.update(state)


_HOST_SCALARS = (np.ndarray, np.float16, np.float32, np.float64)  # host 0-d values (``np.sum`` gives a scalar)


class TallyNames(list):
    """Tally entry names, with the length of each vector entry (``sizes``; 1 when absent)."""

    def __init__(self, names, sizes=None):
        super().__init__(names)
        self.sizes = dict(sizes or {})


class Tally:
    """Named running sums on the backend ``xp`` (dtype ``dtype``) with host-side sample counts. An entry is a scalar,
    or a vector when ``names`` is a :class:`TallyNames` that gives it a size (confusion counts, say)."""

    def __init__(self, xp, names, dtype, reduce=None):
        self.xp, self.names, self.dtype = xp, list(names), np.dtype(dtype)
        self._host = getattr(xp, "name", None) == "host"
        self.reduce = reduce  # fit(distributed=True): (sums, counts) -> the same summed over every rank
        sizes = getattr(names, "sizes", {})
        self._slices, start = {}, 0
        for name in self.names:
            size = int(sizes.get(name, 1))
            self._slices[name] = (start, size)
            start += size
        eye = np.eye(start, dtype=self.dtype)
        self._basis = {name: xp.asarray(eye[i] if size == 1 else eye[i:i + size])
                       for name, (i, size) in self._slices.items()}
        self.sums = xp.zeros((start,), self.dtype)
        self.counts = dict.fromkeys(self.names, 0)
        self.read_counts = dict(self.counts)  # the sample counts of the last read (over every rank when reduced)

    def add(self, name: str, value, count: int) -> None:
        """Add the backend value (0-d, or a vector for a vector entry) to entry ``name`` (``count`` samples),
        without leaving the backend."""
        start, size = self._slices[name]
        if self._host and size == 1 and type(value) in _HOST_SCALARS and value.ndim == 0 \
                and value.dtype == self.dtype and math.isfinite(value):
            # the same sums as the ops below: x + 0 * value is x for a finite value (a sum is never -0)
            sums = self.sums.copy()  # a new vector, as the ops give: state() and deferred() copies stay as they are
            sums[start] += value
            self.sums = sums
        elif size == 1:
            self.sums = self.xp.add(self.sums, self.xp.multiply(value, self._basis[name]))
        else:
            spread = self.xp.matmul(self.xp.reshape(value, (1, size)), self._basis[name])
            self.sums = self.xp.add(self.sums, self.xp.reshape(spread, (int(self.sums.shape[0]),)))
        self.counts[name] += int(count)

    def read(self) -> dict:
        """Every sum (a float, or a NumPy vector for a vector entry), copied to the host in one transfer (a value a
        device check recorded raises its error)."""
        host = np.asarray(_faults.read(self.xp, self.sums), dtype=np.float64).reshape(-1)  # device checks ride on it
        self.read_counts = dict(self.counts)
        if self.reduce is not None:
            host, self.read_counts = self.reduce(host, self.counts)
        return self._named(host)

    def _named(self, host: np.ndarray) -> dict:
        """Host sums by entry name: a float, or a NumPy vector for a vector entry."""
        return {name: float(host[i]) if size == 1 else host[i:i + size].copy()
                for name, (i, size) in self._slices.items()}

    def state(self):
        return self.xp.copy(self.sums), dict(self.counts)

    def deferred(self):
        """``read_later()``: the sums and counts as they are now (a backend copy; nothing is read until it is
        called, then one transfer)."""
        sums, counts = self.xp.copy(self.sums), dict(self.counts)

        def read_later():
            return self._named(np.asarray(self.xp.to_numpy(sums), dtype=np.float64).reshape(-1)), counts
        return read_later

    def restore(self, state) -> None:
        self.sums, self.counts = state[0], dict(state[1])


class Snapshot:
    """Backend copies of a model's training state (and of a tally), restored by ``restore()``."""

    def __init__(self, model, tally: Tally):
        xp = model.xp
        self.model, self.tally = model, tally
        self.params = [(p, xp.copy(p.data)) for p in model.parameters()]
        self.states = [(layer, {k: xp.copy(a) for k, a in layer._state.items()}) for layer in model.layers]
        opt = model.optimizer
        self.iterations = opt.iterations
        self.slots = {i: {name: xp.copy(a) for name, a in slots.items()} for i, slots in opt.slot_arrays.items()}
        self.rngs = [(layer, _rng.get_state(layer.rng)) for layer in model.layers
                     if getattr(layer, "rng", None) is not None]
        self.tally_state = tally.state()

    def restore(self) -> None:
        for param, data in self.params:
            param.data, param.grad = data, None
        for layer, state in self.states:
            layer._state.update(state)
        opt = self.model.optimizer
        opt.iterations = self.iterations
        opt.slot_arrays.clear()
        opt.slot_arrays.update(self.slots)
        for layer, state in self.rngs:
            _rng.set_state(layer.rng, state)
        self.tally.restore(self.tally_state)
