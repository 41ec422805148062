"""PyTorch's default (dynamo) ONNX exporter builds its table of ATen -> ONNX translations (the torchlib registry)
again for every ``torch.onnx.export`` call, reading the source of about 500 onnxscript functions each time: about
0.7 s of CPU per export, a third of a small model's export. These tests export about two hundred models with it, so
the table is built once per opset version for the session and each export gets its own copy (a custom translation
registered on one export's table stays there). The table is a pure function of the opset version and the installed
packages: an export writes the same ModelProto bytes (test_load_torch_defaults.py checks it)."""

from __future__ import annotations

import functools
import sys

import pytest


def torchlib_registry_class():
    """PyTorch's registry class, or None where torch (or its dynamo exporter's registry module) is not there."""
    try:
        from torch.onnx._internal.exporter import _registration  # noqa: PLC0415
    except ImportError:
        return None
    registry = getattr(_registration, "ONNXRegistry", None)
    return registry if isinstance(getattr(registry, "__dict__", {}).get("from_torchlib"), classmethod) else None


def built_once(build):
    """``from_torchlib`` (the unbound function ``build``) with its table built once per opset version, handing out
    copies."""

    @functools.cache
    def table(cls, opset_version):
        return build(cls, opset_version)

    def from_torchlib(cls, *args, **kwargs):
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"opset_version"}:
            return build(cls, *args, **kwargs)  # a form this cache does not know: built as PyTorch builds it
        version = args[0] if args else kwargs.get("opset_version")
        base = table(cls, version) if version is not None else table(cls, cls().opset_version)
        copy = cls()
        copy.__dict__.update(base.__dict__)
        copy.functions = {target: list(decomps) for target, decomps in base.functions.items()}
        return copy

    return from_torchlib


@pytest.fixture(autouse=True, scope="session")
def _torchlib_registry_built_once():
    """Where a test module of this session imported torch, its exporter's registry is built once per opset version
    (a session without torch does not import it for this). Gives PyTorch's own ``from_torchlib`` (None when not
    replaced)."""
    registry = torchlib_registry_class() if "torch" in sys.modules else None
    if registry is None:
        yield None
        return
    original = registry.__dict__["from_torchlib"]
    registry.from_torchlib = classmethod(built_once(original.__func__))
    try:
        yield original.__func__
    finally:
        registry.from_torchlib = original
