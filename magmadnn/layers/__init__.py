"""Layers: parameterised building blocks of models (``magmadnn.layers.Dense(10)``).

Per-sample shapes exclude the batch dimension and use NCHW (``Input((1, 28, 28))``); sequences are (time, features)
(``Input((T, F))``, or ``Input((T,), dtype="int64")`` for token ids). See :mod:`.base` for how
layers build, name and seed themselves.

Modules by Keras' topics: ``core`` (Dense), ``activations``, ``conv``, ``pooling``, ``normalization``,
``regularization`` (Dropout), ``reshaping``, ``merging``, ``preprocessing`` (Rescaling, Normalization), ``embedding``,
``attention``, ``position``, ``recurrent``, ``bidirectional``, ``wrappers`` (TimeDistributed), ``lambda_layer``.
The layer machinery: ``base``
(Layer, Input, symbolic tensors), ``weights``, ``masking``, ``mixed`` (dtype policies), ``registry`` (classes by
name, default names, seeds), ``arguments``, ``penalties`` (``losses``, regularizers and constraints).
"""

from ..backend.geometry import ACTIVATION_NAMES

# -- softmax over any axis
from .activations import Activation, LeakyReLU, LogSoftmax, Softmax  # noqa: E402
from .attention import MultiHeadAttention
from .base import Input, Layer, ShapeMismatchError, SymbolicTensor, layer_class, register
from .conv import Conv2D
from .core import Dense
from .embedding import Embedding
from .merging import Add
from .normalization import (
    BatchNorm,
    BatchNormalization,
    GroupNorm,
    GroupNormalization,
    LayerNorm,
    LayerNormalization,
    RMSNorm,
)
from .pooling import AvgPool2D, GlobalAvgPool2D, MaxPool2D
from .position import PositionEmbedding

# -- recurrent layers
from .recurrent import GRU, LSTM, SimpleRNN  # noqa: E402
from .regularization import Dropout
from .reshaping import Flatten

GlobalAvgPool = GlobalAvgPool2D
# Keras' long names of the 2-D pooling layers (NCHW, as Conv2D here)
MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D = MaxPool2D, AvgPool2D, GlobalAvgPool2D

# -- conv/shape layers
from .conv import Conv2DTranspose, DepthwiseConv2D  # noqa: E402
from .merging import Concatenate  # noqa: E402
from .pooling import GlobalMaxPool2D  # noqa: E402
from .reshaping import Permute, Reshape, UpSampling2D  # noqa: E402

GlobalMaxPool = GlobalMaxPooling2D = GlobalMaxPool2D

__all__ = [
    "Layer", "Input", "SymbolicTensor", "ShapeMismatchError", "layer_class", "register", "ACTIVATION_NAMES",
    "Dense", "Activation", "LeakyReLU", "Dropout", "Flatten", "BatchNorm", "BatchNormalization", "Add",
    "Conv2D", "MaxPool2D", "AvgPool2D", "GlobalAvgPool2D", "GlobalAvgPool", "MaxPooling2D", "AveragePooling2D",
    "GlobalAveragePooling2D", "GlobalMaxPooling2D",
    "LayerNorm", "LayerNormalization", "RMSNorm", "GroupNorm", "GroupNormalization", "Embedding",
]
__all__ += ["Softmax", "LogSoftmax"]
__all__ += ["Conv2DTranspose", "DepthwiseConv2D", "GlobalMaxPool2D", "GlobalMaxPool", "Concatenate", "Permute",
            "Reshape", "UpSampling2D"]

__all__ += ["LSTM", "GRU", "SimpleRNN"]  # recurrent layers


# -- the layers a Keras user reaches for next
from .attention import AdditiveAttention, Attention  # noqa: E402
from .conv import SeparableConv2D  # noqa: E402
from .merging import Average, Maximum, Minimum, Multiply, Subtract  # noqa: E402
from .preprocessing import Normalization, Rescaling  # noqa: E402
from .regularization import GaussianNoise, SpatialDropout1D, SpatialDropout2D  # noqa: E402
from .reshaping import Cropping2D, RepeatVector, ZeroPadding2D  # noqa: E402
from .wrappers import TimeDistributed  # noqa: E402

__all__ += ["Subtract", "Multiply", "Average", "Maximum", "Minimum", "RepeatVector", "ZeroPadding2D", "Cropping2D",
            "Rescaling", "Normalization", "GaussianNoise", "SpatialDropout1D", "SpatialDropout2D",
            "TimeDistributed", "Attention", "AdditiveAttention", "SeparableConv2D"]

# Keras' layers magmadnn does not provide: what to use instead
_KERAS_INSTEAD = {
    "InputLayer": "Input(shape=...)",
    "ReLU": 'Activation("relu")', "ELU": 'Activation("elu")', "PReLU": "LeakyReLU",
    "Identity": 'Activation("linear")', "Dot": "Lambda on a list of inputs",
    "Masking": "Embedding(mask_zero=True)",
}


def __getattr__(name):
    if name in _KERAS_INSTEAD:
        raise AttributeError(f"magmadnn.layers has no {name} (a Keras layer magmadnn does not provide); use "
                             f"{_KERAS_INSTEAD[name]}")
    if name == "ACTIVATIONS":  # its old name (op-set code uses ACTIVATIONS for the kinds, without linear/softmax)
        import warnings  # noqa: PLC0415

        warnings.warn("magmadnn.layers.ACTIVATIONS is now magmadnn.layers.ACTIVATION_NAMES", DeprecationWarning,
                      stacklevel=2)
        return ACTIVATION_NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# attention
__all__ += ["MultiHeadAttention", "PositionEmbedding"]

# -- sequences (N, T, F): 1-D convolution and pooling, Bidirectional, Lambda
from .bidirectional import Bidirectional  # noqa: E402
from .conv import Conv1D  # noqa: E402
from .lambda_layer import Lambda, lambda_function, register_lambda  # noqa: E402
from .pooling import (  # noqa: E402
    AveragePooling1D,
    GlobalAveragePooling1D,
    GlobalMaxPooling1D,
    MaxPooling1D,
)

MaxPool1D, AvgPool1D, GlobalAvgPool1D, GlobalMaxPool1D = (MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D,
                                                          GlobalMaxPooling1D)  # Keras' short names
__all__ += ["Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D",
            "MaxPool1D", "AvgPool1D", "GlobalAvgPool1D", "GlobalMaxPool1D", "Bidirectional", "Lambda",
            "register_lambda", "lambda_function"]
