"""Bidirectional: an LSTM or GRU run forward and, as a copy of it, backward over the sequence, outputs merged."""

from __future__ import annotations

from .. import functional as F
from .base import Layer, derive_seed, layer_class, register
from .recurrent import _Recurrent

__all__ = ["Bidirectional"]

_MERGES = ("concat", "sum", "mul", "ave", None)


@register
class Bidirectional(Layer):
    """``Bidirectional(LSTM(u, ...), merge_mode="concat")`` as Keras: the layer (``forward_layer``) and a copy of
    its configuration with ``go_backwards`` flipped (``backward_layer``, named ``backward_<name>``) both read the
    sequence; with ``return_sequences`` the backward outputs are put back in time order. ``merge_mode``: "concat"
    (last axis 2u), "sum", "mul", "ave" or None (the two outputs as a list). With ``return_state`` the outputs are
    the merged output(s), then the forward states, then the backward states. ``backward_layer``: an LSTM/GRU of
    the same kind and outputs with the opposite ``go_backwards`` instead of the copy. Weights: the forward layer's,
    then the backward layer's, named ``forward_<weight>`` and ``backward_<weight>``. Masks: masked steps are skipped
    both ways and masked outputs are zero with ``return_sequences`` (Keras)."""

    _casts_weights = False  # the wrapped layers cast theirs (see _run_sublayer)

    supports_masking = uses_mask = True

    def __init__(self, layer, merge_mode="concat", backward_layer=None, **kwargs):
        super().__init__(**kwargs)
        owner = f"Bidirectional {self.name!r}"
        layer, backward_layer = (_from_config(item) for item in (layer, backward_layer))
        if not isinstance(layer, _Recurrent):
            raise TypeError(f"{owner}: wraps an LSTM, GRU or SimpleRNN layer, got {layer!r}")
        if merge_mode not in _MERGES:
            raise ValueError(f"{owner}: merge_mode must be one of {_MERGES}, got {merge_mode!r}")
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = layer.return_sequences, layer.return_state
        if backward_layer is None:
            config = {**layer.get_config(), "name": f"backward_{layer.name}", "go_backwards": not layer.go_backwards}
            config.pop("seed", None)
            backward_layer = type(layer).from_config(config)
            self._given_backward = False
        else:
            same = (type(backward_layer) is type(layer) and backward_layer.units == layer.units
                    and backward_layer.return_sequences == layer.return_sequences
                    and backward_layer.return_state == layer.return_state
                    and backward_layer.go_backwards != layer.go_backwards)
            if not same:
                raise ValueError(f"{owner}: backward_layer must be a {type(layer).__name__} with the forward layer's "
                                 "units, return_sequences and return_state and the opposite go_backwards, got "
                                 f"{backward_layer!r}")
            self._given_backward = True
        for sub in (layer, backward_layer):
            sub.zero_output_for_mask = layer.return_sequences  # Keras: a masked step's output is zero both ways
        self.forward_layer, self.backward_layer = layer, backward_layer

    def _sublayers(self):
        return (("forward", self.forward_layer), ("backward", self.backward_layer))

    def check_input_shape(self, input_shape):
        self.forward_layer.check_input_shape(input_shape)

    def compute_output_shape(self, input_shape):
        layer = self.forward_layer
        shapes = layer.compute_output_shape(input_shape)
        out, states = (shapes[0], shapes[1:]) if layer.return_state else (shapes, [])
        if self.merge_mode == "concat":
            outputs = [(*out[:-1], 2 * out[-1])]
        else:
            outputs = [out] if self.merge_mode is not None else [out, out]
        if not states and len(outputs) == 1:
            return outputs[0]
        return outputs + states + states

    def create_weights(self, input_shape):
        for tag, (prefix, layer) in enumerate(self._sublayers(), start=1):
            layer.xp, layer.dtype, layer._build_seed = self.xp, self.dtype, derive_seed(self._build_seed, tag)
            layer._params.clear()
            layer.built = False
            layer._source = self._source
            layer.build(input_shape)
            for name, param in layer._params.items():
                self._params[f"{prefix}_{name}"] = param

    def move_to(self, backend, move) -> None:
        super().move_to(backend, move)
        for _, layer in self._sublayers():
            layer.xp = backend  # their Parameters are this layer's, moved above

    def _masks(self, mask):
        sequence = mask if self.return_sequences else None
        outputs = [sequence] if self.merge_mode is not None else [sequence, sequence]
        count = self.forward_layer.states * 2 if self.return_state else 0
        return outputs + [None] * count

    def output_masked(self, masked):
        flags = [m is not None for m in self._masks(True if masked else None)]
        return flags if len(flags) > 1 else flags[0]

    def compute_mask(self, inputs, mask):
        masks = self._masks(mask)
        return masks if len(masks) > 1 else masks[0]

    def call(self, x, training=False, mask=None):
        forward = self._run_sublayer(self.forward_layer, x, training, mask)
        backward = self._run_sublayer(self.backward_layer, x, training, mask)
        states = []
        if self.return_state:
            (forward, *forward_states), (backward, *backward_states) = forward, backward
            states = forward_states + backward_states
        if self.return_sequences:
            backward = F.reverse(backward, 1)
        if self.merge_mode is None:
            return [forward, backward, *states]
        if self.merge_mode == "concat":
            merged = F.concatenate([forward, backward], axis=-1)
        elif self.merge_mode == "sum":
            merged = F.add(forward, backward)
        elif self.merge_mode == "mul":
            merged = F.multiply(forward, backward)
        else:
            merged = F.multiply(F.add(forward, backward), 0.5)
        return [merged, *states] if states else merged

    def _run_sublayer(self, layer, x, training, mask):
        """A wrapped layer's call under its own policy, else this layer's (its casts, as any layer's)."""
        if layer._user_policy is None:
            layer._policy, layer._compute = self._policy, self._compute
        return layer._run(x, training, mask=mask)

    def get_config(self):
        config = {"layer": _config(self.forward_layer), "merge_mode": self.merge_mode, **super().get_config()}
        if self._given_backward:
            config["backward_layer"] = _config(self.backward_layer)
        return config


def _config(layer) -> dict:
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


def _from_config(item):
    """A layer, or the layer of a ``{"class_name", "config"}`` entry (a saved model's)."""
    if isinstance(item, dict):
        return layer_class(item["class_name"]).from_config(dict(item["config"]))
    return item
