"""The backward walk of the autograd tape (:mod:`magmadnn.autograd`'s ``Tensor.backward``): the recorded Functions in
reverse topological order, each one's gradients into its producers' or its leaves' ``.grad``, each Function released
once nothing flows into it any more. Written inline (no Python call per recorded op but the op's own backward)."""

from __future__ import annotations

import functools
import operator
from typing import Any

_FN = operator.attrgetter("_fn")
_is_not_none = functools.partial(operator.is_not, None)


class GraphReleasedError(RuntimeError):
    """backward() went through a part of the graph whose saved values were already released."""


def release(fn) -> None:
    """``Function.release``: drop the inputs and every saved array; the Function can no longer run backward."""
    fn.__dict__.clear()
    fn._released = True


def _topological_order(root) -> list:
    """Functions reachable from ``root``, every consumer before its producers: ``postorder`` of the producers
    (the Functions of a Function's inputs), reversed, walked inline (no call per recorded op). The producer that
    would be popped next is walked into at once (a chain of ops pushes and pops nothing but its finished nodes)."""
    order: list = []
    seen: set[int] = set()
    stack = [(root, False)]
    pop, push, see = stack.pop, stack.append, seen.add
    while stack:
        fn, expanded = pop()
        if expanded:
            order.append(fn)
            continue
        while id(fn) not in seen:
            see(id(fn))
            push((fn, True))
            if fn._released:
                raise GraphReleasedError(
                    f"backward: the graph through {type(fn).__name__} was already released by an earlier "
                    "backward(); compute the forward pass again before calling backward() a second time"
                )
            last = None  # the last producer not seen: walked next (postorder pops it first)
            for producer in filter(_is_not_none, map(_FN, fn.inputs)):  # (the producers: leaves skipped in C)
                if id(producer) not in seen:
                    if last is not None:
                        push((last, False))
                    last = producer
            if last is None:
                break
            fn = last
    order.reverse()
    return order


def _accumulate_leaf(t, g, given: set[int] | None = None) -> None:
    """Add ``g`` into ``t.grad``; a leaf never gets memory already handed to another leaf in this pass."""
    if t.grad is not None:
        t.grad = t.xp.add(t.grad, g)
        return
    if given is not None:
        base = getattr(g, "base", None)  # the array owning g's memory
        owner = id(g if base is None else base)
        if owner in given:
            g = t.xp.copy(g)
            owner = id(g)
        given.add(owner)
    t.grad = g


def _leaves_final_after(order: list) -> dict[int, list]:
    """Position in ``order`` -> the leaves requiring grad whose last user is the Function at that position."""
    last: dict[int, tuple] = {}
    for i, fn in enumerate(order):
        for t in fn.inputs:
            if t._fn is None and t.requires_grad:
                last[id(t)] = (i, t)
    out: dict[int, list] = {}
    for i, t in last.values():
        out.setdefault(i, []).append(t)
    return out


#: The implicit gradient 1 of a one-element root (``loss.backward()``) whose Function has ``backward_of_one()``: its
#: gradients from an upstream gradient of 1, without an array of ones (the fused mean losses fold the 1 in).
ONE = object()


def _run_backward(root, grad, on_leaf_ready=None) -> None:
    # the seed's memory is never a leaf's .grad (a leaf reached by it as it is gets a copy): the seed may be a kept
    # constant, and a .grad may be written in place later (data parallelism's averaging)
    base = getattr(grad, "base", None)
    seed = {id(grad if base is None else base)}
    if root._fn is None:
        _accumulate_leaf(root, grad, seed)
        if on_leaf_ready is not None:
            on_leaf_ready(root)
        return
    order = _topological_order(root._fn)
    final_after = _leaves_final_after(order) if on_leaf_ready is not None else {}
    grads: dict[int, Any] = {id(root._fn): grad}
    given: set[int] = seed  # memory owners already stored as some leaf's .grad (or the seed's)
    done = False
    try:
        for position, fn in enumerate(order):
            g = grads.pop(id(fn), None)
            if g is not None:  # fn.backward(g); each input's gradient into ``grads`` (by producer) or its .grad
                in_grads = fn.backward_of_one() if g is ONE else fn.backward(g)
                if not isinstance(in_grads, tuple):
                    in_grads = (in_grads,)
                inputs = fn.inputs
                if len(in_grads) != len(inputs):
                    raise RuntimeError(f"{type(fn).__name__}.backward returned {len(in_grads)} gradients for "
                                       f"{len(inputs)} inputs")
                for t, gi in zip(inputs, in_grads):
                    if gi is None or not t.requires_grad:
                        continue
                    shape = gi.shape
                    if shape != t.data.shape and tuple(shape) != t.shape:
                        raise RuntimeError(f"{type(fn).__name__}.backward returned a gradient of shape "
                                           f"{tuple(shape)} for an input of shape {t.shape}")
                    producer = t._fn
                    if producer is not None:
                        key = id(producer)
                        prev = grads.get(key)
                        grads[key] = gi if prev is None else fn.xp.add(prev, gi)
                    elif t.grad is None:  # _accumulate_leaf's first gradient, inline
                        base = getattr(gi, "base", None)  # the array owning gi's memory
                        owner = id(gi if base is None else base)
                        if owner in given:
                            gi = t.xp.copy(gi)
                            owner = id(gi)
                        given.add(owner)
                        t.grad = gi
                    else:
                        _accumulate_leaf(t, gi, given)
            # nothing flows into fn any more: consumers come before their producers in ``order``
            if fn.__class__.release is release:  # Function.release (this module's release), inline
                fn.__dict__.clear()
                fn._released = True
            else:
                fn.release()
            if final_after:
                for leaf in final_after.get(position, ()):
                    on_leaf_ready(leaf)
        done = True
    finally:
        if not done:
            for fn in order:
                fn.release()
