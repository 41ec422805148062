"""The backend's tests run on every backend: ``xp`` is host (NumPy), strict (arrays that refuse NumPy), device on
the CPU simulator (``pymagma.simulator``) and device on a real GPU (``gpu`` marker), one module at a time."""

from __future__ import annotations

import pytest

from tests.magmadnn.backends import PARAMS, open_backend


@pytest.fixture(scope="module", params=PARAMS)
def xp(request):
    yield from open_backend(request.param)


@pytest.fixture
def sim():
    """pymagma's simulator, every routine modelled, for one test."""
    from pymagma import simulator  # noqa: PLC0415

    with simulator.simulated("full") as s:
        yield s


@pytest.fixture
def dev(sim):
    """The device backend on :func:`sim`."""
    from magmadnn import backend  # noqa: PLC0415

    return backend.get("gpu")
