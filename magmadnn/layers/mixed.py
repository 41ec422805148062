"""The mixed-precision side of a layer (Keras 3's dtype policies): the policy a layer takes, its compute and
variable dtypes, and the casts around its call.

Under a mixed policy (``"mixed_float16"``, ``"mixed_bfloat16"``) a layer keeps its weights in float32 and computes
in the half type: :meth:`MixedPrecisionMixin._call_mixed` casts its float inputs and float32 weights to the compute
dtype through ``F.cast`` (autograd nodes), or, for the normalisation layers (``_computes_in_float32``), casts the
input up to float32 and the output back down. The model casts its output back to float32 (``Model._forward``).
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from .. import mixed_precision
from ..autograd import Tensor

__all__ = ["MixedPrecisionMixin"]


class MixedPrecisionMixin:
    """The dtype policy of a :class:`~magmadnn.layers.base.Layer` and its mixed-precision call."""

    # -- dtype policy (Keras 3): weights in the variable dtype, computation in the compute dtype
    def _set_policy(self, dtype) -> None:
        """The layer's own policy from its ``dtype`` argument: a policy name or DTypePolicy; None takes the global
        policy now (Keras) when one was set, else the owning model's; an integer dtype (an Input of token ids)
        stays a plain dtype."""
        if dtype is not None and not isinstance(dtype, (str, mixed_precision.DTypePolicy, dict)) or \
                isinstance(dtype, str) and dtype.startswith(("int", "uint", "bool")):
            try:
                self._user_policy, self._user_dtype = None, np.dtype(dtype)
            except TypeError:
                raise TypeError(f"layer {self.name!r}: dtype must be a policy name (such as 'mixed_bfloat16'), a "
                                f"magmadnn DTypePolicy or a NumPy dtype, got {dtype!r} (of type "
                                f"{type(dtype).__name__})") from None
            if self._user_dtype.kind not in "iub":  # a float dtype: its policy (float16/bfloat16 refused there)
                self._user_policy = mixed_precision.get(self._user_dtype.name)
        else:
            policy = mixed_precision.get(dtype) if dtype is not None else mixed_precision.global_policy()
            if dtype is None and policy.name == "float32":
                policy = None  # the default: the owning model's policy
            self._user_policy = policy
            self._user_dtype = None if policy is None else mixed_precision.numpy_dtype(policy.variable_dtype)
        self._policy = self._user_policy
        self._compute = _compute_of(self._policy)
        self._plans_at = None  # the call plans decided their casts under the old policy

    @property
    def dtype_policy(self) -> mixed_precision.DTypePolicy:
        """The layer's DTypePolicy: its own, else its model's (Keras' ``layer.dtype_policy``)."""
        if self._policy is not None:
            return self._policy
        dtype = self.dtype if self.dtype is not None else np.dtype(np.float32)
        return mixed_precision.DTypePolicy(dtype.name) if dtype.kind == "f" else mixed_precision.global_policy()

    @dtype_policy.setter
    def dtype_policy(self, value) -> None:
        policy = mixed_precision.get(value)
        if self.built and self.dtype is not None and policy.variable_dtype != self.dtype.name:
            raise ValueError(f"layer {self.name!r}: its weights are {self.dtype.name}; a policy with variable dtype "
                             f"{policy.variable_dtype} needs a layer built anew")
        self._user_policy = self._policy = policy
        self._user_dtype = mixed_precision.numpy_dtype(policy.variable_dtype)
        self._compute = _compute_of(policy)
        self._plans_at = None  # the call plans decided their casts under the old policy

    @property
    def compute_dtype(self) -> str:
        """The dtype the layer computes in (str), Keras' ``layer.compute_dtype``."""
        if self._user_dtype is not None and self._user_dtype.kind in "iub":
            return self._user_dtype.name
        return self.dtype_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        """The dtype of the layer's weights (str), Keras' ``layer.variable_dtype``; ``layer.dtype`` is it as a
        NumPy dtype."""
        if self._user_dtype is not None and self._user_dtype.kind in "iub":
            return self._user_dtype.name
        return self.dtype_policy.variable_dtype

    #: computes in float32 under a mixed policy (its input cast up, its output cast to the compute dtype): Keras'
    #: normalisation layers
    _computes_in_float32 = False
    #: under a mixed policy its weights are cast for its call (not for a wrapper whose wrapped layers cast their own)
    _casts_weights = True

    def _call_mixed(self, x, run):
        """``run(x)`` under a mixed policy: float inputs and float32 weights cast to the compute dtype (or, for a
        layer that computes in float32, the input up and the output down); the casts are autograd nodes."""
        half = self._compute
        if self._computes_in_float32:
            return _cast_floats(run(_cast_floats(x, self.dtype)), half)
        params, swapped = self._params, {}
        if not self._casts_weights:
            return run(_cast_floats(x, half))
        cast = {k: (F.cast(p, half) if p.dtype == self.dtype else p) for k, p in params.items()}
        if self._keras_style:  # weights kept as attributes (``self.w = self.add_weight(...)``)
            ids = {id(p): k for k, p in params.items()}
            swapped = {a: v for a, v in self.__dict__.items() if id(v) in ids}
        self._params = cast
        for attribute, param in swapped.items():
            self.__dict__[attribute] = cast[ids[id(param)]]
        try:
            return run(_cast_floats(x, half))
        finally:
            self._params = params
            self.__dict__.update(swapped)


def _compute_of(policy):
    """The NumPy compute dtype of a mixed policy, None for a plain one (or none)."""
    if policy is None or not policy.is_mixed:
        return None
    return mixed_precision.numpy_dtype(policy.compute_dtype)


def _is_float(dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _cast_floats(x, dtype, halves_only: bool = False):
    """A Tensor (or a list of them) cast to ``dtype`` where it is a float of another dtype (``halves_only``: a
    float16 or bfloat16 one); a mask rides along."""
    if isinstance(x, (list, tuple)):
        return type(x)(_cast_floats(t, dtype, halves_only) for t in x)
    if not isinstance(x, Tensor) or x.dtype == dtype or not _is_float(x.dtype) or (
            halves_only and x.dtype.name not in mixed_precision.HALF_TYPES):
        return x
    y = F.cast(x, dtype)
    mask = getattr(x, "_mask", None)
    if mask is not None:
        y._mask = mask
    return y
