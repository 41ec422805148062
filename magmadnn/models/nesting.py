"""A functional model used as a layer of another (Keras' nested models): its layers called again on the outer
model's symbolic tensors, so they are shared and freezing the nested model freezes them in the outer one too."""

from __future__ import annotations

from ..layers.base import Input, ShapeMismatchError, SymbolicTensor, as_symbolic

__all__ = ["Nesting"]


class Nesting:
    def _inline(self, x, items):
        """The model used as a layer of another functional model (Keras' nested models): its layers called again
        on the given symbolic tensors, so they are shared (freezing this model freezes them there too); returns the
        outputs in the model's structure. The outer model lists these layers, not the model."""
        if not self.built:
            raise ValueError(f"model {self.name!r} is not built: give it an Input before using it as a layer")
        if isinstance(x, dict) and isinstance(self._input_keys, tuple):
            missing = [k for k in self._input_keys if k not in x]
            if missing:
                raise ValueError(f"model {self.name!r} used as a layer takes the inputs {list(self._input_keys)}; "
                                 f"the dict has no {missing}")
            items = [x[k] for k in self._input_keys]
        if len(items) != len(self.inputs):
            raise ValueError(f"model {self.name!r} used as a layer takes {len(self.inputs)} inputs, got "
                             f"{len(items)}")
        mapped = {id(node): as_symbolic(item) for node, item in zip(self.inputs, items)}
        for node, item in zip(self.inputs, items):
            given = as_symbolic(item)
            if not isinstance(given, SymbolicTensor) or given.shape is None or len(given.shape) != len(node.shape) \
                    or any(a is not None and b is not None and a != b for a, b in zip(given.shape, node.shape)):
                raise ShapeMismatchError(f"model {self.name!r} used as a layer: input {node.layer.name!r} expects "
                                         f"per-sample shape {node.shape}, got {getattr(given, 'shape', given)}")
        calls: dict = {}
        for node in self.nodes:
            if isinstance(node.layer, Input):
                continue
            args = [mapped[id(parent)] for parent in node.parents]
            arg = args if node.many else args[0]
            if node.index is None:
                mapped[id(node)] = node.layer(arg)
                continue
            if id(node.call) not in calls:
                calls[id(node.call)] = node.layer(arg)
            mapped[id(node)] = calls[id(node.call)][node.index]
        outs = [mapped[id(o)] for o in self._outputs]
        return outs[0] if self._single else self._packed(outs, self._output_keys)
