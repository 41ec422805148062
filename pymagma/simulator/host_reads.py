"""The host's reads of device data on the simulated device, counted by call.

A read is a copy that brings device memory into host memory (``cudaMemcpy``, ``cudaMemcpyAsync``, ``cudaMemcpy2D``,
``cudaMemcpy2DAsync``; ``cudaMemcpyDefault`` judged by its pointers) or a MAGMA routine that returns a value computed
on the device (a dot product, a norm, a LAPACK driver's info). Uploads, device-to-device copies, memsets, kernels,
cuDNN and cuBLAS calls read nothing. ``SimulatedCudart.host_reads`` holds the count; snapshot :meth:`HostReads.total`
around a piece of work (an op, an op node) to count that work's reads.
"""

from __future__ import annotations

import collections

__all__ = ["HostReads", "reads_device"]


class HostReads(collections.Counter):
    """Reads of device data by the host: call name -> count."""

    def note(self, call: str) -> None:
        self[call] += 1

    def total(self) -> int:
        return sum(self.values())

    def copy(self, runtime, from_host: bool, to_host: bool, src: int, dst: int, call: str) -> None:
        """Count the copy ``call`` of ``runtime`` when it brings device data to the host (:func:`reads_device`)."""
        if reads_device(runtime, from_host, to_host, src, dst):
            self.note(call)


def reads_device(runtime, from_host: bool, to_host: bool, src: int, dst: int) -> bool:
    """Whether a copy from ``src`` to ``dst`` in the direction its kind names brings device data to the host. A kind
    naming neither side as host (device to device, ``cudaMemcpyDefault``) is judged by the pointers: a block the
    runtime allocated that is not pinned is device memory, any other address host memory."""
    if from_host or to_host:
        return to_host and not from_host
    blocks = runtime._block_of(src), runtime._block_of(dst)
    device = [b is not None and b not in runtime.pinned_blocks for b in blocks]
    return device[0] and not device[1]
