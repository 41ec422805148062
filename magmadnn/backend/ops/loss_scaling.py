"""Dynamic loss scaling.

Keras' LossScaleOptimizer decided where the gradients live: the finite check, the skip and the scale are arrays of
the backend, so that nothing is read back per step and a step captured as a graph replays the decision."""

from __future__ import annotations

from ._spec import op


@op
def finite_flag(arrays):
    """A 0-d array in the arrays' dtype: 1 when every element of every array of ``arrays`` (a non-empty list) is
    finite, else 0. Computed where the arrays live: nothing is read back."""


@op
def revert_update(a, saved, keep):
    """In place: ``a`` is left as it is when the 0-d ``keep`` is 1, else becomes ``saved`` (an update undone on the
    backend: a true select, so a NaN in the discarded operand never leaks); one shape and dtype."""


@op
def loss_scale_update(scale, counter, finite, growth_steps):
    """In place, Keras' dynamic loss scale (0-d ``scale``, ``counter`` and the 0-d 1/0 flag ``finite``, one dtype):
    when ``finite`` is 1, ``counter += 1`` and, when that reaches ``growth_steps``, ``counter = 0`` and ``scale *=
    2``; when it is 0, ``counter = 0`` and ``scale *= 0.5`` (no lower bound, as Keras)."""
