"""A walk of a directed acyclic graph in post-order, shared by the autograd tape (``Tensor.backward``) and the
functional model's layer graph: an iterative depth-first post-order. (CUDA graphs are elsewhere: graph replay is
:mod:`magmadnn.models.replay`.)"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def postorder(root, parents: Callable[[object], Iterable]) -> list:
    """Every node reachable from ``root`` through ``parents(node)``, each listed after all of its parents.

    Iterative (deep graphs cannot overflow the Python stack); ``parents`` is called once per node.
    """
    order: list = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in parents(node):
            if id(parent) not in seen:
                stack.append((parent, False))
    return order
