"""Keras' ``model.losses``: the layers' loss terms (weight and activity regularization, :mod:`magmadnn.regularizers`),
added to the compiled loss in training and evaluation as Keras 3's ``compute_loss`` adds them, with backend ops (a
replayed step computes them too)."""

from __future__ import annotations

from .. import _configurable
from .. import functional as F

__all__ = ["Penalties"]


class Penalties:
    """The model side of the layers' ``losses`` (see the module)."""

    @property
    def losses(self) -> list:
        """Every layer's loss terms (Keras' ``model.losses``): the activity penalties of the last forward pass, then
        the weight penalties (scalar Tensors)."""
        return [term for layer in self.layers for term in layer.losses]

    def _penalty_layers(self) -> list:
        """The layers with a regularizer, found again only when a configuration attribute was set since. A model
        none of whose layers has one keeps the generation it found that at as ``_penalty_free_at``: a step checks
        ``model.__dict__.get("_penalty_free_at") == _configurable.generation`` and calls nothing else."""
        cached = self.__dict__.get("_penalty_cache")
        if cached is None or cached[0] != _configurable.generation:
            layers = [layer for layer in self.layers
                      if layer._activity is not None or layer.__dict__.get("_weight_regularizers")]
            cached = self.__dict__["_penalty_cache"] = (_configurable.generation, layers)
            self.__dict__["_penalty_free_at"] = None if layers else _configurable.generation
        return cached[1]

    def _start_forward(self) -> None:
        """A forward pass begins: the activity penalties of the previous one are dropped (Keras clears them)."""
        if self.__dict__.get("_penalty_free_at") == _configurable.generation:
            return
        for layer in self._penalty_layers():
            if layer._activity_losses:
                layer._activity_losses = []

    def _with_penalties(self, loss):
        """``loss`` plus the layers' loss terms (each cast to the loss's dtype), or ``loss`` itself without any."""
        if self.__dict__.get("_penalty_free_at") == _configurable.generation:
            return loss
        layers = self._penalty_layers()
        if not layers:
            return loss
        for layer in layers:
            for term in layer.losses:
                if term.dtype != loss.dtype:
                    term = F.cast(term, loss.dtype)
                loss = loss + F.reshape(term, tuple(loss.shape))
        return loss
