"""GPU kernels no library provides, written in CUDA C++, compiled with NVRTC on first use and run on DeviceArrays.

One launcher module beside each ``.cu`` program launches only that program (``pool.cu`` and ``pool.py``); this
package re-exports their public functions.  Every function runs on the default queue's stream of its operands'
device.  Float kernels exist for float32, float64, float16 and bfloat16 (half types compute in float32; bfloat16
arrays need ``ml_dtypes``, see :mod:`pymagma.dtypes`).  Operands must be DeviceArrays (NumPy input is a TypeError).
Example::

    from pymagma import array, kernels
    x = array.asarray(np.random.rand(4, 3).astype(np.float32))
    y = kernels.add(kernels.relu(x), array.asarray(np.ones(3, np.float32)))   # broadcasting
    s = kernels.reduce("sum", y, axis=0)

Your own programs: :func:`register` (source text or a ``.cu`` file) gives a :class:`Program` to compile, launch on a
queue, capture in a graph and run on the simulator (:mod:`pymagma.kernels.registry`).  Compilation:
:func:`compile_program` (explicit arch and output kind, no device needed) and the caches in
:mod:`pymagma.kernels.compiler`.
"""

from __future__ import annotations

from ..errors import KernelCompileError
from . import compiler, programs
from . import elementwise as _elementwise  # (its named functions: kernels.relu, kernels.add, ...)
from .attention import masked_softmax, masked_softmax_backward
from .check import CHECK_DTYPES, FAULT_RECORD, check_binary, check_range
from .common import MAX_DIMS, Strides3, make_strides3
from .compiler import CompiledProgram, compile_source, nvrtc_version
from .elementwise import (
    ACTIVATION_GRADS,
    BINARY_OPS,
    UNARY_OPS,
    activation_backward,
    affine,
    bias_add,
    binary,
    cast,
    clip,
    contiguous,
    copy,
    elu,
    fill,
    leaky_relu,
    power,
    unary,
    where,
)
from .embeddings import embedding, embedding_backward
from .loader import THREADS, compile_program, grid_for, launch
from .loss import softmax_cross_entropy, softmax_cross_entropy_backward
from .norm import layer_norm, layer_norm_backward, layer_norm_param_grads
from .optim import adagrad_update, adam_update, adamw_update, rmsprop_update, sgd_update
from .pool import PoolGeometry, max_pool2d, max_pool2d_backward
from .programs import FLOAT_DTYPES
from .random import dropout, normal, uniform
from .recurrent import gru_gates_backward, gru_gates_forward, lstm_gates_backward, lstm_gates_forward
from .reductions import REDUCE_OPS, argmax, argmin, reduce
from .registry import PROGRAMS, Program, program, register
from .step import adagrad_update_at, adam_update_at, dropout_at, rmsprop_update_at, sgd_update_at

globals().update(_elementwise.NAMED)

__all__ = [
    "UNARY_OPS", "BINARY_OPS", "REDUCE_OPS", "PROGRAMS", "FLOAT_DTYPES", "CompiledProgram", "KernelCompileError",
    "compile_program", "compile_source", "nvrtc_version", "compiler", "programs", "launch", "grid_for", "THREADS",
    "register", "program", "Program",
    "MAX_DIMS", "Strides3", "make_strides3", "PoolGeometry",
    "ACTIVATION_GRADS", "unary", "binary", "where", "activation_backward", "bias_add", "fill", "cast", "copy",
    "contiguous", "affine", "clip", "elu", "leaky_relu", "power",
    "reduce", "argmax", "argmin", "softmax_cross_entropy", "softmax_cross_entropy_backward", "dropout",
    "sgd_update", "adam_update", "adamw_update", "rmsprop_update", "adagrad_update", "uniform", "normal",
    "max_pool2d", "max_pool2d_backward",
    "masked_softmax", "masked_softmax_backward",
    "layer_norm", "layer_norm_backward", "layer_norm_param_grads", "embedding", "embedding_backward",
    "check_range", "check_binary", "FAULT_RECORD", "CHECK_DTYPES",
    "sgd_update_at", "adam_update_at", "rmsprop_update_at", "adagrad_update_at", "dropout_at",
    "lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward", "gru_gates_backward",
    *_elementwise.NAMED,
]
