"""The op set as an interface: every backend implements exactly the ops of :mod:`magmadnn.backend.ops`,
``ops.check`` names what a backend lacks, and ``backend.get`` resolves the backends' names."""

from __future__ import annotations

import pytest

from magmadnn import backend
from magmadnn.backend import ops
from tests.magmadnn.backends import HOST


def test_backend_implements_exactly_the_op_set(xp):
    assert ops.problems(xp) == []


def test_the_op_set_check_names_what_is_wrong():
    import types

    partial = types.ModuleType("partial_backend")
    partial.name = "partial"
    partial.add = lambda x, y: None
    partial.extra_op = lambda a: a
    found = "\n".join(ops.problems(partial))
    assert "missing op 'subtract'" in found and "op 'add' has signature (x, y)" in found
    assert "'extra_op' is not in the op set" in found
    with pytest.raises(TypeError, match="does not implement the op set"):
        ops.check(partial)
    partial.flat_pack = lambda arrays, out: None  # an optional op, when a backend has it, has its signature
    assert "optional op 'flat_pack' has signature (arrays, out)" in "\n".join(ops.problems(partial))


def test_backend_names(monkeypatch):
    assert backend.get() is HOST and backend.get("host") is HOST and HOST.name == "host"
    assert backend.get(HOST) is HOST
    monkeypatch.setenv("MAGMADNN_BACKEND", "host")
    assert backend.get() is HOST
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        backend.get("tpu")
    with pytest.raises(TypeError, match="backend name"):
        backend.get(3)
