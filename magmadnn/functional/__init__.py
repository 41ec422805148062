"""Differentiable functions on Tensors (import as ``F``).

Each op is one small :class:`~magmadnn.autograd.Function` subclass (``<Op>Function``, never the name of a layer or a
loss) written only against the backend op set, plus a
lower-case wrapper that validates its arguments: a shape or dtype mismatch raises ``ValueError``/``TypeError``
naming the function and the shapes or dtypes seen and expected.

One idea a module: ``operators`` (what Tensor's operators and methods call), ``activations``, ``linear``, ``conv``,
``pooling``, ``normalization``, ``regularization`` (dropout), ``losses``, ``attention``, ``shapes``, ``embeddings``,
``recurrent``; ``_base`` holds the checks they share. This package re-exports them all.
"""

# ruff: noqa: F401  (re-exports: the Function classes are public names of the package, as they were of the module)
from __future__ import annotations

from .activations import (
    ActivationFunction,
    LogSoftmaxFunction,
    SoftmaxFunction,
    activation,
    elu,
    exponential,
    gelu,
    hard_sigmoid,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    softsign,
    swish,
    tanh,
)
from .attention import (
    AttentionHeadsFunction,
    MaskedSoftmaxFunction,
    MatMulNTFunction,
    attention_heads,
    check_key_mask_values,
    masked_softmax,
    matmul_nt,
    scaled_dot_product_attention,
)
from .conv import (
    Conv2dFunction,
    ConvTranspose2dFunction,
    conv1d,
    conv1d_padding,
    conv2d,
    conv2d_arguments,
    conv2d_output_shape,
    conv2d_padding,
    conv_transpose2d,
    conv_transpose2d_geometry,
)
from .elementwise import (  # noqa: A004
    AbsFunction,
    ClipFunction,
    LogFunction,
    MaximumFunction,
    ScaleFunction,
    TrailingAddFunction,
    abs,
    clip,
    log,
    maximum,
    minimum,
    scale,
    trailing_lead,
)
from .embeddings import EmbeddingFunction, embedding
from .linear import DenseFunction, dense, dense_arguments
from .losses import (
    EPSILON,
    SoftmaxCrossEntropyFunction,
    SoftmaxCrossEntropyMeanFunction,
    binary_cross_entropy_with_logits,
    binary_crossentropy,
    categorical_crossentropy,
    cross_entropy,
    huber,
    kl_divergence,
    log_cosh,
    mean_absolute_error,
    mean_squared_error,
    mse,
    softmax_cross_entropy,
)
from .normalization import (
    BatchNormInferFunction,
    BatchNormTrainFunction,
    LayerNormFunction,
    batch_norm,
    group_norm,
    layer_norm,
    register_sync_batch_norm,
    rms_norm,
)
from .operators import (
    AddFunction,
    CastFunction,
    DivideFunction,
    MatMulFunction,
    MeanFunction,
    MultiplyFunction,
    NegativeFunction,
    PowerFunction,
    ReshapeFunction,
    SubtractFunction,
    SumFunction,
    TransposeFunction,
    add,
    cast,
    divide,
    flatten,
    matmul,
    mean,
    multiply,
    negative,
    power,
    reshape,
    subtract,
    sum,
    transpose,
)
from .pooling import (
    Pool2dFunction,
    avg_pool1d,
    avg_pool2d,
    global_avg_pool2d,
    global_max_pool2d,
    max_pool1d,
    max_pool2d,
    pool2d_arguments,
)
from .recurrent import GRUFunction, LSTMFunction, gru, gru_steps, lstm, lstm_steps, simple_rnn_steps
from .regularization import DropoutFunction, dropout
from .shapes import (
    ConcatenateFunction,
    PadFunction,
    ReverseFunction,
    SliceFunction,
    UpsampleNearest2dFunction,
    concatenate,
    pad_axis,
    reverse,
    slice_axis,
    upsample_nearest2d,
)

__all__ = [
    "add", "subtract", "multiply", "divide", "negative", "power", "matmul", "sum", "mean", "reshape", "transpose",
    "flatten", "activation", "relu", "sigmoid", "tanh", "leaky_relu", "elu", "gelu", "softmax", "log_softmax",
    "dense", "conv2d", "conv2d_output_shape", "conv2d_padding", "max_pool2d", "avg_pool2d", "global_avg_pool2d",
    "batch_norm", "dropout", "softmax_cross_entropy", "mse",
    "matmul_nt", "masked_softmax", "scaled_dot_product_attention", "check_key_mask_values",
    "concatenate", "upsample_nearest2d", "global_max_pool2d", "conv_transpose2d", "conv_transpose2d_geometry",
    "layer_norm", "rms_norm", "group_norm", "embedding", "cross_entropy", "binary_cross_entropy_with_logits",
    "lstm", "gru", "log", "clip", "abs", "scale", "categorical_crossentropy", "binary_crossentropy",
    "mean_squared_error", "mean_absolute_error", "huber", "log_cosh", "kl_divergence",
]  # fmt: skip
__all__ += ["silu", "swish", "softplus", "softsign", "selu", "hard_sigmoid", "exponential"]  # Keras' activations
__all__ += ["conv1d", "conv1d_padding", "max_pool1d", "avg_pool1d", "slice_axis", "reverse", "lstm_steps",
            "gru_steps", "simple_rnn_steps"]  # the sequence layers
__all__ += ["cast"]  # mixed precision
__all__ += ["maximum", "minimum", "pad_axis"]  # the merging and padding layers
__all__ += ["attention_heads"]  # attention over heads interleaved on the last axis (MultiHeadAttention's fused path)
