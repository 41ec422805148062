"""Softmax and LogSoftmax lived here; they are in :mod:`.activations` (Keras' topic) and stay importable from
here."""

from .activations import LogSoftmax, Softmax

__all__ = ["Softmax", "LogSoftmax"]
