"""Embedding: integer token ids of any per-sample shape -> their rows of a learned table."""

from __future__ import annotations

import numpy as np

from .. import _checks, initializers
from .. import functional as F
from ..autograd import Tensor
from ..functional._base import check_values
from .base import Layer, register

__all__ = ["Embedding"]


@register
class Embedding(Layer):
    """``embeddings[ids]``: ids (N, ...) of an integer Input (``Input((T,), dtype="int64")``) -> (N, ..., output_dim).

    Weight ``embeddings`` (input_dim, output_dim), Keras' uniform(-0.05, 0.05) by default. An id outside
    [0, input_dim) is a ValueError naming the layer before any batch runs (the model checks its host data once per
    call); the device kernel never reads outside the table either. The gradient is a deterministic scatter-add.
    ``mask_zero=True`` (sequences (N, T) only): id 0 is padding; the output carries a mask that LSTM, GRU,
    Bidirectional, GlobalAveragePooling1D and MultiHeadAttention use and Dense, Dropout, Activation,
    LayerNormalization pass on (as Keras); any other layer after it refuses the masked input.
    """

    _weight_options = ("embeddings",)  # embeddings_regularizer=, embeddings_constraint=

    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer="uniform", mask_zero: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        owner = f"Embedding {self.name!r}"
        self.input_dim = _checks.integer(input_dim, "input_dim", owner, minimum=1)
        self.output_dim = _checks.integer(output_dim, "output_dim", owner, minimum=1)
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        if not isinstance(mask_zero, bool):
            raise TypeError(f"{owner}: mask_zero must be True or False, got {mask_zero!r}")
        self.mask_zero = self.makes_mask = mask_zero
        self._mask_table = None

    def check_input_shape(self, input_shape):
        if isinstance(input_shape, list):
            raise self.shape_error("one input of integer ids", input_shape)
        if self.mask_zero and len(input_shape) != 1:
            raise self.shape_error("a per-sample sequence of ids (time,) with mask_zero=True (the mask is per step)",
                                   input_shape)

    def output_masked(self, masked):
        return self.mask_zero

    def compute_mask(self, inputs, mask):
        """With ``mask_zero``: 1.0 where an id is not 0, else 0.0, (N, T) — the rows of a constant (input_dim, 1)
        table (0 for id 0, 1 for the others) looked up by the same op as the embeddings, so on the device too."""
        if not self.mask_zero:
            return None
        return F.reshape(F.embedding(self._mask_lookup_table(), inputs), inputs.shape)

    def move_to(self, backend, move) -> None:
        super().move_to(backend, move)
        if self.mask_zero:
            self._mask_lookup_table()

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def create_weights(self, input_shape):
        self.add_weight("embeddings", (self.input_dim, self.output_dim), self.embeddings_initializer,
                        **self._weight_kwargs("embeddings"))
        self._mask_table = None
        if self.mask_zero:  # made with the weights, so a captured (graph-replayed) step never uploads it
            self._mask_lookup_table()

    def _mask_lookup_table(self) -> Tensor:
        """The constant (input_dim, 1) table of ``compute_mask``: 0 for id 0, 1 for the others (not a weight)."""
        table = self._mask_table
        if table is None or table.xp is not self.xp or table.dtype != self.dtype:
            host = np.ones((self.input_dim, 1), self.dtype)
            host[0] = 0.0
            table = self._mask_table = Tensor(self.xp.asarray(host, self.dtype), backend=self.xp)
        return table

    def check_input_values(self, ids: np.ndarray, who: str) -> None:
        """Host ids against the table (called by the model on its input data before any batch)."""
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{who}: Embedding layer {self.name!r} takes integer ids, got dtype {ids.dtype}; use "
                            "Input(shape, dtype='int64')")
        if ids.size and (ids.min() < 0 or ids.max() >= self.input_dim):
            bad = ids[(ids < 0) | (ids >= self.input_dim)].flat[0]
            raise ValueError(f"{who}: Embedding layer {self.name!r} has input_dim={self.input_dim}, so ids must be in "
                             f"[0, {self.input_dim}); got id {bad}")

    def _as_tensor(self, x):
        """Eager calls keep integer ids integer (the base class would make them floats)."""
        if isinstance(x, Tensor):
            return x
        array = np.asarray(x)
        self.check_input_values(array, "call")  # float or bool ids: a TypeError naming the layer and their dtype
        return Tensor(array.astype(np.int64, copy=False), backend=self.xp)

    def call(self, x, training=False):
        return F.embedding(self._params["embeddings"], x)

    def _plan_call(self, x, training):
        table = self._params["embeddings"]
        xp, shape, dtype, rows = table.xp, table.data.shape, table.data.dtype, table.data.shape[0]
        apply, check, wrap = F.EmbeddingFunction.apply, check_values, Tensor._wrap
        message = (f"embedding: index {{bad}} is out of range for a table of {rows} rows; expected indices in "
                   f"[0, {rows})")
        ids = x.data.__class__  # the backend's own arrays (a device's): checked by its kernel, taken as they are
        own = ids is not np.ndarray and xp.asarray(x.data) is x.data
        check_range = getattr(xp, "check_range", None) if own else None

        def run(layer, x):  # the ids' values checked at each call, as F.embedding does
            table = layer._params["embeddings"]
            if table.data.shape != shape or table.data.dtype != dtype:
                return layer._run(x, training)
            data = x.data
            if own and data.__class__ is ids and table.xp is xp:
                if check_range is not None:
                    check_range(data, 0, rows, message)
                return apply(table, wrap(data, xp))
            check(table.xp, data, message, 0, rows)
            if isinstance(data, np.ndarray):
                data = data.astype(np.int64, copy=False)
            return apply(table, table.xp.asarray(data))

        return run

    def get_config(self):
        return {"input_dim": self.input_dim, "output_dim": self.output_dim,
                **({"mask_zero": True} if self.mask_zero else {}),
                "embeddings_initializer": self.embeddings_initializer.to_config(), **super().get_config()}
