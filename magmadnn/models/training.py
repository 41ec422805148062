"""``magmadnn.models.training`` is now :mod:`magmadnn.models.step` (the training step, its hook, the tally) and
:mod:`magmadnn.models.epoch` (``Epoch``); the old name still imports, with a DeprecationWarning."""

import warnings

from . import epoch as _epoch
from . import step as _step

warnings.warn("magmadnn.models.training is now magmadnn.models.step (and magmadnn.models.epoch for Epoch)",
              DeprecationWarning, stacklevel=2)


def __getattr__(name):
    return getattr(_epoch if name == "Epoch" else _step, name)
