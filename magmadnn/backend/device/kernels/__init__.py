"""The device backend's own GPU kernels: what only deep learning needs (optimizer updates, one tensor or many at
once, the fused softmax cross-entropy, dropout, max pooling with saved offsets, attention's masked softmax, layer/RMS
norm rows, embeddings, recurrent gates, bias + activation epilogues, value checks into a fault record, and the
updates and dropout of a replayed step).

One ``.cu`` program and one launcher module beside it per topic (``pool.cu`` and ``pool.py``), as in
:mod:`pymagma.kernels`; the programs are registered here with pymagma's kernel registry
(:func:`pymagma.kernels.register`, one NVRTC compilation per program holding its per-dtype instantiations), so that
they compile, cache, launch on a queue, record into a CUDA graph and run on the simulator's host build exactly as
pymagma's own programs do; their launchers reach the launcher in use by the same path (``pymagma.kernels.common``).
``#include "common.cuh"`` and ``"philox.cuh"`` resolve in pymagma's kernels folder.  Only the device backend
imports this package (``import magmadnn`` does not import pymagma).
"""

from __future__ import annotations

from pathlib import Path

from pymagma import kernels as _kernels
from pymagma.kernels.check import CHECK_DTYPES, FAULT_RECORD, check_binary, check_range  # pymagma's
from pymagma.kernels.programs import FLOAT_DTYPES as _FLOATS
from pymagma.kernels.programs import expression as _expression

from .attention import attention_heads, attention_heads_backward, masked_softmax, masked_softmax_backward
from .dropout import dropout
from .embeddings import embedding, embedding_backward
from .epilogue import bias_activation, bias_activation_backward
from .loss import (
    keras_prob_xent,
    keras_prob_xent_backward,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
    softmax_cross_entropy_mean,
)
from .norm import (
    layer_norm,
    layer_norm_backward,
    layer_norm_backward_op,
    layer_norm_backward_params,
    layer_norm_forward,
    layer_norm_param_grads,
)
from .optim import (
    MANY,
    ManyTensors,
    adagrad_update,
    adagrad_update_many,
    adam_update,
    adam_update_many,
    adamw_update,
    rmsprop_update,
    rmsprop_update_many,
    sgd_update,
    sgd_update_many,
)
from .pool import PadGeometry, PoolGeometry, max_pool2d, max_pool2d_backward, pad2d
from .recurrent import (
    gru_gates_backward,
    gru_gates_forward,
    lstm_gates_backward,
    lstm_gates_forward,
)
from .step import (
    adagrad_update_at,
    adam_update_at,
    dropout_at,
    rmsprop_update_at,
    sgd_update_at,
)

#: This package's folder: its ``.cu`` programs.
KERNELS_DIR = Path(__file__).resolve().parent


def _per_dtype(names, dtypes=_FLOATS) -> tuple[str, ...]:
    return tuple(_expression(k, d) for k in names for d in dtypes)


#: program name -> (source file, name expressions), registered below
SHIPPED = {
    "loss": ("loss.cu", _per_dtype(("softmax_xent_index", "softmax_xent_prob", "softmax_xent_index_backward",
                                     "softmax_xent_prob_backward", "softmax_xent_index_mean_backward",
                                     "softmax_xent_prob_mean_backward", "softmax_xent_index_mean",
                                     "softmax_xent_prob_mean", "keras_prob_xent", "keras_prob_xent_backward"))),
    "epilogue": ("epilogue.cu", _per_dtype(("bias_act", "bias_act_backward"))),
    "optim": ("optim.cu", _per_dtype(("sgd", "adam", "rmsprop", "adagrad", "sgd_many", "adam_many", "rmsprop_many",
                                      "adagrad_many"))),
    "dropout": ("dropout.cu", _per_dtype(("dropout",))),
    "pool": ("pool.cu", _per_dtype(("max_pool_forward", "max_pool_backward", "pad2d"))),
    "attention": ("attention.cu", _per_dtype(("masked_softmax", "masked_softmax_backward", "attention_heads_forward",
                                               "attention_heads_backward_rows", "attention_heads_backward_keys"))),
    "norm": ("norm.cu", _per_dtype(("norm_forward", "norm_backward", "norm_param_grad", "norm_param_sum",
                                   "norm_backward_params"))),
    "embeddings": ("embeddings.cu", _per_dtype(("embedding_gather", "embedding_scatter_add"))),
    "recurrent": ("recurrent.cu", _per_dtype(("lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward",
                                               "gru_gates_backward"))),
    # graph replay: per-step values read from device memory
    "step": ("step.cu", _per_dtype(("sgd_at", "adam_at", "rmsprop_at", "adagrad_at", "dropout_at"))),
}

#: name -> the registered pymagma.kernels.Program of each program above
PROGRAMS = {name: _kernels.register(name, path=KERNELS_DIR / file, expressions=expressions)
            for name, (file, expressions) in SHIPPED.items()}

__all__ = [
    "SHIPPED", "PROGRAMS", "KERNELS_DIR",
    "softmax_cross_entropy", "softmax_cross_entropy_backward", "softmax_cross_entropy_mean", "keras_prob_xent",
    "keras_prob_xent_backward", "dropout", "dropout_at",
    "sgd_update", "adam_update", "adamw_update", "rmsprop_update", "adagrad_update",
    "MANY", "ManyTensors", "sgd_update_many", "adam_update_many", "rmsprop_update_many", "adagrad_update_many",
    "sgd_update_at", "adam_update_at", "rmsprop_update_at", "adagrad_update_at",
    "PoolGeometry", "max_pool2d", "max_pool2d_backward", "PadGeometry", "pad2d", "masked_softmax",
    "masked_softmax_backward",
    "attention_heads", "attention_heads_backward",
    "layer_norm", "layer_norm_backward", "layer_norm_backward_params", "layer_norm_param_grads", "embedding",
    "layer_norm_forward", "layer_norm_backward_op",
    "embedding_backward",
    "lstm_gates_forward", "lstm_gates_backward", "gru_gates_forward", "gru_gates_backward",
    "check_range", "check_binary", "FAULT_RECORD", "CHECK_DTYPES", "bias_activation", "bias_activation_backward",
]
