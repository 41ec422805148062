"""NumPy's own FFT tests (``numpy/fft/tests/test_pocketfft.py`` and ``test_helper.py`` of the installed NumPy) run
against pymagma: each file is loaded with ``np.fft`` bound to :mod:`pymagma.fft` (the NumPy face of
``pymagma.array_api.fft``: NumPy data in, computed by cuFFT on the simulated device, NumPy data out), everything
else NumPy's.  Their test classes and functions are collected here, renamed after their file.

Tests that do not apply are skipped with the reason (:data:`NOT_APPLICABLE`: long double, which cuFFT does not
compute); a test that applies and fails is a failure.  The share that passes is what docs/array-api.md reports.
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy
import pytest

import pymagma
from pymagma import simulator

#: node-id fragment -> why the test does not apply to pymagma
NOT_APPLICABLE = {
    "longdouble": "cuFFT computes in single and double precision; long double is a TypeError in pymagma.fft",
}


class _NumpyWithDeviceFFT(types.ModuleType):
    """NumPy, except that ``fft`` is pymagma's."""

    def __getattr__(self, name):
        return getattr(numpy, name)


def _load(file: str) -> types.ModuleType | None:
    spec = importlib.util.find_spec("numpy.fft")
    path = Path(spec.origin).parent / "tests" / file
    if not path.is_file():  # a NumPy installed without its tests
        return None
    proxy = _NumpyWithDeviceFFT("numpy")
    proxy.fft = pymagma.fft
    source = path.read_text().replace("import numpy as np\n", "np = _numpy_with_device_fft\n", 1)
    source = source.replace("from numpy import fft, pi\n", "fft, pi = np.fft, np.pi\n", 1)
    module = types.ModuleType(f"numpy_fft_tests_on_pymagma.{path.stem}")
    module.__file__ = str(path)
    module._numpy_with_device_fft = proxy
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - NumPy's own test file
    return module


def _collect() -> dict:
    found = {}
    for file in ("test_pocketfft.py", "test_helper.py"):
        module = _load(file)
        if module is None:
            continue
        stem = "".join(part.title() for part in Path(file).stem.split("_")[1:])
        for name, obj in vars(module).items():
            if name.startswith("Test") and isinstance(obj, type):
                found[f"Test{stem}{name[4:]}"] = obj
            elif name.startswith("test_") and callable(obj):
                found[f"test_{Path(file).stem[5:]}__{name[5:]}"] = obj
    return found


globals().update(_collect())


@pytest.fixture(autouse=True)
def _on_the_simulator(request):
    for fragment, why in NOT_APPLICABLE.items():
        if fragment in request.node.nodeid:
            pytest.skip(f"does not apply: {why}")
    with simulator.simulated("full"):
        yield


def test_numpys_tests_were_found():
    assert sum(name.startswith("Test") for name in globals()) >= 5 and "TestPocketfftFFT1D" in globals()
