"""Device backend: the magmadnn op set (:mod:`magmadnn.backend.ops`) on pymagma DeviceArrays, one module per topic of
the op set (``device/<topic>.py`` implements ``ops/<topic>.py``), plus what has no host twin: ``graphs`` (graph
replay), ``faults`` (checks on the device) and ``collectives`` (data-parallel exchange).

Every op runs on the device and returns DeviceArrays; only ``to_numpy`` copies data to the host, and
``isfinite_all`` reads back one scalar. Parameters, gradients and optimizer state stay DeviceArrays, and the
``*_update`` ops change them in place with one fused kernel each.

What runs where:

- matrix products: ``pymagma.blas`` (gemm on the row-major identity, transposes as flags, stacks by gemm_batched);
- convolution (forward, backward data/filter/bias), average pooling, softmax / log-softmax, batch norm, and the
  sigmoid, tanh, ReLU and ELU activations: cuDNN through ``pymagma.dnn``;
- general array kernels (broadcasting arithmetic, reductions, argmax, bias add, the activations cuDNN lacks,
  activation gradients from the output only, casts, copies, random numbers): ``pymagma.kernels``;
- what only deep learning needs (the fused softmax cross-entropy, dropout, optimizer updates, max pooling with saved
  offsets, masked softmax, layer/RMS norm rows, embeddings, recurrent gates, value checks, the replayed step's
  updates): this package's own kernel programs, ``device/kernels/`` (registered with pymagma's kernel registry).

Operands: a Python scalar takes the array's dtype (rounded to it first, as in NumPy); two arrays must share a dtype.
Package-level ops create arrays on the current GPU; :func:`for_index` gives the same op set creating them on GPU n.
Ops on existing arrays run on the arrays' device.

Where cuDNN's conventions differ from the op set, the op set wins: see the adapters at the top of ``conv``.
The ops are this package's attributes, re-exported as the topic modules define them (no wrapper).
"""

from __future__ import annotations

import operator
import types

from .. import ops as _ops
from . import core as _core
from . import random as _random
from .activations import (
    activation_backward,
    activation_forward,
    log_softmax,
    log_softmax_backward,
    softmax,
    softmax_backward,
)
from .attention import attention_heads, attention_heads_backward, masked_softmax, masked_softmax_backward
from .collectives import copy_to_host, flat_pack, flat_unpack, host_empty
from .conv import FUSED_ACTIVATIONS, conv2d_backward_bias, conv2d_backward_data, conv2d_backward_filter, conv2d_forward
from .core import asarray, constant, copy, full, ones, to_numpy, zeros, zeros_like
from .elementwise import add, clip, divide, isfinite_all, log, multiply, negative, power, sqrt, subtract
from .embeddings import embedding_backward, embedding_forward
from .faults import check_binary, check_range, fault_error, fault_record
from .graphs import copy_into, graph_capture, staging_buffer
from .indexing import (
    broadcast_to,
    cumsum,
    take,
    take_along_axis,
    take_along_axis_backward,
    take_backward,
    tile,
)
from .linear import bias_activation, bias_activation_backward, bias_add, bias_grad, matmul
from .loss_scaling import finite_flag, loss_scale_update, revert_update
from .losses import (
    probability_crossentropy,
    probability_crossentropy_backward,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
    softmax_cross_entropy_mean,
    softmax_cross_entropy_mean_backward,
)
from .math import (  # noqa: A004
    astype,
    compare,
    logical,
    logical_not,
    math_backward,
    math_forward,
    maximum,
    minimum,
    pow,
    reduce_by,
    remainder,
    where,
)
from .normalization import (
    batch_norm_backward,
    batch_norm_infer,
    batch_norm_train,
    layer_norm_backward,
    layer_norm_forward,
    running_stat_update,
)
from .optim import (
    adagrad_update,
    adagrad_update_many,
    adam_update,
    adam_update_many,
    clip_norm_scale,
    rmsprop_update,
    rmsprop_update_many,
    sgd_update,
    sgd_update_many,
)
from .pooling import pool2d_backward, pool2d_forward
from .random import dropout_backward, dropout_forward, normal, rng, uniform
from .recurrent import gru_backward, gru_forward, lstm_backward, lstm_forward
from .reductions import argmax, broadcast_divide, channel_sum, mean, sum, sum_to_shape  # noqa: A004
from .shapes import concatenate, reshape, split, transpose, upsample_nearest2d, upsample_nearest2d_backward

name = "device"

_COLLECTIVE_OPS = ("host_empty", "copy_to_host", "flat_pack", "flat_unpack")
_GRAPH_OPS = ("graph_capture", "staging_buffer", "copy_into")
_FAULT_OPS = ("check_range", "check_binary", "fault_record", "fault_error")

__all__ = ["name", "FUSED_ACTIVATIONS", "activation_backward", "activation_forward", "adagrad_update", "adam_update",
           "adagrad_update_many", "adam_update_many", "attention_heads", "attention_heads_backward", "bias_activation",
           "bias_activation_backward", "broadcast_divide",
           "softmax_cross_entropy_mean", "softmax_cross_entropy_mean_backward", "probability_crossentropy",
           "probability_crossentropy_backward", "rmsprop_update_many",
           "sgd_update_many",
           "add", "argmax", "asarray", "batch_norm_backward", "batch_norm_infer", "batch_norm_train", "bias_add",
           "bias_grad", "channel_sum", "clip", "clip_norm_scale", "concatenate", "conv2d_backward_bias",
           "conv2d_backward_data", "conv2d_backward_filter", "conv2d_forward", "copy", "divide", "dropout_backward",
           "dropout_forward", "embedding_backward", "embedding_forward", "finite_flag", "full", "gru_backward",
           "gru_forward", "isfinite_all", "layer_norm_backward", "layer_norm_forward", "log", "log_softmax",
           "log_softmax_backward", "loss_scale_update", "lstm_backward", "lstm_forward", "masked_softmax",
           "masked_softmax_backward", "matmul", "mean", "multiply", "negative", "normal", "ones", "pool2d_backward",
           "pool2d_forward", "power", "reshape", "revert_update", "rmsprop_update", "rng", "running_stat_update",
           "sgd_update", "softmax", "softmax_backward", "softmax_cross_entropy", "softmax_cross_entropy_backward",
           "split", "sqrt", "subtract", "sum", "sum_to_shape", "to_numpy", "transpose", "uniform",
           "upsample_nearest2d", "upsample_nearest2d_backward", "zeros", "zeros_like", "for_index", "constant",
           "host_empty", "copy_to_host", "flat_pack", "flat_unpack", "graph_capture", "staging_buffer", "copy_into",
           "check_range", "check_binary", "fault_record", "fault_error",
           "astype", "compare", "logical", "logical_not", "math_backward", "math_forward", "maximum", "minimum", "pow",
           "reduce_by", "remainder", "where", "broadcast_to", "cumsum", "take", "take_along_axis",
           "take_along_axis_backward", "take_backward", "tile"]

# ------------------------------------------------------------------------------------------------- several GPUs

_VIEWS: dict[int, types.ModuleType] = {}


def for_index(n):
    """The op set with its creation ops allocating on GPU ``n`` (one cached object per GPU)."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"for_index: a GPU number must be >= 0, got {n}")
    view = _VIEWS.get(n)
    if view is None:
        space = globals()
        view = types.ModuleType(f"{__name__}.gpu{n}", f"magmadnn's device backend on GPU {n}")
        for op in _ops.OPS:
            setattr(view, op, space[op])
        for op, fn in {**_core._creation_ops(n), **_random._creation_ops(n)}.items():
            setattr(view, op, fn)
        view.name, view.device_index = f"gpu:{n}", n
        view.FUSED_ACTIVATIONS, view.for_index = FUSED_ACTIVATIONS, for_index
        for name_ in _COLLECTIVE_OPS + _GRAPH_OPS + _FAULT_OPS:
            setattr(view, name_, space[name_])
        _VIEWS[n] = view
    return view
