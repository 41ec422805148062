"""What the converters' functions share at run time: operands as Tensors of one backend, host reads of shapes."""

from __future__ import annotations

import numpy as np

from ... import functional as F
from ...autograd import Tensor
from ...functional import _tensor_math as T

__all__ = ["tensor", "host", "is_float", "arith", "axis_of", "half_rounding", "ONNX_DTYPES"]

#: ONNX element type -> NumPy dtype (Cast's ``to``)
ONNX_DTYPES = {1: np.float32, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_, 3: np.int8, 2: np.uint8,
               10: np.float16, 5: np.int16, 12: np.uint32, 13: np.uint64, 4: np.uint16}


def tensor(value, like=None, dtype=None):
    """``value`` as a Tensor on ``like``'s backend (a host array or number becomes a constant there)."""
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value, dtype=dtype if dtype is not None else (
        like.dtype if like is not None and np.ndim(value) == 0 and not isinstance(value, np.ndarray) else None))
    xp = like.xp if like is not None else None
    return Tensor(array, backend=xp)


def host(value) -> np.ndarray:
    """A value read where a shape, axes or sizes go: host arrays as they are; a Tensor is read back (the only
    device read an op node makes, and only for such inputs)."""
    return value.numpy() if isinstance(value, Tensor) else np.asarray(value)


def is_float(value) -> bool:
    return np.dtype(value.dtype).kind == "f"


def _like(a, b):
    return a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None


_FUNCTIONS = {"add": F.add, "subtract": F.subtract, "multiply": F.multiply, "divide": F.divide}


def arith(a, b, kind: str):
    """``kind`` (add, subtract, multiply, divide) with broadcasting; float Tensors differentiable, integers plain
    (integer division truncates toward zero, as ONNX's Div)."""
    like = _like(a, b)
    if like is None:  # host values (shape arithmetic)
        a, b = np.asarray(a), np.asarray(b)
        if kind == "divide" and a.dtype.kind in "iu":
            return np.trunc(a / b).astype(a.dtype)
        return getattr(np, kind)(a, b)
    a, b = tensor(a, like, dtype=like.dtype), tensor(b, like, dtype=like.dtype)
    if is_float(a):
        return _FUNCTIONS[kind](a, b)
    ns = a.data.__array_namespace__()
    if kind == "divide":
        q = ns.divide(ns.astype(a.data, np.float64), ns.astype(b.data, np.float64))
        return Tensor._of(ns.astype(ns.trunc(q), a.dtype), a.xp)
    return Tensor._of(getattr(ns, kind)(a.data, b.data), a.xp)


def half_rounding(x):
    """``x`` rounded to float16's values, held in float32 (the gradient passes through): ONNX's float16 values
    (see ``op_graph.FLOAT16``)."""
    if isinstance(x, np.ndarray):
        return x.astype(np.float16).astype(np.float32)
    return T.astype(T.astype(x, np.float16), np.float32)


def axis_of(axis: int, rank) -> int:
    return int(axis) % int(rank) if rank else int(axis)


__all__ += ["F", "T", "Tensor"]
