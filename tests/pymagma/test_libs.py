"""MAGMA discovery: the documented search order and every "not found" message, with real files in temp dirs."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from pymagma import _libs
from pymagma.errors import LibraryNotFoundError


@pytest.fixture
def no_loader(monkeypatch):
    """The dynamic loader's search finds nothing (the machine may or may not have a system libmagma)."""
    monkeypatch.setattr(_libs.ctypes.util, "find_library", lambda name: None)


@pytest.fixture
def no_torch(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))


def make_lib(directory, name="libmagma.so"):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"\x7fELF not really")
    return str(path)


def test_explicit_file_wins_over_everything(tmp_path):
    explicit = make_lib(tmp_path / "explicit", "custom_magma.so")
    root_lib = make_lib(tmp_path / "root" / "lib")
    assert root_lib
    env = {"PYMAGMA_MAGMA_LIBRARY": explicit, "MAGMA_ROOT": str(tmp_path / "root"), "CONDA_PREFIX": str(tmp_path)}
    p = _libs.find_magma(env)
    assert (p.path, p.source, p.partial) == (explicit, "PYMAGMA_MAGMA_LIBRARY", False)


@pytest.mark.parametrize("target", ["missing.so", "a_directory"])
def test_explicit_setting_that_is_not_a_file_is_an_error(tmp_path, target):
    (tmp_path / "a_directory").mkdir()
    bad = str(tmp_path / target)
    make_lib(tmp_path / "root" / "lib")
    with pytest.raises(LibraryNotFoundError) as err:
        _libs.find_magma({"PYMAGMA_MAGMA_LIBRARY": bad, "MAGMA_ROOT": str(tmp_path / "root")})
    assert "PYMAGMA_MAGMA_LIBRARY" in str(err.value) and bad in str(err.value) and "not a file" in str(err.value)


@pytest.mark.parametrize("var", _libs.MAGMA_DIR_VARIABLES)
@pytest.mark.parametrize("sub", ["lib", "lib64"])
def test_prefix_variables_search_lib_and_lib64(tmp_path, var, sub):
    path = make_lib(tmp_path / sub)
    p = _libs.find_magma({var: str(tmp_path)})
    assert (p.path, p.source) == (path, var)


def test_prefix_variables_in_order(tmp_path):
    home = make_lib(tmp_path / "home" / "lib")
    make_lib(tmp_path / "dir" / "lib")
    env = {"MAGMA_ROOT": str(tmp_path / "empty_root"), "MAGMA_HOME": str(tmp_path / "home"),
           "MAGMA_DIR": str(tmp_path / "dir")}
    assert _libs.find_magma(env).path == home  # MAGMA_ROOT has no library, so MAGMA_HOME is next


def test_conda_prefix_after_magma_variables(tmp_path):
    conda = make_lib(tmp_path / "conda" / "lib")
    p = _libs.find_magma({"MAGMA_ROOT": str(tmp_path / "nothing"), "CONDA_PREFIX": str(tmp_path / "conda")})
    assert (p.path, p.source) == (conda, "CONDA_PREFIX")
    root = make_lib(tmp_path / "root" / "lib64")
    assert _libs.find_magma({"MAGMA_ROOT": str(tmp_path / "root"), "CONDA_PREFIX": str(tmp_path / "conda")}).path \
        == root


def test_loader_search_before_torch(tmp_path, monkeypatch):
    monkeypatch.setattr(_libs.ctypes.util, "find_library", lambda name: "libmagma.so.2" if name == "magma" else None)
    p = _libs.find_magma({"CONDA_PREFIX": str(tmp_path)})
    assert (p.path, p.source, p.partial) == ("libmagma.so.2", "loader", False)


def _fake_torch(root, with_lib=True):
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('discovery must not import torch')\n")
    return make_lib(pkg / "lib", _libs.TORCH_MAGMA_FILE) if with_lib else None


def test_torch_bundled_magma_is_found_without_importing_torch(tmp_path, monkeypatch, no_loader):
    lib = _fake_torch(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    p = _libs.find_magma({})
    assert (p.path, p.source, p.partial) == (lib, "torch", True)
    assert "potrf" in p.note and "getrf" in p.note
    assert "torch" not in sys.modules


def test_not_found_message_lists_every_place(tmp_path, monkeypatch, no_loader):
    _fake_torch(tmp_path, with_lib=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    env = {"MAGMA_ROOT": str(tmp_path / "r"), "MAGMA_HOME": str(tmp_path / "h"), "MAGMA_DIR": str(tmp_path / "d"),
           "CONDA_PREFIX": str(tmp_path / "c")}
    with pytest.raises(LibraryNotFoundError) as err:
        _libs.find_magma(env)
    msg = str(err.value)
    for expected in ("MAGMA_ROOT=", "MAGMA_HOME=", "MAGMA_DIR=", "CONDA_PREFIX=", "dynamic loader",
                     _libs.TORCH_MAGMA_FILE, "CPU-only", "PYMAGMA_MAGMA_LIBRARY", "pip install torch"):
        assert expected in msg, expected


def test_not_found_without_torch(no_loader, no_torch):
    with pytest.raises(LibraryNotFoundError) as err:
        _libs.find_magma({})
    assert "torch: not installed" in str(err.value) and "conda install" in str(err.value)


def test_unloadable_file_is_reported(tmp_path, monkeypatch):
    bad = make_lib(tmp_path)
    monkeypatch.setenv("PYMAGMA_MAGMA_LIBRARY", bad)
    _libs.magma_provider.cache_clear()
    _libs.load_magma.cache_clear()
    try:
        with pytest.raises(LibraryNotFoundError) as err:
            _libs.load_magma()
        assert bad in str(err.value) and "does not load" in str(err.value)
    finally:
        _libs.magma_provider.cache_clear()
        _libs.load_magma.cache_clear()


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_ilp64_switch(value, expected):
    assert _libs.magma_ilp64({"PYMAGMA_ILP64": value}) is expected
    assert _libs.magma_ilp64({}) is False


@pytest.mark.native
def test_real_provider_is_found_and_loads():
    p = _libs.find_magma()
    lib = _libs.load_magma()
    assert hasattr(lib, "magma_version")
    assert p.source in ("PYMAGMA_MAGMA_LIBRARY", "MAGMA_ROOT", "MAGMA_HOME", "MAGMA_DIR", "CONDA_PREFIX", "loader",
                        "torch")
    assert p.partial == (p.source == "torch")
