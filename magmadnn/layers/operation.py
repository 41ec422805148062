"""Operation: a node of a functional graph that is a differentiable function of :mod:`magmadnn.functional`.

Keras 3 lets a functional model's nodes be Layers or Operations; here an :class:`Operation` is the generic node
the ONNX import makes, one per ONNX node (:mod:`magmadnn.onnx`), and that anyone may make for a function with
attributes, weights, constant inputs and several outputs::

    y = Operation(lambda x, w: F.matmul(x, w), [("input", 0), ("weight", "w")], weights={"w": w0})([x])

``fn(*arguments, **attributes)`` gets its arguments in the order of ``arguments``, each one of:

* ``("input", i)``: the i-th tensor the node is called on;
* ``("weight", key)``: the trainable Parameter made from ``weights[key]`` (a float array; fit trains it);
* ``("constant", key)``: ``constants[key]`` on the model's device, not trained (a buffer: a mean to subtract);
* ``("host", key)``: ``host[key]`` as the NumPy array it is (a shape, axes: what decides shapes stays on the host);
* ``("none", None)``: an optional argument left out (None).

``fn`` returns a Tensor (or a host NumPy array, for a shape), or a list of them for ``outputs`` > 1. It computes
through :mod:`magmadnn.functional` (autograd Functions on the op set), so it runs and trains on every backend.
``output_shapes`` (per output; None where unknown) are what ``summary`` shows; ``output_batched`` says per output
whether its leading axis is the batch axis (then its shape is per sample, batch excluded) or not (the whole shape).
"""

from __future__ import annotations

import inspect

import numpy as np

from ..autograd import Parameter, Tensor
from .base import Layer, SymbolicTensor, _is_symbolic, as_symbolic, register

__all__ = ["Operation"]

_KINDS = ("input", "weight", "constant", "host", "none")
_HALVES = ("float16", "bfloat16")  # mixed_precision.HALF_TYPES: inputs the general path casts


@register
class Operation(Layer):
    """A graph node computing ``fn`` (see the module): weights, constants, host values, several outputs."""

    _casts_weights = False

    def __init__(self, fn, arguments, *, outputs: int = 1, attributes: dict | None = None,
                 weights: dict | None = None, constants: dict | None = None, host: dict | None = None,
                 output_shapes=None, output_batched=None, op_type: str | None = None, name: str | None = None,
                 dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if not callable(fn):
            raise TypeError(f"Operation {self.name!r}: fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.op_type = op_type or getattr(fn, "__name__", "operation")
        arguments = [tuple(a) for a in arguments]
        for kind, key in arguments:
            if kind not in _KINDS:
                raise ValueError(f"Operation {self.name!r}: argument kind {kind!r} is not one of {_KINDS}")
            table = {"weight": weights, "constant": constants, "host": host}.get(kind)
            if kind in ("weight", "constant", "host") and (table is None or key not in table):
                raise ValueError(f"Operation {self.name!r}: argument ({kind!r}, {key!r}) names no entry of {kind}s")
        self.arguments = arguments
        self.outputs = int(outputs)
        self.attributes = dict(attributes or {})
        self._initial = {k: np.array(v) for k, v in (weights or {}).items()}  # copies: the caller's stay theirs
        for key, value in self._initial.items():
            if value.dtype.kind != "f":
                raise TypeError(f"Operation {self.name!r}: weight {key!r} must be a float array, got {value.dtype}")
        self._constants = {k: np.asarray(v) for k, v in (constants or {}).items()}
        self.host = {k: np.asarray(v) for k, v in (host or {}).items()}
        shapes = list(output_shapes) if output_shapes is not None else [None] * self.outputs
        batched = list(output_batched) if output_batched is not None else [True] * self.outputs
        if len(shapes) != self.outputs or len(batched) != self.outputs:
            raise ValueError(f"Operation {self.name!r}: {self.outputs} outputs, but {len(shapes)} output shapes and "
                             f"{len(batched)} batch flags")
        self._output_shapes = [None if s is None else tuple(None if d is None else int(d) for d in s) for s in shapes]
        self._output_batched = [bool(b) for b in batched]
        params = inspect.signature(fn).parameters if not isinstance(fn, type) else {}
        self._takes_training = "training" in params

    # -- building: the weights and constants from the arrays given
    def compute_output_shape(self, input_shape):
        return self._output_shapes if self.outputs > 1 else self._output_shapes[0]

    def create_weights(self, input_shape) -> None:
        xp = self.xp
        for key, value in self._initial.items():
            self._params[key] = Parameter(xp.asarray(value.copy()), name=f"{self.name}/{key}", backend=xp,
                                          trainable=self._trainable)
        for key, value in self._constants.items():
            self.add_state(key, xp.asarray(value.copy()))

    def count_params(self) -> int:
        return sum(int(np.prod(w.shape)) for w in self.weights) if self.built else 0

    def __call__(self, inputs, training: bool = False):
        items = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if not any(_is_symbolic(i) for i in items):
            return super().__call__(items, training)
        if not all(_is_symbolic(i) for i in items):
            raise TypeError(f"Operation {self.name!r}: cannot mix symbolic inputs with concrete tensors in one call")
        parents = [as_symbolic(i) for i in items]
        if not self.built:
            self._build([() if p.shape is None else p.shape for p in parents])
        token = object()
        out = [SymbolicTensor(shape, self, parents, True, index=k if self.outputs > 1 else None,
                              call=token if self.outputs > 1 else None, batched=batched)
               for k, (shape, batched) in enumerate(zip(self._output_shapes, self._output_batched))]
        if self.outputs == 1:
            out = out[0]
        self.__dict__.setdefault("_first_symbolic_call", (parents, out))
        return out

    def _ensure_built(self, input_shape, source: str) -> None:
        self._source = source
        if not self.built:
            self._build(input_shape)

    # -- running
    def call_masked(self, inputs, training: bool = False):
        """``call`` straight away in the common case (no mask rides on an input, no half-precision input to cast,
        no mixed policy, no activity regularizer): an imported graph runs one of these per ONNX node, so the
        general path's list walks (masks, casts) are skipped; any other case takes it."""
        if self._compute is None and self._activity is None and self._user_dtype is None:
            for t in inputs:
                if isinstance(t, Tensor) and (t.__dict__.get("_mask") is not None or t.data.dtype.name in _HALVES):
                    break
            else:
                return self.call(inputs, training)
        return super().call_masked(inputs, training)

    def call(self, inputs, training: bool = False):
        args = []
        for kind, key in self.arguments:
            if kind == "input":
                args.append(inputs[key])
            elif kind == "weight":
                args.append(self._params[key])
            elif kind == "constant":
                args.append(Tensor._of(self._state[key], self.xp))
            elif kind == "host":
                args.append(self.host[key])
            else:
                args.append(None)
        if self._takes_training:
            return self.fn(*args, training=training, **self.attributes)
        return self.fn(*args, **self.attributes)

    def get_config(self) -> dict:
        raise TypeError(f"Operation {self.name!r} ({self.op_type}) computes a Python function, which a layer "
                        "configuration (get_config, to_json, clone_model) cannot hold; model.save and load_model "
                        "keep a model of op nodes read from an ONNX file by magmadnn.onnx.load (its graph as ONNX "
                        "bytes), and save_weights keeps any model's weights")

    def architecture_config(self) -> dict:
        """What a model file's architecture records of this node (its function is not stored): the op type, the
        number of outputs and the kinds of its arguments."""
        return {"op_type": self.op_type, "outputs": self.outputs, "arguments": [kind for kind, _ in self.arguments]}

    def __repr__(self) -> str:
        return f"Operation({self.op_type!r}, name={self.name!r})"
