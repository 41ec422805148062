"""The backend's tests run on every backend: ``xp`` is host (NumPy), strict (arrays that refuse NumPy), device on
the CPU simulator (``pymagma.simulator``) and device on a real GPU (``gpu`` marker), one module at a time."""

from __future__ import annotations

import pytest

from tests.magmadnn.backends import PARAMS, open_backend


@pytest.fixture(scope="module", params=PARAMS)
def xp(request):
    yield from open_backend(request.param)
