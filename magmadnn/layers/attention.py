"""MultiHeadAttention (Keras' layer and weight names, PyTorch's math: ``scaled_dot_product_attention``); Keras'
Attention (dot-product) and AdditiveAttention."""

from __future__ import annotations

import math

import numpy as np

from .. import _checks, initializers
from .. import functional as F
from ..autograd import Tensor
from ..functional._base import constant
from .base import Layer, _is_symbolic, derive_seed, register

__all__ = ["MultiHeadAttention", "Attention", "AdditiveAttention"]


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

    def _heads(self, x, which: str, size: int, split: bool = True):
        """Project (B, T, d) with ``which``'s kernel and split the heads: (B, H, T, size); ``split=False``: the
        projection (B, T, H*size) as it is."""
        p = self._params
        y = F.dense(x, p[f"{which}_kernel"], p.get(f"{which}_bias"))
        if not split:
            return y
        return F.transpose(F.reshape(y, (y.shape[0], y.shape[1], self.num_heads, size)), (0, 2, 1, 3))

    def __call__(self, query, value=None, key=None, *, training=False, use_causal_mask=None, attention_mask=None,
                 return_attention_scores=False):
        """Keras' call. ``use_causal_mask`` (default: the layer's ``causal``) holds for this call when called on
        data; called on symbolic inputs it becomes the layer's ``causal``, which a model's every call of the layer
        shares (saved with it), so a second symbolic call asking otherwise is an error. On data, as Keras:
        ``attention_mask`` (N, Tq, Tk) of 1/True where query i may see key j, and ``return_attention_scores=True``
        giving ``(output, scores)`` with scores (N, heads, Tq, Tk)."""
        if not isinstance(return_attention_scores, (bool, np.bool_)):
            raise TypeError(f"MultiHeadAttention {self.name!r}: return_attention_scores must be True or False, got "
                            f"{return_attention_scores!r}")
        if attention_mask is not None or return_attention_scores:
            parts = [query] if value is None else [query, value] + ([] if key is None else [key])
            flat = [p for item in parts for p in (item if isinstance(item, (list, tuple)) else [item])]
            if any(_is_symbolic(i) for i in flat):
                raise TypeError(f"MultiHeadAttention {self.name!r}: attention_mask= and return_attention_scores= "
                                "are taken on data calls here, not in a model; in a model give a key padding mask "
                                "as the last input (or masks from Embedding(mask_zero=True)) and use_causal_mask=")
            self._explicit = (attention_mask, bool(return_attention_scores))
            try:
                return self.__call__(query, value, key, training=training, use_causal_mask=use_causal_mask)
            finally:
                self._explicit = None
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
        if causal == self.causal:  # (nothing to set: the layer's call plans hold)
            return super().__call__(inputs, training=training)
        saved, self.causal = self.causal, causal
        try:
            return super().__call__(inputs, training=training)
        finally:
            self.causal = saved

    def _plan_call(self, x, training):
        """Self-attention on one unmasked sequence (B, T, d) without dropout: the four projections as dense nodes
        and the heads as one ``attention_heads`` node, as :meth:`call` runs them."""
        if x.__class__ is list or x.ndim != 3 or (self.dropout and training) or \
                self.__dict__.get("_explicit") is not None:
            return None
        p = self._params
        weights = tuple((name, w.data.shape, w.data.dtype) for name, w in p.items())
        dense, attend = F.DenseFunction.apply, F.AttentionHeadsFunction.apply
        rows, heads, causal, bias = x.shape[0] * x.shape[1], self.num_heads, bool(self.causal), self.use_bias
        scale = 1.0 / math.sqrt(self.key_dim)  # (attention_heads' default: 1/sqrt(dk))

        def run(layer, x):
            p = layer._params
            for name, shape, dtype in weights:
                a = p[name].data
                if a.shape != shape or a.dtype != dtype:
                    return layer._run(x, training)
            if layer.__dict__.get("_explicit") is not None:  # attention_mask= or the scores asked for
                return layer._run(x, training)
            if bias:
                q = dense(x, p["query_kernel"], p["query_bias"], rows=rows)
                k = dense(x, p["key_kernel"], p["key_bias"], rows=rows)
                v = dense(x, p["value_kernel"], p["value_bias"], rows=rows)
                o = attend(q, k, v, heads=heads, mask=None, scale=scale, causal=causal)
                return dense(o, p["output_kernel"], p["output_bias"], rows=rows)
            q = dense(x, p["query_kernel"], rows=rows)
            k = dense(x, p["key_kernel"], rows=rows)
            v = dense(x, p["value_kernel"], rows=rows)
            o = attend(q, k, v, heads=heads, mask=None, scale=scale, causal=causal)
            return dense(o, p["output_kernel"], rows=rows)

        return run

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
        explicit = self.__dict__.get("_explicit")
        b, t = query.shape[0], query.shape[1]
        if explicit is None and not (self.dropout and training):  # the heads stay interleaved: one op, no copies
            q, k, v = (self._heads(x, which, size, split=False) for x, which, size in (
                (query, "query", self.key_dim), (key, "key", self.key_dim), (value, "value", self.value_dim)))
            o = F.attention_heads(q, k, v, self.num_heads, key_mask=mask, causal=self.causal)
        else:
            q = self._heads(query, "query", self.key_dim)
            k = self._heads(key, "key", self.key_dim)
            v = self._heads(value, "value", self.value_dim)
            if explicit is None:
                o = F.scaled_dot_product_attention(q, k, v, key_mask=mask, causal=self.causal,
                                                   dropout_rate=self.dropout, training=training, rng=self.rng)
            else:
                o, scores = self._scored(q, k, v, mask, explicit[0], training)
            o = F.reshape(F.transpose(o, (0, 2, 1, 3)), (b, t, self.num_heads * self.value_dim))
        if query_mask is not None:  # a padded query attends to nothing (Keras)
            o = F.multiply(o, F.reshape(query_mask, (b, t, 1)))
        out = F.dense(o, self._params["output_kernel"], self._params.get("output_bias"))
        return (out, scores) if explicit is not None and explicit[1] else out

    def _scored(self, q, k, v, key_mask, attention_mask, training):
        """Attention with its probabilities (B, H, Tq, Tk) at hand (Keras' masks: -1e9 added where hidden)."""
        b, tq, tk = q.shape[0], q.shape[2], k.shape[2]
        scores = F.multiply(F.matmul_nt(q, k), 1.0 / float(np.sqrt(self.key_dim)))
        keep = None if key_mask is None else F.reshape(key_mask, (b, 1, 1, tk))
        if attention_mask is not None:
            given = np.asarray(attention_mask)
            if given.shape != (b, tq, tk):
                raise ValueError(f"MultiHeadAttention {self.name!r}: attention_mask must have shape (batch, "
                                 f"query_time, key_time) = {(b, tq, tk)}, got {given.shape}")
            given = Tensor(given.astype(np.dtype(scores.dtype)).reshape(b, 1, tq, tk), backend=self.xp)
            keep = given if keep is None else F.multiply(keep, given)
        if self.causal:
            band = Tensor._of(constant(self.xp, np.tril(np.ones((tq, tk))), scores.dtype), self.xp)
            keep = band if keep is None else F.multiply(keep, band)
        if keep is not None:
            scores = F.add(scores, F.multiply(F.subtract(keep, 1.0), 1e9))
        p = F.dropout(F.softmax(scores, axis=-1), self.dropout, training, self.rng)
        return F.matmul(p, v), p

    def compute_mask(self, inputs, mask):
        return mask[0] if isinstance(mask, list) else mask  # the query's

    def output_masked(self, masked):
        return masked[0] if isinstance(masked, list) else masked

    def get_config(self):
        return {"num_heads": self.num_heads, "key_dim": self.key_dim, "value_dim": self.value_dim,
                "dropout": self.dropout, "causal": self.causal, "use_bias": self.use_bias,
                "kernel_initializer": self.kernel_initializer.to_config(),
                "bias_initializer": self.bias_initializer.to_config(), **super().get_config()}


class _ScoreAttention(Layer):
    """What Keras' Attention and AdditiveAttention share: inputs [query, value] or [query, value, key] (N, T, d),
    the masks (the query's zeroes its padded rows, the value's hides padded keys), a causal mask, dropout on the
    attention weights, and the weights returned with ``return_attention_scores``."""

    supports_masking = uses_mask = True

    def __init__(self, use_scale: bool, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        owner = f"{type(self).__name__} {self.name!r}"
        if not isinstance(use_scale, (bool, np.bool_)):
            raise TypeError(f"{owner}: use_scale must be True or False, got {use_scale!r}")
        self.use_scale = bool(use_scale)
        self.dropout = _checks.real(dropout, "dropout", owner, 0.0, 1.0, open_high=True)
        self.causal = self.return_attention_scores = False  # a symbolic call's choices (saved with the model)
        self.rng = None

    def __call__(self, inputs, training=False, return_attention_scores=None, use_causal_mask=None):
        """Keras' call: ``layer([query, value])`` or ``layer([query, value, key])``; ``return_attention_scores``
        gives ``[output, scores]``, ``use_causal_mask`` lets query i see keys j <= i (not given: the layer's, False
        unless a symbolic call set them).
        On symbolic inputs both become the layer's (saved with it); on data they hold for the call."""
        owner = f"{type(self).__name__} {self.name!r}"
        for name, flag in (("return_attention_scores", return_attention_scores),
                           ("use_causal_mask", use_causal_mask)):
            if flag is not None and not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{owner}: {name} must be True or False, got {flag!r}")
        if not isinstance(inputs, (list, tuple)) or not 2 <= len(inputs) <= 3:
            raise ValueError(f"{owner}: expects a list [query, value] or [query, value, key], got "
                             f"{type(inputs).__name__}")
        saved = self.return_attention_scores, self.causal
        chosen = (saved[0] if return_attention_scores is None else bool(return_attention_scores),
                  saved[1] if use_causal_mask is None else bool(use_causal_mask))
        if any(_is_symbolic(i) for i in inputs):  # a model's call (or its rebuild from a file): kept
            self.return_attention_scores, self.causal = chosen
            return super().__call__(list(inputs), training=training)
        self.return_attention_scores, self.causal = chosen
        try:
            return super().__call__(list(inputs), training=training)
        finally:
            self.return_attention_scores, self.causal = saved

    def check_input_shape(self, input_shape):
        expected = "[query, value] or [query, value, key] of per-sample shape (time, dim)"
        if not isinstance(input_shape, list) or not 2 <= len(input_shape) <= 3 or any(
                len(s) != 2 for s in input_shape):
            raise self.shape_error(expected, input_shape)
        query, value = input_shape[0], input_shape[1]
        key = input_shape[2] if len(input_shape) == 3 else value
        if key[0] != value[0] or query[1] != key[1]:
            raise self.shape_error(f"query and key of one dim, key and value of one time; {expected}", input_shape)

    def compute_output_shape(self, input_shape):
        query, value = input_shape[0], input_shape[1]
        out = (query[0], value[1])
        return [out, (query[0], value[0])] if self.return_attention_scores else out

    def create_weights(self, input_shape):
        self.rng = self.xp.rng(derive_seed(self._build_seed, 1))

    def call(self, x, training=False, mask=None):
        query, value = x[0], x[1]
        key = x[2] if len(x) == 3 else value
        masks = mask if isinstance(mask, list) else [mask] * len(x)
        n, tq, tv = query.shape[0], query.shape[1], value.shape[1]
        scores = self._scores(query, key)
        keep = masks[1]
        if keep is not None:
            keep = F.reshape(keep, (n, 1, tv))
        if self.causal:
            band = Tensor._of(constant(self.xp, np.tril(np.ones((tq, tv))), scores.dtype), self.xp)
            keep = band if keep is None else F.multiply(keep, band)
        if keep is not None:  # Keras: scores - 1e9 where a key is hidden
            scores = F.add(scores, F.multiply(F.subtract(keep, 1.0), 1e9))
        weights = F.softmax(scores, axis=-1)
        if training and self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, True, self.rng)
        out = F.matmul(weights, value)
        if masks[0] is not None:
            out = F.multiply(out, F.reshape(masks[0], (n, tq, 1)))
        return [out, weights] if self.return_attention_scores else out

    @staticmethod
    def _pairs(query, key):
        """query_i + key_j for every pair: (N, Tq, Tv, dim)."""
        n, tq, tv, d = query.shape[0], query.shape[1], key.shape[1], query.shape[2]
        return F.add(F.reshape(query, (n, tq, 1, d)), F.reshape(key, (n, 1, tv, d)))

    def compute_mask(self, inputs, mask):
        first = mask[0] if isinstance(mask, list) else mask
        return [first, None] if self.return_attention_scores else first

    def output_masked(self, masked):
        first = masked[0] if isinstance(masked, list) else masked
        return [first, False] if self.return_attention_scores else first

    def get_config(self):
        config = {"use_scale": self.use_scale, "dropout": self.dropout, **super().get_config()}
        if self.causal or self.return_attention_scores:
            config.update(causal=self.causal, return_attention_scores=self.return_attention_scores)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        causal, scores = config.pop("causal", False), config.pop("return_attention_scores", False)
        layer = cls(**config)
        layer.causal, layer.return_attention_scores = causal, scores
        return layer


@register
class Attention(_ScoreAttention):
    """Keras' dot-product (Luong) attention: scores = query · key (times a learnt scalar ``scale`` with
    ``use_scale``), or with ``score_mode="concat"`` ``concat_score_weight`` · sum(tanh(scale (query + key)));
    softmax over the keys; output = weights @ value (N, Tq, value dim)."""

    def __init__(self, use_scale: bool = False, score_mode: str = "dot", dropout: float = 0.0, **kwargs):
        super().__init__(use_scale, dropout, **kwargs)
        if score_mode not in ("dot", "concat"):
            raise ValueError(f"Attention {self.name!r}: score_mode must be 'dot' or 'concat', got {score_mode!r}")
        self.score_mode = score_mode

    def create_weights(self, input_shape):
        super().create_weights(input_shape)
        if self.use_scale:
            self.add_weight("scale", (), "ones")
        if self.score_mode == "concat":
            self.add_weight("concat_score_weight", (), "ones")

    def _scores(self, query, key):
        p = self._params
        if self.score_mode == "dot":
            scores = F.matmul_nt(query, key)
            return F.multiply(scores, p["scale"]) if self.use_scale else scores
        pairs = self._pairs(query, key)
        if self.use_scale:
            pairs = F.multiply(pairs, p["scale"])
        return F.multiply(F.sum(F.tanh(pairs), axis=-1), p["concat_score_weight"])

    def get_config(self):
        return {"score_mode": self.score_mode, **super().get_config()}


@register
class AdditiveAttention(_ScoreAttention):
    """Keras' additive (Bahdanau) attention: scores = sum over dim of scale · tanh(query_i + key_j), ``scale``
    (dim,) learnt (glorot_uniform) with ``use_scale`` (default True); softmax over the keys; weights @ value."""

    def __init__(self, use_scale: bool = True, dropout: float = 0.0, **kwargs):
        super().__init__(use_scale, dropout, **kwargs)

    def create_weights(self, input_shape):
        super().create_weights(input_shape)
        if self.use_scale:
            self.add_weight("scale", (input_shape[0][1],), "glorot_uniform")

    def _scores(self, query, key):
        pairs = F.tanh(self._pairs(query, key))
        if self.use_scale:
            pairs = F.multiply(pairs, self._params["scale"])
        return F.sum(pairs, axis=-1)
