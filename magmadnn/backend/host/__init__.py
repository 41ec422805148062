"""Host backend: the magmadnn op set (:mod:`magmadnn.backend.ops`) on NumPy arrays, one module per topic of the op set
(``host/<topic>.py`` implements ``ops/<topic>.py``).

Layout is NCHW, float32 by default, float64 works everywhere (gradient checks use it). Every op is a pure function
returning new arrays, except the ``*_update`` optimizer ops and ``batch_norm_train``'s running statistics, which
update their arguments in place. Half operands (float16, bfloat16) are computed in float32 and rounded once
(``_half``: the ops below are wrapped once, here).

With the optional ``jit`` extra (numba, see ``_host_jit``), the layout moves that NumPy can only do in short strided
runs (GEMM output to NCHW, col2im), 2x2 stride-2 max pooling and a few fused row kernels run as compiled
single-threaded kernels; results are the same either way. The kernels are serial on purpose: BLAS threads spin for a
while after each call, and a second thread pool would fight them for the cores.

The ops are this package's attributes, re-exported as the topic modules define them (no wrapper but ``_half``'s).
"""

from __future__ import annotations

from . import _half, _memory
from ._common import _fused_rows  # noqa: F401  (tests check the fused-row guard)
from .activations import (
    activation_backward,
    activation_forward,
    log_softmax,
    log_softmax_backward,
    softmax,
    softmax_backward,
)
from .attention import attention_heads, attention_heads_backward, masked_softmax, masked_softmax_backward
from .conv import FUSED_ACTIVATIONS, conv2d_backward_bias, conv2d_backward_data, conv2d_backward_filter, conv2d_forward
from .core import asarray, copy, full, ones, to_numpy, zeros, zeros_like
from .elementwise import add, clip, divide, isfinite_all, log, multiply, negative, power, sqrt, subtract
from .embeddings import embedding_backward, embedding_forward
from .indexing import (
    broadcast_to,
    cumsum,
    take,
    take_along_axis,
    take_along_axis_backward,
    take_backward,
    tile,
)
from .linear import _matmul_nt, bias_activation, bias_activation_backward, bias_add, bias_grad, matmul  # noqa: F401  (_matmul_nt: tests time its split)
from .loss_scaling import finite_flag, loss_scale_update, revert_update
from .losses import (
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

name = "host"

__all__ = ["name", "FUSED_ACTIVATIONS", "activation_backward", "activation_forward", "adagrad_update", "adam_update",
           "adagrad_update_many", "adam_update_many", "attention_heads", "attention_heads_backward", "bias_activation",
           "bias_activation_backward", "broadcast_divide",
           "softmax_cross_entropy_mean", "softmax_cross_entropy_mean_backward", "rmsprop_update_many",
           "sgd_update_many",
           "add", "argmax", "asarray", "batch_norm_backward", "batch_norm_infer", "batch_norm_train", "bias_add",
           "bias_grad", "channel_sum", "clip", "clip_norm_scale", "concatenate", "conv2d_backward_bias",
           "conv2d_backward_data", "conv2d_backward_filter", "conv2d_forward", "copy", "divide",
           "dropout_backward", "dropout_forward", "embedding_backward", "embedding_forward", "finite_flag", "full",
           "gru_backward", "gru_forward", "isfinite_all", "layer_norm_backward", "layer_norm_forward", "log",
           "log_softmax", "log_softmax_backward", "loss_scale_update", "lstm_backward", "lstm_forward",
           "masked_softmax", "masked_softmax_backward", "matmul", "mean", "multiply", "negative", "normal", "ones",
           "pool2d_backward", "pool2d_forward", "power", "reshape", "revert_update", "rmsprop_update", "rng",
           "running_stat_update", "sgd_update", "softmax", "softmax_backward", "softmax_cross_entropy",
           "softmax_cross_entropy_backward", "split", "sqrt", "subtract", "sum", "sum_to_shape", "to_numpy",
           "transpose", "uniform", "upsample_nearest2d", "upsample_nearest2d_backward", "zeros", "zeros_like",
           "astype", "compare", "logical", "logical_not", "math_backward", "math_forward", "maximum", "minimum", "pow",
           "reduce_by", "remainder", "where", "broadcast_to", "cumsum", "take", "take_along_axis",
           "take_along_axis_backward", "take_backward", "tile"]

_half.take_half_operands(globals())

_memory.keep_freed_memory()  # freed arrays stay in the process for the next ones (see _memory)
