"""Masks (Keras'): a mask (N, T) of 1.0/0.0 rides on a Tensor as ``_mask``.

A layer with ``supports_masking`` passes the mask on (``compute_mask``) and, with ``uses_mask``, receives it as
``call(x, training, mask=)``; a layer that ``makes_mask`` (``Embedding(mask_zero=True)``) makes its own. Any other
layer refuses a masked input (Keras warns and drops the mask). Symbolic calls follow the same rules through
``output_masked`` (``SymbolicTensor.masked``).
"""

from __future__ import annotations

from .. import autograd as _autograd
from . import plans as _plans

__all__ = ["MaskingMixin"]

_MISSING = object()


class MaskingMixin:
    """How a :class:`~magmadnn.layers.base.Layer` calls itself with masks riding on its inputs."""

    supports_masking = False
    uses_mask = False
    makes_mask = False  # makes a mask of its own (Embedding(mask_zero=True))

    def call_masked(self, inputs, training: bool = False):
        """``call`` with the masks riding on the Tensors: the input's mask given to a layer that ``uses_mask``,
        the output's (``compute_mask``) attached to it; a masked input to a layer without masking is an error."""
        many = isinstance(inputs, list)
        key = None
        if not many and not self.makes_mask and getattr(inputs, "_mask", None) is None:
            if not self._plannable:
                return self._run(inputs, training)  # the common case, at the cost of one attribute look-up
            data = inputs.data
            key = (data.shape, data.dtype, training)  # the call's plan for this input signature (.plans)
        elif many and not self.makes_mask and type(self).compute_mask is MaskingMixin.compute_mask:
            for t in inputs:  # several inputs, none masked (Add, Concatenate): no mask in, none made
                if getattr(t, "_mask", None) is not None:
                    break
            else:
                if not (self._plannable and len(inputs) == 2):  # (two inputs planned: residual adds)
                    return self._run(inputs, training)
                a, b = inputs
                key = (a.data.shape, a.data.dtype, b.data.shape, b.data.dtype, training)
                if self._plans_at == _autograd._trainable_changes:
                    plan = self._plans.get(key, _MISSING)
                    if plan is not None and plan is not _MISSING:
                        return plan(a, b)  # (a two-input plan is ``run(a, b)``)
                    if plan is None:
                        return self._run(inputs, training)
                return _plans.first_call(self, inputs, training, key)
        if key is not None:
            if self._plans_at == _autograd._trainable_changes:
                plan = self._plans.get(key, _MISSING)
                if plan is not None and plan is not _MISSING:
                    return plan(self, inputs)
                if plan is None:  # (a call that is never planned)
                    return self._run(inputs, training)
            return _plans.first_call(self, inputs, training, key)
        masks = [getattr(t, "_mask", None) for t in (inputs if many else [inputs])]
        mask = masks if many else masks[0]
        if all(m is None for m in masks):
            mask = None
        elif not self.supports_masking:
            raise self._mask_error(self._source)
        if self.uses_mask:
            out = self._run(inputs, training, mask=mask)
        else:
            out = self._run(inputs, training)
        out_mask = self.compute_mask(inputs, mask)
        if out_mask is not None:
            for tensor, m in zip(out, out_mask) if isinstance(out, list) else [(out, out_mask)]:
                if m is not None:
                    self._check_mask(tensor, m)
                    tensor._mask = m
        return out

    def _check_mask(self, tensor, mask) -> None:
        """A mask made here (``compute_mask``, ``Lambda(mask=...)``) is (batch, time) of the output it rides on: a
        wrong one is named here, not by the layer that reads it."""
        shape, out = tuple(getattr(mask, "shape", ())), tuple(tensor.shape)
        if len(out) < 2 or shape != out[:2]:
            want = f"(batch, time) = {out[:2]}" if len(out) >= 2 else "none: the output has no time axis"
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: the mask it computes has shape {shape} for "
                             f"an output of shape {out}; a mask must be {want}")

    def compute_mask(self, inputs, mask):
        """The output's mask (a list for several outputs) from the input's: passed on by default."""
        return mask if self.supports_masking and not isinstance(mask, list) else None

    def output_masked(self, masked):
        """Whether the output carries a mask (a list for several outputs), given whether the input does."""
        return self.supports_masking and masked is True

    def _mask_error(self, source) -> ValueError:
        return ValueError(
            f"{type(self).__name__} layer {self.name!r} does not support masking, but its input from {source} "
            "carries the mask of an Embedding(mask_zero=True); layers that use or pass on a mask: LSTM, GRU, "
            "Bidirectional, GlobalAveragePooling1D, MultiHeadAttention, Dense, Dropout, Activation, "
            "LayerNormalization, Lambda(mask=...). Keras would drop the mask here with a warning; to do that, "
            "remove mask_zero=True")
