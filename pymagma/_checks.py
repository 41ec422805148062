"""Argument checks shared by the public modules: sizes are integers (never truncated), counts fit the native type.

``integer`` accepts what ``operator.index`` accepts (Python and NumPy integers; not floats, not even 2.0) and
raises a ``TypeError`` naming the argument otherwise; ``count`` also checks the range a native ``int`` (MAGMA's
32-bit ``magma_int_t`` unless ILP64) can hold, so a negative or overflowing count never reaches a native call.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from itertools import chain

from . import _libs

#: Largest value of a 32-bit signed C int (magma_int_t without ILP64, cuDNN's int arguments).
INT32_MAX = 2**31 - 1


def integer(value, what: str) -> int:
    """``value`` as a Python int, or a TypeError naming ``what`` (a float such as 2.5 or 2.0 is never truncated)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r} ({type(value).__name__})") from None


def count(value, what: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer ``value`` with ``minimum <= value <= maximum`` (default: the native magma_int_t's largest)."""
    n = integer(value, what)
    if maximum is None:
        maximum = native_int_max()
    if not minimum <= n <= maximum:
        raise ValueError(f"{what} must be between {minimum} and {maximum}, got {n}")
    return n


def native_sizes(routine: str, **sizes) -> None:
    """Each of ``sizes`` (dimensions, leading dimensions, increments, batch counts of ``routine``) checked with
    :func:`count`: a negative or wrapped-around value never reaches a native call (a ValueError names it)."""
    for name, value in sizes.items():
        count(value, f"{routine}: {name}")


def sizes(values, what: str) -> tuple[int, ...]:
    """A tuple of integers from an integer or an iterable of integers (each checked with :func:`integer`)."""
    if not isinstance(values, str) and hasattr(values, "__iter__"):
        return tuple(integer(v, f"{what}[{i}]") for i, v in enumerate(values))
    return (integer(values, what),)


@functools.cache
def native_int_max() -> int:
    """The largest magma_int_t (2**31 - 1, or 2**63 - 1 with ``PYMAGMA_ILP64=1``), read once."""
    return 2**63 - 1 if _libs.magma_ilp64() else INT32_MAX  # as _magma.MAGMA_INT, fixed at import


def _kind(values: tuple) -> tuple:
    """The types in ``values``, nested tuples as tuples of their types."""
    kinds = tuple(map(type, values))
    if tuple not in kinds:
        return kinds
    out = []
    for v, k in zip(values, kinds):  # a loop, not a comprehension: one call for the common case (shapes, pairs)
        if k is tuple:
            k = tuple(map(type, v))
            if tuple in k:
                k = _kind(v)
        out.append(k)
    return tuple(out)


_is_tuple = tuple.__instancecheck__  # isinstance(v, tuple), without a Python frame


def once_per_arguments(fn: Callable, limit: int = 1024) -> Callable:
    """``fn`` (a pure function of hashable arguments: checks and derived sizes) answered once per distinct arguments,
    their types included (a float 2.0 is not the int 2, so its TypeError is still raised); errors and unhashable
    arguments (lists) are never cached.  At most ``limit`` answers are kept."""
    answers: dict = {}

    @functools.wraps(fn)
    def call(*args):
        kinds = tuple(map(type, args))
        if tuple in kinds:  # the types inside tuple arguments too: two levels without a call (pads' pairs), deeper
            # by _kind (equal arguments nest alike, so the types in order tell the kinds apart)
            inner = tuple(map(type, chain.from_iterable(filter(_is_tuple, args))))
            if tuple not in inner:
                key = (args, kinds, inner)
            else:
                deeper = tuple(map(type, chain.from_iterable(filter(_is_tuple, chain.from_iterable(
                    filter(_is_tuple, args))))))
                key = (args, kinds, inner, deeper) if tuple not in deeper else (args, _kind(args), None)
        else:
            key = (args, kinds)
        try:
            return answers[key]
        except KeyError:
            pass
        except TypeError:
            return fn(*args)
        if len(answers) >= limit:
            answers.clear()
        answer = answers[key] = fn(*args)
        return answer

    return call


def same_objects(fn: Callable, by_value: int = 0, limit: int = 256) -> Callable:
    """``fn`` (a :func:`once_per_arguments` function) answered at once for a call whose arguments after the first
    ``by_value`` are the very objects of an earlier call (a layer passes the same checked geometry tuples at every
    call): found by their identities, without hashing nested tuples and their types again.  A hashable tuple cannot
    change and the kept answer holds its arguments alive, so an identity stands for the value and its types; the first
    ``by_value`` arguments (shapes, dtypes: values whose equal values get the same answer) are keyed by value.
    Unhashable arguments (a list, a tuple holding one, which their owner may change in place) are never kept."""
    seen: dict = {}  # key -> (the objects, kept alive so that no other object gets their ids, the answer)

    @functools.wraps(fn)
    def call(*args):
        objects = args[by_value:]
        hit = seen.get(args[:by_value] + tuple(map(id, objects)))
        if hit is not None:
            return hit[1]
        answer = fn(*args)
        try:
            hash(objects)
        except TypeError:
            return answer
        if len(seen) >= limit:
            seen.clear()
        seen[args[:by_value] + tuple(map(id, objects))] = (objects, answer)
        return answer

    return call


class Plans(dict):
    """The plans of one kind of call: what a call decided from its operands' layouts (shapes, strides, dtypes) and
    plain options (descriptors, output shapes, checked sizes), kept by those values so that a later call with the
    same ones looks its plan up (``plans.get(key)``) instead of deciding again; a miss (or an unhashable key, which
    the caller sends to the slow path) works the plan out with every check and keeps it (``plans.keep(key, plan)``;
    errors are never kept).  Keys hold only values checked arrays carry (their ``shape``, ``strides``, ``dtype``) or
    options whose type is part of the key, so a plan never answers for an argument it did not check.  At most
    ``limit`` plans are kept."""

    def __init__(self, limit: int = 1024):
        super().__init__()
        self.limit = limit

    def keep(self, key, plan):
        if len(self) >= self.limit:
            self.clear()
        self[key] = plan
        return plan
