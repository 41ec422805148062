"""Normalisation: batch norm (with the synchronised form data parallelism registers), layer, RMS and group norm."""

from __future__ import annotations

import math
import numbers

from .._checks import Plans
from ..autograd import Function, Tensor
from ..autograd import _state as _grad_state  # (is_grad_enabled() without its call)
from ._base import _as_tensor, _same_dtype, signature
from .operators import add, multiply, reshape

__all__ = ["batch_norm", "layer_norm", "rms_norm", "group_norm"]


class BatchNormTrainFunction(Function):
    def forward(self, x, gamma, beta, running_mean, running_var, momentum, eps, unbiased=True):
        self.x, self.gamma = x, gamma
        y, self.ctx = self.xp.batch_norm_train(x, gamma, beta, running_mean, running_var, momentum, eps, unbiased)
        return y

    def backward(self, g):
        return self.xp.batch_norm_backward(g, self.x, self.gamma, self.ctx)


class BatchNormInferFunction(Function):
    def forward(self, x, gamma, beta, running_mean, running_var, eps):
        xp = self.xp
        self.x, self.gamma, self.mean = x, gamma, running_mean
        if _grad_state.enabled:  # what a backward reads (none follows a call without grad: no launches for it)
            self.inv_std = xp.divide(1.0, xp.sqrt(xp.add(running_var, eps)))
        return xp.batch_norm_infer(x, gamma, beta, running_mean, running_var, eps)

    def backward(self, g):
        xp, need = self.xp, self.needs_input_grad
        shape = (1, g.shape[1]) + (1,) * (g.ndim - 2)
        inv = xp.reshape(self.inv_std, shape)
        gx = xp.multiply(g, xp.reshape(xp.multiply(self.gamma, self.inv_std), shape)) if need[0] else None
        gg = None
        if need[1]:
            xhat = xp.multiply(xp.subtract(self.x, xp.reshape(self.mean, shape)), inv)
            gg = xp.channel_sum(xp.multiply(g, xhat))
        return gx, gg, (xp.bias_grad(g) if need[2] else None)


_SYNC_BATCH_NORM = None  # the synchronized batch norm's Function, registered by magmadnn.distributed.sync_batchnorm


def register_sync_batch_norm(function) -> None:
    """Called by :mod:`magmadnn.distributed.sync_batchnorm`: the Function ``batch_norm(sync=group)`` applies."""
    global _SYNC_BATCH_NORM
    _SYNC_BATCH_NORM = function


def batch_norm(x, gamma, beta, running_mean, running_var, training, momentum=0.9, eps=1e-5, sync=None,
               unbiased=True) -> Tensor:
    """Batch normalisation over N (2-D) or N, H, W (4-D); running stats (backend arrays) update in place:
    ``running = momentum * running + (1 - momentum) * batch``, the running variance from the unbiased batch variance
    (PyTorch) or with ``unbiased=False`` the biased one (Keras).

    ``sync`` (training only): a data-parallel group (``magmadnn.distributed.BatchNormGroup``, or anything with
    its ``weight``, ``moments`` and ``sum``) whose ranks normalise with the statistics of the global batch and
    exchange the matching gradient sums, as one process with the whole batch would (every rank must call it)."""
    local = bool(training) and sync is None  # a synchronised batch counts the global batch's values (its group)
    key = signature(x, gamma, beta, local, getattr(running_mean, "shape", None), getattr(running_var, "shape", None))
    if key is None or key not in _BATCH_NORM_CHECKED:  # every check, once per signature
        x, gamma, beta = _as_tensor(x), _as_tensor(gamma), _as_tensor(beta)
        _check_batch_norm(x, gamma, beta, running_mean, running_var, local)
        _BATCH_NORM_CHECKED.keep(key, True)
    if training and sync is not None:
        if _SYNC_BATCH_NORM is None:  # pragma: no cover - magmadnn's __init__ imports magmadnn.distributed
            raise RuntimeError("batch_norm(sync=...) needs magmadnn.distributed: import it first")
        return _SYNC_BATCH_NORM.apply(x, gamma, beta, running_mean=running_mean, running_var=running_var,
                                      momentum=momentum, eps=eps, sync=sync, unbiased=unbiased)
    if training:
        return BatchNormTrainFunction.apply(
            x, gamma, beta, running_mean=running_mean, running_var=running_var, momentum=momentum, eps=eps,
            unbiased=bool(unbiased))
    return BatchNormInferFunction.apply(x, gamma, beta, running_mean=running_mean, running_var=running_var, eps=eps)


_BATCH_NORM_CHECKED = Plans()  # the signatures batch_norm's checks passed


def _check_batch_norm(x, gamma, beta, running_mean, running_var, local_training) -> None:
    fn = "batch_norm"
    if x.ndim not in (2, 4):
        raise ValueError(f"{fn}: x must be 2-D (N, F) or 4-D (N, C, H, W), got shape {x.shape}")
    c = x.shape[1]
    for what, arr in (("gamma", gamma.data), ("beta", beta.data), ("running_mean", running_mean),
                      ("running_var", running_var)):  # fmt: skip
        if tuple(arr.shape) != (c,):
            raise ValueError(f"{fn}: {what} has shape {tuple(arr.shape)}, expected ({c},) for x of shape {x.shape}")
    _same_dtype(fn, x=x, gamma=gamma, beta=beta)
    if local_training and x.size // c < 2:
        raise ValueError(f"{fn}: training needs more than one value per channel, got x of shape {x.shape}")


class LayerNormFunction(Function):
    """Rows normalised over the last axis; inputs ``x``, then optionally ``gamma`` and ``beta``."""

    def forward(self, x, *params, eps=1e-5, rms=False):
        self.x, self.rms = x, rms
        self.gamma = params[0] if params else None
        y, self.ctx = self.xp.layer_norm_forward(x, self.gamma, params[1] if len(params) > 1 else None, eps, rms)
        self.count = len(params)
        return y

    def backward(self, g):
        dx, dgamma, dbeta = self.xp.layer_norm_backward(g, self.x, self.gamma, self.ctx, self.rms)
        return (dx, dgamma, dbeta)[: 1 + self.count]


def _norm_params(fn: str, x: Tensor, size: int, **params) -> list[Tensor]:
    given = {}
    for what, p in params.items():
        if p is None:
            continue
        p = given[what] = _as_tensor(p, x)
        if p.shape != (size,):
            raise ValueError(f"{fn}: {what} has shape {p.shape}, expected ({size},) for x of shape {x.shape}")
    _same_dtype(fn, x=x, **given)
    return list(given.values())


def _check_eps(fn: str, eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"{fn}: eps must be a finite number > 0, got {eps!r}")
    return float(eps)


def layer_norm(x, gamma=None, beta=None, eps=1e-5) -> Tensor:
    """Layer normalisation over the last axis (biased variance, ``eps`` added to it), then ``* gamma + beta``."""
    fn = "layer_norm"
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"{fn}: x must have at least one axis, got shape {x.shape}")
    if beta is not None and gamma is None:
        raise ValueError(f"{fn}: beta needs gamma (pass ones for no scaling)")
    params = _norm_params(fn, x, x.shape[-1], gamma=gamma, beta=beta)
    return LayerNormFunction.apply(x, *params, eps=_check_eps(fn, eps), rms=False)


def rms_norm(x, gamma=None, eps=1e-6) -> Tensor:
    """RMS normalisation over the last axis: ``x / sqrt(mean(x^2) + eps) * gamma`` (no centring)."""
    fn = "rms_norm"
    x = _as_tensor(x)
    if x.ndim < 1:
        raise ValueError(f"{fn}: x must have at least one axis, got shape {x.shape}")
    params = _norm_params(fn, x, x.shape[-1], gamma=gamma)
    return LayerNormFunction.apply(x, *params, eps=_check_eps(fn, eps), rms=True)


def group_norm(x, groups, gamma=None, beta=None, eps=1e-5) -> Tensor:
    """Group normalisation of x (N, C, ...): the channels split into ``groups`` consecutive groups, each sample's group
    normalised over its channels and positions, then ``* gamma + beta`` per channel (PyTorch's GroupNorm)."""
    fn = "group_norm"
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{fn}: x must be (N, C, ...), got shape {x.shape}")
    n, c = x.shape[:2]
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1 or c % groups:
        raise ValueError(f"{fn}: groups must be a positive int dividing the {c} channels of x {x.shape}, "
                         f"got {groups!r}")
    params = _norm_params(fn, x, c, gamma=gamma, beta=beta)
    rows = reshape(x, (n * int(groups), -1))
    y = reshape(LayerNormFunction.apply(rows, eps=_check_eps(fn, eps), rms=False), x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    if params:
        y = multiply(y, reshape(params[0], per_channel))
    if len(params) > 1:
        y = add(y, reshape(params[1], per_channel))
    return y
