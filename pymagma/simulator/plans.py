"""Planned checks: what the simulated libraries remember of a call that passed every check, so that the next call with
the same signature costs a dictionary look-up instead of the checks again.

A native call's checks fall in two parts.  What depends only on its signature (the descriptors' contents, the
integer and floating arguments, which pointers are null, the simulated device's architecture) is decided once per
plan: the first call with a new signature runs every check of the model, and only a call that passed them all
leaves a plan.  What can change between two calls of the same signature is checked at every call: the handle is
still live and its stream, each descriptor is the one planned (:class:`Versions`: every ``Set``, ``Create`` and
``Destroy`` through the simulated library gives it a new version, so a re-set or destroyed descriptor never matches
a plan), each pointer is null or not as planned.  A refused call leaves no plan: it is refused again, with the
same status and message, by the checks themselves.

Plans only skip work in mode ``"null"`` (where a checked call computes nothing); in the other modes the models run
as before, reading the descriptors' facts from :class:`Versions`-checked caches.  ``PYMAGMA_SIMULATOR_PLAN=0`` (read
when the simulated libraries are made) or ``planning = False`` on a simulated library turns plans and caches off.
"""

from __future__ import annotations

import itertools
import os

ENV_VAR = "PYMAGMA_SIMULATOR_PLAN"
#: plans a library keeps; past it they are dropped and made again (a program that keeps making new descriptors)
LIMIT = 4096


def enabled_from_environment(environ=None) -> bool:
    """Whether plans are on: ``PYMAGMA_SIMULATOR_PLAN`` unset or anything but 0/off/false/no."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return raw.strip().lower() not in ("0", "off", "false", "no")


class Versions:
    """A version per descriptor address, unique across all descriptors: a descriptor gets a new one whenever it is
    created, set or destroyed through the simulated library (and one when first seen).  ``of`` maps address ->
    version; an address absent from it has no plan."""

    def __init__(self):
        self._next = itertools.count(1)
        self.of: dict[int, int] = {}

    def touch(self, desc: int) -> None:
        self.of[desc] = next(self._next)

    def forget(self, desc: int) -> None:
        self.of.pop(desc, None)

    def adopt(self, desc: int) -> int:
        """The version of ``desc``, given one now when it has none (made before this library saw it)."""
        version = self.of.get(desc)
        if version is None:
            version = self.of[desc] = next(self._next)
        return version

    def clear(self) -> None:
        self.of.clear()


class Plans(dict):
    """Signature -> plan, at most :data:`LIMIT` of them."""

    def remember(self, key, plan) -> None:
        if len(self) >= LIMIT:
            self.clear()
        self[key] = plan


def key_function(terms, **scope):
    """``key(args)``: the tuple of the expressions ``terms`` (of ``args`` and the names in ``scope``), compiled as one
    expression (it runs at every call of a planned function: no loop, no call per argument)."""
    exec(f"def key(args):\n    return ({', '.join(terms)},)\n", scope)  # noqa: S102 - our own text
    return scope["key"]


def address(obj) -> int | None:
    """The address a descriptor argument stands for (an int, None, ``c_void_p``, an object with ``value`` or
    ``_as_parameter_``); None when it cannot be told."""
    if obj is None:
        return 0
    if type(obj) is int:
        return obj
    value = getattr(obj, "value", None)
    if value is None and hasattr(obj, "_as_parameter_"):
        value = getattr(obj._as_parameter_, "value", None)
        return 0 if value is None else (value if isinstance(value, int) else None)
    if value is None and hasattr(obj, "value"):
        return 0
    return value if isinstance(value, int) else None


def out_address(out) -> int | None:
    """The address a ``Create`` call wrote through ``out`` (``byref(c_void_p)`` or a pointer to one); None when it
    cannot be told."""
    target = getattr(out, "_obj", None)  # ctypes.byref(...)
    if target is None:
        try:
            target = out.contents
        except (AttributeError, TypeError, ValueError):
            return None
    value = getattr(target, "value", None)
    return 0 if value is None and hasattr(target, "value") else (value if isinstance(value, int) else None)
