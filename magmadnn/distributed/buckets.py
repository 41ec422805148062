"""Gradient buckets and the averager: the gradients and loss of every rank summed by Allreduce on flat buffers.

The buffers are buckets of at most ``Options.bucket_mb`` MiB (a model under that size gets one fused buffer and one
Allreduce per step), filled last layer first (:func:`plan_buckets`); with ``overlap`` each bucket's ``Iallreduce`` is
posted from the backward pass as soon as its gradients are final (an autograd hook). The sum of each value does not
depend on the bucketing: with 2 ranks the results are bit-identical to one fused buffer.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import backend
from .environment import _float_type, _mpi

__all__ = ["GradientAverager", "plan_buckets"]


class _Bucket:
    """Consecutive gradients (``params`` positions, sizes) in one flat buffer; the last bucket starts with the header
    ``[w*loss, w]`` (read back alone from a device buffer)."""

    def __init__(self, positions, sizes, header: bool):
        self.positions, self.sizes, self.header = list(positions), list(sizes), header
        self.offsets = (np.concatenate([[0], np.cumsum(self.sizes)]) + (2 if header else 0)).astype(int)
        self.values = int(self.offsets[-1])
        self.buffer = None


def plan_buckets(sizes, itemsize: int, bucket_bytes: float) -> list[list[int]]:
    """Parameter positions per bucket: the parameters in reverse order (the backward pass finishes the last layer's
    gradients first), each bucket filled up to ``bucket_bytes`` (a parameter larger than that alone), the last
    bucket also holding the 2-value header."""
    buckets, current, used = [], [], 0
    for position in reversed(range(len(sizes))):
        nbytes = sizes[position] * itemsize
        if current and used + nbytes > bucket_bytes:
            buckets.append(current)
            current, used = [], 0
        current.append(position)
        used += nbytes
    buckets.append(current)
    return buckets


class GradientAverager:
    """The gradients and loss of every rank summed by Allreduce, in buckets of at most ``bucket_bytes``.

    Each bucket is one flat buffer ``[w*g_i, ...]`` (the last one starts with ``[w*loss, w]``) summed over the ranks in
    place; ``w`` is the rank's sample count for a mean-reduced loss (1 for a sum-reduced one, 0 for an empty shard),
    so the result is the gradient and loss of the union of the shards. Buckets are reduced in one order on every
    rank (the sum of each value over the ranks does not depend on the bucketing: with 2 ranks the result is
    bit-identical to one fused buffer; with more, the MPI library may pick another summation order for another
    message size, equal to rounding).

    Staging (``xp``: the model's backend, the host when None): on the host backend the buffers are NumPy arrays the
    gradients are copied into (and read back from as views); on a backend with ``host_empty``/``copy_to_host`` (the
    GPU backend) they are page-locked host buffers; with ``direct`` (a CUDA-aware MPI and a backend with
    ``flat_pack``/``flat_unpack``) they are device arrays handed to MPI by address. ``overlap``: ``ready(leaf)``
    (the autograd hook) posts each bucket's ``Iallreduce`` as soon as its gradients are final, buckets in order;
    ``finish`` posts the rest and waits. ``seconds`` accumulates the time spent packing, reducing and unpacking (the
    wait for the other ranks included), ``steps`` counts the steps.
    """

    def __init__(self, params, dtype, world, xp=None, bucket_bytes: float = math.inf, overlap: bool = False,
                 direct: bool = False):
        self.world, self.MPI, self.xp = world, _mpi(), backend.get("host") if xp is None else xp
        self.params = list(params)
        self.dtype = np.dtype(dtype)
        self.shapes = [tuple(p.data.shape) for p in self.params]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.index = {id(p): i for i, p in enumerate(self.params)}
        plan = plan_buckets(self.sizes, self.dtype.itemsize, bucket_bytes)
        self.buckets = [_Bucket(pos, [self.sizes[i] for i in pos], header=k == len(plan) - 1)
                        for k, pos in enumerate(plan)]
        self.mpi_type = _float_type(self.MPI, dtype)
        self.overlap, self.direct = bool(overlap), bool(direct)
        pinned = xp is not None and hasattr(xp, "host_empty") and hasattr(xp, "copy_to_host")
        for b in self.buckets:
            if self.direct:
                b.buffer = xp.zeros((b.values,), self.dtype)
            elif pinned:
                b.buffer = xp.host_empty((b.values,), self.dtype)
                b.buffer[:] = 0
            else:
                b.buffer = np.zeros(b.values, dtype=self.dtype)
        self.staging = ("device buffers (CUDA-aware MPI)" if self.direct else
                        "page-locked host buffers" if pinned else "host buffers")
        self._copy_to_host = xp.copy_to_host if pinned and not self.direct else None
        self.seconds, self.steps = 0.0, 0
        self._ready: set[int] = set()
        self._next, self._requests = 0, []
        self._weight, self._loss = 0.0, None

    @property
    def buffer_values(self) -> int:
        return sum(b.values for b in self.buckets)

    # -- one step: start, ready (from the backward pass, with overlap), finish
    def start(self, weight: float, loss=None) -> None:
        """A new step: this rank's weight and its loss (a 0-d backend array, read when the last bucket is packed)."""
        self._weight, self._loss = float(weight), loss
        self._ready, self._next, self._requests = set(), 0, []

    def ready(self, leaf) -> None:
        """Autograd hook: ``leaf``'s gradient is final; post every bucket (in order) whose gradients all are."""
        start = time.perf_counter()
        position = self.index.get(id(leaf))
        if position is not None:
            self._ready.add(position)
            while self._next < len(self.buckets) and all(i in self._ready for i in self.buckets[self._next].positions):
                self._post(self._next, nonblocking=True)
                self._next += 1
            if self._requests:
                self.MPI.Request.Testall(self._requests)  # lets MPI progress the posted ones
        self.seconds += time.perf_counter() - start

    def _pack(self, b: _Bucket) -> None:
        xp, w = self.xp, self._weight
        grads = [self.params[i].grad for i in b.positions]
        loss = 0.0
        if b.header and w:
            loss = float(np.asarray(xp.to_numpy(self._loss))) if self._loss is not None else 0.0
        if self.direct:
            arrays = [g if w and g is not None else xp.zeros(self.shapes[i], self.dtype)
                      for i, g in zip(b.positions, grads)]
            if b.header:
                arrays.insert(0, xp.asarray(np.array([loss, 1.0] if w else [0.0, 0.0], dtype=self.dtype)))
            xp.flat_pack(arrays, w, b.buffer)  # returns with the buffer written: MPI may read it
            return
        buf, off = b.buffer, b.offsets
        for k, g in enumerate(grads):
            part = buf[off[k]:off[k + 1]]
            if g is None or w == 0:
                part[:] = 0
            elif self._copy_to_host is not None:
                self._copy_to_host(g, part)
                if w != 1:
                    part *= w
            else:
                np.multiply(np.asarray(xp.to_numpy(g)).reshape(-1), w, out=part)
        if b.header:
            buf[0] = loss * w if w else 0.0
            buf[1] = w

    def _target(self, b: _Bucket):
        if self.direct:  # the device memory itself, by address (the CUDA array interface's pointer)
            ptr = b.buffer.__cuda_array_interface__["data"][0]
            return [self.MPI.buffer.fromaddress(ptr, b.values * self.dtype.itemsize), self.mpi_type]
        return [b.buffer, self.mpi_type]

    def _post(self, k: int, nonblocking: bool) -> None:
        b = self.buckets[k]
        self._pack(b)
        if nonblocking:
            self._requests.append(self.world.Iallreduce(self.MPI.IN_PLACE, self._target(b), op=self.MPI.SUM))
        else:
            self.world.Allreduce(self.MPI.IN_PLACE, self._target(b), op=self.MPI.SUM)

    def finish(self, mean: bool):
        """Post the buckets not posted yet, wait for all -> ``(gradients of all ranks, loss of all ranks)``."""
        start = time.perf_counter()
        for k in range(self._next, len(self.buckets)):
            self._post(k, nonblocking=self.overlap)
        self._next = len(self.buckets)
        if self._requests:
            self.MPI.Request.Waitall(self._requests)
        self._requests = []
        out = self._unpack(mean)
        self.seconds += time.perf_counter() - start
        self.steps += 1
        self._loss = None
        return out

    def _unpack(self, mean: bool):
        xp, last = self.xp, self.buckets[-1]
        grads = [None] * len(self.params)
        if self.direct:
            loss, total = np.asarray(xp.to_numpy(xp.flat_unpack(last.buffer, [(2,)], 1.0)[0])).tolist()
            divisor = total if mean and total > 0 else 1.0
            for b in self.buckets:
                shapes = [(2,)] * b.header + [self.shapes[i] for i in b.positions]
                for i, g in zip(b.positions, xp.flat_unpack(b.buffer, shapes, divisor)[int(b.header):]):
                    grads[i] = g
            return grads, loss / divisor
        total = float(last.buffer[1])
        for b in self.buckets:
            if mean and total > 0:
                b.buffer /= total
            for k, i in enumerate(b.positions):
                grads[i] = xp.asarray(b.buffer[b.offsets[k]:b.offsets[k + 1]].reshape(self.shapes[i]))
        return grads, float(last.buffer[0])
