"""MultiHeadAttention: Keras' layer and weight names, PyTorch's math (``scaled_dot_product_attention``)."""

from __future__ import annotations

import numpy as np

from .. import _checks, initializers
from .. import functional as F
from .base import Layer, _is_symbolic, derive_seed, register

__all__ = ["MultiHeadAttention"]


@register
class MultiHeadAttention(Layer):
    _weight_options = ("kernel", "bias")  # each projection's, as Keras'

    """Multi-head scaled dot-product attention over sequences (batch, time, features).

    Called as Keras calls it, ``layer(query, value, key=None, use_causal_mask=False)``, or on ``query`` alone
    (self-attention), ``[query, value]`` or ``[query, key, value]`` (key defaults to value), the list optionally
    followed by a key mask of per-sample shape (key_time,): 1 where a key is a real token, 0 where it is
    padding (Keras' convention; PyTorch's ``key_padding_mask`` is its negation), booleans or numbers 0 and 1 only (an
    additive mask of 0 and -inf is refused: a host mask at once, a device mask by a check kernel reported at the next
    host read, such as fit's progress read or the end of predict). A query with no key left (all padding, or causal)
    attends to nothing: zeros. Weights: ``query_kernel`` (d_query, heads*key_dim), ``key_kernel`` (d_key,
    heads*key_dim), ``value_kernel`` (d_value, heads*value_dim), ``output_kernel`` (heads*value_dim, d_query) and the
    matching ``*_bias``; scores are scaled by 1/sqrt(key_dim), ``causal`` lets query i see keys j <= i, ``dropout``
    drops attention probabilities while training. The output has the query's shape. Memory: the (batch, heads,
    query_time, key_time) scores and probabilities. Masks from ``Embedding(mask_zero=True)``
    (Keras): the value's (and key's) mask hides padded keys, the query's zeroes the attention of padded queries
    (their output is the output bias) and is passed on.
    """

    supports_masking = uses_mask = True

    def __init__(self, num_heads: int, key_dim: int, value_dim: int | None = None, dropout: float = 0.0,
                 causal: bool = False, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        owner = f"MultiHeadAttention {self.name!r}"
        self.num_heads = _checks.integer(num_heads, "num_heads", owner, minimum=1)
        self.key_dim = _checks.integer(key_dim, "key_dim", owner, minimum=1)
        self.value_dim = self.key_dim if value_dim is None else _checks.integer(value_dim, "value_dim", owner,
                                                                                minimum=1)
        self.dropout = _checks.real(dropout, "dropout", owner, 0.0, 1.0, open_high=True)
        for name, flag in (("causal", causal), ("use_bias", use_bias)):
            if not isinstance(flag, (bool, np.bool_)):  # bool("False") would be True
                raise TypeError(f"{owner}: {name} must be True or False, got {flag!r}")
        self.causal = bool(causal)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.rng = None

    @staticmethod
    def _split(input_shape):
        """(query, key, value, key mask or None) per-sample shapes from what the layer was called on."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        mask = shapes[-1] if len(shapes) > 1 and len(shapes[-1]) == 1 else None
        seqs = shapes[:-1] if mask is not None else shapes
        query, value = seqs[0], seqs[-1]
        key = seqs[1] if len(seqs) == 3 else value
        return seqs, query, key, value, mask

    def check_input_shape(self, input_shape):
        expected = ("query, [query, value] or [query, key, value] of per-sample shape (time, features), "
                    "optionally followed by a key mask (key_time,)")
        if input_shape == []:
            raise self.shape_error(expected, input_shape)
        seqs, query, key, value, mask = self._split(input_shape)
        if not 1 <= len(seqs) <= 3 or any(len(s) != 2 for s in seqs):
            raise self.shape_error(expected, input_shape)
        if query[0] == 0 or key[0] == 0:
            raise self.shape_error(f"at least one query and one key time step; {expected}", input_shape)
        if key[0] != value[0]:
            raise self.shape_error(f"key and value of one length (key_time); {expected}", input_shape)
        if mask is not None and mask[0] != key[0]:
            raise self.shape_error(f"a key mask of per-sample shape ({key[0]},), the keys' time; {expected}",
                                   input_shape)

    def compute_output_shape(self, input_shape):
        return self._split(input_shape)[1]

    def check_key_mask(self, mask, who: str) -> None:
        """A key mask against what a mask holds (the model calls it on the input data the mask comes from): a host
        mask at once, a device one by a check kernel reported at the next host read."""
        F.check_key_mask_values(mask, f"{who}: MultiHeadAttention layer {self.name!r}", self.xp)

    def create_weights(self, input_shape):
        _, query, key, value, _ = self._split(input_shape)
        inner_k, inner_v = self.num_heads * self.key_dim, self.num_heads * self.value_dim
        for name, rows, cols in (("query", query[1], inner_k), ("key", key[1], inner_k),
                                 ("value", value[1], inner_v), ("output", inner_v, query[1])):
            self.add_weight(f"{name}_kernel", (rows, cols), self.kernel_initializer, **self._weight_kwargs("kernel"))
            if self.use_bias:
                self.add_weight(f"{name}_bias", (cols,), self.bias_initializer, **self._weight_kwargs("bias"))
        self.rng = self.xp.rng(derive_seed(self._build_seed, 1))

    def _heads(self, x, which: str, size: int):
        """Project (B, T, d) with ``which``'s kernel and split the heads: (B, H, T, size)."""
        p = self._params
        y = F.dense(x, p[f"{which}_kernel"], p.get(f"{which}_bias"))
        return F.transpose(F.reshape(y, (y.shape[0], y.shape[1], self.num_heads, size)), (0, 2, 1, 3))

    def __call__(self, query, value=None, key=None, *, training=False, use_causal_mask=None):
        """Keras' call. ``use_causal_mask`` (default: the layer's ``causal``) holds for this call when called on
        data; called on symbolic inputs it becomes the layer's ``causal``, which a model's every call of the layer
        shares (saved with it), so a second symbolic call asking otherwise is an error."""
        if value is None:
            if key is not None:
                raise TypeError(f"MultiHeadAttention {self.name!r}: key= was given without value=; call it as "
                                "layer(query, value, key=key)")
            inputs = query
        elif isinstance(query, (list, tuple)):
            raise TypeError(f"MultiHeadAttention {self.name!r}: pass either a list [query, (key,) value] or "
                            "query, value (and key=), not both")
        elif isinstance(value, (bool, np.bool_)):
            raise TypeError(f"MultiHeadAttention {self.name!r}: value must be a sequence, got {value!r}; pass "
                            "training= by keyword")
        else:
            inputs = [query, value] if key is None else [query, key, value]
        last = inputs[-1] if isinstance(inputs, (list, tuple)) and len(inputs) > 1 else None
        if isinstance(last, np.ndarray) and last.ndim == 2:  # a host key mask, checked before a device holds it
            self.check_key_mask(last, "call")
        if use_causal_mask is not None and not isinstance(use_causal_mask, (bool, np.bool_)):
            raise TypeError(f"MultiHeadAttention {self.name!r}: use_causal_mask must be True or False, got "
                            f"{use_causal_mask!r}")
        causal = self.causal if use_causal_mask is None else bool(use_causal_mask)
        if any(_is_symbolic(i) for i in (inputs if isinstance(inputs, list) else [inputs])):
            if causal != self.causal and "_first_symbolic_call" in self.__dict__:
                raise ValueError(f"MultiHeadAttention {self.name!r}: use_causal_mask={causal} in a model that "
                                 f"already calls this layer with use_causal_mask={self.causal}; a layer is causal "
                                 "in all of a model's calls or in none (use two layers)")
            self.causal = causal
            return super().__call__(inputs, training=training)
        saved, self.causal = self.causal, causal
        try:
            return super().__call__(inputs, training=training)
        finally:
            self.causal = saved

    def call(self, x, training=False, mask=None):
        seqs = x if isinstance(x, list) else [x]
        given = seqs[-1] if len(seqs) > 1 and seqs[-1].ndim == 2 else None
        seqs = seqs[:-1] if given is not None else seqs
        query, value = seqs[0], seqs[-1]
        key = seqs[1] if len(seqs) == 3 else value
        if given is not None:  # a device mask behind other layers too (its message, not masked_softmax's)
            self.check_key_mask(given.data, "call")
        masks = mask if isinstance(mask, list) else [mask] * len(seqs)
        query_mask = masks[0]
        keys_masks = [m for m in (masks[len(seqs) - 1], masks[1] if len(seqs) == 3 else None, given) if m is not None]
        mask = keys_masks[0] if keys_masks else None
        for other in keys_masks[1:]:
            mask = F.multiply(mask, other)
        q = self._heads(query, "query", self.key_dim)
        k = self._heads(key, "key", self.key_dim)
        v = self._heads(value, "value", self.value_dim)
        o = F.scaled_dot_product_attention(q, k, v, key_mask=mask, causal=self.causal,
                                           dropout_rate=self.dropout, training=training, rng=self.rng)
        b, t = query.shape[0], query.shape[1]
        o = F.reshape(F.transpose(o, (0, 2, 1, 3)), (b, t, self.num_heads * self.value_dim))
        if query_mask is not None:  # a padded query attends to nothing (Keras)
            o = F.multiply(o, F.reshape(query_mask, (b, t, 1)))
        return F.dense(o, self._params["output_kernel"], self._params.get("output_bias"))

    def compute_mask(self, inputs, mask):
        return mask[0] if isinstance(mask, list) else mask  # the query's

    def output_masked(self, masked):
        return masked[0] if isinstance(masked, list) else masked

    def get_config(self):
        return {"num_heads": self.num_heads, "key_dim": self.key_dim, "value_dim": self.value_dim,
                "dropout": self.dropout, "causal": self.causal, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}
