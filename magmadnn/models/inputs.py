"""The data checks of ``Model``: input arrays and targets are checked (shape, real dtype, finite values, what the
loss accepts) once per call on the host, before any batch runs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._checks import finite_array, found_finite, remember_finite, shape_str
from ..layers.base import ShapeMismatchError
from ..layers.conv import layout_hint
from .batches import is_batch_iterable, unpack, weighted
from .outputs import resolved
from .weighting import WeightedTargets

__all__ = ["InputChecks", "real_array"]


def _matches(shape, expected) -> bool:
    """Whether an array's shape is ``expected`` (None: any size)."""
    return len(shape) == len(expected) and all(e is None or s == e for s, e in zip(shape, expected))


def real_array(x, what: str) -> np.ndarray:
    array = np.asarray(x)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_) \
            or np.iscomplexobj(array):
        raise TypeError(f"{what} must be an array of real numbers (float or int), got dtype {array.dtype}")
    return array


class InputChecks:
    """Input and target arrays checked against the model's inputs and loss."""

    def _input_arrays(self, x, who: str) -> list[np.ndarray]:
        if not self.built and self._subclassed:  # a subclassed model builds on its first data
            self._build_subclassed(x)
        if isinstance(x, Mapping):
            x = self._named_inputs(x, who)
        several = isinstance(x, (list, tuple)) and (len(self.inputs) > 1 or all(hasattr(a, "shape") for a in x))
        arrays = list(x) if several else [x]
        arrays = [real_array(a, f"{who}: model input") for a in arrays]
        if not self.built:
            self._build_from_data(arrays)
        if len(arrays) != len(self.inputs):
            names = [node.layer.name for node in self.inputs]
            raise ValueError(f"{who}: model {self.name!r} has {len(names)} inputs {names}, got {len(arrays)} arrays")
        for node, array in zip(self.inputs, arrays):
            if not node.batched:  # given whole to every batch
                if not _matches(array.shape, node.shape):
                    raise ShapeMismatchError(f"{who}: input {node.layer.name!r} of model {self.name!r} has no batch "
                                             f"axis and expects an array of shape {shape_str(node.shape)}, got "
                                             f"{shape_str(array.shape)}")
                continue
            if array.ndim != len(node.shape) + 1 or not _matches(array.shape[1:], node.shape):
                got = tuple(array.shape[1:])
                nhwc = len(node.shape) == 3 and got == (*node.shape[1:], node.shape[0])  # (H, W, C) for (C, H, W)
                raise ShapeMismatchError(
                    f"{who}: input {node.layer.name!r} of model {self.name!r} expects batches of shape "
                    f"(N, {', '.join(map(str, node.shape))}) (per-sample {shape_str(node.shape)}), got an array of "
                    f"shape {shape_str(array.shape)}" + (layout_hint(got) if nhwc else ""))
        counts = [a.shape[0] for node, a in zip(self.inputs, arrays) if node.batched]
        if len(set(counts)) > 1:
            raise ValueError(f"{who}: the input arrays have different sample counts {counts}")
        self._check_integer_inputs(arrays, who)
        self._check_key_masks(arrays, who)
        return arrays

    def _sample_count(self, arrays) -> int:
        """The number of samples of checked input arrays (those with a batch axis)."""
        for node, array in zip(self.inputs, arrays):
            if node.batched:
                return array.shape[0]
        return 1

    def _named_inputs(self, x: Mapping, who: str) -> list:
        """``{input_name: array}`` (Keras' dict of inputs, onnxruntime's feed) as the arrays in input order; a
        missing or unknown name is a ValueError listing the model's input names."""
        names = list(self._input_keys) if isinstance(getattr(self, "_input_keys", None), tuple) else \
            [node.layer.name for node in self.inputs]
        unknown = [key for key in x if key not in names]
        missing = [name for name in names if name not in x]
        if unknown or missing:
            parts = ([f"unknown name(s) {unknown}"] if unknown else []) + ([f"no array for {missing}"] if missing
                                                                             else [])
            raise ValueError(f"{who}: model {self.name!r} takes the inputs {names}; the dict of inputs has "
                           f"{' and '.join(parts)}")
        return [np.asarray(x[name]) for name in names]

    def _check_integer_inputs(self, arrays, who: str) -> None:
        """Group N: an integer Input takes integer arrays, and every layer reading an input directly that checks
        values (Embedding: ids inside its table) sees the whole host array once, before any batch runs."""
        for node, array in zip(self.inputs, arrays):
            dtype = node.layer.dtype
            if dtype is not None and dtype.kind in "iu" and array.dtype.kind not in "iub":
                raise TypeError(f"{who}: input {node.layer.name!r} of model {self.name!r} is {dtype} (Input(..., "
                                f"dtype={dtype.name!r})), got an array of dtype {array.dtype}")
            for consumer in self.nodes:
                check = getattr(consumer.layer, "check_input_values", None)
                if check is not None and any(parent is node for parent in consumer.parents):
                    if dtype is None or dtype.kind not in "iu":
                        raise TypeError(f"{who}: {type(consumer.layer).__name__} layer {consumer.layer.name!r} reads "
                                        f"integer ids from input {node.layer.name!r}, which is {dtype}; make it "
                                        "Input(shape, dtype='int64')")
                    check(array, who)

    def _check_key_masks(self, arrays, who: str) -> None:
        """Attention key masks read directly from an input (a layer's last parent of per-sample shape (key_time,),
        MultiHeadAttention's ``check_key_mask``) are checked on the whole host array once: the device never reads
        them back."""
        for consumer in self.nodes:
            check = getattr(consumer.layer, "check_key_mask", None)
            if check is None or len(consumer.parents) < 2 or len(consumer.parents[-1].shape) != 1:
                continue
            for node, array in zip(self.inputs, arrays):
                if consumer.parents[-1] is node:
                    check(array, who)

    def _build_from_data(self, arrays) -> None:
        raise RuntimeError(f"model {self.name!r} is not built")

    def _targets(self, y, n: int, who: str) -> np.ndarray:
        if not self._single:
            return self._output_targets(y, n, who)
        if y is None:
            raise ValueError(f"{who}: targets y are required")
        weighted = y if isinstance(y, WeightedTargets) else None  # per-sample weights ride on the targets
        y = real_array(y, f"{who}: targets")
        if y.ndim == 0 or y.shape[0] != n:
            raise ValueError(f"{who}: x has {n} samples but y has shape {y.shape}")
        finite_array(y, "the targets y", who)
        self.loss.validate(y, resolved(self.output_shape, y.shape[1:]))
        return y if weighted is None else weighted

    def _output_targets(self, y, n: int, who: str):
        """Targets of a model of several outputs: a list or a dict by output name (:mod:`.outputs`)."""
        from .outputs import targets_of

        if y is None:
            raise ValueError(f"{who}: targets y are required")
        names = self.output_names

        def check(array, k):
            weighted = array if isinstance(array, WeightedTargets) else None
            array = real_array(array, f"{who}: targets of output {names[k]!r}")
            if array.ndim == 0 or array.shape[0] != n:
                raise ValueError(f"{who}: x has {n} samples but the targets of output {names[k]!r} have shape "
                                 f"{array.shape}")
            finite_array(array, f"the targets of output {names[k]!r}", who)
            self.loss.validate_output(k, array, resolved(self._outputs[k].shape, array.shape[1:]))
            return array if weighted is None else weighted

        return targets_of(self, y, n, who, check)

    def _training_inputs(self, x, who: str, deferred: list | None = None) -> list[np.ndarray]:
        """Input arrays for fit/evaluate/train_on_batch: at least one sample, finite values (checked once). With a
        list ``deferred`` (fit's array batches), an input array found finite by an earlier such call is not read
        again: ``(its index, what it is)`` joins the list and the batches check each batch of it; the others are
        checked and remembered."""
        arrays = self._input_arrays(x, who)
        if arrays[0].shape[0] == 0:
            raise ValueError(f"{who}: x holds no samples (shape {shape_str(arrays[0].shape)}); there is nothing to "
                             f"{'evaluate' if who == 'evaluate' else 'train on'}")
        for i, (node, array) in enumerate(zip(self.inputs, arrays)):
            what = f"the inputs x (input {node.layer.name!r})"
            if deferred is None:
                finite_array(array, what, who)
            elif found_finite(array):
                deferred.append((i, what))
            else:
                finite_array(array, what, who)
                remember_finite(array)
        return arrays

    def _fit_inputs(self, x) -> tuple[list[np.ndarray], list]:
        """fit's input arrays in their inputs' dtypes, and ``(index, what)`` of those whose values its array batches
        check batch by batch (see :meth:`_training_inputs`): on the host only (a device's replayed epoch gathers
        its batches itself) and never for an array the cast copied (its original is checked whole)."""
        deferred = [] if self.xp.name == "host" else None
        arrays = self._training_inputs(x, "fit", deferred)
        xs = self._cast_inputs(arrays)
        for i, what in deferred or ():
            if xs[i] is not arrays[i]:
                finite_array(arrays[i], what, "fit")
        return xs, [(i, what) for i, what in deferred or () if xs[i] is arrays[i]]

    def _inference_batches(self, x, y, batch_size, who, checked: bool = False):
        if checked:  # arrays that fit checked already
            for start in range(0, x[0].shape[0], batch_size):
                yield [a[start:start + batch_size] for a in x], y[start:start + batch_size]
            return
        if is_batch_iterable(x):
            for item in x:
                xb, yb, sw = unpack(item, who)
                xs = self._training_inputs(xb, who)
                yield xs, weighted(self, self._targets(yb, xs[0].shape[0], who), sw, who)
            return
        xs = self._training_inputs(x, who)
        y = self._targets(y, xs[0].shape[0], who)
        for start in range(0, xs[0].shape[0], batch_size):
            yield [a[start:start + batch_size] for a in xs], y[start:start + batch_size]
