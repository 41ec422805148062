"""``magmadnn.models.graphed`` is now :mod:`magmadnn.models.replay` (CUDA-graph replay, ``compile(graph=True)``);
the old name still imports, with a DeprecationWarning."""

import warnings

from . import replay as _new

warnings.warn("magmadnn.models.graphed is now magmadnn.models.replay", DeprecationWarning, stacklevel=2)


def __getattr__(name):
    return getattr(_new, name)
