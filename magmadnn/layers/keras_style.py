"""Keras-style custom layers (subclasses defined outside magmadnn that implement ``build``/``call``): their
``build`` framed so that a call by hand builds through the framework, their ``call``'s output checked against the
batch and the shape they declared, and the shapes they declare checked once at build. :class:`.base.Layer` wraps a
subclass's methods when the class is made; magmadnn's own layers are never wrapped.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from .._checks import shape_str
from ..autograd import Tensor

__all__ = ["framed", "output_checked", "declared_shape", "normalise_shapes"]


def framed(build):
    """A Keras-style ``build``: called by the layer's own building (batch-included shapes) it runs as written;
    called by hand (``layer.build((None, 4))``, as in Keras) it builds the layer through the framework."""
    @functools.wraps(build)
    def framed(self, input_shape):
        if self._in_build:
            return build(self, input_shape)
        many = isinstance(input_shape, list) and all(isinstance(s, (tuple, list)) for s in input_shape)
        shapes = normalise_shapes([list(s)[1:] for s in input_shape] if many else tuple(input_shape)[1:])
        if not self.built:
            self._build(shapes)
        return None

    return framed


def output_checked(call):
    """A Keras-style layer's ``call``, its output checked against the batch and the shape the layer declared (by
    ``compute_output_shape`` or its first call): a wrong output is named here, not by the next layer or by predict
    (which would copy a batch-reduced row into every row). An error raised inside ``call`` gets a note naming the
    layer. Only user-defined layers pay for it (a few tuple compares a call); magmadnn's own are not wrapped."""
    @functools.wraps(call)
    def checked(self, inputs, *args, **kwargs):
        try:
            out = call(self, inputs, *args, **kwargs)
        except Exception as error:
            error.add_note(f"(raised in the call() of {type(self).__name__} layer {self.name!r})")
            raise
        declared = self.output_shape
        if declared is None or isinstance(declared, list):
            return out
        first = inputs[0] if isinstance(inputs, (list, tuple)) and inputs else inputs
        if not isinstance(out, Tensor):
            if isinstance(first, Tensor):
                raise TypeError(f"{type(self).__name__} layer {self.name!r}: call() must return a Tensor (computed "
                                f"with magmadnn.functional or Tensor operators), got {type(out).__name__}")
            return out
        shape = out.shape
        rows = first.shape[0] if isinstance(first, Tensor) and first.ndim else None
        if rows is not None and (not shape or shape[0] != rows):
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: call() returned shape {shape_str(shape)} "
                             f"for a batch of {rows}: an output needs one row per sample (reducing over axis 0, the "
                             "batch, mixes samples; reduce over the other axes, e.g. axis=-1)")
        if tuple(shape[1:]) != declared:
            source = getattr(self, "_shape_source", "compute_output_shape")
            raise ValueError(f"{type(self).__name__} layer {self.name!r}: call() returned per-sample shape "
                             f"{shape_str(shape[1:])}, but {source} declared {shape_str(declared)} (batch excluded); "
                             "make them agree")
        return out

    checked._output_checked = True
    return checked


def declared_shape(layer, out) -> tuple[int, ...]:
    """A Keras-style layer's per-sample output shape from its batch-included ``out``: integers >= 0 (a None axis,
    a float, or a missing batch axis named with the layer)."""
    entries = list(out[1:])
    bad = [s for s in entries if s is None or isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Integral)
           or s < 0]
    if bad:
        layer.built = False
        raise ValueError(f"{type(layer).__name__} layer {layer.name!r}: compute_output_shape returned {tuple(out)}; "
                         "after the batch axis (first) every size must be an integer >= 0, got "
                         f"{', '.join(repr(s) for s in bad)}")
    return tuple(int(s) for s in entries)


def normalise_shapes(shape):
    if isinstance(shape, list):
        return [normalise_shapes(one) for one in shape]
    return None if shape is None else tuple(None if s is None else int(s) for s in shape)
