"""A pytest plugin that points scikit-learn's own array-API tests at ``pymagma.array_api`` on the simulator.

scikit-learn parametrizes its array-API tests over ``yield_namespace_device_dtype_combinations()`` (NumPy,
array-api-strict, CuPy, PyTorch); this plugin replaces that list, before the test modules are imported, with
pymagma's namespace in float64 and float32.  Used by ``scripts/sklearn_array_api.sh``; run the ids that contain
``pymagma``."""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")
os.environ.setdefault("PYMAGMA_SIMULATOR", "1")

NAMESPACE = "pymagma.array_api"


def _namespaces(include_numpy_namespaces=True):
    yield NAMESPACE


def _combinations(include_numpy_namespaces=True):
    for dtype in ("float64", "float32"):
        yield NAMESPACE, None, dtype


def pytest_configure(config):
    from sklearn.utils import _array_api

    _array_api.yield_namespaces = _namespaces
    _array_api.yield_namespace_device_dtype_combinations = _combinations
