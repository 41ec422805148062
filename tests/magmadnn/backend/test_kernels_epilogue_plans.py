"""The bias + activation epilogue's plans (kernels/epilogue.py): a call's checked plan kept by its arguments, its
checks' errors never kept (a bad call is refused each time, also after a good call of the same shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from magmadnn.backend.device import kernels
from magmadnn.backend.device.kernels import epilogue
from pymagma import simulator


def test_bad_calls_are_refused_every_time_and_good_ones_planned_once():
    import pymagma

    with simulator.simulated("null"):
        x, good, bad = (pymagma.zeros(s, np.float32) for s in ((2, 3), (3,), (4,)))
        for _ in range(2):
            with pytest.raises(ValueError, match="bias must have shape"):
                kernels.bias_activation(x, bad, "relu")
            with pytest.raises(ValueError, match="unknown activation"):
                kernels.bias_activation(x, good, "cube")
            with pytest.raises(ValueError, match="unknown activation"):
                kernels.bias_activation_backward(x, None, x, "cube")
            with pytest.raises(ValueError, match="needs"):  # gelu's gradient reads z
                kernels.bias_activation_backward(x, None, x, "gelu")
        epilogue._FORWARD_PLANS.clear()
        y, z = kernels.bias_activation(x, good, "relu")
        assert z is None and y.shape == (2, 3) and len(epilogue._FORWARD_PLANS) == 1
        kernels.bias_activation(pymagma.zeros((2, 3), np.float32), good, "relu")
        assert len(epilogue._FORWARD_PLANS) == 1  # the same arguments: the same plan
        with pytest.raises(ValueError, match="bias must have shape"):  # x's shape planned, the bias' refused
            kernels.bias_activation(pymagma.zeros((2, 3), np.float32), bad, "relu")
        dx, db = kernels.bias_activation_backward(x, None, y, "relu")
        assert dx.shape == (2, 3) and db.shape == (3,)
