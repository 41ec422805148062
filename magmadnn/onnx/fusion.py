"""Fusions of the op-node import: a chain of ONNX nodes that one op node computes.

The import (:mod:`.op_graph`) makes one op node per ONNX node; where a chain of nodes has a faster form as one
function (a MatMul, its bias Add and an activation: one ``F.dense``), a *pattern* claims the chain and the import
makes one op node for all of it. Each pattern is a function ``match(state, node)`` registered with
:func:`pattern` for the operator that starts the chain; it returns a :class:`Fused` or None. The rules every
pattern keeps:

* the chain's inner values (all but the last node's outputs) are read by no node outside it and are no graph
  output, so nothing else needs them;
* the fused function computes what the chain computes, through :mod:`magmadnn.functional` (host and device,
  differentiable as the chain is), from the chain's outer inputs;
* the op node writes itself back as the chain's nodes (:func:`op_export.remember_chain`): a fused model exports
  the graph it was read from, and loading that again fuses it again.

Patterns live by topic next to their operators' converters (the modules of :mod:`.op_nodes`, which import
this one); this module is their framework, :mod:`.op_graph` asks :func:`match` at each node.
"""

from __future__ import annotations

__all__ = ["Fused", "pattern", "match", "PATTERNS", "single_reader"]

#: operator starting a chain -> the patterns tried for it, in registration order
PATTERNS: dict[str, list] = {}


class Fused:
    """A claimed chain: ``nodes`` (ONNX nodes in graph order, the last one's outputs are the op node's),
    ``inputs`` (the chain's outer input names, in the order ``form.fn`` takes them; "" for one left out),
    ``slots`` (per input, the (node index, input position) pairs it feeds in the chain), ``form`` (the
    :class:`~.op_nodes.Form` computing the chain, its ``weights``/``host`` positions index ``inputs``), and
    ``op_type`` (what ``summary`` shows, e.g. ``MatMul+Add+Gelu``)."""

    __slots__ = ("nodes", "inputs", "slots", "form", "op_type")

    def __init__(self, nodes, inputs, slots, form, op_type: str | None = None):
        self.nodes, self.inputs, self.slots, self.form = list(nodes), list(inputs), [list(s) for s in slots], form
        self.op_type = op_type or "+".join(n.op_type for n in self.nodes)


def pattern(*starts):
    """Register ``match(state, node) -> Fused | None`` for chains starting at the operators ``starts``."""
    def add(fn):
        for start in starts:
            PATTERNS.setdefault(start, []).append(fn)
        return fn

    return add


def single_reader(state, name: str):
    """The one node reading value ``name`` when exactly one does (at one input position) and it is no graph output,
    else None: a chain may swallow the value."""
    readers = state.consumers.get(name, [])
    if len(readers) != 1 or name in state.graph_outputs:
        return None
    return readers[0][0]


def match(state, node):
    """The first pattern's chain starting at ``node``, or None."""
    for fn in PATTERNS.get(node.op_type, ()):
        found = fn(state, node)
        if found is not None:
            return found
    return None
