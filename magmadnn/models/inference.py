"""The inference methods of ``Model``: ``evaluate`` (loss and metrics, one host read) and ``predict``, each calling
Keras' callback hooks (``on_test_*``, ``on_predict_*``; see :mod:`magmadnn.callbacks` for the batch logs)."""

from __future__ import annotations

import itertools

import numpy as np

from .._checks import batch_size_or_default, integer, verbosity
from .._renamed import ResultList, ResultScalar
from ..autograd import no_grad
from ..backend import faults as _faults
from ..callbacks import CallbackList, callback_list
from .batches import is_batch_iterable
from .inputs import real_array
from .step import Tally, running_logs
from .weighting import attach

__all__ = ["Inference", "keras_results"]


def keras_results(results: dict, return_dict: bool):
    """Keras 3's return rule for ``evaluate`` / ``train_on_batch`` / ``test_on_batch``: the dict (keys sorted,
    as Keras orders them) with ``return_dict=True``, else the list ``[loss, *metrics in compile order]``, or the
    scalar loss alone."""
    if not isinstance(return_dict, (bool, np.bool_)):
        raise TypeError(f"return_dict must be True or False, got {return_dict!r}")
    if return_dict:
        return dict(sorted(results.items()))  # Keras' order: by name
    values = ResultList(results.values())  # a string index names return_dict=True (evaluate gave a dict once)
    if len(values) == 1:
        return ResultScalar(values[0]) if isinstance(values[0], float) else values[0]
    return values


class Inference:
    """Evaluation and prediction in inference mode (no gradients, BatchNorm running statistics, no dropout)."""

    def _evaluate_into(self, tally: Tally, prefix: str, batches, cbs=None) -> int:
        """Add the loss and metrics of ``batches`` to the ``prefix`` entries of ``tally``, calling the
        ``on_test_batch_*`` hooks of ``cbs`` (a CallbackList, or None); returns the number of samples seen."""
        graphs, seen = self._graphs, 0
        logs = cbs is not None and cbs.wants_batch_logs("test")
        self.stop_evaluating = False
        for index, (xb, yb) in enumerate(batches):
            seen += int(yb.shape[0])
            if cbs is not None:
                cbs.on_test_batch_begin(index, {})
            if graphs is None or graphs.run("evaluate", xb, yb, tally, prefix) is None:
                with no_grad():
                    outputs = self._forward(self._input_tensors(xb), training=False)
                    loss = self._loss_of(outputs, yb)
                self._tally_batch(tally, prefix, loss.data, outputs.data, yb)
            if cbs is not None:
                cbs.on_test_batch_end(index, running_logs(self, tally, prefix) if logs else {})
                if self.stop_evaluating:  # a callback ends the evaluation early (Keras' stop_evaluating)
                    break
        return seen

    def evaluate(self, x, y=None, batch_size: int | None = None, verbose=0, sample_weight=None, steps=None,
                 callbacks=None, return_dict: bool = False):
        """Mean loss and metrics over ``(x, y)`` (or a batch iterable) in inference mode (one host read);
        ``sample_weight`` (N,) weighs each sample's loss as in ``fit`` (metrics are not weighted).

        Returns as Keras 3 does: the loss (a float) when compiled without metrics, else the list
        ``[loss, *metrics]`` in the order given to ``compile``; ``return_dict=True`` gives the dict
        ``{"loss": ..., metric name: ...}``. ``batch_size=None`` means 32; ``steps`` evaluates only the first
        ``steps`` batches; ``verbose`` ("auto", 0, 1, 2; default 0 here) prints the results on one line.

        ``callbacks``: their ``on_test_begin``, ``on_test_batch_begin`` / ``on_test_batch_end`` and
        ``on_test_end`` (with the results) hooks are called, as in Keras; one setting ``model.stop_evaluating =
        True`` ends the evaluation after that batch (the results cover the batches run)."""
        self._require_compiled("evaluate")
        if self._overrides("test_step"):  # Keras' custom step (:mod:`.custom_steps`)
            return keras_results(self._evaluate_custom(x, y, sample_weight, batch_size), return_dict)
        batch_size = batch_size_or_default(batch_size, "evaluate")
        verbose = verbosity(verbose, "evaluate")
        keras_results({}, return_dict)  # checks return_dict before any work
        if steps is not None:
            steps = integer(steps, "steps", "evaluate", minimum=1)
        if sample_weight is not None:
            if is_batch_iterable(x) or y is None:
                raise ValueError("evaluate: sample_weight needs arrays x, y (not a batch iterable)")
            if not self._single:  # several outputs: the targets checked first, then a weight array per output
                y = self._targets(y, self._sample_count(self._input_arrays(x, "evaluate")), "evaluate")
            y = attach(self, y if not self._single else real_array(y, "evaluate: targets"), sample_weight, None,
                       "evaluate")
        total = _steps(x, batch_size)
        cbs = CallbackList(callback_list(callbacks, "evaluate"), self, verbose=verbose, epochs=1,
                           steps=total if steps is None or total is None else min(steps, total))
        tally = Tally(self.xp, self._tally_names(False), self.dtype)
        cbs.on_test_begin({})
        batches = self._inference_batches(x, y, batch_size, "evaluate")
        if steps is not None:
            batches = itertools.islice(batches, steps)
        seen = self._evaluate_into(tally, "", batches, cbs)
        if not seen:
            raise ValueError("evaluate: the batch iterable gave no samples; there is nothing to evaluate")
        results = self._results(tally.read(), tally.counts, who="evaluate")
        cbs.on_test_end(dict(results))
        if verbose:
            print(" - ".join(f"{k}: {v:.4f}" for k, v in results.items()))
        return keras_results(results, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict: bool = False):
        """Loss and metrics of one batch in inference mode, returned as :meth:`evaluate` returns them."""
        xs = self._input_arrays(x, "test_on_batch")
        return self.evaluate(x, y, batch_size=max(1, xs[0].shape[0]), sample_weight=sample_weight,
                             return_dict=return_dict)

    def predict_on_batch(self, x) -> np.ndarray:
        """Model outputs of one batch (NumPy), in inference mode."""
        xs = self._input_arrays(x, "predict_on_batch")
        return self.predict(x, batch_size=max(1, xs[0].shape[0]))

    def predict(self, x, batch_size: int | None = None, verbose="auto", steps=None, callbacks=None) -> np.ndarray:
        """Model outputs (NumPy, model dtype) for every sample of ``x`` (the first ``steps`` batches with
        ``steps``), in inference mode. ``batch_size=None`` means 32; ``verbose`` is accepted as Keras' ("auto", 0,
        1, 2) and prints nothing here.

        ``callbacks``: their ``on_predict_*`` hooks are called, as in Keras; ``on_predict_batch_end`` gets
        ``{"outputs": the batch's outputs}`` (a NumPy view of the result). A callback setting
        ``model.stop_predicting = True`` ends it after that batch (the outputs so far are returned). The last
        batch's copy brings what device checks found: an embedding id outside its table, a key mask value other
        than 0 and 1."""
        if self._overrides("predict_step"):  # Keras' custom step (:mod:`.custom_steps`)
            return self._predict_custom(x, batch_size)
        batch_size = batch_size_or_default(batch_size, "predict")
        verbosity(verbose, "predict")
        callbacks = callback_list(callbacks, "predict")
        xs = self._input_arrays(x, "predict")
        if not self._plain_predict:  # several outputs, axes known only at run time, a fixed batch size, ...
            return self._predict_general(xs, batch_size, steps, callbacks)
        if steps is not None:
            xs = [a[:integer(steps, "steps", "predict", minimum=1) * batch_size] for a in xs]
        n = xs[0].shape[0]
        cbs = CallbackList(callbacks, self, verbose=0, epochs=1, steps=-(-n // batch_size))
        result = np.empty((n, *self.output_shape), dtype=self.dtype)
        graphs = self._graphs
        self.stop_predicting = False
        cbs.on_predict_begin({})
        done = n
        for index, start in enumerate(range(0, n, batch_size)):
            cbs.on_predict_batch_begin(index, {})
            batch = [a[start:start + batch_size] for a in xs]
            out = None if graphs is None else graphs.run("predict", batch)
            if out is None:
                with no_grad():
                    out = self._forward(self._input_tensors(batch), training=False).data
            last = start + batch_size >= n  # its copy brings what device checks found (ids, key masks)
            result[start:start + batch_size] = _faults.read(self.xp, out) if last else self.xp.to_numpy(out)
            cbs.on_predict_batch_end(index, {"outputs": result[start:start + batch_size]})
            if self.stop_predicting:  # a callback ends the prediction early (Keras' stop_predicting)
                done = min(start + batch_size, n)
                break
        cbs.on_predict_end({})
        return result if done == n else result[:done].copy()


    def _predict_general(self, xs, batch_size: int, steps, callbacks):
        """``predict`` of any graph: outputs in the model's structure (list or dict), each batch's own sizes for
        axes known at run time, inputs without a batch axis given whole, each output in its own dtype; a model with
        a fixed batch size runs batches of that size (the last one padded with zeros, its padding dropped); a model
        whose outputs have no batch axis runs once on the whole input."""
        n = self._sample_count(xs)
        if not self._splits_batches:
            batch_size = max(n, 1)
        elif self._batch_size is not None:
            batch_size = self._batch_size
        if steps is not None:
            n = min(n, integer(steps, "steps", "predict", minimum=1) * batch_size)
        cbs = CallbackList(callbacks, self, verbose=0, epochs=1, steps=-(-n // batch_size))
        self.stop_predicting = False
        cbs.on_predict_begin({})
        parts = [[] for _ in self._outputs]
        starts = range(0, n, batch_size) if self._splits_batches and n else [0]
        for index, start in enumerate(starts):
            cbs.on_predict_batch_begin(index, {})
            batch = [a[start:start + batch_size] if node.batched else a for node, a in zip(self.inputs, xs)]
            real = max(min(batch_size, n - start), 0)
            if self._batch_size is not None and self._splits_batches and 0 < real < batch_size:
                batch = [np.concatenate([a, np.zeros((batch_size - real, *a.shape[1:]), a.dtype)]) if node.batched
                         else a for node, a in zip(self.inputs, batch)]
            with no_grad():
                out = self._forward(self._input_tensors(batch), training=False)
            outs = [out] if self._single else out
            last = start + batch_size >= n
            for k, (node, value) in enumerate(zip(self._outputs, outs)):
                data = getattr(value, "data", value)
                host = np.asarray(_faults.read(self.xp, data) if last and hasattr(value, "data") else
                                  (self.xp.to_numpy(data) if hasattr(value, "data") else data))
                parts[k].append(host[:real] if node.batched and self._splits_batches else host)
            cbs.on_predict_batch_end(index, {"outputs": self._packed([p[-1] for p in parts], self._output_keys)
                                             if not self._single else parts[0][-1]})
            if self.stop_predicting:
                break
        cbs.on_predict_end({})
        results = [p[0] if len(p) == 1 else np.concatenate(p) for p in parts]
        return results[0] if self._single else self._packed(results, self._output_keys)


def _steps(x, batch_size: int):
    """Batches per pass over ``x`` (arrays, or a batch iterable with a length), else None."""
    first = x[0] if isinstance(x, (list, tuple)) and x and hasattr(x[0], "shape") else x
    if hasattr(first, "shape") and getattr(first, "ndim", 0):
        return -(-first.shape[0] // batch_size)
    try:
        return len(x)
    except TypeError:
        return None
