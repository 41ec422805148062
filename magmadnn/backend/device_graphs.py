"""The old name of :mod:`magmadnn.backend.device.graphs`: importing it gives that module (imports pymagma)."""

import sys

from .device import graphs as _moved

sys.modules[__name__] = _moved
