"""The old name of :mod:`magmadnn.backend.device.faults`: importing it gives that module (imports pymagma)."""

import sys

from .device import faults as _moved

sys.modules[__name__] = _moved
