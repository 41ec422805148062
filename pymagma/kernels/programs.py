"""The kernel programs shipped with pymagma: which ``.cu`` file, which template instantiations (per dtype), registered
with :mod:`.registry` at import like any other program.

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
#: The headers of pymagma's kernels folder every program may include.
HEADERS = ("common.cuh",)


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
                                                       "select", "activation_backward", "bias_channels", "fill"))
                    + _per_dtype(("copy_strided",), COPY_DTYPES) + _cast_pairs()),
    "reductions": ("reductions.cu", _per_dtype(("reduce_axes", "arg_reduce"))),
    "loss": ("loss.cu", _per_dtype(("softmax_xent_index", "softmax_xent_prob", "softmax_xent_index_backward",
                                     "softmax_xent_prob_backward"))),
    "optim": ("optim.cu", _per_dtype(("sgd", "adam", "rmsprop", "adagrad"))),
    "random": ("random.cu", _per_dtype(("uniform", "normal", "dropout"))),
    "pool": ("pool.cu", _per_dtype(("max_pool_forward", "max_pool_backward"))),
    # attention
    "attention": ("attention.cu", _per_dtype(("masked_softmax", "masked_softmax_backward"))),
    # normalization and embeddings
    "norm": ("norm.cu", _per_dtype(("norm_forward", "norm_backward", "norm_param_grad", "norm_param_sum"))),
    "embeddings": ("embeddings.cu", _per_dtype(("embedding_gather", "embedding_scatter_add"))),
    # checks of the values an op needs, reported through a fault record (no host read)
    "check": ("check.cu", _per_dtype(("check_range", "check_binary"), FLOAT_DTYPES + ("int64", "int32"))),
    # graph replay: per-step values read from device memory
    "step": ("step.cu", _per_dtype(("sgd_at", "adam_at", "rmsprop_at", "adagrad_at", "dropout_at"))),
}
# -- the array API standard's elementwise families (pymagma.array_api): its real dtypes, bool as C++ bool
API_C_TYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int32": "int", "int64": "i64",
               "float32": "float", "float64": "double"}
API_FLOATS = ("float32", "float64")


def _api(kernels, dtypes) -> tuple[str, ...]:
    return tuple(f"{k}<{API_C_TYPES[d]}>" for k in kernels for d in dtypes)


SHIPPED["array_api"] = ("array_api.cu", _api(("aa_binary", "aa_compare", "aa_unary"), API_C_TYPES)
                         + _api(("aa_test",), API_FLOATS)
                         + tuple(f"aa_cast<{API_C_TYPES[s]}, {API_C_TYPES[d]}>" for s in API_C_TYPES
                                 for d in API_C_TYPES)
                         + _api(("aa_assign", "aa_tri", "aa_gather", "aa_mask_move"), API_C_TYPES)
                         + _api(("aa_index_offsets",), ("int8", "uint8", "int32", "int64"))
                         + ("aa_mask_count<bool>", "aa_mask_scan<i64>", "aa_mask_positions<bool>"))
# -- the array API standard's reductions, scans, sorts, searching and set functions (pymagma.array_api)
#: the dtypes of its kernels but ar_where (narrower integers and bool run as int64: pymagma.kernels.array_api_reduce)
API_REDUCE_DTYPES = ("int64", "float32", "float64")
SHIPPED["array_api_reduce"] = ("array_api_reduce.cu",
                                _api(("ar_reduce", "ar_argreduce", "ar_scan", "ar_sort", "ar_searchsorted", "ar_take",
                                      "ar_unique_flags", "ar_unique"), API_REDUCE_DTYPES)
                                + _api(("ar_where",), API_C_TYPES) + ("ar_nonzero<bool>",))
# -- recurrent layers
SHIPPED["recurrent"] = ("recurrent.cu", _per_dtype(("lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward",
                                                      "gru_gates_backward")))


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
