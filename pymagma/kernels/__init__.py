"""GPU kernels no library provides, written in CUDA C++, compiled with NVRTC on first use and run on DeviceArrays.

One launcher module beside each ``.cu`` program launches only that program (``random.cu`` and ``random.py``); this
package re-exports their public functions.  Every function runs on the default queue's stream of its operands'
device.  Float kernels exist for float32, float64, float16 and bfloat16 (half types compute in float32; bfloat16
arrays need ``ml_dtypes``, see :mod:`pymagma.dtypes`).  Operands must be DeviceArrays (NumPy input is a TypeError).
Example::

    from pymagma import array, kernels
    x = array.asarray(np.random.rand(4, 3).astype(np.float32))
    y = kernels.add(kernels.relu(x), array.asarray(np.ones(3, np.float32)))   # broadcasting
    s = kernels.reduce("sum", y, axis=0)

These are the kernels a general GPU array library needs (elementwise, reductions, casts, copies, random numbers,
the array API's).  Other programs register through the same API (magmadnn's deep-learning kernels do, in
``magmadnn.backend.device.kernels``).  Your own programs: :func:`register` (source text or a ``.cu`` file) gives a
:class:`Program` to compile, launch on a queue, capture in a graph and run on the simulator
(:mod:`pymagma.kernels.registry`).  Compilation:
:func:`compile_program` (explicit arch and output kind, no device needed) and the caches in
:mod:`pymagma.kernels.compiler`.
"""

from __future__ import annotations

from ..errors import KernelCompileError
from . import compiler, programs
from . import elementwise as _elementwise  # (its named functions: kernels.relu, kernels.add, ...)
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
    broadcast_divide,
    cast,
    clip,
    contiguous,
    copy,
    copy_any,
    elu,
    fill,
    leaky_relu,
    power,
    unary,
    where,
)
from .loader import THREADS, compile_program, grid_for, launch
from .programs import FLOAT_DTYPES
from .random import normal, uniform
from .reductions import REDUCE_OPS, argmax, argmin, reduce
from .registry import PROGRAMS, Program, program, register

globals().update(_elementwise.NAMED)

__all__ = [
    "UNARY_OPS", "BINARY_OPS", "REDUCE_OPS", "PROGRAMS", "FLOAT_DTYPES", "CompiledProgram", "KernelCompileError",
    "compile_program", "compile_source", "nvrtc_version", "compiler", "programs", "launch", "grid_for", "THREADS",
    "register", "program", "Program",
    "MAX_DIMS", "Strides3", "make_strides3",
    "ACTIVATION_GRADS", "unary", "binary", "where", "activation_backward", "bias_add", "fill", "cast", "copy",
    "copy_any", "broadcast_divide", "contiguous", "affine", "clip", "elu", "leaky_relu", "power",
    "reduce", "argmax", "argmin", "uniform", "normal", "check_range", "check_binary", "FAULT_RECORD", "CHECK_DTYPES",
    *_elementwise.NAMED,
]

#: Deep-learning kernels that lived here once and moved to magmadnn's device backend, with their launcher modules.
MOVED = frozenset((
    "softmax_cross_entropy", "softmax_cross_entropy_backward", "dropout", "dropout_at",
    "sgd_update", "adam_update", "adamw_update", "rmsprop_update", "adagrad_update",
    "sgd_update_at", "adam_update_at", "rmsprop_update_at", "adagrad_update_at",
    "PoolGeometry", "max_pool2d", "max_pool2d_backward", "masked_softmax", "masked_softmax_backward",
    "layer_norm", "layer_norm_backward", "layer_norm_param_grads", "embedding", "embedding_backward",
    "lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward", "gru_gates_backward",
    "loss", "optim", "step", "pool", "attention", "norm", "embeddings", "recurrent",
))
NEW_HOME = "magmadnn.backend.device.kernels"


def __getattr__(name: str):
    if name in MOVED:
        raise AttributeError(f"pymagma.kernels.{name} moved to {NEW_HOME}.{name}: the deep-learning kernels live with "
                             f"magmadnn's device backend, which registers them with pymagma.kernels.register")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
