"""The functional model's forward pass (``Model._forward``): its layers in graph order, each called through its
call plan where one holds.

A graph's nodes become a program once per graph (``_program``): per node its kind, layer, where its value goes and
what it reads, so that a step's loop does no ``isinstance`` or id look-up per node. A node of one input calls its
layer's plan for the input's signature directly, as :meth:`~magmadnn.layers.masking.MaskingMixin.call_masked`
replays it (the same conditions: an unmasked Tensor, a layer that makes no mask, plans current), without a frame
for ``call_masked``, and so does a node of a list of two inputs (a residual ``Add``: its plan ``run(a, b)``);
every other call goes through ``call_masked``. On the host the values no later node reads are
let go of at once (``_released_after``).
"""

from __future__ import annotations

from .. import _configurable, mixed_precision
from .. import autograd as _autograd
from .. import functional as F
from ..autograd import Tensor
from ..layers.base import Input
from .outputs import Outputs

__all__ = ["Forward"]

_INPUT, _ONE, _MANY, _OUTPUT, _PAIR = range(5)  # the kinds of node in a forward program (Forward._program;
# _PAIR: a list of two inputs, _MANY: of any other count)


class Forward:
    """The forward pass of a functional model (a mixin of :class:`~magmadnn.models.Model`)."""

    def _forward(self, inputs: list[Tensor], training: bool) -> Tensor:
        if self.__dict__.get("_penalty_free_at") != _configurable.generation:  # (_start_forward's own test)
            self._start_forward()
        values = {}
        released = self._released_after() if self.xp is not None and self.xp.name == "host" else None
        program = self.__dict__.get("_forward_program")
        if program is None or program[0] is not self.nodes or program[1] is not self.inputs:
            program = self._program()
        for position, (kind, layer, key, arg) in enumerate(program[2]):
            if kind == _ONE:
                x = values[arg]
                # the layer's plan for this input signature, replayed as call_masked replays it (.layers.plans),
                # without call_masked's frame: an unmasked Tensor, a layer making no mask, plans still current
                if layer._plans_at == _autograd._trainable_changes and x.__class__ is Tensor and \
                        getattr(x, "_mask", None) is None and not layer.makes_mask:
                    data = x.data
                    plan = layer._plans.get((data.shape, data.dtype, training))
                    values[key] = layer.call_masked(x, training) if plan is None else plan(layer, x)
                else:
                    values[key] = layer.call_masked(x, training)
            elif kind == _INPUT:
                values[key] = inputs[arg]
            elif kind == _PAIR:
                a, b = values[arg[0]], values[arg[1]]
                # the layer's plan for the two inputs' signature, replayed as call_masked replays it (the same
                # conditions: unmasked Tensors, a layer making no mask, plans still current): ``run(a, b)``
                if layer._plans_at == _autograd._trainable_changes and a.__class__ is Tensor and \
                        b.__class__ is Tensor and getattr(a, "_mask", None) is None and \
                        getattr(b, "_mask", None) is None and not layer.makes_mask:
                    plan = layer._plans.get((a.data.shape, a.data.dtype, b.data.shape, b.data.dtype, training))
                    values[key] = layer.call_masked([a, b], training) if plan is None else plan(a, b)
                else:
                    values[key] = layer.call_masked([a, b], training)
                a = b = None
            elif kind == _MANY:
                values[key] = layer.call_masked(list(map(values.__getitem__, arg)), training)
            else:  # several outputs: the layer runs once for all of them
                parents, many, call, index = arg
                if call not in values:
                    values[call] = layer.call_masked(list(map(values.__getitem__, parents)) if many else
                                                     values[parents[0]], training)
                values[key] = values[call][index]
            if released is not None:
                x = data = None  # (no value kept past its last reader by this loop's own names)
                for done in released[position]:
                    del values[done]
        if not self._single:
            return Outputs(self._full_precision(values[id(o)]) for o in self._outputs)
        out = values[id(self.output)]
        dtype = out.data.dtype if out.__class__ is Tensor else out.dtype  # (a layer may give a plain array)
        if dtype != self.dtype and dtype.name in mixed_precision.HALF_TYPES:
            out = F.cast(out, self.dtype)  # a mixed policy: losses, metrics and predictions read float32
        return out

    def _program(self) -> tuple:
        """``(nodes, inputs, steps)``: the forward pass over ``nodes`` as ``(kind, layer, key, arg)`` per
        node (``key``: where its value goes; ``arg``: the model input's position, the parent's key, the parents' keys,
        or (parents, many, call, index) for one output of a layer with several), kept for ``_forward`` while the
        graph is the same."""
        position = {id(node): k for k, node in enumerate(self.inputs)}  # (the last, as dict(zip(...)) kept)
        steps = []
        for node in self.nodes:
            if isinstance(node.layer, Input):
                steps.append((_INPUT, node.layer, id(node), position[id(node)]))
            elif node.index is not None:
                steps.append((_OUTPUT, node.layer, id(node),
                              (tuple(map(id, node.parents)), node.many, id(node.call), node.index)))
            elif node.many:
                steps.append((_PAIR if len(node.parents) == 2 else _MANY, node.layer, id(node),
                              tuple(map(id, node.parents))))
            else:
                steps.append((_ONE, node.layer, id(node), id(node.parents[0])))
        program = self.__dict__["_forward_program"] = (self.nodes, self.inputs, steps)
        return program

    def _released_after(self) -> list:
        """Per node, the values no later node reads (outputs excepted): the host forward lets go of them at once, so
        NumPy's next arrays reuse their memory instead of faulting in fresh pages (an ONNX graph's many small nodes
        made the host's page faults a third of a transformer's inference). Made once per graph."""
        plan = self.__dict__.get("_release_plan")
        if plan is None or plan[0] is not self.nodes:
            last, calls = {}, set()
            for position, node in enumerate(self.nodes):
                if node.index is not None:
                    last[id(node.call)] = position
                    if id(node.call) in calls:  # the layer ran at its first output: the parents are not read again
                        continue
                    calls.add(id(node.call))
                for parent in node.parents:
                    last[id(parent)] = position
            kept = {id(o) for o in self._outputs}
            released = [[] for _ in self.nodes]
            for key, position in last.items():
                if key not in kept:
                    released[position].append(key)
            plan = self.__dict__["_release_plan"] = (self.nodes, released)
        return plan[1]

    def _full_precision(self, out):
        if isinstance(out, Tensor) and out.dtype != self.dtype and out.dtype.name in mixed_precision.HALF_TYPES:
            return F.cast(out, self.dtype)
        return out
