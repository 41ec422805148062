"""Device moves of ``Model``: ``model.to(device)`` carries weights, BatchNorm statistics, optimizer slots and dropout
streams to another backend (through the host, once); training goes on as if it had stayed."""

from __future__ import annotations

import numpy as np

from .. import backend as _backend
from . import rng as _rng

__all__ = ["Placement"]


def _moved_stream(stream, xp, layer_name: str):
    """A random stream of backend ``xp`` in the state of ``stream`` (the same draws follow on either backend)."""
    moved = xp.rng(0)
    if type(moved) is not type(stream):
        raise TypeError(f"Model.to: layer {layer_name!r} holds a {type(stream).__name__} random stream but the "
                        f"{_backend.device_label(xp)} backend uses {type(moved).__name__}; it cannot be moved")
    _rng.set_state(moved, _rng.get_state(stream))
    return moved


class Placement:
    """The device a model lives on, and moving it."""

    @property
    def device(self) -> str:
        """Where the model lives: "host" or "gpu:N"."""
        return _backend.device_label(self.xp)

    def to(self, device):
        """Move the model to ``device`` ("host", "gpu", "gpu:N", "auto"): weights, BatchNorm statistics, optimizer
        slots and dropout streams are copied there (through the host, once); returns the model."""
        xp = _backend.get(device)
        old = self.xp
        if xp is old:
            return self

        def move(array):
            return xp.asarray(np.asarray(old.to_numpy(array)))

        if self.built:
            for layer in self.layers:
                layer.move_to(xp, move)
                stream = getattr(layer, "rng", None)
                if stream is not None:
                    layer.rng = _moved_stream(stream, xp, layer.name)
        if self.optimizer is not None:
            self.optimizer.move_slots(move)
        self.xp = xp
        return self
