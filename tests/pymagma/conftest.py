"""pymagma test configuration: no test may leave the simulator in another state than it found it (a leaked
simulator would quietly turn the real-library tests that follow into simulated ones)."""

from __future__ import annotations

import pytest

from pymagma import simulator


@pytest.fixture(autouse=True)
def _simulator_state_is_restored():
    before = simulator.mode()
    yield
    after = simulator.mode()
    if after != before:
        simulator.disable()
        if before is not None:
            simulator.enable(before)
        pytest.fail(f"the test left the simulator {after or 'off'} (it was {before or 'off'})")
