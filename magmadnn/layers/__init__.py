"""Layers: parameterised building blocks of models (``magmadnn.layers.Dense(10)``).

Per-sample shapes exclude the batch dimension and use NCHW (``Input((1, 28, 28))``). See :mod:`.base` for how
layers build, name and seed themselves.
"""

from .base import Input, Layer, ShapeMismatchError, SymbolicTensor, layer_class, register
from .conv import AvgPool2D, Conv2D, GlobalAvgPool2D, MaxPool2D
from .core import ACTIVATIONS, Activation, Add, BatchNorm, Dense, Dropout, Flatten

GlobalAvgPool = GlobalAvgPool2D
BatchNormalization = BatchNorm

__all__ = [
    "Layer", "Input", "SymbolicTensor", "ShapeMismatchError", "layer_class", "register", "ACTIVATIONS",
    "Dense", "Activation", "Dropout", "Flatten", "BatchNorm", "BatchNormalization", "Add",
    "Conv2D", "MaxPool2D", "AvgPool2D", "GlobalAvgPool2D", "GlobalAvgPool",
]
