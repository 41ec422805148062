"""``magmadnn.models.trainer`` is now :mod:`magmadnn.models.fitting` (compile, fit, train_on_batch); the old name
still imports, with a DeprecationWarning."""

import warnings

from . import fitting as _new

warnings.warn("magmadnn.models.trainer is now magmadnn.models.fitting", DeprecationWarning, stacklevel=2)


def __getattr__(name):
    return getattr(_new, name)
