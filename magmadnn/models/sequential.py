"""Sequential: a plain stack of layers, built into the functional graph of :class:`.model.Model`."""

from __future__ import annotations

from ..layers.base import Input, Layer
from .model import Model

__all__ = ["Sequential"]


class Sequential(Model):
    """A plain stack of layers. Starting with an ``Input`` builds it at once (shape errors show immediately);
    otherwise it builds on the first data it sees."""

    is_sequential = True

    def __init__(self, layers=None, name: str | None = None, seed: int | None = None, dtype=None,
                 device=None, backend=None):
        self._init_common(name, seed, dtype, device, backend)
        self._stack: list[Layer] = []
        for layer in layers or []:
            self._append(layer)
        if self._stack and isinstance(self._stack[0], Input):
            self._build_chain()

    @property
    def layers(self) -> list[Layer]:
        """The layers without the Input (as Keras' ``Sequential.layers``; before magmadnn listed it first, so an old
        ``layers[i + 1]`` is now ``layers[i]``: ``get_layer(name)`` finds a layer by name)."""
        layers = self._all_layers if self.built else self._stack
        return list(layers[1:] if layers and isinstance(layers[0], Input) else layers)

    def _append(self, layer) -> None:
        if isinstance(layer, Model):  # a nested model: its layers, shared (Keras lists the model itself)
            inner = layer.layers if layer.is_sequential else None
            if inner is None or not layer.built:
                raise TypeError(f"Sequential {self.name!r}: model {layer.name!r} can be a layer of a Sequential "
                                "model when it is a built Sequential; call a functional model on a tensor "
                                "instead: outputs = model(inputs)")
            if not self._stack:
                self._stack.append(Input(layer.input_shapes[0], dtype=layer.inputs[0].layer.dtype))
            for item in inner:
                self._append(item)
            return
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential {self.name!r}: expected Layer instances, got {type(layer).__name__}")
        if isinstance(layer, Input) and self._stack:
            raise ValueError(f"Sequential {self.name!r}: an Input layer can only come first")
        if not self._stack and getattr(layer, "_keras_input_shape", None) is not None:
            self._stack.append(Input(layer._keras_input_shape))  # Keras' Dense(..., input_shape=(4,)) first
        self._stack.append(layer)

    def add(self, layer: Layer) -> None:
        """Append a layer (built at once when the model already knows its input shape)."""
        self._append(layer)
        if isinstance(self._stack[0], Input):
            self._build_chain()

    def _build_chain(self) -> None:
        first = self._stack[0]
        node = first.output
        for layer in self._stack[1:]:
            node = layer(node)
            if isinstance(node, list):
                raise ValueError(f"Sequential {self.name!r}: layer {layer.name!r} has {len(node)} outputs; every "
                                 "layer of a Sequential model must have one (use the functional Model)")
        self._set_graph([first], node)

    def _build_from_data(self, arrays) -> None:
        if not self._stack:
            raise RuntimeError(f"Sequential {self.name!r} has no layers")
        if len(arrays) != 1:
            raise ValueError(f"Sequential {self.name!r} takes one input array, got {len(arrays)}")
        ids = arrays[0].dtype.kind in "iu" and hasattr(self._stack[0], "check_input_values")  # integer ids: int64
        self.build(arrays[0].shape[1:], "int64" if ids else None)

    def build(self, input_shape, dtype=None) -> None:
        """Build for a per-sample ``input_shape`` (batch excluded) by putting an Input (of ``dtype``: None for the
        model's, "int64" for token ids) first. Keras' form with the batch axis, ``build((None, 4))``, is taken
        too (a leading None is dropped)."""
        if input_shape and tuple(input_shape)[0] is None:
            input_shape = tuple(input_shape)[1:]
        if not self.built:
            self._stack.insert(0, Input(tuple(input_shape), dtype=dtype))
            self._build_chain()

    def get_config(self) -> dict:
        return {"class_name": "Sequential", "name": self.name, "seed": self.seed, "dtype": self.dtype_policy.name,
                "trainable": self._trainable,
                "layers": [{"class_name": type(layer).__name__, "config": layer.get_config()}
                           for layer in (self._all_layers if self.built else self._stack)]}


Model._sequential_class = Sequential  # Model.from_config rebuilds either kind
