"""The weight methods of ``Model``: parameters, position-keyed arrays, get/set weights, all-or-nothing assignment,
and Keras' ``trainable`` / ``weights`` / ``trainable_weights`` / ``non_trainable_weights``."""

from __future__ import annotations

import itertools
import operator

import numpy as np

from .._checks import shape_str
from ..layers.weights import WeightsMixin
from ..saving import ArchitectureMismatchError, ModelFileError

__all__ = ["Weights"]

_layer_parameters = WeightsMixin.parameters  # a layer's own parameters(): its ``_params``, in order
_PARAMETERS, _PARAMS = operator.attrgetter("parameters"), operator.attrgetter("_params")
_VALUES = operator.methodcaller("values")


class Weights:
    """Weights and state arrays of every layer, keyed ``layers.<i>.<name>`` by layer position."""

    def parameters(self) -> list:
        """Every Parameter in layer order, frozen ones included (their positions key the optimizer's slots)."""
        layers = self._all_layers
        if all(map(operator.is_, map(_PARAMETERS, map(type, layers)), itertools.repeat(_layer_parameters))):
            # (each step, every layer's own: their ``_params`` chained without a Python frame)
            return list(itertools.chain.from_iterable(map(_VALUES, map(_PARAMS, layers))))
        out: list = []
        for layer in layers:  # (a loop without a frame per layer where parameters() is a layer's)
            out.extend(layer._params.values() if layer.__class__.parameters is _layer_parameters else
                       layer.parameters())
        return out

    # -- Keras' trainable flag and weight lists
    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value) -> None:
        """Set ``trainable`` on the model and on every layer (as Keras); takes effect at the next training step."""
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"model {self.name!r}: trainable must be True or False, got {value!r}")
        self._trainable = bool(value)
        for layer in self.layers:  # a Sequential not built yet: the layers given to it
            layer.trainable = self._trainable

    @property
    def weights(self) -> list:
        """Every weight of every layer (Parameters and BatchNorm statistics as ``StateWeight``), layer by layer."""
        return [w for layer in self._all_layers for w in layer.weights]

    @property
    def trainable_weights(self) -> list:
        return [w for layer in self._all_layers for w in layer.trainable_weights] if self._trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if not self._trainable:
            return self.weights
        return [w for layer in self._all_layers for w in layer.non_trainable_weights]

    def named_arrays(self) -> dict:
        """Every weight and state array (backend arrays) by a position-based key ``layers.<i>.<name>``, in the
        order of :attr:`weights`."""
        keys = self._layer_keys or range(len(self._all_layers))  # a subclassed model's: attribute paths
        return {f"layers.{key}.{name}": weight.data for key, layer in zip(keys, self._all_layers)
                for name, weight in layer.named_weights()}

    def get_weights(self) -> list[np.ndarray]:
        """Copies (NumPy) of every weight and state array, in the order of :attr:`weights` (Keras')."""
        return [np.array(self.xp.to_numpy(a)) for a in self.named_arrays().values()]

    def set_weights(self, arrays) -> None:
        keys = list(self.named_arrays())
        arrays = list(arrays)
        if len(arrays) != len(keys):
            raise ValueError(f"model {self.name!r}: set_weights got {len(arrays)} arrays, expected {len(keys)}")
        self._assign(dict(zip(keys, arrays)), "set_weights")

    def _assign(self, arrays: dict, origin: str) -> None:
        """Copy NumPy ``arrays`` (key -> array, keys as in ``named_arrays``) into the weights: every array is checked
        (name, shape, real dtype, finite values) and converted before the first is assigned (all or nothing)."""
        self._commit(self._prepare_assign(arrays, origin))

    def _prepare_assign(self, arrays: dict, origin: str) -> list:
        """Checked, converted backend arrays for every weight and state array: ``[(layer, name, value)]``."""
        plan = []
        for index, layer in zip(self._layer_keys or range(len(self._all_layers)), self._all_layers):
            params, state = layer._params, layer._state
            for name, _ in layer.named_weights():
                key = f"layers.{index}.{name}"
                where = f"{name!r} of layer {layer.name!r} ({type(layer).__name__})"
                if key not in arrays:
                    raise ArchitectureMismatchError(f"{origin}: no array for {where}")
                array = np.asarray(arrays[key])
                current = params[name].data if name in params else state[name]
                if tuple(array.shape) != tuple(current.shape):
                    raise ArchitectureMismatchError(
                        f"{origin}: {where} has shape {shape_str(array.shape)}, the model needs "
                        f"{shape_str(current.shape)}")
                if array.dtype.kind not in "iuf":
                    raise ModelFileError(f"{origin}: {where} has dtype {array.dtype}; weights must be "
                                                     "real numbers")
                if array.dtype.kind == "f" and not np.isfinite(array).all():
                    raise ModelFileError(f"{origin}: {where} holds non-finite values (NaN or inf)")
                plan.append((layer, name, self.xp.asarray(np.array(array, dtype=layer.dtype))))
        return plan

    def _commit(self, plan: list) -> None:
        self._touched = True
        for layer, name, value in plan:
            if name in layer._params:
                layer._params[name].data = value
            else:
                layer._state[name] = value

    def count_params(self) -> int:
        """Every weight, BatchNorm statistics included (Keras' ``count_params``)."""
        self._require_built("count_params")
        return sum(layer.count_params() for layer in self._all_layers)
