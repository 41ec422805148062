"""A library's ``bind`` (the simulated MAGMA's and the real binding's ``NativeLibrary``): a routine bound before is
found by one C-level look-up, and a routine the library does not export (hidden families, another export list, a
missing symbol) is refused every time, however it was bound before and however the hidden set changed."""

from __future__ import annotations

import ctypes

import pytest

from pymagma import _ffi, _magma, simulator
from pymagma.errors import MissingSymbolError, NotSimulatedError


@pytest.fixture
def lib():
    with simulator.simulated("full") as sim:
        sim.magma.hidden = set()
        yield sim.magma
        sim.magma.hidden = set()


def _refused(lib, name: str) -> bool:
    try:
        lib.bind(name)
    except MissingSymbolError:
        return True
    return False


def test_a_bound_routine_is_found_without_a_python_frame(lib):
    fn = lib.bind("magma_sgemm")
    assert type(lib.bind).__name__ == "builtin_function_or_method"
    assert lib.bind("magma_sgemm") is fn and lib.magma_sgemm is fn and type(lib).bind(lib, "magma_sgemm") is fn


@pytest.mark.parametrize("change", ["add", "assign", "ior", "update"])
def test_hiding_a_family_in_any_way_refuses_its_routines_every_time(lib, change):
    fn, other = lib.bind("magma_sgemm"), lib.bind("magma_sgemv")
    if change == "add":
        lib.hidden.add("magma_?gemm")
    elif change == "assign":
        lib.hidden = {"magma_?gemm"}
    elif change == "ior":
        lib.hidden |= {"magma_?gemm"}
    else:
        lib.hidden.update(["magma_?gemm"])
    for _ in range(2):
        assert _refused(lib, "magma_sgemm") and _refused(lib, "magma_dgemm") and not lib.has("magma_sgemm")
        with pytest.raises(MissingSymbolError, match="hidden"):
            assert lib.magma_sgemm is None
        assert lib.bind("magma_sgemv") is other  # another family stays bound
    lib.hidden.discard("magma_?gemm")
    assert lib.bind("magma_sgemm") is fn  # the same checked callable again
    lib.hidden.add("magma_?gemm")
    lib.hidden.clear()
    assert lib.bind("magma_sgemm") is fn
    lib.hidden -= {"nothing"}
    lib.hidden.add("magma_?gemm")
    lib.hidden.remove("magma_?gemm")
    assert lib.bind("magma_sgemm") is fn


def test_another_export_list_refuses_what_it_does_not_export(lib):
    fn = lib.bind("magma_sgemm")
    lib.exports = frozenset({"magma_sgemv"})
    try:
        for _ in range(2):
            assert _refused(lib, "magma_sgemm")
        assert not _refused(lib, "magma_sgemv")
    finally:
        lib.exports = None
    assert lib.bind("magma_sgemm") is fn


def test_unknown_and_unmodelled_routines_are_refused_every_time(lib):
    for _ in range(2):
        with pytest.raises(AttributeError, match="no prototype"):
            lib.bind("magma_no_such_routine")
    unmodelled = [n for n in _magma.SIGNATURES if not lib.modelled(n)]
    for name in unmodelled[:1] * 2:
        with pytest.raises(NotSimulatedError):
            lib.bind(name)


def test_the_real_binding_binds_once_and_refuses_a_missing_symbol_every_time():
    calls = []

    def loader():
        calls.append("load")
        return ctypes.CDLL(None)  # the process's own symbols (libc's strlen)

    native = _ffi.NativeLibrary("libc", loader, {"strlen": (ctypes.c_size_t, (ctypes.c_char_p,)),
                                                 "pymagma_no_such_symbol": (None, ())})
    fn = native.bind("strlen")
    assert fn(b"four") == 4 and native.bind("strlen") is fn and native.strlen is fn and calls == ["load"]
    assert type(native.bind).__name__ == "builtin_function_or_method"
    for _ in range(2):
        with pytest.raises(MissingSymbolError, match="pymagma_no_such_symbol"):
            native.bind("pymagma_no_such_symbol")
        with pytest.raises(AttributeError, match="no prototype"):
            native.bind("printf")
    assert native.has("strlen") and not native.has("pymagma_no_such_symbol")
    assert native.missing() == ["pymagma_no_such_symbol"]
