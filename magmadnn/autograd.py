"""Reverse-mode automatic differentiation: Tensor, Function, no_grad and the graph walk.

A differentiable op is one small :class:`Function` subclass: ``forward(*arrays, **params)`` computes the output
array with the backend op set (``self.xp``) and saves what ``backward(grad)`` needs on ``self``; ``backward`` returns
one gradient (or None) per input. ``Function.apply(*inputs, **params)`` runs it and records it on the tape when a
gradient is needed. ``Tensor.backward()`` walks the recorded graph once in reverse topological order, accumulates
the gradients of multi-use nodes, adds leaf gradients into ``.grad`` and then releases the graph.
"""

from __future__ import annotations

import math
import operator
import threading
from typing import Any

import numpy as np

from . import _tape
from . import backend as _backend
from ._tape import ONE, GraphReleasedError, _run_backward  # noqa: F401 - autograd's names
from .backend import faults as _faults

__all__ = ["Tensor", "Parameter", "Function", "no_grad", "enable_grad", "is_grad_enabled", "GraphReleasedError",
           "grad"]


class _GradState(threading.local):
    enabled = True  # every thread starts recording


_state = _GradState()


def is_grad_enabled() -> bool:
    """Whether operations are being recorded for backward (False inside ``no_grad()``)."""
    return _state.enabled


class _GradMode:
    enabled = True

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self.enabled
        return self

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False

    def __call__(self, func):
        """Use as a decorator."""

        def wrapper(*args, **kwargs):
            with type(self)():
                return func(*args, **kwargs)

        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__doc__ = getattr(func, "__doc__", None)
        return wrapper


class no_grad(_GradMode):  # noqa: N801  (context-manager name as in other frameworks)
    """Context manager (or decorator): operations inside are not recorded, results do not require grad."""

    enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Context manager (or decorator) that turns recording back on inside ``no_grad``."""

    enabled = True


#: What Tensor's operators and methods run from the floor above, filled by :mod:`magmadnn.functional.operators` when
#: it is imported (as NumPy's ndarray reaches its ufuncs); ``import magmadnn`` imports it.
UPPER: dict = {}


def _functional():
    return UPPER["operators"]


class Tensor:
    """An array of a backend together with its gradient and the Function that produced it."""

    __array_priority__ = 100  # numpy_array + tensor dispatches to Tensor.__radd__

    def __init__(self, data: Any, requires_grad: bool = False, backend=None):
        if isinstance(data, Tensor):
            xp = data.xp if backend is None else _backend.get(backend)
            data = data.data
        else:
            xp = _backend.get(backend)
        self.xp = xp  # the backend module (op set) holding ``data``
        self.data = xp.asarray(data)
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._fn: Function | None = None

    @classmethod
    def _of(cls, data, xp) -> Tensor:
        """A Tensor of ``xp.asarray(data)`` on the backend ``xp`` known to be one (no backend lookup), no grad."""
        t = cls.__new__(cls)
        t.xp, t.data, t.grad, t.requires_grad, t._fn = xp, xp.asarray(data), None, False, None
        return t

    @classmethod
    def _wrap(cls, data, xp) -> Tensor:
        """A Tensor of ``data``, an array of the backend ``xp`` already (no conversion), no grad."""
        t = cls.__new__(cls)
        t.xp, t.data, t.grad, t.requires_grad, t._fn = xp, data, None, False, None
        return t

    @property
    def backend(self):
        """The old name of :attr:`xp` (the backend holding ``data``)."""
        return self.xp

    @backend.setter
    def backend(self, xp) -> None:
        self.xp = xp

    # -- array facts
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return len(self.data.shape)

    @property
    def size(self) -> int:
        return int(math.prod(self.data.shape))

    @property
    def is_leaf(self) -> bool:
        return self._fn is None

    @property
    def grad_fn(self):
        return self._fn

    def __len__(self) -> int:
        return self.data.shape[0]

    def __repr__(self) -> str:
        flag = ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, backend={self.xp.name}{flag})"

    # -- conversion
    def numpy(self) -> np.ndarray:
        """A host copy; a value a device check recorded (an embedding id, a mask) raises its ValueError first."""
        return _faults.read(self.xp, self.data)

    def item(self) -> float:
        if self.size != 1:
            raise ValueError(f"Tensor.item: only a tensor with one element converts to a scalar, shape is {self.shape}")
        return self.numpy().reshape(()).item()

    def detach(self) -> Tensor:
        """The same data, cut from the graph (no grad)."""
        return Tensor(self.data, requires_grad=False, backend=self.xp)

    def zero_grad(self) -> None:
        self.grad = None

    # -- autograd
    def backward(self, grad=None, *, on_leaf_ready=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``; then release this graph.

        ``on_leaf_ready(leaf)``, when given, is called once for every leaf that requires grad as soon as its
        ``.grad`` is final for this pass (every Function using it has run its backward), in the order that happens;
        data-parallel training starts reducing a bucket of gradients there while the rest of the pass runs."""
        if not self.requires_grad:
            raise RuntimeError(
                f"backward: this tensor (shape {self.shape}) does not require grad; "
                "it was computed from inputs without requires_grad or inside no_grad()"
            )
        xp = self.xp
        if grad is None:
            if math.prod(self.data.shape) != 1:  # (Tensor.size, inline)
                raise ValueError(
                    f"backward: grad can be omitted only for a one-element tensor, this one has shape {self.shape}"
                )
            if getattr(self._fn, "backward_of_one", None) is not None:
                grad = ONE  # its Function's gradient from 1 needs no array of ones (the fused losses)
            else:
                make = getattr(xp, "constant", None)  # a backend that keeps constants: the seed is made once
                grad = (xp.ones(self.data.shape, dtype=self.dtype) if make is None
                        else make(np.ones(self.data.shape, dtype=self.dtype)))
        else:
            grad = grad.data if isinstance(grad, Tensor) else xp.asarray(grad, dtype=self.dtype)
            if tuple(grad.shape) != self.shape:
                raise ValueError(f"backward: grad has shape {tuple(grad.shape)}, expected {self.shape}")
        _run_backward(self, grad, on_leaf_ready)

    # -- operators (Tensor/scalar/array mixes, NumPy broadcasting)
    def __add__(self, other):
        return _functional().add(self, other)

    def __radd__(self, other):
        return _functional().add(other, self)

    def __sub__(self, other):
        return _functional().subtract(self, other)

    def __rsub__(self, other):
        return _functional().subtract(other, self)

    def __mul__(self, other):
        return _functional().multiply(self, other)

    def __rmul__(self, other):
        return _functional().multiply(other, self)

    def __truediv__(self, other):
        return _functional().divide(self, other)

    def __rtruediv__(self, other):
        return _functional().divide(other, self)

    def __matmul__(self, other):
        return _functional().matmul(self, other)

    def __rmatmul__(self, other):
        return _functional().matmul(other, self)

    def __neg__(self):
        return _functional().negative(self)

    def __pow__(self, p):
        return _functional().power(self, p)

    def sum(self, axis=None, keepdims=False):
        return _functional().sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return _functional().mean(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _functional().reshape(self, shape)

    def transpose(self, axes=None):
        return _functional().transpose(self, axes)

    @property
    def T(self):  # noqa: N802
        return _functional().transpose(self)

    __hash__ = object.__hash__


_trainable_changes = 0  # counts changes of any Parameter's ``trainable`` (a captured step checks it)


def trainable_changes() -> int:
    """How many times a ``trainable`` flag changed in this process (graph replay recaptures when it moves)."""
    return _trainable_changes


def note_trainable_change() -> None:
    global _trainable_changes
    _trainable_changes += 1


class Parameter(Tensor):
    """A weight: a leaf tensor (requires_grad=True) with an optional name and a ``trainable`` flag (Keras'
    ``Variable.trainable``: optimizers leave a weight whose flag is False unchanged) and an optional ``constraint``
    (:mod:`magmadnn.constraints`: applied by the optimizer after each update, as Keras' ``Variable.constraint``)."""

    constraint = None

    def __init__(self, data: Any, name: str | None = None, backend=None, trainable: bool = True):
        super().__init__(data, requires_grad=True, backend=backend)
        self.name = name
        self._trainable = bool(trainable)

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value) -> None:
        value = bool(value)
        if value != self._trainable:
            self._trainable = value
            note_trainable_change()

    @property
    def path(self) -> str | None:
        """Keras' name for the full name ``"<layer>/<weight>"``."""
        return self.name

    def assign(self, value) -> None:
        """Replace the values (same shape) with ``value`` (an array, Tensor or number), as Keras' ``assign``."""
        if isinstance(value, Tensor):
            value = value.numpy()
        elif not isinstance(value, (np.ndarray, np.generic, int, float, list, tuple)):
            value = self.xp.to_numpy(value)  # a backend array
        self.data = self.xp.asarray(np.ascontiguousarray(np.broadcast_to(np.asarray(value, self.dtype), self.shape)))

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Parameter({label}shape={self.shape}, dtype={self.dtype}, backend={self.xp.name})"


class Function:
    """One differentiable op: subclass and implement ``forward`` and ``backward`` with the backend op set."""

    xp: Any = None
    _released = False

    def forward(self, *arrays, **params):
        raise NotImplementedError

    def backward(self, grad):
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **params) -> Tensor:
        """Run the op on ``inputs`` (Tensors, or arrays/scalars taken as constants); record it when needed."""
        record = False
        for t in inputs:  # (every input a Tensor: the common case, one pass)
            if not isinstance(t, Tensor):
                xp, inputs, record = _with_constants(inputs)
                break
            if t.requires_grad:
                record = True
        else:
            xp = inputs[0].xp if inputs else _backend.get()
        fn = cls()
        fn.xp = xp
        n = len(inputs)  # (the arrays passed without an iterator for the common arities)
        if n == 2:
            data = fn.forward(inputs[0].data, inputs[1].data, **params) if params else \
                fn.forward(inputs[0].data, inputs[1].data)
        elif n == 1:
            data = fn.forward(inputs[0].data, **params) if params else fn.forward(inputs[0].data)
        elif n == 3:
            data = fn.forward(inputs[0].data, inputs[1].data, inputs[2].data, **params)
        else:
            data = fn.forward(*map(_DATA, inputs), **params)
        last = _LAST_OWN  # xp.asarray(data), skipped for a class of arrays it was seen to return as they are (its
        if last[1] is not data.__class__ or last[0] is not xp:  # own arrays): the last pair seen, then all of them
            data = _own_array(xp, data)
        out = _new(Tensor)  # Tensor._of, inline: every op's output passes here
        out.xp, out.data, out.grad = xp, data, None
        if record and _state.enabled:
            fn.inputs = inputs
            fn.needs_input_grad = tuple(map(_REQUIRES_GRAD, inputs))
            out.requires_grad, out._fn = True, fn
        else:
            out.requires_grad, out._fn = False, None
        return out

    @property
    def released(self) -> bool:
        return self._released

    release = _tape.release  # drop the inputs and every saved array; the Function can no longer run backward

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{' (released)' if self.released else ''}>"


_DATA = operator.attrgetter("data")  # a Tensor's array, without a Python frame per input
_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_new = object.__new__


def _with_constants(inputs) -> tuple:
    """``Function.apply``'s inputs with arrays or scalars among them: ``(backend, inputs as Tensors, whether one
    requires grad)``, each constant a Tensor on the backend of the first Tensor (the default backend without one)."""
    xp, record = None, False
    for t in inputs:
        if isinstance(t, Tensor):
            if xp is None:
                xp = t.xp
            record = record or t.requires_grad
    if xp is None:
        xp = _backend.get()
    tensors = []
    for t in inputs:  # (a loop: a generator would be resumed once per input)
        tensors.append(t if isinstance(t, Tensor) else Tensor(t, backend=xp))
    return xp, tuple(tensors), record
#: (backend, array class) pairs whose ``asarray`` was seen to return such an array as it is (Function.apply skips it)
_OWN_ARRAYS: set = set()
_LAST_OWN: tuple = (None, None)  # the pair of _OWN_ARRAYS that Function.apply met last


def _own_array(xp, data):
    """``xp.asarray(data)``, or ``data`` itself where its class is one ``xp`` keeps as it is (``_OWN_ARRAYS``)."""
    global _LAST_OWN
    pair = (xp, data.__class__)
    try:
        own = pair in _OWN_ARRAYS
    except TypeError:  # an unhashable backend object
        return xp.asarray(data)
    if not own:
        array = xp.asarray(data)
        if array is not data:
            return array
        _OWN_ARRAYS.add(pair)
    _LAST_OWN = pair
    return data


def grad(loss: Tensor, weights) -> list:
    """The gradients of the scalar ``loss`` with respect to each of ``weights`` (Parameters, such as
    ``model.trainable_weights``), as Tensors (None for a weight the loss does not depend on): what a custom
    ``train_step`` takes before ``optimizer.apply(grads, weights)``. The backward pass runs once and releases the
    graph; no ``.grad`` is left on any weight, those of other models included (Keras' torch idiom
    ``zero_grad(); loss.backward(); [v.value.grad for v in weights]`` in one call)."""
    weights = list(weights)
    if not isinstance(loss, Tensor) or loss.size != 1:
        raise TypeError(f"grad: loss must be a one-element Tensor, got {type(loss).__name__}"
                        f"{f' of shape {loss.shape}' if isinstance(loss, Tensor) else ''}")
    saved = [w.grad for w in weights]
    for w in weights:
        w.grad = None
    reached = []
    loss.backward(on_leaf_ready=reached.append)
    out = [None if w.grad is None else Tensor(w.grad, backend=w.xp) for w in weights]
    for leaf in reached:
        leaf.grad = None
    for w, g in zip(weights, saved):
        w.grad = g
    return out
