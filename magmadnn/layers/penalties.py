"""A layer's loss terms and weight constraints (Keras'): ``layer.losses``, ``activity_regularizer``, and the
regularizers and constraints given to ``add_weight``.

``layer.losses`` lists, as Keras 3 does, the activity penalties of the layer's calls since the model's forward pass
began (``activity_regularizer(output) / batch size``), then one penalty per trainable weight that has a regularizer
(none while the layer is frozen). A model adds the sum of its layers' losses to the training loss (and to the loss
``evaluate`` reports), as Keras' ``compute_loss``. A constraint is kept on its weight (``param.constraint``) and
applied by the optimizer after each update of that weight, as Keras does.
"""

from __future__ import annotations

from .. import constraints as _constraints
from .. import functional as F
from .. import regularizers as _regularizers
from .._checks import shape_str

__all__ = ["PenaltiesMixin"]


class PenaltiesMixin:
    """The loss terms of a :class:`~magmadnn.layers.base.Layer` (see the module)."""

    _activity = None  # the activity regularizer (Keras' layer.activity_regularizer)
    _activity_losses: list = []  # shared empty default; a layer with an activity regularizer gets its own list

    @property
    def activity_regularizer(self):
        return self._activity

    @activity_regularizer.setter
    def activity_regularizer(self, value) -> None:
        self._activity = _regularizers.get(value)
        self._activity_losses = []

    def _record_activity(self, out) -> None:
        """Add the activity penalty of ``out`` (one Tensor, or each of a list) over its batch size."""
        for tensor in out if isinstance(out, (list, tuple)) else [out]:
            penalty = self._activity(tensor)
            if len(tensor.shape) > 0 and tensor.shape[0]:
                penalty = F.scale(penalty, 1.0 / int(tensor.shape[0]), 0.0)
            self._activity_losses.append(penalty)

    def _penalize(self, name: str, regularizer, constraint) -> None:
        """Keep the regularizer and constraint of the weight ``name`` (``add_weight(regularizer=, constraint=)``)."""
        regularizer, constraint = _regularizers.get(regularizer), _constraints.get(constraint)
        regs = self.__dict__.setdefault("_weight_regularizers", {})
        regs.pop(name, None)
        if regularizer is not None:
            regs[name] = regularizer
        param = self._params[name]
        param.constraint = constraint

    #: the weights whose regularizer and constraint the constructor takes (``"kernel"``: ``kernel_regularizer=`` and
    #: ``kernel_constraint=``), as the layer's Keras twin names them
    _weight_options: tuple = ()

    def _take_weight_options(self, arguments: dict) -> dict:
        """Set ``<w>_regularizer`` / ``<w>_constraint`` for each of :attr:`_weight_options` from the constructor's
        keyword ``arguments`` (None when absent); returns the arguments left."""
        arguments = dict(arguments)
        for weight in self._weight_options:
            setattr(self, f"{weight}_regularizer", _regularizers.get(arguments.pop(f"{weight}_regularizer", None)))
            setattr(self, f"{weight}_constraint", _constraints.get(arguments.pop(f"{weight}_constraint", None)))
        return arguments

    def _weight_kwargs(self, weight: str) -> dict:
        """``add_weight``'s ``regularizer=`` and ``constraint=`` for the option ``weight`` (``"kernel"``)."""
        return {"regularizer": getattr(self, f"{weight}_regularizer"),
                "constraint": getattr(self, f"{weight}_constraint")}

    @property
    def losses(self) -> list:
        """The scalar loss terms of this layer (see the module), as Keras' ``layer.losses``."""
        out = list(self._activity_losses)
        if self._trainable:
            for name, regularizer in self.__dict__.get("_weight_regularizers", {}).items():
                param = self._params.get(name)
                if param is not None and param.trainable:
                    out.append(_scalar(regularizer(param), f"layer {self.name!r}: the regularizer of {name!r}"))
        return out

    def _penalty_config(self) -> dict:
        """The regularizers and constraints given (Keras' config entries; those left at None are not written)."""
        config = {}
        for weight in self._weight_options:
            for kind, serialize in (("regularizer", _regularizers.serialize), ("constraint", _constraints.serialize)):
                value = getattr(self, f"{weight}_{kind}", None)
                if value is not None:
                    config[f"{weight}_{kind}"] = serialize(value)
        if self._activity is not None:
            config["activity_regularizer"] = _regularizers.serialize(self._activity)
        return config


def _scalar(value, who: str):
    if not hasattr(value, "shape") or tuple(value.shape) not in ((), (1,)):
        raise ValueError(f"{who} must return a scalar Tensor, got "
                         f"{shape_str(value.shape) if hasattr(value, 'shape') else type(value).__name__}")
    return value
