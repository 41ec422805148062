"""Dtype policies, Keras 3's ``keras.mixed_precision`` names: a layer's variable dtype and compute dtype.

``set_global_policy("mixed_bfloat16")`` (or ``"mixed_float16"``): layers made afterwards keep float32 weights (the
master copy the optimizer updates from float32 gradients) and compute in the half type: their float inputs and
weights are cast on entry (a cast in autograd: its backward casts the gradient back to float32), so gemm and
convolution run on half operands with float32 accumulation and a layer's output is half. Softmax, normalisation and
the model's output (what losses and metrics read) are float32. ``"float32"``/``"float64"``: one dtype for both.
The casting convention itself lives in :mod:`magmadnn.layers.mixed` (``Layer._call_mixed``) and
:mod:`magmadnn.layers.base` (``Layer._run``); backends only see arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DTypePolicy", "Policy", "set_global_policy", "set_dtype_policy", "global_policy", "dtype_policy",
           "get", "numpy_dtype", "HALF_TYPES"]

_MIXED = {"mixed_float16": ("float16", "float32"), "mixed_bfloat16": ("bfloat16", "float32")}
_PLAIN = ("float32", "float64")
HALF_TYPES = ("float16", "bfloat16")
_NUMPY = {"float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a policy dtype name (bfloat16 through ``ml_dtypes``)."""
    if name == "bfloat16" and name not in _NUMPY:
        try:
            import ml_dtypes  # noqa: PLC0415  (optional: the native extra)
        except ImportError:
            raise ImportError("the mixed_bfloat16 policy needs the ml_dtypes package (bfloat16 NumPy arrays): "
                              "pip install ml_dtypes") from None
        _NUMPY[name] = np.dtype(ml_dtypes.bfloat16)
    return _NUMPY[name]


class DTypePolicy:
    """A layer's dtype policy (Keras 3's ``DTypePolicy``): ``name`` is ``"mixed_bfloat16"``, ``"mixed_float16"``,
    ``"float32"`` or ``"float64"`` (None: the global policy's name). ``compute_dtype`` and ``variable_dtype`` are
    dtype names (str), as in Keras."""

    def __init__(self, name: str | None = None):
        if name is None:
            name = global_policy().name
        if not isinstance(name, str):
            raise TypeError(f"DTypePolicy: name must be a str such as 'mixed_bfloat16', got {name!r} "
                            f"(of type {type(name).__name__})")
        if name in _MIXED:
            compute, variable = _MIXED[name]
        elif name in _PLAIN:  # the canonical name only, as Keras ('float', 'double' or 'f4' are refused)
            compute = variable = name
        else:
            raise ValueError(f"DTypePolicy: cannot use {name!r} as a dtype policy; magmadnn's policies are "
                             f"'mixed_bfloat16', 'mixed_float16', 'float32' and 'float64' (weights are float32 or "
                             "float64: a pure half policy such as 'bfloat16' is not supported)")
        self._name, self._compute_dtype, self._variable_dtype = name, compute, variable

    name = property(lambda self: self._name, doc="The policy's name.")
    compute_dtype = property(lambda self: self._compute_dtype, doc="The dtype layers compute in (str).")
    variable_dtype = property(lambda self: self._variable_dtype, doc="The dtype of the weights (str).")
    quantization_mode = property(lambda self: None, doc="Always None (no quantized policies here).")

    @property
    def is_mixed(self) -> bool:
        """The compute dtype differs from the variable dtype (magmadnn's name)."""
        return self._compute_dtype != self._variable_dtype

    def get_config(self) -> dict:
        return {"name": self._name}

    @classmethod
    def from_config(cls, config: dict) -> DTypePolicy:
        return cls(**config)

    def __eq__(self, other) -> bool:
        return isinstance(other, DTypePolicy) and other._name == self._name

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f'<DTypePolicy "{self._name}">'


Policy = DTypePolicy  # Keras' legacy alias


_GLOBAL: list[DTypePolicy] = []


def set_global_policy(policy) -> None:
    """Set the policy of the layers made from now on (Keras 3's ``set_dtype_policy``; a name or a DTypePolicy).
    Layers made before keep theirs, as in Keras."""
    if not isinstance(policy, DTypePolicy):
        if not isinstance(policy, str):
            raise ValueError(f"set_global_policy: expected a policy name (such as 'mixed_bfloat16') or a "
                             f"DTypePolicy, got {policy!r} (of type {type(policy).__name__})")
        policy = DTypePolicy(policy)
    _GLOBAL[:] = [policy]


set_dtype_policy = set_global_policy


def global_policy() -> DTypePolicy:
    """The global policy (``"float32"`` unless set)."""
    if not _GLOBAL:
        _GLOBAL.append(DTypePolicy("float32"))
    return _GLOBAL[0]


dtype_policy = global_policy


class global_policy_as:  # noqa: N801 - used as a context manager, like a function
    """``with global_policy_as("float32"):`` the global policy for the block, restored after it (a model rebuilt
    from its configuration is made under float32, so that its layers keep the policies they were saved with, as
    Keras keeps them, whatever policy is global at load)."""

    def __init__(self, policy):
        self.policy = policy

    def __enter__(self):
        self.saved = list(_GLOBAL)
        set_global_policy(self.policy)

    def __exit__(self, *exc):
        _GLOBAL[:] = self.saved
        return False


def get(identifier) -> DTypePolicy:
    """A DTypePolicy from a policy, a name, a NumPy dtype or a ``{"name": ...}`` configuration (None: global)."""
    if identifier is None:
        return global_policy()
    if isinstance(identifier, DTypePolicy):
        return identifier
    if isinstance(identifier, dict):
        return DTypePolicy.from_config(identifier.get("config", identifier))
    if isinstance(identifier, str):
        return DTypePolicy(identifier)
    try:
        return DTypePolicy(np.dtype(identifier).name)
    except TypeError:
        raise TypeError(f"expected a dtype policy (a name such as 'mixed_bfloat16', a DTypePolicy or a float "
                        f"dtype), got {identifier!r}") from None


def __getattr__(name: str):
    """``LossScaleOptimizer``: Keras exports it here too; it lives in :mod:`magmadnn.optimizers`."""
    if name == "LossScaleOptimizer":
        from . import optimizers  # noqa: PLC0415  (lazy: optimizers import the layers, which import this module)

        if hasattr(optimizers, name):
            return optimizers.LossScaleOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
