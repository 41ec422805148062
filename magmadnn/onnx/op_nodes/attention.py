"""Attention (opset 23 and later): scaled dot-product attention over (B, H, S, D) or (B, S, H*D) inputs, with an
additive or boolean mask, causal masking aligned to the past length, grouped query heads, a past key/value cache
(present outputs), softcap and the four ``qk_matmul_output_mode`` outputs."""

from __future__ import annotations

import numpy as np

from ._registry import Form, op
from ._runtime import F, T, Tensor, arith, tensor


def _heads(x, n):
    """(B, S, n*D) -> (B, n, S, D)."""
    b, s, h = x.shape
    return F.transpose(F.reshape(x, (b, s, n, h // n)), (0, 2, 1, 3))


def _repeat_heads(x, reps):
    """Each head ``reps`` times in a row (NumPy's repeat along axis 1)."""
    if reps == 1:
        return x
    b, h, n, d = x.shape
    return F.reshape(T.broadcast_to(F.reshape(x, (b, h, 1, n, d)), (b, h, reps, n, d)), (b, h * reps, n, d))


def _bias(mask, like, length):
    """The mask as an additive float bias padded to ``length`` keys (-inf where a boolean mask is False)."""
    if np.dtype(mask.dtype).kind == "b":
        dtype = np.dtype(like.dtype)
        mask = T.where(mask, tensor(np.zeros((), dtype), like), tensor(np.array(-np.inf, dtype), like)) if isinstance(
            mask, Tensor) else np.where(mask, 0.0, -np.inf).astype(dtype)
    mask = tensor(mask, like, dtype=like.dtype) if not isinstance(mask, Tensor) else T.astype(mask, like.dtype)
    short = length - mask.shape[-1]
    if short > 0:
        pad = tensor(np.full(mask.shape[:-1] + (short,), -np.inf, np.dtype(like.dtype)), like)
        mask = F.concatenate([mask, pad], axis=-1)
    return mask


def _padded_keys(nonpad, q, s, length, causal, left, right):
    """The additive bias (B, 1, s, length) of ``nonpad_kv_seqlen`` computed on the device: keys at or past a batch's
    length are masked, and the causal frontier and the windows sit at that length's end."""
    lens = T.astype(F.reshape(tensor(nonpad, q), (-1, 1, 1, 1)), np.int64)
    keys = np.arange(length, dtype=np.int64)[None, None, None, :]
    keep = T.compare(keys, lens, "less")
    diff = arith(np.arange(s, dtype=np.int64)[None, None, :, None] - s - keys, lens, "add")  # query - key position
    if causal:
        keep = T.logical(keep, T.compare(diff, np.zeros((), np.int64), "greater_equal"), "logical_and")
    if left >= 0:
        keep = T.logical(keep, T.compare(diff, np.array(left, np.int64), "less_equal"), "logical_and")
    if right >= 0:
        keep = T.logical(keep, T.compare(diff, np.array(-right, np.int64), "greater_equal"), "logical_and")
    dtype = np.dtype(q.dtype)
    return T.where(keep, tensor(np.zeros((), dtype), q), tensor(np.array(-np.inf, dtype), q))


@op("Attention")
def attention(view):
    view.only("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
              "softmax_precision", "left_window_size", "right_window_size")
    causal, scale = bool(view.attr("is_causal", 0)), view.attr("scale")
    qn, kvn = view.attr("q_num_heads"), view.attr("kv_num_heads")
    left, right = int(view.attr("left_window_size", -1)), int(view.attr("right_window_size", -1))
    softcap, mode = float(view.attr("softcap", 0.0)), int(view.attr("qk_matmul_output_mode", 0))

    def run(q, k, v, mask=None, past_k=None, past_v=None, nonpad=None):
        k, v = tensor(k, q), tensor(v, q)
        flat = q.ndim == 3
        if flat:
            q, k, v = _heads(q, int(qn)), _heads(k, int(kvn)), _heads(v, int(kvn))
        if past_k is not None:
            k = F.concatenate([tensor(past_k, q), k], axis=2)
            v = F.concatenate([tensor(past_v, q), v], axis=2)
        present_k, present_v = k, v
        s, length = q.shape[2], k.shape[2]
        factor = float(scale) if scale is not None else 1.0 / float(np.sqrt(q.shape[3]))
        reps = q.shape[1] // k.shape[1]
        kr, vr = _repeat_heads(k, reps), _repeat_heads(v, reps)
        qk = F.multiply(F.matmul(q, F.transpose(kr, (0, 1, 3, 2))), factor)
        if softcap > 0:
            qk = F.multiply(F.tanh(F.divide(qk, softcap)), softcap)
        bias = None if mask is None else _bias(mask, q, length)
        offset = 0 if past_k is None else past_k.shape[2]
        keys = np.arange(length)[None, :]
        diff = np.arange(s)[:, None] + offset - keys  # query position - key position
        allowed = np.ones(diff.shape, bool)
        allowed &= (diff >= 0) if causal else allowed
        allowed &= (diff <= left) if left >= 0 else allowed
        allowed &= (-diff <= right) if right >= 0 else allowed
        if nonpad is not None:  # per batch, on the device: keys past the length are padding
            step = _padded_keys(nonpad, q, s, length, causal, left, right)
            bias = step if bias is None else F.add(bias, step)
        elif not allowed.all():
            step = tensor(np.where(allowed, 0.0, -np.inf).astype(np.dtype(q.dtype)), q)
            bias = step if bias is None else F.add(bias, step)
        scores = qk if bias is None else F.add(qk, bias)
        weights = F.softmax(scores, axis=-1)
        if bias is not None:
            dead = T.compare(T.reduce(bias, "max", (-1,), True), -np.inf, "equal")
            weights = T.where(dead, 0.0, weights)
        y = F.matmul(weights, vr)
        if flat:
            b, h, n, d = y.shape
            y = F.reshape(F.transpose(y, (0, 2, 1, 3)), (b, n, h * d))
        extra = {0: qk, 1: scores if softcap <= 0 else qk, 2: scores, 3: weights}[mode]
        return y, present_k, present_v, extra

    def outputs(*args):
        made = run(*args)
        return made[:len(view.node.output)] if len(view.node.output) > 1 else made[0]

    return Form(outputs)
