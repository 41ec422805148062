"""pymagma.info() and ``python -m pymagma``: providers, paths, versions, devices and what is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pymagma
from pymagma import _libs, runtime
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
    text = str(r)
    assert p.path in text and "cudnn" in text and "missing:" in text
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
    assert set(report) >= {"pymagma", "packages", "magma", "cuda", "nvidia", "missing"}


@pytest.mark.native
def test_module_prints_the_text_report():
    out = _run_module()
    assert out.startswith("pymagma ") and "MAGMA " in out and "missing:" in out


def test_info_is_the_package_level_function():
    assert pymagma.info is collect
