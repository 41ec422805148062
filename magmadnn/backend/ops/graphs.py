"""Optional ops for graph replay (:mod:`magmadnn.models.graphed`, ``compile(graph=True)``): a backend that can
capture its work as CUDA graphs adds them."""

from __future__ import annotations

from ._spec import optional


@optional
def graph_capture(like):
    """A context manager capturing the work queued in its block on ``like``'s queue as a graph with ``launch()``
    and ``destroy()``; work that cannot be captured raises an error naming it, and the block's arrays belong to the
    graph."""


@optional
def staging_buffer(layout, like):
    """Static device arrays ``views`` of ``layout`` ``[(shape, dtype), ...]`` with host arrays to fill (``host()``)
    and ``upload()``, which queues their copy to the device on ``like``'s queue."""


@optional
def copy_into(dst, src):
    """``src`` into the existing array ``dst`` of the same shape and dtype, queued on the device."""
