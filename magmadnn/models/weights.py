"""The weight methods of ``Model``: parameters, position-keyed arrays, get/set weights, all-or-nothing assignment."""

from __future__ import annotations

import numpy as np

from .._checks import shape_str
from ..saving import ArchitectureMismatchError, ModelFileError

__all__ = ["Weights"]


class Weights:
    """Weights and state arrays of every layer, keyed ``layers.<i>.<name>`` by layer position."""

    def parameters(self) -> list:
        return [p for layer in self.layers for p in layer.parameters()]

    def named_arrays(self) -> dict:
        """Every weight and state array (backend arrays) by a position-based key ``layers.<i>.<name>``."""
        out = {}
        for index, layer in enumerate(self.layers):
            for name, param in layer.weights.items():
                out[f"layers.{index}.{name}"] = param.data
            for name, array in layer.state.items():
                out[f"layers.{index}.{name}"] = array
        return out

    def get_weights(self) -> list[np.ndarray]:
        """Copies (NumPy) of every weight and state array, in layer order."""
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
        for index, layer in enumerate(self.layers):
            params, state = layer.weights, layer._state
            for name in [*params, *state]:
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

    @staticmethod
    def _commit(plan: list) -> None:
        for layer, name, value in plan:
            if name in layer._params:
                layer._params[name].data = value
            else:
                layer._state[name] = value

    def count_params(self) -> int:
        return sum(layer.count_params() for layer in self.layers)
