"""The FFT's first-minutes checks on a GPU (``scripts/gpu_check.sh --tier 1``): one complex and one real transform
of a strided batch, against numpy.fft, through real cuFFT on the MAGMA queue's stream. The full set is
test_fft_gpu.py (tier 2)."""

from __future__ import annotations

import numpy as np
import pytest

import pymagma
from tests.pymagma.test_fft import close, values

pytestmark = [pytest.mark.gpu, pytest.mark.tier1]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_batched_fft_along_a_strided_axis_matches_numpy(dtype):
    x = values(np.random.default_rng(0), (16, 48, 8), dtype)
    got = pymagma.fft.fftn(pymagma.asarray(x), axes=(0, 1), norm="ortho")
    close(got, np.fft.fftn(x, axes=(0, 1), norm="ortho").astype(dtype))


def test_rfft_round_trip_matches_numpy():
    x = values(np.random.default_rng(1), (32, 100), np.float32)
    spectrum = pymagma.fft.rfft(pymagma.asarray(x))
    close(spectrum, np.fft.rfft(x).astype(np.complex64))
    close(pymagma.fft.irfft(spectrum, n=100), x)
