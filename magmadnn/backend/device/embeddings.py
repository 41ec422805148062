"""Device embeddings (kernels of device/kernels/embeddings.cu).

The gather never reads outside the table (NaN rows there); ids are checked before it by ``functional.embedding``
(a check kernel, reported at the next host read: see ``faults``), and Model checks its host data against every
Embedding once per call, before any batch runs."""

from __future__ import annotations

from .kernels import embeddings as _embeddings

#: The gather kernel (NaN rows for indices outside the table, never a read outside it), indices of any integer dtype.
embedding_forward = _embeddings.embedding_forward
#: The deterministic scatter-add kernel (one block per table row, indices in order): ``(dy, indices, num_rows)``.
embedding_backward = _embeddings.embedding_backward_op
