"""The inference methods of ``Model``: ``evaluate`` (loss and metrics, one host read) and ``predict``."""

from __future__ import annotations

import numpy as np

from .._checks import integer
from ..autograd import no_grad
from .batches import is_batch_iterable
from .inputs import real_array
from .training import Tally
from .weighting import attach

__all__ = ["Inference"]


class Inference:
    """Evaluation and prediction in inference mode (no gradients, BatchNorm running statistics, no dropout)."""

    def _evaluate_into(self, tally: Tally, prefix: str, batches) -> None:
        graphs = self._graphs
        for xb, yb in batches:
            if graphs is not None and graphs.run("evaluate", xb, yb, tally, prefix) is not None:
                continue
            with no_grad():
                outputs = self._forward(self._input_tensors(xb), training=False)
                loss = self._loss_of(outputs, yb)
            self._tally_batch(tally, prefix, loss.data, outputs.data, yb)

    def evaluate(self, x, y=None, batch_size: int = 32, verbose: int = 0, sample_weight=None) -> dict:
        """Mean loss and metrics over ``(x, y)`` (or a batch iterable) in inference mode (one host read);
        ``sample_weight`` (N,) weighs each sample's loss as in ``fit`` (metrics are not weighted)."""
        self._require_compiled("evaluate")
        batch_size = integer(batch_size, "batch_size", "evaluate", minimum=1)
        if sample_weight is not None:
            if is_batch_iterable(x) or y is None:
                raise ValueError("evaluate: sample_weight needs arrays x, y (not a batch iterable)")
            y = attach(self, real_array(y, "evaluate: targets"), sample_weight, None, "evaluate")
        tally = Tally(self.xp, self._tally_names(False), self.dtype)
        self._evaluate_into(tally, "", self._inference_batches(x, y, batch_size, "evaluate"))
        if not tally.counts["loss"]:
            raise ValueError("evaluate: the batch iterable gave no samples; there is nothing to evaluate")
        results = self._results(tally.read(), tally.counts)
        if verbose:
            print(" - ".join(f"{k}: {v:.4f}" for k, v in results.items()))
        return results

    def predict(self, x, batch_size: int = 32) -> np.ndarray:
        """Model outputs (NumPy, model dtype) for every sample of ``x``, in inference mode."""
        batch_size = integer(batch_size, "batch_size", "predict", minimum=1)
        xs = self._input_arrays(x, "predict")
        n = xs[0].shape[0]
        result = np.empty((n, *self.output_shape), dtype=self.dtype)
        graphs = self._graphs
        for start in range(0, n, batch_size):
            batch = [a[start:start + batch_size] for a in xs]
            out = None if graphs is None else graphs.run("predict", batch)
            if out is None:
                with no_grad():
                    out = self._forward(self._input_tensors(batch), training=False).data
            result[start:start + batch_size] = self.xp.to_numpy(out)
        return result
