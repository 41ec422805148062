"""Graph replay of a subclassed model's own ``train_step`` / ``test_step`` (:mod:`.custom_steps`).

The user's step is captured as a whole, as :mod:`.replay` captures the built-in one: per kind of step ("custom
train", "custom test") and batch signature, the first ``WARMUP`` batches run eagerly, the next is captured and every
later batch of that signature is one upload and one graph launch. The step gets its batch as Tensors over the views
of a staging buffer (``x`` in its inputs' dtypes, ``y`` and ``sample_weight`` as the eager loop makes them);
``compute_loss`` of that ``y`` (with or without that ``sample_weight``) reads the loss's targets, prepared on the
host from each batch as an eager step prepares them, from the same buffer. The optimizer's step values and the
dropout offsets ride there too, so a replayed step equals an eager one bit for bit.

What the step leaves in device memory is kept: arrays it rebinds (weights, optimizer slots, BatchNorm statistics,
the state variables of the model's metrics: ``assign_add``) are copied back into the arrays the graph read, and the
logs it returns (Tensors, metric variables, metrics) are read on the host only where the loop needs them.

What cannot be captured raises :class:`NotCapturable` (the step then runs eagerly after one warning naming why): a
host read inside the step (``float(loss)``, ``.numpy()``, Python ``if`` on a Tensor value, a data-dependent shape),
data uploaded from the host inside it, ``compute_metrics`` for several outputs or targets other than the batch's, a
log returned as a host value (it would be fixed at capture), a second optimizer, or more than one update of the model's
optimizer. Python side effects of the step (a counter in ``self``) run once, at capture, as in Keras' compiled steps.
"""

from __future__ import annotations

import numpy as np

from .. import _configurable
from ..autograd import Tensor, trainable_changes
from ..backend import random as _random
from . import rng as _rng
from .replay import (
    OFFSETS,
    VALUES,
    _Binding,
    _CapturedStream,
    _dict_binding,
    _LaunchError,
    _NotCapturable,
    _param_binding,
)

__all__ = ["CustomStep", "NotCapturable", "active", "host_read_reason"]

NotCapturable = _NotCapturable

_active = None  # the CustomStep being captured now, else None


def active():
    """The custom step being captured now (``compute_loss`` reads its staged targets), or None."""
    return _active


def leaves(value) -> list:
    """The arrays of a batch part (an array, a list/tuple or a dict of arrays), in a fixed order."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [a for k in value for a in leaves(value[k])]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in leaves(v)]
    return [np.asarray(value)]


def _rebuild(template, items: list):
    """``template``'s structure with its arrays replaced by ``items`` (consumed in :func:`leaves`' order)."""
    if template is None:
        return None
    if isinstance(template, dict):
        return {k: _rebuild(template[k], items) for k in template}
    if isinstance(template, (list, tuple)):
        return [_rebuild(v, items) for v in template]
    return items.pop(0)


def signature(parts) -> tuple:
    """What a captured step is keyed by: each part's structure, shapes and dtypes."""
    def sig(value):
        if value is None:
            return None
        if isinstance(value, dict):
            return tuple((k, sig(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return tuple(sig(v) for v in value)
        a = np.asarray(value)
        return a.shape, a.dtype.str
    return tuple(sig(p) for p in parts)


def host_read_reason(error: BaseException, kind: str) -> str | None:
    """Why a capture failed, when the user's step read the device on the host or uploaded host data inside it:
    the operation and the line of the step that did, else None."""
    tb, where, read, upload = error.__traceback__, None, False, False
    while tb is not None:
        code = tb.tb_frame.f_code
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] not in ("magmadnn", "pymagma", "numpy", "cuda", "contextlib"):
            where = f"{code.co_filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{tb.tb_lineno} ({code.co_name})"
        read = read or code.co_name in ("to_numpy", "get", "__float__", "__bool__", "item", "numpy")
        upload = upload or code.co_name in ("asarray", "set")
        tb = tb.tb_next
    at = f" at {where}" if where else ""
    if read:
        return (f"the {kind} step reads a device value on the host{at} (float(), .numpy(), bool(), a Python `if` on "
                "a Tensor or a shape that depends on the data): keep values as Tensors and return them in the logs")
    if upload:
        return (f"the {kind} step copies host data to the device{at} (a constant made from NumPy inside the step): "
                "make it once outside the step")
    return None


def _metric_objects(model) -> list:
    """The metric objects a custom step may update: compile()'s, the model's ``metrics`` and metric attributes."""
    from .. import metrics as _metrics  # noqa: PLC0415 - metrics imports nothing of the models

    found, seen = [], set()
    candidates = [*getattr(model, "_compiled_metrics", []), *(getattr(model, "metrics", None) or []),
                  *vars(model).values()]
    for m in candidates:
        if isinstance(m, _metrics.Metric) and id(m) not in seen:
            seen.add(id(m))
            found.append(m)
    return found


def place_metrics(model) -> None:
    """The state variables of the model's own metrics (``add_variable``) on the model's backend, where its step
    updates them (eager and replayed alike)."""
    for m in _metric_objects(model):
        for v in getattr(m, "_variables", ()):
            v.place(model.xp, model.dtype)


def _optimizers(model) -> list:
    from .. import optimizers as _optimizers_module  # noqa: PLC0415

    return [o for o in vars(model).values() if isinstance(o, _optimizers_module.Optimizer) and o is not model.optimizer]


class CustomStep:
    """One captured custom step (see the module): its graph, staging buffer and what the host does around it."""

    def __init__(self, model, kind: str, parts, call):
        self.model, self.kind, self.xp, self.call = model, kind, model.xp, call
        self.params = model.parameters()
        if not self.params:
            raise _NotCapturable("a model without parameters")
        self.trainable_changes = trainable_changes()
        self.metrics = _metric_objects(model)
        self.bindings = []
        for layer in model.layers:
            self.bindings += [_param_binding(p) for p in layer._params.values()]
            self.bindings += [_dict_binding(lambda layer=layer: layer._state, k) for k in layer._state]
        opt = model.optimizer
        for index, slots in opt.slot_arrays.items():
            self.bindings += [_dict_binding(lambda i=index: opt.slot_arrays[i], name) for name in slots]
        tracker = model._tracker()  # the default steps' running loss (super().train_step)
        for name in ("total", "count"):
            self.bindings.append(_Binding(lambda n=name: getattr(tracker, n), lambda a, n=name: setattr(tracker, n, a)))
        self.compiled = list(model._compiled_metrics) if model._single else []
        self.zeros = {}  # a compiled metric's running hits -> zeros (what its graph array gets after a reset)
        for m in self.compiled:
            if getattr(m, "_variables", None) is None:
                self.zeros[m] = zero = self.xp.zeros(() if m.size == 1 else (m.size,), model.dtype)
                if m._hits is None:
                    m._hits = self.xp.copy(zero)
                self.bindings.append(_Binding(lambda m=m: m._hits, lambda a, m=m: setattr(m, "_hits", a)))
        self.updated = []  # the compiled metrics the step updates (compute_metrics): their counts advance per replay
        for m in self.metrics:
            for v in getattr(m, "_variables", ()):
                if v.xp is not self.xp:
                    raise _NotCapturable(f"the metric {m.name!r} keeps its state on the host")
                self.bindings.append(_Binding(lambda v=v: v.data, lambda a, v=v: setattr(v, "data", a)))
        self.template = parts
        host = self._host_arrays(parts)
        self.n_batch = sum(len(h) for h in host)
        self.derived = self._derived(parts)  # key -> host array of compute_loss's targets (None: no sample weight)
        layout = [((VALUES,), np.float64), ((OFFSETS,), np.int64)] + [(a.shape, a.dtype) for a in
                                                                     [a for h in host for a in h]]
        layout += [(a.shape, a.dtype) for a in self.derived.values()]
        self.staging = self.xp.staging_buffer(layout, self.params[0].data)
        self.used: set = set()
        self.takes, self.graph, self.logs = [], None, None
        self._capture(parts, host)
        self.optimizer, self.loss = model.optimizer, model.loss
        from .replay import _components, _configuration  # noqa: PLC0415

        self.components = _components(model, "train")
        self.generation = _configurable.generation
        self.configuration = _configuration(self.components)

    # -- the batch as the eager loop makes it
    def _host_arrays(self, parts) -> list[list[np.ndarray]]:
        """Per part, the host arrays the eager loop uploads: the inputs cast to their dtypes, targets and sample
        weights in the model's dtype unless integer or boolean."""
        model = self.model
        out = [[np.ascontiguousarray(a) for a in model._cast_inputs(model._input_arrays(parts[0], "fit"))]]
        for part in parts[1:]:
            out.append([np.ascontiguousarray(a if a.dtype.kind in "iub" else a.astype(model.dtype))
                        for a in leaves(part)])
        return out

    def _derived(self, parts) -> dict:
        """compute_loss's prepared targets of this batch: without the sample weights, and with them when the batch
        has some (those the step's ``compute_loss`` calls do not read are left out at each replay)."""
        model, out = self.model, {}
        if len(parts) < 2 or parts[1] is None or model.loss is None:
            return out
        for key in (None, "sample_weight") if len(parts) > 2 and parts[2] is not None else (None,):
            try:
                out[key] = np.ascontiguousarray(model._loss_targets(parts[1], parts[2] if key else None))
            except (ValueError, TypeError):  # compute_loss raises the same if the step calls it
                pass
        for i, m in enumerate(self.compiled):
            try:
                out[("metric", i)] = np.ascontiguousarray(self._metric_labels(m, parts[1]))
            except (ValueError, TypeError, NotImplementedError):
                pass
        return out

    def _metric_labels(self, metric, y) -> np.ndarray:
        """The labels ``metric`` stages for the host targets ``y`` (as ``Metric.hits`` stages them)."""
        y = np.asarray(y)
        return metric.stage(y, (int(y.shape[0]), *self._metric_labels_shape(y)), self.model.dtype)

    def update_metrics(self, y, y_pred) -> None:
        """``compute_metrics`` inside the capture: each compiled metric's hits of this batch, its labels read from
        the staging buffer, added to its running hits (its sample count advances at each launch)."""
        if not self.model._single or y is not self.staged_y or not isinstance(y_pred, Tensor):
            raise _NotCapturable("compute_metrics was given other targets than the batch's y, or several outputs")
        xp = self.xp
        for i, m in enumerate(self.compiled):
            if ("metric", i) not in self.derived_views or m not in self.zeros:
                raise _NotCapturable(f"the metric {m.name!r} cannot stage its labels for a captured step")
            self.used.add(("metric", i))
            m._hits = xp.add(m._hits, m.hits_of(xp.asarray(y_pred.data), self.derived_views[("metric", i)], xp))
            m._xp = xp
            self.updated.append(m)

    # -- capture
    def _capture(self, parts, host) -> None:
        global _active
        model, xp = self.model, self.xp
        views = self.staging.views
        values, offsets = views[0], views[1]
        k = 2
        batch = []
        for h in host:
            batch.append(views[k:k + len(h)])
            k += len(h)
        self.derived_views = dict(zip(self.derived, views[k:]))
        x = model._packed(model._input_tensors(batch[0]), model._input_keys)
        data = [x]
        for part, vs in zip(parts[1:], batch[1:]):
            tensors = []
            for h, v in zip(leaves(part), vs):
                t = Tensor(v, backend=xp)
                t._host = h
                tensors.append(t)
            data.append(_rebuild(part, tensors))
        self.staged_y = data[1] if len(data) > 1 else None
        self.staged_sw = data[2] if len(data) > 2 else None
        data = data[0] if len(data) == 1 else tuple(data)
        opt, others = model.optimizer, [(o, o.iterations) for o in _optimizers(model)]
        iterations = opt.iterations
        layers = [layer for layer in model.layers if hasattr(getattr(layer, "rng", None), "take")]
        streams = [layer.rng for layer in layers]
        try:
            for layer in layers:
                layer.rng = _CapturedStream(layer.rng, offsets, self.takes)
            opt._device_values = values
            _random._refusal = ("a random draw outside the model's dropout layers (its offset would be fixed in the "
                                "graph)")
            _active = self
            with xp.graph_capture(self.params[0].data) as graph:
                logs = self.call(data)
                self.logs = self._device_logs(logs)
                for b in self.bindings:
                    if b.get() is not b.array:
                        xp.copy_into(b.array, b.get())
            self.advances = opt.iterations - iterations
            if self.advances > 1:
                raise _NotCapturable(f"the optimizer stepped {self.advances} times in one step")
            moved = [type(o).__name__ for o, it in others if o.iterations != it]
            if moved:
                raise _NotCapturable(f"a second optimizer ({', '.join(moved)}): only model.optimizer's step values "
                                     "live on the device")
        finally:
            _active = None
            _random._refusal = None
            opt._device_values = None
            for layer, stream in zip(layers, streams):
                layer.rng = stream
            opt.iterations = iterations
            for o, it in others:
                o.iterations = it
            for b in self.bindings:
                b.set(b.array)
            for param in self.params:
                param.grad = None
        self.graph = graph
        self.streams = [(layer, layer.rng, layer.rng.seed) for layer in layers]

    def _device_logs(self, logs) -> dict:
        if not isinstance(logs, dict):
            return logs  # the loop names the error
        out = {}
        for name, value in logs.items():
            if isinstance(value, Tensor):
                out[name] = value.data
            elif hasattr(value, "result") or hasattr(value, "assign_add") or not isinstance(
                    value, (int, float, np.ndarray, np.generic)):
                out[name] = value  # a metric or a metric variable: its result is read when the logs are
            else:
                raise _NotCapturable(f"the {self.kind} step returned {name!r} as a host value "
                                     f"({type(value).__name__}), which would be fixed at capture: return Tensors or "
                                     "metric results")
        return out

    def targets(self, y, sample_weight):
        """compute_loss's staged targets for ``y`` (and ``sample_weight``) inside the capture."""
        if y is not self.staged_y or (sample_weight is not None and sample_weight is not self.staged_sw):
            raise _NotCapturable("compute_loss was given targets other than the batch's y (and sample_weight)")
        key = None if sample_weight is None else "sample_weight"
        if key not in self.derived_views:
            return None  # compute_loss raises as eagerly
        self.used.add(key)
        return self.derived_views[key]

    # -- replay
    def current(self) -> bool:
        """Whether the graph still fits the model (arrays rebound since the last launch copied into its own)."""
        model = self.model
        if model.xp is not self.xp or trainable_changes() != self.trainable_changes:
            return False
        if model.optimizer is not self.optimizer or model.loss is not self.loss:
            return False
        for layer, stream, seed in self.streams:
            if layer.rng is not stream or stream.seed != seed:
                return False
        if _configurable.generation != self.generation:
            from .replay import _components, _configuration  # noqa: PLC0415

            if _components(model, "train") != self.components or \
                    _configuration(self.components) != self.configuration:
                return False
            self.generation = _configurable.generation
        params = model.parameters()
        if len(params) != len(self.params) or any(a is not b for a, b in zip(params, self.params)):
            return False
        metrics = _metric_objects(model)
        if len(metrics) != len(self.metrics) or any(a is not b for a, b in zip(metrics, self.metrics)):
            return False
        for m, zero in self.zeros.items():
            if m._hits is None:  # reset since the last launch: the graph's running hits start again from zeros
                m._hits = zero
        moved = [(b, b.get()) for b in self.bindings if b.get() is not b.array]
        if any(a.shape != b.array.shape or a.dtype != b.array.dtype for b, a in moved):
            return False
        for b, a in moved:
            self.xp.copy_into(b.array, a)
            b.set(b.array)
        return True

    def replay(self, parts) -> dict:
        """Launch the graph on this batch; the logs (device arrays and metric objects)."""
        model = self.model
        views = self.staging.host()
        opt = model.optimizer
        iterations = opt.iterations
        states = [(s, _rng.get_state(s)) for s in self.takes]
        if self.advances:
            values = opt.step_values(opt._advance())
            views[0][:len(values)] = values
        offsets = views[1].view(np.uint64)
        for slot, stream in enumerate(self.takes):
            offsets[slot] = stream.take()
        try:
            k = 2
            for h in self._host_arrays(parts):
                for a in h:
                    np.copyto(views[k], a, casting="unsafe")
                    k += 1
            for key, at in zip(self.derived, range(k, k + len(self.derived))):
                if key not in self.used:
                    continue
                if isinstance(key, tuple):  # a compiled metric's labels
                    np.copyto(views[at], self._metric_labels(self.compiled[key[1]], parts[1]), casting="unsafe")
                else:
                    np.copyto(views[at], model._loss_targets(parts[1], parts[2] if key else None), casting="unsafe")
            self.staging.upload()
            self.graph.launch()
        except _LaunchError:
            raise
        except (ValueError, TypeError):  # the batch's targets refused as compute_loss refuses them: nothing ran
            opt.iterations = iterations
            for stream, state in states:
                _rng.set_state(stream, state)
            raise
        except Exception as error:  # noqa: BLE001 - nothing ran: the step's host values go back, it runs eagerly
            opt.iterations = iterations
            for stream, state in states:
                _rng.set_state(stream, state)
            raise _LaunchError(f"{type(error).__name__}: {error}") from error
        if self.updated:
            y = np.asarray(parts[1])
            shape = (int(y.shape[0]), *self._metric_labels_shape(y))
            for m in self.updated:
                counted = m.counted(y, shape)
                m.count += int(y.shape[0]) if counted is None else counted
                m._xp = self.xp
        return self.logs

    def _metric_labels_shape(self, y) -> tuple:
        from .outputs import resolved  # noqa: PLC0415

        return tuple(resolved(self.model.output_shape, y.shape[1:]))

    def destroy(self) -> None:
        if self.graph is not None:
            self.graph.destroy()
            self.graph = None


def compute_loss_targets(y, sample_weight):
    """Inside a capture: the staged targets ``compute_loss`` reads (None: prepare them as eagerly); outside: None."""
    step = _active
    return None if step is None else step.targets(y, sample_weight)


def replayed(graphs, kind: str, parts, call):
    """The logs of the custom step of ``kind`` replayed on this batch (``parts``: host ``(x[, y[, sample_weight]])``),
    or None: run it eagerly (warm-up, or a model or kind that cannot be captured: said once); the state machine is
    :meth:`~magmadnn.models.replay.GraphedSteps.drive`'s."""
    return graphs.drive(kind, (kind, signature(parts)), CustomStep,
                        lambda: CustomStep(graphs.model, kind, parts, call), _capture_failed, (), (parts,))


def _capture_failed(kind: str, error: BaseException) -> str:
    return host_read_reason(error, kind) or f"the {kind} step could not be captured ({type(error).__name__}: {error})"
