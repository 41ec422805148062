"""pymagma.info() and ``python -m pymagma``: providers, paths, versions, devices and what is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pymagma
from pymagma import _libs, linalg, runtime, simulator
from pymagma.errors import LibraryNotFoundError
from pymagma.info import info as collect


@pytest.mark.native
def test_report_names_the_real_providers():
    r = collect()
    p = _libs.find_magma()
    assert r["magma"]["found"] and r["magma"]["path"] == p.path and r["magma"]["source"] == p.source
    assert r["magma"]["version"].startswith("2.")
    if p.partial:
        assert "magma_?potrf_gpu" in r["magma"]["missing_routines"]
        assert any(m["what"].startswith("full MAGMA") and "PYMAGMA_MAGMA_LIBRARY" in m["how"] for m in r["missing"])
    assert r["nvidia"]["cudnn"]["found"] and r["nvidia"]["cudnn"]["version"].startswith("9.")
    assert r["nvidia"]["cublas"]["table"] == {"declared": 4, "missing": []}  # the half gemm's cuBLAS functions
    assert r["nvidia"]["cufft"]["table"] == {"declared": 11, "missing": []}  # plans, stream, the six executions
    assert r["nvidia"]["cufft"]["version"].split(".")[0] in ("11", "12", "13")
    text = str(r)
    assert p.path in text and "cudnn" in text and "missing:" in text and "FFT table: 11 of 11" in text
    if runtime.device_count() == 0:
        assert r["cuda"]["device_count"] == 0
        assert any(m["what"] == "a CUDA device" for m in r["missing"])


def test_missing_nvidia_library_is_reported_with_its_install_command(monkeypatch):
    real = _libs.load_nvidia

    def fake(name):
        if name == "cudnn":
            raise LibraryNotFoundError("no cudnn")
        return real(name)

    monkeypatch.setattr(_libs, "load_nvidia", fake)
    r = collect()
    assert r["nvidia"]["cudnn"] == {"found": False}
    assert {"what": "cudnn", "how": _libs.NVIDIA_REMEDIES["cudnn"]} in r["missing"]
    assert "cudnn: not found" in str(r)


def _run_module(*args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "pymagma", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=True).stdout


def test_module_reports_json_and_a_missing_magma(tmp_path):
    missing = str(tmp_path / "nowhere" / "libmagma.so")
    report = json.loads(_run_module("--json", env_extra={"PYMAGMA_MAGMA_LIBRARY": missing}))
    assert report["magma"]["found"] is False
    assert missing in report["magma"]["error"] and "not a file" in report["magma"]["error"]
    assert any(m["what"] == "MAGMA" for m in report["missing"])
    assert set(report) >= {"pymagma", "packages", "magma", "linalg", "cuda", "nvidia", "missing"}
    assert missing in report["linalg"]["error"]  # reported, not raised
    text = _run_module(env_extra={"PYMAGMA_MAGMA_LIBRARY": missing})
    assert "linalg paths (method='auto'): unknown" in text and "MAGMA: not found" in text


@pytest.mark.parametrize("mode", ["full", "partial"])
def test_report_shows_each_linalg_functions_path_on_the_simulated_exports(mode):
    try:
        _libs.magma_provider()
    except LibraryNotFoundError:
        pytest.skip("the simulator's partial mode exports what a found MAGMA provider exports")
    with simulator.simulated(mode) as simulation:
        r = collect()
        expected = linalg.paths(np.float64)
    section = r["linalg"]
    assert section["float64"] == expected and set(expected) >= {"solve", "svd", "norm(ord=2/-2/'nuc')", "multi_dot"}
    assert section["differs"] == {}  # MAGMA exports the LAPACK drivers in every precision or in none
    if mode == "full":
        assert set(expected.values()) == {"native"}
    else:
        assert expected["cholesky"] == ("native" if simulation.magma.has("magma_dpotrf_gpu") else "hybrid")
    lines = str(r).splitlines()
    start = lines.index("linalg paths (method='auto', float64):")
    for kind in ("native", "hybrid", "host"):
        fns = [fn for fn, path in expected.items() if path == kind]
        assert (f"  {kind}: " + ", ".join(fns) in lines) == bool(fns), kind
    assert "  float32, complex128, complex64: the same" in lines[start:]
    assert json.loads(json.dumps(r, default=str))["linalg"] == section


def test_report_names_the_dtypes_whose_paths_differ(monkeypatch):
    def fake(dtype=np.float64):
        host = np.dtype(dtype) == np.complex64
        return {"solve": "native", "eig": "host" if host else "native"}

    monkeypatch.setattr(linalg, "paths", fake)
    r = collect()
    assert r["linalg"] == {"float64": {"solve": "native", "eig": "native"}, "differs": {"complex64": {"eig": "host"}}}
    text = str(r)
    assert "  native: solve, eig\n  complex64 differs: eig host" in text and "the same" not in text


@pytest.mark.native
def test_module_prints_the_text_report():
    out = _run_module()
    assert out.startswith("pymagma ") and "MAGMA " in out and "missing:" in out


def test_info_is_the_package_level_function():
    assert pymagma.info is collect
