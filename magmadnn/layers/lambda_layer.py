"""Lambda: any differentiable function of Tensors as a layer, saved by the registered name of its function.

A model file holds the function's name, never its code: loading looks the name up among the functions registered
with :func:`register_lambda` in the running program, so loading a file never executes anything from it.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..autograd import Tensor, no_grad
from .base import Layer, register

__all__ = ["Lambda", "register_lambda", "lambda_function"]

_FUNCTIONS: dict[str, object] = {}


def register_lambda(function=None, *, name: str | None = None):
    """Make a function usable by saved Lambda layers under ``name`` (default: its ``__name__``); a decorator
    (``@register_lambda`` or ``@register_lambda(name="...")``) or a call. Returns the function."""

    def add(fn):
        if not callable(fn):
            raise TypeError(f"register_lambda: expected a function, got {fn!r}")
        key = name if name is not None else getattr(fn, "__name__", None)
        if not isinstance(key, str) or not key or key == "<lambda>":
            raise ValueError(f"register_lambda: {fn!r} has no usable name; pass name='...'")
        if _FUNCTIONS.get(key, fn) is not fn:
            raise ValueError(f"register_lambda: the name {key!r} is already registered for another function")
        _FUNCTIONS[key] = fn
        return fn

    return add if function is None else add(function)


def lambda_function(name: str):
    """The function registered under ``name``; a ValueError naming it (and how to register it) if none is."""
    try:
        return _FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"Lambda function {name!r} is not registered in this program; define it and decorate it "
                         f"with @magmadnn.layers.register_lambda (or register_lambda(fn, name={name!r})) before "
                         f"loading; registered: {sorted(_FUNCTIONS)}") from None


def _registered_name(function) -> str | None:
    return next((key for key, fn in _FUNCTIONS.items() if fn is function), None)


@register
class Lambda(Layer):
    """``function(x)`` (``x`` a Tensor, or a list of them for a list of inputs) as a layer; ``function`` is
    built from ``magmadnn.functional`` and Tensor operators, so it is differentiable and runs on every backend.

    ``function`` is a callable or the name of a registered one; saving needs it registered
    (:func:`register_lambda`). ``output_shape`` (per sample) is inferred by running the function on one zero
    sample unless given. Masks as Keras: without ``mask`` a masked input is refused (Keras drops the mask);
    ``mask(inputs, mask)`` (a callable or registered name) computes the output's mask, and a ``function`` with a
    ``mask`` parameter receives the input's. No ONNX form (its code is unknown).
    """

    uses_mask = True

    def __init__(self, function, output_shape=None, mask=None, arguments: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        owner = f"Lambda {self.name!r}"
        if isinstance(function, str):
            function = lambda_function(function)
        if not callable(function):
            raise TypeError(f"{owner}: function must be callable or a registered name, got {function!r}")
        if isinstance(mask, str):
            mask = lambda_function(mask)
        if mask is not None and not callable(mask):
            raise TypeError(f"{owner}: mask must be None or a callable mask(inputs, mask) (or its registered name), "
                            f"got {mask!r}")
        self.mask = mask
        self.supports_masking = mask is not None
        try:
            self._takes_mask = "mask" in inspect.signature(function).parameters
        except (TypeError, ValueError):  # builtins without a signature
            self._takes_mask = False
        if arguments is not None and not isinstance(arguments, dict):
            raise TypeError(f"{owner}: arguments must be a dict of keyword arguments, got {arguments!r}")
        self.function = function
        self.arguments = dict(arguments or {})
        self._given_shape = None if output_shape is None else tuple(int(s) for s in output_shape)

    def compute_output_shape(self, input_shape):
        if self._given_shape is not None:
            return self._given_shape
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        zeros = [Tensor(self.xp.asarray(np.zeros((1, *s)), self.dtype), backend=self.xp) for s in shapes]
        try:
            with no_grad(), np.errstate(all="ignore"):  # zeros may divide by zero: only the shape is wanted
                out = self.call(zeros if isinstance(input_shape, list) else zeros[0])
        except Exception as exc:  # noqa: BLE001  (any failure of user code is reported with its layer)
            raise ValueError(f"Lambda {self.name!r}: its function failed on an input of per-sample shape "
                             f"{input_shape} ({type(exc).__name__}: {exc}); pass output_shape= if it cannot run on "
                             "zeros") from exc
        if not isinstance(out, Tensor) or out.ndim < 1 or out.shape[0] != 1:
            raise ValueError(f"Lambda {self.name!r}: its function must return one Tensor keeping the batch axis, "
                             f"got {out!r}")
        return tuple(out.shape[1:])

    def call(self, x, training=False, mask=None):
        if self._takes_mask:
            return self.function(x, mask=mask, **self.arguments)
        return self.function(x, **self.arguments)

    def compute_mask(self, inputs, mask):
        return None if self.mask is None else self.mask(inputs, mask)

    def output_masked(self, masked):
        return self.mask is not None

    def get_config(self):
        name = _registered_name(self.function)
        if name is None:
            raise ValueError(f"Lambda layer {self.name!r}: its function {getattr(self.function, '__qualname__', '?')!r}"
                             " is not registered, so it cannot be saved (a file holds names, never code); decorate "
                             "it with @magmadnn.layers.register_lambda, or pass name='...' to register a lambda")
        config = {"function": name, **super().get_config()}
        if self.mask is not None:
            mask_name = _registered_name(self.mask)
            if mask_name is None:
                raise ValueError(f"Lambda layer {self.name!r}: its mask function is not registered, so it cannot be "
                                 "saved; decorate it with @magmadnn.layers.register_lambda")
            config["mask"] = mask_name
        if self._given_shape is not None:
            config["output_shape"] = list(self._given_shape)
        if self.arguments:
            config["arguments"] = self.arguments
        return config
