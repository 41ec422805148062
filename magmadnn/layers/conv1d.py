"""Conv1D and the 1-D pooling layers lived here; they are in :mod:`.conv` and :mod:`.pooling` (Keras' topics) and
stay importable from here."""

from .conv import Conv1D
from .pooling import AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D, MaxPooling1D

__all__ = ["Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D"]
