"""The FFT tests of test_fft.py and NumPy's own FFT tests (test_fft_numpy_suite.py) on a GPU: real cuFFT, real
streams and graphs.  The tests that give C2R (irfft, irfftn, hfft) random half spectra are left to the simulator:
cuFFT documents C2R for Hermitian input only, and NumPy's round trips (irfft of rfft, hfft of ihfft) run here."""

from __future__ import annotations

import pytest

from tests.pymagma.test_fft import *  # noqa: F403 - the same tests, on the device
from tests.pymagma.test_fft_numpy_suite import *  # noqa: F403
from tests.pymagma.test_fft_numpy_suite import NOT_APPLICABLE

pytestmark = pytest.mark.gpu
C2R_OF_RANDOM_INPUT = ("irfft", "irfftn", "hfft")


@pytest.fixture
def device(request):
    """The GPU (no simulator): tests that read the simulated cuFFT's records skip."""
    params = getattr(request.node, "callspec", None)
    if params is not None and params.params.get("fn") in C2R_OF_RANDOM_INPUT and "never_modified" not in \
            request.node.name:
        pytest.skip("C2R of a non-Hermitian half spectrum: undefined in cuFFT's documentation (simulator only)")
    return None


@pytest.fixture(autouse=True)
def _on_the_simulator(request):  # NumPy's tests, here on the GPU
    for fragment, why in NOT_APPLICABLE.items():
        if fragment in request.node.nodeid:
            pytest.skip(f"does not apply: {why}")
    yield


del test_null_device_checks_every_call_and_computes_nothing  # noqa: F821 - the simulator's own mode
