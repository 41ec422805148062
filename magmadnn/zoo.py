"""Model zoo: the networks of the examples, the CLI and the benchmark, built from the public layers.

Every builder takes the per-sample input shape (NCHW, no batch dimension) and the number of classes and returns an
uncompiled model whose output is the class logits (train it with the "cross_entropy" loss). The weights are created
on the default backend; ``compile(device=...)`` or ``model.to(device)`` moves them.
"""

from __future__ import annotations

from . import layers as L
from .models import Model, Sequential

__all__ = ["BUILDERS", "build", "lenet5", "mlp", "resnet_small", "small_cnn"]


def mlp(input_shape=(1, 28, 28), num_classes: int = 10, hidden=(256, 128), activation: str = "relu",
        dropout: float = 0.0, seed: int | None = None):
    """Multi-layer perceptron: Flatten, then one Dense(+activation, +Dropout) per entry of `hidden`, then logits."""
    stack = [L.Input(tuple(input_shape)), L.Flatten()]
    for units in hidden:
        stack.append(L.Dense(units, activation=activation))
        if dropout:
            stack.append(L.Dropout(dropout, seed=seed))
    stack.append(L.Dense(num_classes))
    return Sequential(stack, name="mlp")


def lenet5(input_shape=(1, 28, 28), num_classes: int = 10):
    """LeNet-5 (LeCun et al., 1998) with ReLU and max pooling: conv 6@5x5, pool, conv 16@5x5, pool, 120, 84, logits.

    Images smaller than 32x32 (MNIST's 28x28) get 'same' padding in the first convolution, as in the original's
    padded 32x32 input; the input must be at least 28x28 for the second convolution to fit.
    """
    _, height, width = input_shape
    if min(height, width) < 28:
        raise ValueError(f"lenet5: needs images of at least 28x28, got {height}x{width}; use small_cnn for these")
    first_padding = "same" if min(height, width) < 32 else "valid"
    return Sequential(
        [
            L.Input(tuple(input_shape)),
            L.Conv2D(6, 5, padding=first_padding, activation="relu"),
            L.MaxPool2D(2),
            L.Conv2D(16, 5, activation="relu"),
            L.MaxPool2D(2),
            L.Flatten(),
            L.Dense(120, activation="relu"),
            L.Dense(84, activation="relu"),
            L.Dense(num_classes),
        ],
        name="lenet5",
    )


def small_cnn(input_shape=(1, 28, 28), num_classes: int = 10, filters=(16, 32), dense: int = 128,
              batch_norm: bool = False, dropout: float = 0.0, seed: int | None = None):
    """A VGG-style CNN: per entry of `filters` a 3x3 'same' convolution (+BatchNorm) + ReLU + 2x2 max pool, then a
    hidden Dense layer and the logits. Two blocks fit 8x8 digits; three suit 32x32 CIFAR images."""
    stack = [L.Input(tuple(input_shape))]
    for count in filters:
        if batch_norm:
            stack += [L.Conv2D(count, 3, padding="same", use_bias=False), L.BatchNorm(), L.Activation("relu")]
        else:
            stack.append(L.Conv2D(count, 3, padding="same", activation="relu"))
        stack.append(L.MaxPool2D(2))
    stack += [L.Flatten(), L.Dense(dense, activation="relu")]
    if dropout:
        stack.append(L.Dropout(dropout, seed=seed))
    stack.append(L.Dense(num_classes))
    return Sequential(stack, name="small_cnn")


def _conv_bn(x, filters: int, kernel: int, strides: int = 1):
    x = L.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    return L.BatchNorm()(x)


def _residual_block(x, filters: int, strides: int, in_filters: int):
    """conv-BN-ReLU-conv-BN plus a shortcut (identity, or 1x1 conv-BN when the shape changes), then ReLU."""
    y = L.Activation("relu")(_conv_bn(x, filters, 3, strides))
    y = _conv_bn(y, filters, 3)
    shortcut = x if strides == 1 and in_filters == filters else _conv_bn(x, filters, 1, strides)
    return L.Activation("relu")(L.Add()([y, shortcut]))


def resnet_small(input_shape=(3, 32, 32), num_classes: int = 10, widths=(16, 32, 64), blocks_per_stage: int = 1):
    """A small ResNet (He et al., 2016, CIFAR variant): a 3x3 stem, one stage per entry of `widths` (the first keeps
    the resolution, each later one halves it) of `blocks_per_stage` residual blocks, global average pool, logits."""
    inputs = L.Input(tuple(input_shape))
    x = L.Activation("relu")(_conv_bn(inputs, widths[0], 3))
    channels = widths[0]
    for stage, width in enumerate(widths):
        for block in range(blocks_per_stage):
            strides = 2 if stage > 0 and block == 0 else 1
            x = _residual_block(x, width, strides, channels)
            channels = width
    outputs = L.Dense(num_classes)(L.GlobalAvgPool2D()(x))
    return Model(inputs, outputs, name="resnet_small")


BUILDERS = {"lenet5": lenet5, "mlp": mlp, "cnn": small_cnn, "resnet": resnet_small}


def build(name: str, input_shape, num_classes: int, device=None, **options):
    """The zoo model called `name` (one of BUILDERS) for `input_shape` and `num_classes`, on `device` ("host",
    "gpu", "gpu:N", "auto"; default: the default backend). ``compile(device=...)`` or ``to()`` can move it later."""
    if name not in BUILDERS:
        raise ValueError(f"zoo.build: unknown model {name!r}; expected one of {sorted(BUILDERS)}")
    model = BUILDERS[name](tuple(input_shape), num_classes, **options)
    return model if device is None else model.to(device)


# ------------------------------------------------------------------------------------------ transformers
def _transformer_block(x, dim: int, heads: int, mlp_ratio: int, causal: bool, dropout: float):
    """Pre-LayerNorm block: x + attention(LayerNorm(x)), then + Dense(GELU) MLP of LayerNorm of that (GELU's tanh
    form, as these models have always used)."""
    a = L.MultiHeadAttention(heads, dim // heads, dropout=dropout, causal=causal)(L.LayerNorm()(x))
    x = L.Add()([x, a])
    m = L.Dense(dim)(L.Dense(mlp_ratio * dim, activation="gelu_tanh")(L.LayerNorm()(x)))
    return L.Add()([x, m])


def char_transformer(input_shape=(64,), num_classes: int = 128, dim: int = 64, heads: int = 4, blocks: int = 2,
                     mlp_ratio: int = 4, dropout: float = 0.0):
    """A GPT-style character model: int64 tokens (context,) -> token + learned position embeddings, `blocks` causal
    pre-LayerNorm attention blocks with GELU MLPs, a final LayerNorm and the next-token logits (context, vocab);
    `num_classes` is the vocabulary size."""
    if len(tuple(input_shape)) != 1:
        raise ValueError(f"char_transformer: input_shape must be (context,) for windows of token ids, got "
                         f"{tuple(input_shape)}; it is a language model (examples/char_transformer.py trains it)")
    tokens = L.Input(tuple(input_shape), dtype="int64")
    x = L.PositionEmbedding()(L.Embedding(num_classes, dim)(tokens))
    for _ in range(blocks):
        x = _transformer_block(x, dim, heads, mlp_ratio, True, dropout)
    return Model(tokens, L.Dense(num_classes)(L.LayerNorm()(x)), name="char_transformer")


def vit_tiny(input_shape=(3, 32, 32), num_classes: int = 10, patch: int = 4, dim: int = 64, heads: int = 4,
             blocks: int = 4, mlp_ratio: int = 2, dropout: float = 0.0):
    """A small Vision Transformer (Dosovitskiy et al., 2021): patches embedded by a Conv2D of stride `patch`, one
    token per patch (Reshape + Permute) with learned position embeddings, `blocks` pre-LayerNorm attention blocks, a
    final LayerNorm, the mean over the tokens and the logits."""
    _, height, width = input_shape
    inputs = L.Input(tuple(input_shape))
    grid = (height // patch, width // patch)
    x = L.Conv2D(dim, patch, strides=patch)(inputs)  # (dim, h, w)
    x = L.Permute((2, 1))(L.Reshape((dim, grid[0] * grid[1]))(x))  # (tokens, dim)
    x = L.PositionEmbedding()(x)
    for _ in range(blocks):
        x = _transformer_block(x, dim, heads, mlp_ratio, False, dropout)
    x = L.Reshape((dim, *grid))(L.Permute((2, 1))(L.LayerNorm()(x)))  # back to (dim, h, w) to pool the tokens
    return Model(inputs, L.Dense(num_classes)(L.GlobalAvgPool2D()(x)), name="vit_tiny")


BUILDERS.update({"char_transformer": char_transformer, "vit_tiny": vit_tiny})
__all__ += ["char_transformer", "vit_tiny"]


# --------------------------------------------------------------------- MagmaDNN's VGG and AlexNet
__all__ += ["alexnet_small", "vgg_small"]

#: VGG-16's convolution stages (channels of each 3x3 convolution), as in MagmaDNN's ``examples/vgg16.cpp``.
VGG16_STAGES = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))


def _scaled(count: int, width: float) -> int:
    return max(1, round(count * width))


def vgg_small(input_shape=(3, 32, 32), num_classes: int = 10, stages=VGG16_STAGES, width: float = 1.0,
              dense: int = 512, batch_norm: bool = True, dropout: float = 0.4, seed: int | None = None):
    """VGG-16 for CIFAR (Simonyan & Zisserman, 2015; MagmaDNN's ``vgg16`` example): per stage 3x3 'same'
    convolutions (+BatchNorm) + ReLU with Dropout(``dropout``) between the convolutions of a stage, a 2x2 max pool
    ('same': any image size works), then Dropout(0.5), Dense(``dense``) + ReLU, Dropout(0.5) and the logits.
    ``width`` scales every stage's channels (0.25: a CPU-sized VGG)."""
    stack = [L.Input(tuple(input_shape))]
    for stage in stages:
        for i, count in enumerate(stage):
            count = _scaled(count, width)
            if batch_norm:
                stack += [L.Conv2D(count, 3, padding="same", use_bias=False), L.BatchNorm(), L.Activation("relu")]
            else:
                stack.append(L.Conv2D(count, 3, padding="same", activation="relu"))
            if dropout and i < len(stage) - 1:
                stack.append(L.Dropout(dropout, seed=seed))
        stack.append(L.MaxPool2D(2, padding="same"))
    stack += [L.Dropout(0.5, seed=seed), L.Flatten(), L.Dense(_scaled(dense, width), activation="relu"),
              L.Dropout(0.5, seed=seed), L.Dense(num_classes)]
    return Sequential(stack, name="vgg_small")


def alexnet_small(input_shape=(3, 32, 32), num_classes: int = 10, width: float = 1.0, dense=(1024, 1024),
                  dropout: float = 0.5, seed: int | None = None):
    """AlexNet (Krizhevsky et al., 2012; MagmaDNN's ``alexnet`` example) scaled for 32x32 images: five convolutions
    of 64, 192, 384, 256 and 256 channels (times ``width``; 5x5 stride 2, 5x5, then 3x3, all zero-padded) with ReLU,
    3x3 stride-2 max pools ('same': any image size works) after the first, second and fifth, then the ``dense``
    hidden layers (ReLU, Dropout(``dropout``)) and the logits."""
    c = [_scaled(n, width) for n in (64, 192, 384, 256, 256)]
    pool = lambda: L.MaxPool2D(3, strides=2, padding="same")  # noqa: E731
    stack = [L.Input(tuple(input_shape)),
             L.Conv2D(c[0], 5, strides=2, padding=2, activation="relu"), pool(),
             L.Conv2D(c[1], 5, padding=2, activation="relu"), pool(),
             L.Conv2D(c[2], 3, padding=1, activation="relu"),
             L.Conv2D(c[3], 3, padding=1, activation="relu"),
             L.Conv2D(c[4], 3, padding=1, activation="relu"), pool(),
             L.Flatten()]
    for units in dense:
        stack.append(L.Dense(_scaled(units, width), activation="relu"))
        if dropout:
            stack.append(L.Dropout(dropout, seed=seed))
    stack.append(L.Dense(num_classes))
    return Sequential(stack, name="alexnet_small")


BUILDERS.update({"vgg": vgg_small, "alexnet": alexnet_small})

# -- recurrent models
def lstm_classifier(input_shape=(28, 28), num_classes: int = 10, units: int = 128, layers: int = 1,
                    cell: str = "lstm"):
    """A sequence classifier: ``layers`` stacked LSTM (or GRU, ``cell="gru"``) layers of ``units`` over
    (time, features) inputs (MNIST read row by row: (28, 28)), the last step's state, then the logits. Images
    (C, H, W) are read row by row too: H steps of C * W features."""
    if cell not in ("lstm", "gru"):
        raise ValueError(f"lstm_classifier: cell must be 'lstm' or 'gru', got {cell!r}")
    shape = tuple(input_shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"lstm_classifier: input_shape must be (time, features) or an image (C, H, W), got {shape}")
    layer = L.LSTM if cell == "lstm" else L.GRU
    stack = [L.Input(shape)]
    if len(shape) == 3:
        channels, height, width = shape
        stack += [L.Permute((2, 1, 3)), L.Reshape((height, channels * width))]  # rows as time steps
    stack += [layer(units, return_sequences=i < layers - 1) for i in range(layers)]
    stack.append(L.Dense(num_classes))
    return Sequential(stack, name="lstm_classifier")


BUILDERS["lstm"] = lstm_classifier
#: The builders whose input is token ids (time,), not images: the CLI's image datasets do not offer them.
TOKEN_MODELS = ("char_transformer",)
__all__ += ["TOKEN_MODELS"]
__all__ += ["lstm_classifier"]
