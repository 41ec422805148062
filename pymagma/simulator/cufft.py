"""cuFFT on the simulator: the functions of :data:`pymagma._cufft.PROTOTYPES`, modelled from cuFFT's documentation.

Plans: ``cufftCreate`` hands out a handle, ``cufftMakePlanMany64`` checks the plan's arguments and records its
layout, ``cufftSetStream`` its stream, ``cufftDestroy`` forgets it; a handle never made or already destroyed is
``CUFFT_INVALID_PLAN``.  Plan arguments, as documented: a rank outside 1..3 or a null ``n`` is
``CUFFT_INVALID_VALUE``, a size or batch below 1 ``CUFFT_INVALID_SIZE``, an unknown type ``CUFFT_INVALID_TYPE``;
``inembed`` or ``onembed`` NULL is the basic layout (packed data, strides and distances ignored: the real side of
R2C/C2R has ``n`` elements a transform, the complex side ``n[:-1] + [n[-1] // 2 + 1]``), otherwise the advanced
layout, where element ``(x, y, z)`` of transform ``b`` is at ``b * idist + ((x * inembed[1] + y) * inembed[2] + z)
* istride`` (``inembed[0]`` unused; the same with ``o*`` for the output).  The simulator also refuses (``CUFFT_
INVALID_VALUE``) strides below 1, negative distances and embeds smaller than the data they hold.

Execution: the function must match the plan's type and the direction be CUFFT_FORWARD or CUFFT_INVERSE, the data
pointers non-null (else ``CUFFT_INVALID_VALUE``, nothing computed, recorded in ``rejected``).  The model gathers
every transform's input through the plan's input layout, computes the unnormalised transforms (forward:
``sum x[k] exp(-2 pi i jk / n)``, inverse the ``+`` sign, no ``1/n``: ``inverse(forward(x)) = n x``; R2C keeps the
``n[-1] // 2 + 1`` non-redundant outputs of the last dimension, C2R reads only those and ignores the imaginary parts
that a Hermitian input has zero), and scatters the results through the output layout, in the order of the plan's
stream (captured into a graph like any work).  An out-of-place C2R overwrites its input, as documented: the model
fills what it read with NaN.  In place (``idata == odata``) needs the output to sit over its own input: C2C the same
layout, R2C/C2R the padded layout (each row of the complex side over the bytes of its real row: the same strides in
their own units, pitches and distances of the real side twice the complex side's); other in-place layouts are
refused.
The data's extent is checked against the simulated allocations (``DeviceMemoryError``).
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import math

import numpy as np

from .. import _cufft as F
from ._table import TableLibrary
from .magma import address, view

LIBRARY_NAME = "pymagma's simulated cuFFT"
VERSION = 12000  #: what cufftGetVersion answers: the cuFFT the model follows (12.0)
_handles = itertools.count(1)
_EXEC_TYPES = {name: t for t, (name, *_) in F.EXEC.items()}


def _ints(ptr, count: int) -> tuple[int, ...]:
    return tuple((ctypes.c_longlong * count).from_address(address(ptr)))


def _sides(t: F.Type, n: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The logical shape of one transform's input and output (the complex side of R2C/C2R is the half spectrum)."""
    half = (*n[:-1], n[-1] // 2 + 1)
    if t in (F.Type.R2C, F.Type.D2Z):
        return n, half
    if t in (F.Type.C2R, F.Type.Z2D):
        return half, n
    return n, n


def _pitches(embed: tuple[int, ...]) -> tuple[int, ...]:
    """Element pitch of each dimension in a row-major array of dimensions ``embed`` (``embed[0]`` unused)."""
    return tuple(math.prod(embed[k + 1:]) for k in range(len(embed)))


class SimulatedCufft(TableLibrary):
    """The simulated cuFFT library object: ``bind``/``has``/``missing`` and attribute calls like
    :class:`~pymagma._ffi.NativeLibrary`.  ``streams`` is the simulated runtime.  ``plans`` maps live handles to
    their state; ``calls`` holds the latest calls' names, ``rejected`` ``(call, status, why)`` for each refusal."""

    PROTOTYPES, LABEL = F.PROTOTYPES, "cuFFT"

    path = LIBRARY_NAME

    def __init__(self, streams=None):
        self.streams = streams
        self.plans: dict[int, dict] = {}
        self.calls: collections.deque[str] = collections.deque(maxlen=100_000)
        self.rejected: list[tuple[str, int, str]] = []
        self._models = {"cufftGetVersion": self._version, "cufftCreate": self._create,
                        "cufftMakePlanMany64": self._make_plan, "cufftSetStream": self._set_stream,
                        "cufftDestroy": self._destroy, **{name: self._exec_model(name) for name in _EXEC_TYPES}}

    def _reject(self, name: str, status: int, why: str) -> int:
        self.rejected.append((name, int(status), why))
        return int(status)

    # ------------------------------------------------------------------------------------------------- plans
    def _version(self, out) -> int:
        ctypes.c_int.from_address(address(out)).value = VERSION
        return F.Result.SUCCESS

    def _create(self, out) -> int:
        handle = next(_handles)
        self.plans[handle] = {"layout": None, "stream": 0}
        ctypes.c_int.from_address(address(out)).value = handle
        return F.Result.SUCCESS

    def _set_stream(self, handle, stream) -> int:
        plan = self.plans.get(int(handle))
        if plan is None:
            return self._reject("cufftSetStream", F.Result.INVALID_PLAN, f"plan {handle}")
        plan["stream"] = address(stream)
        return F.Result.SUCCESS

    def _destroy(self, handle) -> int:
        if self.plans.pop(int(handle), None) is None:
            return self._reject("cufftDestroy", F.Result.INVALID_PLAN, f"plan {handle}")
        return F.Result.SUCCESS

    def _make_plan(self, handle, rank, n, inembed, istride, idist, onembed, ostride, odist, type_, batch,
                   work) -> int:
        name = "cufftMakePlanMany64"
        plan = self.plans.get(int(handle))
        if plan is None:
            return self._reject(name, F.Result.INVALID_PLAN, f"plan {handle}")
        if not 1 <= rank <= F.MAX_RANK or not address(n):
            return self._reject(name, F.Result.INVALID_VALUE, f"rank {rank} (1, 2 or 3) or a null n")
        try:
            t = F.Type(int(type_))
        except ValueError:
            return self._reject(name, F.Result.INVALID_TYPE, f"type {type_}")
        sizes = _ints(n, rank)
        if min(sizes) < 1 or batch < 1:
            return self._reject(name, F.Result.INVALID_SIZE, f"n = {sizes}, batch = {batch}")
        shape_in, shape_out = _sides(t, sizes)
        if not address(inembed) or not address(onembed):  # the basic layout: packed, strides and distances ignored
            layout = (shape_in, 1, math.prod(shape_in), shape_out, 1, math.prod(shape_out))
        else:
            inemb, onemb = _ints(inembed, rank), _ints(onembed, rank)
            for side, emb, shape, stride, dist in (("input", inemb, shape_in, istride, idist),
                                                    ("output", onemb, shape_out, ostride, odist)):
                if stride < 1 or dist < 0:
                    return self._reject(name, F.Result.INVALID_VALUE, f"{side} stride {stride}, distance {dist}")
                if any(e < s for e, s in zip(emb[1:], shape[1:])):
                    return self._reject(name, F.Result.INVALID_VALUE, f"{side} embed {emb} smaller than {shape}")
            layout = ((*shape_in[:1], *inemb[1:]), istride, idist, (*shape_out[:1], *onemb[1:]), ostride, odist)
        lay = {"type": t, "n": sizes, "batch": int(batch), "in": (shape_in, *layout[:3]), "out": (shape_out,
                                                                                                  *layout[3:])}
        _, _, itype, otype = F.EXEC[t]
        lay["strided"] = (self._strided(int(batch), lay["in"], itype), self._strided(int(batch), lay["out"], otype))
        plan["layout"] = lay
        if address(work):
            ctypes.c_size_t.from_address(address(work)).value = 0
        return F.Result.SUCCESS

    # ------------------------------------------------------------------------------------------------- execution
    def _exec_model(self, name: str):
        t_exec = _EXEC_TYPES[name]
        takes_direction = F.EXEC[t_exec][1]

        def model(handle, idata, odata, *direction) -> int:
            return self._exec(name, t_exec, handle, address(idata), address(odata),
                              direction[0] if takes_direction else None)

        return model

    @staticmethod
    def _strided(batch: int, side, dtype) -> tuple:
        """(shape, strides in elements, bytes spanned) of the ``batch`` transforms of one side of a plan."""
        shape, embed, stride, dist = side
        strides = (dist, *(p * stride for p in _pitches(embed)))
        full = (batch, *shape)
        extent = sum((k - 1) * s for k, s in zip(full, strides)) + 1
        return full, strides, extent * np.dtype(dtype).itemsize

    def _exec(self, name, t_exec, handle, idata, odata, direction) -> int:
        plan = self.plans.get(int(handle))
        if plan is None or plan["layout"] is None:
            return self._reject(name, F.Result.INVALID_PLAN, f"plan {handle} (not made, or destroyed)")
        layout = plan["layout"]
        t = layout["type"]
        if t != t_exec:
            return self._reject(name, F.Result.INVALID_VALUE, f"a {t.name} plan")
        if direction is not None and direction not in (F.FORWARD, F.INVERSE):
            return self._reject(name, F.Result.INVALID_VALUE, f"direction {direction}")
        if not idata or not odata:
            return self._reject(name, F.Result.INVALID_VALUE, "a null data pointer")
        _, _, itype, otype = F.EXEC[t]
        (ishape, istrides, ibytes), (oshape, ostrides, obytes) = layout["strided"]
        if idata == odata:
            why = self._in_place_refusal(t, layout)
            if why:
                return self._reject(name, F.Result.INVALID_VALUE, why)
        if self.streams is not None:
            self.streams.check_range(idata, ibytes, f"{name} input")
            self.streams.check_range(odata, obytes, f"{name} output")
        rank = len(layout["n"])
        axes = tuple(range(1, rank + 1))

        def run():
            data = np.array(view(idata, ishape, istrides, itype))  # every input read before anything is written
            with np.errstate(all="ignore"):
                if t in (F.Type.C2C, F.Type.Z2Z):
                    out = np.fft.fftn(data, axes=axes) if direction == F.FORWARD else \
                        np.fft.ifftn(data, axes=axes, norm="forward")
                elif t in (F.Type.R2C, F.Type.D2Z):
                    out = np.fft.rfftn(data, axes=axes)
                else:
                    out = np.fft.irfftn(data, s=layout["n"], axes=axes, norm="forward")
                    if idata != odata:  # documented: an out-of-place C2R overwrites its input
                        view(idata, ishape, istrides, itype)[...] = np.nan
            view(odata, oshape, ostrides, otype)[...] = out.astype(otype)

        stream = plan["stream"]
        if self.streams is None:
            run()
        else:
            self.streams.submit(stream, run)
        return F.Result.SUCCESS

    @staticmethod
    def _in_place_refusal(t, layout) -> str | None:
        (_, iemb, istride, idist), (_, oemb, ostride, odist) = layout["in"], layout["out"]
        ip, op = _pitches(iemb), _pitches(oemb)
        if t in (F.Type.C2C, F.Type.Z2Z):
            same = ip[:-1] == op[:-1] and istride == ostride and idist == odist
        else:  # real positions are twice the complex ones
            real, cplx = ((ip, istride, idist), (op, ostride, odist)) if t in (F.Type.R2C, F.Type.D2Z) else \
                ((op, ostride, odist), (ip, istride, idist))
            same = all(r * real[1] == 2 * c * cplx[1] for r, c in zip(real[0][:-1], cplx[0][:-1])) and \
                real[1] == cplx[1] and real[2] == 2 * cplx[2]
        return None if same else "an in-place layout whose rows of output do not sit over their own rows of input"
