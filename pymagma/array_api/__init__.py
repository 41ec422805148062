"""The Python array API standard (2024.12) on pymagma's DeviceArray: ``x.__array_namespace__()`` is this module.

What it holds: the standard's data types (bool, the signed and unsigned integers of 8 to 64 bits, float32, float64,
complex64, complex128; complex functions in ``kernels/array_api_complex.cu`` with the standard's special cases), the
standard's type promotion among them, the creation functions, the elementwise arithmetic, comparison, logical,
bitwise and float functions (NVRTC kernel families in ``kernels/array_api.cu``: strided and broadcast operands read
in place), ``astype``, ``from_dlpack``, ``all``, ``any`` and ``reshape``; the statistical, searching, sorting and
set functions (``kernels/array_api_reduce.cu``: reductions over axes, scans, a stable sort per row); the
manipulation functions, ``take``, ``take_along_axis``, ``tril``/``triu`` and integer-array and boolean-mask indexing;
``matmul``, ``tensordot``, ``vecdot``, ``matrix_transpose``, the ``linalg`` extension
(:mod:`pymagma.array_api.linalg`, on MAGMA) and the ``fft`` extension (:mod:`pymagma.array_api.fft`, on cuFFT).  A
function of the standard not listed here is absent: reading it is an AttributeError naming it (so ``hasattr``
answers honestly); nothing falls back to the host.
"""

from __future__ import annotations

from . import _creation, _dtypes, _elementwise, fft, linalg
from ._creation import (
    arange,
    asarray,
    astype,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ._dtypes import (
    bool,
    can_cast,
    complex64,
    complex128,
    finfo,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._indexing import repeat, take, take_along_axis
from ._info import __array_namespace_info__
from ._manipulation import (
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    meshgrid,
    moveaxis,
    permute_dims,
    roll,
    squeeze,
    stack,
    tile,
    tril,
    triu,
    unstack,
)
from ._products import matmul, matrix_transpose, tensordot, vecdot
from ._reductions import all, any, reshape  # noqa: A004 (the standard's names)
from ._searching import argmax, argmin, count_nonzero, nonzero, searchsorted, where
from ._sets import unique_all, unique_counts, unique_inverse, unique_values
from ._sorting import argsort, sort
from ._statistics import (  # noqa: A004 (the standard's names)
    cumulative_prod,
    cumulative_sum,
    diff,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)

# The dtype objects of the namespace are NumPy's scalar types, as in numpy's own namespace: a dtype instance would
# compare equal to None (``np.dtype("float64") == None`` is True, NumPy reading None as the default dtype).
bool, int8, int16, int32, int64 = (d.type for d in (bool, int8, int16, int32, int64))  # noqa: A001
uint8, uint16, uint32, uint64, float32, float64 = (d.type for d in (uint8, uint16, uint32, uint64, float32, float64))
complex64, complex128 = complex64.type, complex128.type

__array_api_version__ = "2024.12"
API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

globals().update(_elementwise.FUNCTIONS)

e, inf, nan, pi = 2.718281828459045, float("inf"), float("nan"), 3.141592653589793
newaxis = None

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "bool", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128", "can_cast", "finfo", "iinfo",
    "isdtype", "result_type", "arange", "asarray", "astype", "empty", "empty_like", "eye", "from_dlpack", "full",
    "full_like", "linspace", "ones", "ones_like", "zeros", "zeros_like",
    "e", "inf", "nan", "pi", "newaxis", "all", "any", "reshape", *sorted(_elementwise.FUNCTIONS),
    "fft", "linalg", "matmul", "matrix_transpose", "tensordot", "vecdot",
    # reductions, searching, sorting, sets
    "sum", "prod", "min", "max", "mean", "var", "std", "cumulative_sum", "cumulative_prod", "diff", "argmax",
    "argmin", "where", "nonzero", "searchsorted", "count_nonzero", "sort", "argsort", "unique_all",
    "unique_counts", "unique_inverse", "unique_values",
    "take", "take_along_axis", "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "meshgrid",
    "moveaxis", "permute_dims", "repeat", "roll", "squeeze", "stack", "tile", "tril", "triu", "unstack",
]
del _creation


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"pymagma.array_api does not implement {name!r} of the array API standard yet (what runs "
                         "is listed in docs/array-api.md); nothing falls back to the host")


def namespace(api_version=None):
    """This module, for ``DeviceArray.__array_namespace__``; a ValueError for a version it does not implement."""
    if api_version is not None and api_version not in API_VERSIONS:
        raise ValueError(f"pymagma.array_api implements the array API standard {__array_api_version__} (and reads "
                         f"as {', '.join(API_VERSIONS)}), not {api_version!r}")
    import sys

    return sys.modules[__name__]





def _fill_the_operators_of_device_arrays() -> None:
    """DeviceArray's operators, astype, indexing with arrays and ``__array_namespace__`` run these (``array.UPPER``)."""
    from .. import array
    from ._index_faults import raise_recorded
    from ._indexing import getitem, setitem

    array.UPPER.update(_elementwise.FUNCTIONS, getitem=getitem, setitem=setitem, astype=astype, matmul=matmul,
                       namespace=namespace, array_api_dtypes=_dtypes.SUPPORTED, read_check=raise_recorded)


_fill_the_operators_of_device_arrays()
