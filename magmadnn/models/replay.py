"""Graph replay (``Model.compile(graph="auto")``, the default, or ``graph=True``): a whole step captured once as a
CUDA graph and replayed.

``graph="auto"`` replays on a backend with CUDA graphs (the device) and says nothing on the host; ``graph=True``
warns once where it cannot replay; ``MAGMADNN_GRAPH=0`` turns replay off everywhere. The steps replayed: ``fit``'s
training step, ``evaluate``'s and ``predict``'s (``test_on_batch``, ``predict_on_batch`` through them) and
``train_on_batch``'s checked step (kind ``"train_checked"``: the graph also keeps a copy of every array the step
updates, and a non-finite loss or a device check's fault puts them back, so nothing is applied, as eagerly). A
capture, instantiation or launch error makes that kind of step run eagerly from then on, after one warning.

The training step captured is the one of eager training, :func:`.step.train_step`, its batch given on the backend
(a subclassed model's own ``train_step`` / ``test_step`` is captured by :mod:`.custom_replay`, held here too).

For each kind of step (training, evaluation, prediction) and batch shape, the first ``WARMUP`` batches run eagerly
(they allocate the optimizer's slots and fill the backend's caches); the next one is captured and from then on every
batch of that shape is one upload and one graph launch. What changes from step to step lives in device memory the
graph reads, written before each launch by a single asynchronous copy from page-locked memory (``staging_buffer``):

* the batch (inputs, the loss's targets, each metric's staged labels);
* the optimizer's per-step values (``Optimizer.step_values``: the learning rate, a schedule's included, and Adam's
  bias corrections), computed on the host exactly as an eager step computes them;
* the Philox offset of each dropout draw (the layer's stream advances on the host as in an eager step).

A ``LossScaleOptimizer``'s scale, its growth counter and the skip are device arrays and ops of the step (its
``slot_arrays``), so a replayed step decides them as an eager one does.

Arrays a step rebinds instead of updating in place (the running tally sums) are copied back into the arrays the
graph read at its end, so the next replay reads the new values; an array rebound outside the graph (a rollback
snapshot, ``set_weights``) is copied into the graph's array before the next launch. Everything else the step read on
the host is a constant of the graph: the configuration of the layers, the loss, the metrics and the optimizer (a
Dropout rate, a momentum, ``clipnorm``, ``label_smoothing``, ``trainable``). Each step keeps their capture keys
(:mod:`magmadnn._configurable`); when the configuration generation has moved since the last launch the keys are
computed again, and a step whose keys differ is captured anew (after one eager step). A replayed step therefore
equals an eager step bit for bit. A model that cannot be captured (a backend without graphs, distributed training,
an op that reads the device from the host) runs eagerly after one warning saying why, naming the layer, loss,
metric or optimizer whose code was running.
"""

from __future__ import annotations

import operator
import os
import warnings

import numpy as np

from .. import _configurable
from .. import optimizers as _optimizers
from ..autograd import no_grad, trainable_changes
from ..backend import host as _host
from ..backend import random as _random
from . import rng as _rng
from .diagnosis import culprit
from .outputs import resolved
from .step import train_step

__all__ = ["GraphedSteps", "WARMUP", "enabled", "TRAIN_KINDS"]

WARMUP = 1  # eager steps of a batch shape before it is captured
MAX_GRAPHS = 16  # captured steps a model holds at most (each holds its memory): further batch shapes run eagerly
VALUES = 8  # float64 slots for Optimizer.step_values
_NONE: dict = {}  # a parameter index without slots
OFFSETS = 32  # 64-bit slots for dropout offsets: random draws per captured training step at most


TRAIN_KINDS = ("train", "train_checked")  # train_checked: train_on_batch's step, its loss read and checked


def enabled() -> bool:
    """False when ``MAGMADNN_GRAPH`` is ``0``/``false``/``no``/``off``: every step runs eagerly."""
    return os.environ.get("MAGMADNN_GRAPH", "1").strip().lower() not in ("0", "false", "no", "off")


class _LaunchError(Exception):
    """A replay could not be launched (its host values put back: the step can run eagerly)."""


class _NotCapturable(Exception):
    """What keeps a step from being captured (caught by GraphedSteps: the step runs eagerly)."""


class _CapturedStream:
    """Stands in for a layer's random stream while a training step is captured: each dropout draw gets a slot of
    the device offsets vector, filled by ``stream.take()`` on the host before each replay."""

    def __init__(self, stream, offsets, takes: list):
        self.stream, self.seed, self.offsets, self.takes = stream, stream.seed, offsets, takes

    def take_slot(self) -> int:
        if len(self.takes) >= OFFSETS:
            raise _NotCapturable(f"more than {OFFSETS} random draws in one step")
        self.takes.append(self.stream)
        return len(self.takes) - 1

    def take(self):
        raise _NotCapturable("a random draw other than dropout (its offset would be fixed in the graph)")


class _Binding:
    """An array the captured step reads through an attribute or a dict entry, and the array it captured."""

    __slots__ = ("get", "set", "array")

    def __init__(self, get, set_):
        self.get, self.set, self.array = get, set_, get()


def _param_binding(param) -> _Binding:
    return _Binding(lambda: param.data, lambda a: setattr(param, "data", a))


def _dict_binding(owner, key) -> _Binding:
    """An entry of ``owner()[key]`` (``owner`` resolves the dict each time: rollbacks replace dicts)."""
    return _Binding(lambda: owner()[key], lambda a: owner().__setitem__(key, a))


class _Step:
    """One captured step: its graph, its staging buffer and what the host does around each launch."""

    def __init__(self, model, kind: str, xs, y, tally, prefix: str):
        self.model, self.kind, self.prefix, self.xp = model, kind, prefix, model.xp
        self.training = kind in TRAIN_KINDS
        # ignore_index: the tally weighs each batch by its counted targets, fed to the graph like the batch
        self.counting = kind != "predict" and any(
            getattr(part, "ignore_index", None) is not None for part in (model.loss, *model.metrics))
        self.params = model.parameters()
        self.trainable_changes = trainable_changes()  # frozen weights leave the optimizer's kernels: recapture
        self.bindings = []
        for layer in model.layers:
            self.bindings += [_param_binding(p) for p in layer._params.values()]
            self.bindings += [_dict_binding(lambda layer=layer: layer._state, k) for k in layer._state]
        if self.training:
            opt = model.optimizer
            for index, slots in opt.slot_arrays.items():
                self.bindings += [_dict_binding(lambda i=index: opt.slot_arrays[i], name) for name in slots]
        self.fast_layers = [(layer, layer._params, len(layer._params)) for layer in model.layers]
        self.fast_params = [(layer._params, name, p, p.data) for layer in model.layers
                            for name, p in layer._params.items()]
        self.fast_states = [(layer, k, a) for layer in model.layers for k, a in layer._state.items()]
        self.fast_slots = [] if not self.training else [
            (i, name, a) for i, slots in model.optimizer.slot_arrays.items() for name, a in slots.items()]
        self.tally, self.takes, self.streams, self.graph, self.output = tally, [], [], None, None
        self.backups = []  # train_checked: (binding, its copy made by the graph before the step)
        host = self._host_arrays(xs, y)
        # step values, dropout offsets (uint64 bits), then the batch
        layout = [((VALUES,), np.float64), ((OFFSETS,), np.int64)] + [(a.shape, a.dtype) for a in host]
        if self.counting:  # the loss's counted targets of the batch, last
            layout.append(((1,), np.dtype(model.dtype)))
        like = self.params[0].data if self.params else None
        if like is None:
            raise _NotCapturable("a model without parameters")
        self.staging = self.xp.staging_buffer(layout, like)
        self._capture(like, y)
        # the configuration the graph holds as constants: compared again when the generation moves
        self.optimizer, self.loss = model.optimizer, model.loss
        self.components = _components(model, kind)
        self.generation = _configurable.generation
        self.configuration = _configuration(self.components)

    def _host_arrays(self, xs, y) -> list[np.ndarray]:
        """The batch as the host arrays an eager step would upload, in the staging buffer's order (the inputs as
        they come: ``model._input_tensors`` converts them on the device as it converts them eagerly)."""
        model = self.model
        arrays = [np.ascontiguousarray(a) for a in xs]
        if self.kind != "predict":
            arrays.append(np.ascontiguousarray(model.loss.prepare(y, _host, model.dtype)))
            shape = (int(y.shape[0]), *resolved(model.output_shape, y.shape[1:]))
            arrays += [np.ascontiguousarray(m.stage(y, shape, model.dtype)) for m in model.metrics]
        return arrays

    # -- capture
    def _capture(self, like, y) -> None:
        model, xp, kind = self.model, self.xp, self.kind
        views = self.staging.views
        values, offsets, inputs = views[0], views[1], views[2:2 + len(model.inputs)]
        rest = views[2 + len(model.inputs):len(views) - self.counting]
        loss_count = views[-1] if self.counting else None
        opt, tally = model.optimizer, self.tally
        iterations = opt.iterations
        counts = dict(tally.counts) if tally is not None else {}
        sums = tally.sums if tally is not None else None
        layers = [layer for layer in model.layers if hasattr(getattr(layer, "rng", None), "take")]
        streams = [layer.rng for layer in layers]
        try:
            if self.training:
                for layer in layers:
                    layer.rng = _CapturedStream(layer.rng, offsets, self.takes)
                opt._device_values = values
            _random._refusal = ("a random draw outside the model's dropout layers (its offset would be fixed in the "
                                "graph)")
            with xp.graph_capture(like) as graph:
                if kind == "train_checked":  # what the step updates, kept so that a rejected step is put back
                    self.backups = [(b, xp.copy(b.array)) for b in self.bindings]
                xs = model._input_tensors(inputs) if not self.training else None
                if kind == "predict":
                    with no_grad():
                        self.output = model._forward(xs, training=False).data
                elif kind == "evaluate":
                    with no_grad():
                        outputs = model._forward(xs, training=False)
                        loss = model._with_penalties(model.loss.checked(outputs, rest[0]))
                    model._tally_batch(tally, self.prefix, loss.data, outputs.data, y, staged=rest[1:],
                                       loss_count=loss_count)
                else:  # the one training step (models.step), its batch read from the staging buffer
                    loss = train_step(model, inputs, y, False, tally, staged=(rest[0], rest[1:], loss_count))
                    if kind == "train_checked":
                        self.output = loss
                if tally is not None and tally.sums is not sums:  # the graph ends by writing the new sums back
                    xp.copy_into(sums, tally.sums)
                for b in self.bindings:
                    if b.get() is not b.array:
                        xp.copy_into(b.array, b.get())
        finally:
            _random._refusal = None
            opt._device_values = None
            for layer, stream in zip(layers, streams):
                layer.rng = stream
            opt.iterations = iterations
            for b in self.bindings:
                b.set(b.array)
            for param in self.params:
                param.grad = None
            if tally is not None:
                self.delta = {k: tally.counts[k] - counts[k] for k in counts if tally.counts[k] != counts[k]}
                tally.counts, tally.sums = counts, sums
        self.graph, self.sums = graph, sums
        self.captured_tally = tally  # its basis vectors are read by the graph: they live as long as it does
        self.streams = [(layer, layer.rng, layer.rng.seed) for layer in layers]

    # -- replay
    def current(self, tally) -> bool:
        """Whether the graph still fits the model; arrays rebound since the last launch are copied into the
        graph's (False, and nothing is changed, when the model's structure or arrays' shapes changed)."""
        model = self.model
        if model.xp is not self.xp or trainable_changes() != self.trainable_changes:
            return False
        for layer, stream, seed in self.streams:
            if layer.rng is not stream or stream.seed != seed:
                return False
        if model.optimizer is not self.optimizer or model.loss is not self.loss:
            return False
        if _configurable.generation != self.generation:  # something was set: compare what the graph holds
            if _components(model, self.kind) != self.components or \
                    _configuration(self.components) != self.configuration:
                return False
            self.generation = _configurable.generation
        if self._unchanged():
            moved = []
        else:
            params = model.parameters()
            if len(params) != len(self.params) or not all(map(operator.is_, params, self.params)):
                return False
            moved = [(b, b.get()) for b in self.bindings if b.get() is not b.array]
        if any(a.shape != b.array.shape or a.dtype != b.array.dtype for b, a in moved):
            return False
        for b, a in moved:
            self.xp.copy_into(b.array, a)
            b.set(b.array)
        if tally is not None and tally.sums is not self.sums:  # a new tally (epoch), or an eager step's sums
            self.xp.copy_into(self.sums, tally.sums)
            tally.sums = self.sums
        return True

    def _unchanged(self) -> bool:
        """The quick test of :meth:`current`: the layers hold the same parameters, and every array the graph reads
        is still bound where it was."""
        for layer, d, n in self.fast_layers:  # plain loops: this runs before every replay
            if layer._params is not d or len(d) != n:
                return False
        for d, name, p, a in self.fast_params:
            if d.get(name) is not p or p.data is not a:
                return False
        for layer, k, a in self.fast_states:
            if layer._state.get(k) is not a:
                return False
        slots = self.model.optimizer.slot_arrays
        for i, name, a in self.fast_slots:
            if slots.get(i, _NONE).get(name) is not a:
                return False
        return True

    def replay(self, xs, y, tally):
        """Launch the graph on this batch (``tally``: the epoch's); the step's output (None for train)."""
        self.tally = tally
        views = self.staging.host()
        if self.training:
            opt = self.model.optimizer
            iterations, streams = opt.iterations, [(s, _rng.get_state(s)) for s in self.takes] if self.takes else ()
            values = opt.step_values(opt._advance())
            views[0][:len(values)] = values
            offsets = views[1].view(np.uint64)
            for slot, stream in enumerate(self.takes):
                offsets[slot] = stream.take()
        try:
            self._fill(views, xs, y)
            self.staging.upload()
            self.graph.launch()
        except Exception as error:  # noqa: BLE001 - nothing ran: the step's host values go back, it runs eagerly
            if self.training:
                opt.iterations = iterations
                for stream, state in streams:
                    _rng.set_state(stream, state)
            raise _LaunchError(f"{type(error).__name__}: {error}") from error
        if self.tally is not None:
            for name, n in (self._batch_counts(y) if self.counting else self.delta).items():
                self.tally.counts[name] += n
        return self.output

    def _batch_counts(self, y) -> dict:
        """The tally counts of this batch: the captured step's, but this batch's count of targets for a loss or
        metric that counts them (``ignore_index``)."""
        model, counts = self.model, dict(self.delta)
        prefix = self.prefix if self.kind == "evaluate" else ""
        n = getattr(model.loss, "counted", lambda _: None)(y)
        if n is not None:
            counts[prefix + "loss"] = n
        shape = (int(y.shape[0]), *resolved(model.output_shape, y.shape[1:]))
        for metric in model.metrics:
            c = getattr(metric, "counted", lambda *_: None)(y, shape)
            if c is not None:
                counts[prefix + metric.name] = c
        return counts

    def _fill(self, views, xs, y) -> None:
        """The batch into the host views, as :meth:`_host_arrays` makes it (casts as ``astype`` casts)."""
        model, k = self.model, 2
        for a in xs:
            np.copyto(views[k], a, casting="unsafe")
            k += 1
        if self.kind != "predict":
            np.copyto(views[k], model.loss.prepare(y, _host, model.dtype), casting="unsafe")
            if model.metrics:
                shape = (int(y.shape[0]), *resolved(model.output_shape, y.shape[1:]))
                for view, metric in zip(views[k + 1:], model.metrics):
                    np.copyto(view, metric.stage(y, shape, model.dtype), casting="unsafe")
            if self.counting:
                n = getattr(model.loss, "counted", lambda _: None)(y)
                views[-1][0] = y.shape[0] if n is None else n

    def put_back(self, iterations: int) -> None:
        """Undo the last replay of a ``train_checked`` step (its loss was not finite, or a device check found a bad
        value): every array it updated gets its copy from before the step, the optimizer its step count."""
        for b, copy in self.backups:
            self.xp.copy_into(b.array, copy)
        self.model.optimizer.iterations = iterations

    def destroy(self) -> None:
        if self.graph is not None:
            self.graph.destroy()
            self.graph = None


def _components(model, kind: str) -> list:
    """The objects whose configuration a captured step of ``kind`` holds: layers, then loss and metrics (not for
    predict), then the optimizer (train)."""
    objects = list(model.layers)
    if kind != "predict":
        objects += [model.loss, *model.metrics]
    if kind in TRAIN_KINDS:
        objects.append(model.optimizer)
    return objects


def _configuration(objects) -> tuple:
    return tuple(_configurable.capture_key(o) for o in objects)


class GraphedSteps:
    """The captured steps of one compiled model, by kind and batch shape (``model._graphs``). ``mode``: "auto"
    (replay where the backend has graphs, silently eager elsewhere) or True (a warning where it cannot replay)."""

    def __init__(self, model, mode="auto"):
        self.model, self.mode = model, mode
        self.steps: dict = {}  # key -> eager steps seen (int), a _Step, or False (runs eagerly)
        self.failed: dict = {}  # kind -> why that kind runs eagerly (a capture or launch error)
        self.said: set = set()
        self.last = None  # the step replayed last (train_on_batch puts a rejected one back)
        self._why = self._why_of = None  # unavailable()'s answer, and the (backend, parallel, optimizer) it was for

    def unavailable(self) -> str | None:
        """Why this model's steps cannot be captured now, or None (asked again when the model's backend, its
        data-parallel hook or its optimizer changed; ``MAGMADNN_GRAPH`` is read then)."""
        model = self.model
        of = self._why_of
        if of is not None and of[0] is model.xp and of[1] is model._parallel and of[2] is model.optimizer:
            return self._why
        self._why, self._why_of = self._unavailable(), (model.xp, model._parallel, model.optimizer)
        return self._why

    def refresh(self) -> None:
        """Ask :meth:`unavailable` anew at its next call (``fit`` does at its start: ``MAGMADNN_GRAPH`` read)."""
        self._why_of = None

    def _unavailable(self) -> str | None:
        model = self.model
        if not callable(getattr(model.xp, "graph_capture", None)):
            return f"the {getattr(model.xp, 'name', 'host')} backend has no CUDA graphs"
        if not enabled():
            return "MAGMADNN_GRAPH=0"
        if model._parallel is not None:
            return "distributed training (its MPI calls cannot be captured)"
        inner = getattr(model.optimizer, "inner_optimizer", model.optimizer)  # LossScaleOptimizer: its inner's
        if not isinstance(inner, (_optimizers.SGD, _optimizers.AdaGrad, _optimizers.RMSProp, _optimizers.Adam)):
            return f"the optimizer {type(inner).__name__} does not read its step values on the device"
        return None

    def quiet(self, reason: str) -> bool:
        """Whether ``reason`` goes unsaid: under "auto", a backend without graphs or replay turned off."""
        return self.mode == "auto" and (reason.endswith("has no CUDA graphs") or reason == "MAGMADNN_GRAPH=0")

    def say(self, reason: str, kind: str = "") -> None:
        """One warning per compiled model and kind of step (``""``: the whole model): what runs eagerly, and why."""
        if kind not in self.said and not self.quiet(reason):
            self.said.add(kind)
            warnings.warn(f"graph={self.mode!r}: {reason}; running eagerly", RuntimeWarning, stacklevel=4)

    def _fail(self, kind: str, reason: str) -> None:
        """Every step of ``kind`` runs eagerly from now on (its graphs destroyed), after one warning."""
        self.failed[kind] = reason
        for key, step in list(self.steps.items()):
            if key[0] == kind:
                if hasattr(step, "destroy"):
                    step.destroy()
                self.steps[key] = False
        self.say(reason, kind)

    def run(self, kind: str, xs, y=None, tally=None, prefix: str = ""):
        """Replay the step of ``kind`` for this batch: True (train), the outputs' backend array (predict), True
        (evaluate) or the loss's backend array (train_checked); None when it runs eagerly instead (warm-up, or a
        model or kind that cannot be captured)."""
        key = (kind, prefix, tuple((a.shape, a.dtype.str) for a in xs), None if y is None else (y.shape, y.dtype.str),
               None if tally is None else tuple(tally.names))
        return self.drive(kind, key, _Step, lambda: _Step(self.model, kind, xs, y, tally, prefix),
                          self._capture_failed, (tally,), (xs, y, tally))

    def _capture_failed(self, kind: str, error: BaseException) -> str:
        where = f"in {w}: " if (w := culprit(error, self.model)) else ""
        return f"the {kind} step could not be captured ({where}{type(error).__name__}: {error})"

    def drive(self, kind: str, key, step_type: type, make, why, current: tuple, launch: tuple):
        """The replay state machine of built-in (:class:`_Step`) and custom steps (``custom_replay.CustomStep``): the
        step of ``key`` replayed if ``step.current(*current)`` (``step.replay(*launch)``, None as True), else ``WARMUP``
        eager steps, then ``make()`` captures one (up to ``MAX_GRAPHS``); a capture error (``why(kind, error)`` says it)
        or a launch error makes the kind run eagerly, said once. None: run this step eagerly."""
        reason = self.unavailable()
        if reason is not None:
            self.say(reason)
            return None
        if kind in self.failed:
            return None
        step = self.steps.get(key, 0)
        if step is False:
            return None
        if not (isinstance(step, step_type) and step.current(*current)):
            if isinstance(step, step_type):
                step.destroy()
                step = 0
            if step < WARMUP:
                self.steps[key] = step + 1
                return None
            if self.held() >= MAX_GRAPHS:
                self.steps[key] = False
                self.say(f"{MAX_GRAPHS} graphs (batch shapes) are held already, new batch shapes", "shapes")
                return None
            try:
                self.steps[key] = step = make()
            except Exception as error:  # noqa: BLE001 - any failure to capture means: run eagerly, said once
                self.steps[key] = False
                self._fail(kind, why(kind, error))  # (made steps launch below: this is a capture's error)
                return None
        try:
            out = step.replay(*launch)
        except _LaunchError as error:
            self._fail(kind, f"the {kind} step could not be launched ({error})")
            return None
        self.last = step
        return True if out is None else out

    def ready(self, kind: str, xs, y, tally):
        """The captured step of ``kind`` for this batch when it is current (see :meth:`_Step.current`), else None
        (nothing changed: :meth:`run` then warms up, captures or runs it eagerly). ``fit``'s replay loop
        (:mod:`.replayed_epoch`) feeds every batch of that shape to it until user code runs again."""
        if self.unavailable() is not None or kind in self.failed:
            return None
        key = (kind, "", tuple((a.shape, a.dtype.str) for a in xs), (y.shape, y.dtype.str), tuple(tally.names))
        step = self.steps.get(key)
        return step if isinstance(step, _Step) and step.current(tally) else None

    def held(self) -> int:
        """The captured steps held (built-in and custom ones): each holds its graph's memory."""
        return sum(hasattr(s, "destroy") for s in self.steps.values())

    def clear(self) -> None:
        for step in self.steps.values():
            if hasattr(step, "destroy"):
                step.destroy()
        self.steps.clear()
        self.failed.clear()
        self._why_of = None
