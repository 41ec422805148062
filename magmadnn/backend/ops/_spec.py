"""The registry the topic modules declare the op set into: :func:`op` for the ops every backend has, :func:`optional`
for those a backend may add (see :mod:`magmadnn.backend.ops`)."""

from __future__ import annotations

import inspect

#: op name -> signature, in the order the topic modules declare them
SPEC: dict[str, inspect.Signature] = {}
#: optional op name -> signature
OPTIONAL_SPEC: dict[str, inspect.Signature] = {}


def op(fn):
    """Declare ``fn``'s name, signature and docstring as an op of the set."""
    SPEC[fn.__name__] = inspect.signature(fn)
    return fn


def optional(fn):
    """Declare an optional op: a backend that has it has it with this signature and meaning."""
    OPTIONAL_SPEC[fn.__name__] = inspect.signature(fn)
    return fn
