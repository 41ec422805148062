"""The kernel programs shipped with pymagma (a general GPU array library's: elementwise, reductions, casts, random
numbers, the array API's): which ``.cu`` file, which template instantiations (per dtype), registered with
:mod:`.registry` at import like any other program (magmadnn registers its deep-learning programs the same way).

Each program is one NVRTC compilation holding all of its instantiations, so a device compiles a program once.
"""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

from ..dtypes import answered_once
from .registry import KERNELS_DIR, register

#: Storage C type of every dtype the kernels know (bfloat16 is matched by name: NumPy has no native one).
C_TYPES = {
    "float32": "float", "float64": "double", "float16": "half_t", "bfloat16": "bf16_t",
    "int32": "int", "int64": "i64", "uint8": "unsigned char", "bool": "unsigned char",
}
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
CAST_SOURCES = FLOAT_DTYPES + ("int32", "int64", "uint8")
CAST_TARGETS = FLOAT_DTYPES + ("int32", "int64", "uint8")
COPY_DTYPES = FLOAT_DTYPES + ("int32", "int64", "uint8")
#: The headers of pymagma's kernels folder every program may include (common.cuh: types, Strides3, block
#: reductions; philox.cuh: the random stream of random.cu).
HEADERS = ("common.cuh", "philox.cuh")


@answered_once
def dtype_name(dtype) -> str:
    """Canonical name of a NumPy (or ml_dtypes/torch-like) dtype: 'float32', 'bfloat16', ..."""
    name = getattr(dtype, "name", None) or str(dtype)
    if name not in C_TYPES:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    return name


def c_type(dtype) -> str:
    name = dtype_name(dtype)
    try:
        return C_TYPES[name]
    except KeyError:
        raise TypeError(f"dtype {name!r} is not supported by pymagma's kernels; supported: {sorted(C_TYPES)}") from None


def _per_dtype(kernels, dtypes=FLOAT_DTYPES) -> tuple[str, ...]:
    return tuple(f"{k}<{C_TYPES[d]}>" for k in kernels for d in dtypes)


def _cast_pairs() -> tuple[str, ...]:
    return tuple(f"cast<{C_TYPES[s]}, {C_TYPES[d]}>" for s in CAST_SOURCES for d in CAST_TARGETS)


#: program name -> (source file, name expressions), registered below
SHIPPED = {
    "elementwise": ("elementwise.cu", _per_dtype(("unary", "binary", "binary_strided", "binary_scalar",
                                                       "select", "activation_backward", "bias_channels", "fill",
                                                       "divide_strided"))
                    + _per_dtype(("copy_strided",), COPY_DTYPES) + _cast_pairs()),
    "reductions": ("reductions.cu", _per_dtype(("reduce_axes", "arg_reduce"))),
    "random": ("random.cu", _per_dtype(("uniform", "normal"))),
    # value checks into a fault record (no host read): the array API's indices, magmadnn's op arguments
    "check": ("check.cu", _per_dtype(("check_range", "check_binary"), FLOAT_DTYPES + ("int64", "int32"))),
}
# -- the array API standard's elementwise families (pymagma.array_api): its real dtypes, bool as C++ bool
API_C_TYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
               "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "i64", "uint64": "u64",
               "float32": "float", "float64": "double"}
API_FLOATS = ("float32", "float64")


def _api(kernels, dtypes) -> tuple[str, ...]:
    return tuple(f"{k}<{API_C_TYPES[d]}>" for k in kernels for d in dtypes)


SHIPPED["array_api"] = ("array_api.cu", _api(("aa_binary", "aa_compare", "aa_unary"), API_C_TYPES)
                         + _api(("aa_test",), API_FLOATS)
                         + tuple(f"aa_cast<{API_C_TYPES[s]}, {API_C_TYPES[d]}>" for s in API_C_TYPES
                                 for d in API_C_TYPES)
                         + _api(("aa_assign", "aa_tri", "aa_gather", "aa_mask_move"), API_C_TYPES)
                         + _api(("aa_index_offsets",), [d for d in API_C_TYPES if d[0] in "iu"])
                         + ("aa_mask_count<bool>", "aa_mask_scan<i64>", "aa_mask_positions<bool>"))
# -- the array API standard's reductions, scans, sorts, searching and set functions (pymagma.array_api)
#: the dtypes of its kernels but ar_where (narrower integers and bool run as int64: pymagma.kernels.array_api_reduce)
API_REDUCE_DTYPES = ("int64", "uint64", "float32", "float64")
SHIPPED["array_api_reduce"] = ("array_api_reduce.cu",
                                _api(("ar_reduce", "ar_argreduce", "ar_scan", "ar_sort", "ar_searchsorted", "ar_take",
                                      "ar_unique_flags", "ar_unique"), API_REDUCE_DTYPES)
                                + _api(("ar_where",), API_C_TYPES) + ("ar_nonzero<bool>",))
# -- the array API standard's complex64 and complex128 (pymagma.kernels.array_api_complex): elementwise families
#: over cx<R> (template argument R, the real type), and the data-movement, where, reduce, scan and unique kernels of
#: the two programs above instantiated for cx<R>
API_COMPLEX_C_TYPES = {"complex64": "cx<float>", "complex128": "cx<double>"}
API_COMPLEX_REAL = {"complex64": "float", "complex128": "double"}
SHIPPED["array_api_complex"] = ("array_api_complex.cu",
                                 tuple(f"{k}<{r}>" for k in ("cx_binary", "cx_compare", "cx_unary", "cx_part",
                                                             "cx_test") for r in API_COMPLEX_REAL.values())
                                 + tuple(f"cx_from_real<{API_C_TYPES[s]}, {r}>" for s in API_C_TYPES
                                         for r in API_COMPLEX_REAL.values())
                                 + tuple(f"cx_cast<{s}, {r}>" for s in API_COMPLEX_REAL.values()
                                         for r in API_COMPLEX_REAL.values())
                                 + tuple(f"{k}<{c}>" for k in ("aa_assign", "aa_tri", "aa_gather", "aa_mask_move",
                                                               "ar_where", "ar_reduce", "ar_scan", "ar_sort",
                                                               "ar_unique_flags", "ar_unique")
                                         for c in API_COMPLEX_C_TYPES.values()))


for _name, (_file, _expressions) in SHIPPED.items():
    register(_name, path=KERNELS_DIR / _file, expressions=_expressions)


@functools.cache
def read_text(filename: str) -> str:
    """A kernel source shipped as package data."""
    return resources.files(__package__).joinpath(filename).read_text()


def headers() -> dict:
    return {name: read_text(name) for name in HEADERS}


@functools.lru_cache(maxsize=1024)
def expression(kernel: str, *dtypes) -> str:
    """The name expression of ``kernel`` instantiated for ``dtypes`` (e.g. ``cast<float, half_t>``)."""
    return f"{kernel}<{', '.join(c_type(d) for d in dtypes)}>"
