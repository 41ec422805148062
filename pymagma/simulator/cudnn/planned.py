"""How a call reaches a model of the simulated cuDNN: the ctypes plumbing of each call, its planned checks
(:mod:`pymagma.simulator.plans`: the descriptors' versions, each queued call's signature and plan, what a planned
call still checks: the handle, its operands' allocations), and the operands' allocation check every call makes as
the model views them."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
from ctypes import c_void_p

import numpy as np

from ... import _cudnn as cd
from .. import plans as _plans
from ..runtime import COMPUTE_CAPABILITY
from .descriptors import ModelError, Status, viewing

_ignore_float_errors = functools.partial(np.errstate, all="ignore")

#: models with device work that are never planned: they change the simulator's own state at the call
UNPLANNED = frozenset({"cudnnSetDropoutDescriptor", "cudnnRestoreDropoutDescriptor"})
#: a model's parameters that are descriptors (the rest of its pointer parameters are data or host pointers)
_DESCRIPTOR_PARAMETERS = frozenset({"desc", "conv", "d0", "d1", "d3"})
_SCALARS = frozenset({ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_float, ctypes.c_double,
                      ctypes.c_ulonglong, ctypes.c_longlong})
_MISSING = object()


def _no_work() -> None:
    """What a planned call queues in a capture on the null device (whose queued work never runs)."""


class Planner:
    """Of one :class:`~pymagma.simulator.cudnn.SimulatedCudnn`: ``versions`` (shared with its descriptor reads),
    ``plans`` (signature -> the operand ranges to check), ``enabled`` (plans and cached reads)."""

    def __init__(self, cudnn):
        self.cudnn, self.streams, self.desc = cudnn, cudnn.streams, cudnn.desc
        self.versions, self.plans = cudnn.desc.versions, _plans.Plans()

    @property
    def enabled(self) -> bool:
        return self.desc.caching

    @enabled.setter
    def enabled(self, on: bool) -> None:
        self.desc.caching = bool(on)
        self.plans.clear()
        self.desc.forget()

    def null(self) -> bool:
        return bool(getattr(self.streams, "null", False))

    # ------------------------------------------------------------------------------------- one function's plans
    def function(self, name: str, parameters, argtypes):
        """(signature, hit, remember) for a model with device work, or None when it is not planned (it changes the
        simulator's state, has an output pointer (a query), or there is no simulated runtime).  ``signature(args)``
        is the plan key: each descriptor's version, whether each data or scalar pointer is null, the value of every
        other argument, the simulated architecture (the handle is checked at each call).  ``hit(args)``: the status
        of a planned call, None for a miss.  ``remember(args, ranges)``: plan a call that passed every check."""
        if name in UNPLANNED or self.streams is None:
            return None
        terms, pointers = [], []
        for i, (param, argtype) in enumerate(zip(parameters, argtypes)):
            if param == "handle":
                continue
            if param.endswith("_desc") or param in _DESCRIPTOR_PARAMETERS:
                terms.append(f"of.get(args[{i}])")
            elif argtype is c_void_p:
                terms.append(f"not args[{i}]")
                pointers.append(i)
            elif argtype in _SCALARS:
                terms.append(f"args[{i}]")
            else:  # an output pointer: a query's answer is written at each call
                return None
        terms.append("tuple(getattr(streams, 'compute_capability', CC))")
        signature = _plans.key_function(terms, of=self.versions.of, streams=self.streams, CC=COMPUTE_CAPABILITY)
        at = parameters.index("handle")
        plans, streams, desc = self.plans, self.streams, self.desc
        handles, local = self.cudnn.handles, self.cudnn._local
        blocks = getattr(streams, "blocks", {})  # the simulated allocations: address -> block

        def hit(args):
            if not (desc.caching and streams.null):
                return None
            stream = handles.get(args[at], _MISSING)  # the handle is live: its stream
            plan = plans.get(signature(args)) if stream is not _MISSING else None
            if plan is None:
                return None
            for index, ptr, nbytes, what in plan:  # each operand still fits its allocation
                ptr = ptr if index is None else args[index]
                block = blocks.get(ptr)  # (check_range's common case, inline: no call per operand)
                if block is None or nbytes > len(block):
                    try:
                        streams.check_range(ptr, nbytes, what)
                    except BaseException as exc:  # as the checks of a miss report it
                        local.failure = exc
                        return int(Status.INTERNAL_ERROR)
            if streams.captures:  # a graph being captured records a node, as for a miss (outside a capture
                streams.submit(stream, _no_work)  # the null device drops the work)
            return 0

        def remember(args, ranges) -> None:
            """Plan a call that passed every check unless a descriptor has no version: the operand ranges, each
            (the index of the pointer argument it starts at, or None and its fixed address, bytes, what).  A call
            with two pointer arguments at one address is not planned (whose range is whose cannot be told)."""
            key = signature(args)
            if not (desc.caching and streams.null) or None in key:
                return
            plan = []
            for ptr, nbytes, what in ranges:
                found = [i for i in pointers if args[i] == ptr]
                if len(found) > 1:
                    return
                plan.append((found[0], None, nbytes, what) if found else (None, ptr, nbytes, what))
            plans.remember(key, tuple(plan))

        return signature, hit, remember

    # ------------------------------------------------------------------------------------------- one call
    def wrap(self, name: str, model):
        """The callable for the modelled ``name``: its arguments go through a ctypes function pointer of pymagma's
        prototype (converted and checked exactly as for the library), then a planned call's checks
        (:meth:`function`) or the model; a refusal (:class:`ModelError`) becomes its status and the text
        cudnnGetLastErrorString returns, any other exception is raised to the caller."""
        cudnn = self.cudnn
        restype, argtypes = cd.PROTOTYPES[name]
        prototype = ctypes.CFUNCTYPE(restype, *argtypes)
        parameters = list(inspect.signature(model).parameters)
        queued = "handle" in parameters  # checks, then returns its device work
        at = parameters.index("handle") if queued else None
        planned = self.function(name, parameters, argtypes) if queued else None
        hit, remember = (None, None) if planned is None else planned[1:]
        streams = self.streams

        def check(ptr: int, nbytes: int, what: str) -> None:
            """An operand a model views must fit the simulated allocation it starts in (memory the simulator did not
            allocate is not checked, as for copies): :class:`~pymagma.errors.DeviceMemoryError` otherwise."""
            if streams is not None:
                streams.check_range(ptr, nbytes, f"{name} {what}")

        # A Destroy call computes nothing and is what finalizers make: the garbage collector may run them in the
        # middle of a context-variable update (CPython's contextvar_set allocates, which may collect), and setting
        # a context variable there (np.errstate) would free the context the outer update still reads.
        quiet = contextlib.nullcontext if name.startswith("cudnnDestroy") else _ignore_float_errors

        def native(*converted):
            if hit is not None and (status := hit(converted)) is not None:
                return status
            try:
                with quiet():  # a GPU computes NaN/inf silently
                    # each operand's range, checked as it is viewed (a call made inside this one, e.g. by a
                    # finalizer the garbage collector runs, keeps and gives back this call's record)
                    outer = getattr(viewing, "viewed", None), getattr(viewing, "check", None)
                    viewing.viewed, viewing.check = [], check
                    try:
                        work = model(*converted)
                    finally:
                        viewed = viewing.viewed
                        viewing.viewed, viewing.check = outer
                    if queued and callable(work):
                        ranges = [(ptr, nbytes, f"{name} {what}") for ptr, nbytes, what in viewed]
                        cudnn._enqueue(converted[at], work)
                        if remember is not None:
                            remember(converted, ranges)
            except ModelError as exc:
                cudnn._local.error = f"{name}: {exc}"
                return int(exc.status)
            except BaseException as exc:  # ctypes would only print it: keep it for the caller
                cudnn._local.failure = exc
                return int(Status.INTERNAL_ERROR)
            return 0

        callback = prototype(native)

        def call(*args):
            cudnn.calls.append(name)
            cudnn._local.failure = None
            status = callback(*args)
            failure, cudnn._local.failure = cudnn._local.failure, None
            if failure is not None:
                raise failure
            return status

        call.callback = callback  # alive as long as the wrapper
        return call

    # ------------------------------------------------------------------------------------- descriptor versions
    def versioned(self, name: str, real):
        """A host call that creates, sets or destroys a descriptor: the descriptor gets a new version (or none, once
        destroyed), so that no plan or cached read of it outlives the change."""
        if name.startswith("cudnnCreate"):
            def create(out):
                status = real(out)
                self.touch(_plans.out_address(out))
                return status

            return create
        if name.startswith(("cudnnDestroy", "cudnnSet")) or name == "cudnnDeriveBNTensorDescriptor":
            destroys = name.startswith("cudnnDestroy")

            def change(desc, *rest):
                status = real(desc, *rest)
                self.touch(_plans.address(desc), forget=destroys)
                return status

            return change
        return real

    def touch(self, desc: int | None, forget: bool = False) -> None:
        """``desc`` changed: a new version (``forget``: destroyed, none); an address that cannot be told drops every
        version, cached read and plan."""
        if desc is None:
            self.versions.clear()
            self.desc.forget()
            self.plans.clear()
        elif forget:
            self.versions.forget(desc)
            self.desc.forget(desc)
        elif desc:
            self.versions.touch(desc)
