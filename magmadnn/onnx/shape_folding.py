"""Shape arithmetic of a dynamic-batch export folded at load (:mod:`.op_graph`).

PyTorch's exporter with a dynamic batch axis writes each attention reshape's target as run-time arithmetic on
``Shape`` (Shape, Gather, Unsqueeze, Concat, with Div and Cast on the way). The import follows what a shape vector
holds (:func:`.batch_axes.shape_batch`: sizes known at load and the batch size); here, a ``Gather`` of known sizes
becomes a constant (the arithmetic on it then folds at load), and a Reshape target holding known sizes and the batch
size becomes a constant with -1 for the batch. The graph is then read again with those targets constant, so that
shape inference knows every size but the batch's and no shape arithmetic runs batch after batch. What
still computes shapes at run time runs on the host (:func:`host_runner`), once per distinct input.
"""

from __future__ import annotations

import numpy as np

from . import batch_axes
from ._proto import onnx

__all__ = ["batch_shape", "known_sizes", "with_batch_shapes", "host_runner", "RANDOM"]

#: operators whose outputs are random: never remembered
RANDOM = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli")


def _shape_vector(value):
    """What a run-time shape vector (a host value of the import) holds, else None."""
    if isinstance(value, np.ndarray) or not getattr(value, "host", False):
        return None
    return getattr(value, "shape_batch", None)


def batch_shape(value):
    """A Reshape's target shape computed at run time from the batch size and known sizes only (the shape arithmetic
    a dynamic-batch export writes: Shape, Gather, Unsqueeze, Concat): a constant with -1 where the batch size goes,
    which Reshape infers to the same size (see the module). Any other value as it is."""
    known = _shape_vector(value)
    if known is None or known.count(batch_axes.BATCH) != 1:
        return value
    if not all(d == batch_axes.BATCH or (isinstance(d, (int, np.integer)) and d > 0) for d in known):
        return value
    return np.array([-1 if d == batch_axes.BATCH else int(d) for d in known], np.int64)


def known_sizes(node, ins):
    """``Gather`` of a run-time shape vector at sizes known at load (not the batch size): those sizes, a constant,
    so the arithmetic on them folds at load too."""
    if len(ins) != 2 or not isinstance(ins[1], np.ndarray) or int(_attribute(node, "axis", 0)) != 0:
        return None
    known = _shape_vector(ins[0])
    if known is None or ins[1].dtype.kind not in "iu":
        return None
    try:
        picked = [known[int(i)] for i in ins[1].reshape(-1)]
    except IndexError:
        return None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in picked):
        return None
    return np.array(picked, np.int64).reshape(ins[1].shape)


def _attribute(node, name, default):
    for attr in node.attribute:
        if attr.name == name:
            return onnx().helper.get_attribute_value(attr)
    return default


def with_batch_shapes(proto, targets: dict, constants: dict | None = None):
    """``proto`` with each Reshape whose output is in ``targets`` reading that constant target (an initializer), so
    that shape inference knows every size but the batch size after it; and with the nodes whose outputs are all in
    ``constants`` (values computed at load, from constants and known sizes) replaced by those values as initializers
    (a chain that reads them, a fusion, sees them from the start)."""
    changed = onnx().ModelProto()
    changed.CopyFrom(proto)
    numpy_helper = onnx().numpy_helper
    constants = constants or {}
    taken = {i.name for i in changed.graph.initializer} | {v for n in changed.graph.node for v in n.output}

    def initializer(base, value):
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        changed.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    kept = [n for n in changed.graph.node if not (n.output and all(o in constants for o in n.output if o))]
    read = {v for n in kept for v in n.input} | {o.name for o in changed.graph.output}
    present = {i.name for i in changed.graph.initializer}
    for name, value in constants.items():
        if name in read and name not in present:
            changed.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    for node in kept:
        if node.op_type == "Reshape" and node.output and node.output[0] in targets:
            node.input[1] = initializer(f"{node.output[0]}_target", targets[node.output[0]])
    del changed.graph.node[:]
    changed.graph.node.extend(kept)
    return changed


def host_runner(node, opset):
    """A function computing ``node`` on host NumPy arrays (shape arithmetic at run time), made once; it remembers
    its outputs by its inputs' values (they follow from the batch's shape, the same batch after batch), so onnx's
    reference evaluator runs once per distinct input."""
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    helper = onnx().helper
    untyped = helper.make_empty_tensor_value_info
    names = [n for n in node.input if n]
    graph = helper.make_graph([node], "host", [untyped(n) for n in names], [untyped(n) for n in node.output if n])
    evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    known: dict = {}  # the outputs by the inputs' values: a batch of the size seen before reuses them
    remembers = node.op_type not in RANDOM

    def run(*arrays):
        given = [np.asarray(a) for a in arrays if a is not None]
        key = tuple((a.dtype.str, a.shape, a.tobytes()) for a in given) if remembers else None
        out = known.get(key) if remembers else None
        if out is None:
            out = [np.asarray(r) for r in evaluator.run(None, dict(zip(names, given)))]
            for a in out:
                a.flags.writeable = False  # shared by every later call with these inputs
            if remembers:
                if len(known) >= _HOST_MEMO:
                    known.clear()
                known[key] = out
        return out if len(out) > 1 else out[0]

    return run


#: host nodes remember the outputs of this many distinct inputs (shapes of the batch sizes seen)
_HOST_MEMO = 16
