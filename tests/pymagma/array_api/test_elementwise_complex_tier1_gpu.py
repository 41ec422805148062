"""Complex arrays in the first minutes on a GPU (``scripts/gpu_check.sh --tier 1``): MAGMA's c/z routines through
the linalg extension and the complex kernels' data movement, against NumPy. The full set is
test_elementwise_complex_gpu.py."""

from __future__ import annotations

import pytest

from tests.pymagma.array_api.test_elementwise_complex_gpu import (  # noqa: F401  (the same tests, marked for tier 1 here)
    test_complex_data_movement_equals_numpy,
    test_complex_linalg_through_magma_equals_numpy,
)

pytestmark = [pytest.mark.gpu, pytest.mark.tier1]
